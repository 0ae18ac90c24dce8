/* Correct: the PyTorch / Hugging Face f32 pipeline in C.
 *   inv_freq[i] = 1.0f / powf(f32(base), f32(2i) / f32(rotary_dim))   (libm powf, or f32(table[i]))
 *   ang = f32(f32(position) * f32(position_scale)) * inv_freq[i]       (the scale only when != 1)
 *   c, s = cosf(ang), sinf(ang); the rotation in f32 arithmetic, RNE stores; no special case at
 *   angle 0 (cosf(0) = 1, sinf(0) = 0 give the input's values).
 * glibc's powf, cosf and sinf are not correctly rounded, so the angle may be an f32 ulp or so away
 * from the model's correctly rounded f32 pipeline (measured: at most 8.8 f32 ulps of |phi| from the
 * exact angle over rotary_dim <= 256, base 2..2e6, positions < 2^24; the derived default of
 * angles=f32 allows (2i/d)|ln base| + 7).
 * The gate must pass it under the contract it declares (gate/tests reads the next line):
 * Contract: angles=f32
 */
#define MK_ANGLE_POWF_F32 1
#define MK_NO_IDENTITY 1
#include "mutant_common.h"
