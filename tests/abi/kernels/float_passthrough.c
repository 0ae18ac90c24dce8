/* A v1 kernel written like the v1 example (an error code for any version but the header's), whose
 * pass-through elements (and pairs at angle 0) go through a float conversion: load to float, store back.
 * A signalling NaN there comes out quiet (f16 0x7c01 -> 0x7e01): the same value, other bits. The default
 * contract (identity=values) allows it; identity=bits does not. */
#include <ropecheck/kernel_abi.h>

#define PASS_THROUGH_FLOAT
#include "v1_rope_body.h"

__attribute__((visibility("default"))) int rc_rope_apply(const rc_rope_args* a) {
  if (!a || a->abi_version != ROPECHECK_ABI_VERSION) return 2;
  return abi_rope_v1(a);
}
