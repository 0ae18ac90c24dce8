#include "gate/isolation.hpp"

#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <cstring>
#include <stdexcept>
#include <string>

namespace ropecheck::gate {

namespace {

// Distinct guard patterns for the input and the output: a kernel that copies one element past the end of
// its input into one past the end of its output (an off-by-one row copy) changes the output's guard bytes.
constexpr unsigned char kInputGuard = 0xA5, kOutputGuard = 0x5A;
constexpr size_t kAlign = 64;     // buffers start 64-byte aligned
constexpr size_t kGuardBefore = 64;

size_t page_size() {
  static const size_t p = size_t(sysconf(_SC_PAGESIZE));
  return p;
}

// A shared anonymous mapping: [guard bytes][data][slack guard bytes][PROT_NONE page].
struct GuardedBuffer {
  unsigned char* base = nullptr;
  size_t total = 0;      // bytes mapped, including the guard page
  size_t data_off = 0;
  size_t n = 0;

  unsigned char guard;

  GuardedBuffer(size_t nbytes, unsigned char pattern, bool flush_end) : n(nbytes), guard(pattern) {
    const size_t pg = page_size();
    const size_t usable = ((kGuardBefore + nbytes + kAlign + pg - 1) / pg) * pg;
    total = usable + pg;
    void* p = mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::runtime_error("mmap of a guarded buffer failed");
    base = static_cast<unsigned char*>(p);
    // 64-byte aligned, or (flush_end) ending exactly at the guard page, aligned to the element size only: a
    // read or write one element past the end then faults whatever the buffer's size.
    data_off = flush_end ? usable - nbytes : ((usable - nbytes) / kAlign) * kAlign;
    std::memset(base, guard, usable);
    if (mprotect(base + usable, pg, PROT_NONE) != 0) throw std::runtime_error("mprotect of a guard page failed");
  }
  GuardedBuffer(const GuardedBuffer&) = delete;
  GuardedBuffer& operator=(const GuardedBuffer&) = delete;
  ~GuardedBuffer() {
    if (base) munmap(base, total);
  }
  unsigned char* data() { return base + data_off; }
  size_t usable() const { return total - page_size(); }
  size_t changed_before() const {
    size_t k = 0;
    for (size_t i = 0; i < data_off; ++i) k += base[i] != guard;
    return k;
  }
  size_t changed_after() const {
    size_t k = 0;
    for (size_t i = data_off + n; i < usable(); ++i) k += base[i] != guard;
    return k;
  }
};

struct SharedHeader {
  volatile int done;
  volatile int rc;
};

}  // namespace

uint32_t poison_bits(Dtype d) {
  switch (d) {
    case Dtype::f32: return 0x7fa5a5a5u;  // quiet bit (22) clear, payload non-zero
    case Dtype::f16: return 0x7d5au;      // quiet bit (9) clear
    case Dtype::bf16: return 0x7fa5u;     // quiet bit (6) clear
  }
  return 0;
}

CallResult call_isolated(rc_rope_apply_fn fn, const RopeCase& c, bool in_place, double timeout_seconds) {
  CallResult r;
  const Dtype d = c.dtype;
  const size_t nb = c.n_bytes(), ne = c.n_elements();
  // Some calls (half of the case shapes) place both buffers flush against their guard pages.
  const bool flush_end = (c.n_tokens() + c.head_dim + c.n_heads) % 2 == 1;
  GuardedBuffer inbuf(nb, kInputGuard, flush_end);
  std::unique_ptr<GuardedBuffer> outbuf;
  if (nb) std::memcpy(inbuf.data(), c.input.data(), nb);
  if (!in_place) {
    outbuf = std::make_unique<GuardedBuffer>(nb, kOutputGuard, flush_end);
    const uint32_t pb = poison_bits(d);
    for (size_t k = 0; k < ne; ++k) store_bits(d, outbuf->data(), k, pb);
  }
  void* hp = mmap(nullptr, page_size(), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (hp == MAP_FAILED) throw std::runtime_error("mmap failed");
  auto* hdr = static_cast<SharedHeader*>(hp);
  hdr->done = 0;
  hdr->rc = 0;
  const rc_rope_args args = c.args(inbuf.data(), in_place ? static_cast<void*>(inbuf.data()) : outbuf->data());

  std::fflush(stdout);
  std::fflush(stderr);
  const auto t0 = std::chrono::steady_clock::now();
  const pid_t pid = fork();
  if (pid < 0) {
    munmap(hp, page_size());
    throw std::runtime_error("fork failed");
  }
  if (pid == 0) {
    struct rlimit nocore {0, 0};
    setrlimit(RLIMIT_CORE, &nocore);
    const int rc = fn(&args);
    hdr->rc = rc;
    hdr->done = 1;
    _exit(0);
  }
  int st = 0;
  long sleep_ns = 20000;
  bool killed = false;
  for (;;) {
    const pid_t w = waitpid(pid, &st, WNOHANG);
    if (w == pid) break;
    const double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (el > timeout_seconds) {
      kill(pid, SIGKILL);
      waitpid(pid, &st, 0);
      killed = true;
      break;
    }
    timespec ts{0, sleep_ns};
    nanosleep(&ts, nullptr);
    if (sleep_ns < 2000000) sleep_ns *= 2;
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const bool done = hdr->done == 1;
  r.rc = hdr->rc;
  munmap(hp, page_size());
  if (killed) {
    r.status = CallStatus::hung;
  } else if (WIFSIGNALED(st)) {
    r.status = CallStatus::crashed;
    r.signal = WTERMSIG(st);
  } else if (!done || WEXITSTATUS(st) != 0) {
    r.status = CallStatus::crashed;
    r.exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  } else if (r.rc == RC_OK) {
    r.status = CallStatus::ok;
  } else if (r.rc == RC_UNSUPPORTED) {
    r.status = CallStatus::declined;
  } else {
    r.status = CallStatus::error_code;
  }
  GuardedBuffer& ob = in_place ? inbuf : *outbuf;
  r.out.assign(ob.data(), ob.data() + nb);
  r.guard_before_bytes = ob.changed_before();
  r.guard_after_bytes = ob.changed_after();
  if (!in_place) {
    r.input_guard_bytes = inbuf.changed_before() + inbuf.changed_after();
    const uint32_t pb = poison_bits(d);
    for (size_t k = 0; k < ne; ++k) {
      if (load_bits(d, r.out.data(), k) == pb && load_bits(d, c.input.data(), k) != pb) {
        if (!r.unwritten++) r.first_unwritten = k;
      }
      if (load_bits(d, inbuf.data(), k) != load_bits(d, c.input.data(), k)) {
        if (!r.input_changed++) r.first_input_changed = k;
      }
    }
  }
  return r;
}

std::string describe(const CallResult& r) {
  switch (r.status) {
    case CallStatus::ok: return "returned RC_OK";
    case CallStatus::declined: return "returned RC_UNSUPPORTED";
    case CallStatus::error_code: return "returned the error code " + std::to_string(r.rc);
    case CallStatus::hung: return "did not return within the timeout (killed)";
    case CallStatus::crashed:
      if (r.signal) {
        std::string s = "crashed with signal " + std::to_string(r.signal) + " (" + strsignal(r.signal) + ")";
        if (r.signal == SIGSEGV || r.signal == SIGBUS)
          s += "; every buffer is followed by a guard page, so this may be an out-of-bounds access";
        return s;
      }
      return "exited the process (status " + std::to_string(r.exit_code) + ") instead of returning";
  }
  return "?";
}

}  // namespace ropecheck::gate
