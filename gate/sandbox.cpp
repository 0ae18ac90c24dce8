#include "gate/sandbox.hpp"

#include <fcntl.h>
#include <fenv.h>
#include <sched.h>
#include <seccomp.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#endif

namespace ropecheck::gate {

// ---- FP control -----------------------------------------------------------

#if defined(__x86_64__) || defined(__i386__)
// bits: MXCSR without its six sticky exception flags (low 32), the x87 control word (next 16).
FpControl read_fp_control() {
  uint16_t cw = 0;
  __asm__ volatile("fnstcw %0" : "=m"(cw));
  return {uint64_t(_mm_getcsr() & ~0x3fu) | (uint64_t(cw) << 32)};
}
void write_fp_control(FpControl c) {
  const uint16_t cw = uint16_t(c.bits >> 32);
  __asm__ volatile("fldcw %0" : : "m"(cw));
  _mm_setcsr(uint32_t(c.bits & 0xffffffc0u));
}
std::string describe_fp_change(FpControl before, FpControl after) {
  const uint32_t a = uint32_t(before.bits), b = uint32_t(after.bits);
  const uint16_t ca = uint16_t(before.bits >> 32), cb = uint16_t(after.bits >> 32);
  std::vector<std::string> what;
  auto bit = [&](uint32_t mask, const char* name) {
    if ((a ^ b) & mask) what.push_back(fmt::format("{} {}", name, (b & mask) ? "on" : "off"));
  };
  bit(0x8000, "flush-to-zero");
  bit(0x0040, "denormals-are-zero");
  static const char* kRound[] = {"to nearest", "down", "up", "toward zero"};
  if (((a >> 13) & 3) != ((b >> 13) & 3)) what.push_back(fmt::format("SSE rounding {}", kRound[(b >> 13) & 3]));
  if ((a ^ b) & 0x1f80) what.push_back("SSE exception masks changed (a trap can fire)");
  if (((ca >> 10) & 3) != ((cb >> 10) & 3)) what.push_back(fmt::format("x87 rounding {}", kRound[(cb >> 10) & 3]));
  if (((ca >> 8) & 3) != ((cb >> 8) & 3)) what.push_back("x87 precision changed");
  if ((ca ^ cb) & 0x3f) what.push_back("x87 exception masks changed");
  std::string s = fmt::format("MXCSR {:#06x} -> {:#06x}", a, b);
  if (ca != cb) s += fmt::format(", x87 control word {:#06x} -> {:#06x}", ca, cb);
  if (!what.empty()) {
    s += ": ";
    for (size_t i = 0; i < what.size(); ++i) s += (i ? ", " : "") + what[i];
  }
  return s;
}
#elif defined(__aarch64__)
FpControl read_fp_control() {
  uint64_t v;
  __asm__ volatile("mrs %0, fpcr" : "=r"(v));
  return {v};
}
void write_fp_control(FpControl c) { __asm__ volatile("msr fpcr, %0" : : "r"(c.bits)); }
std::string describe_fp_change(FpControl before, FpControl after) {
  std::string s = fmt::format("FPCR {:#x} -> {:#x}", before.bits, after.bits);
  if ((before.bits ^ after.bits) & (1u << 24)) s += (after.bits & (1u << 24)) ? ": flush-to-zero on" : ": flush-to-zero off";
  return s;
}
#else
FpControl read_fp_control() { return {uint64_t(unsigned(fegetround()))}; }
void write_fp_control(FpControl c) { fesetround(int(c.bits)); }
std::string describe_fp_change(FpControl before, FpControl after) {
  return fmt::format("rounding mode {} -> {}", before.bits, after.bits);
}
#endif

// ---- seccomp --------------------------------------------------------------

std::string install_seccomp_filter() {
  scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
  if (!ctx) return "seccomp_init failed";
  const uint32_t kill = SCMP_ACT_KILL_PROCESS;
  const scmp_datum_t self = scmp_datum_t(getpid());
  int err = 0;
  auto rule = [&](uint32_t action, int sys, std::initializer_list<scmp_arg_cmp> args) {
    if (err) return;
    const int r = seccomp_rule_add_array(ctx, action, sys, unsigned(args.size()), args.begin());
    // A syscall this architecture does not have (fork on AArch64, ...) is not an error.
    if (r != 0 && r != -EDOM && r != -EFAULT) err = r;
  };
  // Signals only to the host itself (abort and raise use tgkill on the own process).
  rule(kill, SCMP_SYS(kill), {SCMP_A0(SCMP_CMP_NE, self)});
  rule(kill, SCMP_SYS(tgkill), {SCMP_A0(SCMP_CMP_NE, self)});
  rule(kill, SCMP_SYS(rt_sigqueueinfo), {SCMP_A0(SCMP_CMP_NE, self)});
  rule(kill, SCMP_SYS(rt_tgsigqueueinfo), {SCMP_A0(SCMP_CMP_NE, self)});
  for (int sys : {SCMP_SYS(tkill), SCMP_SYS(pidfd_send_signal), SCMP_SYS(ptrace), SCMP_SYS(process_vm_readv),
                  SCMP_SYS(process_vm_writev), SCMP_SYS(fork), SCMP_SYS(vfork), SCMP_SYS(execve),
                  SCMP_SYS(execveat), SCMP_SYS(creat), SCMP_SYS(unlink), SCMP_SYS(unlinkat), SCMP_SYS(rename),
                  SCMP_SYS(renameat), SCMP_SYS(renameat2), SCMP_SYS(mkdir), SCMP_SYS(mkdirat), SCMP_SYS(rmdir),
                  SCMP_SYS(link), SCMP_SYS(linkat), SCMP_SYS(symlink), SCMP_SYS(symlinkat), SCMP_SYS(truncate),
                  SCMP_SYS(chmod), SCMP_SYS(fchmodat), SCMP_SYS(chown), SCMP_SYS(lchown), SCMP_SYS(fchownat),
                  SCMP_SYS(mknod), SCMP_SYS(mknodat), SCMP_SYS(utimensat), SCMP_SYS(utimes), SCMP_SYS(utime),
                  SCMP_SYS(setxattr), SCMP_SYS(lsetxattr), SCMP_SYS(removexattr), SCMP_SYS(lremovexattr)})
    rule(kill, sys, {});
  // Threads are fine (OpenMP, std::thread); a new process is not.
  rule(kill, SCMP_SYS(clone), {SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_THREAD, 0)});
  rule(SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), {});
  rule(SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(openat2), {});
  // Opening for writing or creating: the stdout/stderr capture files are open already.
  for (scmp_datum_t flag : {scmp_datum_t(O_WRONLY), scmp_datum_t(O_RDWR), scmp_datum_t(O_CREAT),
                            scmp_datum_t(O_TRUNC), scmp_datum_t(O_APPEND)}) {
    rule(kill, SCMP_SYS(open), {SCMP_A1(SCMP_CMP_MASKED_EQ, flag, flag)});
    rule(kill, SCMP_SYS(openat), {SCMP_A2(SCMP_CMP_MASKED_EQ, flag, flag)});
  }
  if (!err) err = seccomp_load(ctx);
  seccomp_release(ctx);
  if (err) return fmt::format("seccomp filter not installed: {}", std::strerror(-err));
  return "";
}

}  // namespace ropecheck::gate
