// What the default gate of the built-in scalar kernel costs, row family by row family: the seconds it counts
// against --budget-seconds (docs/gate.md, "The budget": CPU seconds of the gate and of its kernel host, plus
// the time kernel calls are blocked, which is ~0 here), as GateResult::cost records them.
//
//   BM_ScalarDefaultGate   `ropecheck gate --impl scalar` with every default (4000 random cases, 25 executions
//                          per property row and dtype x layout, seed 1), no report files. Its time is the
//                          whole run's count (manual time); the counters are each part's, in seconds:
//                          start, matrix, special_values, v2, property (all 18 property rows) and one counter
//                          per property row (p_<id>), sequence, repeat, large, random, verdict; plus calls.
//
// A busy machine stretches the wall time, not these figures (CPU time moves by a few percent with cache
// contention): compare runs on one machine. scripts/bench.sh writes them to reports/benchmarks_gate.json and
// the "Gate" section of reports/benchmarks.md.
#include <benchmark/benchmark.h>

#include <cctype>
#include <map>
#include <string>

#include "gate/gate.hpp"
#include "impls/registry.hpp"
#include "properties/engine.hpp"
#include "properties/promise.hpp"

using namespace ropecheck;

namespace {

// The options `ropecheck gate --impl scalar --quiet` runs with (cli/gate_command.cpp), without report files.
gate::GateOptions default_scalar_options() {
  const Implementation& k = *find_implementation("scalar");
  const KernelPromise p = promise_of(k);
  gate::GateOptions opt;
  opt.angle_model = p.angle_model;
  opt.error_model = p.error_model;
  opt.contract = p.contract;
  opt.kernel_arg = "--impl scalar";
  opt.quiet = true;
  return opt;
}

// "property: relative per axis" -> "p_relative_per_axis"; other parts keep their names, '_' for spaces.
std::string counter_name(const std::string& part) {
  std::string s = part.rfind("property: ", 0) == 0 ? "p_" + part.substr(10) : part;
  for (char& ch : s)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return s;
}

void BM_ScalarDefaultGate(benchmark::State& st) {
  const Implementation& k = *find_implementation("scalar");
  const gate::GateOptions opt = default_scalar_options();
  gate::keep_large_buffers_in_heap();  // as the CLI runs
  std::map<std::string, double> sums;
  double calls = 0;
  for (auto _ : st) {
    const gate::GateResult r = gate::run_gate(k, opt);
    if (!r.pass) {
      st.SkipWithError(("the default gate of the scalar kernel failed: " + r.verdict_reason).c_str());
      return;
    }
    if (!r.budget_cuts.empty()) {
      st.SkipWithError("the budget cut the default gate of the scalar kernel");
      return;
    }
    st.SetIterationTime(r.budget_used);
    for (const auto& [part, s] : r.cost) {
      sums[counter_name(part)] += s;
      if (part.rfind("property: ", 0) == 0) sums["property"] += s;
    }
    calls += double(r.calls);
  }
  for (const auto& [name, s] : sums) st.counters[name] = benchmark::Counter(s, benchmark::Counter::kAvgIterations);
  st.counters["calls"] = benchmark::Counter(calls, benchmark::Counter::kAvgIterations);
}

}  // namespace

BENCHMARK(BM_ScalarDefaultGate)->UseManualTime()->Iterations(1)->Unit(benchmark::kMillisecond);
