/* Planted bug: hang (see mutant_common.h, MUT_HANG). The gate must fail it. */
#define MUT_HANG 1
#include "mutant_common.h"
