/* Hostile: a correct kernel whose constructor dereferences NULL: the loading process dies of SIGSEGV.
 * Expect: exit 2; mentions: while loading
 */
#include "../mutants/mutant_common.h"

__attribute__((constructor)) static void h_crash_on_load(void) {
  /* Both volatile: GCC drops a constructor that provably stores through NULL (with its .init_array
   * entry), and a non-volatile store through an unknown pointer as a dead store. */
  volatile int* volatile p = NULL;
  *p = 1;
}
