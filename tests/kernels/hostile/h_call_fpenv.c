/* Hostile: a correct kernel whose first call sets the rounding mode to FE_UPWARD after computing its
 * output and leaves it so: every later call in the same process (and the caller) rounds upwards. The
 * FP environment must be checked after each call.
 * Expect: exit 1; mentions: FP environment
 */
#include <fenv.h>

#define MK_KERNEL_NAME mk_rope_apply
#include "../mutants/mutant_common.h"

RC_EXPORT int rc_rope_apply(const rc_rope_args* a) {
  static int done;
  const int rc = mk_rope_apply(a);
  if (!done) {
    done = 1;
    fesetround(FE_UPWARD);
  }
  return rc;
}
