// Throughput of the exact reference: correctly rounded elements per second on
// 4096 tokens x 32 heads x 128 dims (rotary_dim 128, base 10000, interleaved),
// with cos/sin shared across heads as the reference caches them. Rates are per
// CPU second (one core; the reference is single-threaded), so they hold on a
// shared machine.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>

#include "core/rope_case.hpp"
#include "reference/reference.hpp"

using namespace ropecheck;

namespace {

RopeCase make_case(Dtype d, size_t tokens, uint32_t heads, uint32_t dim) {
  RopeCase c;
  c.dtype = d;
  c.layout = Layout::interleaved;
  c.head_dim = dim;
  c.rotary_dim = dim;
  c.n_heads = heads;
  c.base = 10000.0;
  for (size_t t = 0; t < tokens; ++t) c.positions.push_back(int64_t(t));
  c.input.resize(c.n_bytes());
  std::mt19937_64 rng(12345);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (size_t k = 0; k < c.n_elements(); ++k) store_f32(d, c.input.data(), k, nd(rng));
  return c;
}

void run(benchmark::State& state, Dtype d, AngleModel model, bool fast_path = true) {
  const RopeCase c = make_case(d, size_t(state.range(0)), uint32_t(state.range(1)), uint32_t(state.range(2)));
  ReferenceOptions opt;
  opt.angle_model = model;
  opt.fast_path = fast_path;
  uint64_t retries = 0, mpfr_pairs = 0;
  for (auto _ : state) {
    ReferenceOutput out = reference_rope(c, opt);
    retries += out.ziv_retries;
    mpfr_pairs += out.mpfr_pairs;
    benchmark::DoNotOptimize(out.rounded.data());
  }
  state.SetItemsProcessed(int64_t(state.iterations()) * int64_t(c.n_elements()));
  state.counters["ziv_retries_per_call"] = double(retries) / double(state.iterations());
  state.counters["mpfr_pairs_per_call"] = double(mpfr_pairs) / double(state.iterations());
}

void BM_reference_f32(benchmark::State& s) { run(s, Dtype::f32, AngleModel::exact); }
void BM_reference_bf16(benchmark::State& s) { run(s, Dtype::bf16, AngleModel::exact); }
void BM_reference_f16(benchmark::State& s) { run(s, Dtype::f16, AngleModel::exact); }
void BM_reference_f32_fp32_angle(benchmark::State& s) { run(s, Dtype::f32, AngleModel::fp32); }
// Every pair through MPFR (mpfr_fmms/fmma at 134 bits), no double-double pre-check.
void BM_reference_f32_mpfr_only(benchmark::State& s) { run(s, Dtype::f32, AngleModel::exact, false); }
void BM_reference_bf16_mpfr_only(benchmark::State& s) { run(s, Dtype::bf16, AngleModel::exact, false); }

}  // namespace

// tokens, heads, head_dim
BENCHMARK(BM_reference_f32)->Args({4096, 32, 128})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_reference_bf16)->Args({4096, 32, 128})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_reference_f16)->Args({4096, 32, 128})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_reference_f32_fp32_angle)->Args({4096, 32, 128})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_reference_f32_mpfr_only)->Args({4096, 32, 128})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_reference_bf16_mpfr_only)->Args({4096, 32, 128})->Unit(benchmark::kMillisecond);
