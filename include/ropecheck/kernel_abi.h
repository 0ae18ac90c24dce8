/* ropecheck kernel ABI, version 2 (a strict superset of version 1).
 *
 * A RoPE kernel under test exports one C function, rc_rope_apply. ropecheck
 * calls it with a filled rc_rope_args and judges the output against its exact
 * reference. Built-in kernels are exposed through the same signature, so one
 * code path judges them all.
 *
 * Field names, enum names and values and the function name are fixed.
 *
 * Versions. abi_version is 1 or 2.
 *  - The harness passes abi_version = 1 whenever every v2 field holds its
 *    neutral value (and no position is negative): a v1 kernel keeps working
 *    unchanged, and a v2 kernel must then not read past `out` (a v1 caller's
 *    struct ends there).
 *  - Otherwise it passes 2, and the v2 fields below are meaningful.
 *  - A kernel returns RC_UNSUPPORTED for an abi_version it does not know (a v1
 *    kernel: anything but 1; a v2 kernel: anything above 2), and for any v2
 *    feature it does not implement (e.g. a non-NULL freq_rule when it only
 *    takes tables). Declining is never a failure; a wrong answer is.
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

#define ROPECHECK_ABI_VERSION 2

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

typedef struct rc_rope_args {
  /* ---- v1 ---- */
  uint32_t abi_version;      /* 1, or 2 when a v2 field below is not neutral (see above) */
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
  uint32_t n_pos_axes;       /* 1..4 position axes (M-RoPE: temporal, height, width). neutral 1 */
  const uint8_t *pair_axis;  /* NULL (every pair on axis 0) or rotary_dim/2 entries, each < n_pos_axes: the axis
                                whose position drives pair i. neutral NULL */
  double attention_factor;   /* > 0, finite: multiplies cos and sin of every pair (YaRN, LongRoPE). neutral 1.0 */
  const rc_freq_rule *freq_rule;  /* NULL (neutral): theta from base or inv_freq. Otherwise inv_freq is NULL and
                                     theta_i is the rule's table for base and rotary_dim; the attention factor is
                                     never implied by the rule, only by attention_factor */
} rc_rope_args;

#define RC_OK 0
#define RC_UNSUPPORTED 1     /* the kernel declines this configuration (or does not know this abi_version) */

int rc_rope_apply(const rc_rope_args *args);   /* any other return value is an error */

/* The type of rc_rope_apply, for loaders and registries. */
typedef int (*rc_rope_apply_fn)(const rc_rope_args *args);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* ROPECHECK_KERNEL_ABI_H */
