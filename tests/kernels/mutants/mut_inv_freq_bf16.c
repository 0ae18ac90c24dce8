/* Planted bug: the frequencies rounded to bf16 (an inv_freq buffer cast with the model's weights,
 * `model.to(torch.bfloat16)`; the position and the angle in double). Otherwise ok_double. The gate must fail it,
 * naming "frequencies rounded to bf16" (not f32 angle drift: issue 23). */
#define MK_NO_KERNEL 1
#define MK_DOUBLE_KERNEL 1
#define MK_DOUBLE_THETA(theta) mk_round_bf16(theta) /* BUG: theta rounded to bf16 */
#include "mutant_common.h"
