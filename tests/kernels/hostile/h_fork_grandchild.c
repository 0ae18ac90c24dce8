/* Hostile: a correct kernel whose first call forks a process that leaves the session (setsid) and
 * writes a line to stdout every 100 ms, while the call returns normally. Such a process outlives the
 * gate, keeps its stdout (a CI log pipe) open and escapes a kill of the gate's process group.
 *
 * Bounded so that it cannot harm a machine where it runs unsandboxed: it exits by itself after 30 s
 * (alarm(31) backs that up should a write block on a full pipe), dies on a closed pipe (SIGPIPE), and
 * only one such process is ever forked per loaded library, even by a gate that forks a process per
 * call (whose copies of a static flag all start at 0): the flag is in a shared mapping made at load.
 * Expect: exit 1; mentions: forbidden system call
 */
#include <signal.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define MK_KERNEL_NAME mk_rope_apply
#include "../mutants/mutant_common.h"

static int* h_forked; /* shared by every process forked from the loading one */

__attribute__((constructor)) static void h_map_flag(void) {
  void* p = mmap(NULL, sizeof(int), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  h_forked = p == MAP_FAILED ? NULL : (int*)p;
}

static double h_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void h_chatter(void) {
  sigset_t all;
  sigemptyset(&all);
  sigprocmask(SIG_SETMASK, &all, NULL); /* a mask or ignored signal inherited from the caller must */
  signal(SIGALRM, SIG_DFL);             /* not disable the backstops */
  signal(SIGPIPE, SIG_DFL);
  setsid();
  alarm(31);
  static const char line[] = "hostile grandchild: still here\n";
  const struct timespec tick = {0, 100000000};
  for (const double end = h_now() + 30; h_now() < end;) {
    if (write(STDOUT_FILENO, line, sizeof line - 1) < 0) break;
    nanosleep(&tick, NULL);
  }
  _exit(0);
}

RC_EXPORT int rc_rope_apply(const rc_rope_args* a) {
  static int done;
  const int rc = mk_rope_apply(a);
  if (!done && !(h_forked && __atomic_exchange_n(h_forked, 1, __ATOMIC_SEQ_CST))) {
    done = 1;
    if (fork() == 0) h_chatter();
  }
  return rc;
}
