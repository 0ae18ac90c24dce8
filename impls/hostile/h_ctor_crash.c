/* Hostile: a correct kernel whose constructor dereferences NULL: the loading process dies of SIGSEGV.
 * Expect: exit 2; mentions: while loading
 */
#include "../mutants/mutant_common.h"

__attribute__((constructor)) static void h_crash_on_load(void) {
  volatile int* p = NULL;
  *p = 1;
}
