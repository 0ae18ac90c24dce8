/* Planted bug: fp32_angle (see mutant_common.h, MUT_FP32_ANGLE). The gate must fail it. */
#define MUT_FP32_ANGLE 1
#include "mutant_common.h"
