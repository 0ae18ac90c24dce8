// The gate's case generators: the systematic matrix, the special values and the random cases (deterministic in
// the seed; `cases export` writes the same). docs/gate.md, "Rows".
#include "gate/gate.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <sstream>

namespace ropecheck::gate {

namespace {

using Rng = std::mt19937_64;

// A finite value of moderate magnitude, exactly representable in d.
float random_value(Rng& rng, Dtype d) {
  std::uniform_real_distribution<double> mant(1.0, 2.0);
  std::uniform_int_distribution<int> ex(-6, 6);
  const double v = std::ldexp(mant(rng), ex(rng)) * ((rng() & 1) ? -1.0 : 1.0);
  Bytes b(4);
  store_f32(d, b.data(), 0, float(v));
  return load_f32(d, b.data(), 0);
}

// The model's shape on a generated case, before its input is drawn.
void take_model(RopeCase& c, const RopeCase* model) {
  if (model) apply_case_template(*model, c);
}

void fill_random(RopeCase& c, Rng& rng) {
  c.input.assign(c.n_bytes(), 0);
  for (size_t k = 0; k < c.n_elements(); ++k) store_f32(c.dtype, c.input.data(), k, random_value(rng, c.dtype));
}

// Positions: 0, small, near powers of two, near max, in a shuffled order.
std::vector<int64_t> position_mix(Rng& rng, int64_t max_position, size_t n) {
  std::vector<int64_t> cand;
  const int top = max_position > 1 ? 63 - __builtin_clzll(uint64_t(max_position)) : 0;
  // Small positions keep every contract tight (a sign flip, a layout swap, an off-by-one position fail there
  // under the loosest one); the largest show angle drift.
  cand.push_back(0);
  for (int64_t p : {1, 2, 3, 7}) cand.push_back(std::min<int64_t>(p, max_position));
  cand.push_back(max_position);
  cand.push_back(std::max<int64_t>(0, max_position - 1));
  while (cand.size() < n) {
    const int k = top >= 1 ? int(rng() % uint64_t(top)) + 1 : 0;
    const int64_t p2 = int64_t(1) << k;
    const int64_t delta = int64_t(rng() % 3) - 1;
    cand.push_back(std::clamp<int64_t>(p2 + delta, 0, max_position));
    if (cand.size() < n) cand.push_back(int64_t(rng() % uint64_t(max_position + 1)));
  }
  cand.resize(n);
  std::shuffle(cand.begin(), cand.end(), rng);
  return cand;
}

std::vector<double> rope_table(Rng& rng, uint32_t rotary_dim, double base) {
  // A llama-3-style scaled table: low frequencies divided by a factor.
  std::vector<double> t(rotary_dim / 2);
  const double factor = double(2 + rng() % 7);
  for (uint32_t i = 0; i < t.size(); ++i) {
    const double th = std::pow(base, -2.0 * i / rotary_dim);
    t[i] = i >= t.size() / 2 ? th / factor : th;
  }
  return t;
}

const std::pair<uint32_t, uint32_t> kDims[] = {
    {2, 2},    {6, 6},    {20, 20},  {64, 64},  {72, 72},   {80, 80},   {96, 96},  {128, 128},
    {256, 256}, {6, 2},   {20, 8},   {64, 32},  {80, 64},   {128, 64},  {96, 40},  {256, 128},
};

}  // namespace

std::vector<RopeCase> systematic_cases(Dtype d, Layout l, int64_t max_position, uint64_t seed,
                                       std::vector<bool>* in_place, const RopeCase* model) {
  Rng rng(seed * 0x9e3779b97f4a7c15ull + uint64_t(d) * 16 + uint64_t(l));
  std::vector<RopeCase> out;
  const double bases[] = {10000.0, 500000.0, 100.0, 1000000.0};
  const double scales[] = {1.0, 0.25, 1.0, 4.0, 1.0 / 32};
  size_t k = 0;
  for (const auto& [hd, rd] : kDims) {
    for (int ip = 0; ip < 2; ++ip, ++k) {
      RopeCase c;
      c.dtype = d;
      c.layout = l;
      c.head_dim = hd;
      c.rotary_dim = rd;
      c.n_heads = uint32_t(1 + k % 3);
      c.positions = position_mix(rng, max_position, hd >= 128 ? 6 : 8);
      c.base = bases[k % 4];
      c.position_scale = scales[(k / 2) % 5];
      if (k % 5 == 3) c.inv_freq = rope_table(rng, rd, c.base);
      take_model(c, model);
      fill_random(c, rng);
      out.push_back(std::move(c));
      if (in_place) in_place->push_back(ip == 1);
    }
  }
  return out;
}

std::vector<RopeCase> special_value_cases(Dtype d, Layout l, uint64_t seed, int64_t max_position,
                                          const RopeCase* model) {
  Rng rng(seed * 31 + 7 + uint64_t(d) * 2 + uint64_t(l));
  const Format f = format_of(d);
  const float inf = std::numeric_limits<float>::infinity();
  const float specials[] = {0.0f,
                            -0.0f,
                            float(std::ldexp(1.0, f.emin - f.precision + 1)),   // smallest subnormal
                            -float(std::ldexp(1.0, f.emin - 1)),                // a subnormal
                            float(f.max_finite()),                              // huge
                            -float(f.max_finite() / 2),
                            std::numeric_limits<float>::quiet_NaN(),
                            inf,
                            -inf,
                            float(std::ldexp(1.0, f.emin))};                    // smallest normal
  std::vector<RopeCase> out;
  const std::pair<uint32_t, uint32_t> dims[] = {{8, 6}, {8, 8}, {20, 20}};
  for (const auto& [hd, rd] : dims) {
    RopeCase c;
    c.dtype = d;
    c.layout = l;
    c.head_dim = hd;
    c.rotary_dim = rd;
    c.n_heads = 2;
    for (int64_t p : {0, 3, 77777, 1, 1000}) c.positions.push_back(std::min(p, max_position));
    take_model(c, model);
    c.input.assign(c.n_bytes(), 0);
    for (size_t k = 0; k < c.n_elements(); ++k) {
      const float v = (rng() % 2) ? specials[rng() % std::size(specials)] : random_value(rng, d);
      store_f32(d, c.input.data(), k, v);
    }
    out.push_back(std::move(c));
  }
  return out;
}

RopeCase random_case(Dtype d, Layout l, int64_t max_position, std::mt19937_64& rng, const RopeCase* model) {
  RopeCase c;
  c.dtype = d;
  c.layout = l;
  c.head_dim = uint32_t(2 + rng() % 255);
  c.rotary_dim = 2 * uint32_t(1 + rng() % (c.head_dim / 2));
  if (rng() % 2) c.rotary_dim = c.head_dim - c.head_dim % 2;
  c.n_heads = uint32_t(1 + rng() % 4);
  const size_t nt = 1 + rng() % 6;
  for (size_t t = 0; t < nt; ++t) {
    // log-uniform positions in [0, max]
    const double lg = std::uniform_real_distribution<double>(0, std::log2(double(max_position) + 1))(rng);
    c.positions.push_back(std::min<int64_t>(max_position, int64_t(std::exp2(lg)) - 1));
  }
  // Half the time a base models ship (kernels with a fixed base would otherwise accept almost no random
  // case: llama2.c's, docs/real-kernels.md), else log-uniform in [2, 2e6].
  const double common_bases[] = {10000.0, 500000.0, 1000000.0, 100000.0};
  c.base = rng() % 2 ? common_bases[rng() % std::size(common_bases)]
                     : std::exp(std::uniform_real_distribution<double>(std::log(2.0), std::log(2e6))(rng));
  if (rng() % 4 == 0) c.position_scale = std::ldexp(1.0, int(rng() % 7) - 4);
  if (rng() % 5 == 0) c.inv_freq = rope_table(rng, c.rotary_dim, c.base);
  take_model(c, model);
  fill_random(c, rng);
  return c;
}


std::vector<RopeCase> sequence_cases(const std::vector<std::pair<Dtype, Layout>>& combos, int64_t max_position,
                                     uint64_t seed, const RopeCase* model) {
  if (combos.empty()) return {};
  Rng rng(seed ^ 0x5e9e0cull);
  const auto [d0, l0] = combos[0];
  RopeCase base;
  base.dtype = d0;
  base.layout = l0;
  base.head_dim = 64;
  base.rotary_dim = 64;
  base.n_heads = 2;
  base.base = 10000;
  std::vector<RopeCase> variants;
  auto variant = [&](auto change) {
    RopeCase v = base;
    change(v);
    variants.push_back(v);
  };
  if (!model) {  // a model fixes these
    variant([](RopeCase& v) { v.base = 500000; });
    variant([](RopeCase& v) { v.rotary_dim = 32; });
    variant([](RopeCase& v) { v.head_dim = v.rotary_dim = 128; });
    variant([](RopeCase& v) { v.head_dim = 96; });
    variant([](RopeCase& v) { v.position_scale = 0.25; });
    variant([&](RopeCase& v) { v.inv_freq = rope_table(rng, v.rotary_dim, v.base); });
  }
  for (const auto& [d, l] : combos)
    if (d != d0 || l != l0) variant([&, d = d, l = l](RopeCase& v) {
      v.dtype = d;
      v.layout = l;
    });
  // base, v1, base, v2, ..., base, vn, then vn .. v1 back to back.
  std::vector<const RopeCase*> order;
  for (const RopeCase& v : variants) {
    order.push_back(&base);
    order.push_back(&v);
  }
  for (auto it = variants.rbegin(); it != variants.rend(); ++it) order.push_back(&*it);
  order.push_back(&base);
  std::vector<RopeCase> out;
  for (const RopeCase* shape : order) {
    RopeCase c = *shape;
    c.positions = position_mix(rng, max_position, 4);
    if (model) {
      const Layout l = c.layout;  // a layout variant keeps its layout
      take_model(c, model);
      c.layout = l;
    }
    fill_random(c, rng);
    out.push_back(std::move(c));
  }
  return out;
}

RopeCase repeat_case(Dtype d, Layout l, int64_t max_position, uint64_t seed, const RopeCase* model) {
  Rng rng(seed ^ 0x3e9ea7ull);
  RopeCase c;
  c.dtype = d;
  c.layout = l;
  c.head_dim = 80;
  c.rotary_dim = 64;
  c.n_heads = 2;
  c.base = 10000;
  c.positions = position_mix(rng, max_position, 3);
  take_model(c, model);
  fill_random(c, rng);
  return c;
}

std::vector<std::pair<RopeCase, bool>> large_cases(const std::vector<std::pair<Dtype, Layout>>& combos,
                                                   int64_t max_position, uint64_t seed,
                                                   const RopeCase* model) {
  std::vector<std::pair<RopeCase, bool>> out;
  Rng rng(seed ^ 0x1a7e5ull);
  struct Shape {
    uint32_t tokens, heads, head_dim, rotary_dim;
  };
  // Many heads per token keep the exact reference's cost (one cos/sin per distinct position and pair) low.
  const Shape shapes[] = {{128, 16, 128, 128}, {128, 16, 576, 64}, {32, 8, 576, 576}};
  // Each shape once, the accepted dtype x layout combinations taking turns (with all six accepted: f32
  // interleaved, f16 half-split, bf16 interleaved).
  for (size_t k = 0; k < std::size(shapes) && !combos.empty(); ++k) {
    const auto [d, l] = combos[(2 * k + k % 2) % combos.size()];
    {
      const Shape& sh = shapes[k];
      RopeCase c;
      c.dtype = d;
      c.layout = l;
      c.head_dim = sh.head_dim;
      c.rotary_dim = sh.rotary_dim;
      c.n_heads = sh.heads;
      c.base = k % 2 ? 10000 : 1000000;
      // A prefill: consecutive positions from a random start.
      const int64_t span = int64_t(sh.tokens);
      const int64_t start = max_position > span ? int64_t(rng() % uint64_t(max_position - span + 1)) : 0;
      for (int64_t t = 0; t < span; ++t) c.positions.push_back(std::min(max_position, start + t));
      take_model(c, model);
      fill_random(c, rng);
      out.push_back({std::move(c), k % 2 == 1});
    }
  }
  return out;
}

}  // namespace ropecheck::gate
