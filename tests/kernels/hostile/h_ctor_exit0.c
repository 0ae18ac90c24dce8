/* Hostile: a correct kernel whose constructor calls exit(0) while the library is being loaded. A gate
 * that dlopens it itself exits 0 before judging anything; the loading process must not be the gate.
 * Expect: exit 2; mentions: while loading
 */
#include "../mutants/mutant_common.h"

__attribute__((constructor)) static void h_exit_on_load(void) { exit(0); }
