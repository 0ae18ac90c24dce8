/* Hostile: a correct kernel that calls exit(0) in the 5th call of its process, after writing a correct
 * output. The process that calls it ends with status 0 in the middle of the run: a gate that runs
 * many calls in one process must notice that the call never returned (and must not take the 0 for
 * its own success).
 * Expect: exit 1; mentions: exited the process (status 0)
 */
#define MK_KERNEL_NAME mk_rope_apply
#include "../mutants/mutant_common.h"

RC_EXPORT int rc_rope_apply(const rc_rope_args* a) {
  static unsigned calls;
  const int rc = mk_rope_apply(a);
  if (++calls == 5) exit(0);
  return rc;
}
