/* Compiled with ROPECHECK_ABI_DRAFT_V3 (the ABI v3 draft of include/ropecheck/kernel_abi.h), in C11: the
 * draft compiles as C (its DLPack static assertions hold), and it keeps every v1 and v2 field where the header
 * without the macro has it, with the v3 fields after them (test_abi, AbiV3Draft.KeepsEveryReleasedFieldInPlace,
 * compares with the header as test_abi sees it, without the macro). */
#include <stddef.h>

#include "ropecheck/kernel_abi.h"

#if ROPECHECK_ABI_DRAFT_VERSION != 3 || ROPECHECK_ABI_VERSION != 2
#error "the draft describes version 3; the released version stays 2"
#endif

#define F(name) offsetof(rc_rope_args, name)
const size_t rc_v3_draft_offsets[] = {
    F(abi_version), F(dtype), F(layout), F(head_dim), F(rotary_dim), F(n_heads), F(n_tokens),
    F(positions), F(base), F(position_scale), F(inv_freq), F(in), F(out), F(rotary_offset), F(n_pos_axes),
    F(pair_axis), F(attention_factor), F(freq_rule),
    F(direction), /* the first v3 field */
    sizeof(rc_freq_rule), sizeof(rc_tensor), sizeof(rc_rope_args)};
const size_t rc_v3_draft_n_offsets = sizeof rc_v3_draft_offsets / sizeof rc_v3_draft_offsets[0];
#undef F
