/* Planted bug: passthrough_clobbered (see mutant_common.h, MUT_PASSTHROUGH). The gate must fail it. */
#define MUT_PASSTHROUGH 1
#include "mutant_common.h"
