// Running one kernel call in isolation: a forked child process with a timeout,
// buffers in shared memory surrounded by guard bytes and followed by a guard
// page, outputs poisoned with a signalling-NaN pattern before the call.
#pragma once

#include <cstdint>
#include <string>

#include "core/rope_case.hpp"
#include "ropecheck/kernel_abi.h"

namespace ropecheck::gate {

enum class CallStatus {
  ok,           // returned RC_OK
  declined,     // returned RC_UNSUPPORTED
  error_code,   // returned something else
  crashed,      // killed by a signal, or exited without returning
  hung,         // still running at the timeout; killed
};

struct CallResult {
  CallStatus status = CallStatus::ok;
  int rc = 0;           // the kernel's return value (ok/declined/error_code)
  int signal = 0;       // crashed: the signal (0: the child exited with exit_code)
  int exit_code = 0;
  double seconds = 0;   // wall time of the call, including the fork
  Bytes out;            // the output buffer after the call (in place: the buffer)
  // Memory checks (only meaningful for ok):
  size_t unwritten = 0;              // output elements still holding the poison
  size_t first_unwritten = 0;
  size_t guard_before_bytes = 0;     // guard bytes before the output (or in-place buffer) that changed
  size_t guard_after_bytes = 0;      // guard bytes between the buffer's end and the guard page that changed
  size_t input_guard_bytes = 0;      // the same around the input buffer (out-of-place)
  size_t input_changed = 0;          // input elements changed by an out-of-place call
  size_t first_input_changed = 0;
};

// The poison pattern of a dtype: a signalling NaN (never produced by the
// harness's inputs, nor by IEEE arithmetic).
uint32_t poison_bits(Dtype d);

// Call fn on the case (in place: in == out) in a child process.
CallResult call_isolated(rc_rope_apply_fn fn, const RopeCase& c, bool in_place, double timeout_seconds);

std::string describe(const CallResult& r);

}  // namespace ropecheck::gate
