// What the kernel host does to itself before it loads a kernel library: the
// floating-point control state it compares before and after (a library or a
// call that changes it is a finding), and the seccomp-bpf filter that keeps a
// kernel from signalling, tracing or forking processes, executing programs and
// writing files. docs/gate.md, "The sandbox", states what this does and does
// not prevent.
#pragma once

#include <cstddef>
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

// The mapping watch (docs/gate.md, "Guard pages"): with the filter above in force, a second filter traps
// (SIGSYS) every system call that can change the protection of memory a process has mapped -- mprotect,
// pkey_mprotect, munmap, mremap, remap_file_pages, mmap with MAP_FIXED, shmat with SHM_REMAP -- unless it is
// made through watched_syscall; the handler notes whether the call touched [lo, lo + bytes) and makes it,
// unchanged, through watched_syscall (the caller sees the same result). rt_sigaction may not replace the
// SIGSYS handler (EPERM). Returns empty when the watch is in force, else why not (nothing is installed then).
std::string install_mapping_watch(uintptr_t lo, size_t bytes);
// Whether a watched call touched the range since the last time this was asked (and forget it).
bool take_mapping_watch_touch();
// Note a change of the range that the watch did not see (the host's own protection of a page failed).
void note_mapping_watch_touch();
// A system call made from the one place the watch lets through; -errno on failure.
long watched_syscall(long nr, long a0 = 0, long a1 = 0, long a2 = 0, long a3 = 0, long a4 = 0, long a5 = 0);

// What a SIGSYS death means, for verdicts.
inline constexpr const char* kForbiddenSyscallText =
    "made a forbidden system call (killed by SIGSYS from the host's seccomp filter: signalling or tracing another "
    "process, fork, exec, or writing, creating or removing a file)";

}  // namespace ropecheck::gate
