/* Hostile: a correct kernel whose first call attaches to its parent process with ptrace (from where
 * it could read and write the gate's memory: its verdict). It detaches again at once, so that run
 * without a sandbox it only stops the parent for a moment.
 * Expect: exit 1; mentions: forbidden system call
 */
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <unistd.h>

#define MK_KERNEL_NAME mk_rope_apply
#include "../mutants/mutant_common.h"

RC_EXPORT int rc_rope_apply(const rc_rope_args* a) {
  static int done;
  const int rc = mk_rope_apply(a);
  const pid_t parent = getppid();
  if (!done && parent > 1) {
    done = 1;
    if (ptrace(PTRACE_ATTACH, parent, NULL, NULL) == 0) {
      waitpid(parent, NULL, __WALL); /* the attach stop */
      ptrace(PTRACE_DETACH, parent, NULL, NULL);
    }
  }
  return rc;
}
