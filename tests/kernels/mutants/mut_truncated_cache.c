/* Planted bug: the cos/sin cache stored in bf16 by a conversion that keeps the high 16 bits of the f32
 * (`(uint16_t)(bits >> 16)`), i.e. truncates toward zero instead of rounding to nearest even (see
 * mutant_common.h, MUT_BF16_CACHE_TRUNCATED); otherwise the default kernel. Up to one bf16 ulp off where a
 * rounded cache is half an ulp off: cos-sin=bf16 does not describe it. The gate must fail it at every output
 * type, naming the truncating conversion of the table (issue 23), not a bf16 cache. */
#define MUT_BF16_CACHE_TRUNCATED 1
#include "mutant_common.h"
