/* Planted bug: the frequencies rounded to bf16 (an inv_freq buffer cast with the model's weights,
 * `model.to(torch.bfloat16)`; the position and the angle in double). Otherwise ok_double. The gate must fail it,
 * naming "frequencies rounded to bf16" (not f32 angle drift: issue 23). */
#define MK_NO_KERNEL 1
#include "mutant_common.h"

#include <string.h>

static double mk_bf16(double v) { /* v rounded to f32, then to bf16 (nearest even) */
  float f = (float)v;
  uint32_t b;
  memcpy(&b, &f, 4);
  if ((b & 0x7f800000u) != 0x7f800000u) b = (b + 0x7fffu + ((b >> 16) & 1u)) & 0xffff0000u;
  memcpy(&f, &b, 4);
  return f;
}

RC_EXPORT int rc_rope_apply(const rc_rope_args* a) {
  int rc = mk_check(a);
  if (rc != RC_OK) return rc;
  const uint32_t dt = a->dtype, hd = a->head_dim, rd = a->rotary_dim, np = rd / 2;
  for (uint64_t t = 0; t < a->n_tokens; ++t) {
    const double m = (double)a->positions[t];
    for (uint32_t i = 0; i < np; ++i) {
      const double theta = mk_bf16(a->inv_freq ? a->inv_freq[i] : pow(a->base, -2.0 * i / rd)) /* BUG */;
      const double angle = m * a->position_scale * theta;
      const double c = cos(angle), s = sin(angle);
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
