/* Correct: ggml's CPU RoPE angles (ggml_rope_cache_init) in a plain kernel:
 *   theta_scale = powf(f32(base), -2.0f / rotary_dim)
 *   theta = f32(position); for each pair i: ang = f32(position_scale) * theta (the scale only when
 *   != 1), then theta *= theta_scale in f32; with a table, ang = f32(position) * f32(table[i]).
 *   c, s = cosf(ang), sinf(ang); the rotation in f32 arithmetic, RNE stores; no special case at
 *   angle 0.
 * The recurrence puts pair i's angle i f32 roundings plus i times theta_scale's error away from the
 * exact angle (theta_scale = b^e (1 + d) with |d| <= 0.82 * 2^-23 from powf plus e (1 + ln b) 2^-24
 * from rounding b and the exponent e = 2/rotary_dim to f32). In f32 ulps of |phi|:
 *   K_i <= (i + 3) + i (1.64 + e (1 + ln b)) <= 2.64 i + 4 + ln b,
 * i.e. <= 354 for rotary_dim <= 256 and base <= 2e6 (<= 227 for rotary_dim <= 160). Measured
 * (rotary_dim 2..256, 30-70 bases in [2, 2e6], positions < 2^24, scales 1, 1/4, 4, 1/32): at most
 * 94 ulps, growing as ~0.7 i (docs/real-kernels.md). The contract takes the derived bound.
 * The gate must pass it under the contract it declares (gate/tests reads the next line):
 * Contract: angles=f32:384
 */
#define MK_ANGLE_GGML 1
#define MK_NO_IDENTITY 1
#include "mutant_common.h"
