/* Hostile: a correct kernel whose first call, after computing its output, closes every descriptor
 * from 3 to 1023: whatever the gate uses to talk to the process running the calls (a pipe, a socket,
 * a memfd) is gone. The gate must notice, not wait forever nor pass.
 * Expect: exit 1; mentions: control socket
 */
#include <unistd.h>

#define MK_KERNEL_NAME mk_rope_apply
#include "../mutants/mutant_common.h"

RC_EXPORT int rc_rope_apply(const rc_rope_args* a) {
  static int done;
  const int rc = mk_rope_apply(a);
  if (!done) {
    done = 1;
    for (int fd = 3; fd < 1024; ++fd) close(fd);
  }
  return rc;
}
