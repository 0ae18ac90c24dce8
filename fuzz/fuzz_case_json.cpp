// libFuzzer target: the gate's case JSON reader (gate/case_json.hpp), which
// reads replay files and exported case manifests. Any input must either be
// rejected with std::runtime_error (a clear message) or give a record that
// writes back to JSON that reads again to the same JSON. Anything else
// (another exception type, a sanitizer report) is a finding.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

#include "gate/case_json.hpp"

namespace rg = ropecheck::gate;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const nlohmann::json j = nlohmann::json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return -1;
  rg::CaseRecord r;
  try {
    r = rg::record_from_json(j);
  } catch (const std::runtime_error&) {
    return 0;  // rejected with a message: fine
  }
  const nlohmann::json back = rg::record_to_json(r);
  try {
    const nlohmann::json again = rg::record_to_json(rg::record_from_json(back));
    if (again != back) {
      std::fprintf(stderr, "fuzz_case_json: write(read(write(r))) != write(r):\n%s\n---\n%s\n", back.dump(1).c_str(),
                   again.dump(1).c_str());
      std::abort();
    }
  } catch (const std::runtime_error& e) {
    std::fprintf(stderr, "fuzz_case_json: a record that was read does not read back after writing: %s\n%s\n",
                 e.what(), back.dump(1).c_str());
    std::abort();
  }
  return 0;
}
