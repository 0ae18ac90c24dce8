/* The offsets of every v1 and v2 field of rc_rope_args, and sizes, as the header this file is built against
 * lays them out: built against the frozen v2 header (NAME rc_v2_offsets) and against today's header with the
 * ABI v3 draft (NAME rc_v3_draft_offsets, ROPECHECK_ABI_DRAFT_V3 defined; its first v3 field, direction, in
 * the v2 build's place of sizeof(rc_rope_args)). test_abi, AbiV3Draft.KeepsEveryReleasedFieldInPlace,
 * compares the two. Built as C11 with -Wall -Wextra -pedantic -Werror: the draft compiles as C. */
#include <stddef.h>

#include "ropecheck/kernel_abi.h"

#ifdef ROPECHECK_ABI_DRAFT_V3
#if ROPECHECK_ABI_DRAFT_VERSION != 3 || ROPECHECK_ABI_VERSION != 2
#error "the draft describes version 3; the released version stays 2"
#endif
#define LAST offsetof(rc_rope_args, direction)
#define TENSOR sizeof(rc_tensor)
#else
#define LAST sizeof(rc_rope_args)
#define TENSOR 48
#endif

#define F(name) offsetof(rc_rope_args, name)
const size_t NAME[] = {F(abi_version), F(dtype), F(layout), F(head_dim), F(rotary_dim), F(n_heads), F(n_tokens),
                       F(positions), F(base), F(position_scale), F(inv_freq), F(in), F(out), F(rotary_offset),
                       F(n_pos_axes), F(pair_axis), F(attention_factor), F(freq_rule), LAST, sizeof(rc_freq_rule),
                       TENSOR};
#undef F
