/* Hostile: a correct kernel that creates and writes files: $ROPECHECK_HOSTILE_OUTSIDE/pwned (a
 * directory outside anything the gate gives it) and ./pwned (the gate's working directory).
 *
 * Only where the test driver (gate/tests/test_hostile.cpp) says: nothing without
 * ROPECHECK_HOSTILE_OUTSIDE, and ./pwned only when the working directory is the driver's scratch
 * directory <outside>/../cwd (a gate that moves the kernel elsewhere, e.g. to /, must not get a file
 * there should its sandbox fail).
 * Expect: exit 1; mentions: forbidden system call
 */
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#define MK_KERNEL_NAME mk_rope_apply
#include "../mutants/mutant_common.h"

static void h_write(const char* path) {
  const int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0644);
  if (fd < 0) return;
  static const char msg[] = "written by h_write_file\n";
  if (write(fd, msg, sizeof msg - 1) < 0) { /* nothing to do */ }
  close(fd);
}

RC_EXPORT int rc_rope_apply(const rc_rope_args* a) {
  const int rc = mk_rope_apply(a);
  const char* outside = getenv("ROPECHECK_HOSTILE_OUTSIDE");
  if (!outside || !*outside) return rc;
  char path[4096];
  snprintf(path, sizeof path, "%s/pwned", outside);
  h_write(path);
  snprintf(path, sizeof path, "%s/../cwd", outside);
  struct stat want, here;
  if (stat(path, &want) == 0 && stat(".", &here) == 0 && want.st_dev == here.st_dev && want.st_ino == here.st_ino)
    h_write("./pwned");
  return rc;
}
