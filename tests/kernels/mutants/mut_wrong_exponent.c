/* Planted bug: wrong_exponent (see mutant_common.h, MUT_EXPONENT). The gate must fail it. */
#define MUT_EXPONENT 1
#include "mutant_common.h"
