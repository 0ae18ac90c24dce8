/* Prints the offset of every field of rc_rope_args (and rc_freq_rule) as the C compiler lays them out, for
 * python/tests/test_abi_layout.py to compare with python/ropecheck/_abi.py. */
#include <stddef.h>
#include <stdio.h>

#include "ropecheck/kernel_abi.h"

#define F(f) printf("\"%s\": %zu,\n", #f, offsetof(rc_rope_args, f))
#define T(f)                                                                         \
  do {                                                                               \
    F(f);                                                                            \
    printf("\"%s.data\": %zu,\n", #f, offsetof(rc_rope_args, f) + offsetof(rc_tensor, data));         \
    printf("\"%s.device\": %zu,\n", #f, offsetof(rc_rope_args, f) + offsetof(rc_tensor, device));     \
    printf("\"%s.ndim\": %zu,\n", #f, offsetof(rc_rope_args, f) + offsetof(rc_tensor, ndim));         \
    printf("\"%s.dtype\": %zu,\n", #f, offsetof(rc_rope_args, f) + offsetof(rc_tensor, dtype));       \
    printf("\"%s.shape\": %zu,\n", #f, offsetof(rc_rope_args, f) + offsetof(rc_tensor, shape));       \
    printf("\"%s.strides\": %zu,\n", #f, offsetof(rc_rope_args, f) + offsetof(rc_tensor, strides));   \
    printf("\"%s.byte_offset\": %zu,\n", #f, offsetof(rc_rope_args, f) + offsetof(rc_tensor, byte_offset)); \
  } while (0)
#define R(f) printf("\"rc_freq_rule.%s\": %zu,\n", #f, offsetof(rc_freq_rule, f))

int main(void) {
  printf("{\n");
  F(abi_version); F(dtype); F(layout); F(head_dim); F(rotary_dim); F(n_heads); F(n_tokens); F(positions);
  F(base); F(position_scale); F(inv_freq); F(in); F(out); F(rotary_offset); F(n_pos_axes); F(pair_axis);
  F(attention_factor); F(freq_rule); F(direction); F(table_kind);
  T(table); T(table2); T(q); T(q_out); T(k); T(k_out); T(pos); T(seq_offsets); T(cu_seqlens);
  R(kind); R(truncate); R(factor); R(max_position_embeddings); R(original_max_position_embeddings); R(seq_len);
  R(beta_fast); R(beta_slow); R(low_freq_factor); R(high_freq_factor); R(short_factor); R(long_factor);
  printf("\"freq_rule.sizeof\": %zu,\n", sizeof(rc_freq_rule));
  printf("\"sizeof\": %zu\n}\n", sizeof(rc_rope_args));
  return 0;
}
