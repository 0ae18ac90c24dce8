/* Planted bug: attn_factor_never (see mutant_common.h, MK_V2 + MUT_ATTN_NEVER): attention_factor ignored (every pair keeps its norm).
 * A v2 kernel, correct on v1 calls: only v2 cases catch it. */
#define MK_NO_KERNEL 1
#define MK_V2 1
#define MUT_ATTN_NEVER 1
#include "mutant_common.h"
