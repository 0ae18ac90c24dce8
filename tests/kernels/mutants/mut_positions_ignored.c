/* Planted bug: positions_ignored (see mutant_common.h, MUT_POS_IGNORED). The gate must fail it. */
#define MUT_POS_IGNORED 1
#include "mutant_common.h"
