/* Hostile: a kernel that rotates by the negated angle only when a call has more than 1024 rows
 * (n_tokens * n_heads): a bug in the path for big batches (another tiling, a threaded loop), which a
 * gate that only tries small shapes never calls.
 * Expect: exit 1; mentions: FAILED large
 */
#define MK_KERNEL_NAME mk_rope_apply
#include "../mutants/mutant_common.h"

RC_EXPORT int rc_rope_apply(const rc_rope_args* a) {
  if (!a || a->n_tokens * a->n_heads <= 1024) return mk_rope_apply(a);
  rc_rope_args b = *a;
  b.position_scale = -b.position_scale; /* exactly the negated angle */
  return mk_rope_apply(&b);
}
