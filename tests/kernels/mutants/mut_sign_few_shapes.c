/* Planted bug: a kernel written for one model, as llama2.c's RoPE is (base 10000, every dim rotated, no
 * frequency table, no position scale): it declines every other shape (RC_UNSUPPORTED, which is allowed) and
 * rotates by the negated angle (mutant_common.h, MUT_SIGN). Most generated cases are declined, so the property
 * rows find its failures among the executions the driver makes past --property-cases (docs/gate.md), and their
 * replay files name such an execution. The gate must fail it.
 */
#define MK_KERNEL_NAME mk_rope_apply
#define MUT_SIGN 1
#include "mutant_common.h"

RC_EXPORT int rc_rope_apply(const rc_rope_args* a) {
  if (a && (a->base != 10000.0 || a->rotary_dim != a->head_dim || a->inv_freq || a->position_scale != 1.0))
    return RC_UNSUPPORTED;
  return mk_rope_apply(a);
}
