// libFuzzer target: the report/baseline JSON reader (reports/report.hpp).
// Any input must either be rejected with ReportError (a clear message, exit 2
// in the CLI) or give a Report that
//  - writes back to JSON that reads again to the same JSON (round trip),
//  - renders to Markdown and HTML, and compares against itself without a
//    failing difference;
//  - without its optional per-bucket "rms" fields (a report written before
//    they existed: schema version 1 still) reads too, and compares against
//    the full report without a failing difference either way (the bias
//    compare's fallback rule).
// Anything else (another exception type, a sanitizer report) is a finding.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>

#include "reports/report.hpp"

namespace rr = ropecheck::report;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const nlohmann::json j = nlohmann::json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return -1;
  rr::Report r;
  try {
    r = rr::from_json(j);
  } catch (const rr::ReportError&) {
    return 0;  // rejected with a message: fine
  }
  const nlohmann::json back = rr::to_json(r);
  rr::Report r2;
  try {
    r2 = rr::from_json(back);
  } catch (const rr::ReportError& e) {
    std::fprintf(stderr, "fuzz_report_json: a report that was read does not read back after writing: %s\n%s\n",
                 e.what(), back.dump(1).c_str());
    std::abort();
  }
  if (rr::to_json(r2) != back) {
    std::fprintf(stderr, "fuzz_report_json: write(read(write(r))) != write(r):\n%s\n---\n%s\n", back.dump(1).c_str(),
                 rr::to_json(r2).dump(1).c_str());
    std::abort();
  }
  (void)rr::render_markdown(r);
  (void)rr::render_html(r);
  const rr::CompareResult self = rr::compare_reports(r, r);
  if (self.failed()) {
    std::fprintf(stderr, "fuzz_report_json: a report fails the baseline compare against itself:\n%s\n%s\n",
                 self.table().c_str(), back.dump(1).c_str());
    std::abort();
  }
  nlohmann::json old = back;
  bool had_rms = false;
  for (auto& s : old["series"]) {
    had_rms |= s["all"].erase("rms") > 0;
    for (auto& b : s["buckets"]) had_rms |= b.erase("rms") > 0;
  }
  if (had_rms) {
    rr::Report r_old;
    try {
      r_old = rr::from_json(old);
    } catch (const rr::ReportError& e) {
      std::fprintf(stderr, "fuzz_report_json: a report without its rms fields does not read: %s\n%s\n", e.what(),
                   old.dump(1).c_str());
      std::abort();
    }
    for (const auto& [b, c] : {std::pair{&r_old, &r}, std::pair{&r, &r_old}}) {
      const rr::CompareResult res = rr::compare_reports(*b, *c);
      if (res.failed()) {
        std::fprintf(stderr, "fuzz_report_json: a report fails the compare against itself without rms:\n%s\n%s\n",
                     res.table().c_str(), back.dump(1).c_str());
        std::abort();
      }
    }
  }
  return 0;
}
