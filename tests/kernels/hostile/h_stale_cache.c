/* Hostile: a kernel whose frequency table (theta_i, from which its cos/sin are made) is cached in a
 * static keyed on base only: recomputed when the base changes, not when rotary_dim (or head_dim) does,
 * so a call with a new rotary_dim and the same base uses the last one's exponents (and entries never
 * computed, 0: unrotated pairs). Correct in a fresh process and whenever the base changes.
 * Expect: exit 1; mentions: state across calls
 */
#define MK_KERNEL_NAME mk_rope_apply
#include "../mutants/mutant_common.h"

RC_EXPORT int rc_rope_apply(const rc_rope_args* a) {
  static double cached_base = 0, table[128]; /* rotary_dim <= 256 */
  if (!a || a->inv_freq || a->rotary_dim > 256) return mk_rope_apply(a);
  if (a->base != cached_base) {
    for (uint32_t i = 0; i < a->rotary_dim / 2; ++i) table[i] = pow(a->base, -2.0 * i / a->rotary_dim);
    cached_base = a->base;
  }
  rc_rope_args b = *a;
  b.inv_freq = table;
  return mk_rope_apply(&b);
}
