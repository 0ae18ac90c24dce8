/* Hostile: a kernel that rotates by the negated angle only when head_dim > 256: a bug in the path for
 * wide heads, which a gate that only tries heads up to 256 never calls.
 * Expect: exit 1; mentions: FAILED large
 */
#define MK_KERNEL_NAME mk_rope_apply
#include "../mutants/mutant_common.h"

RC_EXPORT int rc_rope_apply(const rc_rope_args* a) {
  if (!a || a->head_dim <= 256) return mk_rope_apply(a);
  rc_rope_args b = *a;
  b.position_scale = -b.position_scale; /* exactly the negated angle */
  return mk_rope_apply(&b);
}
