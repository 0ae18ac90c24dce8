/* Planted bug: a truncating bf16 conversion in the scalar tail loop only. The kernel's vector loop handles the
 * pairs of a head eight at a time and rounds its bf16 stores to nearest even; the pairs left over (pair index
 * i >= 8 * floor(pairs / 8), none when the pair count is a multiple of 8) go through a scalar tail whose
 * conversion keeps the high 16 bits of the f32 (`(uint16_t)(bits >> 16)`), i.e. truncates toward zero.
 * Otherwise ok_double. The gate must fail it at bf16 outputs with rotary_dim/2 not a multiple of 8, naming
 * truncation in the tail pairs (not "arithmetic at f16 precision": issue 23). */
#define MK_NO_KERNEL 1
#define MK_DOUBLE_KERNEL 1
#include <stddef.h>
#include <stdint.h>
static void mk_tail_store(uint32_t dt, void* p, size_t k, float v, uint32_t i, uint32_t np);
#define MK_DOUBLE_STORE(dt, p, k, v, i, np) mk_tail_store(dt, p, k, v, i, np)
#include "mutant_common.h"
static void mk_tail_store(uint32_t dt, void* p, size_t k, float v, uint32_t i, uint32_t np) {
  if (dt == RC_BF16 && i >= np / 8 * 8 && v == v) {
    const uint16_t h = (uint16_t)(mk_f32_bits(v) >> 16); /* BUG: the tail's conversion truncates */
    memcpy((char*)p + 2 * k, &h, 2);
    return;
  }
  mk_store(dt, p, k, v);
}
