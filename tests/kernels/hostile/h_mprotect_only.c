/* Hostile: a correct kernel that, after computing its output, makes the page after the output's end
 * (the gate's PROT_NONE guard page) readable and writable, and writes nothing: later out-of-bounds
 * writes into it would no longer fault. The guard page must still be PROT_NONE after a call.
 * Expect: exit 1; mentions: PROT_NONE
 */
#include <sys/mman.h>
#include <unistd.h>

#define MK_KERNEL_NAME mk_rope_apply
#include "../mutants/mutant_common.h"

RC_EXPORT int rc_rope_apply(const rc_rope_args* a) {
  const int rc = mk_rope_apply(a);
  const size_t nb = (size_t)a->n_tokens * a->n_heads * a->head_dim * mk_esize(a->dtype);
  if (rc != RC_OK || nb == 0) return rc;
  const uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE), end = (uintptr_t)a->out + nb;
  mprotect((void*)((end + pg - 1) / pg * pg), pg, PROT_READ | PROT_WRITE); /* the page at or after the end */
  return rc;
}
