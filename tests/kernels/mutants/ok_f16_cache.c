/* Correct: ok_fast_f32 (double angles, f32 rotation, RNE stores, angle 0 copies the pair) with the
 * cos/sin cache rounded to f16 (RNE) before use, as kernels that keep an f16 cos/sin table do.
 * The gate must pass it under the contract it declares (gate/tests reads the next line):
 * Contract: cos-sin=f16
 */
#define MK_CACHE_F16 1
#include "mutant_common.h"
