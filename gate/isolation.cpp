#include "gate/isolation.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <ucontext.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <optional>
#include <sstream>

#include <fmt/format.h>

#include "core/tensor_call.hpp"
#include "gate/host_protocol.hpp"
#include "impls/plugin_loader.hpp"

#if defined(__SANITIZE_ADDRESS__)
#define ROPECHECK_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ROPECHECK_ASAN 1
#endif
#endif

namespace ropecheck::gate {

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

size_t page_size() {
  static const size_t p = size_t(sysconf(_SC_PAGESIZE));
  return p;
}
size_t round_up(size_t n, size_t m) { return (n + m - 1) / m * m; }

// Byte ranges [lo, hi) of the arena: guard pages and the pages a sparse tensor's elements lie on.
struct Span {
  uint64_t lo, hi;
};

// Sorted, with overlapping and adjacent spans joined.
void merge_spans(std::vector<Span>& v) {
  std::sort(v.begin(), v.end(), [](const Span& a, const Span& b) { return a.lo < b.lo; });
  size_t k = 0;
  for (const Span& x : v) {
    if (x.hi <= x.lo) continue;
    if (k && x.lo <= v[k - 1].hi) v[k - 1].hi = std::max(v[k - 1].hi, x.hi);
    else v[k++] = x;
  }
  v.resize(k);
}

// What of a lies outside b (both merged).
std::vector<Span> spans_minus(const std::vector<Span>& a, const std::vector<Span>& b) {
  std::vector<Span> out;
  size_t j = 0;
  for (Span x : a) {
    while (j < b.size() && b[j].hi <= x.lo) ++j;
    for (size_t k = j; k < b.size() && b[k].lo < x.hi; ++k) {
      if (b[k].lo > x.lo) out.push_back({x.lo, b[k].lo});
      x.lo = std::max(x.lo, b[k].hi);
    }
    if (x.lo < x.hi) out.push_back(x);
  }
  return out;
}

void copy_text(char (&dst)[1024], const std::string& s) {
  const size_t n = std::min(s.size(), sizeof dst - 1);
  std::memcpy(dst, s.data(), n);
  dst[n] = 0;
}

// ---- the host process -----------------------------------------------------

// A kernel's SIGSEGV or SIGBUS in the host: its address goes to the gate (send is async-signal-safe), and
// returning re-runs the access with the default action restored (SA_RESETHAND), which ends the host by that
// signal as before. On its own stack, so that a stack overflow is reported too.
void on_fault(int sig, siginfo_t* si, void* uc) {
  Reply r;
  r.kind = kFault;
  r.rc = sig;
  r.fault_addr = reinterpret_cast<uint64_t>(si->si_addr);
  r.fault_code = si->si_code;
#if defined(__x86_64__)
  // The page fault's error code: bit 1 set for a write.
  r.fault_write = (static_cast<ucontext_t*>(uc)->uc_mcontext.gregs[REG_ERR] & 2) ? 1 : 0;
#else
  (void)uc;
#endif
  (void)!send(3, &r, sizeof r, MSG_NOSIGNAL);
}

void install_fault_report() {
  static char stack[1 << 16];
  stack_t ss{};
  ss.ss_sp = stack;
  ss.ss_size = sizeof stack;
  sigaltstack(&ss, nullptr);
  struct sigaction sa {};
  sa.sa_sigaction = on_fault;
  sa.sa_flags = SA_SIGINFO | SA_RESETHAND | SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGSEGV, &sa, nullptr);
  sigaction(SIGBUS, &sa, nullptr);
}

[[noreturn]] void host_fail(int fd, const std::string& why) {
  Reply r;
  r.kind = kLoadFailed;
  copy_text(r.text, why);
  (void)!send(fd, &r, sizeof r, MSG_NOSIGNAL);
  _exit(3);
}

}  // namespace

struct HostSetup {
  KernelSource src;
  HostOptions opt;
  std::string cwd, out_path, err_path;
  unsigned char* arena;
  size_t arena_bytes;
  pid_t gate;
  int sock;
  // A host for one call alone (KernelHost::call_alone): its working directory and capture files, used instead.
  std::string alone_cwd, alone_out_path, alone_err_path;
  bool alone = false;
};

namespace {

// What a host and the zygote do first in their new process: a session and process group of its own (the gate
// kills a host's group, and no signal meant for the gate's group -- a terminal's ^C aside -- reaches it), death
// with the gate, every signal disposition and the mask reset (none of the gate's handlers runs here), and `sock`
// as descriptor 3 (kHostFd).
void leave_the_gate(pid_t gate, int sock) {
  setsid();
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != gate) _exit(4);
  for (int sig = 1; sig < NSIG; ++sig)
    if (sig != SIGKILL && sig != SIGSTOP) signal(sig, SIG_DFL);
  sigset_t all;
  sigemptyset(&all);
  sigprocmask(SIG_SETMASK, &all, nullptr);
  if (sock != kHostFd && dup2(sock, kHostFd) < 0) _exit(5);
  fcntl(kHostFd, F_SETFD, FD_CLOEXEC);
}

[[noreturn]] void host_main(HostSetup s) {
  leave_the_gate(s.gate, s.sock);
  if (s.alone) {
    s.cwd = s.alone_cwd;
    s.out_path = s.alone_out_path;
    s.err_path = s.alone_err_path;
  }
  // Fixed descriptors: the socket as 3, stdin from /dev/null, stdout/stderr to the capture files; nothing
  // else of the gate's stays open.
  const int in = open("/dev/null", O_RDONLY);
  const int out = open(s.out_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
  const int err = open(s.err_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
  if (in < 0 || out < 0 || err < 0) host_fail(kHostFd, "the host could not open its stdout/stderr capture files");
  dup2(in, 0);
  dup2(out, 1);
  dup2(err, 2);
  close_range(kHostFd + 1, ~0u, 0);
  if (chdir(s.cwd.c_str()) != 0) host_fail(kHostFd, "the host could not enter its private working directory");
  struct rlimit lim {0, 0};
  setrlimit(RLIMIT_CORE, &lim);
  lim = {kFileSizeLimit, kFileSizeLimit};
  setrlimit(RLIMIT_FSIZE, &lim);
  if (s.opt.cpu_seconds > 0) {
    lim.rlim_cur = lim.rlim_max = rlim_t(std::ceil(s.opt.cpu_seconds));
    setrlimit(RLIMIT_CPU, &lim);
  }
#ifndef ROPECHECK_ASAN
  {
    // The address space the gate's own mappings (inherited) and the arena take, plus 8 GiB for the kernel.
    // (read with open/read: the first std::ifstream of a new process builds its locale, a tenth of a restart)
    uint64_t pages = 0;
    if (const int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC); fd >= 0) {
      char buf[64];
      const ssize_t n = read(fd, buf, sizeof buf - 1);
      close(fd);
      if (n > 0) {
        buf[n] = 0;
        pages = std::strtoull(buf, nullptr, 10);
      }
    }
    lim.rlim_cur = lim.rlim_max = rlim_t(pages * page_size() + (uint64_t(8) << 30));
    setrlimit(RLIMIT_AS, &lim);
  }
#endif
  const FpControl pristine = read_fp_control();
  Reply ready;
  ready.kind = kReady;
  if (s.opt.seccomp)
    copy_text(ready.text, install_seccomp_filter());
  else
    copy_text(ready.text, "seccomp filter disabled");
  rc_rope_apply_fn fn = s.src.fn;
  if (!s.src.library.empty()) {
    const OpenedKernel k = open_kernel_library(s.src.library);  // constructors run here
    if (!k.fn) host_fail(kHostFd, k.error);
    fn = k.fn;
  }
  // The mapping watch: in force only with the filter (and not under ASan, whose runtime maps as it likes); from
  // here on, so that the loader's and the constructors' mapping calls are not each trapped (a restart's cost).
  // What they did to the arena the first call's reply says (a touch noted now): its guard pages are read.
  bool watch = false;
#ifndef ROPECHECK_ASAN
  watch = s.opt.seccomp && !ready.text[0] &&
          install_mapping_watch(reinterpret_cast<uintptr_t>(s.arena), s.arena_bytes).empty();
  if (watch) note_mapping_watch_touch();
#endif
  ready.watch = watch ? kWatchInForce : 0;
  ready.fp_before = pristine.bits;
  ready.fp_after = read_fp_control().bits;
  install_fault_report();  // (after the library's constructors: a fault there is a load failure, said as before)
  if (send(kHostFd, &ready, sizeof ready, MSG_NOSIGNAL) != ssize_t(sizeof ready)) _exit(6);
  const size_t pg = page_size();
  std::vector<Span> guards, now;  // the previous call's guard spans; this call's
  for (;;) {
    Command cmd;
    const ssize_t n = recv(kHostFd, &cmd, sizeof cmd, 0);
    if (n == 0) _exit(0);  // the gate is done
    if (n != ssize_t(sizeof cmd) || cmd.magic != kMagic || cmd.n_guards > kMaxGuards || cmd.used_bytes > s.arena_bytes)
      _exit(kLostSocket);
    // The previous guard pages that are data now become read-write; every guard page of this call is made
    // PROT_NONE again (a no-op unless the kernel changed it, which the gate has reported). Adjacent guard pages
    // (one region's last guard page and the next one's first) come as one span: one mprotect each way.
    now.clear();
    for (uint32_t k = 0; k < cmd.n_guards; ++k) {
      const uint64_t lo = cmd.guard_off[k], hi = lo + cmd.guard_pages[k] * pg;
      if (lo % pg || hi < lo || hi > s.arena_bytes) _exit(kLostSocket);
      now.push_back({lo, hi});
    }
    merge_spans(now);
    // (the host's own calls pass the watch)
    auto protect = [&](unsigned char* p, size_t n, int prot) {
      return watch ? int(watched_syscall(SYS_mprotect, long(p), long(n), prot)) : mprotect(p, n, prot);
    };
    auto protect_spans = [&](const std::vector<Span>& spans, int prot) {
      for (const Span& x : spans)
        if (protect(s.arena + x.lo, x.hi - x.lo, prot) != 0)  // (a page the kernel unmapped): one at a time
          for (uint64_t p = x.lo; p < x.hi; p += pg)
            if (protect(s.arena + p, pg, prot) != 0 && prot == PROT_NONE) note_mapping_watch_touch();
    };
    protect_spans(spans_minus(guards, now), PROT_READ | PROT_WRITE);
    // The spans to make PROT_NONE: all of them, or only what is new when those kept are intact.
    protect_spans((cmd.flags & kGuardsIntact) ? spans_minus(now, guards) : now, PROT_NONE);
    guards.swap(now);
    write_fp_control(pristine);
    Reply r;
    r.kind = kDone;
    r.seq = cmd.seq;
    r.fp_before = pristine.bits;
    r.rc = fn(reinterpret_cast<const rc_rope_args*>(s.arena + cmd.args_off));
    r.fp_after = read_fp_control().bits;
    if (watch) r.watch = kWatchInForce | (take_mapping_watch_touch() ? kWatchTouched : 0);
    if (send(kHostFd, &r, sizeof r, MSG_NOSIGNAL) != ssize_t(sizeof r)) _exit(kLostSocket);
  }
}

// ---- the zygote: restarts that do not fork the gate ---------------------------------------------------------
// A host that crashed is replaced by a new one. Forked from the gate, each replacement copies the gate's page
// tables and makes every page of the gate's heap copy-on-write for the gate's next write: after many crashes
// (a property shrinking a crash: a restart per candidate), most of a run went into page faults. So the first
// restart forks a zygote -- a copy of the gate that does nothing else, its memory fixed from then on -- and
// every later host is cloned from it (clone3 with CLONE_PARENT: still the gate's child, so the gate waits
// for it, counts its CPU and is the parent its death signal follows, as for a forked host), with the host's
// socket passed in. The clone does what glibc's fork does for a single-threaded idle process (CLONE_CHILD_SETTID
// and CLONE_CHILD_CLEARTID at the thread's tid address, read by PR_GET_TID_ADDRESS); where any of it is
// unavailable the zygote answers an error and the gate forks the host itself, as before.

// clone3's arguments (linux/sched.h, version 0).
struct CloneArgs {
  uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls;
};

[[noreturn]] void zygote_main(HostSetup s, int sock) {
  leave_the_gate(s.gate, sock);
  // No copy of the gate's descriptors stays open here: its sockets, pidfds and files, nor its stdin, stdout and
  // stderr (a caller reading the gate's output to its end is not kept waiting by the zygote).
  if (const int null = open("/dev/null", O_RDWR); null >= 0)
    for (int fd = 0; fd < 3; ++fd) dup2(null, fd);
  close_range(kHostFd + 1, ~0u, 0);
  void* tid_address = nullptr;
  long why = 0;
#ifdef SYS_clone3
  if (prctl(PR_GET_TID_ADDRESS, &tid_address) != 0 || !tid_address) why = errno ? errno : EINVAL;
#else
  why = ENOSYS;
#endif
  for (;;) {
    char byte;
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))];
    iovec iov{&byte, 1};
    msghdr m{};
    m.msg_iov = &iov;
    m.msg_iovlen = 1;
    m.msg_control = control;
    m.msg_controllen = sizeof control;
    const ssize_t n = recvmsg(kHostFd, &m, MSG_CMSG_CLOEXEC);
    if (n == 0) _exit(0);  // the gate is done with this zygote
    if (n < 0) {
      if (errno == EINTR) continue;
      _exit(6);
    }
    const cmsghdr* c = CMSG_FIRSTHDR(&m);
    if (!c || c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) _exit(7);
    int fd;
    std::memcpy(&fd, CMSG_DATA(c), sizeof fd);
    long pid = -why;
#ifdef SYS_clone3
    if (!why) {
      CloneArgs a{};
      a.flags = CLONE_PARENT | CLONE_CHILD_SETTID | CLONE_CHILD_CLEARTID;
      a.child_tid = reinterpret_cast<uint64_t>(tid_address);
      pid = syscall(SYS_clone3, &a, sizeof a);
      if (pid == 0) {
        s.sock = fd;
        s.alone = byte == 1;  // (the byte: 1 for a host of call_alone)
        host_main(s);
      }
      if (pid < 0) pid = -errno;
    }
#endif
    close(fd);
    if (send(kHostFd, &pid, sizeof pid, MSG_NOSIGNAL) != ssize_t(sizeof pid)) _exit(8);
  }
}

// ---- the gate's side ------------------------------------------------------

// One message of n bytes with the descriptors (SCM_RIGHTS): true when it went whole.
bool send_with_fds(int sock, const void* data, size_t n, std::initializer_list<int> fds) {
  iovec iov{const_cast<void*>(data), n};
  alignas(cmsghdr) char control[CMSG_SPACE(2 * sizeof(int))] = {};
  if (fds.size() > 2) return false;
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = CMSG_SPACE(fds.size() * sizeof(int));
  cmsghdr* cm = CMSG_FIRSTHDR(&msg);
  cm->cmsg_level = SOL_SOCKET;
  cm->cmsg_type = SCM_RIGHTS;
  cm->cmsg_len = CMSG_LEN(fds.size() * sizeof(int));
  std::memcpy(CMSG_DATA(cm), fds.begin(), fds.size() * sizeof(int));
  return sendmsg(sock, &msg, MSG_NOSIGNAL) == ssize_t(n);
}

int open_pidfd(pid_t pid) {
#ifdef SYS_pidfd_open
  return int(syscall(SYS_pidfd_open, pid, 0));
#else
  (void)pid;
  return -1;
#endif
}

std::string signal_text(int sig, bool in_call = true) {
  switch (sig) {
    case SIGSYS: return kForbiddenSyscallText;
    case SIGXCPU: return "exceeded the host's CPU time limit (SIGXCPU)";
    case SIGXFSZ: return "exceeded the host's file size limit of 16 MiB on stdout/stderr (SIGXFSZ)";
    default: break;
  }
  std::string s = "crashed with signal " + std::to_string(sig) + " (" + strsignal(sig) + ")";
  if (in_call && (sig == SIGSEGV || sig == SIGBUS))
    s += "; every buffer lies between PROT_NONE guard pages, so this may be an out-of-bounds access";
  return s;
}

// A buffer's place in the arena: [guard page][data area][guard page], the data flush against the first guard
// page, flush against the second (aligned to its element only), or 64-byte aligned between them.
struct Region {
  const char* name = "";
  unsigned char pattern = 0;
  size_t guard_lo = 0;  // offset of the first guard page
  size_t data = 0;      // offset of the buffer
  size_t n = 0;         // its bytes
  size_t guard_hi = 0;  // offset of the second guard page
  // A sparse tensor (tensor >= 0 and live not empty): only the pages its elements lie on, and those from its
  // last byte to the second guard page, are the buffer's; every other page between the guard pages is a guard
  // page too (sparse tensors, below).
  int tensor = -1;         // a tensor-form call's q, q_out, k, k_out (TensorLayout `which`); -1: not a tensor
  std::vector<Span> live;  // sorted, merged
  size_t end() const { return guard_hi + page_size(); }
};

// What of the arena a region's pattern covers (written before a call, compared after it): all of it, or, for a
// sparse tensor, its guard pages and its live pages.
std::vector<Span> filled_spans(const Region& g) {
  if (g.live.empty()) return {{g.guard_lo, g.end()}};
  std::vector<Span> v{{g.guard_lo, g.guard_lo + page_size()}};
  v.insert(v.end(), g.live.begin(), g.live.end());
  v.push_back({g.guard_hi, g.end()});
  merge_spans(v);
  return v;
}

// The pages of a region made PROT_NONE for the call: its two guard pages, and a sparse tensor's pages between
// its elements.
std::vector<Span> guard_spans(const Region& g) {
  const size_t pg = page_size();
  std::vector<Span> v{{g.guard_lo, g.guard_lo + pg}};
  if (!g.live.empty())
    for (const Span& x : spans_minus({{g.guard_lo + pg, g.guard_hi}}, g.live)) v.push_back(x);
  v.push_back({g.guard_hi, g.guard_hi + pg});
  return v;
}

enum class Placement { aligned, flush_start, flush_end };

// A tensor's element whose offset, computed in 32 bits, gives the byte `delta` from the tensor's start (the
// fault's): "q[2][0][0] (element offset 4294967168, as int32 -128)"; empty when none does. Offsets wrapped as
// elements (an int index) or as bytes (an int byte offset), signed or not.
std::string wrapped_element(const RopeCase& c, int which, int64_t delta) {
  const TensorLayout l = c.tensor_layout(which);
  const uint64_t es = dtype_size(c.dtype), T = c.n_tokens(), H = uint64_t(l.shape[l.ndim - 2]), D = c.head_dim;
  if (l.span * es <= uint64_t(INT32_MAX) || T * H * D > (uint64_t(1) << 22)) return "";  // (nothing wraps)
  static const char* const names[] = {"q", "q_out", "k", "k_out"};
  for (uint64_t t = 0; t < T; ++t)
    for (uint64_t h = 0; h < H; ++h)
      for (uint64_t d = 0; d < D; ++d) {
        const uint64_t o = l.head(t, h) + d;
        const int64_t e32 = int32_t(uint32_t(o)), b32 = int32_t(uint32_t(o * es));
        const struct {
          int64_t at, shown;  // the byte from the tensor's start it gives; the offset as computed
          const char* words;
        } ways[] = {{e32 * int64_t(es), e32, "as int32"},
                    {int64_t(uint32_t(o)) * int64_t(es), int64_t(uint32_t(o)), "as uint32"},
                    {b32, b32, "in bytes, as int32"},
                    {int64_t(uint32_t(o * es)), int64_t(uint32_t(o * es)), "in bytes, as uint32"}};
        for (const auto& w : ways)
          if (uint64_t(w.at) != o * es && delta >= w.at && delta < w.at + int64_t(es))
            return fmt::format("{}[{}][{}][{}] (element offset {}; {} {})", names[which], t, h, d, o, w.words, w.shown);
      }
  return "";
}

struct Region;
struct MisreadRow {
  std::string fault, where;  // the fault it is named ("positions truncated to 32 bits", ...), the row in words
};
MisreadRow misread_row(const RopeCase& c, const Region& g, int64_t delta);

// Where a faulting access of a call was (CallResult::fault_where): in which guard page of which buffer, how far
// from the buffer's data, or outside ropecheck's buffers; and, when the address is where a tensor's element
// would be with its offset computed in 32 bits, which element (`wrapped`: its words, else empty).
std::string fault_place(const Reply& f, const std::vector<Region>& regions, const unsigned char* arena,
                        size_t used, const RopeCase& c, std::string& wrapped, MisreadRow& misread) {
  const char* how = f.fault_write == 1 ? "a write" : f.fault_write == 0 ? "a read" : "an access";
  const uint64_t a = f.fault_addr, base = reinterpret_cast<uint64_t>(arena);
  if (a < 4096) return fmt::format("{} at address {:#x} (a null pointer)", how, a);
  std::string where;
  if (a >= base && a < base + used) {
    const uint64_t off = a - base, pg = page_size();
    for (const Region& g : regions) {
      if (!where.empty()) break;
      if (off >= g.guard_lo && off < g.guard_lo + pg)
        where = fmt::format("{} of the guard page before the {} buffer, {} byte(s) before its first", how, g.name,
                            g.data - off);
      else if (off >= g.guard_hi && off < g.guard_hi + pg)
        where = fmt::format("{} of the guard page after the {} buffer, {} byte(s) past its end", how, g.name,
                            off - (g.data + g.n));
      else if (off >= g.guard_lo && off < g.end() && !g.live.empty() &&
               std::none_of(g.live.begin(), g.live.end(), [&](const Span& x) { return off >= x.lo && off < x.hi; }))
        where = off >= g.data ? fmt::format("{} of a guard page between the elements of the {} buffer, {} byte(s) "
                                            "from its start{}",
                                            how, g.name, off - g.data,
                                            g.tensor < 0 && c.table && c.table->sparse()
                                                ? " (a row no position of the call indexes: this call's table is "
                                                  "sparse, only its positions' rows and their neighbours are there)"
                                                : "")
                              : fmt::format("{} of a guard page in front of the {} buffer, {} byte(s) before its first",
                                            how, g.name, g.data - off);
      else if (off >= g.guard_lo && off < g.end())
        where = fmt::format("{} inside the {} buffer's area ({} byte(s) from its start), whose protection the kernel "
                            "changed", how, g.name, int64_t(off) - int64_t(g.data));
    }
  }
  if (where.empty()) where = fmt::format("{} at {:#x}, outside every buffer of the call", how, a);
  for (const Region& g : regions)
    if (g.tensor >= 0 && wrapped.empty())
      wrapped = wrapped_element(c, g.tensor, int64_t(a) - int64_t(base + g.data));
  if (!wrapped.empty()) where += "; there would be " + wrapped;
  for (const Region& g : regions) {
    if (g.tensor >= 0 || !misread.fault.empty() || std::string_view(g.name).rfind("table", 0) != 0) continue;
    misread = misread_row(c, g, int64_t(a) - int64_t(base + g.data));
  }
  if (!misread.where.empty()) where += "; there would be " + misread.where;
  return where;
}

// `pad`: bytes after the buffer the kernel may read (HostOptions::input_padding): flush_end puts them, not the buffer,
// against the second guard page.
Region place(const char* name, unsigned char pattern, size_t n, Placement p, size_t& cursor, size_t pad = 0) {
  const size_t pg = page_size();
  Region r;
  r.name = name;
  r.pattern = pattern;
  r.n = n;
  r.guard_lo = cursor;
  const size_t area = std::max(pg, round_up(n + pad + 128, pg));
  const size_t lo = cursor + pg;
  r.guard_hi = lo + area;
  switch (p) {
    case Placement::flush_start: r.data = lo; break;
    case Placement::flush_end: r.data = r.guard_hi - pad - n; break;
    case Placement::aligned: r.data = lo + ((area - n - pad) / 2) / 64 * 64; break;
  }
  cursor = r.end();
  return r;
}

// ---- sparse tensors ---------------------------------------------------------------------------------------
// A tensor-form tensor whose strides spread its elements over more than kSparseFrom bytes (offsets past 2^31
// elements: the gate's wide-span case) is sparse in the arena: its area is reserved (the arena is MAP_NORESERVE),
// only the pages its elements lie on (and from its last byte to its second guard page) hold the pattern and the
// elements, and every other page of the area is a guard page for the call. So a kernel's access between the
// elements faults, the gate reads and writes a few pages, and no page of the rest is ever allocated.
constexpr size_t kSparseFrom = size_t(256) << 20;

Region place_tensor(const char* name, unsigned char pattern, const RopeCase& c, int which, Placement p,
                    size_t& cursor, size_t pad = 0) {
  const TensorLayout l = c.tensor_layout(which);
  const size_t es = dtype_size(c.dtype), n = size_t(l.span) * es;
  const bool sparse = n > kSparseFrom;
  Region r = place(name, pattern, n, sparse ? Placement::flush_start : p, cursor, pad);
  r.tensor = which;
  if (!sparse) return r;
  const size_t pg = page_size(), H = size_t(l.shape[l.ndim - 2]), bytes = size_t(c.head_dim) * es;
  for (size_t t = 0; t < c.n_tokens(); ++t)
    for (size_t h = 0; h < H; ++h) {  // (and the padding the kernel may read after each head's elements)
      const size_t at = r.data + size_t(l.head(t, h)) * es;
      r.live.push_back({at / pg * pg, round_up(at + bytes + pad, pg)});
    }
  r.live.push_back({(r.data + n) / pg * pg, r.guard_hi});
  merge_spans(r.live);
  return r;
}

// A caller-given table (ABI v3) in its region; a sparse one (CosSinTable::stored: positions past 2^31 index it) spans
// its rows x row bytes, flush against its second guard page (so the last row, the call's largest position, ends
// there), only its kept rows' pages hold the pattern and the values, and every other page of its area is a guard
// page for the call: a row read at a position the call does not have faults, and nothing of the rest is allocated.
Region place_table(const char* name, unsigned char pattern, const RopeCase& c, int n, Placement p, size_t& cursor,
                   size_t pad) {
  const CosSinTable& t = *c.table;
  const size_t bytes = c.abi_table_bytes[n].size();
  if (!t.sparse()) return place(name, pattern, bytes, p, cursor, pad);
  const size_t row = bytes / t.stored.size(), pg = page_size(), total = t.rows * row;
  // In front of it, as many guard pages as a row of -2^31 is away (a position narrowed to int32 reads there: the
  // fault names it).
  const size_t lead = (size_t(1) << 31) * row;
  Region r = place(name, pattern, lead + total, Placement::flush_end, cursor, pad);
  r.data = r.guard_hi - pad - total;
  r.n = total;
  for (int64_t k : t.stored) {  // each kept row with its neighbours' (a vector read may run into them) and the padding
    const size_t at = r.data + size_t(k) * row;
    r.live.push_back({(at - std::min(at - r.data, row)) / pg * pg, std::min(round_up(at + 2 * row + pad, pg), r.guard_hi)});
  }
  r.live.push_back({(r.data + total) / pg * pg, r.guard_hi});  // (the padding after its last row)
  merge_spans(r.live);
  return r;
}

// The table row a faulting address of a table's call would be where a kernel reads a row it should not, and why:
// for a sparse table (its positions are its rows), a position of the call narrowed to 32 bits ("table row
// -2147483648 (position 2147483648 as int32)") or the token's index ("table row 2 (token 2's index, not its position
// 4294967297)"); for a per-token table, a token's position ("table row 4097 (token 2's position; the table has a row
// per token, 6 rows)"). Empty when none.
MisreadRow misread_row(const RopeCase& c, const Region& g, int64_t delta) {
  if (!c.table || c.n_tokens() == 0) return {};
  const CosSinTable& t = *c.table;
  const int64_t T = int64_t(c.n_tokens());
  if (t.sparse()) {
    const int64_t row = int64_t(c.abi_table_bytes[0].size() / t.stored.size());  // (table2's rows are as wide)
    auto at = [&](int64_t r) {
      int64_t lo;
      return !__builtin_mul_overflow(r, row, &lo) && delta >= lo && delta < lo + row;
    };
    for (int64_t m : c.positions) {
      const struct {
        int64_t r;
        const char* words;
      } ways[] = {{int64_t(int32_t(uint32_t(uint64_t(m)))), "as int32"}, {int64_t(uint32_t(uint64_t(m))), "as uint32"}};
      for (const auto& w : ways)
        if (w.r != m && at(w.r))
          return {"positions truncated to 32 bits", fmt::format("{} row {} (position {} {})", g.name, w.r, m, w.words)};
    }
    for (int64_t k = 0; k < T; ++k)
      if (t.kept(size_t(k)) == SIZE_MAX && at(k))
        return {"table row indexed by token",
                fmt::format("{} row {} (token {}'s index, not its position {})", g.name, k, k, c.position(size_t(k)))};
    return {};
  }
  if (t.by_token && c.abi_table_ndim == 2) {
    const int64_t row = int64_t(c.abi_table_bytes[0].size()) / T;
    for (int64_t k = 0; k < T; ++k) {
      const int64_t m = c.position(size_t(k));
      int64_t lo;
      if (m < T || __builtin_mul_overflow(m, row, &lo)) continue;
      if (delta >= lo && delta < lo + row)
        return {"per-token table indexed by position",
                fmt::format("{} row {} (token {}'s position; the table has a row per token, {} rows)", g.name, m, k, T)};
    }
  }
  return {};
}

// ---- the ABI v3 draft's tensors in the arena -----------------------------------------------------------
// A tensor-form call's q, q_out, k, k_out are laid out by the case (RopeCase::tensor_layout: strides with the
// case's gaps), each in a region of its own whose gaps keep the region's pattern, so a write between the
// elements is seen as a write out of bounds; the index tensors are compact; every shape and stride array is
// in one region ("tensor shapes"), so a kernel that writes into one is seen as modifying its arguments.

struct TensorRegions {
  size_t k = 0, k_out = 0, pos = 0, seq_offsets = 0, cu_seqlens = 0, shapes = 0;  // region indices (0: none)
  size_t table[2] = {0, 0};
};

template <class Placer>
void add_tensor_regions(const RopeCase& c, bool in_place, TensorRegions& tr, std::vector<Region>& regions,
                        size_t& cursor, Placer placement, size_t pad) {
  const TensorCall& tc = *c.tensor;
  if (tc.k_heads) {
    tr.k = regions.size();
    regions.push_back(place_tensor(in_place ? "in-place k" : "k", 0x6A, c, 2, placement(12), cursor, pad));
    tr.k_out = tr.k;
    if (!in_place) {
      tr.k_out = regions.size();
      regions.push_back(place_tensor("k_out", 0x95, c, 3, placement(13), cursor));
    }
  }
  if (tc.pos != PositionForm::implicit) {
    tr.pos = regions.size();
    regions.push_back(
        place("pos", 0x3C, c.positions.size() * tensor_index_elem(c, true), placement(1), cursor, pad));
  }
  if (!tc.seq_offsets.empty()) {
    tr.seq_offsets = regions.size();
    regions.push_back(place("seq_offsets", 0x63, tc.seq_offsets.size() * tensor_index_elem(c, false), placement(14),
                            cursor, pad));
  }
  if (!tc.cu_seqlens.empty()) {
    tr.cu_seqlens = regions.size();
    regions.push_back(place("cu_seqlens", 0x36, tc.cu_seqlens.size() * tensor_index_elem(c, false), placement(15),
                            cursor, pad));
  }
}

// The buffers' places in the arena (core/tensor_call.hpp lays the call out in them).
TensorBuffers tensor_buffers(const TensorRegions& tr, const std::vector<Region>& regions, size_t in_idx,
                             size_t out_idx, unsigned char* A) {
  auto at = [&](size_t region) { return region ? A + regions[region].data : nullptr; };
  TensorBuffers b;
  b.q = A + regions[in_idx].data;
  b.q_out = A + regions[out_idx].data;
  b.k = at(tr.k);
  b.k_out = at(tr.k_out);
  b.pos = at(tr.pos);
  b.seq_offsets = at(tr.seq_offsets);
  b.cu_seqlens = at(tr.cu_seqlens);
  b.table[0] = at(tr.table[0]);
  b.table[1] = at(tr.table[1]);
  b.shapes = tr.shapes ? reinterpret_cast<int64_t*>(A + regions[tr.shapes].data) : nullptr;
  return b;
}

size_t count_changed(const unsigned char* p, size_t from, size_t to, unsigned char pattern) {
  // Whole pages at a time against a page of the pattern; byte by byte only where something differs.
  static thread_local std::array<std::vector<unsigned char>, 256> pages;
  std::vector<unsigned char>& ref = pages[pattern];
  if (ref.empty()) ref.assign(page_size(), pattern);
  size_t k = 0;
  for (size_t i = from; i < to;) {
    const size_t n = std::min(to - i, ref.size());
    if (std::memcmp(p + i, ref.data(), n) != 0)
      for (size_t j = i; j < i + n; ++j) k += p[j] != pattern;
    i += n;
  }
  return k;
}

// After a tensor-form call: k's output (compact, in r.k_out) and what became of k's input out of place; bytes
// written into the strides' gaps of q, q_out, k, k_out; the index tensors, tables and shapes unchanged.
void check_tensors_after(const RopeCase& c, bool in_place, const TensorRegions& tr, const std::vector<Region>& regions,
                         size_t in_idx, size_t out_idx, const unsigned char* A, CallResult& r) {
  const TensorCall& tc = *c.tensor;
  struct Laid {
    const char* name;
    int which;
    size_t region;
  };
  std::vector<Laid> laid = {{regions[in_idx].name, 0, in_idx}};
  if (!in_place) laid.push_back({"q_out", 1, out_idx});
  if (tc.k_heads) {
    laid.push_back({regions[tr.k].name, 2, tr.k});
    if (!in_place) laid.push_back({"k_out", 3, tr.k_out});
  }
  for (const Laid& t : laid) {
    const Region& g = regions[t.region];
    std::vector<std::pair<uint64_t, uint64_t>> readable;  // a sparse tensor's live pages, from its start
    for (const Span& x : g.live) readable.push_back({x.lo - g.data, x.hi - g.data});
    if (size_t n = gap_bytes_changed(c, c.tensor_layout(t.which), A + g.data, g.pattern,
                                     g.live.empty() ? nullptr : &readable))
      r.memory.push_back({"out-of-bounds write", fmt::format("memory: {} byte(s) between the elements of {} (its "
                                                             "strides' gaps) were written",
                                                             n, t.name)});
  }
  if (tc.k_heads) {
    const RopeCase k = c.k_case();
    r.k_out = gather_heads(k, c.tensor_layout(in_place ? 2 : 3), A + regions[tr.k_out].data);
    const uint32_t pb = poison_bits(c.dtype);
    size_t unwritten = 0, written = 0;
    for (size_t e = 0; e < k.n_elements(); ++e) {
      const uint32_t got = load_bits(c.dtype, r.k_out.data(), e), was = load_bits(c.dtype, tc.k_input.data(), e);
      unwritten += !in_place && got == pb && was != pb;
      written += got != (in_place ? was : pb);
    }
    if (r.status == CallStatus::ok && unwritten)
      r.memory.push_back({"unwritten output", fmt::format("memory: {} of {} element(s) of k_out still hold the poison "
                                                          "(0x{:x})",
                                                          unwritten, k.n_elements(), pb)});
    if (r.status == CallStatus::declined && written)
      r.memory.push_back({"declined after writing", fmt::format("memory: the call was declined but wrote {} of {} "
                                                                "element(s) of {}",
                                                                written, k.n_elements(), in_place ? "k" : "k_out")});
    if (!in_place) {
      const Bytes now = gather_heads(k, c.tensor_layout(2), A + regions[tr.k].data);
      size_t changed = 0, first = 0;
      for (size_t e = 0; e < k.n_elements(); ++e)
        if (load_bits(c.dtype, now.data(), e) != load_bits(c.dtype, tc.k_input.data(), e) && !changed++) first = e;
      if (changed)
        r.memory.push_back({"input modified", fmt::format("memory: the out-of-place call wrote into its input k: {} of "
                                                          "{} element(s) changed, the first k[{}][{}][{}]",
                                                          changed, k.n_elements(), first / (k.n_heads * k.head_dim),
                                                          first / k.head_dim % k.n_heads, first % k.head_dim)});
    }
  }
  bool index_ok = true;
  auto compare_index = [&](size_t region, const std::vector<int64_t>& v, size_t elem) {
    if (!region) return;
    for (size_t i = 0; i < v.size(); ++i) index_ok = index_ok && load_index(A + regions[region].data, i, elem) == v[i];
  };
  compare_index(tr.pos, c.positions, tensor_index_elem(c, true));
  compare_index(tr.seq_offsets, tc.seq_offsets, tensor_index_elem(c, false));
  compare_index(tr.cu_seqlens, tc.cu_seqlens, tensor_index_elem(c, false));
  if (!index_ok)
    r.memory.push_back({"argument modified", "memory: the call wrote into its (const) positions, seq_offsets or "
                                             "cu_seqlens"});
}

// On-CPU plus run-queue nanoseconds of a thread from its schedstat file ("cpu_ns wait_ns slices"), or
// UINT64_MAX when it cannot be read (no CONFIG_SCHED_INFO, the process gone).
uint64_t sched_ns(int fd) {
  if (fd < 0) return UINT64_MAX;
  char buf[96];
  const ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
  if (n <= 0) return UINT64_MAX;
  buf[n] = 0;
  char* end = nullptr;
  const unsigned long long cpu = std::strtoull(buf, &end, 10);
  if (end == buf) return UINT64_MAX;
  char* end2 = nullptr;
  const unsigned long long wait = std::strtoull(end, &end2, 10);
  if (end2 == end) return UINT64_MAX;
  return uint64_t(cpu + wait);
}

// The gate's own calling thread.
int self_schedstat_fd() {
  thread_local const int fd = open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
  return fd;
}

double cpu_clock_seconds(clockid_t clk) {
  timespec ts{};
  if (clock_gettime(clk, &ts) != 0) return 0;
  return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

}  // namespace

uint32_t poison_bits(Dtype d) {
  switch (d) {
    case Dtype::f32: return 0x7fa5a5a5u;  // quiet bit (22) clear, payload non-zero
    case Dtype::f16: return 0x7d5au;      // quiet bit (9) clear
    case Dtype::bf16: return 0x7fa5u;     // quiet bit (6) clear
  }
  return 0;
}

KernelHost::KernelHost(KernelSource src, HostOptions opt) : src_(std::move(src)), opt_(std::move(opt)) {
  // The host works in a private directory: a relative library path is resolved here, in the caller's.
  std::error_code ec;
  if (!src_.library.empty()) {
    const fs::path abs = fs::absolute(src_.library, ec);
    if (!ec) src_.library = abs.string();
  }
}

KernelHost::~KernelHost() {
  stop();
  stop_zygote();
  if (arena_) munmap(arena_, arena_bytes_);
  if (arena_fd_ >= 0) close(arena_fd_);
  std::error_code ec;
  if (!private_dir_.empty()) fs::remove_all(private_dir_, ec);
}

void KernelHost::stop() {
  if (src_.host_fd >= 0) {  // attached: only the channel closes; the serving process is not ours to end
    end_apart(false);  // (a process serving this channel apart ends when it reads the channel's end)
    if (sock_ >= 0) close(sock_);
    if (pidfd_ >= 0) close(pidfd_);
    if (schedstat_fd_ >= 0) close(schedstat_fd_);
    pid_ = -1;
    sock_ = pidfd_ = schedstat_fd_ = -1;
    return;
  }
  if (pid_ > 0) {
    kill(-pid_, SIGKILL);  // the host's process group
    kill(pid_, SIGKILL);   // in case it had not made its group yet
    int st;
    while (waitpid(pid_, &st, 0) < 0 && errno == EINTR) {
    }
  }
  if (sock_ >= 0) close(sock_);
  if (pidfd_ >= 0) close(pidfd_);
  if (schedstat_fd_ >= 0) close(schedstat_fd_);
  pid_ = -1;
  sock_ = pidfd_ = schedstat_fd_ = -1;
  have_cpu_clock_ = false;
}

void KernelHost::end_apart(bool kill_it) {
  if (apart_pid_ <= 0) return;
  if (kill_it) {  // (through its pidfd where there is one: the pid cannot have been reused)
#ifdef SYS_pidfd_send_signal
    if (apart_pidfd_ < 0 || syscall(SYS_pidfd_send_signal, apart_pidfd_, SIGKILL, nullptr, 0) != 0)
#endif
      kill(apart_pid_, SIGKILL);
  }
  apart_cpu_ended_ += apart_cpu_last_;
  apart_cpu_last_ = 0;
  if (apart_pidfd_ >= 0) close(apart_pidfd_);
  apart_pidfd_ = -1;
  apart_pid_ = -1;
  have_apart_clock_ = false;
}

double KernelHost::live_cpu_seconds() const {
  // Attached: the serving process's CPU since this host first opened a channel (it serves every host of the run).
  // Served apart: and the CPU of the processes it forked for the channels (those that ended: their last reading).
  // While the probes run: their host's too (attached, what it counted stays in probes_cpu_ after it ends; not
  // attached, its processes are reaped into RUSAGE_CHILDREN).
  const double probes = (probe_host_ ? probe_host_->live_cpu_seconds() : 0.0) + probes_cpu_;
  if (src_.host_fd >= 0)
    return (have_cpu_clock_ && attached_cpu0_ >= 0 ? cpu_clock_seconds(cpu_clock_) - attached_cpu0_ : 0.0) +
           apart_cpu_ended_ + (have_apart_clock_ ? std::max(apart_cpu_last_, cpu_clock_seconds(apart_clock_)) : 0.0) +
           probes;
  // (and the zygote's, while it lives: the clones' share of their cost; reaped, it is in RUSAGE_CHILDREN)
  return (pid_ > 0 && have_cpu_clock_ ? cpu_clock_seconds(cpu_clock_) : 0.0) +
         (zygote_pid_ > 0 && have_zygote_clock_ ? cpu_clock_seconds(zygote_clock_) : 0.0) + probes;
}

void KernelHost::ensure_arena(size_t bytes) {
  if (arena_ && arena_bytes_ >= bytes) return;
  stop();  // the host maps the arena by inheritance: a new arena needs a new host
  if (alone_ && parked_.pid > 0) {  // (and the parked host too: it restarts at its next call)
    swap_parked();
    stop();
    swap_parked();
  }
  stop_zygote();  // (and a zygote that maps it)
  if (arena_) munmap(arena_, arena_bytes_);
  size_t want = size_t(64) << 20;
  while (want < bytes) want *= 2;
  if (arena_fd_ >= 0) close(arena_fd_);
  arena_fd_ = -1;
  void* p = MAP_FAILED;
  if (src_.host_fd >= 0) {  // attached: a memfd, passed to the serving process with each channel
    arena_fd_ = int(syscall(SYS_memfd_create, "ropecheck-arena", 1u /* MFD_CLOEXEC */));
    if (arena_fd_ >= 0 && ftruncate(arena_fd_, off_t(want)) == 0)
      p = mmap(nullptr, want, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, arena_fd_, 0);
  } else {
    p = mmap(nullptr, want, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  }
  if (p == MAP_FAILED) {
    arena_ = nullptr;
    arena_bytes_ = 0;
    throw std::runtime_error(fmt::format("cannot map {} bytes of shared memory for the kernel's buffers", want));
  }
  arena_ = p;
  arena_bytes_ = want;
}

namespace {
// Wait for one reply. Returns 1 with a well-formed reply, 0 when the host died or closed the socket, -1 at
// the deadline, -2 on a malformed reply.
int wait_reply(int sock, int pidfd, pid_t pid, Reply& r, Clock::time_point deadline) {
  for (;;) {
    const double left = std::chrono::duration<double>(deadline - Clock::now()).count();
    if (left <= 0) return -1;
    pollfd fds[2] = {{sock, POLLIN, 0}, {pidfd, POLLIN, 0}};
    const int nf = pidfd >= 0 ? 2 : 1;
    // Without a pidfd, look at the host every 10 ms.
    const int ms = int(std::min(std::ceil(left * 1000), pidfd >= 0 ? 1e9 : 10.0));
    const int k = poll(fds, nfds_t(nf), ms);
    if (k < 0 && errno != EINTR) return 0;
    if (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) {
      const ssize_t n = recv(sock, &r, sizeof r, MSG_DONTWAIT);
      if (n == 0) return 0;
      if (n < 0) {
        if (errno == EAGAIN || errno == EINTR) continue;
        return 0;
      }
      return n == ssize_t(sizeof r) && r.magic == kMagic ? 1 : -2;
    }
    if (nf == 2 && (fds[1].revents & POLLIN)) return 0;
    if (nf == 1) {
      siginfo_t si{};
      if (waitid(P_PID, id_t(pid), &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid == pid) return 0;
    }
  }
}

// After the host's control socket broke (wait_reply returned 0): waits until the host exits by itself or
// `deadline`, whichever comes first; true (the host reaped, its status in `st`) if it exited. A host whose
// kernel closed the socket exits with kLostSocket as soon as it cannot send its reply; a SIGKILL sent before
// that would read as someone else's (and the cause, "control socket", would depend on the machine's load).
bool wait_own_exit(int pidfd, pid_t pid, int& st, Clock::time_point deadline) {
  for (;;) {
    const pid_t p = waitpid(pid, &st, WNOHANG);
    if (p == pid) return true;
    if (p < 0 && errno != EINTR) return false;
    const double left = std::chrono::duration<double>(deadline - Clock::now()).count();
    if (left <= 0) return false;
    const int ms = int(std::min(std::ceil(left * 1000), pidfd >= 0 ? 1e9 : 10.0));
    if (pidfd >= 0) {
      pollfd f{pidfd, POLLIN, 0};
      poll(&f, 1, ms);
    } else {
      poll(nullptr, 0, ms);
    }
  }
}
}  // namespace

void KernelHost::start_attached() {
  if (sock_ >= 0) return;
  if (!attached_dead_.empty()) throw LoadError(attached_dead_);
  ensure_arena(size_t(64) << 20);
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0)
    throw std::runtime_error("socketpair failed: " + std::string(std::strerror(errno)));
  OpenChannel m;
  m.arena_base = reinterpret_cast<uint64_t>(arena_);
  m.arena_bytes = arena_bytes_;
  const bool sent = send_with_fds(src_.host_fd, &m, sizeof m, {sv[1], arena_fd_});
  close(sv[1]);
  if (!sent) {
    close(sv[0]);
    attached_dead_ = "the process serving the calls closed its control socket (fd " + std::to_string(src_.host_fd) + ")";
    throw LoadError(attached_dead_);
  }
  sock_ = sv[0];
  ucred peer{};
  socklen_t len = sizeof peer;
  if (getsockopt(src_.host_fd, SOL_SOCKET, SO_PEERCRED, &peer, &len) == 0 && peer.pid > 0) {
    pid_ = peer.pid;
    pidfd_ = open_pidfd(pid_);
    schedstat_fd_ = open(fmt::format("/proc/{}/schedstat", pid_).c_str(), O_RDONLY | O_CLOEXEC);
    have_cpu_clock_ = clock_getcpuclockid(pid_, &cpu_clock_) == 0;
    if (have_cpu_clock_ && attached_cpu0_ < 0) attached_cpu0_ = cpu_clock_seconds(cpu_clock_);
  }
  ++starts_;
  seq_ = 0;
  Reply r;
  const int w = wait_reply(sock_, pidfd_, pid_, r,
                           Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                              std::chrono::duration<double>(opt_.load_timeout_seconds)));
  if (w == 1 && r.kind == kReady) {
    if ((r.watch & kServedApart) && r.fault_addr > 0) {  // the channel's calls are made by a process of its own
      apart_pid_ = pid_t(r.fault_addr);
      apart_pidfd_ = open_pidfd(apart_pid_);
      have_apart_clock_ = clock_getcpuclockid(apart_pid_, &apart_clock_) == 0;
      apart_cpu_last_ = 0;
      served_apart_ = true;
      if (schedstat_fd_ >= 0) close(schedstat_fd_);  // (its calling thread is the one whose time counts)
      schedstat_fd_ = open(fmt::format("/proc/{}/schedstat", apart_pid_).c_str(), O_RDONLY | O_CLOEXEC);
    }
    host_sched_ns_ = sched_ns(schedstat_fd_);
    seccomp_error_ = r.text;  // what serves the calls (the sandbox line)
    return;
  }
  stop();
  attached_dead_ = w == 1 && r.kind == kLoadFailed ? std::string(r.text)
                   : w == -1 ? fmt::format("the process serving the calls did not open a channel within {:g} s",
                                           opt_.load_timeout_seconds)
                             : "the process serving the calls ended or closed its channel while opening it";
  throw LoadError(attached_dead_);
}

void KernelHost::start() {
  if (src_.host_fd >= 0) return start_attached();
  if (pid_ > 0) return;
  ensure_arena(size_t(64) << 20);
  if (private_dir_.empty()) {
    const char* t = std::getenv("TMPDIR");
    std::string tmpl = std::string(t && *t ? t : "/tmp") + "/ropecheck-host-XXXXXX";
    if (!mkdtemp(tmpl.data())) throw std::runtime_error("cannot create the kernel host's private directory");
    private_dir_ = tmpl;
    fs::create_directory(private_dir_ + "/cwd");
  }
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0)
    throw std::runtime_error("socketpair failed: " + std::string(std::strerror(errno)));
  // A host for one call alone (call_alone) gets a working directory and capture files of its own, new each time.
  const std::string alone_dir = private_dir_ + "/alone";
  if (alone_) {
    std::error_code ec;
    fs::remove_all(alone_dir, ec);
    fs::create_directories(alone_dir + "/cwd", ec);
  }
  HostSetup s{src_, opt_, private_dir_ + "/cwd", private_dir_ + "/kernel-stdout.txt", private_dir_ + "/kernel-stderr.txt",
              static_cast<unsigned char*>(arena_), arena_bytes_, getpid(), sv[1], alone_dir + "/cwd",
              alone_dir + "/kernel-stdout.txt", alone_dir + "/kernel-stderr.txt", alone_};
  std::fflush(stdout);
  std::fflush(stderr);
  pid_t pid = starts_ > 0 ? spawn_from_zygote(s) : -1;  // a restart: cloned from the zygote where it can be
  if (pid < 0) pid = fork();
  if (pid < 0) {
    close(sv[0]);
    close(sv[1]);
    throw std::runtime_error("fork failed: " + std::string(std::strerror(errno)));
  }
  if (pid == 0) {
    close(sv[0]);
    host_main(s);
  }
  close(sv[1]);
  pid_ = pid;
  sock_ = sv[0];
  pidfd_ = open_pidfd(pid);
  schedstat_fd_ = open(fmt::format("/proc/{}/schedstat", pid).c_str(), O_RDONLY | O_CLOEXEC);
  have_cpu_clock_ = clock_getcpuclockid(pid, &cpu_clock_) == 0;
  ++starts_;
  seq_ = 0;
  Reply r;
  const int w = wait_reply(sock_, pidfd_, pid_, r,
                           Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                              std::chrono::duration<double>(opt_.load_timeout_seconds)));
  const std::string what = src_.library.empty() ? "the kernel" : "the kernel library '" + src_.library + "'";
  if (w == 1 && r.kind == kReady) {
    host_sched_ns_ = sched_ns(schedstat_fd_);
    seccomp_error_ = r.text;
    mapping_watch_ = (r.watch & kWatchInForce) != 0;
    const FpControl before{r.fp_before}, after{r.fp_after};
    if (!(before == after) && load_fp_change_.empty())
      load_fp_change_ = "loading " + what + " changed the FP environment: " + describe_fp_change(before, after);
    return;
  }
  std::string why;
  if (w == 1 && r.kind == kLoadFailed) {
    why = r.text;
  } else if (w == -1) {
    why = fmt::format("{} hung while loading (not loaded within {:g} s: a constructor that does not return?); "
                      "killed",
                      what, opt_.load_timeout_seconds);
  } else if (w == -2) {
    why = what + " garbled the host's reply while loading";
  } else {
    kill(-pid_, SIGKILL);
    int st = 0;
    waitpid(pid_, &st, 0);
    pid_ = -1;
    if (WIFSIGNALED(st))
      why = what + " " + signal_text(WTERMSIG(st), false) + " while loading (in a constructor)";
    else
      why = fmt::format("{} exited the process (status {}) while loading (a constructor called exit)", what,
                        WIFEXITED(st) ? WEXITSTATUS(st) : -1);
  }
  stop();
  throw LoadError(why);
}

pid_t KernelHost::spawn_from_zygote(const HostSetup& s) {
  if (zygote_failed_) return -1;
  if (zygote_pid_ < 0) {
    int zv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, zv) != 0) return -1;
    const pid_t z = fork();
    if (z < 0) {
      close(zv[0]);
      close(zv[1]);
      return -1;
    }
    if (z == 0) {
      HostSetup zs = s;
      zs.sock = -1;
      zygote_main(zs, zv[1]);
    }
    close(zv[1]);
    zygote_pid_ = z;
    zygote_sock_ = zv[0];
    have_zygote_clock_ = clock_getcpuclockid(z, &zygote_clock_) == 0;
  }
  // The host's end of its socket to the zygote, which clones the host and answers its pid (or -errno).
  const char byte = s.alone ? 1 : 0;
  long pid = -1;
  bool answered = send_with_fds(zygote_sock_, &byte, 1, {s.sock});
  if (answered) {
    pollfd f{zygote_sock_, POLLIN, 0};
    answered = poll(&f, 1, int(std::max(1.0, opt_.load_timeout_seconds) * 1000)) == 1 &&
               recv(zygote_sock_, &pid, sizeof pid, 0) == ssize_t(sizeof pid);
  }
  if (answered && pid > 0) return pid_t(pid);
  // No clone here (an old kernel, no PR_GET_TID_ADDRESS), or the zygote is gone: the gate forks its hosts.
  stop_zygote();
  zygote_failed_ = answered;  // (a zygote that died, e.g. killed by a signal meant for its group, is made again)
  return -1;
}

void KernelHost::stop_zygote() {
  if (zygote_sock_ >= 0) close(zygote_sock_);
  zygote_sock_ = -1;
  if (zygote_pid_ > 0) {
    kill(zygote_pid_, SIGKILL);
    int st;
    while (waitpid(zygote_pid_, &st, 0) < 0 && errno == EINTR) {
    }
  }
  zygote_pid_ = -1;
  have_zygote_clock_ = false;
}

// The call in a host process of its own, cloned from the zygote like a restart's, sharing the arena (calls
// never overlap): the running host is parked meanwhile -- its process, socket and counters kept as they were --
// and is the one the next call() goes to, with its state. (Before, a KernelHost of its own did this: a fork of
// the whole gate, whose heap then took a copy-on-write fault per page it wrote: most of a failing row's
// diagnosis.) Attached (host_fd): a channel of its own to the serving process, as any new KernelHost.
CallResult KernelHost::call_alone(const RopeCase& c, bool in_place, double timeout_seconds) {
  if (src_.host_fd >= 0 || starts_ == 0) {
    KernelHost fresh(src_, opt_);
    fresh.set_abi(abi_, features_declared_);
    return fresh.call(c, in_place, timeout_seconds);
  }
  parked_ = Parked{};
  swap_parked();  // (no host running now: the call starts one, counted as a start of its own)
  alone_ = true;
  struct Unpark {
    KernelHost& h;
    const uint64_t starts;
    ~Unpark() {
      h.stop();
      h.alone_ = false;
      h.swap_parked();
      h.starts_ = starts;  // (the parked host's calls keep their host_start)
      // (the other host's calls re-protected the pages it used as guards in its own address space only; this
      // host makes every guard page of its next call PROT_NONE again)
      h.guards_intact_ = false;
    }
  } unpark{*this, starts_};
  return call(c, in_place, timeout_seconds);
}

void KernelHost::swap_parked() {
  std::swap(pid_, parked_.pid);
  std::swap(sock_, parked_.sock);
  std::swap(pidfd_, parked_.pidfd);
  std::swap(schedstat_fd_, parked_.schedstat_fd);
  std::swap(host_sched_ns_, parked_.host_sched_ns);
  std::swap(cpu_clock_, parked_.cpu_clock);
  std::swap(have_cpu_clock_, parked_.have_cpu_clock);
  std::swap(seq_, parked_.seq);
  std::swap(guards_intact_, parked_.guards_intact);
  std::swap(mapping_watch_, parked_.mapping_watch);
  std::swap(seccomp_error_, parked_.seccomp_error);
}

const AbiVersions& KernelHost::negotiate(const std::vector<Dtype>& dtypes, const std::vector<Layout>& layouts,
                                         double timeout_seconds, const std::function<bool()>& stop,
                                         const std::function<void(const CallResult&)>& on_call,
                                         const RotarySlice* slice, bool neutral_only) {
  // (negotiate_abi asks the asked dtypes and layouts first, then the others for the version question)
  HostOptions po = opt_;
  po.output_dir.clear();  // the probes' output stays out of the run's capture files
  KernelHost probe(src_, po);
  // The probes are calls like any other: the probe host's CPU counts in live_cpu_seconds() while it lives (then in
  // RUSAGE_CHILDREN), and each probe's blocked time is reported (the gate's budget).
  probe_host_ = &probe;
  struct Unset {
    KernelHost*& p;
    ~Unset() { p = nullptr; }
  } unset{probe_host_};
  abi_ = negotiate_abi(
      [&](const RopeCase& c, uint32_t version, bool in_place) {
        AbiProbe p;
        CallResult r;
        try {
          r = probe.call_at(c, in_place, timeout_seconds, version);
        } catch (const LoadError& e) {
          r.status = CallStatus::crashed;
          r.host_error = e.what();
        }
        if (on_call) on_call(r);
        p.rc = r.rc;
        p.said = r.raised;
        if (r.status == CallStatus::crashed || r.status == CallStatus::hung) p.outcome = describe(r);
        return p;
      },
      dtypes, layouts, stop, slice, neutral_only);
  if (src_.host_fd >= 0) probes_cpu_ += probe.live_cpu_seconds();
  return abi_;
}

void KernelHost::probe_calls(double timeout_seconds, const std::function<void(const CallResult&)>& on_call,
                             const std::function<void(const std::function<CallResult(const RopeCase&)>&)>& body) {
  HostOptions po = opt_;
  po.output_dir.clear();  // (as the ABI probes': their output stays out of the run's capture files)
  KernelHost probe(src_, po);
  probe.set_abi(abi_, features_declared_);
  probe_host_ = &probe;
  struct Unset {
    KernelHost*& p;
    ~Unset() { p = nullptr; }
  } unset{probe_host_};
  body([&](const RopeCase& c) {
    CallResult r;
    try {
      r = probe.call(c, false, timeout_seconds);
    } catch (const LoadError& e) {
      r.status = CallStatus::crashed;
      r.host_error = e.what();
    }
    if (on_call) on_call(r);
    return r;
  });
  if (src_.host_fd >= 0) probes_cpu_ += probe.live_cpu_seconds();  // (as negotiate's)
}

CallResult KernelHost::call(const RopeCase& c, bool in_place, double timeout_seconds) {
  if (!abi_.probed) negotiate({c.dtype}, {c.layout}, timeout_seconds);
  const uint32_t v = abi_.version_for(c.min_abi_version(), features_declared_);
  if (v == 0) {
    CallResult r;
    r.status = CallStatus::declined;
    r.rc = RC_UNSUPPORTED;
    r.not_sent = abi_.why_not_sent(c.min_abi_version());
    r.out = c.input;  // nothing was written
    return r;
  }
  return call_at(c, in_place, timeout_seconds, v);
}

CallResult KernelHost::call_at(const RopeCase& c, bool in_place, double timeout_seconds, uint32_t abi_version) {
  CallResult r;
  r.abi_version = abi_version;
  const Dtype d = c.dtype;
  const size_t nb = c.n_bytes(), ne = c.n_elements();
  const bool tensor = abi_version >= 3 && c.tensor;
  // (The tensor form passes positions as its own tensor, and q and k as tensors: no positions region, and q's
  // regions hold its strided layout.)
  const size_t n_tok = tensor ? 0 : c.positions.size(), n_freq = c.inv_freq.size();
  // The placement of each buffer follows from the case (deterministic), differing between buffers.
  const size_t h = c.n_tokens() * 7 + c.head_dim * 3 + c.n_heads + c.rotary_dim;
  auto placement = [&](size_t k) { return Placement((h + k) % 3); };
  size_t cursor = 0;
  std::vector<Region> regions;
  regions.push_back(place("args struct", 0xC3, sizeof(rc_rope_args), placement(0), cursor));
  // (the buffers the kernel reads get the padding it may read after them: HostOptions::input_padding)
  const size_t pad = opt_.input_padding;
  regions.push_back(place("positions", 0x3C, n_tok * sizeof(int64_t), placement(1), cursor, pad));
  if (n_freq) regions.push_back(place("inv_freq", 0x96, n_freq * sizeof(double), placement(2), cursor, pad));
  const size_t in_idx = regions.size();
  if (tensor) regions.push_back(place_tensor(in_place ? "in-place q" : "q", 0xA5, c, 0, placement(3), cursor, pad));
  else regions.push_back(place(in_place ? "in-place" : "input", 0xA5, nb, placement(3), cursor, pad));
  const size_t out_idx = in_place ? in_idx : regions.size();
  if (!in_place && tensor) regions.push_back(place_tensor("q_out", 0x5A, c, 1, placement(4), cursor));
  else if (!in_place) regions.push_back(place("output", 0x5A, nb, placement(4), cursor));
  // ABI v2 arrays (only in a v2 call): the pair-axis map, the rule descriptor and its factor lists.
  const bool v2 = abi_version >= 2;
  const FrequencyRule* rule = v2 && c.freq_rule ? &*c.freq_rule : nullptr;
  size_t axis_idx = 0, rule_idx = 0, short_idx = 0, long_idx = 0;
  if (v2 && !c.pair_axis.empty()) {
    axis_idx = regions.size();
    regions.push_back(place("pair_axis", 0x69, c.pair_axis.size(), placement(5), cursor, pad));
  }
  if (rule) {
    rule_idx = regions.size();
    regions.push_back(place("freq_rule struct", 0x78, sizeof(rc_freq_rule), placement(6), cursor));
    if (!rule->short_factor.empty()) {
      short_idx = regions.size();
      regions.push_back(
          place("short_factor", 0x87, rule->short_factor.size() * sizeof(double), placement(7), cursor, pad));
    }
    if (!rule->long_factor.empty()) {
      long_idx = regions.size();
      regions.push_back(
          place("long_factor", 0xB4, rule->long_factor.size() * sizeof(double), placement(8), cursor, pad));
    }
  }
  // ABI v3 draft (only in a v3 call): the caller-given table(s), and the tensor form's k, index tensors and the
  // shapes and strides of every tensor (in one region of int64).
  const bool v3 = abi_version >= 3;
  TensorRegions tr;
  if (v3 && c.table) {
    (void)c.args(nullptr, nullptr, abi_version);  // lays the table out for its kind (RopeCase::abi_table_bytes)
    tr.table[0] = regions.size();
    regions.push_back(place_table("table", 0x4B, c, 0, placement(9), cursor, pad));
    if (!c.abi_table_bytes[1].empty()) {
      tr.table[1] = regions.size();
      regions.push_back(place_table("table2", 0xB2, c, 1, placement(10), cursor, pad));
    }
  }
  if (tensor) add_tensor_regions(c, in_place, tr, regions, cursor, placement, pad);
  if (v3 && (c.table || tensor)) {
    tr.shapes = regions.size();
    regions.push_back(place("tensor shapes", 0xD2, kTensorShapeSlots * sizeof(int64_t), placement(11), cursor));
  }
  // The call's guard pages, adjacent ones as one span.
  std::vector<Span> guard_list;
  bool sparse = false;
  for (const Region& g : regions) {
    for (const Span& x : guard_spans(g)) guard_list.push_back(x);
    sparse = sparse || !g.live.empty();
  }
  merge_spans(guard_list);
  if (guard_list.size() > kMaxGuards)
    throw std::runtime_error(fmt::format("the call's tensors need {} guard spans in the kernel's process, more than "
                                         "the {} a call can have: their elements lie on too many pages far apart",
                                         guard_list.size(), kMaxGuards));
  if (sparse && src_.host_fd >= 0) {
    r.status = CallStatus::declined;
    r.rc = RC_UNSUPPORTED;
    r.not_sent = fmt::format("its tensors span {:.1f} GiB, which the gate lays out sparse (guard pages between the "
                             "elements) only in a host process of its own, not in a process that serves the calls",
                             double(cursor) / double(size_t(1) << 30));
    r.out = c.input;
    return r;
  }
  ensure_arena(cursor);
  start();
  r.host_start = starts_;
  auto* A = static_cast<unsigned char*>(arena_);
  for (const Region& g : regions)
    for (const Span& x : filled_spans(g)) std::memset(A + x.lo, g.pattern, x.hi - x.lo);
  const Region &ra = regions[0], &rp = regions[1], &ri = regions[in_idx], &ro = regions[out_idx];
  if (n_tok) std::memcpy(A + rp.data, c.positions.data(), rp.n);
  if (n_freq) std::memcpy(A + regions[2].data, c.inv_freq.data(), regions[2].n);
  const uint32_t pb = poison_bits(d);
  if (tensor) {
    fill_tensor_buffers(c, in_place, tensor_buffers(tr, regions, in_idx, out_idx, A), pb);
  } else {
    if (nb) std::memcpy(A + ri.data, c.input.data(), nb);
    if (!in_place)
      for (size_t k = 0; k < ne; ++k) store_bits(d, A + ro.data, k, pb);
  }
  rc_rope_args args = c.args(A + ri.data, A + ro.data, abi_version);
  Bytes shapes_before;  // the shapes and strides as the call got them
  if (v3 && (c.table || tensor)) {
    point_v3_args(c, in_place, tensor_buffers(tr, regions, in_idx, out_idx, A), args);
    shapes_before.assign(A + regions[tr.shapes].data, A + regions[tr.shapes].data + regions[tr.shapes].n);
  }
  args.positions = n_tok ? reinterpret_cast<const int64_t*>(A + rp.data) : nullptr;
  args.inv_freq = n_freq ? reinterpret_cast<const double*>(A + regions[2].data) : nullptr;
  rc_freq_rule rule_args{};
  if (axis_idx) {
    std::memcpy(A + regions[axis_idx].data, c.pair_axis.data(), c.pair_axis.size());
    args.pair_axis = reinterpret_cast<const uint8_t*>(A + regions[axis_idx].data);
  }
  if (rule) {
    rule_args = *args.freq_rule;
    if (short_idx) {
      std::memcpy(A + regions[short_idx].data, rule->short_factor.data(), regions[short_idx].n);
      rule_args.short_factor = reinterpret_cast<const double*>(A + regions[short_idx].data);
    }
    if (long_idx) {
      std::memcpy(A + regions[long_idx].data, rule->long_factor.data(), regions[long_idx].n);
      rule_args.long_factor = reinterpret_cast<const double*>(A + regions[long_idx].data);
    }
    std::memcpy(A + regions[rule_idx].data, &rule_args, sizeof rule_args);
    args.freq_rule = reinterpret_cast<const rc_freq_rule*>(A + regions[rule_idx].data);
  }
  std::memcpy(A + ra.data, &args, sizeof args);

  Command cmd;
  cmd.seq = ++seq_;
  cmd.args_off = ra.data;
  cmd.used_bytes = cursor;
  if (guards_intact_) cmd.flags |= kGuardsIntact;
  for (const Span& x : guard_list) {
    cmd.guard_off[cmd.n_guards] = x.lo;
    cmd.guard_pages[cmd.n_guards++] = (x.hi - x.lo) / page_size();
  }
  const uint64_t self0 = sched_ns(self_schedstat_fd());
  const double host_cpu0 = schedstat_fd_ < 0 ? live_cpu_seconds() : 0.0;
  const auto t0 = Clock::now();
  Reply rep;
  int w = send(sock_, &cmd, sizeof cmd, MSG_NOSIGNAL) == ssize_t(sizeof cmd) ? 2 : 0;
  if (w == 2)
    w = wait_reply(sock_, pidfd_, pid_, rep,
                   t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_seconds)));
  // The host's last words: where its kernel faulted. It is on its way out (the crash path below waits for it).
  std::optional<Reply> fault;
  if (w == 1 && rep.kind == kFault) {
    fault = rep;
    w = 0;
  }
  // Served apart: the process making the call ended (the serving process's word for it).
  std::optional<Reply> ended;
  if (w == 1 && rep.kind == kEnded && apart_pid_ > 0) {
    ended = rep;
    w = 0;
  }
  if (w == 1 && (rep.kind != kDone || rep.seq != cmd.seq)) w = -2;
  r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  if (have_apart_clock_ && !ended) apart_cpu_last_ = std::max(apart_cpu_last_, cpu_clock_seconds(apart_clock_));
  // The call's wall time less what the host's calling thread spent on a CPU or waiting for one (since the
  // last call: between calls it only sleeps in recv) and what the gate's thread did (on a CPU, or waiting
  // for one to take the reply): what is left, the kernel was blocked. A busy machine stretches only the
  // parts subtracted. (Without schedstat: the wall time less the host's CPU time.)
  {
    const uint64_t self1 = sched_ns(self_schedstat_fd()), host1 = sched_ns(schedstat_fd_);
    double busy;
    if (self0 != UINT64_MAX && self1 != UINT64_MAX && host1 != UINT64_MAX && host_sched_ns_ != UINT64_MAX &&
        self1 >= self0 && host1 >= host_sched_ns_) {
      busy = double(host1 - host_sched_ns_) * 1e-9 + double(self1 - self0) * 1e-9;
      host_sched_ns_ = host1;
    } else {
      busy = live_cpu_seconds() - host_cpu0;
    }
    r.blocked_seconds = std::max(0.0, r.seconds - busy);
  }

  // The guard pages must still be PROT_NONE in the host (read from outside: a PROT_NONE page gives EFAULT).
  // Only a live host can be asked.
  const bool attached = src_.host_fd >= 0;  // (no guard pages are armed in the serving process)
  // Where the host's mapping watch is in force, only after a call it saw touch the arena (host_protocol.hpp).
  const bool watched = w == 1 && !attached && (rep.watch & kWatchInForce) && !(rep.watch & kWatchTouched);
  guards_intact_ = w == 1 && !attached && (watched || protection_checked_);
  if (w == 1 && protection_checked_ && !attached && !watched) {
    ++guard_reads_;
    // (each guard span's first and last page: a sparse tensor's spans between its elements are many pages)
    for (const Region& g : regions)
      for (const Span& x : guard_spans(g))
        for (const uint64_t off : {x.lo, x.hi - page_size()}) {
          if (off != x.lo && x.hi - x.lo == page_size()) continue;
          unsigned char b;
          iovec local{&b, 1}, remote{A + off, 1};
          const ssize_t k = process_vm_readv(pid_, &local, 1, &remote, 1, 0);
          if (k == 1 || errno != EFAULT) guards_intact_ = false;
          if (k == 1)
            r.memory.push_back({"guard page", fmt::format("memory: the guard page {} the {} buffer is no longer "
                                                          "PROT_NONE in the kernel's process (the kernel changed its "
                                                          "protection)",
                                                          off == g.guard_lo    ? "before"
                                                          : off == g.guard_hi ? "after"
                                                                              : "between the elements of",
                                                          g.name)});
          else if (errno != EFAULT)
            protection_checked_ = false;  // not permitted here: the summary says so
        }
  }
  if (w == 1) {
    r.rc = rep.rc;
    r.status = rep.rc == RC_OK            ? CallStatus::ok
               : rep.rc == RC_UNSUPPORTED ? CallStatus::declined
                                          : CallStatus::error_code;
    if (rep.fp_before != rep.fp_after)
      r.fp_change = "the call changed the FP environment: " +
                    describe_fp_change(FpControl{rep.fp_before}, FpControl{rep.fp_after});
    if (attached && r.status == CallStatus::error_code && rep.text[0])
      r.raised = std::string(rep.text, strnlen(rep.text, sizeof rep.text));
  } else if (attached && apart_pid_ > 0 && (ended || w == -1)) {
    // Served apart: only the process making this channel's calls ended (or is ended now, for a hang); the next
    // call opens a new channel, served by a new process.
    if (w == -1) {
      r.status = CallStatus::hung;
      end_apart(true);
    } else {
      r.status = CallStatus::crashed;
      if (ended->fault_code == 1)
        r.signal = ended->rc;
      else
        r.exit_code = ended->rc;
      // Where: what the serving process read of the process's last words (Python's fault handler: its stack),
      // else not known (no guard pages are armed there, no fault handler of ours runs).
      const std::string where(ended->text, strnlen(ended->text, sizeof ended->text));
      if (!where.empty())
        r.fault_where = where;
      else if (r.signal == SIGSEGV || r.signal == SIGBUS)
        r.fault_where = "where is not known (a process serving the calls apart arms no guard pages)";
    }
    stop();
  } else if (attached) {
    // The serving process is not the gate's to kill or restart: the channel ends, and with it this host.
    stop();
    if (w == -1) {
      r.status = CallStatus::hung;
      attached_dead_ = fmt::format("the process serving the calls did not answer a call within {:g} s; no further "
                                   "call can be made",
                                   timeout_seconds);
    } else {
      r.status = CallStatus::crashed;
      r.exit_code = w == -2 ? -2 : kServerGone;
      attached_dead_ = "the process serving the calls ended or closed its channel";
    }
  } else {
    // The host died, hung or garbled its reply: end it (and anything in its group). When its socket broke it
    // may be on its way out: it gets until the call's deadline to exit by itself (wait_own_exit).
    const pid_t pid = pid_;
    int st = 0;
    const bool exited =
        w == 0 && wait_own_exit(pidfd_, pid, st,
                                t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_seconds)));
    kill(-pid, SIGKILL);  // (the group outlives its leader while a member lives: its id is not reused)
    if (!exited) {
      kill(pid, SIGKILL);
      while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
      }
    }
    // Killed by the gate after its socket broke and it did not exit by the deadline: the socket is the cause.
    const bool gate_killed = w == 0 && !exited && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL;
    pid_ = -1;
    stop();
    if (w == -1) {
      r.status = CallStatus::hung;
    } else if (w == -2) {
      r.status = CallStatus::crashed;
      r.exit_code = -2;
    } else if (gate_killed) {
      r.status = CallStatus::crashed;
      r.exit_code = kLostSocket;
    } else if (WIFSIGNALED(st) && WTERMSIG(st) != SIGKILL) {
      r.status = CallStatus::crashed;
      r.signal = WTERMSIG(st);
      if (fault && fault->rc == r.signal) {
        MisreadRow misread;
        r.fault_where = fault_place(*fault, regions, A, cursor, c, r.wrapped_offset, misread);
        r.misread_fault = misread.fault;
      }
    } else {
      r.status = CallStatus::crashed;
      r.signal = WIFSIGNALED(st) ? SIGKILL : 0;
      r.exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    }
  }

  // What the call did to memory, whatever it returned.
  if (tensor) r.out = gather_heads(c, c.tensor_layout(in_place ? 0 : 1), A + ro.data);
  else r.out.assign(A + ro.data, A + ro.data + nb);
  r.guard_before_bytes = count_changed(A, ro.guard_lo, ro.data, ro.pattern);
  r.guard_after_bytes = count_changed(A, ro.data + ro.n, ro.end(), ro.pattern);
  // The tensor form: q's input as it is now (compact), and what the call did to k and to the strides' gaps.
  const Bytes q_now = tensor && !in_place ? gather_heads(c, c.tensor_layout(0), A + ri.data) : Bytes{};
  const unsigned char* in_now = tensor ? (in_place ? r.out.data() : q_now.data()) : A + ri.data;
  if (tensor) check_tensors_after(c, in_place, tr, regions, in_idx, out_idx, A, r);
  for (int n = 0; n < 2; ++n) {
    if (!tr.table[n]) continue;
    const Region& g = regions[tr.table[n]];
    bool same = true;
    if (g.live.empty()) {
      same = std::memcmp(A + g.data, c.abi_table_bytes[n].data(), g.n) == 0;
    } else {  // a sparse table: its kept rows, and the pattern in the rest of their pages
      const std::vector<int64_t>& kept = c.table->stored;
      const size_t row = c.abi_table_bytes[n].size() / kept.size();
      size_t from = 0;  // (the live pages, with the rows in them skipped)
      for (const Span& x : g.live) {
        from = std::max(from, x.lo);
        for (size_t k = 0; k < kept.size(); ++k) {
          const size_t at = g.data + size_t(kept[k]) * row;
          if (at + row <= x.lo || at >= x.hi) continue;
          same = same && std::memcmp(A + at, c.abi_table_bytes[n].data() + k * row, row) == 0;
          if (at > from) same = same && count_changed(A, from, at, g.pattern) == 0;
          from = at + row;
        }
        if (x.hi > from) same = same && count_changed(A, from, x.hi, g.pattern) == 0;
      }
    }
    if (!same)
      r.memory.push_back({"argument modified", fmt::format("memory: the call wrote into its (const) {}", g.name)});
  }
  if (!shapes_before.empty() && std::memcmp(A + regions[tr.shapes].data, shapes_before.data(), shapes_before.size()) != 0)
    r.memory.push_back({"argument modified", "memory: the call wrote into its tensors' (const) shapes or strides"});
  auto guards = [&](const Region& g) {
    // (a sparse region's pages in front of its data, past its first guard page, were guard pages for the call: never
    // written, never read here -- a sparse table's lead spans gigabytes)
    const size_t lo = count_changed(A, g.guard_lo, g.live.empty() ? g.data : std::min(g.data, g.guard_lo + page_size()),
                                    g.pattern);
    const size_t hi = count_changed(A, g.data + g.n, g.end(), g.pattern);
    return std::pair{lo, hi};
  };
  for (size_t k = 0; k < regions.size(); ++k) {
    const Region& g = regions[k];
    if (k == out_idx) continue;  // reported by judge_call from the counts above
    const auto [lo, hi] = guards(g);
    if (k == in_idx) {
      r.input_guard_bytes = lo + hi;
      continue;
    }
    if (lo + hi)
      r.memory.push_back({"out-of-bounds write", fmt::format("memory: {} guard byte(s) around the {} were overwritten "
                                                             "({} before, {} after it)",
                                                             lo + hi, g.name, lo, hi)});
  }
  if (std::memcmp(A + ra.data, &args, sizeof args) != 0) {
    rc_rope_args now;
    std::memcpy(&now, A + ra.data, sizeof now);
    std::vector<std::string> fields;
#define RC_FIELD(f) \
  if (std::memcmp(&now.f, &args.f, sizeof args.f) != 0) fields.push_back(#f);
    RC_FIELD(abi_version) RC_FIELD(dtype) RC_FIELD(layout) RC_FIELD(head_dim) RC_FIELD(rotary_dim) RC_FIELD(n_heads)
    RC_FIELD(n_tokens) RC_FIELD(positions) RC_FIELD(base) RC_FIELD(position_scale) RC_FIELD(inv_freq) RC_FIELD(in)
    RC_FIELD(out) RC_FIELD(rotary_offset) RC_FIELD(n_pos_axes) RC_FIELD(pair_axis) RC_FIELD(attention_factor)
    RC_FIELD(freq_rule) RC_FIELD(direction) RC_FIELD(table_kind) RC_FIELD(table) RC_FIELD(table2) RC_FIELD(q)
    RC_FIELD(q_out) RC_FIELD(k) RC_FIELD(k_out) RC_FIELD(pos) RC_FIELD(seq_offsets) RC_FIELD(cu_seqlens)
#undef RC_FIELD
    r.memory.push_back({"argument modified", fmt::format("memory: the call wrote into its (const) args struct: {} "
                                                         "changed",
                                                         fields.empty() ? std::string("padding") : fmt::format("{}", fmt::join(fields, ", ")))});
  }
  auto changed_items = [&](const unsigned char* now, const void* was, size_t n, size_t item, size_t& first) {
    size_t k = 0;
    for (size_t i = 0; i < n / item; ++i)
      if (std::memcmp(now + i * item, static_cast<const unsigned char*>(was) + i * item, item) != 0 && !k++) first = i;
    return k;
  };
  size_t first = 0;
  if (size_t k = changed_items(A + rp.data, c.positions.data(), rp.n, 8, first))
    r.memory.push_back({"argument modified", fmt::format("memory: the call wrote into its (const) positions array: {} "
                                                         "of {} changed; first positions[{}] was {}",
                                                         k, n_tok, first, c.positions[first])});
  if (n_freq)
    if (size_t k = changed_items(A + regions[2].data, c.inv_freq.data(), regions[2].n, 8, first))
      r.memory.push_back({"argument modified", fmt::format("memory: the call wrote into its (const) inv_freq table: {} "
                                                           "of {} changed; first inv_freq[{}] was {}",
                                                           k, n_freq, first, c.inv_freq[first])});
  if (axis_idx && std::memcmp(A + regions[axis_idx].data, c.pair_axis.data(), c.pair_axis.size()) != 0)
    r.memory.push_back({"argument modified", "memory: the call wrote into its (const) pair_axis map"});
  if (rule) {
    bool changed = std::memcmp(A + regions[rule_idx].data, &rule_args, sizeof rule_args) != 0;
    if (short_idx) changed |= std::memcmp(A + regions[short_idx].data, rule->short_factor.data(), regions[short_idx].n) != 0;
    if (long_idx) changed |= std::memcmp(A + regions[long_idx].data, rule->long_factor.data(), regions[long_idx].n) != 0;
    if (changed)
      r.memory.push_back({"argument modified", "memory: the call wrote into its (const) frequency-rule descriptor"});
  }
  if (!in_place) {
    for (size_t k = 0; k < ne; ++k)
      if (load_bits(d, in_now, k) != load_bits(d, c.input.data(), k))
        if (!r.input_changed++) r.first_input_changed = k;
  }
  if (r.status == CallStatus::ok && !in_place) {
    for (size_t k = 0; k < ne; ++k)
      if (load_bits(d, r.out.data(), k) == pb && load_bits(d, c.input.data(), k) != pb)
        if (!r.unwritten++) r.first_unwritten = k;
  }
  if (r.status == CallStatus::declined) {
    // Declining means doing nothing: the output keeps its poison (in place: the input).
    size_t k = 0, first_w = 0;
    for (size_t e = 0; e < ne; ++e) {
      const uint32_t want = in_place ? load_bits(d, c.input.data(), e) : pb;
      if (load_bits(d, r.out.data(), e) != want && !k++) first_w = e;
    }
    if (k)
      r.memory.push_back({"declined after writing",
                          fmt::format("memory: the kernel declined the call (RC_UNSUPPORTED) after writing {} output "
                                      "element(s) (first: element {}); a declined call must not write",
                                      k, first_w)});
  }
  return r;
}

std::string KernelHost::sandbox_summary() const {
  if (src_.host_fd >= 0 && served_apart_)
    return fmt::format("calls served apart, each channel by a process of its own forked by the one that started the "
                       "gate{} ({} channel(s)): a crash or a hang ends only that process; no sandbox, no guard pages "
                       "armed (guard bytes are checked), FP environment not checked",
                       seccomp_error_.empty() ? "" : ", " + seccomp_error_, starts_);
  if (src_.host_fd >= 0)
    return fmt::format("calls served in the process that started the gate{} ({} channel(s)): no sandbox, no guard "
                       "pages armed (guard bytes are checked), FP environment not checked, a crash there ends it",
                       seccomp_error_.empty() ? "" : ", " + seccomp_error_, starts_);
  std::string s = fmt::format("kernel host: {} process start(s)", starts_);
  s += seccomp_error_.empty() ? ", seccomp filter in force" : ", " + seccomp_error_;
  if (!protection_checked_) s += ", guard-page protection not verifiable here (process_vm_readv not permitted)";
  return s;
}

std::string KernelHost::captured_output(size_t max_lines) const {
  std::string s;
  if (private_dir_.empty()) return s;
  for (const char* stream : {"stdout", "stderr"}) {
    const std::string p = private_dir_ + "/kernel-" + stream + ".txt";
    std::error_code ec;
    const auto size = fs::file_size(p, ec);
    if (ec || size == 0) continue;
    std::ifstream f(p);
    s += fmt::format("the kernel wrote {} byte(s) to its {} (captured; never mixed into the gate's output):\n", size,
                     stream);
    std::string line;
    size_t n = 0;
    while (n < max_lines && std::getline(f, line)) {
      if (line.size() > 200) line = line.substr(0, 200) + "...";
      s += fmt::format("  kernel {} | {}\n", stream, line);
      ++n;
    }
    if (std::getline(f, line)) s += fmt::format("  kernel {} | ...\n", stream);
  }
  return s;
}

std::vector<std::string> KernelHost::save_captured_output(const std::string& dir) const {
  std::vector<std::string> saved;
  if (private_dir_.empty()) return saved;
  for (const char* stream : {"stdout", "stderr"}) {
    const std::string name = std::string("kernel-") + stream + ".txt";
    std::error_code ec;
    if (fs::file_size(private_dir_ + "/" + name, ec) == 0 || ec) continue;
    fs::create_directories(dir, ec);
    fs::copy_file(private_dir_ + "/" + name, fs::path(dir) / name, fs::copy_options::overwrite_existing, ec);
    if (!ec) saved.push_back((fs::path(dir) / name).string());
  }
  return saved;
}

CallResult call_isolated(rc_rope_apply_fn fn, const RopeCase& c, bool in_place, double timeout_seconds) {
  KernelHost h(KernelSource{"", fn}, HostOptions{});
  return h.call(c, in_place, timeout_seconds);
}

std::string describe(const CallResult& r) {
  switch (r.status) {
    case CallStatus::ok: return "returned RC_OK";
    case CallStatus::declined: return "returned RC_UNSUPPORTED";
    case CallStatus::error_code:
      if (!r.raised.empty()) return "raised " + r.raised;
      return "returned the error code " + std::to_string(r.rc);
    case CallStatus::hung: return "did not return within the timeout (killed)";
    case CallStatus::crashed:
      if (!r.host_error.empty()) return "could not be loaded again after an earlier crash: " + r.host_error;
      if (r.signal == SIGKILL) return "was killed (SIGKILL) by someone other than the gate";
      if (r.signal && !r.fault_where.empty()) return signal_text(r.signal, false) + ": " + r.fault_where;
      if (r.signal) return signal_text(r.signal);
      if (r.exit_code == -2) return "garbled the host's reply (wrote into ropecheck's control socket, fd 3?)";
      if (r.exit_code == kServerGone)
        return "ended the process serving the calls, or it closed its channel (a crash in native code? that process's "
               "stderr says more)";
      if (r.exit_code == kLostSocket)
        return "closed or broke ropecheck's control socket (fd 3 of the host process), so the host could not report "
               "the call";
      return "exited the process (status " + std::to_string(r.exit_code) + ") instead of returning";
  }
  return "?";
}

}  // namespace ropecheck::gate
