/* Planted bug: cos and sin from a routine that is wrong from |angle| 2^23 on (see mk_sincos_ranged): there cos^2 +
 * sin^2 is far from 1 and pairs come out longer or shorter (issue 23: such a kernel was "unexplained" in the gate and
 * "radial bias ... outputs shortened" in replay for a pair 5.5 times too long). Otherwise ok_double. The gate must
 * fail it, naming "cos/sin not of unit length". */
#define MK_NO_KERNEL 1
#include "mutant_common.h"

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

RC_EXPORT int rc_rope_apply(const rc_rope_args* a) {
  int rc = mk_check(a);
  if (rc != RC_OK) return rc;
  const uint32_t dt = a->dtype, hd = a->head_dim, rd = a->rotary_dim, np = rd / 2;
  for (uint64_t t = 0; t < a->n_tokens; ++t) {
    const double m = (double)a->positions[t];
    for (uint32_t i = 0; i < np; ++i) {
      const double theta = a->inv_freq ? a->inv_freq[i] : pow(a->base, -2.0 * i / rd);
      const double angle = m * a->position_scale * theta;
      double c, s;
      mk_sincos_ranged(angle, &c, &s);
      for (uint32_t h = 0; h < a->n_heads; ++h) {
        const size_t base = ((size_t)t * a->n_heads + h) * hd;
        uint32_t d0, d1;
        mk_pair_dims(a->layout, rd, i, &d0, &d1);
        if (angle == 0) {
          mk_copy(dt, a->out, a->in, base + d0, 1);
          mk_copy(dt, a->out, a->in, base + d1, 1);
          continue;
        }
        const double x0 = mk_load(dt, a->in, base + d0), x1 = mk_load(dt, a->in, base + d1);
        mk_store(dt, a->out, base + d0, (float)(x0 * c - x1 * s));
        mk_store(dt, a->out, base + d1, (float)(x0 * s + x1 * c));
      }
    }
    for (uint32_t h = 0; h < a->n_heads && rd < hd; ++h)
      mk_copy(dt, a->out, a->in, ((size_t)t * a->n_heads + h) * hd + rd, hd - rd);
  }
  return RC_OK;
}
