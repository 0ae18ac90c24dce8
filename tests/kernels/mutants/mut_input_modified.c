/* Planted bug: input_modified (see mutant_common.h, MUT_INPUT_MODIFIED). The gate must fail it. */
#define MUT_INPUT_MODIFIED 1
#include "mutant_common.h"
