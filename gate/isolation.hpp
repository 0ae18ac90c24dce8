// Running kernel calls where nothing the kernel does can reach the gate: a
// kernel host. The gate forks a host process (its own session, resource
// limits, a private temporary working directory, stdout/stderr captured to
// files, a seccomp filter) that loads the kernel library -- the gate never
// does -- and makes the calls the gate sends it, one after another in one
// process, so state across calls shows. Every buffer the kernel sees (the args
// struct, positions, inv_freq, input, output) lives in memory shared with the
// gate, each between two PROT_NONE guard pages filled with a pattern of its
// own, and is compared by the gate after every call, declined calls included.
// A crash, hang or exit ends the host; the next call starts a new one.
// docs/gate.md, "The sandbox".
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/abi_versions.hpp"
#include "core/rope_case.hpp"
#include "gate/sandbox.hpp"
#include "ropecheck/kernel_abi.h"

namespace ropecheck::gate {

enum class CallStatus {
  ok,           // returned RC_OK
  declined,     // returned RC_UNSUPPORTED
  error_code,   // returned something else
  crashed,      // killed by a signal, or exited without returning
  hung,         // still running at the timeout; killed
};

// One thing the memory checks found, as a verdict line ("3 guard byte(s) after the output buffer ...").
struct MemoryFinding {
  std::string fault;    // "out-of-bounds write", "argument modified", "guard page", "declined after writing"
  std::string message;
};

struct CallResult {
  CallStatus status = CallStatus::ok;
  int rc = 0;           // the kernel's return value (ok/declined/error_code)
  int signal = 0;       // crashed: the signal (0: the process exited with exit_code)
  int exit_code = 0;
  double seconds = 0;   // wall time of the call, as the gate saw it
  // Of that, the time the kernel's calling thread was blocked (sleeping, waiting on I/O, a lock or a device):
  // neither on a CPU nor waiting for one, while the gate waited for it (docs/gate.md, "The budget").
  double blocked_seconds = 0;
  Bytes out;            // the output buffer after the call (in place: the buffer); the tensor form: q's output,
                        // compact [n_tokens][n_heads][head_dim]
  Bytes k_out;          // the tensor form with k: k's output, compact [n_tokens][k_heads][head_dim]
  // Memory checks (made after every call, whatever its status):
  size_t unwritten = 0;              // output elements still holding the poison (ok calls)
  size_t first_unwritten = 0;
  size_t guard_before_bytes = 0;     // guard bytes before the output (or in-place buffer) that changed
  size_t guard_after_bytes = 0;      // guard bytes after it (to the end of the following guard page)
  size_t input_guard_bytes = 0;      // the same around the input buffer (out-of-place)
  size_t input_changed = 0;          // input elements changed by an out-of-place call
  size_t first_input_changed = 0;
  std::vector<MemoryFinding> memory; // guard pages unprotected or written, arguments modified, declined writes
  // The FP control state after the call, when the call changed it (the host restores it before each call).
  std::string fp_change;
  std::string host_error;   // crashed: the host could not be started again after an earlier crash (why)
  // error_code from a kernel served by another process (KernelSource::host_fd: the Python package): what it said
  // of the error, e.g. the exception its Python function raised with the last lines of its traceback.
  std::string raised;
  // crashed by SIGSEGV/SIGBUS in the call: where the access was, from the signal's address ("a read of the guard
  // page after the table buffer, 4 byte(s) past its end"); empty when the host could not say.
  std::string fault_where;
  // ... and the fault's address is where a tensor's element would be with its offset computed in 32 bits: which
  // ("q[2][0][0] (element offset 4294967168; as int32 -128)"); the verdict's cause is then that.
  std::string wrapped_offset;
  // ... or where a table's row would be that the kernel should not read, for a reason the row tells: a position
  // narrowed to 32 bits, the token's index (a sparse table), a token's position (a per-token table). Its fault's
  // name ("positions truncated to 32 bits", "table row indexed by token", "per-token table indexed by position"),
  // which the verdict names then; fault_where says which row.
  std::string misread_fault;
  uint64_t host_start = 0;  // which host process made the call (1: the first; a crash or hang starts another)
  // Not empty: the kernel was not called, because no ABI version it speaks expresses the case (why; status
  // is `declined`, and the call is not the kernel's decline: rows count it apart). core/abi_versions.hpp.
  std::string not_sent;
  uint32_t abi_version = 0;  // the abi_version the call carried (0: not sent)
};

// The poison pattern of a dtype: a signalling NaN (never produced by the
// harness's inputs, nor by IEEE arithmetic).
uint32_t poison_bits(Dtype d);

// The kernel a host runs: a library it loads, or a built-in entry point it inherits; or, with host_fd, the
// process at the other end of that socket serves the calls (the Python package: docs/python.md, "How calls
// reach Python"). That process is not started, sandboxed, restarted or killed by the gate: each KernelHost
// opens a channel to it (a socket pair and the arena's memfd, passed over host_fd) and sends the host's
// commands there; the guard pages are not armed there and its FP environment is not checked (the sandbox
// line says so); a call it does not answer within the timeout ends the channel.
struct KernelSource {
  std::string library;            // dlopen'ed by the host, never by the gate
  rc_rope_apply_fn fn = nullptr;  // used when library is empty
  int host_fd = -1;               // >= 0: the serving process's control socket (library and fn unused)
};

struct HostOptions {
  double load_timeout_seconds = 10;
  double cpu_seconds = 0;    // RLIMIT_CPU of each host process (0: none)
  std::string output_dir;    // kernel-stdout.txt and kernel-stderr.txt go here (empty: the private directory)
  bool seccomp = true;
  // The bytes after each buffer the kernel reads (its input or in-place buffer, q and k, the tables, positions and
  // the other index arrays) that it may read: the guard page after each lies that much later, the bytes between
  // hold the buffer's pattern and are compared after the call like the guard bytes (a write there is out of bounds).
  // A kernel's documented contract (XNNPACK's XNN_EXTRA_BYTES); 0: every buffer ends flush against its guard page
  // where it is placed so.
  size_t input_padding = 0;
};

// Loading failed: the library is missing or malformed, lacks rc_rope_apply, or
// its constructors crashed, hung or exited. what() says which.
struct LoadError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct HostSetup;  // what a host process starts from (isolation.cpp)

class KernelHost {
 public:
  KernelHost(KernelSource src, HostOptions opt);
  ~KernelHost();
  KernelHost(const KernelHost&) = delete;
  KernelHost& operator=(const KernelHost&) = delete;

  // Start the host now (calls start it when needed). Throws LoadError.
  void start();
  // Call the kernel on the case (in place: in == out), at the ABI version it speaks: the first call
  // negotiates (negotiate()) unless set_abi() said. A case no version it speaks expresses is not sent
  // (CallResult::not_sent). Throws LoadError when a restart after a crash fails to load.
  CallResult call(const RopeCase& c, bool in_place, double timeout_seconds);
  // The call alone in a new host process (nothing of the earlier calls' state), as call() judges it; the running
  // host, if any, keeps its state and makes the next call().
  CallResult call_alone(const RopeCase& c, bool in_place, double timeout_seconds);
  // The same at an explicit abi_version (>= c.min_abi_version(); the probes use it).
  CallResult call_at(const RopeCase& c, bool in_place, double timeout_seconds, uint32_t abi_version);

  // Which ABI versions the kernel speaks (core/abi_versions.hpp), probed in a host process of their own (so
  // the probes leave no state in this one) with the given dtypes and layouts tried first. Throws LoadError.
  // `stop`: true once no further probe may start (the gate's budget).
  // `on_call`: told of each probe call (the gate's budget counts their blocked time); the probe host's CPU is in
  // live_cpu_seconds() while the probes run. slice, neutral_only: negotiate_abi's.
  const AbiVersions& negotiate(const std::vector<Dtype>& dtypes, const std::vector<Layout>& layouts,
                               double timeout_seconds, const std::function<bool()>& stop = {},
                               const std::function<void(const CallResult&)>& on_call = {},
                               const RotarySlice* slice = nullptr, bool neutral_only = false);
  const AbiVersions& abi() const { return abi_; }
  // Why no further call can be made: the process serving the calls (--host-fd, not apart) hung or ended, and it is
  // not the gate's to restart. Empty: calls can be made.
  const std::string& cannot_call() const { return attached_dead_; }
  // Calls made in a host process of their own, as the probes are (negotiate): nothing a kernel keeps from call to
  // call (a static, the FP state it leaves) reaches this host's later calls. `body` is given the call (out of
  // place, at the negotiated versions, as call() sends it); `on_call` is told of each; the probe host's CPU is in
  // live_cpu_seconds() while it lives. Throws LoadError.
  void probe_calls(double timeout_seconds, const std::function<void(const CallResult&)>& on_call,
                   const std::function<void(const std::function<CallResult(const RopeCase&)>&)>& body);
  // Use what an earlier negotiation of the same kernel found (a fresh host for one case: no second probing).
  // features_declared: the user named the features the kernel implements (--supports): cases using them are
  // sent whatever the probes found (AbiVersions::version_for).
  void set_abi(const AbiVersions& v, bool features_declared = false) {
    abi_ = v;
    features_declared_ = features_declared;
  }
  bool features_declared() const { return features_declared_; }

  // What loading the library did to the FP environment (empty: nothing).
  const std::string& load_fp_change() const { return load_fp_change_; }
  // One line: the host's isolation as it ran ("seccomp filter in force", or why not).
  std::string sandbox_summary() const;
  uint64_t starts() const { return starts_; }
  // Calls after which the guard pages were read from the host's memory from outside (process_vm_readv): every
  // call where the host's mapping watch is not in force, else those after which it saw the arena touched.
  uint64_t guard_reads() const { return guard_reads_; }
  // Whether the live (or last) host process said its mapping watch was in force (gate/sandbox.hpp).
  bool mapping_watch() const { return mapping_watch_; }
  // CPU seconds the live host process (all its threads) has used so far; 0 when none is running. Hosts that
  // ended were reaped by this process: getrusage(RUSAGE_CHILDREN) counts them.
  double live_cpu_seconds() const;
  // The kernel's captured stdout/stderr, quoted for a verdict: each line
  // prefixed "  kernel stdout | "; at most max_lines per stream; empty when the
  // kernel printed nothing.
  std::string captured_output(size_t max_lines = 12) const;
  // Copy the non-empty captured streams into dir (kernel-stdout.txt, kernel-stderr.txt); their paths.
  std::vector<std::string> save_captured_output(const std::string& dir) const;

 private:
  void stop();
  void ensure_arena(size_t bytes);
  // A restart's host, cloned by the zygote (made at the first restart; isolation.cpp, "the zygote"): its pid,
  // or -1 where it cannot be (the caller forks).
  pid_t spawn_from_zygote(const HostSetup& s);
  void stop_zygote();

  KernelSource src_;
  HostOptions opt_;
  std::string private_dir_;
  std::string out_dir_;
  void* arena_ = nullptr;
  size_t arena_bytes_ = 0;
  int arena_fd_ = -1;             // attached (host_fd): the arena's memfd, passed to the serving process
  std::string attached_dead_;     // attached: why no further call can be made on this host (empty: it can)
  double attached_cpu0_ = -1;     // attached: the serving process's CPU seconds at this host's first start
  void start_attached();
  // Attached, served apart (host_protocol.hpp, kServedApart): the process making this channel's calls, its
  // CPU clock, the CPU of those that ended (their last reading), and whether any channel was served apart.
  pid_t apart_pid_ = -1;
  int apart_pidfd_ = -1;
  clockid_t apart_clock_ = 0;
  bool have_apart_clock_ = false;
  double apart_cpu_last_ = 0, apart_cpu_ended_ = 0;
  bool served_apart_ = false;
  void end_apart(bool kill_it);
  pid_t pid_ = -1;
  int sock_ = -1;
  int pidfd_ = -1;
  int schedstat_fd_ = -1;         // /proc/<host>/schedstat: its calling thread's CPU and run-queue time
  uint64_t host_sched_ns_ = 0;    // their sum at the end of the last call (or the start)
  clockid_t cpu_clock_ = 0;       // the host process's CPU clock
  bool have_cpu_clock_ = false;
  uint64_t seq_ = 0, starts_ = 0;
  pid_t zygote_pid_ = -1;
  int zygote_sock_ = -1;
  clockid_t zygote_clock_ = 0;
  bool have_zygote_clock_ = false;
  bool zygote_failed_ = false;    // the zygote could not clone here: hosts are forked by the gate
  std::string load_fp_change_;
  std::string seccomp_error_;
  bool protection_checked_ = true;  // process_vm_readv can see the host's guard pages
  bool guards_intact_ = false;      // the last call's guard pages are each PROT_NONE (read back, or watched)
  uint64_t guard_reads_ = 0;
  bool mapping_watch_ = false;
  // call_alone: its host is the one running; the members of the host process it parked (those swap_parked
  // exchanges), restored after it.
  bool alone_ = false;
  struct Parked {
    pid_t pid = -1;
    int sock = -1, pidfd = -1, schedstat_fd = -1;
    uint64_t host_sched_ns = 0;
    clockid_t cpu_clock = 0;
    bool have_cpu_clock = false;
    uint64_t seq = 0;
    bool guards_intact = false, mapping_watch = false;
    std::string seccomp_error;
  } parked_;
  void swap_parked();
  AbiVersions abi_;                 // probed: negotiate() or set_abi()
  KernelHost* probe_host_ = nullptr;  // negotiate()'s host of the probes, while they run
  double probes_cpu_ = 0;             // attached: the CPU the serving process spent on the probes' channels
  bool features_declared_ = false;
};

// One call in a host of its own (started and stopped around it).
CallResult call_isolated(rc_rope_apply_fn fn, const RopeCase& c, bool in_place, double timeout_seconds);

std::string describe(const CallResult& r);

}  // namespace ropecheck::gate
