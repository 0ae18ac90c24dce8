/* Planted bug in a kernel of one rotated slice: ok_partial_rotary (rotary_dim = int(head_dim * 0.25), every other
 * call declined) rotating by -angle. The gate must find the slice, then fail it naming the sign. */
#include <stdint.h>
#include <ropecheck/kernel_abi.h>
#define MK_NO_KERNEL 1
#define MK_DOUBLE_KERNEL 1
#define MK_DOUBLE_DECLINE(a) ((a)->rotary_dim != (uint32_t)((a)->head_dim * 0.25))
#define MK_DOUBLE_SINCOS(angle, c, s) ((c) = cos(angle), (s) = -sin(angle))
#include "mutant_common.h"
