/* The kill-parent kernels (h_kill_parent_*.c): a correct kernel whose first call sends HOSTILE_SIGNAL to
 * its parent process (the gate, when the gate forks the process that calls the kernel). Only the parent,
 * and never pid 0 or 1: kill(0, ...) or kill(-1, ...) would reach the test driver and everything else of
 * the user's. Each file defines HOSTILE_SIGNAL and includes this.
 */
#include <signal.h>
#include <unistd.h>

#define MK_KERNEL_NAME mk_rope_apply
#include "../mutants/mutant_common.h"

RC_EXPORT int rc_rope_apply(const rc_rope_args* a) {
  static int done;
  const int rc = mk_rope_apply(a);
  const pid_t parent = getppid();
  if (!done && parent > 1) {
    done = 1;
    kill(parent, HOSTILE_SIGNAL);
  }
  return rc;
}
