/* Correct: a kernel that takes int32 positions (ggml, TransformerEngine, MLX and FlashInfer do) declines a
 * call with a position outside int32, and computes the others as ok_double does from the int32 position. The
 * long positions row's cases beyond int32 are declined (never a failure); those within int32 pass. The gate must
 * pass it. */
#define MK_NO_KERNEL 1
#include "mutant_common.h"

RC_EXPORT int rc_rope_apply(const rc_rope_args* a) {
  int rc = mk_check(a);
  if (rc != RC_OK) return rc;
  for (uint64_t k = 0; k < a->n_tokens; ++k)
    if (a->positions[k] > INT32_MAX || a->positions[k] < INT32_MIN) return RC_UNSUPPORTED; /* int32 positions */
  const uint32_t dt = a->dtype, hd = a->head_dim, rd = a->rotary_dim, np = rd / 2;
  for (uint64_t t = 0; t < a->n_tokens; ++t) {
    const double m = (double)(int32_t)a->positions[t];
    for (uint32_t i = 0; i < np; ++i) {
      const double theta = a->inv_freq ? a->inv_freq[i] : pow(a->base, -2.0 * i / rd);
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
