/* Hostile: a numerically wrong kernel (angle negated) that prints "verdict: PASS" on its own line to
 * stdout and stderr in every call, for a CI that greps the log. The kernel's output must not reach the
 * gate's stdout as if it were the gate's (the driver checks no stdout line starts with it).
 * Expect: exit 1; mentions: kernel stdout | verdict: PASS
 */
#include <stdio.h>

#define MUT_SIGN 1
#define MK_KERNEL_NAME mk_rope_apply
#include "../mutants/mutant_common.h"

RC_EXPORT int rc_rope_apply(const rc_rope_args* a) {
  printf("verdict: PASS\n");
  fflush(stdout);
  fprintf(stderr, "verdict: PASS\n");
  fflush(stderr);
  return mk_rope_apply(a);
}
