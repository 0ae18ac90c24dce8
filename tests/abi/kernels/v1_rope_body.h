/* The rotation of the tests/abi kernels: written once, as a user of the v1 header writes a RoPE kernel, for
 * each version-check idiom (the other files of this folder) to wrap. f32/f16/bf16 storage, both layouts,
 * partial rotary, inv_freq tables, position_scale; the angle in double, cos/sin once per (token, pair), the
 * rotation in double rounded once to f32, round-to-nearest-even stores. It reads only the v1 fields.
 *
 *   PLANT_SIGN            the planted bug: sin negated (the angle negated; the gate names it so)
 *   PASS_THROUGH_FLOAT    the pass-through elements go through a float conversion (load, store back): a
 *                         signalling NaN comes out quiet, as in a kernel that copies through registers */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static float abi_load(uint32_t dt, const void* p, size_t i) {
  if (dt == RC_F32) {
    float v;
    memcpy(&v, (const char*)p + 4 * i, 4);
    return v;
  }
  uint16_t h;
  memcpy(&h, (const char*)p + 2 * i, 2);
  if (dt == RC_BF16) {
    uint32_t u = (uint32_t)h << 16;
    float v;
    memcpy(&v, &u, 4);
    return v;
  }
  { /* f16 */
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    uint32_t u;
    float v;
    if (e == 0x1f) u = sign | 0x7f800000u | (m << 13);
    else if (e == 0) {
      v = (float)m * 0x1p-24f;
      return sign ? -v : v;
    } else u = sign | ((e + 112u) << 23) | (m << 13);
    memcpy(&v, &u, 4);
    return v;
  }
}

static void abi_store(uint32_t dt, void* p, size_t i, float v) {
  uint32_t u;
  memcpy(&u, &v, 4);
  if (dt == RC_F32) {
    memcpy((char*)p + 4 * i, &v, 4);
    return;
  }
  uint16_t h;
  if (dt == RC_BF16) {
    if ((u & 0x7fffffffu) > 0x7f800000u) u |= 0x00400000u; /* quiet NaN */
    else u += 0x7fffu + ((u >> 16) & 1u);                   /* round to nearest even */
    h = (uint16_t)(u >> 16);
  } else { /* f16: round to nearest even from f32 */
    const uint32_t sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
    if (a > 0x7f800000u) h = (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
    else if (a >= 0x477ff000u) h = (uint16_t)(sign | 0x7c00u); /* rounds to infinity */
    else if (a < 0x38800000u) {                                 /* subnormal or zero in f16 */
      float f;
      memcpy(&f, &a, 4);
      const float q = f * 0x1p24f; /* exact scaling; nearbyintf rounds half to even */
      h = (uint16_t)(sign | (uint16_t)nearbyintf(q));
    } else {
      const uint32_t r = a + 0x0fffu + ((a >> 13) & 1u);
      h = (uint16_t)(sign | ((r - 0x38000000u) >> 13));
    }
  }
  memcpy((char*)p + 2 * i, &h, 2);
}

/* Element i of in to element i of out, unchanged. */
static void abi_pass(uint32_t dt, void* out, const void* in, size_t i) {
#ifdef PASS_THROUGH_FLOAT
  abi_store(dt, out, i, abi_load(dt, in, i));
#else
  const size_t es = dt == RC_F32 ? 4 : 2;
  if (out != in) memcpy((char*)out + i * es, (const char*)in + i * es, es);
#endif
}

static int abi_rope_v1(const rc_rope_args* a) {
  if (a->dtype > RC_BF16 || a->layout > RC_HALF_SPLIT) return RC_UNSUPPORTED;
  if (a->rotary_dim < 2 || a->rotary_dim % 2 || a->rotary_dim > a->head_dim || a->n_heads == 0) return 2;
  const uint32_t hd = a->head_dim, rd = a->rotary_dim, np = rd / 2;
  double* cs = malloc(2 * (size_t)np * sizeof(double));
  if (!cs) return 3;
  for (uint64_t t = 0; t < a->n_tokens; ++t) {
    for (uint32_t i = 0; i < np; ++i) {
      const double theta = a->inv_freq ? a->inv_freq[i] : pow(a->base, -2.0 * i / rd);
      const double angle = (double)a->positions[t] * a->position_scale * theta;
      cs[2 * i] = cos(angle);
      cs[2 * i + 1] = sin(angle);
#ifdef PLANT_SIGN
      cs[2 * i + 1] = -cs[2 * i + 1];
#endif
    }
    for (uint32_t h = 0; h < a->n_heads; ++h) {
      const size_t base = ((size_t)t * a->n_heads + h) * hd;
      for (uint32_t i = 0; i < np; ++i) {
        const size_t k0 = base + (a->layout == RC_INTERLEAVED ? 2 * i : i);
        const size_t k1 = base + (a->layout == RC_INTERLEAVED ? 2 * i + 1 : i + np);
        const double c = cs[2 * i], s = cs[2 * i + 1];
        if (c == 1 && s == 0) { /* an angle of 0: the pair as it is */
          abi_pass(a->dtype, a->out, a->in, k0);
          abi_pass(a->dtype, a->out, a->in, k1);
          continue;
        }
        const double x0 = abi_load(a->dtype, a->in, k0), x1 = abi_load(a->dtype, a->in, k1);
        abi_store(a->dtype, a->out, k0, (float)(x0 * c - x1 * s));
        abi_store(a->dtype, a->out, k1, (float)(x0 * s + x1 * c));
      }
      for (uint32_t k = rd; k < hd; ++k) abi_pass(a->dtype, a->out, a->in, base + k);
    }
  }
  free(cs);
  return RC_OK;
}
