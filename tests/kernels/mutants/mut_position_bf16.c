/* Planted bug: positions rounded to bf16 (a position tensor cast with the model's bf16 activations,
 * `position_ids.to(dtype)`): every position up to 256 is a bf16, above it a position moves by up to half a bf16
 * ulp (1 at 257, 8 near 2048, 2^15 near 2^24). Otherwise ok_double. The gate must fail it, naming "positions
 * rounded to bf16" (not f32 angle drift: issue 23). */
#define MK_NO_KERNEL 1
#define MK_DOUBLE_KERNEL 1
#define MK_DOUBLE_POSITION(p) mk_round_bf16((double)(p)) /* BUG: the position rounded to bf16 */
#include "mutant_common.h"
