/* Hostile: a correct kernel that, after computing its output, casts away the const of the caller's
 * positions and adds 1 to the first one. A gate that judges the output against positions read after
 * the call, or reuses the array, judges another case; the positions must be checked after each call.
 * Expect: exit 1; mentions: positions array
 */
#define MK_KERNEL_NAME mk_rope_apply
#include "../mutants/mutant_common.h"

RC_EXPORT int rc_rope_apply(const rc_rope_args* a) {
  const int rc = mk_rope_apply(a);
  if (rc == RC_OK && a->n_tokens) ((int64_t*)a->positions)[0] += 1;
  return rc;
}
