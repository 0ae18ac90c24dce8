/* Planted bug: position_off_by_one (see mutant_common.h, MUT_POS_OFF_BY_ONE). The gate must fail it. */
#define MUT_POS_OFF_BY_ONE 1
#include "mutant_common.h"
