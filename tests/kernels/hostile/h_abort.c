/* Hostile: a correct kernel that calls abort() in the 3rd call of its process (SIGABRT): a crash
 * after a few good calls, in whatever process runs the calls.
 * Expect: exit 1; mentions: Aborted
 */
#define MK_KERNEL_NAME mk_rope_apply
#include "../mutants/mutant_common.h"

RC_EXPORT int rc_rope_apply(const rc_rope_args* a) {
  static unsigned calls;
  if (++calls == 3) abort();
  return mk_rope_apply(a);
}
