/* Hostile: a correct kernel linked as with -ffast-math: crtfastmath.o's constructor sets MXCSR's FTZ
 * and DAZ bits (0x8040) at load time, for the whole loading process. In a gate that loads the kernel
 * itself that changes the gate's own arithmetic; the FP environment must be checked after loading.
 * x86 only (other targets build the plain correct kernel; the driver skips it there).
 * Expect: exit 1; mentions: FP environment
 * Requires: x86
 */
#include "../mutants/mutant_common.h"

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>

__attribute__((constructor)) static void h_set_ftz_daz(void) { _mm_setcsr(_mm_getcsr() | 0x8040u); }
#endif
