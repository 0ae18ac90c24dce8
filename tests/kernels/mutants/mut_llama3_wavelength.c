/* Planted bug: llama3_wavelength (see mutant_common.h, MK_V2 + MUT_LLAMA3_WAVELEN): llama3 smoothing from wavelen/L where L/wavelen is meant.
 * A v2 kernel, correct on v1 calls: only v2 cases catch it. */
#define MK_NO_KERNEL 1
#define MK_V2 1
#define MUT_LLAMA3_WAVELEN 1
#include "mutant_common.h"
