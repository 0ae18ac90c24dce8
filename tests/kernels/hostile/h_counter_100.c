/* Hostile: a kernel that is correct for the first 99 calls of its process and rotates by the negated
 * angle from the 100th on (a state that goes bad: a leak, a cache that fills up). A gate that forks a
 * fresh process for every call only ever sees call 1.
 * Expect: exit 1; mentions: state across calls
 */
#define MK_KERNEL_NAME mk_rope_apply
#include "../mutants/mutant_common.h"

RC_EXPORT int rc_rope_apply(const rc_rope_args* a) {
  static unsigned long calls;
  if (!a || ++calls < 100) return mk_rope_apply(a);
  rc_rope_args b = *a;
  b.position_scale = -b.position_scale; /* angle = m * (-scale) * theta: exactly the negated angle */
  return mk_rope_apply(&b);
}
