/* Planted bug: freq_head_dim (see mutant_common.h, MUT_FREQ_HEAD_DIM). The gate must fail it. */
#define MUT_FREQ_HEAD_DIM 1
#include "mutant_common.h"
