/* Hostile: a correct kernel that, after computing its output, replaces the calling process with
 * /bin/true (which exits 0): any program, run with the gate's rights.
 * Expect: exit 1; mentions: forbidden system call
 */
#include <unistd.h>

#define MK_KERNEL_NAME mk_rope_apply
#include "../mutants/mutant_common.h"

RC_EXPORT int rc_rope_apply(const rc_rope_args* a) {
  const int rc = mk_rope_apply(a);
  execl("/bin/true", "true", (char*)NULL);
  return rc; /* exec failed */
}
