// Throughput of the built-in kernels (every registered implementation: scalar,
// conventional-fp32, simd and each simd-<target>) x dtype x layout on three
// shapes, in GB/s counting bytes read + written, measured side by side with a
// memcpy of the same bytes, alternately with memcpy inside each iteration
// ("paired", for the targets table), and with the per-token cos/sin rows alone
// (impls/trig_row.hpp's scalar row and the SIMD TrigRow).
//
//   decode  : 1 token    x 32 heads x 128 dims
//   l2      : 64 tokens  x 32 heads x 128 dims (in + out fit in L2)
//   l2-1row : 1 token    x 2048 heads x 128 dims (l2's bytes, one cos/sin row)
//   prefill : 4096 tokens x 32 heads x 128 dims
//
// Rates use the benchmark thread's CPU time (Google Benchmark's default): on a
// shared machine wall time mostly measures the other jobs.
//
// Besides the usual Google Benchmark flags, `--report_md=FILE` writes a
// Markdown table of the medians (or the single runs) with ratios to memcpy
// and to scalar, the CPU model and the date (scripts/bench.sh uses it);
// `--reference_json`, `--gate_json` and `--gate_calls_json` add the sections of
// bench_reference, bench_gate and bench_gate_calls from their JSON output;
// `--extra_md=FILE` appends FILE verbatim (reports/mlas-outside.md: the
// comparison with ONNX Runtime's MLAS kernel, measured outside the repository).
#include <benchmark/benchmark.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif
#include <ctime>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/rope_case.hpp"
#include "core/tensor_call.hpp"
#include "impls/registry.hpp"
#include "reference/reference.hpp"
#include "impls/simd/simd_common.hpp"
#include "impls/simd/simd_kernels.hpp"

using namespace ropecheck;

namespace {

struct Shape {
  const char* name;
  size_t tokens;
  int64_t first_position;
  uint32_t heads = 32;
};
constexpr uint32_t kDim = 128;
// l2-1row has the bytes of l2 in one token of 2048 heads: one cos/sin row
// instead of 64, so l2 - l2-1row is the rows' cost and l2-1row the loop's.
const Shape kShapes[] = {
    {"decode", 1, 4096}, {"l2", 64, 1000}, {"l2-1row", 1, 1000, 2048}, {"prefill", 4096, 0}};

// A 64-byte aligned buffer (what tensor allocators give; std::vector's 16-byte
// offset would make every 64-byte access split two cache lines).
struct AlignedBuffer {
  std::unique_ptr<uint8_t, decltype(&std::free)> p{nullptr, &std::free};
  size_t size = 0;
  void assign(size_t n, uint8_t v) {
    p.reset(static_cast<uint8_t*>(std::aligned_alloc(64, (n + 63) / 64 * 64)));
    size = n;
    std::memset(p.get(), v, n);
  }
  uint8_t* data() const { return p.get(); }
};

// One input per (dtype, shape), built once; in and out are separate,
// pre-faulted, 64-byte aligned buffers.
struct Data {
  RopeCase c;
  AlignedBuffer in, out;
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
    c.n_heads = s.heads;
    c.base = 10000.0;
    for (size_t t = 0; t < s.tokens; ++t) c.positions.push_back(s.first_position + int64_t(t));
    c.input.resize(c.n_bytes());
    std::mt19937_64 rng(12345);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    for (size_t k = 0; k < c.n_elements(); ++k) store_f32(d, c.input.data(), k, nd(rng));
    slot->in.assign(c.n_bytes(), 0);
    std::memcpy(slot->in.data(), c.input.data(), c.n_bytes());
    slot->out.assign(c.n_bytes(), 0);
  }
  slot->c.layout = l;
  return *slot;
}

int64_t rw_bytes(const RopeCase& c) { return 2 * int64_t(c.n_bytes()); }

void BM_kernel(benchmark::State& state, const Implementation* impl, Dtype d, Layout l, Shape s) {
  Data& data = data_for(d, l, s);
  const rc_rope_args a = data.c.args(data.in.data(), data.out.data());
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

// The kernel and a memcpy of the same bytes, alternately in every iteration
// (wall time of each, summed): on a machine shared with other jobs a burst of
// interference slows both alike, so their ratio is steadier than the ratio of
// two benchmarks run seconds apart. Counter x_memcpy = memcpy time / kernel time.
void BM_paired(benchmark::State& state, const Implementation* impl, Dtype d, Layout l, Shape s) {
  Data& data = data_for(d, l, s);
  const rc_rope_args a = data.c.args(data.in.data(), data.out.data());
  using clock = std::chrono::steady_clock;
  double tk = 0, tm = 0;
  for (auto _ : state) {
    const auto t0 = clock::now();
    if (impl->fn(&a) != RC_OK) {
      state.SkipWithError("kernel returned an error");
      break;
    }
    benchmark::ClobberMemory();
    const auto t1 = clock::now();
    std::memcpy(data.out.data(), data.in.data(), data.c.n_bytes());
    benchmark::ClobberMemory();
    const auto t2 = clock::now();
    const double k = std::chrono::duration<double>(t1 - t0).count(), m = std::chrono::duration<double>(t2 - t1).count();
    tk += k;
    tm += m;
    state.SetIterationTime(k + m);
  }
  if (tk > 0) state.counters["x_memcpy"] = tm / tk;
}

// A copy of the same bytes with non-temporal (streaming) stores, the other bound a kernel's stores can aim at:
// they bypass the cache, so a large copy does not read the destination lines first. 64-byte aligned buffers
// (AlignedBuffer): AVX-512 or AVX streaming stores where the CPU has them (chosen at run time), SSE2's
// otherwise (every x86-64), and memcpy on other architectures. The tail (< 64 bytes) is copied plainly; an
// sfence orders the streamed stores before the next iteration.
#if defined(__x86_64__) || defined(__i386__)
__attribute__((target("avx512f"))) void nt_copy_avx512(const uint8_t* in, uint8_t* out, size_t n) {
  size_t i = 0;
  for (; i + 64 <= n; i += 64)
    _mm512_stream_si512(reinterpret_cast<__m512i*>(out + i), _mm512_load_si512(reinterpret_cast<const void*>(in + i)));
  std::memcpy(out + i, in + i, n - i);
  _mm_sfence();
}
__attribute__((target("avx"))) void nt_copy_avx(const uint8_t* in, uint8_t* out, size_t n) {
  size_t i = 0;
  for (; i + 64 <= n; i += 64) {
    _mm256_stream_si256(reinterpret_cast<__m256i*>(out + i), _mm256_load_si256(reinterpret_cast<const __m256i*>(in + i)));
    _mm256_stream_si256(reinterpret_cast<__m256i*>(out + i + 32),
                        _mm256_load_si256(reinterpret_cast<const __m256i*>(in + i + 32)));
  }
  std::memcpy(out + i, in + i, n - i);
  _mm_sfence();
}
void nt_copy_sse2(const uint8_t* in, uint8_t* out, size_t n) {
  size_t i = 0;
  for (; i + 64 <= n; i += 64)
    for (size_t k = 0; k < 64; k += 16)
      _mm_stream_si128(reinterpret_cast<__m128i*>(out + i + k), _mm_load_si128(reinterpret_cast<const __m128i*>(in + i + k)));
  std::memcpy(out + i, in + i, n - i);
  _mm_sfence();
}
const char* nt_copy_kind() {
  return __builtin_cpu_supports("avx512f") ? "AVX-512 vmovntdq" : __builtin_cpu_supports("avx") ? "AVX vmovntdq" : "SSE2 movntdq";
}
void nt_copy(const uint8_t* in, uint8_t* out, size_t n) {
  static const auto fn = __builtin_cpu_supports("avx512f") ? &nt_copy_avx512
                         : __builtin_cpu_supports("avx")   ? &nt_copy_avx
                                                           : &nt_copy_sse2;
  fn(in, out, n);
}
#else
const char* nt_copy_kind() { return "memcpy (no streaming stores on this architecture)"; }
void nt_copy(const uint8_t* in, uint8_t* out, size_t n) { std::memcpy(out, in, n); }
#endif

void BM_ntcopy(benchmark::State& state, Dtype d, Shape s) {
  Data& data = data_for(d, Layout::interleaved, s);
  for (auto _ : state) {
    nt_copy(data.in.data(), data.out.data(), data.c.n_bytes());
    benchmark::DoNotOptimize(data.out.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * rw_bytes(data.c));
}

void BM_memcpy(benchmark::State& state, Dtype d, Shape s) {
  Data& data = data_for(d, Layout::interleaved, s);
  for (auto _ : state) {
    std::memcpy(data.out.data(), data.in.data(), data.c.n_bytes());
    benchmark::DoNotOptimize(data.out.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * rw_bytes(data.c));
}

// ABI v3 shapes (issue 21, scope 3). `table:KIND`: the same call with its cos/sin given as an f32 table of that
// kind (the conventional f32 pipeline's values: what a caller's cache holds), a row per position; the kernel reads
// the table instead of computing angles. `strided`: the call in the tensor form, q's tokens 3 x head_dim x heads
// apart (q a slice of a fused qkv buffer) and q_out compact. Bytes counted as the flat call's.
struct V3Data {
  RopeCase c;
  AlignedBuffer q, q_out, pos, table0, table1;  // 64-byte aligned, as the flat call's
  std::vector<int64_t> shapes;
  rc_rope_args a{};
};

V3Data& v3_data_for(Dtype d, Layout l, const Shape& s, int kind /* TableKind, or -1: strided */) {
  static std::map<std::string, std::unique_ptr<V3Data>> cache;
  const std::string key = std::string(to_string(d)) + "/" + std::string(to_string(l)) + "/" + s.name + "/" +
                          std::to_string(kind);
  auto& slot = cache[key];
  if (!slot) {
    slot = std::make_unique<V3Data>();
    V3Data& v = *slot;
    const Data& flat = data_for(d, l, s);
    v.c = flat.c;
    v.c.layout = l;
    if (kind >= 0) {
      v.c = *with_given_table(v.c, TableKind(kind), Dtype::f32, TablePipeline::conventional_f32);
      v.q.assign(v.c.input.size(), 0);
      std::memcpy(v.q.data(), v.c.input.data(), v.c.input.size());
      v.q_out.assign(v.c.n_bytes(), 0);
      v.a = v.c.args(v.q.data(), v.q_out.data(), 3);  // (lays the table out: abi_table_bytes)
      for (int k : {0, 1}) {
        AlignedBuffer& t = k ? v.table1 : v.table0;
        const auto& bytes = v.c.abi_table_bytes[size_t(k)];
        if (bytes.empty()) continue;
        t.assign(bytes.size(), 0);
        std::memcpy(t.data(), bytes.data(), bytes.size());
      }
      v.shapes.assign(kTensorShapeSlots, 0);
      TensorBuffers b;
      b.table[0] = v.table0.data();
      b.table[1] = v.table1.size == 0 ? nullptr : v.table1.data();
      b.shapes = v.shapes.data();
      point_v3_args(v.c, false, b, v.a);
      v.a.in = v.q.data();
      v.a.out = v.q_out.data();
    } else {
      v.c.tensor = TensorCall{};
      v.c.tensor->pad[0][1] = uint32_t(2 * kDim * s.heads);
      const TensorSizes z = tensor_sizes(v.c, false);
      v.q.assign(z.q, 0);
      v.q_out.assign(z.q_out, 0);
      v.pos.assign(z.pos, 0);
      v.shapes.assign(kTensorShapeSlots, 0);
      TensorBuffers b;
      b.q = v.q.data();
      b.q_out = v.q_out.data();
      b.pos = v.pos.data();
      b.shapes = v.shapes.data();
      fill_tensor_buffers(v.c, false, b, 0);
      v.a = v.c.args(nullptr, nullptr, 3);
      point_v3_args(v.c, false, b, v.a);
    }
  }
  return *slot;
}

void BM_v3(benchmark::State& state, const Implementation* impl, Dtype d, Layout l, Shape s, int kind) {
  V3Data& v = v3_data_for(d, l, s, kind);
  for (auto _ : state) {
    if (impl->fn(&v.a) != RC_OK) {
      state.SkipWithError("kernel returned an error");
      break;
    }
    benchmark::DoNotOptimize(v.q_out.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * rw_bytes(v.c));
}

// The per-token cos/sin rows alone (theta table once per call, then one row
// per token), counted with the f32 kernel's bytes: the GB/s the f32 kernel
// could reach if loads, rotation and stores were free. `scalar` is
// cos_sin_row (impls/trig_row.hpp), `simd` the dispatched target's TrigRow.
void BM_trig_row(benchmark::State& state, bool vectorised, Shape s) {
  Data& data = data_for(Dtype::f32, Layout::interleaved, s);
  const rc_rope_args a = data.c.args(data.in.data(), data.out.data());
  std::vector<float> c(kDim / 2 + simd::kRowPad), sn(kDim / 2 + simd::kRowPad);
  const simd::RowHook row = simd::supported_targets().front().row;
  for (auto _ : state) {
    const ThetaTable& th = theta_table_cached(&a);
    for (uint64_t t = 0; t < a.n_tokens; ++t) {
      if (vectorised) {
        row(&a, t, c.data(), sn.data());
      } else {
        cos_sin_row(token_angle(&a, th, t), th, a.rotary_dim / 2, c.data(), sn.data());
      }
      benchmark::DoNotOptimize(c.data());
      benchmark::DoNotOptimize(sn.data());
    }
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * rw_bytes(data.c));
}

std::string bench_name(const std::string& what, Dtype d, const char* layout, const Shape& s) {
  return what + "/" + std::string(to_string(d)) + "/" + layout + "/" + s.name;
}

// Every benchmark also reports the minimum over repetitions ("min": the best
// time, the usual estimate of what code can do on a machine shared with other
// jobs), next to the median.
void with_min(benchmark::internal::Benchmark* b) {
  b->ComputeStatistics("min", [](const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); });
}

void register_all() {
  for (const Shape& s : kShapes) {
    for (Dtype d : kAllDtypes) with_min(benchmark::RegisterBenchmark(bench_name("memcpy", d, "-", s).c_str(), BM_memcpy, d, s));
    for (Dtype d : kAllDtypes) with_min(benchmark::RegisterBenchmark(bench_name("ntcopy", d, "-", s).c_str(), BM_ntcopy, d, s));
    with_min(benchmark::RegisterBenchmark((std::string("trig-row:scalar/f32/-/") + s.name).c_str(), BM_trig_row,
                                          false, s));
    with_min(benchmark::RegisterBenchmark((std::string("trig-row:simd/f32/-/") + s.name).c_str(), BM_trig_row,
                                          true, s));
    for (const Implementation& impl : implementations())
      if (impl.name == "simd")
        for (Dtype d : kAllDtypes)
          for (Layout l : kAllLayouts)
            with_min(benchmark::RegisterBenchmark(
                         bench_name("paired:" + impl.name, d, std::string(to_string(l)).c_str(), s).c_str(), BM_paired,
                         &impl, d, l, s)
                         ->UseManualTime());
    for (const Implementation& impl : implementations())
      for (Dtype d : kAllDtypes)
        for (Layout l : kAllLayouts)
          if (impl.supports(d) && impl.supports(l))
            with_min(benchmark::RegisterBenchmark(
                bench_name("kernel:" + impl.name, d, std::string(to_string(l)).c_str(), s).c_str(), BM_kernel, &impl,
                d, l, s));
    // The ABI v3 shapes of the built-ins (f32 and bf16): tables of two kinds, and strided q.
    const std::pair<int, const char*> v3_shapes[] = {{int(TableKind::cos_sin_2), "table:cos-sin-2"},
                                                     {int(TableKind::cos_sin_cat), "table:cos-sin-cat"},
                                                     {-1, "strided"}};
    for (const Implementation& impl : implementations())
      if (impl.name == "scalar" || impl.name == "simd")
        for (Dtype d : {Dtype::f32, Dtype::bf16})
          for (Layout l : kAllLayouts)
            for (const auto& [kind, what] : v3_shapes)
              with_min(benchmark::RegisterBenchmark(
                  bench_name(std::string(what) + ":" + impl.name, d, std::string(to_string(l)).c_str(), s).c_str(),
                  BM_v3, &impl, d, l, s, kind));
  }
}

// ---- the Markdown report ---------------------------------------------------------

// Collects, per benchmark, the median aggregate (or the plain run when not
// repeated) and the minimum time over the repetitions.
class Collector : public benchmark::ConsoleReporter {
 public:
  std::map<std::string, double> gbps;       // name -> GB/s (median)
  std::map<std::string, double> ns_per_it;  // name -> ns per iteration (median)
  std::map<std::string, double> best_ns;    // name -> ns per iteration (minimum)
  std::map<std::string, double> paired;     // name -> x_memcpy counter (median)
  std::map<std::string, double> paired_best;  // name -> x_memcpy counter (its minimum over repetitions)
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& r : runs) {
      if (r.error_occurred) continue;
      const bool agg = r.run_type == Run::RT_Aggregate;
      std::string name = r.run_name.str();
      const std::string manual = "/manual_time";  // UseManualTime benchmarks' suffix
      if (name.size() > manual.size() && name.compare(name.size() - manual.size(), manual.size(), manual) == 0)
        name.resize(name.size() - manual.size());
      const double mult = r.time_unit == benchmark::kNanosecond    ? 1.0
                          : r.time_unit == benchmark::kMicrosecond ? 1e3
                          : r.time_unit == benchmark::kMillisecond ? 1e6
                                                                   : 1e9;
      auto xm = r.counters.find("x_memcpy");
      if (agg && r.aggregate_name == "min") {
        best_ns[name] = r.GetAdjustedCPUTime() * mult;
        if (xm != r.counters.end()) paired_best[name] = xm->second.value;
        continue;
      }
      if (xm != r.counters.end() && (!agg || r.aggregate_name == "median")) paired[name] = xm->second.value;
      if (agg && r.aggregate_name != "median") continue;
      if (!agg && r.repetitions > 1) continue;
      auto it = r.counters.find("bytes_per_second");
      if (it != r.counters.end()) gbps[name] = it->second.value / 1e9;
      ns_per_it[name] = r.GetAdjustedCPUTime() * mult;
      if (!agg) best_ns[name] = ns_per_it[name];
    }
  }
  // GB/s at the best time.
  double best_gbps(const std::string& name) const {
    auto g = gbps.find(name), n = ns_per_it.find(name), b = best_ns.find(name);
    if (g == gbps.end() || n == ns_per_it.end() || b == best_ns.end() || b->second <= 0) return -1;
    return g->second * n->second / b->second;
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

// The reference's throughput from bench_reference's JSON (--reference_json).
std::string reference_section(const std::string& json_path) {
  if (json_path.empty()) return "";
  std::ifstream f(json_path);
  if (!f) throw std::runtime_error("cannot read " + json_path);
  const nlohmann::json j = nlohmann::json::parse(f);
  std::ostringstream md;
  md << "## Reference (bench/bench_reference.cpp)\n\nCorrectly rounded output elements per CPU second, one core, "
        "4096 x 32 x 128 interleaved, base 10000 (the exact reference: MPFR at 134 bits behind rigorous "
        "double-double evaluations of cos/sin and of the rotation; `mpfr_only` sends every cos/sin and pair "
        "through MPFR).\n\n"
        "| benchmark | M elements/s | ms/call | Ziv retries/call | MPFR pairs/call |\n|---|---:|---:|---:|---:|\n";
  for (const auto& b : j.at("benchmarks")) {
    if (b.value("run_type", "") == "aggregate" && b.value("aggregate_name", "") != "median") continue;
    const double unit = b.at("time_unit") == "ms" ? 1.0 : b.at("time_unit") == "us" ? 1e-3 : b.at("time_unit") == "ns" ? 1e-6 : 1e3;
    md << "| " << b.at("name").get<std::string>() << " | " << fmt(b.value("items_per_second", 0.0) / 1e6) << " | "
       << fmt(b.at("cpu_time").get<double>() * unit, 1) << " | " << fmt(b.value("ziv_retries_per_call", 0.0), 0)
       << " | " << fmt(b.value("mpfr_pairs_per_call", 0.0), 0) << " |\n";
  }
  return md.str() + "\n";
}

// The gate's cost per row family from bench_gate's JSON (--gate_json) and the per-call CPU figures from
// bench_gate_calls' (--gate_calls_json).
std::string gate_section(const std::string& gate_json, const std::string& calls_json) {
  if (gate_json.empty() && calls_json.empty()) return "";
  std::ostringstream md;
  md << "## Gate (bench/bench_gate.cpp, bench/bench_gate_calls.cpp)\n\n";
  auto load = [](const std::string& p) {
    std::ifstream f(p);
    if (!f) throw std::runtime_error("cannot read " + p);
    return nlohmann::json::parse(f);
  };
  if (!gate_json.empty()) {
    const nlohmann::json j = load(gate_json);
    md << "What the default gate of the built-in scalar kernel (`ropecheck gate --impl scalar`: every row, 4000 "
          "random cases) counts against `--budget-seconds`: CPU seconds of the gate and its kernel host process "
          "(blocked call time is ~0 here), per part of the run, in run order (docs/gate.md, \"The budget\"). "
          "One run per repetition; a busy machine stretches the wall time, not these.\n\n";
    // The median of the repetitions when there are several, else the one run.
    const auto& all = j.at("benchmarks");
    const bool aggregated = std::any_of(all.begin(), all.end(), [](const nlohmann::json& x) {
      return x.value("run_type", "") == "aggregate" && x.value("aggregate_name", "") == "median";
    });
    for (const auto& b : all) {
      if (aggregated != (b.value("aggregate_name", "") == "median")) continue;
      const double unit = b.at("time_unit") == "ms" ? 1e-3 : b.at("time_unit") == "us" ? 1e-6 : 1.0;
      md << "| part | CPU s |\n|---|---:|\n";
      const char* order[] = {"start", "matrix", "special_values", "v2", "property", "sequence", "repeat", "large",
                             "random", "verdict"};
      for (const char* k : order)
        if (b.contains(k)) md << "| " << k << " | " << fmt(b.at(k).get<double>(), 3) << " |\n";
      md << "| **whole gate** | **" << fmt(b.at("real_time").get<double>() * unit, 3) << "** |\n\n";
      md << "The property rows one by one:\n\n| row | CPU s |\n|---|---:|\n";
      for (const auto& [k, v] : b.items())
        if (k.rfind("p_", 0) == 0) md << "| " << k.substr(2) << " | " << fmt(v.get<double>(), 3) << " |\n";
      md << "\n" << fmt(b.value("calls", 0.0), 0) << " kernel calls.\n\n";
      break;
    }
  }
  if (!calls_json.empty()) {
    const nlohmann::json j = load(calls_json);
    md << "One 1 x 2 x 64 f32 call (a decode step, positions < 100000), per call:\n\n| benchmark | us |\n|---|---:|\n";
    for (const auto& b : j.at("benchmarks")) {
      if (b.value("run_type", "") == "aggregate" && b.value("aggregate_name", "") != "median") continue;
      const std::string name = b.at("name").get<std::string>();
      const double unit = b.at("time_unit") == "ms" ? 1e3 : b.at("time_unit") == "us" ? 1.0 : 1e-3;
      const bool cpu = name.find("JudgeOnly") != std::string::npos;
      md << "| " << name << (cpu ? " (CPU)" : name.find("Cpu") != std::string::npos ? " (CPU, both processes)" : " (wall)")
         << " | " << fmt(b.at(cpu ? "cpu_time" : "real_time").get<double>() * unit, 1) << " |\n";
    }
    md << "\n";
  }
  return md.str();
}

bool write_markdown(const std::string& path, const Collector& col, int repetitions, const std::string& cmdline,
                    const std::string& reference_md) {
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
  md << "Shapes: decode = 1 token x 32 heads x 128 dims; l2 = 64 x 32 x 128 (in + out = 2 MiB f32); "
        "l2-1row = 1 x 2048 x 128 (the bytes of l2 with one cos/sin row instead of 64); prefill = 4096 x 32 x 128 "
        "(rotary_dim = head_dim = 128, base 10000). In and out are separate 64-byte aligned buffers. `x memcpy` "
        "is the kernel's GB/s over a memcpy of the same bytes measured in the same run (median, and best = "
        "minimum time of the repetitions for both); `x NT copy` over a copy of the same bytes with non-temporal "
        "(streaming) stores, "
     << nt_copy_kind()
     << " here, which does not read the destination's lines into the cache (median); `x scalar` over the "
        "`scalar` kernel (medians).\n\n";

  auto get = [&](const std::map<std::string, double>& m, const std::string& k) {
    auto it = m.find(k);
    return it == m.end() ? -1.0 : it->second;
  };
  auto ratio = [](double a, double b) { return a > 0 && b > 0 ? fmt(a / b) : std::string("?"); };
  for (const Shape& s : kShapes) {
    md << "## " << s.name << "\n\n";
    md << "| kernel | dtype | layout | GB/s | x memcpy | x memcpy (best) | x NT copy | x scalar | us/call |\n"
          "|---|---|---|---:|---:|---:|---:|---:|---:|\n";
    for (Dtype d : kAllDtypes) {
      const std::string n = bench_name("memcpy", d, "-", s), nt = bench_name("ntcopy", d, "-", s);
      md << "| memcpy | " << to_string(d) << " | - | " << fmt(get(col.gbps, n)) << " | 1.00 | 1.00 | "
         << ratio(get(col.gbps, n), get(col.gbps, nt)) << " | | " << fmt(get(col.ns_per_it, n) / 1e3) << " |\n";
      md << "| NT copy | " << to_string(d) << " | - | " << fmt(get(col.gbps, nt)) << " | "
         << ratio(get(col.gbps, nt), get(col.gbps, n)) << " | " << ratio(col.best_gbps(nt), col.best_gbps(n))
         << " | 1.00 | | " << fmt(get(col.ns_per_it, nt) / 1e3) << " |\n";
    }
    for (const char* which : {"scalar", "simd"}) {
      const std::string tr = std::string("trig-row:") + which + "/f32/-/" + s.name;
      const std::string mc = bench_name("memcpy", Dtype::f32, "-", s), nt = bench_name("ntcopy", Dtype::f32, "-", s);
      if (get(col.gbps, tr) > 0)
        md << "| cos/sin rows alone (" << which << ") | f32-equiv | - | " << fmt(get(col.gbps, tr)) << " | "
           << ratio(get(col.gbps, tr), get(col.gbps, mc)) << " | " << ratio(col.best_gbps(tr), col.best_gbps(mc))
           << " | " << ratio(get(col.gbps, tr), get(col.gbps, nt)) << " | | " << fmt(get(col.ns_per_it, tr) / 1e3)
           << " |\n";
    }
    for (const Implementation& impl : implementations())
      for (Dtype d : kAllDtypes)
        for (Layout l : kAllLayouts) {
          const std::string ls(to_string(l));
          const std::string n = bench_name("kernel:" + impl.name, d, ls.c_str(), s);
          const double g = get(col.gbps, n);
          if (g < 0) continue;
          const std::string mc = bench_name("memcpy", d, "-", s), nt = bench_name("ntcopy", d, "-", s);
          const double sc = get(col.gbps, bench_name("kernel:scalar", d, ls.c_str(), s));
          md << "| " << impl.name << " | " << to_string(d) << " | " << ls << " | " << fmt(g) << " | "
             << ratio(g, get(col.gbps, mc)) << " | " << ratio(col.best_gbps(n), col.best_gbps(mc)) << " | "
             << ratio(g, get(col.gbps, nt)) << " | " << ratio(g, sc) << " | " << fmt(get(col.ns_per_it, n) / 1e3)
             << " |\n";
        }
    md << "\n";
  }
  // The ABI v3 shapes against the flat call of the same bytes.
  md << "## ABI v3 shapes\n\n`table:KIND`: the flat call's rotation with its cos/sin given as an f32 table of that kind "
        "(the conventional f32 pipeline's values), read instead of computed; `strided`: the call in the tensor form, "
        "q's tokens a fused qkv buffer's stride apart (3 x heads x head_dim), q_out compact. GB/s over the flat "
        "call's bytes (medians), and the ratio to the flat call (`kernel:` above) of the same kernel.\n\n"
        "| shape | kernel | dtype | layout | table:cos-sin-2 | x flat | table:cos-sin-cat | x flat | strided | x flat "
        "|\n|---|---|---|---|---:|---:|---:|---:|---:|---:|\n";
  for (const Shape& s : kShapes)
    for (const char* impl : {"scalar", "simd"})
      for (Dtype d : {Dtype::f32, Dtype::bf16})
        for (Layout l : kAllLayouts) {
          const std::string ls(to_string(l));
          const double flat = get(col.gbps, bench_name(std::string("kernel:") + impl, d, ls.c_str(), s));
          std::string cells;
          bool any = false;
          for (const char* what : {"table:cos-sin-2", "table:cos-sin-cat", "strided"}) {
            const double g = get(col.gbps, bench_name(std::string(what) + ":" + impl, d, ls.c_str(), s));
            any = any || g > 0;
            cells += " " + fmt(g) + " | " + ratio(g, flat) + " |";
          }
          if (any) md << "| " << s.name << " | " << impl << " | " << to_string(d) << " | " << ls << " |" << cells << "\n";
        }
  md << "\n";
  // The targets of issue 3, for the dispatched `simd` kernel: the paired
  // ratio (kernel and memcpy alternating within each iteration) decides.
  md << "## Targets (dispatched `simd`)\n\n`paired` alternates the kernel and a memcpy of the same bytes in every "
        "iteration and divides the summed times (median over the repetitions, and the lowest repetition); the "
        "two columns after it are the separate benchmarks above (medians, and best times). The target is judged "
        "on the paired median.\n\n"
        "| shape | dtype | layout | x memcpy (paired) | paired, lowest repetition | x memcpy (separate, median) "
        "| x memcpy (separate, best) | target | met |\n|---|---|---|---:|---:|---:|---:|---:|---|\n";
  for (const Shape& s : kShapes) {
    for (Dtype d : kAllDtypes) {
      double target = 0;
      if (std::string(s.name) == "prefill") target = d == Dtype::f32 ? 0.8 : 0.7;
      if (std::string(s.name) == "l2" && d == Dtype::f32) target = 0.5;
      if (target == 0) continue;
      for (Layout l : kAllLayouts) {
        const std::string ls(to_string(l));
        const std::string n = bench_name("kernel:simd", d, ls.c_str(), s), mc = bench_name("memcpy", d, "-", s);
        const std::string pn = bench_name("paired:simd", d, ls.c_str(), s);
        const double g = get(col.gbps, n), m = get(col.gbps, mc), pr = get(col.paired, pn);
        if (pr <= 0) continue;
        md << "| " << s.name << " | " << to_string(d) << " | " << ls << " | " << fmt(pr) << " | "
           << fmt(get(col.paired_best, pn)) << " | " << ratio(g, m) << " | "
           << ratio(col.best_gbps(n), col.best_gbps(mc)) << " | " << fmt(target) << " | "
           << (pr >= target ? "yes" : "**no**") << " |\n";
      }
    }
  }
  // What bounds them, from the measurements above: the rows (l2 - l2-1row,
  // and the rows alone), the loop (l2-1row: one row, the bytes of l2) and the
  // memory (memcpy at prefill).
  md << "\n## What bounds the SIMD kernels\n\n"
        "Per dtype and layout of the dispatched `simd` (medians, us per call). `rows` = l2 - l2-1row (64 rows "
        "against one, same bytes); `loop` = l2-1row (the loads, rotation, conversions and stores of l2's bytes "
        "with one row); `compute at prefill` = 64 x l2 (prefill has 64 times l2's tokens and bytes), what the "
        "kernel would take if memory were as fast as at l2; `memcpy` = memcpy of the prefill bytes. A kernel "
        "that overlapped compute and memory perfectly would take max(compute, memcpy).\n\n"
        "| dtype | layout | rows at l2 | loop at l2 | loop x memcpy at l2 | compute at prefill | memcpy at prefill "
        "| kernel at prefill |\n|---|---|---:|---:|---:|---:|---:|---:|\n";
  const Shape& l2 = kShapes[1];
  const Shape& l2r = kShapes[2];
  const Shape& pf = kShapes[3];
  for (Dtype d : kAllDtypes)
    for (Layout l : kAllLayouts) {
      const std::string ls(to_string(l));
      const double k_l2 = get(col.ns_per_it, bench_name("kernel:simd", d, ls.c_str(), l2));
      const double k_l2r = get(col.ns_per_it, bench_name("kernel:simd", d, ls.c_str(), l2r));
      const double k_pf = get(col.ns_per_it, bench_name("kernel:simd", d, ls.c_str(), pf));
      const double m_l2 = get(col.ns_per_it, bench_name("memcpy", d, "-", l2));
      const double m_pf = get(col.ns_per_it, bench_name("memcpy", d, "-", pf));
      if (k_l2 <= 0 || k_l2r <= 0 || k_pf <= 0 || m_l2 <= 0 || m_pf <= 0) continue;
      md << "| " << to_string(d) << " | " << ls << " | " << fmt((k_l2 - k_l2r) / 1e3) << " | " << fmt(k_l2r / 1e3)
         << " | " << fmt(m_l2 / k_l2r) << " | " << fmt(64 * k_l2 / 1e3, 0) << " | " << fmt(m_pf / 1e3, 0) << " | "
         << fmt(k_pf / 1e3, 0) << " |\n";
    }
  md << "\nSee docs/simd.md for the reading of these figures.\n\n" << reference_md;
  std::ofstream f(path);
  f << md.str();
  return bool(f);
}

}  // namespace

int main(int argc, char** argv) {
  std::string report_md, reference_json, gate_json, gate_calls_json, extra_md;
  std::string cmdline = "bench_kernels";
  int repetitions = 1;
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind("--report_md=", 0) == 0) {
      report_md = a.substr(12);
      continue;
    }
    if (a.rfind("--reference_json=", 0) == 0) {
      reference_json = a.substr(17);
      continue;
    }
    if (a.rfind("--gate_json=", 0) == 0) {
      gate_json = a.substr(12);
      continue;
    }
    if (a.rfind("--gate_calls_json=", 0) == 0) {
      gate_calls_json = a.substr(18);
      continue;
    }
    if (a.rfind("--extra_md=", 0) == 0) {
      extra_md = a.substr(11);
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
    std::string reference_md;
    try {
      reference_md = reference_section(reference_json);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "bench_kernels: --reference_json: %s\n", e.what());
      return 2;
    }
    try {
      reference_md += gate_section(gate_json, gate_calls_json);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "bench_kernels: --gate_json/--gate_calls_json: %s\n", e.what());
      return 2;
    }
    if (!extra_md.empty()) {  // a hand-written section measured elsewhere (reports/mlas-outside.md), verbatim
      std::ifstream f(extra_md);
      if (!f) {
        std::fprintf(stderr, "bench_kernels: cannot read --extra_md=%s\n", extra_md.c_str());
        return 2;
      }
      std::ostringstream text;
      text << f.rdbuf();
      reference_md += text.str();
    }
    if (!write_markdown(report_md, col, repetitions, cmdline, reference_md)) {
      std::fprintf(stderr, "bench_kernels: cannot write %s\n", report_md.c_str());
      return 1;
    }
    std::fprintf(stderr, "bench_kernels: wrote %s\n", report_md.c_str());
  }
  return 0;
}
