/* Correct: an exact-ish kernel. theta, the angle, cos/sin and the rotation all
 * in double; each output rounded once from double to f32 (then RNE to f16 or
 * bf16). The gate must pass it. */
#define MK_NO_KERNEL 1
#define MK_DOUBLE_KERNEL 1
#include "mutant_common.h"
