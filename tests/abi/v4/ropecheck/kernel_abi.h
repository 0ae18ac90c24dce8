/* ropecheck kernel ABI, version 4 (a strict superset of versions 1, 2 and 3).
 *
 * A RoPE kernel under test exports one C function, rc_rope_apply. ropecheck
 * calls it with a filled rc_rope_args and judges the output against its exact
 * reference. Built-in kernels are exposed through the same signature, so one
 * code path judges them all.
 *
 * Field names, enum names and values and the function name are fixed.
 *
 * Versions. ROPECHECK_ABI_VERSION is the newest version this header
 * describes, not the version a kernel implements: compare abi_version with
 * your own literal,
 *     if (a->abi_version < 1 || a->abi_version > 4) return RC_UNSUPPORTED;
 * (4: the newest version your kernel implements).
 *  - ropecheck never calls a kernel at a version it does not speak. Before
 *    the first real call it makes the simplest neutral call (one token at
 *    position 1, every field after `out` neutral) at each version 1..newest
 *    and at one no header defines; a non-OK answer means "does not speak
 *    this version", never a failure. Neutral calls then go as abi_version 1
 *    (or, to a kernel that took only version K, as K with explicit neutral
 *    values: the idiom `abi_version != ROPECHECK_ABI_VERSION` of an older
 *    header keeps working). Calls using a feature of version V go at a
 *    version >= V the kernel took, and only to a kernel that took 1 as well
 *    and refused the undefined version (docs/gate.md, "ABI versions").
 *  - A v1 call (abi_version = 1) ends at `out`: a kernel must not read past
 *    it then (a v1 caller's struct ends there).
 *  - From v2 on, a zero in a field a version adds means "as before": a
 *    caller that zero-initialises the struct and fills the v1 fields gets v1
 *    semantics whatever abi_version it writes (n_pos_axes 0 is one axis,
 *    attention_factor 0 is 1.0). ropecheck itself always writes the neutral
 *    values explicitly.
 *  - A kernel returns RC_UNSUPPORTED for an abi_version it does not know, and
 *    for any feature it does not implement (e.g. a non-NULL freq_rule when it
 *    only takes tables). Declining is never a failure; a wrong answer is.
 *
 * Version 3 (docs/abi-v3/README.md, docs/gate.md "ABI v3") adds, after the v2
 * fields: the direction (the inverse rotation), caller-given cos/sin or angle
 * tables of four kinds, and the tensor form of the call (DLPack-layout tensors:
 * strides, q and k with their own head counts, int32 or int64, explicit or
 * implicit positions, varlen cu_seqlens). From v3 on:
 *  - a call that does not return RC_OK must not have written any output (the
 *    gate reports a declined call that wrote: with an in-place call, a
 *    partial write destroys the caller's input);
 *  - a kernel that takes only the v3 forms of a call (caller-given tables: it
 *    cannot compute angles; or the tensor form only) declines the neutral
 *    calls; the gate then asks the simplest call (one token at position 1, a
 *    2-row table) in each form (the legacy form, each tensor form; out of
 *    place, in place), with each angle source (computed, each table kind by
 *    position at version 3 and per token at 4), on each asked dtype x layout,
 *    until one is taken, then each of these varied alone from that call.
 *    RC_OK, with the undefined version refused, is "speaks v3 (v4) in these
 *    forms", and the gate sends every case in a form it took (docs/gate.md,
 *    "Kernels that take tables"); a call declined in one form is made in the
 *    next it took.
 *
 * Version 4 adds table_rows (after the v3 fields): a caller-given table whose
 * rows follow the tokens (RC_ROWS_BY_TOKEN: Hugging Face's cos[position_ids],
 * Liger, XNNPACK), already gathered at their positions, instead of one row per
 * position. Neutral (RC_ROWS_BY_POSITION) is the v3 call.
 *
 * Semantics (v2; v1 is the case rotary_offset = 0, n_pos_axes = 1,
 * pair_axis = NULL, attention_factor = 1, freq_rule = NULL). With R =
 * rotary_dim, o = rotary_offset, pair i (0 <= i < R/2) of each head is the
 * complex number z_i = x[o+a_i] + j x[o+b_i], with (a_i, b_i) = (2i, 2i+1)
 * (RC_INTERLEAVED) or (i, i + R/2) (RC_HALF_SPLIT), and
 *   out pair i = attention_factor * e^{j phi_i} * z_i,
 *   phi_i = positions[pair_axis[i] * n_tokens + t] * position_scale * theta_i
 * where theta_i = base^(-2i/R), or inv_freq[i], or the rule's table. Elements
 * [0, o) and [o + R, head_dim) pass through: they keep the input's values (a
 * NaN stays a NaN, +-0 alike), or its exact bits where the kernel's contract
 * says identity=bits (docs/error-model.md, "Contracts").
 */
#ifndef ROPECHECK_KERNEL_ABI_H
#define ROPECHECK_KERNEL_ABI_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ROPECHECK_ABI_VERSION 4

#include <stddef.h>

enum rc_dtype  { RC_F32 = 0, RC_F16 = 1, RC_BF16 = 2 };   /* storage type of in and out */
enum rc_layout { RC_INTERLEAVED = 0, RC_HALF_SPLIT = 1 };

/* v2: how a kernel that builds its own frequency table does it. The table is
 * the Hugging Face rule of that name (modeling_rope_utils.py), evaluated over
 * the reals from base, rotary_dim and the fields below (docs/variants.md gives
 * each formula); ropecheck's reference evaluates it exactly in MPFR. */
enum rc_freq_kind {
  RC_FREQ_DEFAULT = 0,  /* theta_i = base^(-2i/R) */
  RC_FREQ_LINEAR = 1,   /* theta_i / factor */
  RC_FREQ_DYNAMIC = 2,  /* dynamic NTK: base' = base*(factor*L'/L - (factor-1))^(R/(R-2)), L = max_position_embeddings,
                           L' = max(seq_len, L) */
  RC_FREQ_NTK = 3,      /* fixed NTK-alpha: base' = base * factor^(R/(R-2)) */
  RC_FREQ_YARN = 4,     /* YaRN ramp (beta_fast, beta_slow, truncate) over original_max_position_embeddings */
  RC_FREQ_LONGROPE = 5, /* theta_i / lambda_i; lambda = long_factor iff seq_len > original_max_position_embeddings */
  RC_FREQ_LLAMA3 = 6    /* llama3 wavelength bands (factor, low/high_freq_factor, original_max_position_embeddings) */
};

typedef struct rc_freq_rule {
  uint32_t kind;                               /* enum rc_freq_kind */
  uint32_t truncate;                           /* YaRN: 1 = floor/ceil the correction range (HF default), 0 = not */
  double factor;                               /* linear, dynamic, yarn, llama3: s; ntk: alpha */
  uint64_t max_position_embeddings;            /* dynamic: L */
  uint64_t original_max_position_embeddings;   /* yarn, longrope, llama3 */
  uint64_t seq_len;                            /* dynamic, longrope: the call's sequence length; 0 = none */
  double beta_fast, beta_slow;                 /* yarn */
  double low_freq_factor, high_freq_factor;    /* llama3 */
  const double *short_factor, *long_factor;    /* longrope: R/2 entries each; otherwise NULL */
} rc_freq_rule;

/* ---- v3 ---------------------------------------------------------------------------------------------- */

/* A tensor as DLPack describes it: the field order, types and sizes of dlpack.h's DLTensor, DLDevice and
 * DLDataType (DLPack 0.6 to 1.x; checked by the assertions below), so a DLManagedTensor's dl_tensor can be
 * copied in by memcpy and a wrapper can hand its fields to a kernel that takes DLTensor. Only what the C ABI
 * needs is promised:
 *  - device {RC_DL_CPU, 0}: host memory only (the Python package moves device tensors itself);
 *  - dtype {code, bits, 1}: RC_DL_FLOAT 32/16, RC_DL_BFLOAT 16 for activations and tables, RC_DL_INT 32/64
 *    for positions, sequence offsets and cu_seqlens;
 *  - strides in elements (DLPack's unit), NULL = compact row-major; the last (element) stride of q, k, their
 *    outputs and the tables is 1 in every v3 call; the others may be any value >= 0 that keeps the distinct
 *    elements of an output distinct (an input may repeat an element: stride 0). The stride of a dimension of
 *    extent 1 is arbitrary (PyTorch's are): a kernel must not read meaning into it;
 *  - data + byte_offset is aligned to the element size, no more (the gate places some buffers flush against a
 *    guard page and at odd offsets); data itself may be that address with byte_offset 0, or not.
 * A tensor whose data is NULL is absent (its other fields are zero). */
enum rc_dl_device_type { RC_DL_CPU = 1 };
enum rc_dl_code { RC_DL_INT = 0, RC_DL_UINT = 1, RC_DL_FLOAT = 2, RC_DL_BFLOAT = 4 };

typedef struct rc_dl_device {
  int32_t device_type;       /* RC_DL_CPU */
  int32_t device_id;         /* 0 */
} rc_dl_device;

typedef struct rc_dl_dtype {
  uint8_t code;              /* enum rc_dl_code */
  uint8_t bits;
  uint16_t lanes;            /* 1 */
} rc_dl_dtype;

typedef struct rc_tensor {
  void *data;
  rc_dl_device device;
  int32_t ndim;
  rc_dl_dtype dtype;
  int64_t *shape;            /* ndim entries */
  int64_t *strides;          /* ndim entries, in elements; NULL: compact row-major */
  uint64_t byte_offset;      /* bytes from data to the first element */
} rc_tensor;

/* v3 table kinds: where a call's cos and sin come from when the caller gives them (table_kind). Row r of a
 * table holds the values for position r (rows [0, shape[0]); every position of the call indexes a row; v4: or,
 * with table_rows = RC_ROWS_BY_TOKEN, row t holds token t's: enum rc_table_rows). The
 * values are the kernel's cos and sin as given, the attention factor already in them (af*cos, af*sin):
 * with a table, attention_factor is 1 except for RC_TABLE_ANGLE. ropecheck judges the kernel's arithmetic
 * against the exact values of the table as given, and the table itself separately (docs/abi-v3/README.md). */
enum rc_table_kind {
  RC_TABLE_NONE = 0,         /* neutral: the kernel computes the angles (base, inv_freq or freq_rule, as in v2) */
  RC_TABLE_COS_SIN_2 = 1,    /* table = cos {P, R/2}, table2 = sin {P, R/2}: column i is pair i
                                (FlashAttention, ONNX Runtime, ONNX RotaryEmbedding-23) */
  RC_TABLE_COS_SIN_CAT = 2,  /* table = {P, R}: cos of pair i in column i, sin in column R/2 + i (vLLM, FlashInfer) */
  RC_TABLE_COS_SIN_FULL = 3, /* table = cos {P, R}, table2 = sin {P, R}: column c holds the value of the pair that
                                element c of the rotated slice belongs to under the call's layout, so each value
                                appears twice (Hugging Face's cat((freqs, freqs)), Liger; interleaved: repeated
                                adjacently). The two copies are equal in every call ropecheck makes */
  RC_TABLE_ANGLE = 4         /* table = f32 angles {P, R}, full width as RC_TABLE_COS_SIN_FULL (TransformerEngine):
                                the kernel takes cos and sin of them; attention_factor applies */
};

/* v4: how the rows of a caller-given table are indexed (table_rows). */
enum rc_table_rows {
  RC_ROWS_BY_POSITION = 0,   /* neutral: row r holds the values of position r (v3) */
  RC_ROWS_BY_TOKEN = 1       /* row t holds the values of token t, already gathered at its position (Hugging Face's
                                cos[position_ids], Liger, XNNPACK's weights): the table is {T, W} with the legacy form
                                or a 3-D q, {B, S, W} with a 4-D q, whose dim 0 may have extent 1 or stride 0 (one
                                set of rows for every sequence). Positions are passed as ever (a kernel need not read
                                them); every other rule of the table's kind holds */
};

enum rc_direction {
  RC_FORWARD = 0,            /* neutral: out pair i = af * e^{+j phi_i} * z_i */
  RC_INVERSE = 1             /* out pair i = af * e^{-j phi_i} * z_i: sin negated, the attention factor KEPT (ggml's
                                rope_back, FlashAttention's conjugate, vLLM's inverse); inverse(forward(x)) = af^2 x */
};

typedef struct rc_rope_args {
  /* ---- v1 ---- */
  uint32_t abi_version;      /* the version this call is written in: 1, or 2 for a call using a v2 field (see above) */
  uint32_t dtype;            /* enum rc_dtype */
  uint32_t layout;           /* enum rc_layout */
  uint32_t head_dim;         /* elements per head */
  uint32_t rotary_dim;       /* R: even, >= 2; rotary_offset + R <= head_dim */
  uint32_t n_heads;
  uint64_t n_tokens;
  const int64_t *positions;  /* n_pos_axes * n_tokens positions, axis-major: positions[k * n_tokens + t].
                                v1: each >= 0. v2: may be negative (axial pixel grids centred on 0) */
  double base;               /* theta_i = base^(-2i/rotary_dim) */
  double position_scale;     /* angle = position * position_scale * theta_i; 1.0 = plain RoPE */
  const double *inv_freq;    /* NULL, or rotary_dim/2 frequencies that replace theta_i */
  const void *in;            /* [n_tokens][n_heads][head_dim], contiguous; in and out are aligned to their
                                element size, no more (the gate places some buffers flush against a guard page) */
  void *out;                 /* same shape; out == in for an in-place call */
  /* ---- v2: read only when abi_version >= 2 ---- */
  uint32_t rotary_offset;    /* o: first rotated element of each head (DeepSeek MLA's rope slice). neutral 0 */
  uint32_t n_pos_axes;       /* 1..4 position axes (M-RoPE: temporal, height, width). neutral 1 (0 reads as 1) */
  const uint8_t *pair_axis;  /* NULL (every pair on axis 0) or rotary_dim/2 entries, each < n_pos_axes: the axis
                                whose position drives pair i. neutral NULL */
  double attention_factor;   /* > 0, finite: multiplies cos and sin of every pair (YaRN, LongRoPE). neutral 1.0
                                (0 reads as 1.0) */
  const rc_freq_rule *freq_rule;  /* NULL (neutral): theta from base or inv_freq. Otherwise inv_freq is NULL and
                                     theta_i is the rule's table for base and rotary_dim; the attention factor is
                                     never implied by the rule, only by attention_factor */
  /* ---- v3: read only when abi_version >= 3; zero (and NULL) in each field is the v2 call ---- */
  uint32_t direction;        /* enum rc_direction. neutral RC_FORWARD */
  uint32_t table_kind;       /* enum rc_table_kind. neutral RC_TABLE_NONE. With a table, base, position_scale,
                                inv_freq and freq_rule are unused (ropecheck writes 10000, 1, NULL, NULL), and
                                attention_factor is 1.0 (0 reads as 1.0) except for RC_TABLE_ANGLE: a kernel may
                                decline any other value. direction and table_kind may be used in either form of
                                the call (the v2 fields with int64 positions, or the tensors below) */
  rc_tensor table, table2;   /* the table(s) of table_kind: 2-D, their own dtype (f32, f16 or bf16; RC_TABLE_ANGLE
                                f32), any row stride >= the row's width, column stride 1; table2.data NULL for the
                                one-tensor kinds. Every position of the call is a row: 0 <= position < shape[0].
                                Read the rows the call's positions index (and their neighbours, for a vector
                                load): a table of 2^31 rows and more may have no memory behind the others (the
                                gate's long positions row maps only those). v4, RC_ROWS_BY_TOKEN: {T, W}, or
                                {B, S, W} with a 4-D q, a row per token (enum rc_table_rows) */
  /* The tensor form of the call, used when q.data is non-NULL (neutral: NULL, and in/out/positions/n_tokens/
   * n_heads above describe the call). In the tensor form, in, out and positions are NULL, n_tokens and n_heads
   * are 0, and dtype equals q's (RC_F32/RC_F16/RC_BF16); head_dim, rotary_dim, rotary_offset, layout, the angle
   * fields and attention_factor keep their meaning.
   *  - q: {T, Hq, head_dim} (T tokens) or {B, S, Hq, head_dim} (B sequences of S tokens), element stride 1.
   *  - q_out: q's shape and dtype, its own strides. In place: q_out.data + q_out.byte_offset equals
   *    q.data + q.byte_offset and the strides are equal (however data and byte_offset split the address);
   *    otherwise q_out overlaps nothing the call reads.
   *  - k, k_out: optional (k.data NULL: no k, and k_out.data NULL too): k.ndim equals q.ndim and its leading
   *    extents (T, or B and S) q's; {T, Hk, head_dim} or {B, S, Hk, head_dim}, Hk >= 1 independent of Hq (GQA,
   *    MQA, MLA); k's dtype equals q's; the same positions, table and angles as q. q and k may lie in one
   *    allocation (packed qkv) but share no element. In place as for q.
   *  - pos: explicit positions, int32 or int64: pos.ndim is q.ndim - 2 for one position axis ({T} or {B, S}),
   *    or q.ndim - 1 with the number of axes first ({A, T} or {A, B, S}, A = n_pos_axes in 1..4, v2's
   *    axis-major order). pos.data NULL: implicit positions, token s of sequence b at s + seq_offsets[b].
   *  - seq_offsets: implicit positions only: {B} int32/int64 (data NULL: 0 for every sequence). With the 3-D
   *    q and no cu_seqlens there is one sequence, B = 1.
   *  - cu_seqlens: with the 3-D q only: {B+1} int32/int64, non-decreasing, cu_seqlens[0] = 0,
   *    cu_seqlens[B] = T: sequence b is tokens [cu_seqlens[b], cu_seqlens[b+1]) (varlen; FlashAttention's
   *    cu_seqlens, TransformerEngine's thd, FlashInfer's indptr). data NULL: one sequence (or, with explicit
   *    positions, no sequences: each token's position is given).
   * Aliasing: outputs never overlap the table, positions, seq_offsets or cu_seqlens; no partial overlap of an
   * input and an output (equal or disjoint). Calls: ropecheck makes one call at a time per process; a kernel
   * may start threads and must have finished writing when it returns. Out of scope in v3: separate tables for
   * q and k (XPos, TransformerEngine's k_freqs), non-unit element strides, device memory, fp8. */
  rc_tensor q, q_out, k, k_out;
  rc_tensor pos, seq_offsets, cu_seqlens;
  /* ---- v4: read only when abi_version >= 4; zero in each field is the v3 call ---- */
  uint32_t table_rows;       /* enum rc_table_rows: how table and table2's rows are indexed. neutral
                                RC_ROWS_BY_POSITION */
} rc_rope_args;

/* The DLPack mirror: DLTensor's layout on every ABI DLPack supports (LP64 and ILP32 alike). */
#if defined(__cplusplus)
#define RC_STATIC_ASSERT(c, m) static_assert(c, m)
#else
#define RC_STATIC_ASSERT(c, m) _Static_assert(c, m)
#endif
RC_STATIC_ASSERT(sizeof(rc_dl_device) == 8, "DLDevice is two int32");
RC_STATIC_ASSERT(sizeof(rc_dl_dtype) == 4, "DLDataType is uint8, uint8, uint16");
RC_STATIC_ASSERT(offsetof(rc_tensor, device) == sizeof(void *), "DLTensor: data, then device");
RC_STATIC_ASSERT(offsetof(rc_tensor, ndim) == sizeof(void *) + 8, "DLTensor: ndim after device");
RC_STATIC_ASSERT(offsetof(rc_tensor, dtype) == sizeof(void *) + 12, "DLTensor: dtype after ndim");
RC_STATIC_ASSERT(offsetof(rc_tensor, shape) == sizeof(void *) + 16, "DLTensor: shape after dtype");
RC_STATIC_ASSERT(offsetof(rc_tensor, strides) == 2 * sizeof(void *) + 16, "DLTensor: strides after shape");
RC_STATIC_ASSERT(offsetof(rc_tensor, byte_offset) == 3 * sizeof(void *) + 16, "DLTensor: byte_offset last");
#undef RC_STATIC_ASSERT

#define RC_OK 0
#define RC_UNSUPPORTED 1     /* the kernel declines this configuration (or does not know this abi_version) */

int rc_rope_apply(const rc_rope_args *args);   /* any other return value is an error */

/* The type of rc_rope_apply, for loaders and registries. */
typedef int (*rc_rope_apply_fn)(const rc_rope_args *args);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* ROPECHECK_KERNEL_ABI_H */
