/* Correct: ok_fast_f32 whose pass-through dims and pairs at an angle of exactly 0 are computed as
 * 0.0f + x, as autograd's zeros + g does, instead of copied: every value is kept, but -0 becomes +0 and a
 * signalling NaN comes back quiet, which identity=values (the default) allows and identity=bits does not.
 * The gate must pass it under the contract it declares (gate/tests reads the next line):
 * Contract: default
 */
#define MK_PASS_ADD0 1
#include "mutant_common.h"
