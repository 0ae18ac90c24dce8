#include "gate/sandbox.hpp"

#include <fcntl.h>
#include <fenv.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/shm.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include <atomic>
#include <cstddef>

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

// ---- the mapping watch ----------------------------------------------------
// The gate must know that every guard page is still PROT_NONE after a call. Asking the host's memory from
// outside (process_vm_readv, one page at a time) cost two system calls' time per guard page and call, a tenth
// of a default gate. A page's protection changes only through a handful of system calls; with seccomp in force
// the host traps those the kernel makes (SECCOMP_RET_TRAP, unless made from watched_syscall's one
// instruction), makes each exactly as asked from its SIGSYS handler, and tells the gate when one touched the
// arena: only then does the gate read the guard pages from outside.

#if defined(__x86_64__)
extern "C" {
long rc_watched_syscall_entry(long nr, long a0, long a1, long a2, long a3, long a4, long a5);
extern const char rc_watched_syscall_return[];
}
__asm__(
    ".text\n"
    ".p2align 4\n"
    ".hidden rc_watched_syscall_entry\n"
    ".hidden rc_watched_syscall_return\n"
    ".globl rc_watched_syscall_entry\n"
    ".globl rc_watched_syscall_return\n"
    ".type rc_watched_syscall_entry, @function\n"
    "rc_watched_syscall_entry:\n"
    "  movq %rdi, %rax\n"
    "  movq %rsi, %rdi\n"
    "  movq %rdx, %rsi\n"
    "  movq %rcx, %rdx\n"
    "  movq %r8, %r10\n"
    "  movq %r9, %r8\n"
    "  movq 8(%rsp), %r9\n"
    "  syscall\n"
    "rc_watched_syscall_return:\n"
    "  ret\n"
    ".size rc_watched_syscall_entry, .-rc_watched_syscall_entry\n");

long watched_syscall(long nr, long a0, long a1, long a2, long a3, long a4, long a5) {
  return rc_watched_syscall_entry(nr, a0, a1, a2, a3, a4, a5);
}
#else
long watched_syscall(long nr, long a0, long a1, long a2, long a3, long a4, long a5) {
  const long r = syscall(nr, a0, a1, a2, a3, a4, a5);
  return r == -1 ? -errno : r;
}
#endif

namespace {
std::atomic<uint32_t> g_touched{0};
uintptr_t g_watch_lo = 0, g_watch_hi = 0;

#if defined(__x86_64__)
// Whether [a, a + len) (len rounded up to pages) meets the watched range; an overflowing range does.
bool meets_watched(uint64_t a, uint64_t len) {
  const uint64_t pg = uint64_t(sysconf(_SC_PAGESIZE));
  const uint64_t end = a + ((len + pg - 1) & ~(pg - 1));
  if (end < a) return true;
  return a < g_watch_hi && end > g_watch_lo;
}

void on_sigsys(int, siginfo_t* si, void* vctx) {
  const int saved = errno;
  if (si->si_code != 1 /* SYS_SECCOMP */) {  // a SIGSYS someone sent: its default action, as without the watch
    struct { void* handler; unsigned long flags; void* restorer; uint64_t mask; } dfl{};  // SIG_DFL
    watched_syscall(SYS_rt_sigaction, SIGSYS, reinterpret_cast<long>(&dfl), 0, sizeof(uint64_t));
    watched_syscall(SYS_tgkill, getpid(), syscall(SYS_gettid), SIGSYS);
    errno = saved;
    return;
  }
  greg_t* g = static_cast<ucontext_t*>(vctx)->uc_mcontext.gregs;
  const long nr = si->si_syscall;
  const uint64_t a0 = uint64_t(g[REG_RDI]), a1 = uint64_t(g[REG_RSI]), a2 = uint64_t(g[REG_RDX]),
                 a3 = uint64_t(g[REG_R10]), a4 = uint64_t(g[REG_R8]), a5 = uint64_t(g[REG_R9]);
  bool touch = true;  // shmat with SHM_REMAP (its size is the segment's), x32 calls: assumed to
  switch (nr) {
    case SYS_mprotect:
    case SYS_pkey_mprotect:
    case SYS_munmap:
    case SYS_mmap:
    case SYS_remap_file_pages: touch = meets_watched(a0, a1); break;
    case SYS_mremap: touch = meets_watched(a0, a1) || ((a3 & MREMAP_FIXED) && meets_watched(a4, a2)); break;
    default: break;
  }
  if (touch) g_touched.store(1, std::memory_order_relaxed);
  g[REG_RAX] = greg_t(watched_syscall(nr, long(a0), long(a1), long(a2), long(a3), long(a4), long(a5)));
  errno = saved;
}

// A classic BPF program, its jumps by label.
struct Bpf {
  struct Ins {
    sock_filter f;
    int jt = -1, jf = -1;  // labels, or -1: the next instruction
  };
  std::vector<Ins> ins;
  std::vector<int> at;  // label -> index
  int label() {
    at.push_back(-1);
    return int(at.size()) - 1;
  }
  void bind(int l) { at[size_t(l)] = int(ins.size()); }
  void ld(uint32_t off) { ins.push_back({BPF_STMT(BPF_LD | BPF_W | BPF_ABS, off)}); }
  void jeq(uint32_t k, int jt, int jf) { ins.push_back({BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, k, 0, 0), jt, jf}); }
  void jset(uint32_t k, int jt, int jf) { ins.push_back({BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, k, 0, 0), jt, jf}); }
  void ret(uint32_t k) { ins.push_back({BPF_STMT(BPF_RET | BPF_K, k)}); }
  // To `yes` when the system call instruction is at `ip` (both halves of the 64-bit instruction pointer), else `no`.
  void from_ip(uint64_t ip, int yes, int no) {
    const int high = label();
    ld(offsetof(seccomp_data, instruction_pointer));
    jeq(uint32_t(ip), high, no);
    bind(high);
    ld(offsetof(seccomp_data, instruction_pointer) + 4);
    jeq(uint32_t(ip >> 32), yes, no);
  }
  std::vector<sock_filter> code() const {
    std::vector<sock_filter> out;
    for (size_t i = 0; i < ins.size(); ++i) {
      sock_filter f = ins[i].f;
      if (ins[i].jt >= 0) f.jt = uint8_t(at[size_t(ins[i].jt)] - int(i) - 1);
      if (ins[i].jf >= 0) f.jf = uint8_t(at[size_t(ins[i].jf)] - int(i) - 1);
      out.push_back(f);
    }
    return out;
  }
};
#endif
}  // namespace

bool take_mapping_watch_touch() { return g_touched.exchange(0, std::memory_order_relaxed) != 0; }
void note_mapping_watch_touch() { g_touched.store(1, std::memory_order_relaxed); }

std::string install_mapping_watch(uintptr_t lo, size_t bytes) {
#if defined(__x86_64__)
  g_watch_lo = lo;
  g_watch_hi = lo + bytes;
  const uint64_t ip = reinterpret_cast<uint64_t>(rc_watched_syscall_return);
  auto arg = [](int i, bool high) { return uint32_t(offsetof(seccomp_data, args) + 8 * i + (high ? 4 : 0)); };
  Bpf b;
  const int check_ip = b.label(), mmap_l = b.label(), shmat_l = b.label(), sigaction_l = b.label(),
            trap = b.label(), allow = b.label(), eperm = b.label(), act_hi = b.label(), own_sigaction = b.label();
  b.ld(offsetof(seccomp_data, arch));
  b.jeq(AUDIT_ARCH_X86_64, -1, allow);  // (the first filter kills other architectures' calls)
  b.ld(offsetof(seccomp_data, nr));
  b.jset(0x40000000u, check_ip, -1);  // x32
  for (long nr : {SYS_mprotect, SYS_pkey_mprotect, SYS_munmap, SYS_mremap, SYS_remap_file_pages})
    b.jeq(uint32_t(nr), check_ip, -1);
  b.jeq(SYS_mmap, mmap_l, -1);
  b.jeq(SYS_shmat, shmat_l, -1);
  b.jeq(SYS_rt_sigaction, sigaction_l, -1);
  b.ret(SECCOMP_RET_ALLOW);
  b.bind(mmap_l);
  b.ld(arg(3, false));
  b.jset(MAP_FIXED, check_ip, allow);
  b.bind(shmat_l);
  b.ld(arg(2, false));
  b.jset(SHM_REMAP, check_ip, allow);
  b.bind(sigaction_l);  // rt_sigaction(SIGSYS, act != NULL, ...): not allowed
  b.ld(arg(0, false));
  b.jeq(SIGSYS, -1, allow);
  b.ld(arg(1, false));
  b.jeq(0, act_hi, own_sigaction);
  b.bind(act_hi);
  b.ld(arg(1, true));
  b.jeq(0, allow, own_sigaction);
  b.bind(own_sigaction);  // (the handler's own, restoring the default action: allowed)
  b.from_ip(ip, allow, eperm);
  b.bind(check_ip);
  b.from_ip(ip, allow, trap);
  b.bind(trap);
  b.ret(SECCOMP_RET_TRAP);
  b.bind(allow);
  b.ret(SECCOMP_RET_ALLOW);
  b.bind(eperm);
  b.ret(SECCOMP_RET_ERRNO | EPERM);
  std::vector<sock_filter> code = b.code();
  sock_fprog prog{static_cast<unsigned short>(code.size()), code.data()};

  struct sigaction sa {};
  sa.sa_sigaction = on_sigsys;
  sa.sa_flags = SA_SIGINFO;
  sigemptyset(&sa.sa_mask);
  if (sigaction(SIGSYS, &sa, nullptr) != 0) return fmt::format("SIGSYS handler not installed: {}", std::strerror(errno));
  sigset_t sys;
  sigemptyset(&sys);
  sigaddset(&sys, SIGSYS);
  sigprocmask(SIG_UNBLOCK, &sys, nullptr);
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) != 0) {
    const int e = errno;
    signal(SIGSYS, SIG_DFL);
    return fmt::format("mapping watch not installed: {}", std::strerror(e));
  }
  return "";
#else
  (void)lo;
  (void)bytes;
  return "the mapping watch is written for x86-64 only";
#endif
}

}  // namespace ropecheck::gate
