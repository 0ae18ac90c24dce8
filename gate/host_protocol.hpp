// The protocol between the gate and its kernel host (gate/isolation.cpp), and between the gate and a process that
// serves its calls itself (KernelSource::host_fd: python/ropecheck/_host.py mirrors these structs, and the
// tests' serving processes use them). Internal to ropecheck: gate and host come from one build.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ropecheck::gate {

// ---- the protocol between the gate and its host ----------------------------
// One SOCK_SEQPACKET socket pair: each message is one fixed-size struct. The host
// keeps its end as fd 3; a kernel writing into it garbles a reply, which the gate
// sees (wrong size, magic or sequence number) and treats as a crash of the host.

constexpr uint32_t kMagic = 0x52435048;  // "RCPH"
constexpr int kHostFd = 3;
// Guard spans of a call, adjacent ones merged: a guard page between two regions, one before the first and after
// the last, and the pages between a sparse tensor's elements (isolation.cpp, "sparse tensors").
constexpr size_t kMaxGuards = 48;
constexpr uint64_t kFileSizeLimit = 16u << 20;  // RLIMIT_FSIZE of the host: its stdout/stderr files
constexpr int kLostSocket = 121;                 // the host's exit status when its control socket broke

struct Command {
  uint32_t magic = kMagic;
  uint32_t n_guards = 0;
  uint64_t seq = 0;
  uint64_t args_off = 0;                 // the rc_rope_args in the arena
  uint64_t used_bytes = 0;               // made read-write before the call
  uint64_t guard_off[kMaxGuards] = {};   // each the first of guard_pages[k] pages made PROT_NONE for the call
  uint64_t flags = 0;                    // kGuardsIntact
  uint64_t guard_pages[kMaxGuards] = {};
};

static_assert(sizeof(Command) == 808, "python/ropecheck/_host.py mirrors Command's layout (COMMAND)");

// The gate read every guard page of the previous call after it returned and found each still PROT_NONE: the
// host need not protect those pages again (a kernel thread that changes one later is still reported, by the
// check after the call that finds it changed).
constexpr uint64_t kGuardsIntact = 1;

enum ReplyKind : uint32_t { kReady = 1, kLoadFailed = 2, kDone = 3, kFault = 4 };  // (and kEnded: served apart)

// Reply::watch. The host's mapping watch is in force (gate/sandbox.hpp: every system call that can change a
// page's protection is trapped unless the host makes it); and, in a kDone, one of them met the arena since
// the host's previous reply, or the host could not protect a guard page: the gate then reads every guard page
// from outside, as it does after every call where the watch is not in force.
constexpr uint32_t kWatchInForce = 1, kWatchTouched = 2;

// Attached (KernelSource::host_fd): the gate opens each channel with one message on host_fd carrying two
// descriptors (SCM_RIGHTS): the channel's end of a new socket pair, then the arena's memfd. The serving process
// maps the arena (at an address of its own: it translates the pointers in the args, which are the gate's, by
// arena_base) and answers on the channel exactly as a host does: kReady (text: what serves the calls), then one
// kDone per Command (text: when rc is an error code, what the kernel said of it). python/ropecheck/_host.py.
constexpr uint32_t kOpenChannel = 5;
constexpr int kServerGone = 122;  // CallResult::exit_code: the attached process ended or closed the channel

// Served apart (opt-in: python's check(isolated=True)). A kReady whose `watch` has kServedApart says that this
// channel's calls are made by a process of its own (its pid in fault_addr), forked by the serving process, which
// keeps its own copy of the channel: when that process ends other than by the channel's end, the serving process
// says so with one kEnded reply (rc: the signal that ended it, fault_code 1; or its exit status, fault_code 0).
// The gate counts the call a crash, and the next call opens a new channel; a call that does not return within
// its timeout gets the process killed (SIGKILL) by the gate, and is a hang. The channel ends; the run goes on.
constexpr uint32_t kServedApart = 4;
constexpr uint32_t kEnded = 6;

struct OpenChannel {
  uint32_t magic = kMagic;
  uint32_t kind = kOpenChannel;
  uint64_t arena_base = 0;
  uint64_t arena_bytes = 0;
};

struct Reply {
  uint32_t magic = kMagic;
  uint32_t kind = 0;
  uint64_t seq = 0;
  int32_t rc = 0;
  uint32_t watch = 0;  // kReady, kDone: kWatchInForce, kWatchTouched (0 from a serving process)
  uint64_t fp_before = 0, fp_after = 0;
  // kFault (sent from the host's SIGSEGV/SIGBUS handler as it dies): the faulting address, si_code, and whether
  // the access was a write (1), a read (0), or not known (2).
  uint64_t fault_addr = 0;
  int32_t fault_code = 0;
  uint32_t fault_write = 2;
  char text[1024] = {};  // kLoadFailed: why; kReady: why seccomp is not in force (empty: it is)
};

}  // namespace ropecheck::gate
