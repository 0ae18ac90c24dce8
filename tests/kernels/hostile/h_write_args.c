/* Hostile: a correct kernel that, after computing its output, casts away the const of the caller's
 * argument struct and changes its base.
 * Expect: exit 1; mentions: args struct
 */
#define MK_KERNEL_NAME mk_rope_apply
#include "../mutants/mutant_common.h"

RC_EXPORT int rc_rope_apply(const rc_rope_args* a) {
  const int rc = mk_rope_apply(a);
  if (rc == RC_OK) ((rc_rope_args*)a)->base += 1;
  return rc;
}
