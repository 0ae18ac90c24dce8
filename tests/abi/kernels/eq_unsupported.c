/* A v1 kernel that declines any version but the header's: the v1 header's field comment said
 * "abi_version: ROPECHECK_ABI_VERSION", so it compares with the macro. Built against the v1 header it takes
 * version 1 only; rebuilt against a later header, only that header's version. */
#include <ropecheck/kernel_abi.h>

#include "v1_rope_body.h"

__attribute__((visibility("default"))) int rc_rope_apply(const rc_rope_args* a) {
  if (!a) return 2;
  if (a->abi_version != ROPECHECK_ABI_VERSION) return RC_UNSUPPORTED;
  return abi_rope_v1(a);
}
