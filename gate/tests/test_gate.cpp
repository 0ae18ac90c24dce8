// Tests of the gate: the plugin loader, isolated calls, replay files, the
// verdict and exit codes, and the mutation suite (every planted bug caught,
// every correct kernel passed).
#include <gtest/gtest.h>
#include <spawn.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cfenv>
#include <ctime>
#include <cstring>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <random>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "gate/case_json.hpp"
#include "properties/engine.hpp"
#include "gate/case_set.hpp"
#include "gate/npy.hpp"
#include "gate/gate.hpp"
#include "gate/host_protocol.hpp"
#include "gate/isolation.hpp"
#include "impls/plugin_loader.hpp"
#include "reports/report.hpp"
#include "support.hpp"
#include "tests/random_cases.hpp"

extern char** environ;

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAsan = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kAsan = true;
#else
constexpr bool kAsan = false;
#endif
#else
constexpr bool kAsan = false;
#endif

using namespace ropecheck;
namespace fs = std::filesystem;

namespace {

using test::mutant;

Implementation load(const std::string& stem) {
  PluginLoad pl = load_kernel_plugin(mutant(stem));
  if (!pl.impl) throw std::runtime_error(pl.error);
  return *pl.impl;
}

RopeCase small_case(Dtype d = Dtype::f32, Layout l = Layout::interleaved, uint32_t hd = 64, uint32_t rd = 64) {
  RopeCase c;
  c.dtype = d;
  c.layout = l;
  c.head_dim = hd;
  c.rotary_dim = rd;
  c.n_heads = 2;
  c.positions = {3, 0, 1 << 20, 12345};
  c.input.assign(c.n_bytes(), 0);
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-4, 4);
  for (size_t k = 0; k < c.n_elements(); ++k) store_f32(d, c.input.data(), k, u(rng));
  return c;
}

using test::run_cli;
using test::slurp;
using test::tmpdir;

}  // namespace

TEST(PluginLoader, LoadsAKernelAndNamesItByStem) {
  PluginLoad pl = load_kernel_plugin(mutant("ok_fast_f32"));
  ASSERT_TRUE(pl.impl) << pl.error;
  EXPECT_EQ(pl.impl->name, "ok_fast_f32");
  ASSERT_NE(pl.impl->fn, nullptr);
  // The loaded kernel is judged by the same path as built-ins: compare with the scalar kernel.
  const RopeCase c = small_case();
  Bytes a, b;
  ASSERT_EQ(run_kernel(*pl.impl, c, a), RC_OK);
  ASSERT_EQ(run_kernel(*find_implementation("scalar"), c, b), RC_OK);
  ReferenceOutput ref = reference_rope(c);
  EXPECT_TRUE(judge_output(c, ref, a.data(), promise_of(*pl.impl).bound(c)).ok());
  EXPECT_TRUE(judge_output(c, ref, b.data(), promise_of(*find_implementation("scalar")).bound(c)).ok());
}

TEST(PluginLoader, ClearErrors) {
  PluginLoad missing = load_kernel_plugin("/nonexistent/libnothing.so");
  EXPECT_FALSE(missing.impl);
  EXPECT_NE(missing.error.find("no such file"), std::string::npos) << missing.error;
  const std::string txt = tmpdir("loader") + "/notelf.so";
  std::ofstream(txt) << "not a library";
  PluginLoad bad = load_kernel_plugin(txt);
  EXPECT_FALSE(bad.impl);
  EXPECT_NE(bad.error.find("cannot load"), std::string::npos) << bad.error;
  // A real library without the symbol.
  PluginLoad nosym = load_kernel_plugin("/lib/x86_64-linux-gnu/libm.so.6");
  if (fs::exists("/lib/x86_64-linux-gnu/libm.so.6")) {
    EXPECT_FALSE(nosym.impl);
    EXPECT_NE(nosym.error.find("rc_rope_apply"), std::string::npos) << nosym.error;
  }
}

TEST(Isolation, CorrectKernelWritesEverythingAndKeepsTheInput) {
  const Implementation k = load("ok_double");
  for (bool in_place : {false, true}) {
    const RopeCase c = small_case(Dtype::bf16, Layout::half_split, 20, 12);
    const gate::CallResult r = gate::call_isolated(k.fn, c, in_place, 10);
    ASSERT_EQ(r.status, gate::CallStatus::ok) << gate::describe(r);
    EXPECT_EQ(r.unwritten, 0u);
    EXPECT_EQ(r.input_changed, 0u);
    EXPECT_EQ(r.guard_before_bytes + r.guard_after_bytes + r.input_guard_bytes, 0u);
    const gate::CaseVerdict v = gate::judge_call(c, in_place, AngleModel::exact, Criteria::of(promise_of(k).error_model, Contract{}), r);
    EXPECT_TRUE(v.pass) << v.message;
  }
}

TEST(Isolation, CrashHangOobInputAndUnwrittenAreSeen) {
  const RopeCase big = small_case(Dtype::f32, Layout::interleaved, 128, 128);
  {
    const gate::CallResult r = gate::call_isolated(load("mut_crash").fn, big, false, 10);
    EXPECT_EQ(r.status, gate::CallStatus::crashed) << gate::describe(r);
    // Where: the host's SIGSEGV handler sends the address before it dies (ASan's own handler may come first).
    if (r.signal == SIGSEGV) {
      EXPECT_NE(gate::describe(r).find("Segmentation fault): a write at address 0x0 (a null pointer)"), std::string::npos)
          << gate::describe(r);
    }
    // What the gate reports: SIGSEGV; under AddressSanitizer (the asan preset) ASan's handler ends the host with
    // its exit status 1, or with SIGSYS when it forks its symbolizer under the host's seccomp filter.
    if (r.signal) {
      EXPECT_TRUE(r.signal == SIGSEGV || (kAsan && r.signal == SIGSYS)) << gate::describe(r);
    } else {
      EXPECT_TRUE(kAsan && r.exit_code != 0) << gate::describe(r);
    }
  }
  {
    RopeCase c = small_case();
    c.positions.assign(8, 5);
    c.input.assign(c.n_bytes(), 0);
    const gate::CallResult r = gate::call_isolated(load("mut_hang").fn, c, false, 0.3);
    EXPECT_EQ(r.status, gate::CallStatus::hung);
  }
  {
    const RopeCase c = small_case();
    const gate::CallResult r = gate::call_isolated(load("mut_oob_write").fn, c, false, 10);
    // Either the guard bytes after the buffer changed, or the guard page stopped the write (and says so).
    EXPECT_TRUE(r.guard_after_bytes > 0 || r.status == gate::CallStatus::crashed) << gate::describe(r);
    if (r.signal == SIGSEGV) {
      EXPECT_NE(gate::describe(r).find(": a write of the guard page after the output buffer, "), std::string::npos)
          << gate::describe(r);
    }
    const gate::CaseVerdict v = gate::judge_call(c, false, AngleModel::exact, Criteria::flat_bound(8), r);
    EXPECT_FALSE(v.pass);
  }
  {
    const RopeCase c = small_case();
    const gate::CallResult r = gate::call_isolated(load("mut_input_modified").fn, c, false, 10);
    EXPECT_EQ(r.status, gate::CallStatus::ok);
    EXPECT_GT(r.input_changed, 0u);
    const gate::CaseVerdict v = gate::judge_call(c, false, AngleModel::exact, Criteria::flat_bound(8), r);
    EXPECT_FALSE(v.pass);
    EXPECT_NE(v.message.find("changed"), std::string::npos) << v.message;
  }
  {
    const RopeCase c = small_case(Dtype::f16, Layout::interleaved, 20, 20);  // 10 pairs: a tail of 2
    const gate::CallResult r = gate::call_isolated(load("mut_vector_tail").fn, c, false, 10);
    const gate::CaseVerdict v = gate::judge_call(c, false, AngleModel::exact, Criteria::of(loaded_kernel_error_model(AngleModel::exact), Contract{}), r);
    EXPECT_FALSE(v.pass);
  }
  {
    const RopeCase c = small_case();
    const gate::CallResult r = gate::call_isolated(load("mut_declines_all").fn, c, false, 10);
    EXPECT_EQ(r.status, gate::CallStatus::declined);
  }
}

// ---- the kernel host --------------------------------------------------------

// Kernels written here (captureless lambdas, inherited by the host's fork): each call copies the input and
// stores how many calls its process has made into element 0.
int counting_kernel(const rc_rope_args* a) {
  static int calls = 0;
  ++calls;
  if (a->n_heads == 3) *static_cast<volatile int*>(nullptr) = 1;  // a crash on demand
  std::memcpy(a->out, a->in, a->n_tokens * a->n_heads * a->head_dim * (a->dtype == RC_F32 ? 4 : 2));
  const float v = float(calls);
  std::memcpy(a->out, &v, 4);
  return RC_OK;
}

// Prints each call's number.
int printing_kernel(const rc_rope_args* a) {
  static int calls = 0;
  std::printf("call %d\n", ++calls);
  std::fflush(stdout);
  return counting_kernel(a);
}

float first_element(const gate::CallResult& r) {
  float v;
  std::memcpy(&v, r.out.data(), 4);
  return v;
}

TEST(KernelHost, StateLastsAcrossCallsAndACrashStartsAFreshProcess) {
  gate::KernelHost host(gate::KernelSource{"", counting_kernel}, gate::HostOptions{});
  const RopeCase c = small_case();
  for (int k = 1; k <= 3; ++k) {
    const gate::CallResult r = host.call(c, false, 10);
    ASSERT_EQ(r.status, gate::CallStatus::ok) << gate::describe(r);
    EXPECT_EQ(first_element(r), float(k));  // one process: the counter goes on
    EXPECT_EQ(r.host_start, 1u);
  }
  RopeCase crash = c;
  crash.n_heads = 3;
  crash.input.assign(crash.n_bytes(), 0);
  EXPECT_EQ(host.call(crash, false, 10).status, gate::CallStatus::crashed);
  const gate::CallResult r = host.call(c, false, 10);
  ASSERT_EQ(r.status, gate::CallStatus::ok);
  EXPECT_EQ(first_element(r), 1.0f);  // a new process
  EXPECT_EQ(host.starts(), 2u);
  EXPECT_NE(host.sandbox_summary().find("seccomp filter in force"), std::string::npos) << host.sandbox_summary();
}

namespace {

// The processes whose parent is this one (from /proc/<pid>/stat).
std::set<pid_t> own_children() {
  std::set<pid_t> out;
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream f(e.path() / "stat");
    std::string line;
    if (!std::getline(f, line)) continue;
    const size_t close = line.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(line.substr(close + 1));
    std::string state;
    pid_t ppid = 0;
    rest >> state >> ppid;
    if (ppid == getpid()) out.insert(pid_t(std::stoi(name)));
  }
  return out;
}

}  // namespace

// call_alone: the case in a host of its own (the diagnosis's "fails alone?"), which sees none of the running host's
// state and leaves it as it was: the next call goes on counting, in the same process. Alone after a crash (no host
// running), and with a case that crashes alone: the next call starts a host as after any crash.
TEST(KernelHost, ACallAloneSeesNoStateAndLeavesTheRunningHostsState) {
  const std::set<pid_t> before = own_children();
  {
    gate::KernelHost host(gate::KernelSource{"", counting_kernel}, gate::HostOptions{});
    const RopeCase c = small_case();
    for (int k = 1; k <= 3; ++k) ASSERT_EQ(first_element(host.call(c, false, 10)), float(k));
    for (int k = 0; k < 2; ++k) {
      const gate::CallResult alone = host.call_alone(c, false, 10);
      ASSERT_EQ(alone.status, gate::CallStatus::ok) << gate::describe(alone);
      EXPECT_EQ(first_element(alone), 1.0f);  // a process of its own: its first call
    }
    gate::CallResult r = host.call(c, false, 10);
    EXPECT_EQ(first_element(r), 4.0f);  // the running host, its state kept
    EXPECT_EQ(r.host_start, 1u);
    EXPECT_EQ(host.starts(), 1u);
    RopeCase crash = c;
    crash.n_heads = 3;
    crash.input.assign(crash.n_bytes(), 0);
    EXPECT_EQ(host.call_alone(crash, false, 10).status, gate::CallStatus::crashed);
    r = host.call(c, false, 10);
    EXPECT_EQ(first_element(r), 5.0f);  // (a crash alone leaves the running host be)
    EXPECT_EQ(host.call(crash, false, 10).status, gate::CallStatus::crashed);
    EXPECT_EQ(first_element(host.call_alone(c, false, 10)), 1.0f);  // none running
    r = host.call(c, false, 10);
    EXPECT_EQ(first_element(r), 1.0f);  // a new host, as after any crash
    EXPECT_EQ(r.host_start, 2u);
    EXPECT_EQ(own_children().size(), before.size() + 2);  // the host and the zygote: no host made alone is left
  }
  EXPECT_EQ(own_children(), before);
  // What a host alone prints is not the running host's captured output (it was a KernelHost of its own before).
  gate::KernelHost printing(gate::KernelSource{"", printing_kernel}, gate::HostOptions{});
  const RopeCase c = small_case();
  ASSERT_EQ(printing.call(c, false, 10).status, gate::CallStatus::ok);
  ASSERT_EQ(printing.call_alone(c, false, 10).status, gate::CallStatus::ok);
  ASSERT_EQ(printing.call(c, false, 10).status, gate::CallStatus::ok);
  const std::string out = printing.captured_output();
  EXPECT_NE(out.find("\n  kernel stdout | call 1\n  kernel stdout | call 2\n"), std::string::npos) << out;
  EXPECT_EQ(out.find("call 1"), out.rfind("call 1")) << out;  // (once: the running host's first call)
}

// Hosts after the first are cloned by the zygote (isolation.cpp, "the zygote"), made at the first restart: each
// is still this process's child (its crash is seen as the signal that ended it, its state fresh, its sandbox in
// force), neither holds this process's output, and when the KernelHost ends, neither is left behind.
TEST(KernelHost, RestartedHostsAreFreshChildrenAndNothingIsLeftBehind) {
  const std::set<pid_t> before = own_children();
  {
    gate::KernelHost host(gate::KernelSource{"", counting_kernel}, gate::HostOptions{});
    const RopeCase c = small_case();
    RopeCase crash = c;
    crash.n_heads = 3;
    crash.input.assign(crash.n_bytes(), 0);
    for (int k = 0; k < 4; ++k) {
      const gate::CallResult a = host.call(c, false, 10);
      ASSERT_EQ(a.status, gate::CallStatus::ok) << gate::describe(a);
      EXPECT_EQ(first_element(a), 1.0f) << k;  // a fresh process each time: the counter starts again
      const gate::CallResult b = host.call(crash, false, 10);
      ASSERT_EQ(b.status, gate::CallStatus::crashed);
#ifndef __SANITIZE_ADDRESS__  // (under ASan the kernel's fault is ASan's report and exit 1)
      EXPECT_EQ(b.signal, SIGSEGV) << gate::describe(b);  // reaped by this process: its own signal
#endif
    }
    EXPECT_EQ(host.call(c, false, 10).status, gate::CallStatus::ok);
    EXPECT_EQ(host.starts(), 5u);
    EXPECT_NE(host.sandbox_summary().find("seccomp filter in force"), std::string::npos) << host.sandbox_summary();
    std::set<pid_t> during = own_children();
    for (pid_t p : before) during.erase(p);
    EXPECT_GE(during.size(), 1u);  // the host, and the zygote where clone3 can clone
    EXPECT_LE(during.size(), 2u);
    // Neither holds this process's stdout or stderr (a caller reading them to their end is not kept waiting).
    std::error_code ec;
    for (int fd : {1, 2}) {
      const fs::path mine = fs::read_symlink("/proc/self/fd/" + std::to_string(fd), ec);
      if (ec || mine == "/dev/null") continue;
      for (pid_t p : during)
        EXPECT_NE(fs::read_symlink("/proc/" + std::to_string(p) + "/fd/" + std::to_string(fd), ec), mine) << p;
    }
  }
  EXPECT_EQ(own_children(), before);
}

// Every buffer sits flush against its guard page before it in some calls and after it in others: a read of
// one element before the start or past the end faults in some of a dozen shapes and not in others.
TEST(KernelHost, BuffersTouchAGuardPageAtEitherEnd) {
  const rc_rope_apply_fn before = [](const rc_rope_args* a) {
    volatile const unsigned char x = static_cast<const unsigned char*>(a->in)[-1];
    (void)x;
    return RC_UNSUPPORTED;
  };
  const rc_rope_apply_fn after = [](const rc_rope_args* a) {
    const size_t nb = a->n_tokens * a->n_heads * a->head_dim * (a->dtype == RC_F32 ? 4 : 2);
    volatile const unsigned char x = static_cast<const unsigned char*>(a->in)[nb];
    (void)x;
    return RC_UNSUPPORTED;
  };
  for (const rc_rope_apply_fn fn : {before, after}) {
    gate::KernelHost host(gate::KernelSource{"", fn}, gate::HostOptions{});
    int faults = 0, clean = 0;
    for (uint32_t hd = 6; hd < 30; hd += 2) {
      const RopeCase c = small_case(Dtype::bf16, Layout::interleaved, hd, hd);
      const gate::CallResult r = host.call(c, false, 10);
      if (r.status == gate::CallStatus::crashed) {
        ++faults;
      } else {
        ++clean;
        EXPECT_EQ(r.status, gate::CallStatus::declined);
      }
    }
    EXPECT_GT(faults, 0);
    EXPECT_GT(clean, 0);
  }
}

// ---- attached: a process that serves the calls itself (KernelSource::host_fd: the Python package) ---------
namespace {

// A serving process as python/ropecheck/_host.py is one, in C++: each channel's arena is mapped where the gate
// has it (this child forked before the gate mapped it, so the range is free here), so the args' pointers hold
// as they are, and `fn` makes the call. The `die_after`-th call ends the process (0: never); an error code
// from `fn` goes back with `said` as its text.
[[noreturn]] void serve_calls(int control, rc_rope_apply_fn fn, int die_after, const char* said) {
  struct Chan {
    int fd;
    void* base;
    size_t bytes;
  };
  std::vector<Chan> chans;
  int calls = 0;
  for (;;) {
    std::vector<pollfd> polls{{control, POLLIN, 0}};
    for (const Chan& c : chans) polls.push_back({c.fd, POLLIN, 0});
    if (poll(polls.data(), polls.size(), -1) < 0) _exit(10);
    // The channels first, last to first (an ended one is erased): a host that ended unmaps its arena before a
    // new one, which may be mapped where it was, is opened (its message and the old channel's end can come
    // together: the gate closes one host's channel, then maps the next host's arena and opens its channel).
    for (size_t k = polls.size() - 1; k >= 1; --k) {
      if (!polls[k].revents) continue;
      Chan& ch = chans[k - 1];
      gate::Command cmd;
      if (recv(ch.fd, &cmd, sizeof cmd, 0) != ssize_t(sizeof cmd)) {  // the channel closed: unmap its arena
        close(ch.fd);
        munmap(ch.base, ch.bytes);
        chans.erase(chans.begin() + long(k - 1));
        continue;
      }
      if (++calls == die_after) _exit(9);
      gate::Reply r;
      r.kind = gate::kDone;
      r.seq = cmd.seq;
      r.rc = fn(reinterpret_cast<const rc_rope_args*>(static_cast<unsigned char*>(ch.base) + cmd.args_off));
      if (r.rc != RC_OK && r.rc != RC_UNSUPPORTED && said) std::strcpy(r.text, said);
      (void)!send(ch.fd, &r, sizeof r, MSG_NOSIGNAL);
    }
    if (polls[0].revents) {
      gate::OpenChannel m;
      iovec iov{&m, sizeof m};
      alignas(cmsghdr) char ctl[CMSG_SPACE(2 * sizeof(int))];
      msghdr h{};
      h.msg_iov = &iov;
      h.msg_iovlen = 1;
      h.msg_control = ctl;
      h.msg_controllen = sizeof ctl;
      if (recvmsg(control, &h, 0) != ssize_t(sizeof m)) _exit(0);  // the gate is done
      int fds[2];
      std::memcpy(fds, CMSG_DATA(CMSG_FIRSTHDR(&h)), sizeof fds);
      void* want = reinterpret_cast<void*>(m.arena_base);
      if (mmap(want, m.arena_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED_NOREPLACE, fds[1], 0) != want)
        _exit(11);
      close(fds[1]);
      gate::Reply r;
      r.kind = gate::kReady;
      std::strcpy(r.text, "a test's serving process");
      (void)!send(fds[0], &r, sizeof r, MSG_NOSIGNAL);
      chans.push_back({fds[0], want, m.arena_bytes});
    }
  }
}

// A served kernel's process: forked, serving on one end of a socket pair; the gate gets the other (fd).
struct Server {
  pid_t pid = -1;
  int fd = -1;
  Server(rc_rope_apply_fn fn, int die_after = 0, const char* said = nullptr) {
    int sv[2];
    EXPECT_EQ(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
    pid = fork();
    if (pid == 0) {
      close(sv[0]);
      serve_calls(sv[1], fn, die_after, said);
    }
    close(sv[1]);
    fd = sv[0];
  }
  ~Server() {
    close(fd);  // the serving process sees the control socket close and exits
    int st;
    waitpid(pid, &st, 0);
  }
};

int raises_on_two_tokens(const rc_rope_args* a) {
  if (a->abi_version <= 3 && a->n_tokens == 2) return 3;
  return ropecheck_scalar_rope(a);
}

}  // namespace

TEST(KernelHostAttached, ServedCallsGiveTheVerdictOfTheSameKernelInAHost) {
  gate::GateOptions o;
  o.dtypes = {Dtype::bf16};
  o.layouts = {Layout::half_split};
  o.random_cases = 300;
  o.property_cases = 3;
  o.quiet = true;
  Implementation hosted = served_implementation(-1, "scalar");
  hosted.host_fd = -1;
  hosted.fn = &ropecheck_scalar_rope;
  const gate::GateResult a = gate::run_gate(hosted, o);
  Server server(&ropecheck_scalar_rope);
  const gate::GateResult b = gate::run_gate(served_implementation(server.fd, "scalar"), o);
  ASSERT_EQ(a.rows.size(), b.rows.size());
  for (size_t k = 0; k < a.rows.size(); ++k) {
    EXPECT_EQ(a.rows[k].name, b.rows[k].name);
    EXPECT_EQ(a.rows[k].failed_check, b.rows[k].failed_check) << a.rows[k].name;
    if (a.rows[k].name == "v3: strides") {
      // Its cases of 2^32 elements (in place and out of place) are sparse only in the gate's own host: a serving
      // process is not sent them (one dtype x layout here; "not made", not a call), and the rest of the row is the
      // same calls.
      EXPECT_EQ(a.rows[k].cases, b.rows[k].cases + 2);
      uint64_t unsent = 0;
      for (const auto& [why, n] : b.rows[k].not_sent) unsent += n;
      EXPECT_EQ(unsent, 2u);
      EXPECT_LE(b.rows[k].worst_error, a.rows[k].worst_error);
      continue;
    }
    EXPECT_EQ(a.rows[k].cases, b.rows[k].cases) << a.rows[k].name;
    if (a.rows[k].name.rfind("bias ", 0) == 0)  // (over every accepted call's pairs: that case's too)
      EXPECT_NEAR(a.rows[k].worst_error, b.rows[k].worst_error, 1e-5) << a.rows[k].name;
    else
      EXPECT_EQ(a.rows[k].worst_error, b.rows[k].worst_error) << a.rows[k].name;
  }
  EXPECT_TRUE(a.pass) << a.verdict_reason;
  EXPECT_TRUE(b.pass) << b.verdict_reason;
  EXPECT_EQ(a.calls, b.calls + 2);  // (the two sparse cases)
  EXPECT_NE(b.sandbox.find("a test's serving process"), std::string::npos) << b.sandbox;
  EXPECT_NE(b.sandbox.find("no sandbox"), std::string::npos) << b.sandbox;
}

TEST(KernelHostAttached, AnErrorCarriesItsTextAndTheServersEndEndsTheChannel) {
  {
    Server server(&raises_on_two_tokens, 0, "ValueError: two tokens");
    gate::KernelHost host(gate::KernelSource{"", nullptr, server.fd}, gate::HostOptions{});
    RopeCase c = small_case();
    gate::CallResult r = host.call(c, false, 30);
    EXPECT_EQ(r.status, gate::CallStatus::ok) << gate::describe(r);
    EXPECT_EQ(r.unwritten, 0u);
    c.positions = {5, 6};
    c.input.assign(c.n_bytes(), 0);
    r = host.call(c, false, 30);
    EXPECT_EQ(r.status, gate::CallStatus::error_code);
    EXPECT_EQ(r.raised, "ValueError: two tokens");
    const gate::CaseVerdict v = gate::check_call(c, false, r);
    EXPECT_EQ(v.fault, "exception");
    EXPECT_NE(v.message.find("raised ValueError: two tokens"), std::string::npos) << v.message;
  }
  {
    Server server(&ropecheck_scalar_rope, /*die_after=*/3);
    gate::KernelHost host(gate::KernelSource{"", nullptr, server.fd}, gate::HostOptions{});
    const RopeCase c = small_case();
    host.set_abi(AbiVersions{});  // (no probing: the calls counted are these)
    EXPECT_EQ(host.call_at(c, false, 30, 1).status, gate::CallStatus::ok);
    EXPECT_EQ(host.call_at(c, true, 30, 1).status, gate::CallStatus::ok);
    const gate::CallResult r = host.call_at(c, false, 30, 1);
    EXPECT_EQ(r.status, gate::CallStatus::crashed);
    EXPECT_NE(gate::describe(r).find("ended the process serving the calls"), std::string::npos) << gate::describe(r);
    EXPECT_THROW(host.call_at(c, false, 30, 1), gate::LoadError);  // nothing serves them any more
  }
}

// A guard page the kernel made writable in one call is reported and PROT_NONE again at the next call of the
// same shape (the host skips re-protecting only the guard pages the gate read back intact): the next call's
// write one element past its output faults.
TEST(KernelHost, AGuardPageAKernelUnprotectedIsProtectedAgainNextCall) {
  static int calls = 0;
  calls = 0;
  const rc_rope_apply_fn fn = [](const rc_rope_args* a) {
    const size_t nb = a->n_tokens * a->n_heads * a->head_dim * (a->dtype == RC_F32 ? 4 : 2);
    const uintptr_t pg = uintptr_t(sysconf(_SC_PAGESIZE)), end = uintptr_t(a->out) + nb;
    unsigned char* next = reinterpret_cast<unsigned char*>((end + pg - 1) / pg * pg);
    if (calls++ % 2 == 0) {
      mprotect(next, pg, PROT_READ | PROT_WRITE);
    } else {
      *static_cast<volatile unsigned char*>(next) = 1;  // past the output: a fault unless the page stayed writable
    }
    return RC_UNSUPPORTED;
  };
  gate::KernelHost host(gate::KernelSource{"", fn}, gate::HostOptions{});
  // Whole pages of output (2 heads x 4 tokens x 4 KiB): where the output lies flush against its guard page
  // after it (a third of the cases), the first call of a pair unprotects that guard page (reported), and the
  // second, the same case, writes to it.
  int pairs = 0;
  for (int64_t p0 = 0; p0 < 12; ++p0) {
    RopeCase c = small_case(Dtype::f32, Layout::interleaved, 1024, 1024);
    c.positions[0] = p0;
    const gate::CallResult first = host.call(c, false, 10);
    const gate::CallResult second = host.call(c, false, 10);
    const bool reported = std::any_of(first.memory.begin(), first.memory.end(),
                                      [](const gate::MemoryFinding& m) { return m.fault == "guard page"; });
    if (!reported) continue;
    ++pairs;
    EXPECT_EQ(second.status, gate::CallStatus::crashed) << "positions[0] " << p0;
  }
  EXPECT_GT(pairs, 0);
}

// The mapping watch (gate/sandbox.hpp): with the seccomp filter in force, the gate reads the guard pages from
// outside only after a call in which the kernel made a system call that changes protection within the arena;
// the kernel's own mapping calls elsewhere are made exactly as asked (their results and errno unchanged); it
// cannot take the SIGSYS handler; a SIGSYS it raises itself still ends it.
TEST(KernelHost, TheMappingWatchReadsGuardPagesOnlyAfterACallThatTouchedTheArena) {
  const RopeCase c = small_case();
  const gate::HostOptions opt{};
  {  // mapping calls outside the arena, as an allocator makes them: results as without the watch
    const rc_rope_apply_fn fn = [](const rc_rope_args* a) {
      const size_t pg = size_t(sysconf(_SC_PAGESIZE));
      void* p = mmap(nullptr, 4 * pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (p == MAP_FAILED) return 11;
      static_cast<unsigned char*>(p)[0] = 1;
      auto* r = static_cast<unsigned char*>(mremap(p, 4 * pg, 8 * pg, MREMAP_MAYMOVE));
      if (r == MAP_FAILED || r[0] != 1) return 12;
      if (mprotect(r, pg, PROT_READ) != 0) return 13;
      errno = 0;
      if (mprotect(r + 1, pg, PROT_READ) != -1 || errno != EINVAL) return 14;
      if (mmap(r + 2 * pg, pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) != r + 2 * pg)
        return 15;
      if (munmap(r, 8 * pg) != 0) return 16;
      struct sigaction sa {};
      sa.sa_handler = SIG_IGN;
      if (sigaction(SIGSYS, nullptr, &sa) != 0) return 18;  // (asking is fine)
      errno = 0;
      if (sigaction(SIGSYS, &sa, nullptr) == 0) return 17;  // allowed: no watch (17 tells the test)
      if (errno != EPERM) return 19;                         // the watch's handler stays
      return ropecheck_scalar_rope(a);
    };
    gate::KernelHost host(gate::KernelSource{"", fn}, opt);
    host.set_abi(AbiVersions{});
    host.start();
    // In force with the seccomp filter, on x86-64, outside ASan (whose runtime maps as it likes).
    bool expected = false;
#if defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__)
    expected = true;
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
    expected = false;
#endif
#endif
#endif
    EXPECT_EQ(host.mapping_watch(), expected) << host.sandbox_summary();
    for (int k = 0; k < 6; ++k) {
      const gate::CallResult r = host.call_at(c, k % 2 == 1, 10, 1);
      if (host.mapping_watch()) {
        ASSERT_EQ(r.status, gate::CallStatus::ok) << gate::describe(r);
      } else {  // every mapping call came back as without a watch, and SIGSYS's handler was the kernel's to set
        ASSERT_EQ(r.status, gate::CallStatus::error_code) << gate::describe(r);
        ASSERT_EQ(r.rc, 17) << gate::describe(r);
      }
      EXPECT_TRUE(r.memory.empty());
    }
    // With the watch, only the first call's guard pages were read (what loading the kernel did, the watch not yet
    // in force) and nothing touched the arena later; without it, every call's were.
    EXPECT_EQ(host.guard_reads(), host.mapping_watch() ? 1u : 6u);
  }
  {  // a call that re-protects a guard page (no change, but a call on the arena): read after that call (and the first)
    static int calls = 0;
    calls = 0;
    const rc_rope_apply_fn fn = [](const rc_rope_args* a) {
      if (calls++ == 2) {
        const uintptr_t pg = uintptr_t(sysconf(_SC_PAGESIZE));
        mprotect(reinterpret_cast<void*>(uintptr_t(a) / pg * pg - pg), pg, PROT_NONE);  // the args' guard page
      }
      return ropecheck_scalar_rope(a);
    };
    gate::KernelHost host(gate::KernelSource{"", fn}, opt);
    host.set_abi(AbiVersions{});
    for (int k = 0; k < 5; ++k) {
      const gate::CallResult r = host.call_at(c, false, 10, 1);
      ASSERT_EQ(r.status, gate::CallStatus::ok) << gate::describe(r);
      EXPECT_TRUE(r.memory.empty()) << k;  // still PROT_NONE: nothing to report
      EXPECT_EQ(host.guard_reads(), !host.mapping_watch() ? uint64_t(k + 1) : k >= 2 ? 2u : 1u) << k;
    }
  }
  {  // a SIGSYS the kernel raises ends it, as without the watch
    const rc_rope_apply_fn fn = [](const rc_rope_args*) {
      raise(SIGSYS);
      return RC_OK;
    };
    gate::KernelHost host(gate::KernelSource{"", fn}, opt);
    host.set_abi(AbiVersions{});
    const gate::CallResult r = host.call_at(c, false, 10, 1);
    EXPECT_EQ(r.status, gate::CallStatus::crashed);
    EXPECT_EQ(r.signal, SIGSYS) << gate::describe(r);
  }
  {  // without the filter, every call's guard pages are read
    gate::HostOptions off;
    off.seccomp = false;
    gate::KernelHost host(gate::KernelSource{"", &ropecheck_scalar_rope}, off);
    host.set_abi(AbiVersions{});
    for (int k = 0; k < 3; ++k) ASSERT_EQ(host.call_at(c, false, 10, 1).status, gate::CallStatus::ok);
    EXPECT_EQ(host.guard_reads(), 3u);
  }
}

TEST(KernelHost, WritesToArgumentsAndDeclinedCallsThatWriteAreFindings) {
  const RopeCase c = small_case();
  struct Kase {
    rc_rope_apply_fn fn;
    const char* fault;
    const char* text;
  };
  const Kase kases[] = {
      {[](const rc_rope_args* a) {
         const_cast<int64_t*>(a->positions)[1] += 1;
         return RC_UNSUPPORTED;
       },
       "argument modified", "positions array"},
      {[](const rc_rope_args* a) {
         const_cast<rc_rope_args*>(a)->base = 2;
         return RC_UNSUPPORTED;
       },
       "argument modified", "base changed"},
      {[](const rc_rope_args* a) {
         std::memset(a->out, 0, 2);
         return RC_UNSUPPORTED;
       },
       "declined after writing", "after writing 1 output element"},
      {[](const rc_rope_args* a) {
         static_cast<unsigned char*>(a->out)[-3] = 0;
         return RC_UNSUPPORTED;
       },
       "out-of-bounds write", "before the output buffer"},
  };
  int judged = 0;
  for (const Kase& k : kases) {
    const gate::CallResult r = gate::call_isolated(k.fn, c, false, 10);
    if (r.status == gate::CallStatus::crashed) continue;  // the write hit the guard page itself
    ++judged;
    ASSERT_EQ(r.status, gate::CallStatus::declined) << gate::describe(r);
    const gate::CaseVerdict v = gate::judge_call(c, false, AngleModel::exact, Criteria::flat_bound(8), r);
    EXPECT_TRUE(v.accepted) << k.text;  // a declined call that wrote counts, and fails
    EXPECT_FALSE(v.pass) << k.text;
    EXPECT_EQ(v.fault, k.fault) << v.message;
    EXPECT_NE(v.message.find(k.text), std::string::npos) << v.message;
  }
  EXPECT_GE(judged, 3);
  // An inv_freq table is checked as well.
  RopeCase t = small_case();
  t.inv_freq.assign(t.rotary_dim / 2, 0.5);
  const gate::CallResult r = gate::call_isolated(
      [](const rc_rope_args* a) {
        const_cast<double*>(a->inv_freq)[0] = 1;
        return RC_UNSUPPORTED;
      },
      t, false, 10);
  const gate::CaseVerdict v = gate::judge_call(t, false, AngleModel::exact, Criteria::flat_bound(8), r);
  EXPECT_FALSE(v.pass);
  EXPECT_NE(v.message.find("inv_freq table"), std::string::npos) << v.message;
}

TEST(KernelHost, ACallThatChangesTheFpEnvironmentIsAFindingAndTheNextStartsClean) {
  gate::KernelHost host(gate::KernelSource{"",
                                           [](const rc_rope_args* a) {
                                             if (fegetround() != FE_TONEAREST) return 7;  // not restored
                                             fesetround(FE_UPWARD);
                                             std::memcpy(a->out, a->in, 4 * a->n_tokens * a->n_heads * a->head_dim);
                                             return RC_OK;
                                           }},
                        gate::HostOptions{});
  const RopeCase c = small_case();
  for (int k = 0; k < 2; ++k) {
    const gate::CallResult r = host.call(c, false, 10);
    ASSERT_EQ(r.status, gate::CallStatus::ok) << gate::describe(r);
    EXPECT_NE(r.fp_change.find("rounding"), std::string::npos) << r.fp_change;
    const gate::CaseVerdict v = gate::judge_call(c, false, AngleModel::exact, Criteria::flat_bound(1e9), r);
    EXPECT_EQ(v.fault, "fp environment") << v.message;
  }
}

TEST(KernelHost, LoadErrorsNameWhatHappened) {
  auto load_error = [](const std::string& lib) {
    gate::KernelHost host(gate::KernelSource{lib, nullptr}, gate::HostOptions{});
    try {
      host.start();
    } catch (const gate::LoadError& e) {
      return std::string(e.what());
    }
    return std::string("loaded");
  };
  EXPECT_NE(load_error("/nonexistent/libnothing.so").find("no such file"), std::string::npos);
  if (fs::exists("/lib/x86_64-linux-gnu/libm.so.6")) {
    EXPECT_NE(load_error("/lib/x86_64-linux-gnu/libm.so.6").find("rc_rope_apply"), std::string::npos);
  }
  EXPECT_EQ(load_error(mutant("ok_double")), "loaded");
  // A relative path is the caller's (the host works in a private directory).
  EXPECT_EQ(load_error(fs::relative(mutant("ok_double")).string()), "loaded") << fs::relative(mutant("ok_double"));
}

TEST(Isolation, PoisonCatchesUnwrittenOutput) {
  // The built-in scalar kernel is fine; a kernel that writes nothing is not.
  const RopeCase c = small_case(Dtype::f32, Layout::interleaved, 8, 8);
  gate::CallResult r = gate::call_isolated(find_implementation("scalar")->fn, c, false, 10);
  ASSERT_EQ(r.status, gate::CallStatus::ok);
  EXPECT_EQ(r.unwritten, 0u);
  r = gate::call_isolated([](const rc_rope_args*) { return RC_OK; }, c, false, 10);
  EXPECT_EQ(r.unwritten, c.n_elements());
  const gate::CaseVerdict v = gate::judge_call(c, false, AngleModel::exact, Criteria::flat_bound(8), r);
  EXPECT_FALSE(v.pass);
  EXPECT_NE(v.message.find("never written"), std::string::npos) << v.message;
}

// The budget counts a call's blocked time (docs/gate.md, "The budget"): a kernel that sleeps is charged its
// sleep, one that computes is charged its CPU time only (its call's blocked time stays near 0 however long
// the call waits for a CPU on a busy machine).
TEST(KernelHost, BlockedTimeIsTheCallsTimeOffTheCpu) {
  const RopeCase c = small_case(Dtype::f32, Layout::interleaved, 8, 8);
  auto sleepy = [](const rc_rope_args* a) {
    timespec t{0, 200'000'000};
    while (nanosleep(&t, &t) != 0 && errno == EINTR) {
    }
    return find_implementation("scalar")->fn(a);
  };
  auto spinning = [](const rc_rope_args* a) {
    timespec t0{}, t{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
    do clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    while ((t.tv_sec - t0.tv_sec) * 1e9 + double(t.tv_nsec - t0.tv_nsec) < 50e6);  // 50 ms of CPU
    return find_implementation("scalar")->fn(a);
  };
  gate::KernelHost slow(gate::KernelSource{"", +sleepy}, gate::HostOptions{});
  gate::KernelHost busy(gate::KernelSource{"", +spinning}, gate::HostOptions{});
  gate::KernelHost fast(gate::KernelSource{"", find_implementation("scalar")->fn}, gate::HostOptions{});
  double slept = 0, spun = 0, spun_wall = 0, quick = 0, quick_wall = 0;
  for (int k = 0; k < 3; ++k) {
    const gate::CallResult a = slow.call(c, false, 10), b = busy.call(c, false, 10);
    ASSERT_EQ(a.status, gate::CallStatus::ok);
    ASSERT_EQ(b.status, gate::CallStatus::ok);
    slept += a.blocked_seconds;
    spun += b.blocked_seconds;
    spun_wall += b.seconds;
  }
  for (int k = 0; k < 300; ++k) {
    const gate::CallResult r = fast.call(c, false, 10);
    quick += r.blocked_seconds;
    quick_wall += r.seconds;
  }
  EXPECT_GE(slept, 3 * 0.2 * 0.9);
  EXPECT_LT(spun, 0.25 * spun_wall + 0.02) << "of " << spun_wall << " s";
  EXPECT_LT(quick, 0.25 * quick_wall + 0.02) << "of " << quick_wall << " s";
  EXPECT_GT(busy.live_cpu_seconds(), 3 * 0.05);
  EXPECT_EQ(gate::KernelHost(gate::KernelSource{"", find_implementation("scalar")->fn}, {}).live_cpu_seconds(), 0.0);
}

TEST(CaseJson, RoundTripsExactlyAndRejectsMalformed) {
  gate::CaseRecord r;
  r.c = small_case(Dtype::bf16, Layout::half_split, 20, 8);
  r.c.inv_freq = {1.0, 0.1, 1.0 / 3.0, 1e-7};
  r.c.position_scale = 0.1;
  r.in_place = true;
  r.bound = 1.4142135623730951;
  r.check = "x";
  const gate::CaseRecord s = gate::record_from_json(gate::record_to_json(r));
  EXPECT_EQ(s.c.input, r.c.input);
  EXPECT_EQ(s.c.positions, r.c.positions);
  EXPECT_EQ(s.c.inv_freq, r.c.inv_freq);
  EXPECT_EQ(s.c.position_scale, r.c.position_scale);
  EXPECT_EQ(s.bound, r.bound);
  EXPECT_TRUE(s.in_place);
  auto j = gate::record_to_json(r);
  j["input_bits"].erase(0);
  EXPECT_THROW(gate::record_from_json(j), std::runtime_error);
  j = gate::record_to_json(r);
  j["case"]["rotary_dim"] = 7;
  EXPECT_THROW(gate::record_from_json(j), std::runtime_error);
  j = gate::record_to_json(r);
  j["case"]["positions"][0] = -1;  // ABI v2 allows negative positions: the case is a v2 call
  EXPECT_FALSE(gate::record_from_json(j).c.is_v1());
  j = gate::record_to_json(r);
  j["case"]["n_pos_axes"] = 5;
  EXPECT_THROW(gate::record_from_json(j), std::runtime_error);
  j = gate::record_to_json(r);
  j["case"]["attention_factor"] = "-0x1p+0";
  EXPECT_THROW(gate::record_from_json(j), std::runtime_error);
  j = gate::record_to_json(r);
  j["case"]["dtype"] = 3;
  EXPECT_THROW(gate::record_from_json(j), std::runtime_error);
}

// What write_record writes (record_text: input_bits put in without a JSON value per element) is the record's
// JSON as dump(1) writes it, byte for byte: each dtype, no element, a message quoting the key, v3 and tensor cases.
TEST(CaseJson, RecordTextIsTheRecordsJson) {
  std::vector<gate::CaseRecord> records;
  for (Dtype d : {Dtype::f32, Dtype::f16, Dtype::bf16}) {
    gate::CaseRecord r;
    r.c = small_case(d, Layout::half_split, 20, 8);
    r.bound = 1.5;
    r.check = "accuracy";
    r.failure = "quoted:\n \"input_bits\": []\n";  // the key's text in a string: escaped there
    records.push_back(r);
  }
  gate::CaseRecord none;
  none.c = small_case();
  none.c.positions.clear();
  none.c.input.clear();
  ASSERT_EQ(none.c.n_elements(), 0u);
  records.push_back(none);
  gate::CaseRecord prop = records[0];
  prop.property = "accuracy";
  prop.property_seed = 3;
  prop.property_cases = 2;
  prop.property_max_position = 1 << 24;
  records.push_back(prop);
  std::mt19937_64 rng(7);
  for (int n = 0; n < 6; ++n) {
    gate::CaseRecord r;
    r.c = n % 2 ? ropecheck::testing::random_v3_case(rng, n == 3) : ropecheck::testing::random_tensor_case(rng, n == 2);
    r.bound = 2;
    records.push_back(r);
  }
  for (size_t k = 0; k < records.size(); ++k)
    EXPECT_EQ(gate::record_text(records[k]), gate::record_to_json(records[k]).dump(1)) << k;
}

// A property's failing execution may come after declined ones: its index lies below cases x (1 + the driver's
// discard ratio), not below cases. Files written before the ratio was recorded (no max_discard_ratio) read with
// the ratio their driver had, 10, and replay the same execution.
TEST(CaseJson, PropertyExecutionIndexMayPassTheCaseCount) {
  gate::CaseRecord r;
  r.c = small_case();
  r.bound = 2;
  r.property = "accuracy";
  r.property_seed = 1;
  r.property_cases = 3;
  r.property_case = 19;  // executions 0..18 included declined calls
  r.property_max_position = 1 << 24;
  const gate::CaseRecord s = gate::record_from_json(gate::record_to_json(r));
  EXPECT_EQ(s.property_case, 19u);
  EXPECT_EQ(s.property_cases, 3u);
  EXPECT_EQ(s.property_max_discard_ratio, 10u);
  auto j = gate::record_to_json(r);
  EXPECT_EQ(j["property"]["max_discard_ratio"], 10);
  j["property"].erase("max_discard_ratio");  // as earlier releases wrote it
  EXPECT_EQ(gate::record_from_json(j).property_case, 19u);
  j["property"]["case"] = 32;  // the last execution of 3 x 11
  EXPECT_EQ(gate::record_from_json(j).property_case, 32u);
  j["property"]["case"] = 33;  // past every execution the driver makes
  EXPECT_THROW(gate::record_from_json(j), std::runtime_error);
  j = gate::record_to_json(r);
  j["property"]["max_discard_ratio"] = 1;
  EXPECT_THROW(gate::record_from_json(j), std::runtime_error);  // 19 >= 3 x 2
  j["property"]["case"] = 5;
  EXPECT_EQ(gate::record_from_json(j).property_case, 5u);
  j["property"]["cases"] = 0;
  EXPECT_THROW(gate::record_from_json(j), std::runtime_error);
}

namespace {

// Bit-exact compares: -0 and NaN payloads are told apart (== would not), every field of the case compared.
bool same_bits(double a, double b) { return std::bit_cast<uint64_t>(a) == std::bit_cast<uint64_t>(b); }
bool same_bits(const std::vector<double>& a, const std::vector<double>& b) {
  return a.size() == b.size() &&
         std::equal(a.begin(), a.end(), b.begin(), [](double x, double y) { return same_bits(x, y); });
}

void expect_same_case(const RopeCase& a, const RopeCase& b, const std::string& what) {
  SCOPED_TRACE(what + ": " + a.summary());
  EXPECT_EQ(a.dtype, b.dtype);
  EXPECT_EQ(a.layout, b.layout);
  EXPECT_EQ(a.head_dim, b.head_dim);
  EXPECT_EQ(a.rotary_dim, b.rotary_dim);
  EXPECT_EQ(a.n_heads, b.n_heads);
  EXPECT_EQ(a.positions, b.positions);
  EXPECT_TRUE(same_bits(a.base, b.base));
  EXPECT_TRUE(same_bits(a.position_scale, b.position_scale));
  EXPECT_TRUE(same_bits(a.inv_freq, b.inv_freq));
  EXPECT_EQ(a.input, b.input);
  EXPECT_EQ(a.rotary_offset, b.rotary_offset);
  EXPECT_EQ(a.n_pos_axes, b.n_pos_axes);
  EXPECT_EQ(a.pair_axis, b.pair_axis);
  EXPECT_TRUE(same_bits(a.attention_factor, b.attention_factor));
  ASSERT_EQ(a.freq_rule.has_value(), b.freq_rule.has_value());
  if (a.freq_rule) {
    const FrequencyRule &x = *a.freq_rule, &y = *b.freq_rule;
    EXPECT_EQ(x.type, y.type);
    EXPECT_EQ(x.factor.has_value(), y.factor.has_value());
    if (x.factor && y.factor) {
      EXPECT_TRUE(same_bits(*x.factor, *y.factor));
    }
    EXPECT_EQ(x.max_position_embeddings, y.max_position_embeddings);
    EXPECT_EQ(x.original_max_position_embeddings, y.original_max_position_embeddings);
    EXPECT_TRUE(same_bits(x.short_factor, y.short_factor));
    EXPECT_TRUE(same_bits(x.long_factor, y.long_factor));
  }
  EXPECT_EQ(a.rule_seq_len, b.rule_seq_len);
  EXPECT_EQ(a.direction, b.direction);
  ASSERT_EQ(a.table.has_value(), b.table.has_value());
  if (a.table) {
    EXPECT_EQ(a.table->kind, b.table->kind);
    EXPECT_EQ(a.table->dtype, b.table->dtype);
    EXPECT_EQ(a.table->rows, b.table->rows);
    EXPECT_TRUE(same_bits(a.table->cos, b.table->cos));
    EXPECT_TRUE(same_bits(a.table->sin, b.table->sin));
  }
  ASSERT_EQ(a.tensor.has_value(), b.tensor.has_value());
  if (a.tensor) {
    const TensorCall &x = *a.tensor, &y = *b.tensor;
    EXPECT_EQ(x.rank, y.rank);
    EXPECT_EQ(x.batch, y.batch);
    EXPECT_EQ(x.k_heads, y.k_heads);
    EXPECT_EQ(x.k_input, y.k_input);
    EXPECT_EQ(x.pos, y.pos);
    EXPECT_EQ(x.axes_first, y.axes_first);
    EXPECT_EQ(x.seq_offsets, y.seq_offsets);
    EXPECT_EQ(x.cu_seqlens, y.cu_seqlens);
    EXPECT_EQ(x.index_int32, y.index_int32);
    for (int w = 0; w < 4; ++w)
      for (int p = 0; p < 3; ++p) EXPECT_EQ(x.pad[w][p], y.pad[w][p]) << "pad[" << w << "][" << p << "]";
  }
}

// A case through a replay file's JSON, as text (write_record / read_record without the file): the case read.
RopeCase through_record_text(const RopeCase& c) {
  gate::CaseRecord r;
  r.c = c;
  r.bound = 2;
  r.check = "v3";
  const std::string text = gate::record_to_json(r).dump(1);
  return gate::record_from_json(nlohmann::json::parse(text)).c;
}

// A value of d near v (v rounded to d through f32).
double in_dtype(Dtype d, double v) {
  unsigned char b[4];
  store_f32(d, b, 0, float(v));
  return load_f32(d, b, 0);
}

// An ABI v3 case with a table: af cos/sin (angles for an angle table) of `rows` positions, rounded to the
// table's dtype, with a -0 and the dtype's smallest subnormal among them (hex floats carry both exactly).
RopeCase table_case(TableKind kind, Dtype td) {
  RopeCase c = small_case(Dtype::f16, Layout::half_split, 10, 8);
  c.positions = {3, 0, 6, 2};
  c.input.assign(c.n_bytes(), 0);
  for (size_t k = 0; k < c.n_elements(); ++k) store_f32(c.dtype, c.input.data(), k, float(k % 7) - 3.5f);
  CosSinTable t;
  t.kind = kind;
  t.dtype = td;
  t.rows = 7;
  const uint32_t np = c.rotary_dim / 2;
  for (size_t r = 0; r < t.rows; ++r)
    for (uint32_t i = 0; i < np; ++i) {
      const double ang = double(r) * std::pow(10000.0, -2.0 * i / c.rotary_dim);
      if (t.is_angle()) {
        t.cos.push_back(in_dtype(td, ang));
      } else {
        t.cos.push_back(in_dtype(td, std::cos(ang)));
        t.sin.push_back(in_dtype(td, std::sin(ang)));
      }
    }
  const double tiny = td == Dtype::f32 ? 0x1p-149 : td == Dtype::f16 ? 0x1p-24 : 0x1p-133;
  t.cos[1] = -0.0;
  t.cos[2] = tiny;
  if (!t.is_angle()) t.sin[3] = -tiny;
  if (t.is_angle()) c.attention_factor = 1.25;  // (an angle table's factor is the case's)
  c.table = std::move(t);
  return c;
}

}  // namespace

// Every ABI v3 field of a case survives a replay file exactly: the direction, each table kind and dtype (values
// bit for bit), and the tensor form's rank, batch, k and its input, position form, sequences and strides.
TEST(CaseJson, AbiV3FieldsRoundTripExactly) {
  {
    RopeCase c = small_case(Dtype::bf16, Layout::half_split, 20, 8);
    c.direction = Direction::inverse;
    ASSERT_EQ(c.validate(), "");
    expect_same_case(c, through_record_text(c), "inverse");
  }
  for (TableKind kind : {TableKind::cos_sin_2, TableKind::cos_sin_cat, TableKind::cos_sin_full, TableKind::angle})
    for (Dtype td : kAllDtypes) {
      if (kind == TableKind::angle && td != Dtype::f32) continue;  // angles are f32
      RopeCase c = table_case(kind, td);
      c.direction = td == Dtype::f16 ? Direction::inverse : Direction::forward;
      ASSERT_EQ(c.validate(), "") << c.summary();
      expect_same_case(c, through_record_text(c), std::string(to_string(kind)) + "/" + std::string(to_string(td)));
      gate::CaseRecord rec;
      rec.c = c;
      EXPECT_EQ(gate::record_to_json(rec)["version"], 4);  // a reader of version 3 refuses it, never drops the table
      const auto j = gate::case_params_to_json(c);
      EXPECT_EQ(j["table"]["kind"], std::string(to_string(kind)));
      EXPECT_EQ(j["table"].contains("sin"), kind != TableKind::angle);
    }
  // Rank 3, k of its own heads, int32 positions, padded strides; k's input with a NaN payload and -0 (bits kept).
  {
    RopeCase c = small_case(Dtype::f32, Layout::interleaved, 12, 8);
    TensorCall tc;
    tc.rank = 3;
    tc.k_heads = 3;
    tc.pos = PositionForm::int32;
    tc.k_input.assign(c.n_tokens() * tc.k_heads * c.head_dim * 4, 0);
    for (size_t k = 0; k < c.n_tokens() * tc.k_heads * c.head_dim; ++k)
      store_f32(c.dtype, tc.k_input.data(), k, 0.25f * float(k));
    store_bits(c.dtype, tc.k_input.data(), 1, 0x7fc00123u);
    store_bits(c.dtype, tc.k_input.data(), 2, 0x80000000u);
    uint32_t v = 0;
    for (auto& p : tc.pad)
      for (uint32_t& x : p) x = (v++ * 5) % 4;
    c.tensor = std::move(tc);
    ASSERT_EQ(c.validate(), "");
    const RopeCase d = through_record_text(c);
    expect_same_case(c, d, "rank 3, k, int32, strided");
    EXPECT_EQ(load_bits(d.dtype, d.tensor->k_input.data(), 1), 0x7fc00123u);
  }
  // Rank 4 ({B, S} = {2, 3}), implicit positions from per-sequence offsets passed as int32, bf16 k.
  {
    RopeCase c = small_case(Dtype::bf16, Layout::half_split, 8, 8);
    c.positions = {10, 11, 12, 100, 101, 102};
    c.input.assign(c.n_bytes(), 0);
    for (size_t k = 0; k < c.n_elements(); ++k) store_f32(c.dtype, c.input.data(), k, float(k) - 40);
    TensorCall tc;
    tc.rank = 4;
    tc.batch = 2;
    tc.k_heads = 1;
    tc.pos = PositionForm::implicit;
    tc.seq_offsets = {10, 100};
    tc.index_int32 = true;
    tc.k_input.assign(c.n_tokens() * tc.k_heads * c.head_dim * 2, 0);
    for (size_t k = 0; k < c.n_tokens() * c.head_dim; ++k) store_bits(c.dtype, tc.k_input.data(), k, uint32_t(k * 977));
    tc.pad[2][1] = 1 << 16;  // the largest padding a file may hold
    c.tensor = std::move(tc);
    ASSERT_EQ(c.validate(), "");
    expect_same_case(c, through_record_text(c), "rank 4, implicit, seq_offsets");
  }
  // Rank 3 varlen (cu_seqlens, an empty sequence among them), int64 positions given axis-first, no k.
  {
    RopeCase c = small_case(Dtype::f16, Layout::interleaved, 6, 4);
    c.positions = {-7, int64_t(1) << 40, 0, 5, 5};
    c.input.assign(c.n_bytes(), 0);
    TensorCall tc;
    tc.rank = 3;
    tc.pos = PositionForm::int64;
    tc.axes_first = true;
    tc.cu_seqlens = {0, 2, 2, 5};
    c.tensor = std::move(tc);
    ASSERT_EQ(c.validate(), "");
    expect_same_case(c, through_record_text(c), "rank 3, cu_seqlens");
    EXPECT_EQ(gate::case_params_to_json(c)["tensor"]["k_input_bits"].size(), 0u);
  }
  // The random generator's v3 and tensor-form cases (tables, directions, every position form, special values);
  // few: a table has up to 9000 rows, ~150k values through the JSON text.
  std::mt19937_64 rng(20240603);
  for (int n = 0; n < 40; ++n) {
    const RopeCase c = n % 3 == 0 ? ropecheck::testing::random_v3_case(rng, n % 5 == 0)
                                  : ropecheck::testing::random_tensor_case(rng, n % 5 == 0);
    ASSERT_EQ(c.validate(), "") << n << " " << c.summary();
    expect_same_case(c, through_record_text(c), "random " + std::to_string(n));
    // A case set's manifest holds the same parameters (k's input among them): they read back to the same JSON.
    RopeCase p;
    gate::case_params_from_json(gate::case_params_to_json(c), p);
    EXPECT_EQ(gate::case_params_to_json(p), gate::case_params_to_json(c)) << n;
  }
}

// The released format: a v1 or v2 case writes no v3 key (old readers read today's files of such cases as before),
// and a v3 case writes only its non-neutral fields.
TEST(CaseJson, V1AndV2CasesWriteNoV3Field) {
  std::mt19937_64 rng(99);
  for (int n = 0; n < 100; ++n) {
    const RopeCase c = n == 0 ? small_case() : n % 2 ? ropecheck::testing::random_case(rng, false)
                                                     : ropecheck::testing::random_v2_case(rng, n % 4 == 0);
    ASSERT_FALSE(c.uses_v3());
    gate::CaseRecord r;
    r.c = c;
    r.bound = 2;
    const auto j = gate::record_to_json(r);
    for (const char* key : {"direction", "table", "tensor"}) EXPECT_FALSE(j["case"].contains(key)) << key << " " << n;
    EXPECT_FALSE(j.contains("k_input_bits"));
    EXPECT_EQ(j["version"], 3) << n;  // as released
  }
  // A v1 case's parameters, byte for byte as released.
  RopeCase c;
  c.head_dim = 4;
  c.rotary_dim = 2;
  c.positions = {5, 0};
  EXPECT_EQ(gate::case_params_to_json(c).dump(),
            R"({"base":"0x1.388p+13","base_decimal":10000.0,"dtype":"f32","head_dim":4,"inv_freq":[],)"
            R"("layout":"interleaved","n_heads":1,"n_tokens":2,"position_scale":"0x1p+0",)"
            R"("position_scale_decimal":1.0,"positions":[5,0],"rotary_dim":2})");
  // Only the fields that are not neutral: a table with the forward direction writes no "direction"; an explicit
  // "forward" reads as the neutral value and is not written back.
  RopeCase t = table_case(TableKind::cos_sin_2, Dtype::f32);
  auto j = gate::case_params_to_json(t);
  EXPECT_TRUE(j.contains("table"));
  EXPECT_FALSE(j.contains("direction"));
  EXPECT_FALSE(j.contains("tensor"));
  j["direction"] = "forward";
  RopeCase back;
  gate::case_params_from_json(j, back);
  EXPECT_EQ(back.direction, Direction::forward);
  EXPECT_FALSE(gate::case_params_to_json(back).contains("direction"));
}

// A malformed v3 field is refused with a message naming it, never a crash or a case that is not well formed.
TEST(CaseJson, MalformedAbiV3FieldsAreRefusedByName) {
  gate::CaseRecord r;
  r.c = table_case(TableKind::cos_sin_cat, Dtype::bf16);
  r.c.direction = Direction::inverse;
  TensorCall tc;
  tc.k_heads = 1;
  tc.k_input.assign(r.c.n_tokens() * r.c.head_dim * 2, 0);
  r.c.tensor = tc;
  r.bound = 2;
  ASSERT_EQ(r.c.validate(), "");
  ASSERT_NO_THROW(gate::record_from_json(gate::record_to_json(r)));
  // Each edit of the record's JSON, and a piece of the message it must give.
  using J = nlohmann::json;
  using Edit = std::function<void(J&)>;
  const std::vector<std::pair<Edit, std::string>> cases = {
      {[](auto& c) { c["direction"] = "backward"; }, "field 'direction'"},
      {[](auto& c) { c["direction"] = 1; }, "field 'direction'"},
      {[](auto& c) { c["table"] = 3; }, "field 'table' must be an object"},
      {[](auto& c) { c["table"]["kind"] = "cos-sin-3"; }, "field 'table.kind'"},
      {[](auto& c) { c["table"].erase("kind"); }, "missing field 'table.kind'"},
      {[](auto& c) { c["table"]["dtype"] = "f64"; }, "field 'table.dtype'"},
      {[](auto& c) { c["table"]["rows"] = -1; }, "field 'table.rows'"},
      {[](auto& c) { c["table"]["rows"] = uint64_t(1) << 23; }, "more than 2^24 values"},  // x 4 pairs
      {[](auto& c) { c["table"]["cos"].erase(0); }, "field 'table.cos' has 27 values, expected rows x rotary_dim/2"},
      {[](auto& c) { c["table"]["rows"] = 8; }, "field 'table.cos' has 28 values"},
      {[](auto& c) { c["table"].erase("sin"); }, "missing field 'table.sin'"},
      {[](auto& c) { c["table"]["sin"][0] = "one"; }, "field 'table.sin': not a number"},
      {[](auto& c) { c["table"]["kind"] = "angle"; }, "field 'table.sin': an angle table has angles only"},
      {[](auto& c) { c["table"]["cos"][0] = "0x1.001p+0"; },  // not a bf16
       "malformed case: table values must be finite values of bf16"},
      {[](auto& c) {
         c["table"]["rows"] = 3;  // 3 rows of 4 pairs: position 3 is past them
         for (int k = 0; k < 16; ++k) {
           c["table"]["cos"].erase(0);
           c["table"]["sin"].erase(0);
         }
       },
       "malformed case: position 3 is outside the table's rows"},
      {[](auto& c) { c["tensor"] = "rank 3"; }, "field 'tensor' must be an object"},
      {[](auto& c) { c["tensor"]["rank"] = 5; }, "field 'tensor.rank' must be 3 or 4 (got 5)"},
      {[](auto& c) { c["tensor"].erase("rank"); }, "missing field 'tensor.rank'"},
      {[](auto& c) { c["tensor"]["pos"] = "int16"; }, "field 'tensor.pos'"},
      {[](auto& c) { c["tensor"]["k_heads"] = 1 << 17; }, "field 'tensor.k_heads' is too large"},
      {[](auto& c) { c["tensor"]["batch"] = "2"; }, "field 'tensor.batch' must be a non-negative integer"},
      {[](auto& c) { c["tensor"]["axes_first"] = 1; }, "field 'tensor.axes_first' must be true or false"},
      {[](auto& c) { c["tensor"]["cu_seqlens"] = J::array({0, 1.5, 4}); },
       "field 'tensor.cu_seqlens' must hold integers"},
      {[](auto& c) { c["tensor"]["pad"] = J::array({J::array({0, 0, 0})}); }, "field 'tensor.pad' must be 4 arrays"},
      {[](auto& c) { c["tensor"]["pad"][3] = J::array({0, 0}); }, "field 'tensor.pad[3]'"},
      {[](auto& c) { c["tensor"]["pad"][1][2] = (int64_t(1) << 31) + 1; }, "field 'tensor.pad[1][2]' must be an integer 0..2^31"},
      {[](auto& c) { c["tensor"]["pad"][1][2] = -1; }, "field 'tensor.pad[1][2]' must be an integer 0..2^31"},
      {[](auto& c) { c["tensor"]["k_input_bits"].erase(0); }, "field 'tensor.k_input_bits' has"},
      {[](auto& c) { c["tensor"].erase("k_input_bits"); }, "missing field 'tensor.k_input_bits'"},
      {[](auto& c) { c["tensor"]["k_input_bits"][2] = 0x10000; }, "tensor.k_input_bits[2] is not a bit pattern of f16"},
      {[](auto& c) { c["tensor"]["k_heads"] = 2; }, "field 'tensor.k_input_bits' has 40 elements, the case's k"},
      // Each field well formed, the call not: validate() names what is wrong.
      {[](auto& c) {
         c["tensor"]["rank"] = 4;
         c["tensor"]["batch"] = 3;
       },
       "malformed case: rank 4: 4 tokens are not 3"},
      {[](auto& c) { c["tensor"]["cu_seqlens"] = J::array({0, 3}); }, "malformed case: cu_seqlens must rise from 0"},
      {[](auto& c) { c["tensor"]["seq_offsets"] = J::array({1}); },
       "malformed case: seq_offsets go with implicit positions only"},
      {[](auto& c) { c["tensor"]["pos"] = "implicit"; }, "malformed case: implicit positions: token 0 is at 3"},
  };
  for (const auto& [edit, message] : cases) {
    auto j = gate::record_to_json(r);
    edit(j["case"]);
    try {
      gate::record_from_json(j);
      ADD_FAILURE() << "accepted: " << j["case"].dump();
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what() << "\nexpected: " << message;
    }
  }
}

TEST(Tolerance, Parses) {
  std::map<Dtype, double> t;
  EXPECT_EQ(gate::parse_tolerance("f32=8,bf16=1.5", t), "");
  EXPECT_EQ(t[Dtype::f32], 8);
  EXPECT_EQ(t[Dtype::bf16], 1.5);
  EXPECT_EQ(t.count(Dtype::f16), 0u);
  t.clear();
  EXPECT_EQ(gate::parse_tolerance("3", t), "");
  EXPECT_EQ(t.size(), 3u);
  EXPECT_NE(gate::parse_tolerance("f64=3", t), "");
  EXPECT_NE(gate::parse_tolerance("f32=-1", t), "");
  EXPECT_NE(gate::parse_tolerance("x", t), "");
}

TEST(GateCli, UsageAndLoadErrorsExit2) {
  const std::string d = tmpdir("cli2");
  EXPECT_EQ(run_cli("gate", d + "/a.log"), 2);
  EXPECT_EQ(run_cli("gate --kernel /nonexistent.so", d + "/b.log"), 2);
  EXPECT_NE(slurp(d + "/b.log").find("no such file"), std::string::npos);
  EXPECT_EQ(run_cli("gate --impl no-such-impl", d + "/c.log"), 2);
  EXPECT_EQ(run_cli("gate --impl scalar --dtype f64", d + "/d.log"), 2);
  EXPECT_EQ(run_cli("gate --impl scalar --tolerance f32=x", d + "/e.log"), 2);
  EXPECT_EQ(run_cli("replay " + d + "/missing.json --impl scalar", d + "/f.log"), 2);
}

TEST(GateCli, FailingKernelGivesTableJunitAndAReplayThatReruns) {
  const std::string d = tmpdir("fail");
  const int rc = run_cli("gate --kernel " + mutant("mut_position_off_by_one") + " --cases 100 --budget-seconds 20 --quiet --dtype f32 " +
                             "--layout interleaved --report-dir " + d + "/report --junit " + d + "/junit.xml",
                         d + "/out.log");
  EXPECT_EQ(rc, 1);
  const std::string out = slurp(d + "/out.log");
  EXPECT_NE(out.find("| matrix f32 interleaved |"), std::string::npos) << out;
  EXPECT_NE(out.find("verdict: FAIL"), std::string::npos);
  const std::string xml = slurp(d + "/junit.xml");
  EXPECT_NE(xml.find("<testsuites>"), std::string::npos);
  EXPECT_NE(xml.find("<failure"), std::string::npos);
  const std::string replay = d + "/report/matrix-f32-interleaved.smallest.json";
  ASSERT_TRUE(fs::exists(replay)) << out;
  const gate::CaseRecord rec = gate::read_record(replay);
  EXPECT_EQ(rec.c.n_tokens(), 1u);  // shrunk to one token
  EXPECT_EQ(rec.c.n_heads, 1u);
  EXPECT_EQ(run_cli("replay " + replay + " --kernel " + mutant("mut_position_off_by_one"), d + "/r1.log"), 1);
  EXPECT_EQ(run_cli("replay " + replay + " --kernel " + mutant("ok_double"), d + "/r2.log"), 0);
  EXPECT_EQ(run_cli("replay " + replay + " --impl scalar", d + "/r3.log"), 0);
}

// The property rows run the suite's properties on a loaded kernel: a mispaired half-split kernel fails the
// layouts property (shrunk, diagnosed as the other layout), and its replay file reruns that very execution.
// Without --verbose the verdict is brief (issue 23: a passing default gate in at most 20 lines, stdout and
// stderr together): what ran and what it covered, the contract, the worst margin, the verdict and where the
// details are; every table behind --verbose, which prints the same verdict line. A failure: one line per
// failing row with its cause and one reproduce line, which reproduces the FAIL.
TEST(GateCli, ThePassingVerdictIsBriefAndVerboseHasEveryTable) {
  const std::string d = tmpdir("brief");
  // (std::system directly: run_cli makes a gate run verbose)
  const std::string common = " gate --impl scalar --cases 100 --property-cases 1 --quiet --report-dir " + d + "/r";
  ASSERT_EQ(WEXITSTATUS(std::system((std::string(ROPECHECK_CLI) + common + " > " + d + "/brief.log 2>&1").c_str())), 0);
  ASSERT_EQ(WEXITSTATUS(std::system((std::string(ROPECHECK_CLI) + common + " --verbose > " + d + "/full.log 2>&1").c_str())), 0);
  const std::string brief = slurp(d + "/brief.log"), full = slurp(d + "/full.log");
  const size_t lines = size_t(std::count(brief.begin(), brief.end(), '\n'));
  EXPECT_LE(lines, 20u) << brief;
  for (const char* want : {"ropecheck gate: kernel scalar (", "\ncoverage: ", "\ncontract: ", "\nworst margin: ",
                           "\nverdict: PASS", "\ndetails: --verbose, or " })
    EXPECT_NE(brief.find(want), std::string::npos) << want << "\n" << brief;
  for (const char* verbose_only : {"| check |", "error by position", "derived allowances", "\nnote: "}) {
    EXPECT_EQ(brief.find(verbose_only), std::string::npos) << verbose_only << "\n" << brief;
    EXPECT_NE(full.find(verbose_only), std::string::npos) << verbose_only << "\n" << full;
  }
  auto verdict = [](const std::string& log) { return log.substr(log.rfind("\nverdict: ")); };
  EXPECT_EQ(verdict(brief).substr(0, verdict(brief).find('\n', 1)), verdict(full).substr(0, verdict(full).find('\n', 1)));
  EXPECT_GT(size_t(std::count(full.begin(), full.end(), '\n')), 100u);
  // The bias notes of a contract that allows no cache name no cache's share (issue 23: "-73 u" and "-539 u" read
  // like findings); the note itself is there.
  EXPECT_NE(full.find("radial bias "), std::string::npos) << full;
  EXPECT_EQ(full.find("cache's share"), std::string::npos) << full;
}

TEST(GateCli, AFailingBriefVerdictIsALinePerFailingRowAndAReplayThatReruns) {
  const std::string d = tmpdir("brief-fail");
  const std::string kernel = mutant("mut_position_off_by_one");
  const std::string cmd = std::string(ROPECHECK_CLI) + " gate --kernel " + kernel +
                          " --cases 50 --property-cases 1 --quiet --dtype f32 --layout interleaved --report-dir " + d +
                          "/r > " + d + "/out.log 2>/dev/null";
  ASSERT_EQ(WEXITSTATUS(std::system(cmd.c_str())), 1);
  const std::string out = slurp(d + "/out.log");
  std::vector<std::string> failed, replays;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("FAILED ", 0) == 0) failed.push_back(line);
    if (line.rfind("replay (", 0) == 0) replays.push_back(line);
  }
  ASSERT_FALSE(failed.empty()) << out;
  for (const std::string& f : failed) {  // the cause, each row (a bias row says the bias it measured)
    if (f.rfind("FAILED bias ", 0) != 0) {
      EXPECT_NE(f.find("position m+1"), std::string::npos) << f;
    }
  }
  EXPECT_EQ(out.find("smallest failing case:"), std::string::npos) << out;  // the case in full: --verbose
  EXPECT_NE(out.find("\nverdict: FAIL (failed: position m+1"), std::string::npos) << out;
  // The bias row fails with it (an angle off moves the mean radial error) and says so on its line; the verdict
  // names the one cause that explains the rows, not "radial bias" beside it (issue 23, scope 4).
  const size_t at = out.find("\nverdict: ") + 1;
  const std::string verdict_line = out.substr(at, out.find('\n', at) - at);
  EXPECT_EQ(verdict_line.find("radial bias"), std::string::npos) << verdict_line;
  // Header, coverage, contract, abi, worst margin, the failing rows, the replay, host, verdict, details.
  EXPECT_LE(size_t(std::count(out.begin(), out.end(), '\n')), failed.size() + 10) << out;
  ASSERT_EQ(replays.size(), 1u) << out;
  const std::string replay = replays[0].substr(replays[0].find("): ") + 3);
  ASSERT_EQ(replay.rfind("ropecheck replay ", 0), 0u) << replays[0];
  EXPECT_EQ(run_cli(replay.substr(std::string("ropecheck ").size()), d + "/replay.log"), 1) << replay;
}

// A kernel that stores bf16 by truncation (vLLM's CPU kernel; mut_truncating_bf16): under the default contract
// its rows name truncating stores (each element's rounding direction) and suggest the clause that states it, and
// the verdict names it; under stores=truncate it passes (docs/error-model.md, "stores=truncate").
// --failing-cases N: replay files per row besides the smallest; 3 without the option (as before it existed).
TEST(GateCli, FailingCasesSetsHowManyReplayFilesARowWrites) {
  const std::string d = tmpdir("failing-cases");
  const std::string common = " --kernel " + mutant("mut_sign") + " --dtype f32 --layout interleaved --cases 20 "
                             "--property-cases 1 --shrink-tries 0 --quiet --report-dir ";
  auto count = [](const std::string& dir, const std::string& suffix) {
    size_t n = 0;
    for (const auto& e : fs::directory_iterator(dir)) {
      const std::string f = e.path().filename().string();
      n += f.rfind("random.", 0) == 0 && f.size() > suffix.size() && f.compare(f.size() - suffix.size(), suffix.size(), suffix) == 0;
    }
    return n;
  };
  ASSERT_EQ(run_cli("gate" + common + d + "/default", d + "/default.log"), 1);
  ASSERT_EQ(run_cli("gate --failing-cases 0" + common + d + "/zero", d + "/zero.log"), 1);
  ASSERT_EQ(run_cli("gate --failing-cases 1" + common + d + "/one", d + "/one.log"), 1);
  EXPECT_EQ(count(d + "/default", ".smallest.json"), 1u);
  EXPECT_EQ(count(d + "/default", ".json"), 4u);  // the smallest and 3 more
  EXPECT_EQ(count(d + "/zero", ".json"), 1u);
  EXPECT_EQ(count(d + "/one", ".json"), 2u);
  EXPECT_EQ(count(d + "/one", ".0.json"), 1u);
  EXPECT_EQ(run_cli("gate --failing-cases -1" + common + d + "/bad", d + "/bad.log"), 2);
}

TEST(GateCli, TruncatingStoresAreNamedAndPassUnderTheirClause) {
  const std::string d = tmpdir("truncating");
  const std::string k = mutant("mut_truncating_bf16");
  const std::string common = " --dtype bf16 --cases 40 --property-cases 1 --shrink-tries 0 --quiet --report-dir " + d;
  ASSERT_EQ(run_cli("gate --kernel " + k + common + "/a", d + "/default.log"), 1);
  const std::string def = slurp(d + "/default.log");
  EXPECT_NE(def.find("\nverdict: FAIL (failed: truncating stores)"), std::string::npos) << def;
  EXPECT_NE(def.find("is its neighbour toward zero"), std::string::npos) << def;
  EXPECT_NE(def.find("would pass with --contract stores=truncate"), std::string::npos) << def;
  ASSERT_EQ(run_cli("gate --kernel " + k + " --contract stores=truncate" + common + "/b", d + "/trunc.log"), 0)
      << slurp(d + "/trunc.log");
  EXPECT_NE(slurp(d + "/trunc.log").find("contract: angles=exact,cos-sin=f32,arith=f32,denormals=keep,identity=values,"
                                         "stores=truncate"),
            std::string::npos);
}

// A bf16 cos/sin table made by truncation (issue 23): the verdict names it; every failing row either shows it or says
// it shows it in part, with the verdict's cause id, and none suggests cos-sin=bf16, a contract the kernel fails.
TEST(GateCli, ATruncatingTableIsTheCauseOfEveryRowAndNoneSuggestsACacheClause) {
  const std::string d = tmpdir("truncated-table");
  const std::string common = " --cases 40 --property-cases 1 --shrink-tries 0 --failing-cases 0 --quiet --report-dir ";
  ASSERT_EQ(run_cli("gate --kernel " + mutant("mut_truncated_cache") + common + d + "/a --verdict-json " + d + "/v.json",
                    d + "/default.log"),
            1);
  const std::string log = slurp(d + "/default.log");
  EXPECT_NE(log.find("\nverdict: FAIL (failed: truncating cos/sin table)\n"), std::string::npos) << log;
  EXPECT_EQ(log.find("would pass with --contract cos-sin=bf16"), std::string::npos) << log;
  EXPECT_EQ(log.find("would pass with cos-sin=bf16"), std::string::npos) << log;
  const nlohmann::json v = nlohmann::json::parse(slurp(d + "/v.json"));
  EXPECT_EQ(v["cause_id"], "truncating-cos-sin-table");
  size_t failing = 0, in_part = 0;
  for (const auto& row : v["rows"]) {
    if (row["result"] != "fail") continue;
    ++failing;
    EXPECT_EQ(row["cause_id"], "truncating-cos-sin-table") << row.dump();
    in_part += row["diagnosis"].get<std::string>().find("this row's cases show it in part: ") != std::string::npos;
  }
  EXPECT_GE(failing, 10u) << log;
  EXPECT_GE(in_part, 1u) << log;  // (the bf16 rows, at least: a bf16 table's direction is not read at bf16 outputs)
}

TEST(GateCli, PropertyRowsShrinkDiagnoseAndReplay) {
  const std::string d = tmpdir("property-rows");
  const int rc = run_cli("gate --kernel " + mutant("mut_layout_pairing") + " --cases 20 --property-cases 10 "
                             "--budget-seconds 30 --quiet --dtype f32 --report-dir " + d + "/report",
                         d + "/out.log");
  EXPECT_EQ(rc, 1);
  const std::string out = slurp(d + "/out.log");
  // A row per property of the suite.
  for (const props::PropertyDef& p : props::property_set())
    EXPECT_NE(out.find(std::string("| ") + p.row + " |"), std::string::npos) << p.row << "\n" << out;
  const std::string replay = d + "/report/property--layouts.smallest.json";
  ASSERT_TRUE(fs::exists(replay)) << out;
  const gate::CaseRecord rec = gate::read_record(replay);
  EXPECT_EQ(rec.property, "layouts");
  EXPECT_EQ(rec.property_seed, 1u);
  EXPECT_EQ(rec.property_cases, 10u);
  EXPECT_NE(rec.diagnosis.find("other layout"), std::string::npos) << rec.diagnosis;
  EXPECT_NE(rec.failure.find("reproduce: property layouts, f32 interleaved, seed 1, case "), std::string::npos)
      << rec.failure;
  EXPECT_EQ(run_cli("replay " + replay + " --kernel " + mutant("mut_layout_pairing"), d + "/r1.log"), 1);
  EXPECT_NE(slurp(d + "/r1.log").find("layouts disagree"), std::string::npos) << slurp(d + "/r1.log");
  EXPECT_EQ(run_cli("replay " + replay + " --kernel " + mutant("ok_double"), d + "/r2.log"), 0) << slurp(d + "/r2.log");
  EXPECT_EQ(run_cli("replay " + replay + " --impl scalar", d + "/r3.log"), 0) << slurp(d + "/r3.log");
}

// A fault is shrunk once: a kernel that crashes on every call fails each property row on the same crash; the first
// row shrinks it, every later one keeps its failing execution as found and names the row that shrank it (each
// candidate of a crash is a host restart: shrinking it in every row took a default gate's whole budget).
TEST(GateCli, AFaultIsShrunkOnceAndLaterRowsSayWhere) {
  const std::string d = tmpdir("fault-shrunk-once");
  EXPECT_EQ(run_cli("gate --kernel " + mutant("mut_crash") + " --dtype f32 --layout interleaved --cases 10 "
                    "--property-cases 3 --budget-seconds 3600 --call-timeout 120 --quiet --report-dir " + d + "/report",
                    d + "/out.log"),
            1);
  const std::string out = slurp(d + "/out.log");
  EXPECT_NE(out.find("\nverdict: FAIL (failed: crash)\n"), std::string::npos) << out;
  size_t shrunk = 0, kept = 0, notes = 0;
  for (const auto& e : fs::directory_iterator(d + "/report")) {
    const std::string name = e.path().filename().string();
    if (name.rfind("property-", 0) != 0 || name.find(".smallest.json") == std::string::npos) continue;
    const gate::CaseRecord rec = gate::read_record(e.path().string());
    ASSERT_NE(rec.failure.find("the kernel crashed with signal 11"), std::string::npos) << name << ": " << rec.failure;
    (rec.property_shrink.empty() ? kept : shrunk) += 1;
  }
  for (size_t at = 0; (at = out.find(": f32 interleaved: not shrunk: the same fault was shrunk in 'property: position "
                                     "0'\n", at)) != std::string::npos;
       ++at)
    ++notes;
  EXPECT_EQ(shrunk, 1u) << out;  // property: position 0, the first row
  EXPECT_GE(kept, 5u) << out;
  EXPECT_EQ(notes, kept) << out;
}

// After a kernel's second hang no further call is made: the rows left say so, and the verdict names the hang
// alone -- not the budget, which nothing reached (it was: "the budget (3600 s) cut: property: ... not made").
TEST(GateCli, AKernelThatHungTwiceIsNotSaidToBeCutByTheBudget) {
  const std::string d = tmpdir("hang-twice");
  EXPECT_EQ(run_cli("gate --kernel " + mutant("mut_hang") + " --cases 10 --property-cases 1 --budget-seconds 3600 "
                    "--call-timeout 3 --quiet --report-dir " + d + "/report",
                    d + "/out.log"),
            1);
  const std::string out = slurp(d + "/out.log");
  EXPECT_NE(out.find("\nverdict: FAIL (failed: hang)\n"), std::string::npos) << out;
  EXPECT_EQ(out.find("budget"), std::string::npos) << out;
  EXPECT_NE(out.find("not run: the kernel hung twice"), std::string::npos) << out;
}

TEST(GateCli, BuiltinScalarPasses) {
  const std::string d = tmpdir("scalar");
  EXPECT_EQ(run_cli("gate --impl scalar --cases 100 --budget-seconds 20 --quiet --report-dir " + d, d + "/out.log"), 0)
      << slurp(d + "/out.log");
}

namespace {

// The contracts a correct kernel declares in its source's top comment: lines
// "Contract: SPEC" (the whole kernel) or "Contract (DTYPE data): SPEC" (the gate
// run on that dtype only). {dtype or "", SPEC}; none declared: {"", "default"}.
std::vector<std::pair<std::string, std::string>> declared_contracts(const std::string& stem) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const char* ext : {".c", ".cpp"}) {
    std::ifstream f(std::string(ROPECHECK_SOURCE_DIR) + "/tests/kernels/mutants/" + stem + ext);
    if (!f) continue;
    static const std::regex re(R"(^\s*\*?\s*Contract(?: \((f32|f16|bf16) data\))?: (\S+)\s*$)");
    std::string line;
    std::smatch mt;
    while (std::getline(f, line))
      if (std::regex_match(line, mt, re)) out.emplace_back(mt[1].str(), mt[2].str());
  }
  if (out.empty()) out.emplace_back("", "default");
  return out;
}

}  // namespace

// The mutation suite: each planted bug must make the gate exit 1 under the default
// contract, each correct kernel exit 0 under the contract it declares (once per
// dtype when it declares one per dtype). At most two gates run at once.
TEST(MutationSuite, EveryPlantedBugIsCaughtAndCorrectKernelsPass) {
  std::vector<std::string> stems;
  for (const auto& e : fs::directory_iterator(ROPECHECK_MUTANT_DIR))
    if (e.path().extension() == ".so") stems.push_back(e.path().stem().string());
  std::sort(stems.begin(), stems.end());
  const size_t n_mut = std::count_if(stems.begin(), stems.end(), [](auto& s) { return s.rfind("mut_", 0) == 0; });
  const size_t n_ok = std::count_if(stems.begin(), stems.end(), [](auto& s) { return s.rfind("ok_", 0) == 0; });
  ASSERT_GE(n_mut, 15u);
  ASSERT_GE(n_ok, 2u);
  struct Run {
    std::string stem, name, args;
    bool is_mut;
  };
  std::vector<Run> runs;
  for (const auto& s : stems) {
    if (s.rfind("mut_", 0) == 0) {
      runs.push_back({s, s, "", true});
      continue;
    }
    for (const auto& [dtype, spec] : declared_contracts(s)) {
      std::string name = s + (dtype.empty() ? "" : "-" + dtype);
      runs.push_back({s, name, "--contract " + spec + (dtype.empty() ? "" : " --dtype " + dtype), false});
    }
  }
  const std::string d = tmpdir("mutants");
  std::map<pid_t, std::string> running;
  std::map<std::string, int> status;
  size_t next = 0;
  auto reap = [&] {
    int st = 0;
    const pid_t p = waitpid(-1, &st, 0);
    ASSERT_GT(p, 0);
    status[running[p]] = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    running.erase(p);
  };
  while (next < runs.size() || !running.empty()) {
    if (next < runs.size() && running.size() < 2) {
      const Run& r = runs[next++];
      // (--failing-cases 0: the verdict and the printed output are what is read; the smallest case's replay file
      // is still written. Measured 108 -> 98 CPU s for the whole test.)
      const std::string cmd = std::string(ROPECHECK_CLI) + " gate --verbose --kernel " + mutant(r.stem) + " " + r.args +
                              " --cases 100 --failing-cases 0 --budget-seconds 20 --call-timeout " +
                              test::mutant_call_timeout(r.stem) +
                              " --quiet --report-dir " + d + "/" + r.name + " > " +
                              d + "/" + r.name + ".log 2>&1";
      const char* argv[] = {"/bin/sh", "-c", cmd.c_str(), nullptr};
      pid_t pid;
      ASSERT_EQ(posix_spawn(&pid, "/bin/sh", nullptr, nullptr, const_cast<char* const*>(argv), environ), 0);
      running[pid] = r.name;
    } else {
      reap();
    }
  }
  size_t caught = 0, passed = 0;
  for (const auto& r : runs) {
    const int want = r.is_mut ? 1 : 0;
    EXPECT_EQ(status[r.name], want) << r.name << " (" << (r.args.empty() ? "default contract" : r.args) << "):\n"
                                    << slurp(d + "/" + r.name + ".log");
    if (r.is_mut && status[r.name] == 1) ++caught;
    if (!r.is_mut && status[r.name] == 0) ++passed;
  }
  std::printf("mutation suite: %zu of %zu planted bugs caught; %zu of %zu correct-kernel runs passed (%zu kernels)\n",
              caught, n_mut, passed, runs.size() - n_mut, n_ok);
}

namespace {

using test::write_outputs;

}  // namespace

// The rotated slice's rule (core/rope_case.hpp RotarySlice): a fraction of the head as Hugging Face's int(), a fixed
// rotary_dim, an offset; apply_rotary_slice raises the head to one the rule gives an even slice of and keeps the
// generator's values and its inv_freq table's pairs.
TEST(RotarySliceRule, GivesEachHeadItsSlice) {
  const RotarySlice quarter{0.25, 0, 0, 0}, fixed{0, 64, 0, 0}, offset{0, 64, 128, 192};
  EXPECT_EQ(quarter.rotary_dim_of(64), 16u);
  EXPECT_EQ(quarter.rotary_dim_of(36), 0u);  // int(9.0) is odd
  EXPECT_EQ(quarter.head_dim_from(36), 40u);
  EXPECT_EQ(fixed.head_dim_from(8), 64u);
  EXPECT_EQ(fixed.rotary_dim_of(256), 64u);
  EXPECT_EQ(offset.rotary_dim_of(191), 0u);
  EXPECT_EQ(offset.rotary_dim_of(192), 64u);
  EXPECT_EQ(quarter.describe(), "rotary_dim = int(head_dim * 0.25)");
  EXPECT_EQ(fixed.describe(), "rotary_dim 64 of any head_dim");
  EXPECT_EQ(offset.describe(), "rotary_dim 64 at offset 128 of head_dim 192");
  RopeCase c;
  c.dtype = Dtype::f32;
  c.head_dim = c.rotary_dim = 36;
  c.n_heads = 2;
  c.positions = {3, 5};
  c.inv_freq.assign(18, 0);
  for (size_t i = 0; i < 18; ++i) c.inv_freq[i] = double(i);
  c.input.assign(c.n_bytes(), 0);
  for (size_t k = 0; k < c.n_elements(); ++k) store_f32(c.dtype, c.input.data(), k, float(k));
  apply_rotary_slice(quarter, c);
  EXPECT_EQ(c.head_dim, 40u);
  EXPECT_EQ(c.rotary_dim, 10u);
  ASSERT_EQ(c.inv_freq.size(), 5u);
  EXPECT_EQ(c.inv_freq[1], 3.0);  // pair i takes entry i * 18 / 5
  ASSERT_EQ(c.input.size(), c.n_bytes());
  EXPECT_EQ(load_f32(c.dtype, c.input.data(), 40 + 37), float(36 + 1));  // head 1, element 37: old element 1
  EXPECT_TRUE(c.validate().empty()) << c.validate();
}

TEST(Npy, RoundTripsAndRejectsGarbage) {
  gate::NpyArray a;
  a.descr = "<u2";
  a.shape = {2, 3, 4};
  a.data.assign(48, 7);
  const gate::NpyArray b = gate::npy_decode(gate::npy_encode(a), "x");
  EXPECT_EQ(b.descr, a.descr);
  EXPECT_EQ(b.shape, a.shape);
  EXPECT_EQ(b.data, a.data);
  std::string s = gate::npy_encode(a);
  EXPECT_THROW(gate::npy_decode(s.substr(0, s.size() - 1), "x"), std::runtime_error);  // truncated
  EXPECT_THROW(gate::npy_decode("garbage", "x"), std::runtime_error);
  std::string t = s;
  t.replace(t.find("<u2"), 3, "<f8");
  EXPECT_THROW(gate::npy_decode(t, "x"), std::runtime_error);
  t = s;
  t.replace(t.find("False"), 5, "True ");
  EXPECT_THROW(gate::npy_decode(t, "x"), std::runtime_error);
  t = s;
  t[8] = char(0xff);  // header length beyond the file
  t[9] = char(0xff);
  EXPECT_THROW(gate::npy_decode(t, "x"), std::runtime_error);
}

// `cases check` speaks as cases check, and quotes its allowances at the export's largest position (it said
// "ropecheck gate: kernel external outputs ..." and 16777216 rad whatever --max-position was: issue 23).
TEST(CaseSet, CheckSaysWhatRanAndQuotesTheExportsPositions) {
  const std::string d = tmpdir("caseset-header");
  ASSERT_EQ(run_cli("cases export --dir " + d + " --random-cases 4 --property-cases 1 --max-position 4096",
                    d + "/../header-export.log"),
            0);
  write_outputs(d, *find_implementation("scalar"));
  ASSERT_EQ(run_cli("cases check --dir " + d, d + "/../header-check.log"), 0);
  const std::string out = slurp(d + "/../header-check.log");
  EXPECT_EQ(out.rfind("ropecheck cases check: external outputs in " + d, 0), 0u) << out;
  EXPECT_NE(out.find(" at angle 4096 rad radial"), std::string::npos) << out;
  EXPECT_EQ(out.find("16777216"), std::string::npos) << out;
}

TEST(CaseSet, ExportWriteCheckAndCorrupt) {
  const std::string d = tmpdir("caseset");
  ASSERT_EQ(run_cli("cases export --dir " + d + " --random-cases 8", d + "/../export.log"), 0);
  ASSERT_TRUE(fs::exists(d + "/manifest.json"));
  // Outputs missing: a clear error, exit 2.
  EXPECT_EQ(run_cli("cases check --dir " + d, d + "/../c0.log"), 2);
  EXPECT_NE(slurp(d + "/../c0.log").find("missing"), std::string::npos);
  // A correct kernel's outputs pass.
  write_outputs(d, *find_implementation("scalar"));
  EXPECT_EQ(run_cli("cases check --dir " + d + " --junit " + d + "/../j.xml", d + "/../c1.log"), 0)
      << slurp(d + "/../c1.log");
  EXPECT_NE(slurp(d + "/../j.xml").find("<testsuite"), std::string::npos);
  // A wrong kernel's outputs fail with the table.
  write_outputs(d, load("mut_sign"));
  EXPECT_EQ(run_cli("cases check --dir " + d, d + "/../c2.log"), 1);
  EXPECT_NE(slurp(d + "/../c2.log").find("FAIL"), std::string::npos);
  write_outputs(d, *find_implementation("scalar"));
  // A truncated output: exit 2.
  {
    const std::string p = test::case_file(d, "0000");
    std::string b = slurp(p);
    std::ofstream(p, std::ios::binary) << b.substr(0, b.size() - 3);
    EXPECT_EQ(run_cli("cases check --dir " + d, d + "/../c3.log"), 2);
    EXPECT_NE(slurp(d + "/../c3.log").find(test::case_file(d, "0000")), std::string::npos) << slurp(d + "/../c3.log");
  }
  write_outputs(d, *find_implementation("scalar"));
  // A wrong shape: exit 2.
  {
    gate::NpyArray a = gate::npy_read(test::case_file(d, "0001"));
    a.shape = {a.shape[0] * a.shape[1] * a.shape[2]};
    gate::npy_write(test::case_file(d, "0001"), a);
    EXPECT_EQ(run_cli("cases check --dir " + d, d + "/../c4.log"), 2);
    EXPECT_NE(slurp(d + "/../c4.log").find("shape"), std::string::npos);
  }
  write_outputs(d, *find_implementation("scalar"));
  // A broken manifest: exit 2.
  {
    std::string m = slurp(d + "/manifest.json");
    std::ofstream(d + "/manifest.json") << m.substr(0, m.size() / 2);
    EXPECT_EQ(run_cli("cases check --dir " + d, d + "/../c5.log"), 2);
    std::ofstream(d + "/manifest.json") << "{\"format\": \"ropecheck-case-set\", \"version\": 1, \"angle_model\": \"exact\", "
                                           "\"cases\": [{\"input\": \"../../x\", \"output\": \"y\"}]}";
    EXPECT_EQ(run_cli("cases check --dir " + d, d + "/../c6.log"), 2);
  }
  EXPECT_EQ(run_cli("cases check --dir " + d + "/nonexistent", d + "/../c7.log"), 2);
}

// ---- reports of the user's kernel -------------------------------------------------

// A gate writes report.{json,md,html} and compares with a baseline: the same kernel passes its own
// baseline, a less accurate build of it (still within its contract) fails the compare, a bad baseline is a
// usage error before anything runs.
TEST(GateReport, ADegradedBuildFailsItsBaselineWhileItsGatePasses) {
  const std::string d = tmpdir("gate-report");
  fs::create_directories(d + "/good");
  fs::create_directories(d + "/worse");
  fs::copy_file(mutant("ok_double"), d + "/good/libk.so");
  fs::copy_file(mutant("ok_fast_f32"), d + "/worse/libk.so");
  const std::string common = " --quiet --cases 300 --dtype f32,bf16 ";
  ASSERT_EQ(run_cli("gate --kernel " + d + "/good/libk.so" + common + "--report-dir " + d + "/base", d + "/1.log"), 0)
      << slurp(d + "/1.log");
  for (const char* f : {"report.json", "report.md", "report.html"}) EXPECT_TRUE(fs::exists(d + "/base/" + f)) << f;
  const report::Report base = report::load_report(d + "/base/report.json");
  EXPECT_EQ(base.kind, "gate");
  EXPECT_TRUE(base.find_check("gate/matrix f32 interleaved")) << "one check per row of the verdict";
  EXPECT_TRUE(base.find_check("gate/fp environment"));
  ASSERT_EQ(base.series.size(), 4u);  // f32 and bf16, each layout
  for (const report::Series& s : base.series) {
    EXPECT_NE(s.layout, "all");
    // Each series has its own check, which the summary links to.
    const report::Check* c = base.check_of(s);
    ASSERT_NE(c, nullptr) << s.dtype << " " << s.layout;
    EXPECT_EQ(c->status, "pass");
  }
  EXPECT_GT(base.series[0].all.count, 0u);
  EXPECT_GT(base.series[0].all.p99, 0.0);
  // The same kernel against its own baseline: the same seed, the same cases, no regression.
  EXPECT_EQ(run_cli("gate --kernel " + d + "/good/libk.so" + common + "--report-dir " + d + "/again --baseline " +
                        d + "/base/report.json",
                    d + "/2.log"),
            0)
      << slurp(d + "/2.log");
  // The less accurate build: its gate passes (within the default contract), its compare does not.
  EXPECT_EQ(run_cli("gate --kernel " + d + "/worse/libk.so" + common + "--report-dir " + d + "/cur", d + "/3.log"), 0)
      << slurp(d + "/3.log");
  EXPECT_EQ(run_cli("gate --kernel " + d + "/worse/libk.so" + common + "--report-dir " + d + "/cur --baseline " + d +
                        "/base/report.json",
                    d + "/4.log"),
            1);
  EXPECT_NE(slurp(d + "/4.log").find("regression"), std::string::npos) << slurp(d + "/4.log");
  EXPECT_NE(slurp(d + "/4.log").find("verdict: PASS"), std::string::npos);
  std::ofstream(d + "/bad.json") << "{ not json";
  EXPECT_EQ(run_cli("gate --kernel " + d + "/good/libk.so" + common + "--baseline " + d + "/bad.json", d + "/5.log"), 2);
  EXPECT_EQ(slurp(d + "/5.log").find("ropecheck gate: kernel"), std::string::npos) << "nothing ran";
}

// A seed names its cases across releases and compilers (docs/gate.md, "Rows": deterministic in the seed;
// `cases export` writes the same). The first random cases of seed 1 are pinned by an FNV-1a hash of their
// shapes, positions, bases and input bits: the value recorded when ef7b45e made the draw order explicit (GCC
// had evaluated ldexp(mant(rng), ex(rng)) right to left; a clang build drew other cases for the same seed).
TEST(GateCases, ARandomCaseSeedDrawsTheSameCasesOnEveryBuild) {
  for (const bool mt64 : {false, true}) {  // (the standard engine, and gate::Mt19937_64 that the gate draws from)
  uint64_t h = 0xcbf29ce484222325ull;
  auto mix = [&h](const void* p, size_t n) {
    for (size_t k = 0; k < n; ++k) h = (h ^ static_cast<const unsigned char*>(p)[k]) * 0x100000001b3ull;
  };
  std::mt19937_64 rng(1);
  gate::Mt19937_64 fast(1);
  for (int n = 0; n < 24; ++n) {
    const Dtype d = kAllDtypes[n % 3];
    const Layout l = kAllLayouts[n % 2];
    const RopeCase c = mt64 ? gate::random_case(d, l, int64_t(1) << 24, fast) : gate::random_case(d, l, int64_t(1) << 24, rng);
    const uint32_t dims[3] = {c.head_dim, c.rotary_dim, c.n_heads};
    mix(dims, sizeof dims);
    mix(c.positions.data(), c.positions.size() * sizeof(int64_t));
    mix(&c.base, sizeof c.base);
    mix(&c.position_scale, sizeof c.position_scale);
    mix(c.inv_freq.data(), c.inv_freq.size() * sizeof(double));
    mix(c.input.data(), c.input.size());
  }
  EXPECT_EQ(h, 0x047b2570d3333d74ull) << std::hex << "the random cases of seed 1 changed: 0x" << h << (mt64 ? " (Mt19937_64)" : "");
  }
}

// gate::Mt19937_64 is std::mt19937_64's sequence (seeding, twist, tempering), block after block, for seeds at the
// edges and at random, through the distributions the gate draws with.
TEST(Mt64, SameSequenceAsTheStandardEngine) {
  std::mt19937_64 seeds(7);
  std::vector<uint64_t> ss = {0, 1, 5489, ~uint64_t(0), uint64_t(1) << 63};
  for (int k = 0; k < 6; ++k) ss.push_back(seeds());
  uint64_t compared = 0;
  for (const uint64_t seed : ss) {
    std::mt19937_64 a(seed);
    gate::Mt19937_64 b(seed);
    for (int n = 0; n < 5000; ++n, ++compared) ASSERT_EQ(a(), b()) << "seed " << seed << " draw " << n;  // 16 blocks
    for (int n = 0; n < 2000; ++n) {
      ASSERT_EQ(std::uniform_int_distribution<int>(-6, 6)(a), std::uniform_int_distribution<int>(-6, 6)(b));
      ASSERT_EQ(std::uniform_real_distribution<double>(1.0, 2.0)(a), std::uniform_real_distribution<double>(1.0, 2.0)(b));
      ASSERT_EQ((std::generate_canonical<double, 53>(a)), (std::generate_canonical<double, 53>(b)));
    }
  }
  EXPECT_GT(compared, 50000u);
  static_assert(gate::Mt19937_64::min() == std::mt19937_64::min() && gate::Mt19937_64::max() == std::mt19937_64::max());
}

// ---- stride hypotheses (gate::diagnose_call on tensor-form calls) ----------------------------------------------

namespace {

// A tensor-form case: f32 interleaved heads of 16, q with qh heads and k with kh, three tokens.
RopeCase strided_case(uint32_t qh, uint32_t kh) {
  RopeCase c;
  c.dtype = Dtype::f32;
  c.layout = Layout::interleaved;
  c.head_dim = c.rotary_dim = 16;
  c.n_heads = qh;
  c.positions = {3, 17, 250};
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1, 1);
  c.input.assign(c.n_bytes(), 0);
  for (size_t e = 0; e < c.n_elements(); ++e) store_f32(c.dtype, c.input.data(), e, u(rng));
  c.tensor = TensorCall{};
  c.tensor->k_heads = kh;
  c.tensor->k_input.assign(size_t(3) * kh * 16 * 4, 0);
  for (size_t e = 0; e < size_t(3) * kh * 16; ++e) store_f32(c.dtype, c.tensor->k_input.data(), e, u(rng));
  return c;
}

// Tensor `which` (0 q, 2 k) of c as a kernel computes it that reads head h of token t at element read_off(t, h) of
// the input's strided buffer (its gaps, and past its end, read 0.75), rotates it exactly (rounded once) by token
// t's position and writes it to its own head: the output, compact.
Bytes misread(const RopeCase& c, int which, const std::function<uint64_t(uint64_t, uint64_t)>& read_off) {
  RopeCase w = c;
  if (which >= 2) w = c.k_case();
  w.tensor.reset();
  const TensorLayout L = c.tensor_layout(which);
  const uint64_t T = c.n_tokens(), H = w.n_heads, D = c.head_dim;
  std::vector<float> buf(L.span, 0.75f);
  for (uint64_t t = 0; t < T; ++t)
    for (uint64_t h = 0; h < H; ++h)
      for (uint64_t j = 0; j < D; ++j) buf[L.head(t, h) + j] = load_f32(c.dtype, w.input.data(), (t * H + h) * D + j);
  for (uint64_t t = 0; t < T; ++t)
    for (uint64_t h = 0; h < H; ++h)
      for (uint64_t j = 0; j < D; ++j) {
        const uint64_t off = read_off(t, h) + j;
        store_f32(c.dtype, w.input.data(), (t * H + h) * D + j, off < buf.size() ? buf[off] : 0.75f);
      }
  return reference_rope(w, {}).rounded;
}

std::string diagnosis_of(const RopeCase& c, const Bytes& q_out, const Bytes& k_out) {
  const Criteria cr = Criteria::of(loaded_kernel_error_model(AngleModel::exact), Contract{});
  gate::CallResult r;
  r.status = gate::CallStatus::ok;
  r.out = q_out;
  r.k_out = k_out;
  const gate::CaseVerdict v = gate::judge_call(c, false, AngleModel::exact, cr, r);
  EXPECT_FALSE(v.pass) << c.summary();
  return gate::diagnose_call(c, AngleModel::exact, cr, v, r);
}

Bytes exact_q(const RopeCase& c) {
  RopeCase q = c;
  q.tensor.reset();
  return reference_rope(q, {}).rounded;
}

}  // namespace

// A kernel that gets a stride wrong rotates the right values into the wrong places, or other values into the
// right ones: each hypothesis is named with its strides, never "unexplained" (ggml's k view built with q's head
// stride read "k: unexplained" before).
TEST(GateDiagnosis, StrideBugsAreNamed) {
  {  // k's heads 4 elements apart, read 16 apart (q's head stride): a ggml view of k made with q's nb1
    RopeCase c = strided_case(4, 2);
    c.tensor->pad[2][0] = c.tensor->pad[3][0] = 4;
    const TensorLayout L = c.tensor_layout(2);
    const Bytes k = misread(c, 2, [&](uint64_t t, uint64_t h) { return L.head(t, 0) + h * 16; });
    const std::string d = diagnosis_of(c, exact_q(c), k);
    EXPECT_NE(d.find("k: diagnosis: k's head stride from q (every pair within"), std::string::npos) << d;
    EXPECT_NE(d.find("k's heads 16 elements apart (q's head stride), not 20"), std::string::npos) << d;
  }
  {  // compact k of 4 heads read at q's offsets (2 heads): Liger #342's k head count from q
    const RopeCase c = strided_case(2, 4);
    const TensorLayout Lq = c.tensor_layout(0);
    const Bytes k = misread(c, 2, [&](uint64_t t, uint64_t h) { return Lq.head(t, h); });
    const std::string d = diagnosis_of(c, exact_q(c), k);
    EXPECT_NE(d.find("k: diagnosis: k laid out with q's strides"), std::string::npos) << d;
  }
  {  // q's heads 2 elements apart and its tokens 8 apart, read as compact
    RopeCase c = strided_case(3, 0);
    c.tensor->pad[0][0] = 2;
    c.tensor->pad[0][1] = 8;
    const Bytes q = misread(c, 0, [](uint64_t t, uint64_t h) { return (t * 3 + h) * 16; });
    const std::string d = diagnosis_of(c, q, {});
    EXPECT_NE(d.find("diagnosis: strides ignored (every pair within"), std::string::npos) << d;
  }
  {  // not a stride bug: k rotated the wrong way stays "angle negated"
    const RopeCase c = strided_case(2, 2);
    RopeCase neg = c.k_case();
    for (size_t e = 0; e < neg.n_elements(); e += 2)  // R(-phi) x = conj(R(phi) conj(x)) for interleaved pairs
      store_f32(neg.dtype, neg.input.data(), e + 1, -load_f32(neg.dtype, neg.input.data(), e + 1));
    Bytes k = reference_rope(neg, {}).rounded;
    for (size_t e = 0; e < neg.n_elements(); e += 2) store_f32(neg.dtype, k.data(), e + 1, -load_f32(neg.dtype, k.data(), e + 1));
    const std::string d = diagnosis_of(c, exact_q(c), k);
    EXPECT_NE(d.find("k: diagnosis: angle negated"), std::string::npos) << d;
  }
}
