/* ropecheck kernel ABI, version 2 (a strict superset of version 1).
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
 *     if (a->abi_version < 1 || a->abi_version > 2) return RC_UNSUPPORTED;
 * (2: the newest version your kernel implements).
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
