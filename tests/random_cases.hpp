// Random cases for the unit tests (tests/test_reference.cpp, tests/test_tensor_form.cpp): v1 parameters over
// their whole ranges (positions up to 2^62, negative ones, inv_freq tables with zeros), v2's offset, position
// axes, attention factor and frequency rules, and the v3 draft's direction and caller-given tables. Seeded by
// the caller: a test's cases are a function of its seed.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>

#include "core/rope_case.hpp"

namespace ropecheck::testing {

// A random element of dtype d: normal, large, tiny/subnormal, zero; and with
// `specials` NaN and Inf.
inline float random_value(std::mt19937_64& rng, Dtype d, bool specials) {
  const Format f = format_of(d);
  std::uniform_int_distribution<int> kind(0, specials ? 11 : 9);
  std::normal_distribution<double> nd;
  const int k = kind(rng);
  double v;
  switch (k) {
    case 0: case 1: case 2: case 3: v = nd(rng); break;
    case 4: v = nd(rng) * std::ldexp(1.0, f.emax - 2); break;                             // large
    case 5: v = nd(rng) * std::ldexp(1.0, f.emin + 2); break;                             // near min normal
    case 6: v = double(int(rng() % 200) - 100) * std::ldexp(1.0, f.emin - f.precision + 1); break;  // subnormal
    case 7: v = (rng() & 1) ? 0.0 : -0.0; break;
    case 8: v = std::ldexp(nd(rng), int(rng() % 40) - 20); break;
    case 9: v = f.max_finite() * ((rng() & 1) ? 1 : -1); break;
    case 10: v = NAN; break;
    default: v = (rng() & 1) ? INFINITY : -INFINITY; break;
  }
  // to the storage type (RNE), through f32
  unsigned char b[4];
  store_f32(d, b, 0, float(v));
  return load_f32(d, b, 0);
}

inline RopeCase random_case(std::mt19937_64& rng, bool specials) {
  static const uint32_t rdims[] = {2, 4, 6, 8, 12, 16};
  RopeCase c;
  c.dtype = kAllDtypes[rng() % 3];
  c.layout = kAllLayouts[rng() % 2];
  c.rotary_dim = rdims[rng() % 6];
  c.head_dim = c.rotary_dim + uint32_t(rng() % 3);
  c.n_heads = 1 + uint32_t(rng() % 2);
  const size_t tokens = 1 + rng() % 3;
  for (size_t t = 0; t < tokens; ++t) {
    int64_t m;
    switch (rng() % 7) {
      case 0: m = int64_t(rng() % 16); break;
      case 1: m = -int64_t(rng() % 100000); break;
      case 2: m = (int64_t(1) << (rng() % 32)) + int64_t(rng() % 3) - 1; break;
      case 3: m = int64_t(rng() % (uint64_t(1) << 31)); break;
      case 4: m = int64_t(rng() >> 2) * ((rng() & 1) ? 1 : -1); break;  // up to 2^62
      case 5: m = t > 0 ? c.positions[0] : 7; break;                     // repeated position
      default: m = int64_t(rng() % 8192); break;
    }
    c.positions.push_back(m);
  }
  switch (rng() % 4) {
    case 0: c.base = 10000.0; break;
    case 1: c.base = 500000.0; break;
    case 2: c.base = 1e6; break;
    default: c.base = 2.0 + std::uniform_real_distribution<double>(0, 1e7)(rng); break;
  }
  switch (rng() % 5) {
    case 0: c.position_scale = 0.25; break;
    case 1: c.position_scale = 1.0 / 3.0; break;
    case 2: c.position_scale = std::uniform_real_distribution<double>(0.01, 16)(rng); break;
    default: c.position_scale = 1.0; break;
  }
  if (rng() % 5 == 0) {
    std::uniform_real_distribution<double> u(-20, 1);
    for (uint32_t i = 0; i < c.rotary_dim / 2; ++i) c.inv_freq.push_back(rng() % 10 == 0 ? 0.0 : std::exp2(u(rng)));
  }
  c.input.resize(c.n_bytes());
  for (size_t k = 0; k < c.n_elements(); ++k) store_f32(c.dtype, c.input.data(), k, random_value(rng, c.dtype, specials));
  return c;
}

// A random ABI v2 case: a random v1 case plus an offset, position axes with a pair map, an attention
// factor and (sometimes) a frequency rule.
inline RopeCase random_v2_case(std::mt19937_64& rng, bool specials) {
  RopeCase c = random_case(rng, specials);
  const size_t n = c.n_tokens();
  c.rotary_offset = uint32_t(rng() % 4);
  c.head_dim += c.rotary_offset;
  c.n_pos_axes = 1 + uint32_t(rng() % 3);
  for (uint32_t a = 1; a < c.n_pos_axes; ++a)
    for (size_t t = 0; t < n; ++t) c.positions.push_back(int64_t(rng() % 4096) - 2048);
  if (c.n_pos_axes > 1)
    for (uint32_t i = 0; i < c.rotary_dim / 2; ++i) c.pair_axis.push_back(uint8_t(rng() % c.n_pos_axes));
  switch (rng() % 3) {
    case 0: c.attention_factor = 1.0; break;
    case 1: c.attention_factor = 1.1386294361119891; break;
    default: c.attention_factor = std::uniform_real_distribution<double>(0.25, 4)(rng); break;
  }
  if (rng() % 2 == 0) {
    c.inv_freq.clear();
    FrequencyRule r;
    switch (rng() % 4) {
      case 0: r.type = FrequencyRuleType::linear; r.factor = 8; break;
      case 1:
        r.type = FrequencyRuleType::yarn;
        r.factor = 4;
        r.original_max_position_embeddings = 32768;
        break;
      case 2:
        r.type = FrequencyRuleType::llama3;
        r.factor = 8;
        r.original_max_position_embeddings = 8192;
        break;
      default:
        r.type = c.rotary_dim > 2 ? FrequencyRuleType::ntk : FrequencyRuleType::linear;
        r.factor = 3;
        break;
    }
    if (c.base <= 1.0) c.base = 10000.0;
    c.freq_rule = r;
  }
  c.input.resize(c.n_bytes());
  for (size_t k = 0; k < c.n_elements(); ++k) store_f32(c.dtype, c.input.data(), k, random_value(rng, c.dtype, specials));
  return c;
}

// A random ABI v3 case: a random v2 case, then (each half the time) the inverse direction and a table given
// by the caller: cos/sin of a random kind and dtype (values of that dtype: rounded af cos, af sin of the
// exact angles, or arbitrary values that are not a rotation), or f32 angles.
// The v3 draft's features on a case: the inverse half of the time, and three times in four a caller-given
// table of a random kind and dtype (its positions then drawn anew to be rows of it): a rotation's table, or
// arbitrary values in the table's dtype.
inline void add_random_v3_features(std::mt19937_64& rng, RopeCase& c) {
  if (rng() % 2) c.direction = Direction::inverse;
  if (rng() % 4 != 0) {
    CosSinTable t;
    t.kind = TableKind(1 + rng() % 4);
    t.dtype = t.is_angle() ? Dtype::f32 : kAllDtypes[rng() % 3];
    int64_t top = 0;
    for (int64_t& m : c.positions) {
      m = int64_t(rng() % 9000);
      top = std::max(top, m);
    }
    t.rows = size_t(top) + 1 + rng() % 3;
    const uint32_t np = c.rotary_dim / 2;
    auto in_dtype = [&](double v) {
      unsigned char b[4];
      store_f32(t.dtype, b, 0, float(v));
      return double(load_f32(t.dtype, b, 0));
    };
    const bool rotation = rng() % 3 != 0;
    std::uniform_real_distribution<double> u(-2, 2);
    for (size_t r = 0; r < t.rows; ++r)
      for (uint32_t i = 0; i < np; ++i) {
        const double ang = double(r) * std::pow(10000.0, -2.0 * i / double(c.rotary_dim));
        if (t.is_angle()) {
          t.cos.push_back(in_dtype(rotation ? ang : u(rng) * 1e4));
        } else {
          t.cos.push_back(in_dtype(rotation ? c.attention_factor * std::cos(ang) : u(rng)));
          t.sin.push_back(in_dtype(rotation ? c.attention_factor * std::sin(ang) : u(rng)));
        }
      }
    if (!t.is_angle()) c.attention_factor = 1.0;
    c.inv_freq.clear();
    c.freq_rule.reset();
    c.table = std::move(t);
  }
}

inline RopeCase random_v3_case(std::mt19937_64& rng, bool specials) {
  RopeCase c = random_v2_case(rng, specials);
  add_random_v3_features(rng, c);
  return c;
}

}  // namespace ropecheck::testing

namespace ropecheck::testing {

// A random case made in the ABI v3 draft's tensor form: a random v3 case (maybe a table, maybe the inverse)
// whose tokens become rank 3 {T, H, D} or rank 4 {B, S, H, D} tensors with padded strides, with k of its own
// head count (or none), positions passed as int64, int32 or implicitly (offsets per sequence), varlen
// batches by cu_seqlens. The positions the case holds are the ones the call encodes.
inline RopeCase random_tensor_case(std::mt19937_64& rng, bool specials) {
  RopeCase c = random_v3_case(rng, specials);
  TensorCall tc;
  const size_t T = 1 + rng() % 6;
  const int64_t rows = c.table ? int64_t(c.table->rows) : 0;
  tc.rank = rng() % 2 ? 4 : 3;
  if (tc.rank == 4) {
    const uint64_t divisors[] = {1, 2, 3, 6};
    do tc.batch = divisors[rng() % 4];
    while (T % tc.batch);
  } else if (rng() % 2) {  // varlen: sequences of random lengths (some empty)
    tc.cu_seqlens = {0};
    while (uint64_t(tc.cu_seqlens.back()) < T)
      tc.cu_seqlens.push_back(std::min<int64_t>(int64_t(T), tc.cu_seqlens.back() + int64_t(rng() % 4)));
  }
  const uint64_t nseq = tc.rank == 4 ? tc.batch : tc.cu_seqlens.empty() ? 1 : tc.cu_seqlens.size() - 1;
  auto random_position = [&](uint32_t axis) -> int64_t {
    if (rows) return int64_t(rng() % uint64_t(rows));
    if (axis > 0) return int64_t(rng() % 4096) - 2048;
    return rng() % 2 ? int64_t(rng() % 100000) - 1000 : int64_t(rng() >> 2) - (int64_t(1) << 61);
  };
  c.positions.assign(size_t(c.n_pos_axes) * T, 0);
  if (c.n_pos_axes == 1 && (!rows || rows >= int64_t(T)) && rng() % 3 != 0) {
    tc.pos = PositionForm::implicit;
    const uint64_t S = tc.rank == 4 ? T / tc.batch : T;
    std::vector<uint64_t> seq_of(T, 0), s_of(T, 0);
    uint64_t longest = 0;
    for (uint64_t t = 0, b = 0; t < T; ++t) {
      s_of[t] = t;
      if (tc.rank == 4) {
        seq_of[t] = t / S;
        s_of[t] = t % S;
      } else if (!tc.cu_seqlens.empty()) {
        while (uint64_t(tc.cu_seqlens[b + 1]) <= t) ++b;
        seq_of[t] = b;
        s_of[t] = t - uint64_t(tc.cu_seqlens[b]);
      }
      longest = std::max(longest, s_of[t] + 1);
    }
    const bool offsets = !(tc.rank == 3 && tc.cu_seqlens.empty() && rng() % 3 == 0);
    for (uint64_t b = 0; offsets && b < nseq; ++b)  // (with a table: every position a row)
      tc.seq_offsets.push_back(rows ? int64_t(rng() % uint64_t(rows - int64_t(longest) + 1)) : random_position(0) / 2);
    for (uint64_t t = 0; t < T; ++t) c.positions[t] = int64_t(s_of[t]) + (offsets ? tc.seq_offsets[seq_of[t]] : 0);
  } else {
    for (uint32_t a = 0; a < c.n_pos_axes; ++a)
      for (size_t t = 0; t < T; ++t) c.positions[a * T + t] = random_position(a);
    bool fits = true;
    for (int64_t m : c.positions) fits = fits && m == int64_t(int32_t(m));
    tc.pos = fits && rng() % 2 ? PositionForm::int32 : PositionForm::int64;
    tc.axes_first = c.n_pos_axes == 1 && rng() % 3 == 0;
  }
  bool small = true;
  for (int64_t x : tc.seq_offsets) small = small && x == int64_t(int32_t(x));
  tc.index_int32 = small && rng() % 2;
  tc.k_heads = rng() % 3 == 0 ? 0 : 1 + uint32_t(rng() % 3);
  for (auto& p : tc.pad)
    for (uint32_t& x : p) x = rng() % 3 == 0 ? uint32_t(rng() % 5) : 0;
  c.input.assign(T * c.n_heads * c.head_dim * dtype_size(c.dtype), 0);
  for (size_t k = 0; k < c.n_elements(); ++k) store_f32(c.dtype, c.input.data(), k, random_value(rng, c.dtype, specials));
  tc.k_input.assign(T * tc.k_heads * c.head_dim * dtype_size(c.dtype), 0);
  for (size_t k = 0; k < tc.k_input.size() / dtype_size(c.dtype); ++k)
    store_f32(c.dtype, tc.k_input.data(), k, random_value(rng, c.dtype, specials));
  c.tensor = std::move(tc);
  return c;
}

}  // namespace ropecheck::testing
