/* Correct: a v2 kernel (mutant_common.h, MK_V2): rotary_offset, position axes with pair_axis, attention_factor,
 * every rc_freq_rule kind (YaRN, llama3, LongRoPE, dynamic and fixed NTK, linear) and negative positions, and v1
 * calls. theta (the rule's table) and the angle in long double, cos/sin and the rotation in double, each output
 * rounded once. The gate must pass it. */
#define MK_NO_KERNEL 1
#define MK_V2 1
#include "mutant_common.h"
