/* A v1 kernel that returns an error code (2) for any version but 1: the version it was written for, as a
 * literal. The v1 header never told it to return RC_UNSUPPORTED for a version it does not know. */
#include <ropecheck/kernel_abi.h>

#include "v1_rope_body.h"

__attribute__((visibility("default"))) int rc_rope_apply(const rc_rope_args* a) {
  if (!a || a->abi_version != 1) return 2;
  return abi_rope_v1(a);
}
