/* Planted bug: positions truncated to int32 (an int position in the kernel's loop: 2^31 becomes -2^31,
 * 2^32 + 1 becomes 1). Otherwise ok_double. The default rows (positions <= 2^24) cannot see it; the long
 * positions row's positions beyond int32 fail it, under every contract (the slow pairs keep a known angle even
 * under the loosest). The gate must fail it. */
#define MK_NO_KERNEL 1
#define MK_DOUBLE_KERNEL 1
#define MK_DOUBLE_POSITION(p) ((double)(int32_t)(p)) /* BUG: truncated to 32 bits */
#include "mutant_common.h"
