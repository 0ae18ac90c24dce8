/* Planted bug: layout_pairing (see mutant_common.h, MUT_PAIRING). The gate must fail it. */
#define MUT_PAIRING 1
#include "mutant_common.h"
