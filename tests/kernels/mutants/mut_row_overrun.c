/* Planted bug: row_overrun (see mutant_common.h, MUT_ROW_OVERRUN): the pass-through copy steps two elements
 * at a time, one element past every row with an odd number of pass-through dims (found in ggml's CPU rope,
 * docs/real-kernels.md). The gate must fail it: an out-of-bounds write (distinct guard patterns for input and
 * output) or a crash (buffers flush against the guard page). */
#define MUT_ROW_OVERRUN 1
#include "mutant_common.h"
