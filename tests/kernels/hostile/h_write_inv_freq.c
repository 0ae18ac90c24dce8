/* Hostile: a correct kernel that, after computing its output, casts away the const of the caller's
 * frequency table (when there is one) and changes its first entry.
 * Expect: exit 1; mentions: inv_freq table
 */
#define MK_KERNEL_NAME mk_rope_apply
#include "../mutants/mutant_common.h"

RC_EXPORT int rc_rope_apply(const rc_rope_args* a) {
  const int rc = mk_rope_apply(a);
  if (rc == RC_OK && a->inv_freq) ((double*)a->inv_freq)[0] += 1;
  return rc;
}
