/* Correct, with a bounded cache: ok_double's arithmetic, for positions 0 .. 4095 only -- a kernel whose cos/sin
 * cache has max_position_embeddings = 4096 rows and declines (RC_UNSUPPORTED) every call with a position outside
 * it. The gate must pass it under its default options, the rows kept within the positions it takes. */
#include <stdint.h>
#include <ropecheck/kernel_abi.h>
static int ok_outside_cache(const rc_rope_args* a) {
  for (uint64_t k = 0; k < a->n_tokens; ++k)
    if (a->positions[k] < 0 || a->positions[k] >= 4096) return 1;
  return 0;
}
#define MK_NO_KERNEL 1
#define MK_DOUBLE_KERNEL 1
#define MK_DOUBLE_DECLINE(a) ok_outside_cache(a)
#include "mutant_common.h"
