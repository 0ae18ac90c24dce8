/* Kernels that take their cos/sin (or angles) from the caller, written to the call semantics of production
 * kernels (../shared/research/kernel-interfaces.md) -- the shapes issue 49 found the gate's door too narrow for
 * under its default options. One kernel, configured by definitions; each configuration knows nothing of how it
 * is tested (test_abi gates each: AbiDoor.*). Every one declines what it does not implement, before writing.
 *
 *   DOOR_LAYOUT=RC_HALF_SPLIT|RC_INTERLEAVED  that layout only (else both)
 *   DOOR_F32_ONLY           f32 activations only
 *   DOOR_KIND=RC_TABLE_...  the one table kind it takes (RC_TABLE_COS_SIN_2 by default)
 *   DOOR_TABLE_F32          its cos/sin table in f32 only (else f32 or the call's dtype)
 *   DOOR_FLAT               takes the flat (v1-style) form of the call: in/out/positions
 *   DOOR_FLAT_DECODE        ... for one token only (a decode entry point beside its general tensor one)
 *   DOOR_TENSOR             takes the tensor form: q {T,H,D} or {B,S,H,D}, its own strides
 *   DOOR_POS_I64, DOOR_POS_I32, DOOR_IMPLICIT   the ways of passing positions it takes in the tensor form
 *                           (implicit: s + seq_offsets[b], varlen cu_seqlens; DOOR_IDX32: int32 offsets only)
 *   DOOR_OUT_OF_PLACE_ONLY, DOOR_IN_PLACE_ONLY
 *   DOOR_INVERSE            takes the inverse direction (the backward: sin negated)
 *   DOOR_K                  takes k (its own head count) beside q
 *   DOOR_F32_MATH           f32 arithmetic; an angle table's cos and sin by sincosf in f32 (TransformerEngine)
 *   DOOR_BY_TOKEN           ABI v4: its table's rows follow the tokens (Hugging Face's cos[position_ids],
 *                           Liger): {T, W}, or {B, S, W} for a 4-D q (dim 0 of extent 1 or stride 0: shared)
 *   DOOR_PAD16              reads 16-byte blocks that run up to 15 bytes past the end of each input it reads
 *                           (q, k, the tables): XNNPACK's documented XNN_EXTRA_BYTES contract
 *   DOOR_SLEEP_MS=N         sleeps N ms in every call (a kernel whose calls take long: a device's launch and sync)
 *
 * Planted bugs:
 *   PLANT_NARROW_POSITIONS  positions narrowed to int32 before indexing the table (a kernel that takes int64
 *                           positions and stores them in an int)
 *   PLANT_OFFSETS32         element offsets computed in 32-bit arithmetic (tensors of more than 2^31 elements)
 *   PLANT_LAST_K_HEAD       the last k head left unrotated (a loop bound off by one, GQA's Hk)
 *   PLANT_PAD_WRITE         writes a 16-byte block back over the padding after its output (in place)
 *   PLANT_TOKEN_AS_POSITION (per-token tables) row positions[t] read instead of row t
 */
#include <ropecheck/kernel_abi.h>

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "v1_rope_body.h"

#ifndef DOOR_KIND
#define DOOR_KIND RC_TABLE_COS_SIN_2
#endif

#define MAX_PAIRS 512
#define DOOR_ABI_MAX 4

typedef struct {
  char* base;
  int64_t st_seq, st_tok, st_head; /* element strides */
  int64_t heads;
} view_t;

static int64_t stride_of(const rc_tensor* t, int d) {
  if (t->strides) return t->strides[d];
  int64_t s = 1;
  for (int k = t->ndim - 1; k > d; --k) s *= t->shape[k];
  return s;
}

static char* base_of(const rc_tensor* t) { return (char*)t->data + t->byte_offset; }

#ifdef DOOR_TENSOR
/* Element i of a 1-D index tensor, or element (r, c) of a 2-D one. */
static int64_t load_index(const rc_tensor* t, int64_t r, int64_t c) {
  const int64_t e = t->ndim == 1 ? r * stride_of(t, 0) : r * stride_of(t, 0) + c * stride_of(t, 1);
  const char* p = base_of(t);
  if (t->dtype.bits == 32) {
    int32_t v;
    memcpy(&v, p + 4 * e, 4);
    return v;
  }
  int64_t v;
  memcpy(&v, p + 8 * e, 8);
  return v;
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

/* Element offset of (sequence b, token s) head h. */
static size_t at(const view_t* v, int64_t b, int64_t s, int64_t h) {
#ifdef PLANT_OFFSETS32
  /* BUG: the offset in 32-bit int arithmetic (the wrap written out: signed overflow is undefined in C) */
  const uint32_t o = (uint32_t)b * (uint32_t)v->st_seq + (uint32_t)s * (uint32_t)v->st_tok + (uint32_t)h * (uint32_t)v->st_head;
  return (size_t)(int64_t)(int32_t)o;
#else
  return (size_t)(b * v->st_seq + s * v->st_tok + h * v->st_head);
#endif
}
#endif

static uint32_t dtype_of(const rc_dl_dtype d) {
  if (d.lanes != 1) return 99;
  if (d.code == RC_DL_BFLOAT && d.bits == 16) return RC_BF16;
  if (d.code == RC_DL_FLOAT && d.bits == 16) return RC_F16;
  if (d.code == RC_DL_FLOAT && d.bits == 32) return RC_F32;
  return 99;
}

/* The table's expected width and rank, its dtype allowed. */
static int table_ok(const rc_tensor* t, uint32_t call_dtype, int64_t width, int ndim) {
  if (!t->data || t->ndim != ndim || t->shape[ndim - 1] != width) return 0;
  if (t->strides && t->shape[ndim - 1] > 1 && t->strides[ndim - 1] != 1) return 0;
  const uint32_t dt = dtype_of(t->dtype);
  if (DOOR_KIND == RC_TABLE_ANGLE) return dt == RC_F32;
#ifdef DOOR_TABLE_F32
  (void)call_dtype;
  return dt == RC_F32;
#else
  return dt == RC_F32 || dt == call_dtype;
#endif
}

#ifdef DOOR_PAD16
/* A 16-byte load from the element on (an unaligned vector load of a tail): the last one of a buffer runs up to 15
 * bytes past its end, into the padding the caller promised. */
static double pad16_read(const char* p, size_t e, size_t es) {
  const volatile unsigned char* at = (const volatile unsigned char*)(p + e * es);
  volatile unsigned char v[16];
  for (int k = 0; k < 16; ++k) v[k] = at[k];
  (void)v;
  return 0.0;
}
#define TOUCH(p, e, es) (void)pad16_read((const char*)(p), (e), (es))
#else
#define TOUCH(p, e, es) ((void)0)
#endif

static double table_at(const rc_tensor* t, int64_t row_elem, int64_t col) {
  const uint32_t dt = dtype_of(t->dtype);
  TOUCH(base_of(t), (size_t)(row_elem + col), dt == RC_F32 ? 4 : 2);
  return abi_load(dt, base_of(t), (size_t)(row_elem + col));
}

/* The element offset of a table's row for a position (by position) or for token (b, s) (by token). */
static int64_t table_row(const rc_tensor* t, int64_t m, int64_t b, int64_t s, int by_token) {
  if (!by_token) return m * stride_of(t, 0);
  if (t->ndim == 3) return (t->shape[0] == 1 ? 0 : b * stride_of(t, 0)) + s * stride_of(t, 1);
  return s * stride_of(t, 0);
}

/* cos and sin of every pair at (position m; token (b, s)): from the table as given. */
static void cos_sin_of(const rc_rope_args* a, int64_t m, int64_t b, int64_t s, int by_token, double* cs, double* sn) {
  const uint32_t R = a->rotary_dim, np = R / 2;
  const int64_t r0 = table_row(&a->table, m, b, s, by_token);
  const int64_t r1 = a->table2.data ? table_row(&a->table2, m, b, s, by_token) : 0;
  const double af = a->attention_factor != 0.0 ? a->attention_factor : 1.0;
  for (uint32_t i = 0; i < np; ++i) {
    const uint32_t d0 = a->layout == RC_INTERLEAVED ? 2 * i : i;
    switch (DOOR_KIND) {
      case RC_TABLE_COS_SIN_2:
        cs[i] = table_at(&a->table, r0, i);
        sn[i] = table_at(&a->table2, r1, i);
        break;
      case RC_TABLE_COS_SIN_CAT:
        cs[i] = table_at(&a->table, r0, i);
        sn[i] = table_at(&a->table, r0, np + i);
        break;
      case RC_TABLE_COS_SIN_FULL:
        cs[i] = table_at(&a->table, r0, d0);
        sn[i] = table_at(&a->table2, r1, d0);
        break;
      default: { /* angle: the kernel's cos and sin of the f32 angle, times the attention factor */
        const float ang = (float)table_at(&a->table, r0, d0);
#ifdef DOOR_F32_MATH
        const float f = (float)af;
        cs[i] = (double)(f * cosf(ang));
        sn[i] = (double)(f * sinf(ang));
#else
        cs[i] = af * cos((double)ang);
        sn[i] = af * sin((double)ang);
#endif
      }
    }
    if (a->direction == RC_INVERSE) sn[i] = -sn[i];
  }
}

/* One head: pairs rotated by (c, s), the rest passed through; out may be in. */
static void rotate_head(uint32_t dt, uint32_t layout, uint32_t D, uint32_t R, const char* in, char* out,
                        const double* cs, const double* sn) {
  const size_t es = dt == RC_F32 ? 4 : 2;
  for (uint32_t d = 0; d < D; ++d) TOUCH(in, d, es);
  for (uint32_t d = R; d < D; ++d)
    if (in != out) memcpy(out + d * es, in + d * es, es);
  for (uint32_t i = 0; i < R / 2; ++i) {
    const uint32_t a = layout == RC_INTERLEAVED ? 2 * i : i, b = layout == RC_INTERLEAVED ? 2 * i + 1 : i + R / 2;
#ifdef DOOR_F32_MATH
    const float x = abi_load(dt, in, a), y = abi_load(dt, in, b), c = (float)cs[i], s = (float)sn[i];
    abi_store(dt, out, a, x * c - y * s);
    abi_store(dt, out, b, x * s + y * c);
#else
    const double x = abi_load(dt, in, a), y = abi_load(dt, in, b);
    abi_store(dt, out, a, (float)(x * cs[i] - y * sn[i]));
    abi_store(dt, out, b, (float)(x * sn[i] + y * cs[i]));
#endif
  }
}

/* The checks every call passes (or is declined by), whatever its form. */
static int declines(const rc_rope_args* a) {
  if (a->abi_version < 3 || a->abi_version > DOOR_ABI_MAX) return 1;
  if (a->rotary_offset || a->n_pos_axes > 1 || a->pair_axis || a->freq_rule || a->inv_freq) return 1;
  if (a->table_kind != DOOR_KIND) return 1;
  if (DOOR_KIND != RC_TABLE_ANGLE && a->attention_factor != 0.0 && a->attention_factor != 1.0) return 1;
#ifdef DOOR_LAYOUT
  if (a->layout != DOOR_LAYOUT) return 1;
#endif
#ifdef DOOR_F32_ONLY
  if (a->dtype != RC_F32) return 1;
#endif
#ifndef DOOR_INVERSE
  if (a->direction != RC_FORWARD) return 1;
#endif
  const uint32_t rows = a->abi_version >= 4 ? a->table_rows : RC_ROWS_BY_POSITION;
#ifdef DOOR_BY_TOKEN
  if (rows != RC_ROWS_BY_TOKEN) return 1;
#else
  if (rows != RC_ROWS_BY_POSITION) return 1;
#endif
  if (a->rotary_dim / 2 > MAX_PAIRS) return 1;
  return 0;
}

static int64_t table_width(const rc_rope_args* a) {
  return DOOR_KIND == RC_TABLE_COS_SIN_2 ? a->rotary_dim / 2 : a->rotary_dim;
}

#ifdef DOOR_FLAT
static int flat(const rc_rope_args* a) {
#ifdef DOOR_FLAT_DECODE
  if (a->n_tokens != 1) return RC_UNSUPPORTED;
#endif
#ifdef DOOR_OUT_OF_PLACE_ONLY
  if (a->in == a->out) return RC_UNSUPPORTED;
#endif
#ifdef DOOR_IN_PLACE_ONLY
  if (a->in != a->out) return RC_UNSUPPORTED;
#endif
  const int by_token = a->abi_version >= 4 && a->table_rows == RC_ROWS_BY_TOKEN;
  const int64_t W = table_width(a), T = (int64_t)a->n_tokens;
  if (!table_ok(&a->table, a->dtype, W, 2) || (a->table2.data && !table_ok(&a->table2, a->dtype, W, 2)))
    return RC_UNSUPPORTED;
  if ((DOOR_KIND == RC_TABLE_COS_SIN_2 || DOOR_KIND == RC_TABLE_COS_SIN_FULL) != (a->table2.data != NULL))
    return RC_UNSUPPORTED;
  for (int64_t t = 0; t < T; ++t) {
    const int64_t m = a->positions[t];
    if (by_token ? a->table.shape[0] != T : (m < 0 || m >= a->table.shape[0])) return 2;
  }
  const uint32_t D = a->head_dim, R = a->rotary_dim;
  const size_t es = a->dtype == RC_F32 ? 4 : 2;
  double cs[MAX_PAIRS], sn[MAX_PAIRS];
  for (int64_t t = 0; t < T; ++t) {
    int64_t m = a->positions[t];
#ifdef PLANT_NARROW_POSITIONS
    m = (int32_t)m; /* BUG: checked as int64 above, then kept in an int */
#endif
    cos_sin_of(a, m, 0, t, by_token, cs, sn);
    for (uint32_t h = 0; h < a->n_heads; ++h) {
      const size_t o = ((size_t)t * a->n_heads + h) * D * es;
      rotate_head(a->dtype, a->layout, D, R, (const char*)a->in + o, (char*)a->out + o, cs, sn);
    }
  }
#ifdef PLANT_PAD_WRITE
  if (a->in == a->out) { /* BUG: the last element stored as a 16-byte vector: its other lanes over the padding */
    volatile unsigned char* last = (unsigned char*)a->out + (size_t)T * a->n_heads * D * es - es;
    for (size_t k = es; k < 16; ++k) last[k] = 0;
  }
#endif
  return RC_OK;
}
#endif

#ifdef DOOR_TENSOR
/* The position of (sequence b, token s; flat token t) as the call passes it; -1 (with *ok 0) when not taken. */
static int pos_form_ok(const rc_rope_args* a) {
  if (a->pos.data) {
    if (a->pos.ndim != a->q.ndim - 2) return 0; /* one axis, not axes-first */
#if !defined(DOOR_POS_I64) && !defined(DOOR_POS_I32)
    return 0;
#endif
#ifndef DOOR_POS_I64
    if (a->pos.dtype.bits == 64) return 0;
#endif
#ifndef DOOR_POS_I32
    if (a->pos.dtype.bits == 32) return 0;
#endif
    return a->seq_offsets.data == NULL;
  }
#ifndef DOOR_IMPLICIT
  return 0;
#else
#ifdef DOOR_IDX32
  if ((a->seq_offsets.data && a->seq_offsets.dtype.bits != 32) || (a->cu_seqlens.data && a->cu_seqlens.dtype.bits != 32))
    return 0;
#endif
  return 1;
#endif
}

static int64_t position_of(const rc_rope_args* a, int64_t b, int64_t s, int64_t t, int64_t* seq) {
  *seq = b;
  if (a->pos.data) return a->q.ndim == 4 ? load_index(&a->pos, b, s) : load_index(&a->pos, t, 0);
  int64_t local = s;
  if (a->cu_seqlens.data) {
    int64_t k = 0;
    while (load_index(&a->cu_seqlens, k + 1, 0) <= t) ++k;
    *seq = k;
    local = t - load_index(&a->cu_seqlens, k, 0);
  }
  return local + (a->seq_offsets.data ? load_index(&a->seq_offsets, *seq, 0) : 0);
}

static int tensor(const rc_rope_args* a) {
  const int rank = a->q.ndim;
  if (rank != 3 && rank != 4) return RC_UNSUPPORTED;
  if (!pos_form_ok(a)) return RC_UNSUPPORTED;
#ifndef DOOR_K
  if (a->k.data) return RC_UNSUPPORTED;
#endif
  const int in_place = base_of(&a->q_out) == base_of(&a->q);
#ifdef DOOR_OUT_OF_PLACE_ONLY
  if (in_place) return RC_UNSUPPORTED;
#endif
#ifdef DOOR_IN_PLACE_ONLY
  if (!in_place) return RC_UNSUPPORTED;
#endif
  (void)in_place;
  const int by_token = a->abi_version >= 4 && a->table_rows == RC_ROWS_BY_TOKEN;
  const int64_t W = table_width(a), tr = by_token ? rank - 1 : 2;
  if (!table_ok(&a->table, a->dtype, W, (int)tr) || (a->table2.data && !table_ok(&a->table2, a->dtype, W, (int)tr)))
    return RC_UNSUPPORTED;
  if ((DOOR_KIND == RC_TABLE_COS_SIN_2 || DOOR_KIND == RC_TABLE_COS_SIN_FULL) != (a->table2.data != NULL))
    return RC_UNSUPPORTED;
  const int64_t B = rank == 4 ? a->q.shape[0] : 1, S = rank == 4 ? a->q.shape[1] : a->q.shape[0];
  const int64_t T = B * S;
  if (by_token) { /* rows follow the tokens: {T, W}, or {B or 1, S, W} */
    if (rank == 3 ? a->table.shape[0] != T : (a->table.shape[1] != S || (a->table.shape[0] != B && a->table.shape[0] != 1)))
      return RC_UNSUPPORTED;
  }
  view_t q, qo, k, ko;
  make_view(&a->q, &q);
  make_view(&a->q_out, &qo);
  int64_t kh = 0;
  if (a->k.data) {
    make_view(&a->k, &k);
    make_view(&a->k_out, &ko);
    kh = k.heads;
#ifdef PLANT_LAST_K_HEAD
    kh = k.heads - 1; /* BUG: the last k head left as it was */
#endif
  }
  const uint32_t D = a->head_dim, R = a->rotary_dim;
  const size_t es = a->dtype == RC_F32 ? 4 : 2;
  double cs[MAX_PAIRS], sn[MAX_PAIRS];
  for (int pass = 0; pass < 2; ++pass) /* positions checked first: a declined call writes nothing */
    for (int64_t b = 0; b < B; ++b)
      for (int64_t s = 0; s < S; ++s) {
        const int64_t t = b * S + s;
        int64_t seq, m = position_of(a, b, s, t, &seq);
        if (!by_token && (m < 0 || m >= a->table.shape[0])) return 2;
        if (pass == 0) continue;
#ifdef PLANT_NARROW_POSITIONS
        m = (int32_t)m; /* BUG: checked as int64 above, then kept in an int */
#endif
        int64_t rb = rank == 4 ? b : 0, rs = rank == 4 ? s : t;
#ifdef PLANT_TOKEN_AS_POSITION
        if (by_token) rs = m, rb = 0; /* BUG: the row of its position, as in a table indexed by position */
#endif
        cos_sin_of(a, m, rb, rs, by_token, cs, sn);
        for (int64_t h = 0; h < q.heads; ++h)
          rotate_head(a->dtype, a->layout, D, R, q.base + at(&q, b, s, h) * es, qo.base + at(&qo, b, s, h) * es, cs, sn);
        for (int64_t h = 0; h < kh; ++h)
          rotate_head(a->dtype, a->layout, D, R, k.base + at(&k, b, s, h) * es, ko.base + at(&ko, b, s, h) * es, cs, sn);
      }
  return RC_OK;
}
#endif

#ifdef DOOR_SLEEP_MS
#include <errno.h>
#include <time.h>
#endif

__attribute__((visibility("default"))) int rc_rope_apply(const rc_rope_args* a) {
#ifdef DOOR_SLEEP_MS
  struct timespec left = {DOOR_SLEEP_MS / 1000, (DOOR_SLEEP_MS % 1000) * 1000000L};
  while (nanosleep(&left, &left) != 0 && errno == EINTR) {
  }
#endif
  if (!a) return 2;
  if (a->abi_version < 1 || a->abi_version > DOOR_ABI_MAX) return RC_UNSUPPORTED;
  if (a->dtype > RC_BF16 || a->layout > RC_HALF_SPLIT || a->rotary_dim < 2 || a->rotary_dim % 2 ||
      a->rotary_dim > a->head_dim)
    return RC_UNSUPPORTED;
  if (declines(a)) return RC_UNSUPPORTED;
  if (a->q.data) {
#ifdef DOOR_TENSOR
    return tensor(a);
#endif
    return RC_UNSUPPORTED;
  }
#ifdef DOOR_FLAT
  return flat(a);
#endif
  return RC_UNSUPPORTED;
}
