/* Hostile: a correct kernel that, after computing its output, copies the byte just past the end of the
 * input onto the byte just past the end of the output (an off-by-one row copy, or a kernel forging the
 * guard pattern it finds after its input). Only where neither buffer ends flush with a page, so that
 * the copy itself does not fault.
 * Expect: exit 1; mentions: guard byte(s)
 */
#include <unistd.h>

#define MK_KERNEL_NAME mk_rope_apply
#include "../mutants/mutant_common.h"

RC_EXPORT int rc_rope_apply(const rc_rope_args* a) {
  const int rc = mk_rope_apply(a);
  const size_t nb = (size_t)a->n_tokens * a->n_heads * a->head_dim * mk_esize(a->dtype);
  if (rc != RC_OK || nb == 0) return rc;
  const uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
  const unsigned char* in_end = (const unsigned char*)a->in + nb;
  unsigned char* out_end = (unsigned char*)a->out + nb;
  if ((uintptr_t)in_end % pg && (uintptr_t)out_end % pg) *out_end = *in_end;
  return rc;
}
