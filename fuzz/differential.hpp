// The differential check every kernel fuzz target runs: each implementation
// against the exact reference under its own angle model and error bound
// (judge_output: accuracy, special values, pass-through), plus
//  - the input buffer is left untouched by an out-of-place call,
//  - an in-place call (when the case asks for one) is bit-identical to the
//    out-of-place call,
//  - for implementations that promise it (bit_exact_layouts), the other
//    layout on the permuted input gives the permuted output bit for bit.
// Buffers are exact-size heap blocks, so AddressSanitizer sees any read or
// write past the end of a tensor (the typical vector-tail bug).
#pragma once

#include <string>
#include <vector>

#include "fuzz/fuzz_case.hpp"
#include "impls/registry.hpp"
#include "properties/promise.hpp"

namespace ropecheck::fuzz {

// Empty when every implementation is right on the case; otherwise a report
// naming the implementation, the case (describe_case), the check that failed
// and the findings (got, rounded, exact, error).
// A kernel and what it is held to (properties/promise.hpp).
struct JudgedKernel {
  const Implementation* impl;
  KernelPromise promise;
};
std::string check_implementations(const FuzzCase& fc, const std::vector<JudgedKernel>& impls);

// Print the report to stderr and abort() (libFuzzer records the input).
// With ROPECHECK_FUZZ_KEEP_GOING=1 in the environment it only prints and
// counts (for coverage runs and triage: see every failing input at once).
void fail(const std::string& report);
// Failures printed under ROPECHECK_FUZZ_KEEP_GOING.
size_t failures_kept();

// The registry's implementations, each with its built-in promise.
std::vector<JudgedKernel> registered_implementations();

}  // namespace ropecheck::fuzz
