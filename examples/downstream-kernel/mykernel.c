/* A user's RoPE kernel: f32 and bf16 storage, both layouts. It declines f16
 * (RC_UNSUPPORTED), which the gate reports and accepts. The angle in double,
 * cos/sin once per (token, pair), the rotation in double rounded once to f32,
 * round-to-nearest-even stores.
 *
 * MYKERNEL_DEGRADED (cmake -DMYKERNEL_DEGRADED=ON) builds what a well-meant
 * "optimisation" makes of it: cos/sin rounded to f32 and the rotation in f32
 * arithmetic. That build still passes its gate (the default contract allows
 * f32 arithmetic) but is less accurate, and the compare with the committed
 * baseline (ropecheck-baseline.json) fails it. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <ropecheck/kernel_abi.h>

static float load(uint32_t dt, const void* p, size_t i) {
  if (dt == RC_F32) {
    float v;
    memcpy(&v, (const char*)p + 4 * i, 4);
    return v;
  }
  uint16_t h;
  memcpy(&h, (const char*)p + 2 * i, 2);
  uint32_t u = (uint32_t)h << 16;
  float v;
  memcpy(&v, &u, 4);
  return v;
}

static void store(uint32_t dt, void* p, size_t i, float v) {
  if (dt == RC_F32) {
    memcpy((char*)p + 4 * i, &v, 4);
    return;
  }
  uint32_t u;
  memcpy(&u, &v, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) u = (u | 0x00400000u); /* quiet NaN */
  else u += 0x7fffu + ((u >> 16) & 1u);                       /* round to nearest even */
  uint16_t h = (uint16_t)(u >> 16);
  memcpy((char*)p + 2 * i, &h, 2);
}

static void copy(uint32_t dt, void* out, const void* in, size_t i, size_t n) {
  const size_t es = dt == RC_F32 ? 4 : 2;
  if (out != in) memcpy((char*)out + i * es, (const char*)in + i * es, n * es);
}

#ifdef MYKERNEL_DEGRADED
typedef float real;
#else
typedef double real;
#endif

__attribute__((visibility("default"))) int rc_rope_apply(const rc_rope_args* a) {
  if (!a || a->abi_version != ROPECHECK_ABI_VERSION) return 2;
  if (a->dtype != RC_F32 && a->dtype != RC_BF16) return RC_UNSUPPORTED;
  if (a->layout > RC_HALF_SPLIT || a->rotary_dim < 2 || a->rotary_dim % 2 || a->rotary_dim > a->head_dim) return 2;
  const uint32_t hd = a->head_dim, rd = a->rotary_dim, np = rd / 2;
  real* cs = malloc(2 * np * sizeof(real));
  char* ident = malloc(np);
  if (!cs || !ident) {
    free(cs);
    free(ident);
    return 3;
  }
  for (uint64_t t = 0; t < a->n_tokens; ++t) {
    for (uint32_t i = 0; i < np; ++i) {
      const double theta = a->inv_freq ? a->inv_freq[i] : pow(a->base, -2.0 * i / rd);
      const double angle = (double)a->positions[t] * a->position_scale * theta;
      cs[2 * i] = (real)cos(angle);
      cs[2 * i + 1] = (real)sin(angle);
      ident[i] = angle == 0;
    }
    for (uint32_t h = 0; h < a->n_heads; ++h) {
      const size_t base = ((size_t)t * a->n_heads + h) * hd;
      for (uint32_t i = 0; i < np; ++i) {
        const size_t k0 = base + (a->layout == RC_INTERLEAVED ? 2 * i : i);
        const size_t k1 = base + (a->layout == RC_INTERLEAVED ? 2 * i + 1 : i + np);
        if (ident[i]) {
          copy(a->dtype, a->out, a->in, k0, 1);
          copy(a->dtype, a->out, a->in, k1, 1);
          continue;
        }
        const real x0 = load(a->dtype, a->in, k0), x1 = load(a->dtype, a->in, k1);
        const real c = cs[2 * i], s = cs[2 * i + 1];
        store(a->dtype, a->out, k0, (float)(x0 * c - x1 * s));
        store(a->dtype, a->out, k1, (float)(x0 * s + x1 * c));
      }
      if (rd < hd) copy(a->dtype, a->out, a->in, base + rd, hd - rd);
    }
  }
  free(cs);
  free(ident);
  return RC_OK;
}
