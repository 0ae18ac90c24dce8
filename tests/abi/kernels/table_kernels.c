/* Kernels written against the ABI v3 header the way five production kernels take their arguments, from each
 * one's documented semantics (../shared/research/kernel-interfaces.md), each also with the bugs users reported
 * in it planted. They know nothing of how they are tested; test_abi gates them (AbiV3Kernels.*).
 *
 *   STYLE_VLLM      vLLM's CPU rotary_embedding: one cos|sin cache [P][R] of the activations' dtype (COS_SIN_CAT),
 *                   in place only, q and an optional k with their own head counts and token/head strides,
 *                   explicit int64 positions (the legacy form or the tensor form of rank 3). No inverse on CPU.
 *   STYLE_FA        FlashAttention's apply_rotary: cos and sin [P][R/2] (COS_SIN_2, f32 or the activations'
 *                   dtype), the tensor form of rank 3 or 4, any strides, out of place or in place, explicit
 *                   int32/int64 positions or implicit ones (seq_offsets, varlen cu_seqlens), `conjugate` (the
 *                   inverse). One tensor: k is declined. With FA_IMPLICIT_ONLY, as apply_rotary_emb is called:
 *                   no positions tensor, only implicit ones (int32 cu_seqlens and seqlen_offsets).
 *   STYLE_BACKWARD  ggml's rope / rope_back: angles from base, inv_freq or position_scale computed in double, the
 *                   legacy form, forward and inverse, the attention factor kept by the inverse.
 *   STYLE_FLASHINFER FlashInfer's apply_rope_pos_ids: no table (angles from rope_theta and rope_scale, here
 *                   base and position_scale, computed in double), the tensor form of rank 3 only, q and an
 *                   optional k with their own head counts and strides, explicit int32 pos_ids of one axis, out of
 *                   place (q_rope, k_rope) or in place (apply_rope_pos_ids_inplace). Forward only.
 *   STYLE_MLX       MLX's fast.rope: no table (base, scale), the tensor form of rank 4 ({B, S, H, D}) only, implicit
 *                   positions: token s of row b at s + offset[b] (int32 offsets), out of place. One tensor.
 *
 *   PLANT_ROW_BY_TOKEN   (vLLM) the cache row of token t is row t, not row positions[t]
 *   PLANT_K_HEAD_STRIDE  (vLLM) k's heads are taken q's head stride apart (Liger #342)
 *   PLANT_VARLEN_OFFSET  (FA) implicit positions count from the start of the batch, not of each sequence
 *                        (MLX #3494, TE #1930)
 *   PLANT_INVERSE_IGNORED (FA) `conjugate` is ignored: the inverse rotates forward (FlashAttention #569)
 *   PLANT_TABLE_OVERREAD (FA) reads one cos and one sin past its row's last pair, unused (the AVX2 tail of a real
 *                        kernel: only a guard page after the table sees it)
 *   PLANT_INV_DROPS_AF   (backward) the inverse drops the attention factor (llama.cpp #3974's family)
 *   PLANT_K_Q_HEADS      (FlashInfer) k rotated for q's head count (Liger #342's family: GQA with Hk < Hq)
 *   PLANT_FIRST_OFFSET   (MLX) every row of the batch at offset[0] (MLX #3494: offsets with batch > 1)
 *   PLANT_INT32_OFFSETS  (FA) element offsets computed in 32-bit int (tensors of more than 2^31 elements) */
#include <ropecheck/kernel_abi.h>

#include "v1_rope_body.h"

typedef struct {
  char* base;
  int64_t st_tok, st_seq, st_head;  /* element strides: token (rank 3) or sequence/token (rank 4), head */
  int64_t heads;
} view_t;

static int64_t stride_of(const rc_tensor* t, int d) {
  if (t->strides) return t->strides[d];
  int64_t s = 1;
  for (int k = t->ndim - 1; k > d; --k) s *= t->shape[k];
  return s;
}

static char* base_of(const rc_tensor* t) { return (char*)t->data + t->byte_offset; }

static int64_t load_int(const rc_tensor* t, int64_t i) {
  const char* p = base_of(t);
  const int64_t e = i * (t->strides ? t->strides[0] : 1);
  if (t->dtype.bits == 32) {
    int32_t v;
    memcpy(&v, p + 4 * e, 4);
    return v;
  }
  int64_t v;
  memcpy(&v, p + 8 * e, 8);
  return v;
}

/* q (or k) and its output as element offsets: token t's head h at (t, h). */
static size_t at(const view_t* v, int rank, int64_t S, int64_t t, int64_t h) {
#ifdef PLANT_INT32_OFFSETS
  /* BUG: the offset computed in 32-bit int, as a kernel indexing with int (a Triton kernel's default; the
     wrap-around written out: signed overflow is undefined in C) */
  const uint32_t o = rank == 4 ? (uint32_t)(t / S) * (uint32_t)v->st_seq + (uint32_t)(t % S) * (uint32_t)v->st_tok +
                                     (uint32_t)h * (uint32_t)v->st_head
                               : (uint32_t)t * (uint32_t)v->st_tok + (uint32_t)h * (uint32_t)v->st_head;
  return (size_t)(int64_t)(int32_t)o;
#endif
  if (rank == 4) return (size_t)((t / S) * v->st_seq + (t % S) * v->st_tok + h * v->st_head);
  return (size_t)(t * v->st_tok + h * v->st_head);
}

static void make_view(const rc_tensor* t, view_t* v) {
  v->base = base_of(t);
  if (t->ndim == 4) {
    v->st_seq = stride_of(t, 0);
    v->st_tok = stride_of(t, 1);
    v->st_head = stride_of(t, 2);
    v->heads = t->shape[2];
  } else {
    v->st_seq = 0;
    v->st_tok = stride_of(t, 0);
    v->st_head = stride_of(t, 1);
    v->heads = t->shape[1];
  }
}

/* One head: pairs rotated by (c, s) per pair (af in them), the rest passed through; out may be in. */
static void rotate_head(uint32_t dt, uint32_t layout, uint32_t D, uint32_t R, const char* in, char* out,
                        const double* cs, const double* sn) {
  const size_t es = dt == RC_F32 ? 4 : 2;
  for (uint32_t d = R; d < D; ++d)
    if (in != out) memcpy(out + d * es, in + d * es, es);
  for (uint32_t i = 0; i < R / 2; ++i) {
    const uint32_t a = layout == RC_INTERLEAVED ? 2 * i : i, b = layout == RC_INTERLEAVED ? 2 * i + 1 : i + R / 2;
    const double x = abi_load(dt, in, a), y = abi_load(dt, in, b);
    abi_store(dt, out, a, (float)(x * cs[i] - y * sn[i]));
    abi_store(dt, out, b, (float)(x * sn[i] + y * cs[i]));
  }
}

static double table_value(const rc_tensor* t, int64_t row, int64_t col) {
  const int64_t e = row * stride_of(t, 0) + col;
  const uint32_t dt = t->dtype.code == RC_DL_BFLOAT ? RC_BF16 : t->dtype.bits == 16 ? RC_F16 : RC_F32;
  return abi_load(dt, base_of(t), (size_t)e);
}

static int table_dtype_ok(const rc_tensor* t, uint32_t call_dtype, int allow_f32) {
  if (!t->data || t->ndim != 2 || t->dtype.lanes != 1) return 0;
  if (t->shape[1] > 1 && t->strides && t->strides[1] != 1) return 0;
  const uint32_t dt = t->dtype.code == RC_DL_BFLOAT ? RC_BF16 : t->dtype.code == RC_DL_FLOAT && t->dtype.bits == 16 ? RC_F16
                      : t->dtype.code == RC_DL_FLOAT && t->dtype.bits == 32                                     ? RC_F32
                                                                                                                : 99;
  return dt == call_dtype || (allow_f32 && dt == RC_F32);
}

#define MAX_PAIRS 512

#if defined(STYLE_VLLM)
static int apply(const rc_rope_args* a) {
  if (a->abi_version < 3) return RC_UNSUPPORTED; /* its cache comes from the caller: no table, no call */
  if (a->rotary_offset || a->n_pos_axes > 1 || a->pair_axis || a->direction != RC_FORWARD) return RC_UNSUPPORTED;
  if (a->table_kind != RC_TABLE_COS_SIN_CAT || !table_dtype_ok(&a->table, a->dtype, 0)) return RC_UNSUPPORTED;
  if (a->attention_factor != 0.0 && a->attention_factor != 1.0) return RC_UNSUPPORTED;
  const uint32_t D = a->head_dim, R = a->rotary_dim;
  if (R / 2 > MAX_PAIRS || a->table.shape[1] != R) return RC_UNSUPPORTED;
  const size_t es = a->dtype == RC_F32 ? 4 : 2;
  view_t q, k;
  int64_t T, kh = 0;
  const rc_tensor* pos = NULL;
  if (!a->q.data) {
    if (a->in != a->out) return RC_UNSUPPORTED; /* in place only */
    q.base = (char*)a->out;
    q.heads = a->n_heads;
    q.st_head = D;
    q.st_tok = (int64_t)a->n_heads * D;
    T = (int64_t)a->n_tokens;
  } else {
    if (a->q.ndim != 3 || !a->pos.data || a->pos.ndim != 1 || a->pos.dtype.bits != 64 || a->cu_seqlens.data)
      return RC_UNSUPPORTED;
    if (base_of(&a->q_out) != base_of(&a->q)) return RC_UNSUPPORTED;
    if (a->k.data && base_of(&a->k_out) != base_of(&a->k)) return RC_UNSUPPORTED;
    make_view(&a->q, &q);
    T = a->q.shape[0];
    pos = &a->pos;
    if (a->k.data) {
      make_view(&a->k, &k);
      kh = k.heads;
#ifdef PLANT_K_HEAD_STRIDE
      k.st_head = q.st_head; /* BUG: k's heads taken q's head stride apart */
#endif
    }
  }
  for (int64_t t = 0; t < T; ++t) {
    const int64_t m = pos ? load_int(pos, t) : a->positions[t];
    if (m < 0 || m >= a->table.shape[0]) return 2;
  }
  double cs[MAX_PAIRS], sn[MAX_PAIRS];
  for (int64_t t = 0; t < T; ++t) {
    int64_t row = pos ? load_int(pos, t) : a->positions[t];
#ifdef PLANT_ROW_BY_TOKEN
    row = t; /* BUG: the token's index, not its position */
#endif
    for (uint32_t i = 0; i < R / 2; ++i) {
      cs[i] = table_value(&a->table, row, i);
      sn[i] = table_value(&a->table, row, R / 2 + i);
    }
    for (int64_t h = 0; h < q.heads; ++h) {
      char* p = q.base + at(&q, 3, 1, t, h) * es;
      rotate_head(a->dtype, a->layout, D, R, p, p, cs, sn);
    }
    for (int64_t h = 0; h < kh; ++h) {
      char* p = k.base + at(&k, 3, 1, t, h) * es;
      rotate_head(a->dtype, a->layout, D, R, p, p, cs, sn);
    }
  }
  return RC_OK;
}
#elif defined(STYLE_FA)
static int apply(const rc_rope_args* a) {
  if (a->abi_version < 3 || !a->q.data) return RC_UNSUPPORTED; /* the tensor form only */
  if (a->rotary_offset || a->n_pos_axes > 1 || a->pair_axis || a->k.data) return RC_UNSUPPORTED;
  if (a->table_kind != RC_TABLE_COS_SIN_2 || !table_dtype_ok(&a->table, a->dtype, 1) ||
      !table_dtype_ok(&a->table2, a->dtype, 1))
    return RC_UNSUPPORTED;
  if (a->attention_factor != 0.0 && a->attention_factor != 1.0) return RC_UNSUPPORTED;
  const uint32_t D = a->head_dim, R = a->rotary_dim;
  if (R / 2 > MAX_PAIRS || a->table.shape[1] != R / 2 || a->table2.shape[1] != R / 2) return RC_UNSUPPORTED;
  const int rank = a->q.ndim;
  if (rank != 3 && rank != 4) return RC_UNSUPPORTED;
  if (a->pos.data && a->pos.ndim != rank - 2) return RC_UNSUPPORTED; /* one axis, not axes-first */
  if (a->pos.data && (a->pos.ndim == 2 && a->pos.strides)) return RC_UNSUPPORTED;
#ifdef FA_IMPLICIT_ONLY
  if (a->pos.data || (a->cu_seqlens.data && a->cu_seqlens.dtype.bits != 32) ||
      (a->seq_offsets.data && a->seq_offsets.dtype.bits != 32))
    return RC_UNSUPPORTED;
#endif
  const size_t es = a->dtype == RC_F32 ? 4 : 2;
  view_t in, out;
  make_view(&a->q, &in);
  make_view(&a->q_out, &out);
  const int64_t S = rank == 4 ? a->q.shape[1] : a->q.shape[0];
  const int64_t T = rank == 4 ? a->q.shape[0] * S : a->q.shape[0];
  const int64_t rows = a->table.shape[0];
  double cs[MAX_PAIRS], sn[MAX_PAIRS];
  for (int pass = 0; pass < 2; ++pass) /* positions checked first: a declined call writes nothing */
    for (int64_t t = 0, b = 0; t < T; ++t) {
      int64_t m;
      if (a->pos.data) {
        m = load_int(&a->pos, t); /* {T} or compact {B, S} */
      } else {
        int64_t s = rank == 4 ? t % S : t, seq = rank == 4 ? t / S : 0;
        if (a->cu_seqlens.data) {
          while (load_int(&a->cu_seqlens, b + 1) <= t) ++b;
          seq = b;
#ifndef PLANT_VARLEN_OFFSET
          s = t - load_int(&a->cu_seqlens, b);
#endif /* BUG otherwise: s stays t, counted from the start of the batch */
        }
        m = s + (a->seq_offsets.data ? load_int(&a->seq_offsets, seq) : 0);
      }
      if (m < 0 || m >= rows) return 2;
      if (pass == 0) continue;
      const int inverse = a->direction == RC_INVERSE;
      for (uint32_t i = 0; i < R / 2; ++i) {
        cs[i] = table_value(&a->table, m, i);
        sn[i] = table_value(&a->table2, m, i);
#ifndef PLANT_INVERSE_IGNORED
        if (inverse) sn[i] = -sn[i];
#else
        (void)inverse; /* BUG: conjugate ignored */
#endif
      }
#ifdef PLANT_TABLE_OVERREAD
      volatile double past = table_value(&a->table, m, R / 2) + table_value(&a->table2, m, R / 2); /* BUG */
      (void)past;
#endif
      for (int64_t h = 0; h < in.heads; ++h)
        rotate_head(a->dtype, a->layout, D, R, in.base + at(&in, rank, S, t, h) * es,
                    out.base + at(&out, rank, S, t, h) * es, cs, sn);
    }
  return RC_OK;
}
#elif defined(STYLE_BACKWARD)
static int apply(const rc_rope_args* a) {
  if (a->abi_version < 1 || a->abi_version > 3) return RC_UNSUPPORTED;
  if (a->abi_version >= 2 && (a->rotary_offset || a->n_pos_axes > 1 || a->pair_axis || a->freq_rule))
    return RC_UNSUPPORTED;
  if (a->abi_version >= 3 && (a->table_kind != RC_TABLE_NONE || a->q.data)) return RC_UNSUPPORTED;
  const uint32_t D = a->head_dim, R = a->rotary_dim;
  if (R / 2 > MAX_PAIRS) return RC_UNSUPPORTED;
  const double af = a->abi_version >= 2 && a->attention_factor != 0.0 ? a->attention_factor : 1.0;
  const int inverse = a->abi_version >= 3 && a->direction == RC_INVERSE;
  const size_t es = a->dtype == RC_F32 ? 4 : 2;
  double cs[MAX_PAIRS], sn[MAX_PAIRS];
  for (uint64_t t = 0; t < a->n_tokens; ++t) {
    for (uint32_t i = 0; i < R / 2; ++i) {
      const double th = a->inv_freq ? a->inv_freq[i] : pow(a->base, -2.0 * i / R);
      const double ang = (double)a->positions[t] * a->position_scale * th;
      double f = af;
#ifdef PLANT_INV_DROPS_AF
      if (inverse) f = 1.0; /* BUG: the backward pass drops the attention factor */
#endif
      cs[i] = f * cos(ang);
      sn[i] = (inverse ? -f : f) * sin(ang);
    }
    for (uint32_t h = 0; h < a->n_heads; ++h) {
      const size_t o = ((size_t)t * a->n_heads + h) * D * es;
      rotate_head(a->dtype, a->layout, D, R, (const char*)a->in + o, (char*)a->out + o, cs, sn);
    }
  }
  return RC_OK;
}
#elif defined(STYLE_FLASHINFER) || defined(STYLE_MLX)
/* cos and sin of token position m for every pair, computed in double. */
static void computed_row(const rc_rope_args* a, int64_t m, double* cs, double* sn) {
  for (uint32_t i = 0; i < a->rotary_dim / 2; ++i) {
    const double ang = (double)m * a->position_scale * pow(a->base, -2.0 * i / a->rotary_dim);
    cs[i] = cos(ang);
    sn[i] = sin(ang);
  }
}

static int computed_only(const rc_rope_args* a) { /* no table, no rule or inv_freq, forward, one axis */
  return a->table_kind == RC_TABLE_NONE && a->direction == RC_FORWARD && !a->rotary_offset && a->n_pos_axes <= 1 &&
         !a->pair_axis && !a->freq_rule && !a->inv_freq && (a->attention_factor == 0.0 || a->attention_factor == 1.0);
}

#if defined(STYLE_FLASHINFER)
static int apply(const rc_rope_args* a) {
  if (a->abi_version < 3 || !a->q.data || !computed_only(a)) return RC_UNSUPPORTED; /* the tensor form only */
  if (a->q.ndim != 3 || !a->pos.data || a->pos.ndim != 1 || a->pos.dtype.bits != 32 || a->cu_seqlens.data ||
      a->seq_offsets.data)
    return RC_UNSUPPORTED;
  const uint32_t D = a->head_dim, R = a->rotary_dim;
  if (R / 2 > MAX_PAIRS) return RC_UNSUPPORTED;
  const size_t es = a->dtype == RC_F32 ? 4 : 2;
  view_t q, qo, k, ko;
  make_view(&a->q, &q);
  make_view(&a->q_out, &qo);
  int64_t kh = 0;
  if (a->k.data) {
    if (a->k.ndim != 3) return RC_UNSUPPORTED;
    make_view(&a->k, &k);
    make_view(&a->k_out, &ko);
    kh = k.heads;
#ifdef PLANT_K_Q_HEADS
    kh = q.heads; /* BUG: k rotated for q's head count */
#endif
  }
  const int64_t T = a->q.shape[0];
  double cs[MAX_PAIRS], sn[MAX_PAIRS];
  for (int64_t t = 0; t < T; ++t) {
    computed_row(a, load_int(&a->pos, t), cs, sn);
    for (int64_t h = 0; h < q.heads; ++h)
      rotate_head(a->dtype, a->layout, D, R, q.base + at(&q, 3, 1, t, h) * es, qo.base + at(&qo, 3, 1, t, h) * es, cs,
                  sn);
    for (int64_t h = 0; h < kh; ++h)
      rotate_head(a->dtype, a->layout, D, R, k.base + at(&k, 3, 1, t, h) * es, ko.base + at(&ko, 3, 1, t, h) * es, cs,
                  sn);
  }
  return RC_OK;
}
#else
static int apply(const rc_rope_args* a) {
  if (a->abi_version < 3 || !a->q.data || !computed_only(a) || a->k.data) return RC_UNSUPPORTED;
  if (a->q.ndim != 4 || a->pos.data || a->cu_seqlens.data || !a->seq_offsets.data || a->seq_offsets.dtype.bits != 32)
    return RC_UNSUPPORTED;
  if (base_of(&a->q_out) == base_of(&a->q)) return RC_UNSUPPORTED; /* out of place only */
  const uint32_t D = a->head_dim, R = a->rotary_dim;
  if (R / 2 > MAX_PAIRS) return RC_UNSUPPORTED;
  const size_t es = a->dtype == RC_F32 ? 4 : 2;
  view_t in, out;
  make_view(&a->q, &in);
  make_view(&a->q_out, &out);
  const int64_t B = a->q.shape[0], S = a->q.shape[1];
  double cs[MAX_PAIRS], sn[MAX_PAIRS];
  for (int64_t b = 0; b < B; ++b) {
    int64_t off = load_int(&a->seq_offsets, b);
#ifdef PLANT_FIRST_OFFSET
    off = load_int(&a->seq_offsets, 0); /* BUG: every row at the first row's offset */
#endif
    for (int64_t s = 0; s < S; ++s) {
      computed_row(a, s + off, cs, sn);
      for (int64_t h = 0; h < in.heads; ++h)
        rotate_head(a->dtype, a->layout, D, R, in.base + at(&in, 4, S, b * S + s, h) * es,
                    out.base + at(&out, 4, S, b * S + s, h) * es, cs, sn);
    }
  }
  return RC_OK;
}
#endif
#endif

__attribute__((visibility("default"))) int rc_rope_apply(const rc_rope_args* a) {
  if (!a) return 2;
  if (a->abi_version < 1 || a->abi_version > 3) return RC_UNSUPPORTED;
  if (a->dtype > RC_BF16 || a->layout > RC_HALF_SPLIT || a->rotary_dim < 2 || a->rotary_dim % 2 ||
      a->rotary_dim > a->head_dim)
    return RC_UNSUPPORTED;
  return apply(a);
}
