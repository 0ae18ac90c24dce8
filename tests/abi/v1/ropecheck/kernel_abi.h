/* ropecheck kernel ABI, version 1.
 *
 * A RoPE kernel under test exports one C function, rc_rope_apply. ropecheck
 * calls it with a filled rc_rope_args and judges the output against its exact
 * reference. Built-in kernels are exposed through the same signature, so one
 * code path judges them all.
 *
 * Field names, enum names and values and the function name are fixed. A v2
 * adds fields only behind a new abi_version.
 */
#ifndef ROPECHECK_KERNEL_ABI_H
#define ROPECHECK_KERNEL_ABI_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ROPECHECK_ABI_VERSION 1

enum rc_dtype  { RC_F32 = 0, RC_F16 = 1, RC_BF16 = 2 };   /* storage type of in and out */
enum rc_layout { RC_INTERLEAVED = 0, RC_HALF_SPLIT = 1 };

typedef struct rc_rope_args {
  uint32_t abi_version;      /* ROPECHECK_ABI_VERSION */
  uint32_t dtype;            /* enum rc_dtype */
  uint32_t layout;           /* enum rc_layout */
  uint32_t head_dim;         /* elements per head */
  uint32_t rotary_dim;       /* even, 2..head_dim; elements [rotary_dim, head_dim) pass through */
  uint32_t n_heads;
  uint64_t n_tokens;
  const int64_t *positions;  /* n_tokens positions, each >= 0 */
  double base;               /* theta_i = base^(-2i/rotary_dim) */
  double position_scale;     /* angle = position * position_scale * theta_i; 1.0 = plain RoPE */
  const double *inv_freq;    /* NULL, or rotary_dim/2 frequencies that replace theta_i */
  const void *in;            /* [n_tokens][n_heads][head_dim], contiguous; in and out are aligned to their
                                element size, no more (the gate places some buffers flush against a guard page) */
  void *out;                 /* same shape; out == in for an in-place call */
} rc_rope_args;

#define RC_OK 0
#define RC_UNSUPPORTED 1     /* the kernel declines this configuration */

int rc_rope_apply(const rc_rope_args *args);   /* any other return value is an error */

/* The type of rc_rope_apply, for loaders and registries. */
typedef int (*rc_rope_apply_fn)(const rc_rope_args *args);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* ROPECHECK_KERNEL_ABI_H */
