// Today's include/ropecheck/kernel_abi.h compiles as C++ too, with its static assertions (DLPack's layout).
#include "ropecheck/kernel_abi.h"

static_assert(ROPECHECK_ABI_VERSION == 4, "the header describes version 4");
static_assert(sizeof(rc_tensor) == 3 * sizeof(void*) + 24, "DLTensor's size on LP64: 48 bytes");
