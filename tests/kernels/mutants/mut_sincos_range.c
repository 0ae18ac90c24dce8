/* Planted bug: cos and sin from a routine that is wrong from |angle| 2^23 on (see mk_sincos_ranged): there cos^2 +
 * sin^2 is far from 1 and pairs come out longer or shorter (issue 23: such a kernel was "unexplained" in the gate and
 * "radial bias ... outputs shortened" in replay for a pair 5.5 times too long). Otherwise ok_double. The gate must
 * fail it, naming "cos/sin not of unit length". */
#define MK_NO_KERNEL 1
#define MK_DOUBLE_KERNEL 1
#define MK_DOUBLE_SINCOS(angle, c, s) mk_sincos_ranged(angle, &(c), &(s))
#include <math.h>

/* BUG: from |angle| 2^23 on, a crude vectorised-style sin/cos: an f32 reduction by 2 pi (past 2^23 an f32 has no
 * fraction: r lands anywhere in about [-pi - 1, pi + 1]) and short Taylor polynomials, whose (cos, sin) is off the
 * unit circle by up to tens of percent there. Below 2^23, libm's cos and sin: small positions pass. */
static void mk_sincos_ranged(double angle, double* c, double* s) {
  if (fabs(angle) < 8388608.0) {
    *c = cos(angle);
    *s = sin(angle);
    return;
  }
  const float a = (float)angle, k = rintf(a * 0.159154943f);
  const float r = a - k * 6.28318548f, r2 = r * r;
  *s = r * (1.0f - r2 / 6.0f * (1.0f - r2 / 20.0f * (1.0f - r2 / 42.0f)));
  *c = 1.0f - r2 / 2.0f * (1.0f - r2 / 12.0f * (1.0f - r2 / 30.0f));
}

#include "mutant_common.h"
