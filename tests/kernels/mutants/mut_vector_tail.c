/* Planted bug: vector_tail (see mutant_common.h, MUT_VECTOR_TAIL). The gate must fail it. */
#define MUT_VECTOR_TAIL 1
#include "mutant_common.h"
