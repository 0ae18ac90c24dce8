/* Planted bug: rule_ignored (see mutant_common.h, MK_V2 + MUT_RULE_IGNORED): every frequency rule (linear,
 * dynamic, NTK, YaRN, LongRoPE, llama3) accepted and not applied -- theta from base alone, as a kernel that drops
 * the model's rope_scaling computes. A v2 kernel, correct on v1 calls: only v2 cases catch it. */
#define MK_NO_KERNEL 1
#define MK_V2 1
#define MUT_RULE_IGNORED 1
#include "mutant_common.h"
