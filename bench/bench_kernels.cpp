// Throughput of the built-in kernels (every registered implementation: scalar,
// conventional-fp32, simd and each simd-<target>) x dtype x layout on three
// shapes, in GB/s counting bytes read + written, measured side by side with a
// memcpy of the same bytes and with the per-token cos/sin row alone (the
// accurate_cos_sin row the scalar and SIMD kernels share).
//
//   decode  : 1 token    x 32 heads x 128 dims
//   l2      : 64 tokens  x 32 heads x 128 dims (in + out fit in L2)
//   prefill : 4096 tokens x 32 heads x 128 dims
//
// Rates use the benchmark thread's CPU time (Google Benchmark's default): on a
// shared machine wall time mostly measures the other jobs.
//
// Besides the usual Google Benchmark flags, `--report_md=FILE` writes a
// Markdown table of the medians (or the single runs) with ratios to memcpy
// and to scalar, the CPU model and the date (scripts/bench.sh uses it).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "core/rope_case.hpp"
#include "impls/registry.hpp"
#include "impls/simd/simd_common.hpp"
#include "impls/simd/simd_kernels.hpp"

using namespace ropecheck;

namespace {

struct Shape {
  const char* name;
  size_t tokens;
  int64_t first_position;
};
constexpr uint32_t kHeads = 32, kDim = 128;
const Shape kShapes[] = {{"decode", 1, 4096}, {"l2", 64, 1000}, {"prefill", 4096, 0}};

// One input per (dtype, shape), built once; out is a separate, pre-faulted buffer.
struct Data {
  RopeCase c;
  Bytes out;
};

Data& data_for(Dtype d, Layout l, const Shape& s) {
  static std::map<std::string, std::unique_ptr<Data>> cache;
  const std::string key = std::string(to_string(d)) + "/" + s.name;
  auto& slot = cache[key];
  if (!slot) {
    slot = std::make_unique<Data>();
    RopeCase& c = slot->c;
    c.dtype = d;
    c.head_dim = kDim;
    c.rotary_dim = kDim;
    c.n_heads = kHeads;
    c.base = 10000.0;
    for (size_t t = 0; t < s.tokens; ++t) c.positions.push_back(s.first_position + int64_t(t));
    c.input.resize(c.n_bytes());
    std::mt19937_64 rng(12345);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    for (size_t k = 0; k < c.n_elements(); ++k) store_f32(d, c.input.data(), k, nd(rng));
    slot->out.assign(c.n_bytes(), 0);
  }
  slot->c.layout = l;
  return *slot;
}

int64_t rw_bytes(const RopeCase& c) { return 2 * int64_t(c.n_bytes()); }

void BM_kernel(benchmark::State& state, const Implementation* impl, Dtype d, Layout l, Shape s) {
  Data& data = data_for(d, l, s);
  const rc_rope_args a = data.c.args(data.c.input.data(), data.out.data());
  for (auto _ : state) {
    const int rc = impl->fn(&a);
    if (rc != RC_OK) {
      state.SkipWithError("kernel returned an error");
      break;
    }
    benchmark::DoNotOptimize(data.out.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * rw_bytes(data.c));
}

void BM_memcpy(benchmark::State& state, Dtype d, Shape s) {
  Data& data = data_for(d, Layout::interleaved, s);
  for (auto _ : state) {
    std::memcpy(data.out.data(), data.c.input.data(), data.c.n_bytes());
    benchmark::DoNotOptimize(data.out.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * rw_bytes(data.c));
}

// The per-token cos/sin rows alone (theta once per call, then
// accurate_cos_sin per token and pair), counted with the f32 kernel's bytes: the GB/s the f32
// kernel could reach if loads, rotation and stores were free.
void BM_trig_row(benchmark::State& state, Shape s) {
  Data& data = data_for(Dtype::f32, Layout::interleaved, s);
  const rc_rope_args a = data.c.args(data.c.input.data(), data.out.data());
  std::vector<float> c(kDim / 2 + simd::kRowPad), sn(kDim / 2 + simd::kRowPad);
  for (auto _ : state) {
    const std::vector<long double>& th = simd::thetas_cached(&a);
    for (uint64_t t = 0; t < a.n_tokens; ++t) {
      simd::trig_row(&a, th.data(), t, c.data(), sn.data());
      benchmark::DoNotOptimize(c.data());
      benchmark::DoNotOptimize(sn.data());
    }
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * rw_bytes(data.c));
}

std::string bench_name(const std::string& what, Dtype d, const char* layout, const Shape& s) {
  return what + "/" + std::string(to_string(d)) + "/" + layout + "/" + s.name;
}

void register_all() {
  for (const Shape& s : kShapes) {
    for (Dtype d : kAllDtypes)
      benchmark::RegisterBenchmark(bench_name("memcpy", d, "-", s).c_str(), BM_memcpy, d, s);
    benchmark::RegisterBenchmark((std::string("trig-row/f32/-/") + s.name).c_str(), BM_trig_row, s);
    for (const Implementation& impl : implementations())
      for (Dtype d : kAllDtypes)
        for (Layout l : kAllLayouts)
          if (impl.supports(d) && impl.supports(l))
            benchmark::RegisterBenchmark(
                bench_name("kernel:" + impl.name, d, std::string(to_string(l)).c_str(), s).c_str(), BM_kernel, &impl,
                d, l, s);
  }
}

// ---- the Markdown report ---------------------------------------------------------

// Collects, per benchmark, the median aggregate (or the plain run when not repeated).
class Collector : public benchmark::ConsoleReporter {
 public:
  std::map<std::string, double> gbps;      // name -> GB/s
  std::map<std::string, double> ns_per_it;  // name -> ns per iteration
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& r : runs) {
      if (r.error_occurred) continue;
      const bool agg = r.run_type == Run::RT_Aggregate;
      if (agg && r.aggregate_name != "median") continue;
      if (!agg && r.repetitions > 1) continue;
      const std::string name = r.run_name.str();
      auto it = r.counters.find("bytes_per_second");
      if (it != r.counters.end()) gbps[name] = it->second.value / 1e9;
      const double mult = r.time_unit == benchmark::kNanosecond    ? 1.0
                          : r.time_unit == benchmark::kMicrosecond ? 1e3
                          : r.time_unit == benchmark::kMillisecond ? 1e6
                                                                   : 1e9;
      ns_per_it[name] = r.GetAdjustedCPUTime() * mult;
    }
  }
};

std::string cpu_model() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("model name", 0) == 0) {
      const auto p = line.find(':');
      return p == std::string::npos ? line : line.substr(p + 2);
    }
  return "unknown";
}

std::string fmt(double v, int prec = 2) {
  char b[64];
  std::snprintf(b, sizeof b, "%.*f", prec, v);
  return b;
}

bool write_markdown(const std::string& path, const Collector& col, int repetitions, const std::string& cmdline) {
  std::ostringstream md;
  const std::time_t now = std::time(nullptr);
  char date[64];
  std::strftime(date, sizeof date, "%Y-%m-%d %H:%M UTC", std::gmtime(&now));
  const auto& ci = benchmark::CPUInfo::Get();
  md << "# Kernel benchmarks\n\n";
  md << "Produced by `scripts/bench.sh` (bench/bench_kernels.cpp, Google Benchmark); raw results in "
        "`reports/benchmarks.json`.\n\n";
  md << "- date: " << date << "\n";
  md << "- CPU: " << cpu_model() << " (" << ci.num_cpus << " logical CPUs, " << fmt(ci.cycles_per_second / 1e6, 0)
     << " MHz";
  for (const auto& c : ci.caches)
    if (c.type != "Instruction") md << ", L" << c.level << " " << c.size / 1024 << " KiB";
  md << ")\n";
  md << "- SIMD targets compiled: ";
  for (const auto& t : simd::compiled_targets()) md << "`" << t.name << "` ";
  md << "; `simd` dispatches to `" << simd::dispatched_target_name() << "` here\n";
  md << "- " << (repetitions > 1 ? "median of " + std::to_string(repetitions) + " repetitions" : "single runs")
     << ", one thread; GB/s = bytes read + written (2 x the tensor) per second of the benchmark thread's CPU "
        "time (the machine is shared with other jobs, so wall time is inflated by descheduling; CPU time "
        "still includes memory stalls)\n";
  md << "- command: `" << cmdline << "`\n\n";
  md << "Shapes: decode = 1 token x 32 heads x 128 dims; l2 = 64 x 32 x 128; prefill = 4096 x 32 x 128 "
        "(rotary_dim = head_dim = 128, base 10000). `x memcpy` is the kernel's GB/s over a memcpy of the same "
        "bytes measured in the same run; `x scalar` over the `scalar` kernel.\n\n";

  auto get = [&](const std::map<std::string, double>& m, const std::string& k) {
    auto it = m.find(k);
    return it == m.end() ? -1.0 : it->second;
  };
  for (const Shape& s : kShapes) {
    md << "## " << s.name << "\n\n";
    md << "| kernel | dtype | layout | GB/s | x memcpy | x scalar | us/call |\n|---|---|---|---:|---:|---:|---:|\n";
    for (Dtype d : kAllDtypes) {
      const double mc = get(col.gbps, bench_name("memcpy", d, "-", s));
      md << "| memcpy | " << to_string(d) << " | - | " << fmt(mc) << " | 1.00 | | "
         << fmt(get(col.ns_per_it, bench_name("memcpy", d, "-", s)) / 1e3) << " |\n";
    }
    const std::string tr = std::string("trig-row/f32/-/") + s.name;
    if (get(col.gbps, tr) > 0)
      md << "| trig row only (accurate_cos_sin) | f32-equiv | - | " << fmt(get(col.gbps, tr)) << " | "
         << fmt(get(col.gbps, tr) / get(col.gbps, bench_name("memcpy", Dtype::f32, "-", s))) << " | | "
         << fmt(get(col.ns_per_it, tr) / 1e3) << " |\n";
    for (const Implementation& impl : implementations())
      for (Dtype d : kAllDtypes)
        for (Layout l : kAllLayouts) {
          const std::string ls(to_string(l));
          const std::string n = bench_name("kernel:" + impl.name, d, ls.c_str(), s);
          const double g = get(col.gbps, n);
          if (g < 0) continue;
          const double mc = get(col.gbps, bench_name("memcpy", d, "-", s));
          const double sc = get(col.gbps, bench_name("kernel:scalar", d, ls.c_str(), s));
          md << "| " << impl.name << " | " << to_string(d) << " | " << ls << " | " << fmt(g) << " | "
             << (mc > 0 ? fmt(g / mc) : "?") << " | " << (sc > 0 ? fmt(g / sc) : "?") << " | "
             << fmt(get(col.ns_per_it, n) / 1e3) << " |\n";
        }
    md << "\n";
  }
  // The targets of issue 3, for the dispatched `simd` kernel.
  md << "## Targets (dispatched `simd`)\n\n| shape | dtype | layout | x memcpy | target | met |\n|---|---|---|---:|---:|---|\n";
  for (const Shape& s : kShapes) {
    for (Dtype d : kAllDtypes) {
      double target = 0;
      if (std::string(s.name) == "prefill") target = d == Dtype::f32 ? 0.8 : 0.7;
      if (std::string(s.name) == "l2" && d == Dtype::f32) target = 0.5;
      if (target == 0) continue;
      for (Layout l : kAllLayouts) {
        const std::string ls(to_string(l));
        const double g = get(col.gbps, bench_name("kernel:simd", d, ls.c_str(), s));
        const double mc = get(col.gbps, bench_name("memcpy", d, "-", s));
        if (g < 0 || mc <= 0) continue;
        md << "| " << s.name << " | " << to_string(d) << " | " << ls << " | " << fmt(g / mc) << " | " << fmt(target)
           << " | " << (g / mc >= target ? "yes" : "**no**") << " |\n";
      }
    }
  }
  // What bounds them: the cos/sin row (accurate_cos_sin per token and pair, shared by
  // `scalar` and `simd`) measured alone, against memcpy and the kernel.
  md << "\n## What bounds the SIMD kernels\n\n"
        "The SIMD kernels compute the per-token cos/sin row exactly as `scalar` does (long double angle, "
        "`accurate_cos_sin` per token and pair: a long double Cody-Waite reduction and double Taylor polynomials, "
        "rounded to f32; impls/trig_row.hpp), which makes them bit-identical to `scalar`. That row is "
        "scalar code, and it is measured here alone (`trig-row`). Its time is a floor under the kernel's: "
        "`row ceiling` is the memcpy ratio the f32 kernel would have if loads, rotation and stores were free.\n\n"
        "| shape | trig row us/call | simd f32 interleaved us/call | share of kernel time in the row | row ceiling (x memcpy) "
        "| simd f32 interleaved (x memcpy) |\n|---|---:|---:|---:|---:|---:|\n";
  for (const Shape& s : kShapes) {
    const std::string tr = std::string("trig-row/f32/-/") + s.name;
    const std::string k = bench_name("kernel:simd", Dtype::f32, "interleaved", s);
    const double tns = get(col.ns_per_it, tr), kns = get(col.ns_per_it, k);
    const double mc = get(col.gbps, bench_name("memcpy", Dtype::f32, "-", s));
    if (tns <= 0 || kns <= 0 || mc <= 0) continue;
    md << "| " << s.name << " | " << fmt(tns / 1e3) << " | " << fmt(kns / 1e3) << " | " << fmt(100 * tns / kns, 0)
       << "% | " << fmt(get(col.gbps, tr) / mc) << " | " << fmt(get(col.gbps, k) / mc) << " |\n";
  }
  md << "\nThe rotation, f16/bf16 conversion and store part is the difference between the two time columns. "
        "Where a target is missed, both parts are visible here: the row is a floor that only a vectorised "
        "reduction and polynomial would lower (at the price of bit-identity with `scalar`), and the rest is the "
        "SIMD loop itself (integer RNE conversions for f16/bf16, the half-split and interleaved shuffles); see "
        "docs/simd.md.\n";
  std::ofstream f(path);
  f << md.str();
  return bool(f);
}

}  // namespace

int main(int argc, char** argv) {
  std::string report_md;
  std::string cmdline = "bench_kernels";
  int repetitions = 1;
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind("--report_md=", 0) == 0) {
      report_md = a.substr(12);
      continue;
    }
    if (a.rfind("--benchmark_repetitions=", 0) == 0) repetitions = std::max(1, std::atoi(a.c_str() + 24));
    if (i > 0 && a.rfind("--benchmark_out", 0) != 0) cmdline += " " + a;
    args.push_back(argv[i]);
  }
  int n = int(args.size());
  benchmark::Initialize(&n, args.data());
  if (benchmark::ReportUnrecognizedArguments(n, args.data())) return 2;
  register_all();
  Collector col;
  benchmark::RunSpecifiedBenchmarks(&col);
  benchmark::Shutdown();
  if (!report_md.empty()) {
    if (!write_markdown(report_md, col, repetitions, cmdline)) {
      std::fprintf(stderr, "bench_kernels: cannot write %s\n", report_md.c_str());
      return 1;
    }
    std::fprintf(stderr, "bench_kernels: wrote %s\n", report_md.c_str());
  }
  return 0;
}
