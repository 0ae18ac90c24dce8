/* Correct, of one rotated slice: ok_double's arithmetic on heads whose first int(head_dim * 0.25) elements are
 * rotated (GPT-NeoX's rotary_pct 0.25: Pythia, StableLM), declining (RC_UNSUPPORTED) every call with any other
 * rotary_dim -- the full-rotary probes among them. The gate must find the slice by probing and pass it under its
 * default options, every row's cases in that slice (docs/gate.md, "Partial rotary"). */
#include <stdint.h>
#include <ropecheck/kernel_abi.h>
#define MK_NO_KERNEL 1
#define MK_DOUBLE_KERNEL 1
#define MK_DOUBLE_DECLINE(a) ((a)->rotary_dim != (uint32_t)((a)->head_dim * 0.25))
#include "mutant_common.h"
