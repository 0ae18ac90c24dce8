/* Hostile: a correct kernel that sleeps 0.9 s in every call: just under the call timeout the driver
 * gives (1 s), so no call hangs, yet the run cannot finish within its budget (4 s). The gate must stop
 * at the budget (plus at most one call timeout) and fail: its systematic checks did not all run.
 * Expect: exit 1; mentions: budget
 * Args: --call-timeout 1 --budget-seconds 4
 */
#include <errno.h>
#include <time.h>

#define MK_KERNEL_NAME mk_rope_apply
#include "../mutants/mutant_common.h"

RC_EXPORT int rc_rope_apply(const rc_rope_args* a) {
  struct timespec left = {0, 900000000};
  while (nanosleep(&left, &left) != 0 && errno == EINTR) {
  }
  return mk_rope_apply(a);
}
