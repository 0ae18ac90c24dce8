/* Correct: a kernel that takes int32 positions (ggml, TransformerEngine, MLX and FlashInfer do) declines a
 * call with a position outside int32, and computes the others as ok_double does from the int32 position. The
 * long positions row's cases beyond int32 are declined (never a failure); those within int32 pass. The gate must
 * pass it. */
#define MK_NO_KERNEL 1
#define MK_DOUBLE_KERNEL 1
#define MK_DOUBLE_POSITION(p) ((double)(int32_t)(p))
#define MK_DOUBLE_DECLINE(a) mk_positions_beyond_int32(a) /* int32 positions: declined beyond them */
#include "mutant_common.h"
