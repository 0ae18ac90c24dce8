/* Correct: ok_fast_f32 whose pass-through dims and pairs at an angle of exactly 0 are multiplied by
 * cos 0 = 1.0f (its cos/sin row has one more entry, at angle 0, for the pass-through dims) instead of
 * copied: x * 1 keeps every value, but a signalling NaN comes back quiet (f32 0x7fa00001 -> 0x7fe00001),
 * which identity=values (the default) allows and identity=bits does not.
 * The gate must pass it under the contract it declares (gate/tests reads the next line):
 * Contract: default
 */
#define MK_PASS_MUL1 1
#include "mutant_common.h"
