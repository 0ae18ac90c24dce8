/* Planted bug: inplace_alias (see mutant_common.h, MUT_INPLACE_ALIAS). The gate must fail it. */
#define MUT_INPLACE_ALIAS 1
#include "mutant_common.h"
