/* Planted bug: crash (see mutant_common.h, MUT_CRASH). The gate must fail it. */
#define MUT_CRASH 1
#include "mutant_common.h"
