/* Hostile: a numerically wrong kernel (angle negated) whose constructor registers an atexit handler
 * that calls _exit(0). Registered after the gate's own handlers, it runs first when the loading
 * process exits: exit status 0 whatever the verdict, and stdio is never flushed.
 * Expect: exit 1; mentions: angle negated
 */
#include <unistd.h>

#define MUT_SIGN 1
#include "../mutants/mutant_common.h"

static void h_exit0(void) { _exit(0); }

__attribute__((constructor)) static void h_register(void) { atexit(h_exit0); }
