// What the kernel host does to itself before it loads a kernel library: the
// floating-point control state it compares before and after (a library or a
// call that changes it is a finding), and the seccomp-bpf filter that keeps a
// kernel from signalling, tracing or forking processes, executing programs and
// writing files. docs/gate.md, "The sandbox", states what this does and does
// not prevent.
#pragma once

#include <cstdint>
#include <string>

namespace ropecheck::gate {

// The FP control state of the calling thread, flags excluded: on x86-64 the
// MXCSR control bits (rounding, FTZ, DAZ, exception masks) and the x87 control
// word; on AArch64 the FPCR; elsewhere the C rounding mode.
struct FpControl {
  uint64_t bits = 0;
  bool operator==(const FpControl&) const = default;
};
FpControl read_fp_control();
void write_fp_control(FpControl c);
// "MXCSR 0x1f80 -> 0x9fc0: flush-to-zero on, denormals-are-zero on".
std::string describe_fp_change(FpControl before, FpControl after);

// Install the host's seccomp filter on the calling process (and every thread
// it creates later). Returns empty on success, else why not (the host then
// runs without it and the verdict says so). The filter kills the process
// (SIGSYS) on: kill/tgkill/rt_(tg)sigqueueinfo aimed at another process,
// tkill, pidfd_send_signal, ptrace, process_vm_readv/writev, fork, vfork,
// clone without CLONE_THREAD, execve(at), open/openat/creat for writing or
// creating, and the calls that create, remove, rename, link, truncate or
// change the mode or owner of files. clone3 and openat2 fail with ENOSYS (their
// flags live in memory a filter cannot read; glibc falls back to clone/openat).
std::string install_seccomp_filter();

// What a SIGSYS death means, for verdicts.
inline constexpr const char* kForbiddenSyscallText =
    "made a forbidden system call (killed by SIGSYS from the host's seccomp filter: signalling or tracing another "
    "process, fork, exec, or writing, creating or removing a file)";

}  // namespace ropecheck::gate
