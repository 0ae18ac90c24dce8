// Writes the seed corpus of the kernel fuzz targets (fuzz/corpus/<target>/),
// or with --check verifies that every seed survives encode -> decode
// unchanged (run as a test in the normal build).
//
//   fuzz_make_seeds OUT_DIR      write seed-NN files into OUT_DIR
//   fuzz_make_seeds --check      exit 1 if any seed does not round-trip
//   fuzz_make_seeds --case-json OUT_DIR
//                                write a few of the seeds as gate case records
//                                (fuzz_case_json's seeds; needs the gate)
//   fuzz_make_seeds --npy OUT_DIR
//                                write a few seed inputs as .npy (fuzz_npy's seeds)
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "fuzz/fuzz_case.hpp"
#ifdef ROPECHECK_FUZZ_HAVE_GATE
#include "gate/case_json.hpp"
#include "gate/npy.hpp"
#endif

using namespace ropecheck;
using ropecheck::fuzz::FuzzCase;

namespace {

// Input values: mostly ordinary, with the special ones the judge has rules for.
Bytes make_input(const RopeCase& c, std::mt19937& rng, int specials) {
  Bytes b(c.n_bytes());
  std::normal_distribution<float> normal(0.0f, 2.0f);
  const Format f = format_of(c.dtype);
  const double pick[] = {std::numeric_limits<double>::quiet_NaN(),
                         std::numeric_limits<double>::infinity(),
                         -std::numeric_limits<double>::infinity(),
                         f.max_finite(),
                         -f.max_finite(),
                         f.min_normal() * 0.5,  // subnormal
                         -0.0,
                         f.min_normal(),
                         f.max_finite() * 0.75};
  for (size_t k = 0; k < c.n_elements(); ++k) {
    double v = normal(rng);
    if (specials && rng() % 4 == 0) v = pick[rng() % (specials == 1 ? 4 : std::size(pick))];
    store_f32(c.dtype, b.data(), k, float(v));
  }
  return b;
}

std::vector<FuzzCase> seeds() {
  std::vector<FuzzCase> v;
  std::mt19937 rng(20261121);
  auto add = [&](Dtype d, Layout l, uint32_t rd, uint32_t hd, uint32_t heads, std::vector<int64_t> pos, double base,
                 double scale, bool in_place, int specials, std::vector<double> table = {}) {
    FuzzCase fc;
    RopeCase& c = fc.rope;
    c.dtype = d;
    c.layout = l;
    c.rotary_dim = rd;
    c.head_dim = hd;
    c.n_heads = heads;
    c.positions = std::move(pos);
    c.base = base;
    c.position_scale = scale;
    c.inv_freq = std::move(table);
    c.input = make_input(c, rng, specials);
    fc.in_place = in_place;
    v.push_back(std::move(fc));
  };
  const Dtype D[] = {Dtype::f32, Dtype::f16, Dtype::bf16};
  const Layout L[] = {Layout::interleaved, Layout::half_split};
  // Plain RoPE over every dtype and layout, rotary dims around SIMD widths.
  const uint32_t rds[] = {2, 4, 6, 8, 10, 14, 16, 18, 30, 32};
  int n = 0;
  for (Dtype d : D)
    for (Layout l : L) {
      const uint32_t rd = rds[n % std::size(rds)];
      add(d, l, rd, rd + uint32_t(n % 3), 1 + uint32_t(n % 4), {0, 1, 7, 100, 4095}, 10000.0, 1.0, n % 2 == 0, 0);
      ++n;
    }
  // Odd pair counts and pass-through dims (vector tails).
  add(Dtype::f32, Layout::interleaved, 6, 10, 3, {3, 9, 27, 81, 243, 729, 2187, 6561}, 10000.0, 1.0, false, 0);
  add(Dtype::f32, Layout::half_split, 14, 16, 2, {1, 2, 3}, 500000.0, 1.0, true, 0);
  add(Dtype::f16, Layout::interleaved, 18, 18, 4, {65535, 12345}, 10000.0, 1.0, false, 0);
  add(Dtype::bf16, Layout::half_split, 30, 34, 1, {5, 6}, 1000000.0, 1.0, true, 0);
  add(Dtype::f32, Layout::interleaved, 32, 32, 2, {8191, 8192}, 10000.0, 1.0, false, 0);
  // Large positions (long contexts and beyond).
  add(Dtype::f32, Layout::interleaved, 8, 8, 1, {int64_t(1) << 20, (int64_t(1) << 24) + 1, int64_t(1) << 31}, 10000.0,
      1.0, false, 0);
  add(Dtype::f32, Layout::half_split, 16, 16, 1, {int64_t(1) << 40, (int64_t(1) << 53) + 1, int64_t(1) << 62},
      10000.0, 1.0, false, 0);
  add(Dtype::bf16, Layout::interleaved, 8, 12, 2, {1000000, 2000000, 131072}, 500000.0, 1.0, false, 0);
  add(Dtype::f16, Layout::half_split, 12, 12, 1, {int64_t(1) << 30, 999999937}, 10000.0, 1.0, true, 0);
  // Position scaling and other bases.
  add(Dtype::f32, Layout::interleaved, 8, 8, 2, {10, 1000, 100000}, 10000.0, 0.25, false, 0);
  add(Dtype::f32, Layout::half_split, 10, 12, 1, {10, 1000}, 10000.0, 1.0 / 3, false, 0);
  add(Dtype::f16, Layout::interleaved, 4, 4, 1, {0, 5, 50}, 10000.0, 0.0, false, 0);
  add(Dtype::bf16, Layout::half_split, 6, 6, 1, {77, 78}, 2.0, -1.0, false, 0);
  add(Dtype::f32, Layout::interleaved, 4, 6, 1, {1, 12}, 1.5, 1e-30, true, 0);
  add(Dtype::f32, Layout::half_split, 8, 8, 1, {3, 4}, 0.5, 1.0, false, 0);
  add(Dtype::f32, Layout::interleaved, 12, 12, 1, {1 << 15, 2}, 1e30, 1e6, false, 0);
  // Explicit frequency tables (NTK/YaRN-style), including a zero entry.
  add(Dtype::f32, Layout::interleaved, 8, 8, 2, {1, 100, 10000}, 10000.0, 1.0, false, 0, {1.0, 0.1, 0.0, 1e-4});
  add(Dtype::f16, Layout::half_split, 6, 8, 1, {3, 300}, 10000.0, 0.5, true, 0, {0.75, -0.5, 3.999});
  add(Dtype::bf16, Layout::interleaved, 4, 4, 3, {9, 99}, 10000.0, 1.0, false, 0, {std::ldexp(1.0, -1000), 2.0});
  // Special values: NaN, Inf, huge, subnormal, signed zero inputs.
  for (Dtype d : D)
    for (Layout l : L) {
      add(d, l, 8, 10, 2, {0, 1, 2, 1000, 65535}, 10000.0, 1.0, d != Dtype::f16, 2);
    }
  add(Dtype::f32, Layout::interleaved, 2, 2, 1, {1, 2, 3, 4, 5, 6, 7, 8}, 10000.0, 1.0, false, 1);
  add(Dtype::f16, Layout::interleaved, 16, 16, 4, {1, 3}, 10000.0, 1.0, true, 2);
  return v;
}

bool same_case(const FuzzCase& a, const FuzzCase& b) {
  const RopeCase &x = a.rope, &y = b.rope;
  auto same_d = [](double p, double q) { return std::memcmp(&p, &q, sizeof p) == 0; };
  bool table = x.inv_freq.size() == y.inv_freq.size();
  for (size_t i = 0; table && i < x.inv_freq.size(); ++i) table = same_d(x.inv_freq[i], y.inv_freq[i]);
  return a.in_place == b.in_place && x.dtype == y.dtype && x.layout == y.layout && x.head_dim == y.head_dim &&
         x.rotary_dim == y.rotary_dim && x.n_heads == y.n_heads && x.positions == y.positions &&
         same_d(x.base, y.base) && same_d(x.position_scale, y.position_scale) && table && x.input == y.input;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::strcmp(argv[1], "--case-json") == 0) {
#ifdef ROPECHECK_FUZZ_HAVE_GATE
    const std::vector<FuzzCase> all = seeds();
    for (size_t i = 0; i < all.size(); i += 4) {
      gate::CaseRecord r;
      r.c = all[i].rope;
      r.in_place = all[i].in_place;
      r.angle_model = i % 8 ? AngleModel::exact : AngleModel::fp32;
      r.bound = 5.5;
      r.check = "fuzz-seed";
      r.failure = i % 8 ? "" : "accuracy: pair error 9 u > bound 5.5 u";
      char name[40];
      std::snprintf(name, sizeof name, "/seed-%02zu.json", i);
      gate::write_record(argv[2] + std::string(name), r);
    }
    return 0;
#else
    std::fprintf(stderr, "built without the gate (gate/case_json.hpp)\n");
    return 2;
#endif
  }
  if (argc == 3 && std::strcmp(argv[1], "--npy") == 0) {
#ifdef ROPECHECK_FUZZ_HAVE_GATE
    const std::vector<FuzzCase> all = seeds();
    for (size_t i = 0; i < all.size(); i += 5) {
      const RopeCase& c = all[i].rope;
      gate::NpyArray a;
      a.descr = c.dtype == Dtype::f32 ? "<f4" : c.dtype == Dtype::f16 ? "<f2" : "<u2";
      a.shape = {c.n_tokens(), c.n_heads, c.head_dim};
      a.data = c.input;
      char name[40];
      std::snprintf(name, sizeof name, "/seed-%02zu.npy", i);
      gate::npy_write(argv[2] + std::string(name), a);
    }
    return 0;
#else
    std::fprintf(stderr, "built without the gate (gate/npy.hpp)\n");
    return 2;
#endif
  }
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT_DIR | --check\n", argv[0]);
    return 2;
  }
  const std::vector<FuzzCase> all = seeds();
  const bool check = std::strcmp(argv[1], "--check") == 0;
  int bad = 0;
  for (size_t i = 0; i < all.size(); ++i) {
    const std::vector<uint8_t> bytes = fuzz::encode_case(all[i]);
    const auto back = fuzz::decode_case(bytes.data(), bytes.size());
    if (!back || !same_case(*back, all[i])) {
      std::fprintf(stderr, "seed %zu does not round-trip through the fuzz format:\n%s", i,
                   fuzz::describe_case(all[i].rope).c_str());
      ++bad;
      continue;
    }
    if (!check) {
      char name[32];
      std::snprintf(name, sizeof name, "seed-%02zu", i);
      std::ofstream o(std::filesystem::path(argv[1]) / name, std::ios::binary);
      o.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
      if (!o) {
        std::fprintf(stderr, "cannot write %s/%s\n", argv[1], name);
        return 2;
      }
    }
  }
  std::fprintf(stderr, "%zu seeds, %d not round-tripping%s\n", all.size(), bad, check ? "" : " (written)");
  return bad ? 1 : 0;
}
