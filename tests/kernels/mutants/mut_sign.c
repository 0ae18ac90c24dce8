/* Planted bug: sign (see mutant_common.h, MUT_SIGN). The gate must fail it. */
#define MUT_SIGN 1
#include "mutant_common.h"
