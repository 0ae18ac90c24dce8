/* Hostile: a correct kernel that, after computing its output, makes the page after the output's end
 * (the gate's PROT_NONE guard page) readable and writable and changes a byte in it: an out-of-bounds
 * write that no fault reports. The guard page's protection and content must be checked after a call.
 * Expect: exit 1; mentions: guard byte(s) after the output buffer
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
  unsigned char* next = (unsigned char*)((end + pg - 1) / pg * pg); /* the page at or after the end */
  if (mprotect(next, pg, PROT_READ | PROT_WRITE) == 0) next[0] ^= 0xff;
  return rc;
}
