// Throughput of the differential check behind fuzz_differential, on the
// committed seed corpus (fuzz/corpus/fuzz_differential): the whole check
// (every implementation, reference, judge), the reference alone, and the
// kernels alone. items/s = cases/s, the uninstrumented upper bound of the
// fuzzer's exec/s (reports/fuzz.md has the instrumented figures).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

#include "fuzz/differential.hpp"
#include "reference/reference.hpp"

using namespace ropecheck;

namespace {

// Seed cases; small = at most 64 pairs per call.
const std::vector<fuzz::FuzzCase>& seed_cases(bool small) {
  static const auto load = [](bool only_small) {
    std::vector<fuzz::FuzzCase> v;
    const std::filesystem::path dir = std::filesystem::path(ROPECHECK_SOURCE_DIR) / "fuzz/corpus/fuzz_differential";
    std::vector<std::filesystem::path> files;
    for (const auto& e : std::filesystem::directory_iterator(dir)) files.push_back(e.path());
    std::sort(files.begin(), files.end());
    for (const auto& f : files) {
      std::ifstream s(f, std::ios::binary);
      const std::vector<char> b((std::istreambuf_iterator<char>(s)), std::istreambuf_iterator<char>());
      auto fc = fuzz::decode_case(reinterpret_cast<const uint8_t*>(b.data()), b.size());
      if (fc && (!only_small || fc->rope.n_tokens() * fc->rope.n_heads * fc->rope.n_pairs_per_head() <= 64))
        v.push_back(std::move(*fc));
    }
    if (v.empty()) throw std::runtime_error("no seed cases in " + dir.string());
    return v;
  };
  static const std::vector<fuzz::FuzzCase> all = load(false), smalls = load(true);
  return small ? smalls : all;
}

void BM_DifferentialCheck(benchmark::State& st) {
  const auto& cases = seed_cases(st.range(0) != 0);
  const auto impls = fuzz::registered_implementations();
  size_t n = 0;
  for (auto _ : st) {
    std::string r = fuzz::check_implementations(cases[n++ % cases.size()], impls);
    if (!r.empty()) st.SkipWithError(r.c_str());
    benchmark::DoNotOptimize(r);
  }
  st.SetItemsProcessed(int64_t(st.iterations()));
  st.counters["impls"] = double(impls.size());
}
BENCHMARK(BM_DifferentialCheck)->Arg(0)->Arg(1)->ArgName("small");

void BM_ReferenceOnly(benchmark::State& st) {
  const auto& cases = seed_cases(st.range(0) != 0);
  size_t n = 0;
  for (auto _ : st) benchmark::DoNotOptimize(reference_rope(cases[n++ % cases.size()].rope));
  st.SetItemsProcessed(int64_t(st.iterations()));
}
BENCHMARK(BM_ReferenceOnly)->Arg(0)->Arg(1)->ArgName("small");

void BM_KernelsOnly(benchmark::State& st) {
  const auto& cases = seed_cases(st.range(0) != 0);
  Bytes out;
  size_t n = 0;
  for (auto _ : st) {
    const RopeCase& c = cases[n++ % cases.size()].rope;
    for (const Implementation& impl : implementations())
      if (impl.supports(c.dtype) && impl.supports(c.layout)) benchmark::DoNotOptimize(run_kernel(impl, c, out));
  }
  st.SetItemsProcessed(int64_t(st.iterations()));
}
BENCHMARK(BM_KernelsOnly)->Arg(0)->Arg(1)->ArgName("small");

}  // namespace

BENCHMARK_MAIN();
