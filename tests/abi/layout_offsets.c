/* The offsets of every field of rc_rope_args, and sizes, as the header this file is built against lays them
 * out: built against each frozen released header (NAME rc_v2_offsets, rc_v3_offsets) and against today's
 * header (rc_current_offsets). test_abi (AbiLayout.*) compares them: a later header keeps every released field
 * where its release put it, and appends. Built as C11 with -Wall -Wextra -pedantic -Werror: each header
 * compiles as C. Entries 0..17: the v1 and v2 fields; 18: where v2's struct ends (v2: its size; from v3 on the
 * offset of the first v3 field, direction); 19: sizeof(rc_freq_rule); 20: sizeof(rc_tensor) (v2: DLTensor's 48
 * bytes, what v3 mirrors); 21..33: the v3 fields (v2: 0); 34: sizeof(rc_rope_args); 35: the v4 field table_rows
 * (before v4: 0). */
#include <stddef.h>

#include "ropecheck/kernel_abi.h"

#define F(name) offsetof(rc_rope_args, name)
#if ROPECHECK_ABI_VERSION >= 3
#define V2_END F(direction)
#define TENSOR sizeof(rc_tensor)
#define V3 F(direction), F(table_kind), F(table), F(table2), F(q), F(q_out), F(k), F(k_out), F(pos), \
           F(seq_offsets), F(cu_seqlens), offsetof(rc_tensor, byte_offset), sizeof(rc_dl_dtype)
#else
#define V2_END sizeof(rc_rope_args)
#define TENSOR 48
#define V3 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0
#endif
#if ROPECHECK_ABI_VERSION >= 4
#define V4 F(table_rows)
#else
#define V4 0
#endif

const size_t NAME[36] = {F(abi_version), F(dtype), F(layout), F(head_dim), F(rotary_dim), F(n_heads),
                         F(n_tokens), F(positions), F(base), F(position_scale), F(inv_freq), F(in), F(out),
                         F(rotary_offset), F(n_pos_axes), F(pair_axis), F(attention_factor), F(freq_rule), V2_END,
                         sizeof(rc_freq_rule), TENSOR, V3, sizeof(rc_rope_args), V4};
#undef F
