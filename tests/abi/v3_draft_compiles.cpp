// The ABI v3 draft (docs/abi-v3/kernel_abi.h) compiles as C++ too, with its static assertions.
#include "kernel_abi.h"

static_assert(ROPECHECK_ABI_VERSION == 3, "the draft describes version 3");
static_assert(sizeof(rc_tensor) == 3 * sizeof(void*) + 24, "DLTensor's size on LP64: 48 bytes");
