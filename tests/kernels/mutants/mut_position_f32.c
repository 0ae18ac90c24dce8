/* Planted bug: positions rounded to f32 (a float position tensor, `position_ids.float()` fed to a double
 * pipeline). Otherwise ok_double: theta, the angle, cos/sin and the rotation in double. Every position up to 2^24
 * is an f32, so the default rows (positions <= 2^24) cannot see it; above, a position moves by up to half an f32
 * ulp (1 at 2^25 + 1, 64 near 2^31, 2^16 near 2^40): the long positions row fails it under the default contract
 * (angles=f32 allows exactly this). The gate must fail it. */
#define MK_NO_KERNEL 1
#define MK_DOUBLE_KERNEL 1
#define MK_DOUBLE_POSITION(p) ((double)(float)(p)) /* BUG: the position rounded to f32 */
#include "mutant_common.h"
