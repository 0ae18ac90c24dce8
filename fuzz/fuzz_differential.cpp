// libFuzzer target: every registered implementation (scalar, conventional-fp32,
// every compiled SIMD target) against the exact reference, on cases decoded
// from the fuzzer's bytes (fuzz/fuzz_case.hpp). Any violation prints the case,
// the kernel's output, the exact value and the error, then aborts.
#include <cstddef>
#include <cstdint>

#include "fuzz/differential.hpp"


extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::vector<ropecheck::fuzz::JudgedKernel> impls = ropecheck::fuzz::registered_implementations();
  const std::optional<ropecheck::fuzz::FuzzCase> fc = ropecheck::fuzz::decode_case(data, size);
  if (!fc) return -1;  // outside the fuzzed domain: do not keep it in the corpus
  if (std::string r = ropecheck::fuzz::check_implementations(*fc, impls); !r.empty()) ropecheck::fuzz::fail(r);
  return 0;
}
