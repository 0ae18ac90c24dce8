// Kernel calls per second through the gate's isolation, on small cases (one token, two heads, head_dim 64:
// a decode step), measured in one run so the ratios compare like with like:
//   BM_FreshProcessPerCall  a new host process for every call (the old design: a fork per call)
//   BM_ReusedHost           one host process making every call (the gate's design: docs/gate.md)
//   BM_ReusedHostJudged     the same, each output judged against the exact reference (the gate's rate)
//   BM_FreshProcessJudged   a fresh process per call, judged (the old gate's rate)
// Wall time (the calls wait for another process), the built-in scalar kernel. And CPU time, which a busy
// machine does not stretch (issue 24's figures, per 1 x 2 x 64 call):
//   BM_JudgeOnly            judging one call's output (the exact reference and the judge), in this process
//   BM_HostRoundTripCpu     one call through the reused host: CPU of this process and of the host process
//   BM_CallAloneCpu         one call in a new host process cloned from the zygote (as a restart after a crash and
//                           the diagnosis's call alone): CPU of this process, its reaped children and the zygote
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include <sys/resource.h>
#include <time.h>

#include "gate/gate.hpp"
#include "gate/isolation.hpp"
#include "impls/registry.hpp"
#include "properties/promise.hpp"

using namespace ropecheck;

namespace {

RopeCase small_case(uint64_t seed) {
  std::mt19937_64 rng(seed);
  RopeCase c;
  c.dtype = Dtype::f32;
  c.layout = Layout::interleaved;
  c.head_dim = 64;
  c.rotary_dim = 64;
  c.n_heads = 2;
  c.base = 10000;
  c.positions = {int64_t(rng() % 100000)};
  c.input.assign(c.n_bytes(), 0);
  std::uniform_real_distribution<float> u(-4, 4);
  for (size_t k = 0; k < c.n_elements(); ++k) store_f32(c.dtype, c.input.data(), k, u(rng));
  return c;
}

const Implementation& scalar() { return *find_implementation("scalar"); }

void run(benchmark::State& st, bool fresh, bool judged) {
  const Implementation& k = scalar();
  gate::KernelHost host(gate::KernelSource{"", k.fn}, gate::HostOptions{});
  const KernelPromise p = promise_of(k);
  const Criteria cr = Criteria::of(p.error_model, p.contract);
  uint64_t seed = 1;
  int64_t failed = 0;
  for (auto _ : st) {
    const RopeCase c = small_case(seed++);
    const gate::CallResult r = fresh ? gate::call_isolated(k.fn, c, false, 10) : host.call(c, false, 10);
    if (judged) {
      const gate::CaseVerdict v = gate::judge_call(c, false, AngleModel::exact, cr, r);
      failed += !v.pass;
    } else {
      failed += r.status != gate::CallStatus::ok;
    }
  }
  if (failed) st.SkipWithError("a call of the correct kernel failed");
  st.SetItemsProcessed(int64_t(st.iterations()));
}

double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

// The judging alone: outputs made beforehand (the scalar kernel, in this process), then judge_call per
// iteration, as the gate does after each call.
void BM_JudgeOnly(benchmark::State& st) {
  const Implementation& k = scalar();
  const KernelPromise p = promise_of(k);
  const Criteria cr = Criteria::of(p.error_model, p.contract);
  constexpr size_t kCases = 256;
  std::vector<RopeCase> cases;
  std::vector<gate::CallResult> results;
  for (size_t n = 0; n < kCases; ++n) {
    cases.push_back(small_case(n + 1));
    gate::CallResult r;
    r.out.assign(cases.back().n_bytes(), 0);
    const rc_rope_args a = cases.back().args(cases.back().input.data(), r.out.data());
    if (k.fn(&a) != RC_OK) {
      st.SkipWithError("the scalar kernel declined a small case");
      return;
    }
    results.push_back(std::move(r));
  }
  size_t n = 0;
  int64_t failed = 0;
  for (auto _ : st) {
    const gate::CaseVerdict v = gate::judge_call(cases[n], false, AngleModel::exact, cr, results[n]);
    failed += !v.pass;
    n = (n + 1) % kCases;
  }
  if (failed) st.SkipWithError("a call of the correct kernel failed");
  st.SetItemsProcessed(int64_t(st.iterations()));
}

// One call through the reused host, charged the CPU time of both processes (manual time).
void BM_HostRoundTripCpu(benchmark::State& st) {
  const Implementation& k = scalar();
  gate::KernelHost host(gate::KernelSource{"", k.fn}, gate::HostOptions{});
  host.start();
  uint64_t seed = 1;
  int64_t failed = 0;
  for (auto _ : st) {
    const RopeCase c = small_case(seed++);
    const double c0 = process_cpu_seconds() + host.live_cpu_seconds();
    const gate::CallResult r = host.call(c, false, 10);
    st.SetIterationTime(process_cpu_seconds() + host.live_cpu_seconds() - c0);
    failed += r.status != gate::CallStatus::ok;
  }
  if (failed) st.SkipWithError("a call of the correct kernel failed");
  st.SetItemsProcessed(int64_t(st.iterations()));
}

double reaped_children_cpu_seconds() {
  rusage ru{};
  getrusage(RUSAGE_CHILDREN, &ru);
  return double(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) + double(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
}

// A call in a host of its own (KernelHost::call_alone): a process cloned from the zygote, its sandbox installed,
// the call made, the process ended and reaped. Charged the CPU of every process involved (manual time).
void BM_CallAloneCpu(benchmark::State& st) {
  const Implementation& k = scalar();
  gate::KernelHost host(gate::KernelSource{"", k.fn}, gate::HostOptions{});
  host.start();
  uint64_t seed = 1;
  int64_t failed = 0;
  auto cpu = [&] { return process_cpu_seconds() + reaped_children_cpu_seconds() + host.live_cpu_seconds(); };
  for (auto _ : st) {
    const RopeCase c = small_case(seed++);
    const double c0 = cpu();
    const gate::CallResult r = host.call_alone(c, false, 10);
    st.SetIterationTime(cpu() - c0);
    failed += r.status != gate::CallStatus::ok;
  }
  if (failed) st.SkipWithError("a call of the correct kernel failed");
  st.SetItemsProcessed(int64_t(st.iterations()));
}

void BM_FreshProcessPerCall(benchmark::State& st) { run(st, true, false); }
void BM_ReusedHost(benchmark::State& st) { run(st, false, false); }
void BM_FreshProcessJudged(benchmark::State& st) { run(st, true, true); }
void BM_ReusedHostJudged(benchmark::State& st) { run(st, false, true); }

}  // namespace

BENCHMARK(BM_FreshProcessPerCall)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_ReusedHost)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_FreshProcessJudged)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_ReusedHostJudged)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_JudgeOnly)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_HostRoundTripCpu)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_CallAloneCpu)->UseManualTime()->Unit(benchmark::kMicrosecond);
