/* Planted bug: cos_sin_swapped (see mutant_common.h, MUT_COS_SIN_SWAPPED): y0 = x0*s - x1*c,
 * y1 = x0*c + x1*s. The gate must fail it under any contract. */
#define MUT_COS_SIN_SWAPPED 1
#include "mutant_common.h"
