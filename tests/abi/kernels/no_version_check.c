/* A v1 kernel that never looks at abi_version: it takes every call, whatever version it carries. */
#include <ropecheck/kernel_abi.h>

#include "v1_rope_body.h"

__attribute__((visibility("default"))) int rc_rope_apply(const rc_rope_args* a) {
  if (!a) return 2;
  return abi_rope_v1(a);
}
