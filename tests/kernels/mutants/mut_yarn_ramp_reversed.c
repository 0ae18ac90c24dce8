/* Planted bug: yarn_ramp_reversed (see mutant_common.h, MK_V2 + MUT_YARN_REVERSED): the YaRN ramp reversed: theta0*ramp + theta0/f*(1 - ramp).
 * A v2 kernel, correct on v1 calls: only v2 cases catch it. */
#define MK_NO_KERNEL 1
#define MK_V2 1
#define MUT_YARN_REVERSED 1
#include "mutant_common.h"
