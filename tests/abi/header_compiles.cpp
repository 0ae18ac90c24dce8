// The ABI v3 draft (include/ropecheck/kernel_abi.h with ROPECHECK_ABI_DRAFT_V3) compiles as C++ too, with its
// static assertions.
#include "ropecheck/kernel_abi.h"

static_assert(ROPECHECK_ABI_DRAFT_VERSION == 3 && ROPECHECK_ABI_VERSION == 2, "draft 3, released 2");
static_assert(sizeof(rc_tensor) == 3 * sizeof(void*) + 24, "DLTensor's size on LP64: 48 bytes");
