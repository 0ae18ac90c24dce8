/* Hostile: a numerically wrong kernel (angle negated) whose destructor calls _exit(0). A gate that
 * dlopens the kernel in its own process runs the destructor when it exits after the verdict: the
 * process then exits 0 (a pass for CI) and the FAIL verdict still in stdio's buffer is lost.
 * Expect: exit 1; mentions: angle negated
 */
#include <unistd.h>

#define MUT_SIGN 1
#include "../mutants/mutant_common.h"

__attribute__((destructor)) static void h_exit_at_unload(void) { _exit(0); }
