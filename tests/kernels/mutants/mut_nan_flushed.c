/* Planted bug: nan_flushed (see mutant_common.h, MUT_NAN_FLUSH). The gate must fail it. */
#define MUT_NAN_FLUSH 1
#include "mutant_common.h"
