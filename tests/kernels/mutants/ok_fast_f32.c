/* Correct: a fast f32 kernel (double angles, f32 cos/sin reused across heads, f32 rotation, RNE stores). The gate must pass it. */
#include "mutant_common.h"
