/* Correct: ok_fast_f32 whose pass-through dims and pairs at an angle of exactly 0 are loaded to float and
 * stored back instead of copied, as a kernel that converts every element to f32 does: every value is kept,
 * but an f16/bf16 signalling NaN comes back quiet (f16 0x7c01 -> 0x7e01), which identity=values (the
 * default) allows and identity=bits does not.
 * The gate must pass it under the contract it declares (gate/tests reads the next line):
 * Contract: default
 */
#define MK_PASS_FLOAT 1
#include "mutant_common.h"
