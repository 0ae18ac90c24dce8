/* A kernel built against a header newer than the ropecheck that gates it, with the equality idiom: it takes
 * only version 9 and returns an error code for every version this ropecheck speaks. The gate can call it
 * nowhere: one verdict line says so (which call, which code, the likely causes). */
#include <ropecheck/kernel_abi.h>

#include "v1_rope_body.h"

__attribute__((visibility("default"))) int rc_rope_apply(const rc_rope_args* a) {
  if (!a || a->abi_version != 9) return 2;
  return abi_rope_v1(a);
}
