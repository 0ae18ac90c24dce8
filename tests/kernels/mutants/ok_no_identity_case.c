/* Correct: ok_fast_f32 (double angles, f32 cos/sin reused across heads, f32 rotation, RNE stores)
 * without a special case at angle 0: position 0 computes x0*1 - x1*0 and x0*0 + x1*1, which keeps
 * every value but not every bit ((-0, -3) becomes (+0, -3); Inf beside a finite value gives a NaN),
 * which identity=values (the default) allows.
 * The gate must pass it under the contract it declares (gate/tests reads the next line):
 * Contract: default
 */
#define MK_NO_IDENTITY 1
#include "mutant_common.h"
