/* Planted bug: oob_write (see mutant_common.h, MUT_OOB_WRITE). The gate must fail it. */
#define MUT_OOB_WRITE 1
#include "mutant_common.h"
