/* Planted bug: mrope_section_map (see mutant_common.h, MK_V2 + MUT_MROPE_SECTIONS): pair_axis read as contiguous sections in axis order (Qwen2-VL), wrong for interleaved maps (Qwen3-VL).
 * A v2 kernel, correct on v1 calls: only v2 cases catch it. */
#define MK_NO_KERNEL 1
#define MK_V2 1
#define MUT_MROPE_SECTIONS 1
#include "mutant_common.h"
