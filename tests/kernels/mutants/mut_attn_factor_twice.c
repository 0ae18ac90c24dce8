/* Planted bug: attn_factor_twice (see mutant_common.h, MK_V2 + MUT_ATTN_TWICE): cos and sin multiplied by attention_factor twice (s^2 instead of s).
 * A v2 kernel, correct on v1 calls: only v2 cases catch it. */
#define MK_NO_KERNEL 1
#define MK_V2 1
#define MUT_ATTN_TWICE 1
#include "mutant_common.h"
