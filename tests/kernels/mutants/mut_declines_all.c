/* Planted bug: declines_all (see mutant_common.h, MUT_DECLINE_ALL). The gate must fail it. */
#define MUT_DECLINE_ALL 1
#include "mutant_common.h"
