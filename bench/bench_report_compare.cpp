// `report compare` on many checks and buckets: from_json (duplicate detection) and compare_reports, which
// index series, buckets and checks by name. Both were quadratic (a linear find per item: 20k checks took
// 13 s); the rate per check should stay flat from 10k to 100k checks. Per CPU second (single-threaded).
#include <benchmark/benchmark.h>

#include <string>

#include "reports/report.hpp"

using namespace ropecheck;

namespace {

nlohmann::json make_report(size_t n_checks, bool current) {
  report::Report r;
  r.histogram_edges = report::default_histogram_edges();
  for (size_t k = 0; k < n_checks; ++k) {
    report::Check c;
    c.name = "gate/check-" + std::to_string(current ? n_checks - 1 - k : k);
    c.source = "gate";
    c.status = current && k % 1000 == 7 ? "fail" : "pass";
    r.checks.push_back(c);
  }
  return report::to_json(r);
}

void BM_LoadAndCompare(benchmark::State& st) {
  const size_t n = size_t(st.range(0));
  const nlohmann::json base = make_report(n, false), cur = make_report(n, true);
  for (auto _ : st) {
    const report::CompareResult res = report::compare_reports(report::from_json(base), report::from_json(cur), {});
    benchmark::DoNotOptimize(res.diffs.size());
  }
  st.SetItemsProcessed(int64_t(st.iterations()) * int64_t(n));
  st.counters["checks"] = double(n);
}

}  // namespace

BENCHMARK(BM_LoadAndCompare)->Arg(10000)->Arg(100000)->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime();
