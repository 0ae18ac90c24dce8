// The hostile-kernel suite: every library of tests/kernels/hostile/ is gated by `ropecheck gate`, as a CI job
// would run it, and the gate must survive it and never pass it. Each kernel's source states what the
// gate must do in its top comment:
//   Expect: exit N; mentions: TEXT   exit status N (1: a failing verdict, 2: a load error), TEXT in the output
//   Args: --option value ...          replaces (or adds to) the driver's options for this kernel
//   Requires: x86                      skipped elsewhere
// Besides the exit status and the mention, for every kernel: no line of the gate's stdout starts with
// "verdict: PASS"; nothing was written into the gate's working directory nor into a directory outside
// it whose path the kernel knows (ROPECHECK_HOSTILE_OUTSIDE); the gate's CPU time (its own and its kernel
// hosts': what the budget counts, with blocked calls) stays within its budget plus one call timeout plus 3 s
// and it exits within 60 s (a kernel that sleeps is stopped by the budget's blocked time: h_sleep_budget), is
// never stopped, and its stdout and stderr reach EOF by the time it exits
// (within 5 s); and no process it started is left behind. This test process is a child subreaper, so
// every orphan of the gate, even one that left the gate's session, becomes its child and is found,
// named and killed.
//
// These kernels kill, stop and trace their parent, fork, exec, and write files: run them only through
// this driver (every run gets scratch directories under the test build's tmp/hostile/):
//   ctest --test-dir build -L hostile
//   build/gate/tests/test_hostile --gtest_filter='*h_fork_grandchild'
// A mention is searched in stdout and stderr together, with the kernel's own name taken out; each names
// what the gate must report (the fault, the cause, or the row), not words every verdict contains.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace fs = std::filesystem;

namespace {

// The driver's options for every kernel (Args: replaces them one by one). A short run: 60 random cases
// after the systematic part, 3 executions per property row without shrinking (the sandbox is what is tested
// here); a 1 s call timeout, so that a hang costs little. The budget is a cap that only h_sleep_budget (its
// own Args) is meant to reach: a kernel that ends its host in every call (h_kill_parent_*) costs a host start
// per call, 18 CPU-s under ASan on a quiet machine and 25 on a loaded one, and a run cut by the budget ends
// with work whose cost moves with the load. With 40 s every other run completes, and the CPU bound below has
// a margin no load reaches.
//
// Under AddressSanitizer (scripts/test-asan.sh runs the kernels whose behaviour goes through the host's every
// path) what is checked is the gate's and the host's code on those paths, not how many calls take them: the
// run is narrower -- f32 and bf16 (a 4- and a 2-byte element: h_scribble_decline declines bf16), interleaved,
// 20 random cases, 1 execution per property row. Every row still runs, and a kernel that ends its host in
// every call still restarts it a few hundred times (h_kill_parent_kill: 805 -> 282 host starts, 37 -> 14 s
// under ASan, where a restart clones an ASan process: ~35 ms). The default build runs the full options.
#if defined(__SANITIZE_ADDRESS__)
#define ROPECHECK_HOSTILE_NARROW 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ROPECHECK_HOSTILE_NARROW 1
#endif
#endif
#ifdef ROPECHECK_HOSTILE_NARROW
const std::vector<std::pair<std::string, std::string>> kDefaultOptions = {
    {"--cases", "20"}, {"--property-cases", "1"}, {"--shrink-tries", "0"}, {"--call-timeout", "1"},
    {"--budget-seconds", "40"}, {"--dtype", "f32,bf16"}, {"--layout", "interleaved"}};
#else
const std::vector<std::pair<std::string, std::string>> kDefaultOptions = {
    {"--cases", "60"}, {"--property-cases", "3"}, {"--shrink-tries", "0"}, {"--call-timeout", "1"},
    {"--budget-seconds", "40"}};
#endif
// The longest the driver waits for the gate and its output, in wall time: only a gate that does not stop reaches
// it (what the budget counts is checked in CPU seconds below). Wall time stretches with the load: with three
// builds sharing CI's 2 cores, ASan gates of at most 40 CPU-s took 87-92 s. Below ctest's 240 s TIMEOUT, so the
// driver, not ctest, kills a stuck gate and prints what it said.
constexpr double kDeadlineSeconds = 200;
constexpr double kEofAfterExitSeconds = 5;     // stdout/stderr still open this long after the gate exited: held
                                               // by a process it left behind
constexpr double kOvershootSeconds = 3;        // beyond budget + call timeout: the verdict's bookkeeping
constexpr size_t kOutputCap = size_t(8) << 20;  // bytes kept per stream

struct HostileKernel {
  std::string name;                // the source's stem, also the library's
  int exit_code = -1;              // Expect: exit N
  std::string mention;             // Expect: ...; mentions: TEXT
  std::vector<std::string> args;   // Args:
  bool x86_only = false;           // Requires: x86
  std::string error;               // what is wrong with the source's comment (the test fails with it)
};

void PrintTo(const HostileKernel& k, std::ostream* os) { *os << k.name; }

std::string trim(const std::string& s) {
  const size_t a = s.find_first_not_of(" \t\r");
  if (a == std::string::npos) return "";
  return s.substr(a, s.find_last_not_of(" \t\r") - a + 1);
}

// The directives of a kernel's top comment (the text before its first "*/").
HostileKernel parse_source(const fs::path& src) {
  HostileKernel k;
  k.name = src.stem().string();
  std::ifstream f(src);
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string text = ss.str();
  std::istringstream lines(text.substr(0, text.find("*/")));
  bool expect = false;
  for (std::string line; std::getline(lines, line);) {
    line = trim(line);
    while (!line.empty() && (line[0] == '/' || line[0] == '*')) line = trim(line.substr(1));
    if (line.rfind("Expect:", 0) == 0) {
      std::string rest = trim(line.substr(7));
      const size_t semi = rest.find(';');
      const std::string ex = trim(rest.substr(0, semi));
      if (ex == "exit 1" || ex == "exit 2") k.exit_code = ex.back() - '0';
      else k.error = "'Expect: " + rest + "': the exit status must be 'exit 1' or 'exit 2'";
      if (semi != std::string::npos) {
        const std::string m = trim(rest.substr(semi + 1));
        if (m.rfind("mentions:", 0) == 0) k.mention = trim(m.substr(9));
        else k.error = "'Expect: " + rest + "': after ';' expected 'mentions: TEXT'";
      }
      expect = true;
    } else if (line.rfind("Args:", 0) == 0) {
      std::istringstream a(line.substr(5));
      for (std::string t; a >> t;) k.args.push_back(t);
    } else if (line.rfind("Requires:", 0) == 0) {
      const std::string r = trim(line.substr(9));
      if (r == "x86") k.x86_only = true;
      else k.error = "'Requires: " + r + "': only 'x86' is known";
    }
  }
  if (!expect && k.error.empty()) k.error = src.string() + ": no 'Expect: exit N; mentions: TEXT' line in its top comment";
  return k;
}

std::vector<HostileKernel> hostile_kernels() {
  std::vector<fs::path> srcs;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(fs::path(ROPECHECK_SOURCE_DIR) / "tests" / "kernels" / "hostile", ec))
    if (e.path().extension() == ".c") srcs.push_back(e.path());
  std::sort(srcs.begin(), srcs.end());
  std::vector<HostileKernel> r;
  for (const auto& s : srcs) r.push_back(parse_source(s));
  return r;
}

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct Child {
  pid_t pid;
  char state;
  std::string what;  // comm and command line
};

// The live processes whose parent is this one. The gate's orphans land here (this process is a child
// subreaper), also those that called setsid(): no process group or session reaches them all.
std::vector<Child> children_of_this_process() {
  std::vector<Child> r;
  const pid_t me = getpid();
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/proc", ec)) {
    const std::string n = e.path().filename().string();
    if (n.empty() || !std::all_of(n.begin(), n.end(), [](char c) { return c >= '0' && c <= '9'; })) continue;
    std::ifstream f(e.path() / "stat");
    std::string s;
    if (!std::getline(f, s)) continue;  // gone meanwhile
    const size_t lp = s.find('('), rp = s.rfind(')');
    if (lp == std::string::npos || rp == std::string::npos || rp + 2 > s.size()) continue;
    std::istringstream rest(s.substr(rp + 2));
    char state = '?';
    long ppid = 0, pgrp = 0, session = 0;
    rest >> state >> ppid >> pgrp >> session;
    if (ppid != me || state == 'Z' || state == 'X') continue;
    std::ifstream cf(e.path() / "cmdline");
    std::string cmd((std::istreambuf_iterator<char>(cf)), std::istreambuf_iterator<char>());
    std::replace(cmd.begin(), cmd.end(), '\0', ' ');
    // A forked copy of the gate has the gate's command line: its session tells whether it left the gate's.
    r.push_back({pid_t(std::stol(n)), state,
                 "pid " + n + " (" + s.substr(lp + 1, rp - lp - 1) + ", state " + state + ", process group " +
                     std::to_string(pgrp) + ", session " + std::to_string(session) + "): " + trim(cmd)});
  }
  return r;
}

// Reaps every child of this process. One still alive after `grace` seconds is a leftover: named in the
// result, and killed (its own children then come here, and are named and killed in turn).
std::vector<std::string> reap_and_kill_leftovers(double grace) {
  std::vector<std::string> left;
  std::set<pid_t> killed;
  const double t_grace = now_seconds() + grace, t_give_up = t_grace + 10;
  for (;;) {
    int st = 0;
    const pid_t w = waitpid(-1, &st, WNOHANG);
    if (w > 0 || (w < 0 && errno == EINTR)) continue;
    if (w < 0) break;  // ECHILD: none left
    if (now_seconds() > t_give_up) {
      left.push_back("(still not gone 10 s after SIGKILL; giving up)");
      break;
    }
    if (now_seconds() > t_grace) {
      for (const Child& c : children_of_this_process()) {
        if (!killed.insert(c.pid).second) continue;
        left.push_back(c.what);
        kill(c.pid, SIGKILL);
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return left;
}

std::string describe_status(int st) {
  if (WIFEXITED(st)) return "exited with status " + std::to_string(WEXITSTATUS(st));
  if (WIFSIGNALED(st)) return "was killed by signal " + std::to_string(WTERMSIG(st)) + " (" + strsignal(WTERMSIG(st)) + ")";
  return "status " + std::to_string(st);
}

struct GateRun {
  std::vector<std::string> argv;
  bool reaped = false;
  bool killed_by_driver = false;  // past the deadline, or stopped
  int status = 0;
  double seconds = 0;             // from the fork to the gate's exit
  double cpu_seconds = 0;         // CPU time of the gate and the children it reaped (its kernel hosts)
  std::string out, err;
  std::vector<std::string> problems;
  std::vector<std::string> leftovers;
};

// Runs the gate: stdout and stderr to pipes read to EOF, every deadline enforced, every process left killed.
GateRun run_gate(const std::vector<std::string>& argv, const std::string& cwd, const std::string& outside) {
  GateRun r;
  r.argv = argv;
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e)
    if (std::strncmp(*e, "ROPECHECK_HOSTILE_OUTSIDE=", 26) != 0) env.push_back(*e);
  env.push_back("ROPECHECK_HOSTILE_OUTSIDE=" + outside);
  std::vector<char*> cargv, cenv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  for (const auto& e : env) cenv.push_back(const_cast<char*>(e.c_str()));
  cenv.push_back(nullptr);
  int po[2], pe[2];
  if (pipe2(po, O_CLOEXEC) != 0 || pipe2(pe, O_CLOEXEC) != 0) {
    r.problems.push_back(std::string("pipe2: ") + std::strerror(errno));
    return r;
  }
  const double t0 = now_seconds();
  const pid_t pid = fork();
  if (pid < 0) {
    r.problems.push_back(std::string("fork: ") + std::strerror(errno));
    return r;
  }
  if (pid == 0) {
    // Only async-signal-safe calls here. The gate gets default signal dispositions and an empty mask
    // whatever this process has, no stdin, and no core file (a crashing gate must not fill its cwd).
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    sigaction(SIGPIPE, &dfl, nullptr);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    const struct rlimit nocore {0, 0};
    setrlimit(RLIMIT_CORE, &nocore);
    const int devnull = open("/dev/null", O_RDONLY);
    if (devnull < 0 || dup2(devnull, 0) < 0 || dup2(po[1], 1) < 0 || dup2(pe[1], 2) < 0 || chdir(cwd.c_str()) != 0)
      _exit(127);
    execve(cargv[0], cargv.data(), cenv.data());
    _exit(127);
  }
  close(po[1]);
  close(pe[1]);
  int fds[2] = {po[0], pe[0]};
  std::string* bufs[2] = {&r.out, &r.err};
  const char* names[2] = {"stdout", "stderr"};
  double t_exit = 0;
  rusage ru{};
  auto cpu_of = [](const rusage& u) {
    return double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + double(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
  };
  auto kill_gate = [&] {
    kill(pid, SIGKILL);
    wait4(pid, &r.status, 0, &ru);
    r.cpu_seconds = cpu_of(ru);
    r.reaped = r.killed_by_driver = true;
    r.seconds = now_seconds() - t0;
  };
  for (;;) {
    if (!r.reaped) {
      int st = 0;
      const pid_t w = wait4(pid, &st, WNOHANG | WUNTRACED, &ru);
      if (w == pid && WIFSTOPPED(st)) {
        r.problems.push_back("the gate was stopped by signal " + std::to_string(WSTOPSIG(st)) + " (" +
                             strsignal(WSTOPSIG(st)) + "): it would never have finished; killed");
        kill_gate();
        break;
      }
      if (w == pid) {
        r.reaped = true;
        r.status = st;
        r.cpu_seconds = cpu_of(ru);
        t_exit = now_seconds();
        r.seconds = t_exit - t0;
      }
    }
    const bool open = fds[0] >= 0 || fds[1] >= 0;
    if (!open && r.reaped) break;
    const double t = now_seconds();
    if (t - t0 > kDeadlineSeconds) {
      for (int k = 0; k < 2; ++k)
        if (fds[k] >= 0)
          r.problems.push_back(std::string("the gate's ") + names[k] + " stayed open " +
                               std::to_string(int(kDeadlineSeconds)) + " s");
      if (!r.reaped) {
        r.problems.push_back("the gate did not exit within " + std::to_string(int(kDeadlineSeconds)) + " s; killed");
        kill_gate();
      }
      break;
    }
    if (r.reaped && open && t - t_exit > kEofAfterExitSeconds) {
      for (int k = 0; k < 2; ++k)
        if (fds[k] >= 0)
          r.problems.push_back(std::string("the gate's ") + names[k] + " stayed open " +
                               std::to_string(int(kEofAfterExitSeconds)) +
                               " s after the gate exited: a process it left holds it");
      break;
    }
    pollfd p[2];
    nfds_t np = 0;
    for (int k = 0; k < 2; ++k)
      if (fds[k] >= 0) p[np++] = {fds[k], POLLIN, 0};
    if (np == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      continue;
    }
    if (poll(p, np, 100) < 0 && errno != EINTR) break;
    for (nfds_t i = 0; i < np; ++i) {
      if (!(p[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      const int k = p[i].fd == fds[0] ? 0 : 1;
      char buf[65536];
      const ssize_t n = read(fds[k], buf, sizeof buf);
      if (n > 0) {
        if (bufs[k]->size() < kOutputCap) bufs[k]->append(buf, size_t(n));
      } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
        close(fds[k]);
        fds[k] = -1;
      }
    }
  }
  if (!r.reaped) {  // it exited, but could not be reaped: cannot happen, yet never leave it
    r.problems.push_back("the gate could not be reaped; killed");
    kill_gate();
  }
  // Whatever it started should be gone when it has exited; a second to die is allowed. The pipes are
  // closed only after this look: a process still writing to them would die of SIGPIPE, unnamed.
  r.leftovers = reap_and_kill_leftovers(1.0);
  for (int k = 0; k < 2; ++k)
    if (fds[k] >= 0) close(fds[k]);
  return r;
}

std::string clipped(const std::string& s) {
  constexpr size_t kKeep = 12000;
  if (s.size() <= 2 * kKeep) return s;
  return s.substr(0, kKeep) + "\n[... " + std::to_string(s.size() - 2 * kKeep) + " bytes ...]\n" +
         s.substr(s.size() - kKeep);
}

std::vector<std::string> entries(const fs::path& dir) {
  std::vector<std::string> r;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) r.push_back(e.path().filename().string());
  return r;
}

std::string joined(const std::vector<std::string>& v, const std::string& sep) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : sep) + x;
  return s;
}

double option_value(const std::vector<std::string>& argv, const std::string& name) {
  for (size_t k = 0; k + 1 < argv.size(); ++k)
    if (argv[k] == name) return std::stod(argv[k + 1]);
  return 0;
}

class Hostile : public ::testing::TestWithParam<HostileKernel> {};

TEST_P(Hostile, GateSurvivesAndFails) {
  const HostileKernel& k = GetParam();
  ASSERT_TRUE(k.error.empty()) << k.error;
#if !defined(__x86_64__) && !defined(__i386__)
  if (k.x86_only) GTEST_SKIP() << k.name << " sets x86's MXCSR: nothing to test on this target";
#endif
  const std::string lib = std::string(ROPECHECK_HOSTILE_DIR) + "/" + k.name + ".so";
  ASSERT_TRUE(fs::exists(lib)) << lib << " was not built (target ropecheck_hostile)";
  ASSERT_EQ(prctl(PR_SET_CHILD_SUBREAPER, 1), 0) << std::strerror(errno);
  ASSERT_EQ(reap_and_kill_leftovers(0), std::vector<std::string>{}) << "children left before the run";

  const fs::path root = fs::path(ROPECHECK_TEST_TMP) / "hostile" / k.name;
  fs::remove_all(root);
  for (const char* d : {"cwd", "report", "outside"}) fs::create_directories(root / d);

  std::vector<std::pair<std::string, std::string>> opts = kDefaultOptions;
  std::vector<std::string> extra;
  for (size_t i = 0; i < k.args.size(); ++i) {
    const bool has_value = i + 1 < k.args.size() && k.args[i + 1].rfind("--", 0) != 0;
    auto it = std::find_if(opts.begin(), opts.end(), [&](const auto& o) { return o.first == k.args[i]; });
    if (it != opts.end() && has_value) it->second = k.args[++i];
    else extra.push_back(k.args[i]);
  }
  std::vector<std::string> argv = {ROPECHECK_CLI, "gate", "--verbose", "--kernel", lib, "--report-dir", (root / "report").string()};
  for (const auto& [o, v] : opts) argv.insert(argv.end(), {o, v});
  argv.push_back("--quiet");
  argv.insert(argv.end(), extra.begin(), extra.end());

  const GateRun r = run_gate(argv, (root / "cwd").string(), (root / "outside").string());
  const std::string cmd = joined(r.argv, " ");
  // The output names the kernel (h_write_args, h_mprotect_guard, ...): its name must not count as a mention.
  std::string all = r.out + r.err;
  for (size_t p = 0; (p = all.find(k.name, p)) != std::string::npos;) all.replace(p, k.name.size(), "<kernel>");

  for (const auto& p : r.problems) ADD_FAILURE() << k.name << ": " << p;
  if (!r.killed_by_driver) {
    const bool exact = WIFEXITED(r.status) && WEXITSTATUS(r.status) == k.exit_code;
    EXPECT_TRUE(exact) << k.name << ": the gate " << describe_status(r.status) << ", expected exit " << k.exit_code
                       << (WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0 ? " (it PASSED a hostile kernel)" : "");
    // What the budget counts, not the wall time a busy machine stretches (the 200 s deadline above stops a
    // gate whose budget does not).
    const double limit = option_value(r.argv, "--budget-seconds") + option_value(r.argv, "--call-timeout") +
                         kOvershootSeconds;
    EXPECT_LT(r.cpu_seconds, limit) << k.name << ": the gate used " << r.cpu_seconds << " CPU seconds, more than its "
                                    << "budget plus one call timeout plus " << kOvershootSeconds << " s";
  }
  if (!k.mention.empty()) {
    EXPECT_NE(all.find(k.mention), std::string::npos) << k.name << ": the output does not mention '" << k.mention << "'";
  }
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);)
    EXPECT_NE(line.rfind("verdict: PASS", 0), 0u) << k.name << ": a line of the gate's stdout reads '" << line << "'";
  for (const char* d : {"outside", "cwd"}) {
    const auto e = entries(root / d);
    EXPECT_TRUE(e.empty()) << k.name << ": written into " << (root / d).string() << ": " << joined(e, ", ");
  }
  EXPECT_TRUE(r.leftovers.empty()) << k.name << ": processes left after the gate "
                                   << (r.killed_by_driver ? "was killed by this driver" : "exited")
                                   << " (killed now):\n  " << joined(r.leftovers, "\n  ");
  if (HasFailure())
    std::printf("$ cd %s && %s\n(%s after %.1f s)\n--- the gate's stdout ---\n%s\n--- the gate's stderr ---\n%s\n---\n",
                (root / "cwd").c_str(), cmd.c_str(),
                r.killed_by_driver ? "killed by the driver" : describe_status(r.status).c_str(), r.seconds,
                clipped(r.out).c_str(), clipped(r.err).c_str());
}

INSTANTIATE_TEST_SUITE_P(Kernels, Hostile, ::testing::ValuesIn(hostile_kernels()),
                         [](const ::testing::TestParamInfo<HostileKernel>& i) { return i.param.name; });

// Every source is described and built, and every library has its source: none escapes the suite.
TEST(HostileSuite, EveryKernelDescribedAndBuilt) {
  const auto ks = hostile_kernels();
  EXPECT_GE(ks.size(), 30u);
  std::set<std::string> names;
  for (const auto& k : ks) {
    names.insert(k.name);
    EXPECT_TRUE(k.error.empty()) << k.error;
    EXPECT_TRUE(fs::exists(std::string(ROPECHECK_HOSTILE_DIR) + "/" + k.name + ".so")) << k.name << " not built";
  }
  for (const auto& e : entries(ROPECHECK_HOSTILE_DIR)) {
    if (fs::path(e).extension() == ".so") {
      EXPECT_TRUE(names.count(fs::path(e).stem().string())) << e << " has no source in tests/kernels/hostile/";
    }
  }
}

}  // namespace
