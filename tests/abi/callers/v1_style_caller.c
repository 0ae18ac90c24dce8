/* A program that calls RoPE kernels through the ABI, written against one released header (the include path
 * picks which) the way a v1 user wrote it: a zero-initialised rc_rope_args, abi_version set to the header's
 * ROPECHECK_ABI_VERSION, the v1 fields filled, nothing else. Built once per header as CALLER (a distinct
 * name each); the struct sits flush against a PROT_NONE page, so a kernel that reads past the struct this
 * header declares faults instead of reading neutral values by luck.
 *
 * Returns what the kernel returned, or -1 when the guard page could not be set up. */
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <ropecheck/kernel_abi.h>

int CALLER(int (*fn)(const void*), uint32_t dtype, uint32_t layout, uint32_t head_dim, uint32_t rotary_dim,
           uint32_t n_heads, uint64_t n_tokens, const int64_t* positions, double base, const void* in, void* out) {
  const size_t page = (size_t)sysconf(_SC_PAGESIZE);
  unsigned char* mem = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) return -1;
  if (mprotect(mem + page, page, PROT_NONE) != 0) {
    munmap(mem, 2 * page);
    return -1;
  }
  rc_rope_args a;
  memset(&a, 0, sizeof a);
  a.abi_version = ROPECHECK_ABI_VERSION;
  a.dtype = dtype;
  a.layout = layout;
  a.head_dim = head_dim;
  a.rotary_dim = rotary_dim;
  a.n_heads = n_heads;
  a.n_tokens = n_tokens;
  a.positions = positions;
  a.base = base;
  a.position_scale = 1.0;
  a.inv_freq = NULL;
  a.in = in;
  a.out = out;
  rc_rope_args* placed = (rc_rope_args*)(mem + page - sizeof a);
  memcpy(placed, &a, sizeof a);
  const int rc = fn(placed);
  munmap(mem, 2 * page);
  return rc;
}
