/* Planted bug: bf16_cache (see mutant_common.h, MUT_BF16_CACHE). The gate must fail it. */
#define MUT_BF16_CACHE 1
#include "mutant_common.h"
