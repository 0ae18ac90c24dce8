// libFuzzer target: the .npy reader of case sets (gate/npy.hpp). Any input
// must either be rejected with std::runtime_error (a clear message) or give an
// array whose data holds exactly prod(shape) elements of its type, and which
// encodes back to bytes that decode to the same array.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "gate/npy.hpp"

namespace rg = ropecheck::gate;

namespace {

[[noreturn]] void fail(const char* what, const rg::NpyArray& a) {
  std::string shape;
  for (uint64_t d : a.shape) shape += std::to_string(d) + ",";
  std::fprintf(stderr, "fuzz_npy: %s (descr '%s', shape (%s), %zu data bytes)\n", what, a.descr.c_str(), shape.c_str(),
               a.data.size());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  rg::NpyArray a;
  try {
    a = rg::npy_decode(bytes, "fuzz input");
  } catch (const std::runtime_error&) {
    return 0;  // rejected with a message: fine
  }
  const size_t item = rg::npy_item_size(a.descr);
  if (item == 0) fail("accepted an unsupported element type", a);
  uint64_t n = item;
  bool overflow = false;
  for (uint64_t d : a.shape) overflow |= __builtin_mul_overflow(n, d, &n);
  if (overflow || n != a.data.size()) fail("data size is not prod(shape) * item size", a);
  rg::NpyArray b;
  try {
    b = rg::npy_decode(rg::npy_encode(a), "re-encoded");
  } catch (const std::runtime_error& e) {
    std::fprintf(stderr, "fuzz_npy: re-encoded array does not decode: %s\n", e.what());
    fail("round trip", a);
  }
  if (b.descr != a.descr || b.shape != a.shape || b.data != a.data) fail("decode(encode(a)) != a", a);
  return 0;
}
