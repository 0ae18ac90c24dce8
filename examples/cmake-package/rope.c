/* A RoPE kernel as a project writes one: f32, both layouts, partial rotary, in place or not; the angle, cos, sin
 * and the rotation in double, rounded once to f32. MYROPE_SIGN_BUG: the planted bug (the rotation reversed). */
#include <math.h>
#include <string.h>

#include <ropecheck/kernel_abi.h>

__attribute__((visibility("default"))) int rc_rope_apply(const rc_rope_args* a) {
  if (!a || a->abi_version != ROPECHECK_ABI_VERSION) return 2;
  if (a->dtype != RC_F32) return RC_UNSUPPORTED;
  if (a->layout > RC_HALF_SPLIT || a->rotary_dim < 2 || a->rotary_dim % 2 || a->rotary_dim > a->head_dim) return 2;
  const unsigned hd = a->head_dim, rd = a->rotary_dim, np = rd / 2;
  const float* in = a->in;
  float* out = a->out;
  for (unsigned long t = 0; t < a->n_tokens; ++t)
    for (unsigned h = 0; h < a->n_heads; ++h) {
      const unsigned long base = (t * a->n_heads + h) * hd;
      if (out != in) memcpy(out + base, in + base, hd * sizeof(float));
      for (unsigned i = 0; i < np; ++i) {
        const double theta = a->inv_freq ? a->inv_freq[i] : pow(a->base, -2.0 * i / rd);
        const double angle = (double)a->positions[t] * a->position_scale * theta;
        if (angle == 0) continue; /* the input's bits, as copied */
#ifdef MYROPE_SIGN_BUG
        const double c = cos(angle), s = -sin(angle);
#else
        const double c = cos(angle), s = sin(angle);
#endif
        const unsigned long k0 = base + (a->layout == RC_INTERLEAVED ? 2 * i : i);
        const unsigned long k1 = base + (a->layout == RC_INTERLEAVED ? 2 * i + 1 : i + np);
        const double x0 = in[k0], x1 = in[k1];
        out[k0] = (float)(x0 * c - x1 * s);
        out[k1] = (float)(x0 * s + x1 * c);
      }
    }
  return RC_OK;
}
