/* Hostile: a correct kernel that declines bf16 (RC_UNSUPPORTED), but only after writing a zero into
 * the first output element. Declining one dtype is allowed (f32 and f16 give coverage); writing into
 * the output (in place: the input) of a call it declines is not, and nothing judges a declined call's
 * output unless the gate checks it.
 * Expect: exit 1; mentions: after writing
 */
#define MK_KERNEL_NAME mk_rope_apply
#include "../mutants/mutant_common.h"

RC_EXPORT int rc_rope_apply(const rc_rope_args* a) {
  if (a && a->dtype == RC_BF16 && a->n_tokens && a->out) {
    mk_store(RC_BF16, a->out, 0, 0.0f);
    return RC_UNSUPPORTED;
  }
  return mk_rope_apply(a);
}
