/* Correct: Hugging Face's eager RoPE in the activation dtype (LlamaRotaryEmbedding +
 * apply_rotary_pos_emb), in C:
 *   inv_freq[i] = 1.0f / powf(f32(base), f32(2i) / f32(rotary_dim))    (or f32(table[i]))
 *   ang = f32(f32(position) * f32(position_scale)) * inv_freq[i]         (the scale only when != 1)
 *   cos, sin = cosf(ang), sinf(ang) in f32, then .to(dtype): rounded (RNE) to the activation dtype
 *   q_embed = q*cos + rotate_half(q)*sin: per pair y0 = x0*c + (-x1)*s, y1 = x1*c + x0*s with each
 *   product and the sum rounded to the activation dtype (PyTorch's CPU bf16/f16 ops compute each
 *   op in f32 and round its result), so there are three roundings per output, no special case at
 *   angle 0. Half-split is rotate_half; interleaved is GPT-J's rotate_every_two (the same pair
 *   arithmetic). Pass-through dims [rotary_dim, head_dim) are copied.
 * The gate must pass it under the contract of the dtype it is run with (gate/tests reads these
 * lines and runs the gate once per dtype):
 * Contract (bf16 data): angles=f32,cos-sin=bf16,arith=bf16
 * Contract (f16 data): angles=f32,cos-sin=f16,arith=f16
 * Contract (f32 data): angles=f32
 */
#define MK_NO_KERNEL 1
#include "mutant_common.h"

/* A value of the activation dtype: f32 stays, f16/bf16 are rounded to nearest even. */
static float hf_round(uint32_t dt, float v) {
  if (dt == RC_F16) return mk_f16_to_f32(mk_f32_to_f16(v));
  if (dt == RC_BF16) return mk_bits_f32((uint32_t)mk_f32_to_bf16(v) << 16);
  return v;
}

RC_EXPORT int rc_rope_apply(const rc_rope_args* a) {
  int rc = mk_check(a);
  if (rc != RC_OK) return rc;
  const uint32_t dt = a->dtype, hd = a->head_dim, rd = a->rotary_dim, np = rd / 2;
  float* inv_freq = (float*)malloc(np * sizeof(float));
  float* cs = (float*)malloc(2 * (size_t)np * sizeof(float));
  if (!inv_freq || !cs) { free(inv_freq); free(cs); return 3; }
  for (uint32_t i = 0; i < np; ++i)
    inv_freq[i] = a->inv_freq ? (float)a->inv_freq[i] : 1.0f / powf((float)a->base, (float)(2 * i) / (float)rd);
  for (uint64_t t = 0; t < a->n_tokens; ++t) {
    float mf = (float)a->positions[t];
    if (a->position_scale != 1.0) mf = mf * (float)a->position_scale;
    for (uint32_t i = 0; i < np; ++i) {
      const float freq = mf * inv_freq[i];
      cs[2 * i] = hf_round(dt, cosf(freq));
      cs[2 * i + 1] = hf_round(dt, sinf(freq));
    }
    for (uint32_t h = 0; h < a->n_heads; ++h) {
      const size_t base = ((size_t)t * a->n_heads + h) * hd;
      for (uint32_t i = 0; i < np; ++i) {
        uint32_t d0, d1;
        mk_pair_dims(a->layout, rd, i, &d0, &d1);
        const float c = cs[2 * i], s = cs[2 * i + 1];
        const float x0 = mk_load(dt, a->in, base + d0), x1 = mk_load(dt, a->in, base + d1);
        const float y0 = hf_round(dt, hf_round(dt, x0 * c) + hf_round(dt, -x1 * s));
        const float y1 = hf_round(dt, hf_round(dt, x1 * c) + hf_round(dt, x0 * s));
        mk_store(dt, a->out, base + d0, y0);
        mk_store(dt, a->out, base + d1, y1);
      }
      if (rd < hd) mk_copy(dt, a->out, a->in, base + rd, hd - rd);
    }
  }
  free(inv_freq);
  free(cs);
  return RC_OK;
}
