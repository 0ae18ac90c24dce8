/* Planted bug: truncating_bf16 (see mutant_common.h, MUT_TRUNCATE). The gate must fail it. */
#define MUT_TRUNCATE 1
#include "mutant_common.h"
