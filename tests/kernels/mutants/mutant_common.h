/* A RoPE kernel in plain C against include/ropecheck/kernel_abi.h, with
 * switches that plant one real-world bug each (tests/kernels/mutants/<bug>.c defines
 * one MUT_* macro and includes this file). With no switch it is a correct,
 * fast f32 kernel: theta and the angle in double, cos/sin once per
 * (token, pair) rounded to f32 and reused across heads, the rotation in f32
 * arithmetic, round-to-nearest-even stores; pass-through dims copied bit for
 * bit; an angle of exactly 0 copies the pair.
 *
 * Switches of correct kernels written the usual ways (tests/kernels/mutants/ok_*.c;
 * each file's top comment states the --contract it declares):
 *   MK_NO_IDENTITY      no special case at angle 0: x0*1 - x1*0 is computed
 *   MK_ANGLE_POWF_F32   the PyTorch/HF f32 angle: inv = 1/powf(f32(base), f32(2i)/f32(rd))
 *                       (or f32(table[i])), ang = f32(f32(m) [* f32(scale)]) * inv, cosf/sinf
 *   MK_ANGLE_GGML       ggml's recurrence: theta = f32(m), then theta *= powf(base, -2/rd)
 *                       after each pair, ang = f32(scale) * theta, cosf/sinf
 *   MK_CACHE_F16        cos/sin rounded to f16 (RNE) before use
 *   MK_FLUSH_DENORMALS  subnormal inputs and outputs (of the storage type) flushed to
 *                       signed zero, the f32 arithmetic under FTZ/DAZ (a fast-math build)
 * and the elements that keep their value (pass-through dims, pairs at an angle of exactly 0) passed
 * through float arithmetic instead of copied, which keeps every value but not every bit (the default
 * contract's identity=values allows it, identity=bits does not):
 *   MK_PASS_FLOAT       loaded to float and stored back (f16/bf16 signalling NaNs come back quiet:
 *                       0x7c01 -> 0x7e01)
 *   MK_PASS_MUL1        multiplied by 1.0f: cos 0 from the kernel's cos/sin row, which has one more
 *                       entry at angle 0 for the pass-through dims (signalling NaNs come back quiet)
 *   MK_PASS_ADD0        0.0f + x, as autograd's zeros + g (-0 becomes +0, signalling NaNs quiet)
 *
 * For tests/kernels/hostile/ (kernels that misbehave around a correct or planted-bug kernel):
 *   MK_KERNEL_NAME      the kernel is defined as a static function of this name instead of
 *                       the exported rc_rope_apply, so that the file can export its own
 *                       rc_rope_apply that wraps it (misbehaving before or after the call,
 *                       or calling it with changed arguments)
 */
#ifndef ROPECHECK_MUTANT_COMMON_H
#define ROPECHECK_MUTANT_COMMON_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ropecheck/kernel_abi.h"

#if defined(MK_FLUSH_DENORMALS) && (defined(__x86_64__) || defined(__i386__))
#include <xmmintrin.h>
#define MK_HAVE_MXCSR 1
#endif

#define RC_EXPORT __attribute__((visibility("default")))

static float mk_bits_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static uint32_t mk_f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }

static float mk_f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0x1f) return mk_bits_f32(sign | 0x7f800000u | (m << 13));
  if (e == 0) { float v = (float)m * 0x1p-24f; return mk_bits_f32(mk_f32_bits(v) | sign); }
  return mk_bits_f32(sign | ((e + 112u) << 23) | (m << 13));
}

static uint16_t mk_f32_to_f16(float f) {
  uint32_t x = mk_f32_bits(f), sign = (x >> 16) & 0x8000u, o;
  x &= 0x7fffffffu;
  if (x >= 0x47800000u) {
    o = x > 0x7f800000u ? (0x7e00u | ((x >> 13) & 0x3ffu)) : 0x7c00u;
  } else if (x < 0x38800000u) {
    float v = mk_bits_f32(x) + 0.5f;
    o = mk_f32_bits(v) - 0x3f000000u;
  } else {
    uint32_t odd = (x >> 13) & 1u;
    x += ((uint32_t)(15 - 127) << 23) + 0xfffu + odd;
    o = x >> 13;
  }
  return (uint16_t)(o | sign);
}

static uint16_t mk_f32_to_bf16(float f) {
  uint32_t u = mk_f32_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x0040u);
#ifdef MUT_TRUNCATE
  return (uint16_t)(u >> 16); /* BUG: truncates instead of rounding to nearest even */
#else
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
#endif
}

static size_t mk_esize(uint32_t dt) { return dt == RC_F32 ? 4 : 2; }

static float mk_load(uint32_t dt, const void* p, size_t i) {
  if (dt == RC_F32) { float v; memcpy(&v, (const char*)p + 4 * i, 4); return v; }
  uint16_t h;
  memcpy(&h, (const char*)p + 2 * i, 2);
  return dt == RC_F16 ? mk_f16_to_f32(h) : mk_bits_f32((uint32_t)h << 16);
}

static void mk_store(uint32_t dt, void* p, size_t i, float v) {
  if (dt == RC_F32) { memcpy((char*)p + 4 * i, &v, 4); return; }
  uint16_t h = dt == RC_F16 ? mk_f32_to_f16(v) : mk_f32_to_bf16(v);
  memcpy((char*)p + 2 * i, &h, 2);
}

static void mk_copy(uint32_t dt, void* out, const void* in, size_t i, size_t n) {
  if (out != in) memmove((char*)out + i * mk_esize(dt), (const char*)in + i * mk_esize(dt), n * mk_esize(dt));
}

/* Elements i .. i+n-1 keep their value (pass-through dims, a pair at angle 0): copied, or through float
 * arithmetic (MK_PASS_*); `one` is cos 0 = 1 from the kernel's cos/sin row. */
static inline void mk_keep(uint32_t dt, void* out, const void* in, size_t i, size_t n, const float* one) {
#if defined(MK_PASS_FLOAT) || defined(MK_PASS_MUL1) || defined(MK_PASS_ADD0)
  for (size_t k = i; k < i + n; ++k) {
    const float x = mk_load(dt, in, k);
#if defined(MK_PASS_MUL1)
    mk_store(dt, out, k, x * *one);
#elif defined(MK_PASS_ADD0)
    mk_store(dt, out, k, 0.0f + x);
#else
    mk_store(dt, out, k, x);
#endif
  }
  (void)one;
  (void)mk_copy;
#else
  (void)one;
  mk_copy(dt, out, in, i, n);
#endif
}

#ifdef MK_FLUSH_DENORMALS
/* A subnormal of the storage type becomes a zero of its sign. */
static float mk_flush_value(uint32_t dt, float v) {
  const float mn = dt == RC_F16 ? 0x1p-14f : 0x1p-126f;
  return fabsf(v) < mn && v != 0 ? copysignf(0.0f, v) : v;
}
static float mk_load_flushed(uint32_t dt, const void* p, size_t i) { return mk_flush_value(dt, mk_load(dt, p, i)); }
/* Rounds to the storage type first, so that a value that rounds up to the
 * smallest normal is kept and one that rounds to a subnormal is flushed. */
static void mk_store_flushed(uint32_t dt, void* p, size_t i, float v) {
  mk_store(dt, p, i, v);
  mk_store(dt, p, i, mk_flush_value(dt, mk_load(dt, p, i)));
}
#endif

static inline int mk_check(const rc_rope_args* a) {
  if (!a || a->abi_version != ROPECHECK_ABI_VERSION) return 2;
  if (a->dtype > RC_BF16 || a->layout > RC_HALF_SPLIT) return 2;
  if (a->rotary_dim < 2 || a->rotary_dim % 2 || a->rotary_dim > a->head_dim || a->n_heads == 0) return 2;
  if (a->n_tokens && (!a->positions || !a->in || !a->out)) return 2;
  return RC_OK;
}

typedef struct { float c, s; int identity; } mk_cs;

static void mk_pair_dims(uint32_t layout, uint32_t rd, uint32_t i, uint32_t* d0, uint32_t* d1) {
#ifdef MUT_PAIRING
  (void)layout; (void)rd; /* BUG: always pairs (2i, 2i+1), whatever the layout */
  *d0 = 2 * i; *d1 = 2 * i + 1;
#else
  if (layout == RC_INTERLEAVED) { *d0 = 2 * i; *d1 = 2 * i + 1; }
  else { *d0 = i; *d1 = i + rd / 2; }
#endif
}

/* ok_double's loop (theta, the angle, cos and sin and the rotation in double, one rounding to the output), for
 * ok_double and the kernels that change one step of it: define MK_DOUBLE_KERNEL (with MK_NO_KERNEL) and any of
 * MK_DOUBLE_POSITION(p) (the position as a double, from the int64 p), MK_DOUBLE_THETA(theta) (a double
 * expression), MK_DOUBLE_SINCOS(angle, c, s) (a statement setting doubles c and s), MK_DOUBLE_STORE(dt, p, k, v,
 * i, np) (storing the float v of pair i of np as element k) and MK_DOUBLE_DECLINE(a) (true for a call to decline)
 * before including this file. */
#ifdef MK_DOUBLE_KERNEL
#ifndef MK_DOUBLE_POSITION
#define MK_DOUBLE_POSITION(p) ((double)(p))
#endif
#ifndef MK_DOUBLE_DECLINE
#define MK_DOUBLE_DECLINE(a) 0
#endif
#ifndef MK_DOUBLE_THETA
#define MK_DOUBLE_THETA(theta) (theta)
#endif
#ifndef MK_DOUBLE_SINCOS
#define MK_DOUBLE_SINCOS(angle, c, s) ((c) = cos(angle), (s) = sin(angle))
#endif
#ifndef MK_DOUBLE_STORE
#define MK_DOUBLE_STORE(dt, p, k, v, i, np) mk_store(dt, p, k, v)
#endif
/* Whether a call has a position outside int32 (a kernel that takes int32 positions declines it). */
static inline int mk_positions_beyond_int32(const rc_rope_args* a) {
  for (uint64_t k = 0; k < a->n_tokens; ++k)
    if (a->positions[k] > INT32_MAX || a->positions[k] < INT32_MIN) return 1;
  return 0;
}
/* A value rounded to f32, then to bf16 (nearest even). */
static inline double mk_round_bf16(double v) { return mk_bits_f32((uint32_t)mk_f32_to_bf16((float)v) << 16); }

RC_EXPORT int rc_rope_apply(const rc_rope_args* a) {
  int rc = mk_check(a);
  if (rc != RC_OK) return rc;
  if (MK_DOUBLE_DECLINE(a)) return RC_UNSUPPORTED;
  const uint32_t dt = a->dtype, hd = a->head_dim, rd = a->rotary_dim, np = rd / 2;
  for (uint64_t t = 0; t < a->n_tokens; ++t) {
    const double m = MK_DOUBLE_POSITION(a->positions[t]);
    for (uint32_t i = 0; i < np; ++i) {
      const double theta = MK_DOUBLE_THETA(a->inv_freq ? a->inv_freq[i] : pow(a->base, -2.0 * i / rd));
      const double angle = m * a->position_scale * theta;
      double c, s;
      MK_DOUBLE_SINCOS(angle, c, s);
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
        MK_DOUBLE_STORE(dt, a->out, base + d0, (float)(x0 * c - x1 * s), i, np);
        MK_DOUBLE_STORE(dt, a->out, base + d1, (float)(x0 * s + x1 * c), i, np);
      }
    }
    for (uint32_t h = 0; h < a->n_heads && rd < hd; ++h)
      mk_copy(dt, a->out, a->in, ((size_t)t * a->n_heads + h) * hd + rd, hd - rd);
  }
  return RC_OK;
}
#endif

#ifdef MK_KERNEL_NAME
#define MK_KERNEL_DEFINITION static int MK_KERNEL_NAME
#else
#define MK_KERNEL_DEFINITION RC_EXPORT int rc_rope_apply
#endif

#ifndef MK_NO_KERNEL
MK_KERNEL_DEFINITION(const rc_rope_args* a) {
  int rc = mk_check(a);
  if (rc != RC_OK) return rc;
#ifdef MUT_DECLINE_ALL
  return RC_UNSUPPORTED; /* BUG: declines everything */
#endif
  const uint32_t dt = a->dtype, hd = a->head_dim, rd = a->rotary_dim, np = rd / 2;
#ifdef MUT_CRASH
  if (hd >= 128) { volatile int* p = NULL; *p = 1; } /* BUG: crashes on large heads */
#endif
#ifdef MUT_HANG
  if (a->n_tokens > 6) { volatile unsigned long spin = 0; for (;;) ++spin; } /* BUG: never returns */
#endif
  double* theta = (double*)malloc(np * sizeof(double));
  mk_cs* row = (mk_cs*)malloc((np + 1) * sizeof(mk_cs)); /* row[np]: angle 0, for the pass-through dims */
  if (!theta || !row) { free(theta); free(row); return 3; }
#if defined(MK_ANGLE_POWF_F32)
  float* inv_f32 = (float*)malloc(np * sizeof(float));
  if (!inv_f32) { free(theta); free(row); return 3; }
  for (uint32_t i = 0; i < np; ++i)
    inv_f32[i] = a->inv_freq ? (float)a->inv_freq[i] : 1.0f / powf((float)a->base, (float)(2 * i) / (float)rd);
#elif defined(MK_ANGLE_GGML)
  const float theta_scale = powf((float)a->base, -2.0f / (float)rd);
#endif
  for (uint32_t i = 0; i < np; ++i) {
#if defined(MUT_FREQ_HEAD_DIM)
    theta[i] = a->inv_freq ? a->inv_freq[i] : pow(a->base, -2.0 * i / hd); /* BUG: head_dim, not rotary_dim */
#elif defined(MUT_EXPONENT)
    theta[i] = a->inv_freq ? a->inv_freq[i] : pow(a->base, -(double)i / rd); /* BUG: exponent -i/d */
#else
    theta[i] = a->inv_freq ? a->inv_freq[i] : pow(a->base, -2.0 * i / rd);
#endif
  }
  void* in = (void*)a->in; /* non-const only for the input-modifying bug */
  void* out = a->out;
#ifdef MUT_INPUT_MODIFIED
  out = in; /* BUG: works in place on the caller's input, then copies it out */
#endif
#ifdef MK_HAVE_MXCSR
  const unsigned int mk_saved_csr = _mm_getcsr();
  _mm_setcsr(mk_saved_csr | 0x8040u); /* FTZ (bit 15) and DAZ (bit 6), as -ffast-math's startup code sets */
#endif
  for (uint64_t t = 0; t < a->n_tokens; ++t) {
#if defined(MUT_POS_OFF_BY_ONE)
    const double m = (double)(a->positions[t] + 1); /* BUG: position + 1 */
#elif defined(MUT_POS_IGNORED)
    const double m = (double)t; /* BUG: the token index, not its position */
#else
    const double m = (double)a->positions[t];
#endif
#if defined(MK_ANGLE_POWF_F32)
    float mf = (float)a->positions[t];
    if (a->position_scale != 1.0) mf = mf * (float)a->position_scale;
    (void)m;
#elif defined(MK_ANGLE_GGML)
    float theta_g = (float)a->positions[t];
    (void)m;
#endif
    for (uint32_t i = 0; i < np; ++i) {
#if defined(MK_ANGLE_POWF_F32)
      const float ang = mf * inv_f32[i];
      const double angle = ang;
      float c = cosf(ang), s = sinf(ang);
#elif defined(MK_ANGLE_GGML)
      float ang = a->inv_freq ? (float)a->positions[t] * (float)a->inv_freq[i] : theta_g;
      if (a->position_scale != 1.0) ang = (float)a->position_scale * ang;
      theta_g *= theta_scale;
      const double angle = ang;
      float c = cosf(ang), s = sinf(ang);
#else
#ifdef MUT_FP32_ANGLE
      const float ang = (float)m * (float)a->position_scale * (float)theta[i]; /* BUG: f32 angle */
      const double angle = ang;
#else
      const double angle = m * a->position_scale * theta[i];
#endif
      float c = (float)cos(angle), s = (float)sin(angle);
#endif
#ifdef MK_CACHE_F16
      c = mk_f16_to_f32(mk_f32_to_f16(c)); /* cos/sin cache stored in f16 */
      s = mk_f16_to_f32(mk_f32_to_f16(s));
#endif
#ifdef MUT_BF16_CACHE
      c = mk_bits_f32(mk_f32_to_bf16(c) << 16); /* BUG: cos/sin cache stored in bf16 */
      s = mk_bits_f32(mk_f32_to_bf16(s) << 16);
#endif
#ifdef MUT_BF16_CACHE_TRUNCATED
      c = mk_bits_f32(mk_f32_bits(c) & 0xffff0000u); /* BUG: the bf16 cache keeps cos's high 16 bits (truncates) */
      s = mk_bits_f32(mk_f32_bits(s) & 0xffff0000u);
#endif
      row[i].c = c;
      row[i].s = s;
      row[i].identity = angle == 0;
    }
    row[np].c = (float)cos(0.0);
    row[np].s = (float)sin(0.0);
    row[np].identity = 1;
    for (uint32_t h = 0; h < a->n_heads; ++h) {
      const size_t base = ((size_t)t * a->n_heads + h) * hd;
      for (uint32_t i = 0; i < np; ++i) {
        uint32_t d0, d1;
        mk_pair_dims(a->layout, rd, i, &d0, &d1);
        const size_t k0 = base + d0, k1 = base + d1;
#ifdef MUT_VECTOR_TAIL
        if (i >= np - np % 8) { /* BUG: the tail after the last block of 8 pairs is copied, not rotated */
          mk_copy(dt, out, in, k0, 1);
          mk_copy(dt, out, in, k1, 1);
          continue;
        }
#endif
#ifndef MK_NO_IDENTITY
        if (row[i].identity) {
          mk_keep(dt, out, in, k0, 1, &row[i].c);
          mk_keep(dt, out, in, k1, 1, &row[i].c);
          continue;
        }
#endif
#ifdef MK_FLUSH_DENORMALS
        float x0 = mk_load_flushed(dt, in, k0), x1 = mk_load_flushed(dt, in, k1);
#else
        float x0 = mk_load(dt, in, k0), x1 = mk_load(dt, in, k1);
#endif
#ifdef MUT_NAN_FLUSH
        if (isnan(x0)) x0 = 0; /* BUG: NaN inputs flushed to zero */
        if (isnan(x1)) x1 = 0;
#endif
        const float c = row[i].c, s = row[i].s;
#if defined(MK_FLUSH_DENORMALS)
        mk_store_flushed(dt, out, k0, x0 * c - x1 * s);
        mk_store_flushed(dt, out, k1, x0 * s + x1 * c);
#elif defined(MUT_COS_SIN_SWAPPED)
        mk_store(dt, out, k0, x0 * s - x1 * c); /* BUG: cos and sin swapped */
        mk_store(dt, out, k1, x0 * c + x1 * s);
#elif defined(MUT_SIGN)
        mk_store(dt, out, k0, x0 * c + x1 * s); /* BUG: rotates by -angle */
        mk_store(dt, out, k1, -x0 * s + x1 * c);
#elif defined(MUT_INPLACE_ALIAS)
        mk_store(dt, out, k0, x0 * c - x1 * s);
        x0 = mk_load(dt, in, k0); /* BUG: re-reads x0 after writing out: wrong when out == in */
        mk_store(dt, out, k1, x0 * s + x1 * c);
#else
        mk_store(dt, out, k0, x0 * c - x1 * s);
        mk_store(dt, out, k1, x0 * s + x1 * c);
#endif
      }
#if defined(MUT_ROW_OVERRUN)
      /* BUG (ggml's odd head_dim pass-through): copies two elements at a time, so with an odd number of
       * pass-through dims it reads and writes one element past the row (past the buffer on the last one) */
      for (uint32_t k = rd; k < hd; k += 2) mk_copy(dt, out, in, base + k, 2);
#elif defined(MUT_PASSTHROUGH)
      for (uint32_t k = rd; k < hd; ++k) mk_store(dt, out, base + k, 0.0f); /* BUG: pass-through zeroed */
#elif defined(MUT_OOB_WRITE)
      /* BUG: the pass-through copy of the last head writes one element too many */
      const int last = t + 1 == a->n_tokens && h + 1 == a->n_heads;
      if (rd < hd || last) {
        if (out != in) mk_copy(dt, out, in, base + rd, hd - rd);
        if (last) mk_store(dt, out, base + hd, mk_load(dt, out, base + hd - 1));
      }
#else
      if (rd < hd) mk_keep(dt, out, in, base + rd, hd - rd, &row[np].c);
#endif
    }
  }
#ifdef MUT_INPUT_MODIFIED
  mk_copy(dt, a->out, in, 0, (size_t)a->n_tokens * a->n_heads * hd);
#endif
#ifdef MK_ANGLE_POWF_F32
  free(inv_f32);
#endif
#ifdef MK_HAVE_MXCSR
  _mm_setcsr(mk_saved_csr);
#endif
  free(theta);
  free(row);
  return RC_OK;
}
#endif /* MK_NO_KERNEL */

/* ---- ABI v2 -------------------------------------------------------------------------------------------
 * MK_V2: a correct v2 kernel instead (it also takes v1 calls): every v2 feature (rotary_offset, position
 * axes with pair_axis, attention_factor, every rc_freq_rule kind, negative positions). theta_i, the
 * rule's table and the angle in long double, cos/sin in double (times attention_factor), the rotation in
 * double, each output rounded once to f32 (then RNE to f16/bf16); elements outside [o, o+R) copied bit
 * for bit; a pair whose angle is exactly 0 under an attention factor of 1 is copied.
 * Switches that plant one classic variant bug each (tests/kernels/mutants/mut_*.c; they show only on v2 calls):
 *   MUT_ATTN_TWICE       cos and sin multiplied by attention_factor, and the rotated pair again
 *   MUT_ATTN_NEVER       attention_factor ignored
 *   MUT_MROPE_SECTIONS   pair_axis read as Qwen2-VL's contiguous sections: the number of pairs on each
 *                        axis is counted and the pairs assigned in axis order (0..n0-1 axis 0, the next
 *                        n1 axis 1, ...): right for contiguous maps, wrong for interleaved ones (Qwen3-VL)
 *   MUT_YARN_REVERSED    the YaRN ramp reversed: theta_i = theta0_i*ramp + theta0_i/f*(1 - ramp)
 *                        (interpolated where it should extrapolate and back)
 *   MUT_LLAMA3_WAVELEN   llama3's smoothing from wavelen/L where L/wavelen is meant:
 *                        smooth = (wavelen/L - low)/(high - low)
 */
#ifdef MK_V2
static long double mk_v2_default_theta(long double base, uint32_t i, uint32_t rd) {
  return powl(base, -(long double)(2 * i) / (long double)rd);
}

/* theta_i of a v2 call (a rule's table, the inv_freq table, or base^(-2i/R)); 0 or an error code. */
static int mk_v2_theta(const rc_rope_args* a, long double* th) {
  const uint32_t rd = a->rotary_dim, np = rd / 2;
  const rc_freq_rule* r = a->abi_version >= 2 ? a->freq_rule : NULL;
  const long double base = a->base;
  if (!r) {
    for (uint32_t i = 0; i < np; ++i) th[i] = a->inv_freq ? (long double)a->inv_freq[i] : mk_v2_default_theta(base, i, rd);
    return 0;
  }
  const long double f = r->factor;
#ifdef MUT_RULE_IGNORED
  /* BUG: the rule is accepted but not applied (a kernel that drops the model's rope_scaling) */
  if (r->kind <= RC_FREQ_LLAMA3) {
    for (uint32_t i = 0; i < np; ++i) th[i] = mk_v2_default_theta(base, i, rd);
    return 0;
  }
#endif
  switch (r->kind) {
    case RC_FREQ_DEFAULT:
      for (uint32_t i = 0; i < np; ++i) th[i] = mk_v2_default_theta(base, i, rd);
      return 0;
    case RC_FREQ_LINEAR:
      for (uint32_t i = 0; i < np; ++i) th[i] = mk_v2_default_theta(base, i, rd) / f;
      return 0;
    case RC_FREQ_DYNAMIC: {
      const uint64_t L = r->max_position_embeddings, s = r->seq_len > L ? r->seq_len : L;
      if (L == 0 || rd <= 2) return 2;
      const long double x = f * (long double)s / (long double)L - (f - 1);
      const long double b2 = base * powl(x, (long double)rd / (long double)(rd - 2));
      for (uint32_t i = 0; i < np; ++i) th[i] = mk_v2_default_theta(b2, i, rd);
      return 0;
    }
    case RC_FREQ_NTK: {
      if (rd <= 2) return 2;
      const long double b2 = base * powl(f, (long double)rd / (long double)(rd - 2));
      for (uint32_t i = 0; i < np; ++i) th[i] = mk_v2_default_theta(b2, i, rd);
      return 0;
    }
    case RC_FREQ_YARN: {
      const long double L = (long double)r->original_max_position_embeddings;
      const long double bf = r->beta_fast == 0 ? 32 : r->beta_fast, bs = r->beta_slow == 0 ? 1 : r->beta_slow;
      const long double two_pi = 6.283185307179586476925286766559L, tlb = 2 * logl(base);
      long double lo = (long double)rd * logl(L / (two_pi * bf)) / tlb;
      long double hi = (long double)rd * logl(L / (two_pi * bs)) / tlb;
      if (r->truncate) { lo = floorl(lo); hi = ceill(hi); }
      if (lo < 0) lo = 0;
      if (hi > (long double)(rd - 1)) hi = (long double)(rd - 1);
      if (lo == hi) hi += 0.001L;
      for (uint32_t i = 0; i < np; ++i) {
        long double ramp = ((long double)i - lo) / (hi - lo);
        if (ramp < 0) ramp = 0;
        if (ramp > 1) ramp = 1;
        const long double t0 = mk_v2_default_theta(base, i, rd);
#ifdef MUT_YARN_REVERSED
        th[i] = t0 * ramp + t0 / f * (1 - ramp); /* BUG: the ramp reversed */
#else
        th[i] = t0 * (1 - ramp) + t0 / f * ramp;
#endif
      }
      return 0;
    }
    case RC_FREQ_LONGROPE: {
      const int use_long = r->seq_len > r->original_max_position_embeddings;
      const double* lambda = use_long ? r->long_factor : r->short_factor;
      if (!lambda) return 2;
      for (uint32_t i = 0; i < np; ++i) th[i] = mk_v2_default_theta(base, i, rd) / (long double)lambda[i];
      return 0;
    }
    case RC_FREQ_LLAMA3: {
      const long double L = (long double)r->original_max_position_embeddings;
      const long double low = r->low_freq_factor, high = r->high_freq_factor;
      const long double two_pi = 6.283185307179586476925286766559L;
      for (uint32_t i = 0; i < np; ++i) {
        const long double t0 = mk_v2_default_theta(base, i, rd), wavelen = two_pi / t0;
        if (wavelen < L / high) {
          th[i] = t0;
        } else if (wavelen > L / low) {
          th[i] = t0 / f;
        } else {
#ifdef MUT_LLAMA3_WAVELEN
          const long double smooth = (wavelen / L - low) / (high - low); /* BUG: wavelen/L, not L/wavelen */
#else
          const long double smooth = (L / wavelen - low) / (high - low);
#endif
          th[i] = (1 - smooth) * t0 / f + smooth * t0;
        }
      }
      return 0;
    }
  }
  return RC_UNSUPPORTED;
}

RC_EXPORT int rc_rope_apply(const rc_rope_args* a) {
  if (!a) return 2;
  if (a->abi_version < 1 || a->abi_version > 2) return RC_UNSUPPORTED;
  const int v2 = a->abi_version == 2;
  if (a->dtype > RC_BF16 || a->layout > RC_HALF_SPLIT) return 2;
  const uint32_t dt = a->dtype, hd = a->head_dim, rd = a->rotary_dim, np = rd / 2;
  const uint32_t o = v2 ? a->rotary_offset : 0, axes = v2 ? a->n_pos_axes : 1;
  if (rd < 2 || rd % 2 || (uint64_t)o + rd > hd || a->n_heads == 0) return 2;
  if (axes < 1 || axes > 4) return 2;
  if (a->n_tokens && (!a->positions || !a->in || !a->out)) return 2;
  const double af = v2 ? a->attention_factor : 1.0;
  if (!(af > 0) || !isfinite(af)) return 2;
  long double* th = (long double*)malloc(np * sizeof(long double));
  uint8_t* axis = (uint8_t*)malloc(np);
  if (!th || !axis) { free(th); free(axis); return 3; }
  int rc = mk_v2_theta(a, th);
  if (rc != 0) { free(th); free(axis); return rc; }
  for (uint32_t i = 0; i < np; ++i) {
    axis[i] = v2 && a->pair_axis ? a->pair_axis[i] : 0;
    if (axis[i] >= axes) { free(th); free(axis); return 2; }
  }
#ifdef MUT_MROPE_SECTIONS
  if (v2 && a->pair_axis) { /* BUG: the map taken as contiguous sections in axis order (Qwen2-VL) */
    uint32_t count[4] = {0, 0, 0, 0}, k = 0;
    for (uint32_t i = 0; i < np; ++i) ++count[axis[i]];
    for (uint32_t ax = 0; ax < axes; ++ax)
      for (uint32_t j = 0; j < count[ax]; ++j) axis[k++] = (uint8_t)ax;
  }
#endif
#if defined(MUT_ATTN_NEVER)
  const double cs_scale = 1.0; /* BUG: the attention factor ignored */
#elif defined(MUT_ATTN_TWICE)
  const double cs_scale = af * af; /* BUG: the attention factor applied to cos/sin and again to the result */
#else
  const double cs_scale = af;
#endif
  for (uint64_t t = 0; t < a->n_tokens; ++t) {
    for (uint32_t h = 0; h < a->n_heads; ++h) {
      const size_t base = ((size_t)t * a->n_heads + h) * hd;
      for (uint32_t i = 0; i < np; ++i) {
        const long double m = (long double)a->positions[(size_t)axis[i] * a->n_tokens + t];
        const long double angle = m * (long double)a->position_scale * th[i];
        uint32_t d0, d1;
        mk_pair_dims(a->layout, rd, i, &d0, &d1);
        const size_t k0 = base + o + d0, k1 = base + o + d1;
        if (angle == 0 && cs_scale == 1.0) {
          mk_copy(dt, a->out, a->in, k0, 1);
          mk_copy(dt, a->out, a->in, k1, 1);
          continue;
        }
        const double c = cos((double)angle) * cs_scale, s = sin((double)angle) * cs_scale;
        const double x0 = mk_load(dt, a->in, k0), x1 = mk_load(dt, a->in, k1);
        mk_store(dt, a->out, k0, (float)(x0 * c - x1 * s));
        mk_store(dt, a->out, k1, (float)(x0 * s + x1 * c));
      }
      if (o > 0) mk_copy(dt, a->out, a->in, base, o);
      if (o + rd < hd) mk_copy(dt, a->out, a->in, base + o + rd, hd - o - rd);
    }
  }
  free(th);
  free(axis);
  return RC_OK;
}
#endif /* MK_V2 */

#endif
