/* Correct: ok_fast_f32 built as fast-math code runs: the f32 arithmetic under FTZ/DAZ (MXCSR, set
 * for the call and restored, as -ffast-math's crtfastmath.o sets it for a whole program), and
 * subnormal values of the storage type flushed to a zero of their sign on load and on store (f16
 * subnormals are normal in f32, so DAZ alone would not flush them). Pass-through dims and angle-0
 * pairs are copied bit for bit. FTZ also flushes a product that underflows, so a pair of tiny normal
 * inputs can lose up to the smallest normal per product (denormals=flush covers intermediates).
 * The gate must pass it under the contract it declares (gate/tests reads the next line):
 * Contract: denormals=flush
 */
#define MK_FLUSH_DENORMALS 1
#include "mutant_common.h"
