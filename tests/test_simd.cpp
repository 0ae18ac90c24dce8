// The Highway SIMD kernels: every compiled target this CPU supports, and the
// dispatched `simd`, against the exact reference (judge_output, the error
// model's bound) and bit for bit against `scalar`; plus every target's own
// f16/bf16 load and store paths against core/dtype.hpp.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/dtype.hpp"
#include "impls/registry.hpp"
#include "impls/simd/simd_kernels.hpp"
#include "properties/judge.hpp"
#include "properties/promise.hpp"
#include "reference/reference.hpp"
#include "tests/random_cases.hpp"

namespace ropecheck {
namespace {

std::vector<const Implementation*> simd_impls() {
  std::vector<const Implementation*> v;
  for (const auto& i : implementations())
    if (i.name == "simd" || i.name.rfind("simd-", 0) == 0) v.push_back(&i);
  return v;
}

TEST(SimdRegistry, OneEntryPerSupportedTargetPlusDispatched) {
  const auto& targets = simd::supported_targets();
  ASSERT_FALSE(targets.empty());
  std::string names;
  for (const auto& t : simd::compiled_targets()) names += " " + t.name;
  std::printf("compiled SIMD targets:%s; dispatched: %s\n", names.c_str(), simd::dispatched_target_name().c_str());
  for (const auto* i : simd_impls()) std::printf("  registered: %s\n", i->name.c_str());
  ASSERT_NE(find_implementation("simd"), nullptr);
  for (const auto& t : targets) {
    const Implementation* impl = find_implementation(t.name);
    ASSERT_NE(impl, nullptr) << t.name;
    EXPECT_EQ(impl->fn, t.fn) << t.name;
    EXPECT_EQ(t.name.rfind("simd-", 0), 0u);
    for (char ch : t.name) EXPECT_FALSE(std::isupper(static_cast<unsigned char>(ch))) << t.name;
  }
  // Distinct entry points: each target is called directly.
  for (size_t i = 0; i < targets.size(); ++i)
    for (size_t j = i + 1; j < targets.size(); ++j) EXPECT_NE(targets[i].fn, targets[j].fn);
  EXPECT_EQ(simd_impls().size(), targets.size() + 1);
}

// ---- storage conversions, per target --------------------------------------

// f32 values where f16/bf16 rounding is interesting.
std::vector<float> interesting_f32() {
  std::vector<uint32_t> bits = {0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7fc00000u, 0xffc00000u,
                                0x7f800001u, 0xff800001u, 0x7fbfffffu, 0x7fffffffu, 0x7fa00000u, 0x7f802000u,
                                0x00000001u, 0x807fffffu, 0x00800000u, 0x7f7fffffu, 0xff7fffffu, 0x3f800000u};
  std::vector<float> v;
  for (uint32_t b : bits) v.push_back(std::bit_cast<float>(b));
  // bf16: every rounding position around a few bf16 values: ties (even/odd), +-1 ulp.
  for (uint32_t hi : {0x3f80u, 0x3f81u, 0x7f7fu, 0x0000u, 0x0001u, 0x007fu, 0x0080u, 0x4049u, 0x7f7eu})
    for (uint32_t lo : {0x0000u, 0x0001u, 0x7fffu, 0x8000u, 0x8001u, 0xffffu})
      for (uint32_t sg : {0u, 0x80000000u}) v.push_back(std::bit_cast<float>(sg | (hi << 16) | lo));
  // f16: ties and neighbours at every exponent (normal and subnormal ranges), and
  // the overflow threshold 65520 (rounds to Inf) vs 65519.996 (to 65504).
  for (int e = -26; e <= 16; ++e)
    for (int m = 0; m < 4; ++m) {
      const float base = std::ldexp(1.0f + float(m) * 0x1p-10f, e);
      const uint32_t b = std::bit_cast<uint32_t>(base);
      for (int64_t off : {-0x1001, -0x1000, -0xfff, -1, 0, 1, 0xfff, 0x1000, 0x1001, 0x2000, 0x3000})
        for (uint32_t sg : {0u, 0x80000000u}) v.push_back(std::bit_cast<float>(sg | uint32_t(int64_t(b) + off)));
    }
  for (float f : {65504.0f, 65519.0f, 65520.0f, 65536.0f, 0x1p-24f, 0x1p-25f, 0x1.8p-25f, 0x1p-26f, 0x1.ffcp-15f,
                  0x1.ffep-15f, 0x1p-14f})
    for (float sg : {1.0f, -1.0f}) v.push_back(f * sg);
  std::mt19937 rng(7);
  for (int i = 0; i < 20000; ++i) v.push_back(std::bit_cast<float>(uint32_t(rng())));
  while (v.size() % 32) v.push_back(0.0f);
  return v;
}

uint32_t expected_bits(Dtype d, float f) {
  switch (d) {
    case Dtype::f32: return std::bit_cast<uint32_t>(f);
    case Dtype::f16: return f32_to_f16_bits(f);
    case Dtype::bf16: return f32_to_bf16_bits(f);
  }
  return 0;
}

TEST(SimdConversions, EveryTargetStoresRoundToNearestEvenKeepingNaN) {
  const std::vector<float> vals = interesting_f32();
  const size_t n = vals.size() / 2;  // pairs (y0 = first half, y1 = second half)
  for (const auto& t : simd::supported_targets()) {
    for (Dtype d : kAllDtypes) {
      for (Layout l : kAllLayouts) {
        Bytes out(vals.size() * dtype_size(d), 0xAB);
        t.store(uint32_t(d), uint32_t(l), vals.data(), vals.data() + n, out.data(), n);
        size_t bad = 0;
        for (size_t k = 0; k < n; ++k) {
          for (int j = 0; j < 2; ++j) {
            const float f = vals[j * n + k];
            const size_t idx = l == Layout::interleaved ? 2 * k + j : j * n + k;
            const uint32_t got = load_bits(d, out.data(), idx), want = expected_bits(d, f);
            if (got != want && bad++ < 5)
              ADD_FAILURE() << t.name << " " << to_string(d) << " " << to_string(l) << ": store of "
                            << hexfloat(f) << " (bits 0x" << std::hex << std::bit_cast<uint32_t>(f) << ") gave 0x"
                            << got << ", RNE gives 0x" << want << std::dec;
          }
        }
        EXPECT_EQ(bad, 0u) << t.name << " " << to_string(d) << " " << to_string(l);
      }
    }
  }
}

TEST(SimdConversions, EveryTargetLoadsEvery16BitPatternExactly) {
  const size_t n = 32768;  // 65536 patterns as n pairs
  std::vector<uint16_t> pat(65536);
  for (uint32_t i = 0; i < 65536; ++i) pat[i] = uint16_t(i);
  std::vector<float> x0(n), x1(n);
  for (const auto& t : simd::supported_targets()) {
    for (Dtype d : {Dtype::f16, Dtype::bf16}) {
      for (Layout l : kAllLayouts) {
        t.load(uint32_t(d), uint32_t(l), pat.data(), x0.data(), x1.data(), n);
        size_t bad = 0;
        for (size_t k = 0; k < n; ++k)
          for (int j = 0; j < 2; ++j) {
            const size_t idx = l == Layout::interleaved ? 2 * k + j : j * n + k;
            const float want = d == Dtype::f16 ? f16_bits_to_f32(pat[idx]) : bf16_bits_to_f32(pat[idx]);
            const float got = j ? x1[k] : x0[k];
            // A signalling NaN may come back quieted (F16C's vcvtph2ps does):
            // the same payload with the quiet bit set, which is what the first
            // arithmetic operation on it gives anyway, so outputs cannot differ.
            const uint32_t wb = std::bit_cast<uint32_t>(want), gb = std::bit_cast<uint32_t>(got);
            const bool quieted = std::isnan(want) && gb == (wb | 0x00400000u);
            if (gb != wb && !quieted && bad++ < 5)
              ADD_FAILURE() << t.name << " " << to_string(d) << " " << to_string(l) << ": load of 0x" << std::hex
                            << pat[idx] << " gave " << std::bit_cast<uint32_t>(got) << ", want "
                            << std::bit_cast<uint32_t>(want) << std::dec;
          }
        EXPECT_EQ(bad, 0u) << t.name << " " << to_string(d) << " " << to_string(l);
      }
    }
  }
}

// ---- kernels ------------------------------------------------------------------

uint32_t random_bits(Dtype d, std::mt19937_64& rng, bool specials) {
  const int kind = int(rng() % 16);
  const double mag[] = {1.0, 1e-3, 100.0, 1e4};
  double v = std::normal_distribution<double>(0.0, 1.0)(rng) * mag[rng() % 4];
  if (specials) {
    switch (kind) {
      case 0: return d == Dtype::f32 ? 0x7fc00001u : 0x7e01u;            // NaN
      case 1: return d == Dtype::f32 ? 0xff800000u : (d == Dtype::f16 ? 0xfc00u : 0xff80u);  // -Inf
      case 2: return d == Dtype::f32 ? 0x80000000u : 0x8000u;            // -0
      case 3: return 1;                                                   // smallest subnormal
      default: break;
    }
  }
  if (kind == 4) v = format_of(d).max_finite() * 0.75 * (rng() % 2 ? 1 : -1);  // overflow candidates
  if (kind == 5) v = format_of(d).min_normal() * std::ldexp(double(rng() % 1000) / 1000.0, -2);
  return double_to_bits_exact(d, d == Dtype::f32 ? double(float(v)) : v);
}

RopeCase make_case(Dtype d, Layout l, uint32_t rd, uint32_t hd, uint32_t heads, std::vector<int64_t> pos,
                   std::mt19937_64& rng, bool specials) {
  RopeCase c;
  c.dtype = d;
  c.layout = l;
  c.rotary_dim = rd;
  c.head_dim = hd;
  c.n_heads = heads;
  c.positions = std::move(pos);
  c.base = 10000.0;
  c.input.assign(c.n_bytes(), 0);
  for (size_t k = 0; k < c.n_elements(); ++k) store_bits(d, c.input.data(), k, random_bits(d, rng, specials));
  return c;
}

// Bit-exact, except that any NaN equals any NaN (operand order of NaN payload
// propagation is the compiler's choice in `scalar`).
size_t count_mismatches(const RopeCase& c, const Bytes& a, const Bytes& b, std::string* first) {
  size_t bad = 0;
  for (size_t k = 0; k < c.n_elements(); ++k) {
    const uint32_t x = load_bits(c.dtype, a.data(), k), y = load_bits(c.dtype, b.data(), k);
    if (x == y) continue;
    if (std::isnan(bits_to_double(c.dtype, x)) && std::isnan(bits_to_double(c.dtype, y))) continue;
    if (bad++ == 0 && first)
      *first = "element " + std::to_string(k) + ": " + describe_element(c.dtype, x) + " vs scalar " +
               describe_element(c.dtype, y);
  }
  return bad;
}

// Every SIMD target on c (ABI v3), out of place and in place, bit for bit what `scalar` gives out of place and in
// place; `also(impl, got, got_in_place)` then checks more of each target's outputs.
template <typename Also>
void expect_targets_match_scalar(const Implementation& scalar, const RopeCase& c, Also also) {
  Bytes want(c.n_bytes(), 0), want_ip = c.input;
  const rc_rope_args w = c.args(c.input.data(), want.data(), 3), wi = c.args(want_ip.data(), want_ip.data(), 3);
  ASSERT_EQ(scalar.fn(&w), RC_OK) << c.summary();
  ASSERT_EQ(scalar.fn(&wi), RC_OK) << c.summary();
  for (const Implementation* impl : simd_impls()) {
    Bytes got(c.n_bytes(), 0), got_ip = c.input;
    const rc_rope_args g = c.args(c.input.data(), got.data(), 3), gi = c.args(got_ip.data(), got_ip.data(), 3);
    ASSERT_EQ(impl->fn(&g), RC_OK) << impl->name << " " << c.summary();
    ASSERT_EQ(impl->fn(&gi), RC_OK) << impl->name << " " << c.summary();
    std::string first;
    EXPECT_EQ(count_mismatches(c, got, want, &first), 0u)
        << impl->name << " vs scalar, " << c.summary() << "\n  first: " << first;
    EXPECT_EQ(count_mismatches(c, got_ip, want_ip, &first), 0u)
        << impl->name << " in place vs scalar in place, " << c.summary() << "\n  first: " << first;
    also(impl, got, got_ip);
  }
}

const uint32_t kRotaryDims[] = {2, 4, 6, 8, 10, 20, 24, 30, 34, 64, 72, 80, 96, 120, 128, 130, 256};

// Every target x dtype x layout x rotary_dim (vector tails), partial rotary,
// in-place: bit-identical to `scalar`, out-of-place and in place.
TEST(SimdKernels, BitIdenticalToScalarOnEveryTargetDtypeLayoutTail) {
  const Implementation* scalar = find_implementation("scalar");
  ASSERT_NE(scalar, nullptr);
  std::mt19937_64 rng(42);
  for (Dtype d : kAllDtypes)
    for (Layout l : kAllLayouts)
      for (uint32_t rd : kRotaryDims) {
        const uint32_t hd = rd + uint32_t(rng() % 3) * 3;  // partial rotary, odd offsets
        const RopeCase c = make_case(d, l, rd, hd, 1 + uint32_t(rng() % 3),
                                     {1, 7, 4096, 65537, (int64_t(1) << 31) - 1, 0}, rng, true);
        Bytes want;
        ASSERT_EQ(run_kernel(*scalar, c, want), RC_OK);
        for (const Implementation* impl : simd_impls()) {
          Bytes got, got_ip;
          ASSERT_EQ(run_kernel(*impl, c, got), RC_OK) << impl->name;
          ASSERT_EQ(run_kernel_in_place(*impl, c, got_ip), RC_OK) << impl->name;
          std::string first;
          EXPECT_EQ(count_mismatches(c, got, want, &first), 0u)
              << impl->name << " vs scalar, " << c.summary() << "\n  first: " << first;
          EXPECT_EQ(count_mismatches(c, got_ip, got, &first), 0u)
              << impl->name << " in place vs out of place, " << c.summary() << "\n  first: " << first;
          // Pass-through dims: bit for bit, NaN payloads included.
          for (size_t t = 0; t < c.n_tokens(); ++t)
            for (size_t h = 0; h < c.n_heads; ++h)
              for (size_t k = head_offset(c, t, h) + rd; k < head_offset(c, t, h) + hd; ++k) {
                ASSERT_EQ(load_bits(d, got.data(), k), load_bits(d, c.input.data(), k)) << impl->name;
                ASSERT_EQ(load_bits(d, got_ip.data(), k), load_bits(d, c.input.data(), k)) << impl->name;
              }
        }
      }
}

// Every SIMD implementation's output on c, judged against the exact reference
// with the implementation's own bound and the special-value rules.
void expect_every_simd_kernel_judged_ok(const RopeCase& c) {
  const ReferenceOutput ref = reference_rope(c);
  for (const Implementation* impl : simd_impls()) {
    Bytes got;
    ASSERT_EQ(run_kernel(*impl, c, got), RC_OK);
    const Judgement j = judge_output(c, ref, got.data(), promise_of(*impl).bound(c));
    EXPECT_TRUE(j.ok()) << impl->name << ": " << j.report();
  }
}

// Against the exact reference with the implementation's own bound.
TEST(SimdKernels, WithinErrorBoundOfExactReference) {
  std::mt19937_64 rng(9);
  const std::vector<int64_t> pos = {0, 1, 3, 1000, 123456, (int64_t(1) << 31) - 1};
  for (Dtype d : kAllDtypes)
    for (Layout l : kAllLayouts)
      for (uint32_t rd : {2u, 6u, 20u, 72u, 80u, 120u, 128u}) {
        const RopeCase c = make_case(d, l, rd, rd + 2, 2, pos, rng, false);
        expect_every_simd_kernel_judged_ok(c);
      }
}

// Special values through the reference's rules (NaN, Inf, -0, subnormals).
TEST(SimdKernels, SpecialValuesJudgedByReferenceRules) {
  std::mt19937_64 rng(11);
  for (Dtype d : kAllDtypes)
    for (Layout l : kAllLayouts) {
      const RopeCase c = make_case(d, l, 20, 20, 2, {0, 5, 77777}, rng, true);
      expect_every_simd_kernel_judged_ok(c);
    }
}

// Position 0 (and a zero table entry) copies the pair's bits, -0 and NaN included.
TEST(SimdKernels, ZeroAngleIsBitExactIdentity) {
  std::mt19937_64 rng(3);
  for (Dtype d : kAllDtypes)
    for (Layout l : kAllLayouts) {
      RopeCase c = make_case(d, l, 24, 24, 3, {0, 0}, rng, true);
      for (const Implementation* impl : simd_impls()) {
        Bytes got;
        ASSERT_EQ(run_kernel(*impl, c, got), RC_OK);
        EXPECT_EQ(got, c.input) << impl->name;
      }
      // A table with one zero frequency: that pair is the identity at every position.
      RopeCase t = make_case(d, l, 24, 24, 2, {5, 99}, rng, false);
      t.inv_freq.assign(12, 0.5);
      t.inv_freq[7] = 0.0;
      const auto [d0, d1] = pair_dims(l, 24, 7);
      for (const Implementation* impl : simd_impls()) {
        Bytes got;
        ASSERT_EQ(run_kernel(*impl, t, got), RC_OK);
        for (size_t tok = 0; tok < 2; ++tok)
          for (size_t h = 0; h < 2; ++h)
            for (uint32_t e : {d0, d1}) {
              const size_t k = head_offset(t, tok, h) + e;
              EXPECT_EQ(load_bits(d, got.data(), k), load_bits(d, t.input.data(), k)) << impl->name;
            }
      }
    }
}

// The per-thread theta cache follows base, rotary_dim and the table between calls.
TEST(SimdKernels, ThetaCacheFollowsBaseDimAndTable) {
  const Implementation* scalar = find_implementation("scalar");
  ASSERT_NE(scalar, nullptr);
  std::mt19937_64 rng(17);
  RopeCase c = make_case(Dtype::f32, Layout::half_split, 64, 64, 2, {3, 1000, 77777}, rng, false);
  for (double base : {10000.0, 500000.0, 10000.0, 2.5}) {
    for (int table = 0; table < 2; ++table) {
      c.base = base;
      c.inv_freq.clear();
      if (table) {
        for (int i = 0; i < 32; ++i) c.inv_freq.push_back(1.0 / (1.0 + i * base * 1e-6));
      }
      Bytes want;
      ASSERT_EQ(run_kernel(*scalar, c, want), RC_OK);
      for (const Implementation* impl : simd_impls()) {
        Bytes got;
        ASSERT_EQ(run_kernel(*impl, c, got), RC_OK);
        std::string first;
        EXPECT_EQ(count_mismatches(c, got, want, &first), 0u)
            << impl->name << " base " << base << " table " << table << ": " << first;
      }
    }
  }
}

TEST(SimdKernels, RejectsMalformedCalls) {
  std::mt19937_64 rng(5);
  const RopeCase c = make_case(Dtype::f32, Layout::interleaved, 8, 8, 1, {3}, rng, false);
  Bytes out(c.n_bytes());
  for (const Implementation* impl : simd_impls()) {
    rc_rope_args a = c.args(c.input.data(), out.data());
    a.rotary_dim = 7;
    EXPECT_NE(impl->fn(&a), RC_OK) << impl->name;
    a = c.args(c.input.data(), out.data());
    const int64_t neg = -1;
    a.positions = &neg;
    EXPECT_NE(impl->fn(&a), RC_OK) << impl->name;
    a = c.args(c.input.data(), out.data());
    a.dtype = 9;
    EXPECT_NE(impl->fn(&a), RC_OK) << impl->name;
  }
}

// ---- ABI v2 ---------------------------------------------------------------------

// The rules of the v2 cases (HF parameters of a YaRN and a llama3 model).
FrequencyRule yarn_rule() {
  FrequencyRule r;
  r.type = FrequencyRuleType::yarn;
  r.factor = 4.0;
  r.original_max_position_embeddings = 4096;
  r.beta_fast = 32.0;
  r.beta_slow = 1.0;
  return r;
}

FrequencyRule llama3_rule() {
  FrequencyRule r;
  r.type = FrequencyRuleType::llama3;
  r.factor = 8.0;
  r.low_freq_factor = 1.0;
  r.high_freq_factor = 4.0;
  r.original_max_position_embeddings = 8192;
  return r;
}

struct V2Shape {
  uint32_t rotary_dim, offset, tail;  // head_dim = offset + rotary_dim + tail
  uint32_t axes;                      // n_pos_axes
  bool map;                           // a mixed pair_axis map (else NULL: every pair on axis 0)
  double af;
  int rule;                           // 0 none, 1 YaRN, 2 llama3
};

// A v2 case: per-axis positions (negative ones, 0 on some axes only, and 0 on all axes: rows with
// zero angles) and, with a map, every axis used by some pair in a mixed order.
RopeCase make_v2_case(Dtype d, Layout l, const V2Shape& sh, std::mt19937_64& rng, bool specials) {
  RopeCase c;
  c.dtype = d;
  c.layout = l;
  c.rotary_dim = sh.rotary_dim;
  c.rotary_offset = sh.offset;
  c.head_dim = sh.offset + sh.rotary_dim + sh.tail;
  c.n_heads = 1 + uint32_t(rng() % 3);
  c.n_pos_axes = sh.axes;
  c.base = sh.rule == 2 ? 500000.0 : 10000.0;
  c.attention_factor = sh.af;
  if (sh.rule == 1) c.freq_rule = yarn_rule();
  if (sh.rule == 2) c.freq_rule = llama3_rule();
  const std::vector<std::vector<int64_t>> per_axis = {
      {7, 0, -3, 4096, 0, -((int64_t(1) << 31) - 1), 65537},
      {-5, 0, 12, 0, 33, 100000, -1},
      {2, 0, 0, -77, 1, 9, 123456},
      {11, 0, -2, 3, 0, 5, -65536},
  };
  for (uint32_t ax = 0; ax < sh.axes; ++ax) c.positions.insert(c.positions.end(), per_axis[ax].begin(), per_axis[ax].end());
  if (sh.map) {
    const uint32_t np = sh.rotary_dim / 2;
    for (uint32_t i = 0; i < np; ++i) c.pair_axis.push_back(uint8_t(i < sh.axes ? sh.axes - 1 - i : rng() % sh.axes));
  }
  c.input.assign(c.n_bytes(), 0);
  for (size_t k = 0; k < c.n_elements(); ++k) store_bits(d, c.input.data(), k, random_bits(d, rng, specials));
  EXPECT_EQ(c.validate(), "");
  return c;
}

std::vector<V2Shape> v2_shapes() {
  const double kYarnAf = 1.2079441541679836;  // 0.1 ln 4 + 1, YaRN's default for factor 4
  return {
      {64, 0, 0, 1, false, 1.0, 0},      // negative positions only (the call is v2)
      {64, 64, 0, 1, false, 1.0, 0},     // DeepSeek MLA: the rope slice at the end of the head
      {20, 3, 5, 1, false, 1.0, 0},      // offset + R < head_dim, odd offset, tails
      {6, 1, 1, 1, false, 1.0, 0},
      {34, 5, 0, 1, false, 0.7, 0},
      {128, 0, 0, 3, true, 1.0, 0},      // M-RoPE, mixed map
      {72, 2, 4, 3, true, 1.0, 0},
      {24, 0, 8, 2, true, kYarnAf, 0},
      {10, 3, 0, 2, true, 1.0, 0},       // fewer pairs than some vectors
      {30, 0, 0, 3, false, 1.0, 0},      // 3 axes, NULL map: axis 0 only
      {64, 0, 0, 1, false, kYarnAf, 1},  // YaRN
      {96, 32, 0, 1, false, kYarnAf, 1},
      {128, 0, 0, 1, false, 1.0, 2},     // llama3
      {80, 4, 2, 3, true, 0.7, 2},       // everything at once
      {2, 0, 3, 2, true, kYarnAf, 1},
  };
}

// Every target x dtype x layout x v2 shape, in place and out of place: bit-identical to `scalar` (also
// in place), pass-through elements [0, o) and [o + R, head_dim) bit for bit.
TEST(SimdKernelsV2, BitIdenticalToScalarOnEveryTargetDtypeLayout) {
  const Implementation* scalar = find_implementation("scalar");
  ASSERT_NE(scalar, nullptr);
  std::mt19937_64 rng(2026);
  size_t cases = 0;
  for (const V2Shape& sh : v2_shapes())
    for (Dtype d : kAllDtypes)
      for (Layout l : kAllLayouts) {
        const RopeCase c = make_v2_case(d, l, sh, rng, true);
        ASSERT_EQ(c.args(nullptr, nullptr).abi_version, 2u) << c.summary();
        Bytes want, want_ip;
        ASSERT_EQ(run_kernel(*scalar, c, want), RC_OK) << c.summary();
        ASSERT_EQ(run_kernel_in_place(*scalar, c, want_ip), RC_OK) << c.summary();
        ++cases;
        for (const Implementation* impl : simd_impls()) {
          Bytes got, got_ip;
          ASSERT_EQ(run_kernel(*impl, c, got), RC_OK) << impl->name << " " << c.summary();
          ASSERT_EQ(run_kernel_in_place(*impl, c, got_ip), RC_OK) << impl->name << " " << c.summary();
          std::string first;
          EXPECT_EQ(count_mismatches(c, got, want, &first), 0u)
              << impl->name << " vs scalar, " << c.summary() << "\n  first: " << first;
          EXPECT_EQ(count_mismatches(c, got_ip, want_ip, &first), 0u)
              << impl->name << " in place vs scalar in place, " << c.summary() << "\n  first: " << first;
          for (size_t t = 0; t < c.n_tokens(); ++t)
            for (size_t h = 0; h < c.n_heads; ++h)
              for (uint32_t e = 0; e < c.head_dim; ++e) {
                if (is_rotated(c, e)) continue;
                const size_t k = head_offset(c, t, h) + e;
                ASSERT_EQ(load_bits(d, got.data(), k), load_bits(d, c.input.data(), k)) << impl->name << " " << e;
                ASSERT_EQ(load_bits(d, got_ip.data(), k), load_bits(d, c.input.data(), k)) << impl->name << " " << e;
              }
        }
      }
  EXPECT_EQ(cases, v2_shapes().size() * 6);
}

// The v2 cases against the exact reference with each implementation's own bound.
TEST(SimdKernelsV2, WithinErrorBoundOfExactReference) {
  std::mt19937_64 rng(77);
  for (const V2Shape& sh : v2_shapes())
    for (Dtype d : kAllDtypes)
      for (Layout l : kAllLayouts) expect_every_simd_kernel_judged_ok(make_v2_case(d, l, sh, rng, false));
}

// A token where only some axes are at 0: with attention factor 1 the pairs on those axes are copied bit
// for bit (-0 and NaN included) and the others rotated; with another factor every pair is rotated and
// scaled, as `scalar` does (the token then takes the vector path).
TEST(SimdKernelsV2, ZeroAnglePairsOnAZeroAxisAreCopiedOnlyWithFactorOne) {
  const Implementation* scalar = find_implementation("scalar");
  ASSERT_NE(scalar, nullptr);
  std::mt19937_64 rng(31);
  for (Dtype d : kAllDtypes)
    for (Layout l : kAllLayouts)
      for (double af : {1.0, 0.7}) {
        RopeCase c = make_v2_case(d, l, {16, 2, 2, 2, true, af, 0}, rng, true);
        c.positions = {0, 9, /* axis 1 */ 4, 0};  // token 0: axis 0 at 0; token 1: axis 1 at 0
        c.input.assign(c.n_bytes(), 0);
        for (size_t k = 0; k < c.n_elements(); ++k) store_bits(d, c.input.data(), k, random_bits(d, rng, true));
        Bytes want;
        ASSERT_EQ(run_kernel(*scalar, c, want), RC_OK);
        for (const Implementation* impl : simd_impls()) {
          Bytes got;
          ASSERT_EQ(run_kernel(*impl, c, got), RC_OK) << impl->name;
          std::string first;
          EXPECT_EQ(count_mismatches(c, got, want, &first), 0u) << impl->name << " af " << af << ": " << first;
          if (af != 1.0) continue;
          for (size_t t = 0; t < 2; ++t)
            for (size_t h = 0; h < c.n_heads; ++h)
              for (uint32_t i = 0; i < 8; ++i) {
                if (c.pair_axis[i] != t) continue;  // token t's zero axis is axis t
                for (uint32_t e : {pair_elements(c, i).first, pair_elements(c, i).second}) {
                  const size_t k = head_offset(c, t, h) + e;
                  EXPECT_EQ(load_bits(d, got.data(), k), load_bits(d, c.input.data(), k))
                      << impl->name << " token " << t << " pair " << i;
                }
              }
        }
      }
}

// Versions: an unknown abi_version is declined; a v1 call never reads the v2 fields (garbage there
// changes nothing), and a v2 call with every v2 field neutral gives the v1 result bit for bit.
// The v3 draft's legacy form (the inverse; a caller-given table of every kind and dtype, rotation tables and
// arbitrary values beyond 1): every target x dtype x layout x v2 shape, out of place and in place, bit for bit
// the scalar kernel's (both read the table through impls/given_table.hpp; the rotation is each one's own).
TEST(SimdKernelsV3, BitIdenticalToScalarOnEveryTargetDtypeLayout) {
  const Implementation* scalar = find_implementation("scalar");
  std::mt19937_64 rng(2027);
  size_t cases = 0, tables = 0, inverse = 0;
  for (int round = 0; round < 3; ++round)
    for (const V2Shape& sh : v2_shapes())
      for (Dtype d : kAllDtypes)
        for (Layout l : kAllLayouts) {
          RopeCase c = make_v2_case(d, l, sh, rng, true);
          testing::add_random_v3_features(rng, c);
          if (c.table && rng() % 2) c.positions[0] = 0;  // row 0 of a rotation's table: cos 1, sin 0 (copied)
          ASSERT_EQ(c.validate(), "") << c.summary();
          ++cases;
          tables += bool(c.table);
          inverse += c.direction == Direction::inverse;
          ASSERT_NO_FATAL_FAILURE(expect_targets_match_scalar(*scalar, c, [](auto&&...) {}));
        }
  EXPECT_EQ(cases, 3 * v2_shapes().size() * 6);
  EXPECT_GT(tables, cases / 2);
  EXPECT_GT(inverse, cases / 4);
}

// f32 cos/sin tables (the kinds a SIMD target reads row by row: cos_sin_2, cat, full) on every target, both
// layouts, tails, pass-through dims, in place and out of place, forward and inverse: bit for bit the scalar
// kernel's. Rows hold identity pairs (row 0: cos 1, sin 0 everywhere; row 5: one pair cos 1, sin -0), and a
// row of values beyond 1 (the overflow fix); inputs hold -0, quiet and signalling NaNs with payloads, Inf and
// overflow candidates. Identity pairs keep the input's exact bits (NaN payloads too: no NaN == NaN here).
TEST(SimdKernelsV3, F32TableRowsBitIdenticalWithIdentityPairsAndValuesBeyondOne) {
  const Implementation* scalar = find_implementation("scalar");
  ASSERT_NE(scalar, nullptr);
  std::mt19937_64 rng(2029);
  const uint32_t specials[] = {0x80000000u, 0x7fc00001u, 0x7f800001u, 0xffa00005u, 0xff800000u, 0x7f7fffffu,
                               0x00000001u};
  size_t identity_checked = 0;
  for (TableKind k : {TableKind::cos_sin_2, TableKind::cos_sin_cat, TableKind::cos_sin_full})
    for (Layout l : kAllLayouts)
      for (uint32_t rd : {2u, 6u, 20u, 34u, 64u, 72u, 128u, 130u})
        for (Direction dir : {Direction::forward, Direction::inverse}) {
          const uint32_t np = rd / 2, off = uint32_t(rng() % 3), tail = uint32_t(rng() % 3);
          RopeCase c = make_v2_case(Dtype::f32, l, {rd, off, tail, 1, false, 1.0, 0}, rng, true);
          c.direction = dir;
          c.positions = {0, 5, 7, 0, 3, 6};
          c.input.resize(c.n_bytes());
          for (size_t e = 0; e < c.n_elements(); ++e)
            if (rng() % 4 == 0) store_bits(Dtype::f32, c.input.data(), e, specials[rng() % std::size(specials)]);
          CosSinTable t;
          t.kind = k;
          t.dtype = Dtype::f32;
          t.rows = 8;
          std::uniform_real_distribution<double> u(-2, 2);
          for (size_t r = 0; r < t.rows; ++r)
            for (uint32_t i = 0; i < np; ++i) {
              const double ang = double(r) * std::pow(10000.0, -2.0 * i / double(rd));
              double cv = double(float(std::cos(ang))), sv = double(float(std::sin(ang)));
              if (r == 5 && i == np / 2) cv = 1.0, sv = -0.0;  // one identity pair in a later row
              if (r == 6) cv = double(float(u(rng))), sv = double(float(u(rng)));  // beyond 1: the fix
              t.cos.push_back(cv);
              t.sin.push_back(sv);
            }
          c.inv_freq.clear();
          c.freq_rule.reset();
          c.table = std::move(t);
          ASSERT_EQ(c.validate(), "") << c.summary();
          ASSERT_NO_FATAL_FAILURE(expect_targets_match_scalar(*scalar, c, [&](const Implementation* impl,
                                                                              const Bytes& got, const Bytes& got_ip) {
            // Identity pairs and pass-through dims: the input's exact bits, out of place and in place.
            for (size_t tok = 0; tok < c.n_tokens(); ++tok)
              for (size_t h = 0; h < c.n_heads; ++h)
                for (uint32_t e = 0; e < c.head_dim; ++e) {
                  const uint32_t pair = is_rotated(c, e) ? (l == Layout::interleaved ? (e - off) / 2 : (e - off) % np) : 0;
                  const bool ident = !is_rotated(c, e) || c.positions[tok] == 0 || (c.positions[tok] == 5 && pair == np / 2);
                  if (!ident) continue;
                  const size_t kk = head_offset(c, tok, h) + e;
                  ASSERT_EQ(load_bits(Dtype::f32, got.data(), kk), load_bits(Dtype::f32, c.input.data(), kk))
                      << impl->name << " " << c.summary() << " token " << tok << " dim " << e;
                  ASSERT_EQ(load_bits(Dtype::f32, got_ip.data(), kk), load_bits(Dtype::f32, c.input.data(), kk))
                      << impl->name << " in place " << c.summary() << " token " << tok << " dim " << e;
                  ++identity_checked;
                }
          }));
        }
  EXPECT_GT(identity_checked, 0u);
}

// Position 0 computed (no table), f32: every pair the input's exact bits, signalling NaN payloads included.
// Non-temporal stores (simd_kernels.hpp, stream_threshold): the threshold lowered to 0 so small cases take the
// streaming path. f32, out of place into a 64-byte aligned buffer, computed rows and f32 tables, both layouts, the
// rotary dims whose heads keep their row in registers on some target (and others, which store as usual), specials
// in the input: every target bit for bit the scalar kernel's. Each vector target streams some of them; an in-place
// call, an unaligned output and a head_dim that is not a multiple of 16 floats never do.
TEST(SimdKernels, StreamingStoresBitIdenticalToScalar) {
  const Implementation* scalar = find_implementation("scalar");
  ASSERT_NE(scalar, nullptr);
  struct Restore {
    size_t was = simd::set_stream_threshold(0);
    ~Restore() { simd::set_stream_threshold(was); }
  } restore;
  std::mt19937_64 rng(2031);
  size_t cases = 0;
  for (const auto& t : simd::supported_targets()) {
    const uint64_t streamed0 = simd::streamed_calls();
    for (Layout l : kAllLayouts)
      for (uint32_t rd : {16u, 32u, 64u, 128u, 256u})
        for (bool table : {false, true}) {
          RopeCase c = make_v2_case(Dtype::f32, l, {rd, 0, 0, 1, false, 1.0, 0}, rng, true);
          c.n_heads = 3;
          c.positions = {5, 4096, -3, 65537, 1, 100000};
          if (table) {
            CosSinTable tb;
            tb.kind = TableKind::cos_sin_2;
            tb.dtype = Dtype::f32;
            tb.rows = 64;
            const uint32_t np = rd / 2;
            c.positions = {5, 40, 3, 63, 1, 17};
            for (size_t r = 0; r < tb.rows; ++r)
              for (uint32_t i = 0; i < np; ++i) {
                const double ang = double(r) * std::pow(10000.0, -2.0 * i / double(rd));
                tb.cos.push_back(double(float(std::cos(ang))));
                tb.sin.push_back(double(float(std::sin(ang))));
              }
            c.table = std::move(tb);
          }
          c.input.assign(c.n_bytes(), 0);
          for (size_t k = 0; k < c.n_elements(); ++k) store_bits(Dtype::f32, c.input.data(), k, random_bits(Dtype::f32, rng, true));
          ASSERT_EQ(c.validate(), "") << c.summary();
          Bytes want(c.n_bytes(), 0);
          const rc_rope_args w = c.args(c.input.data(), want.data(), 3);
          ASSERT_EQ(scalar->fn(&w), RC_OK) << c.summary();
          // A 64-byte aligned output, and one 4 bytes past that (never streamed).
          std::vector<unsigned char> buf(c.n_bytes() + 128, 0);
          unsigned char* aligned = buf.data() + (64 - reinterpret_cast<uintptr_t>(buf.data()) % 64) % 64;
          for (unsigned char* out : {aligned, aligned + 4}) {
            const uint64_t before = simd::streamed_calls();
            const rc_rope_args g = c.args(c.input.data(), out, 3);
            ASSERT_EQ(t.fn(&g), RC_OK) << t.name << " " << c.summary();
            ASSERT_EQ(std::memcmp(out, want.data(), c.n_bytes()), 0) << t.name << " " << c.summary()
                                                                      << (out == aligned ? " aligned" : " unaligned");
            if (out != aligned) {
              EXPECT_EQ(simd::streamed_calls(), before) << t.name << " streamed into an unaligned output";
            }
          }
          const uint64_t before = simd::streamed_calls();
          Bytes ip = c.input;
          const rc_rope_args gi = c.args(ip.data(), ip.data(), 3);
          ASSERT_EQ(t.fn(&gi), RC_OK) << t.name << " " << c.summary();
          EXPECT_EQ(ip, want) << t.name << " in place " << c.summary();
          EXPECT_EQ(simd::streamed_calls(), before) << t.name << " streamed in place";
          ++cases;
        }
    // head_dim 8 floats past a multiple of 16: never streamed.
    {
      RopeCase c = make_v2_case(Dtype::f32, Layout::interleaved, {128, 0, 8, 1, false, 1.0, 0}, rng, false);
      std::vector<unsigned char> buf(c.n_bytes() + 64, 0);
      unsigned char* aligned = buf.data() + (64 - reinterpret_cast<uintptr_t>(buf.data()) % 64) % 64;
      const uint64_t before = simd::streamed_calls();
      const rc_rope_args g = c.args(c.input.data(), aligned, 3);
      ASSERT_EQ(t.fn(&g), RC_OK) << t.name;
      EXPECT_EQ(simd::streamed_calls(), before) << t.name << " streamed heads of 136 floats";
    }
    std::printf("%s: %llu of its calls streamed\n", t.name.c_str(), (unsigned long long)(simd::streamed_calls() - streamed0));
    if (t.name != "simd-scalar") {
      EXPECT_GT(simd::streamed_calls(), streamed0) << t.name << " never streamed";
    }
  }
  EXPECT_EQ(cases, simd::supported_targets().size() * 20);
}

TEST(SimdKernels, PositionZeroKeepsSignallingNaNPayloadsF32) {
  std::mt19937_64 rng(5);
  for (Layout l : kAllLayouts)
    for (uint32_t rd : {2u, 20u, 64u, 128u, 130u}) {
      RopeCase c = make_case(Dtype::f32, l, rd, rd + 3, 3, {0, 0, 0}, rng, true);
      for (size_t e = 0; e < c.n_elements(); e += 3) store_bits(Dtype::f32, c.input.data(), e, 0x7f800001u + uint32_t(e));
      for (size_t e = 1; e < c.n_elements(); e += 5) store_bits(Dtype::f32, c.input.data(), e, 0x80000000u);
      for (const Implementation* impl : simd_impls()) {
        Bytes got, got_ip;
        ASSERT_EQ(run_kernel(*impl, c, got), RC_OK);
        ASSERT_EQ(run_kernel_in_place(*impl, c, got_ip), RC_OK);
        EXPECT_EQ(got, c.input) << impl->name << " " << c.summary();
        EXPECT_EQ(got_ip, c.input) << impl->name << " in place " << c.summary();
      }
    }
}

// A position outside the table is an error before anything is written, on every target.
TEST(SimdKernelsV3, APositionOutsideTheTableWritesNothing) {
  std::mt19937_64 rng(2028);
  RopeCase c;
  do {
    c = make_v2_case(Dtype::f32, Layout::half_split, v2_shapes()[0], rng, false);
    testing::add_random_v3_features(rng, c);
  } while (!c.table);
  c.positions.back() = int64_t(c.table->rows);
  for (const Implementation* impl : simd_impls()) {
    Bytes out(c.n_bytes(), 0x5a);
    const rc_rope_args a = c.args(c.input.data(), out.data(), 3);
    EXPECT_EQ(impl->fn(&a), 2) << impl->name;
    EXPECT_EQ(out, Bytes(c.n_bytes(), 0x5a)) << impl->name;
  }
}

TEST(SimdKernelsV2, VersionNegotiation) {
  std::mt19937_64 rng(8);
  for (Dtype d : kAllDtypes)
    for (Layout l : kAllLayouts) {
      const RopeCase c = make_case(d, l, 40, 44, 2, {0, 3, 1000, 77777}, rng, true);
      Bytes want(c.n_bytes());
      rc_rope_args v1 = c.args(c.input.data(), want.data());
      ASSERT_EQ(v1.abi_version, 1u);
      ASSERT_EQ(find_implementation("scalar")->fn(&v1), RC_OK);
      for (const Implementation* impl : simd_impls()) {
        Bytes out(c.n_bytes(), 0);
        rc_rope_args a = c.args(c.input.data(), out.data());
        a.abi_version = ROPECHECK_ABI_VERSION + 1;  // (3 is taken: SimdKernelsV3)
        EXPECT_EQ(impl->fn(&a), RC_UNSUPPORTED) << impl->name;
        a.abi_version = 0;
        EXPECT_EQ(impl->fn(&a), RC_UNSUPPORTED) << impl->name;
        // v1 with garbage where a v2 struct continues.
        a = c.args(c.input.data(), out.data());
        a.rotary_offset = 1000;
        a.n_pos_axes = 77;
        a.pair_axis = reinterpret_cast<const uint8_t*>(uintptr_t(8));
        a.attention_factor = std::nan("");
        a.freq_rule = reinterpret_cast<const rc_freq_rule*>(uintptr_t(8));
        ASSERT_EQ(impl->fn(&a), RC_OK) << impl->name;
        std::string first;
        EXPECT_EQ(count_mismatches(c, out, want, &first), 0u) << impl->name << " v1: " << first;
        // v2, neutral.
        Bytes out2(c.n_bytes(), 0);
        a = c.args(c.input.data(), out2.data());
        a.abi_version = 2;
        a.rotary_offset = 0;
        a.n_pos_axes = 1;
        a.pair_axis = nullptr;
        a.attention_factor = 1.0;
        a.freq_rule = nullptr;
        ASSERT_EQ(impl->fn(&a), RC_OK) << impl->name;
        EXPECT_EQ(out2, out) << impl->name << " neutral v2 vs v1";
      }
    }
}

TEST(SimdKernelsV2, RejectsMalformedV2Calls) {
  std::mt19937_64 rng(6);
  RopeCase c = make_v2_case(Dtype::f32, Layout::interleaved, {8, 2, 0, 2, true, 1.0, 0}, rng, false);
  Bytes out(c.n_bytes());
  for (const Implementation* impl : simd_impls()) {
    rc_rope_args a = c.args(c.input.data(), out.data());
    ASSERT_EQ(impl->fn(&a), RC_OK) << impl->name;
    a.rotary_offset = 3;  // 3 + 8 > 10
    EXPECT_NE(impl->fn(&a), RC_OK) << impl->name;
    a = c.args(c.input.data(), out.data());
    const uint8_t bad_map[4] = {0, 1, 2, 0};  // axis 2 of 2
    a.pair_axis = bad_map;
    EXPECT_NE(impl->fn(&a), RC_OK) << impl->name;
    a = c.args(c.input.data(), out.data());
    a.n_pos_axes = 5;
    EXPECT_NE(impl->fn(&a), RC_OK) << impl->name;
    for (double af : {-1.0, std::nan(""), HUGE_VAL}) {
      a = c.args(c.input.data(), out.data());
      a.attention_factor = af;
      EXPECT_NE(impl->fn(&a), RC_OK) << impl->name << " af " << af;
    }
    // 0 is not malformed: a zero in a field v2 added means "as before" (a v1-style caller's zero-initialised
    // struct; docs/gate.md, "ABI versions"), here an attention factor of 1.
    Bytes neutral(c.n_bytes()), zero(c.n_bytes());
    a = c.args(c.input.data(), neutral.data());
    a.attention_factor = 1.0;
    ASSERT_EQ(impl->fn(&a), RC_OK) << impl->name;
    a = c.args(c.input.data(), zero.data());
    a.attention_factor = 0.0;
    ASSERT_EQ(impl->fn(&a), RC_OK) << impl->name;
    EXPECT_EQ(zero, neutral) << impl->name;
  }
}

}  // namespace
}  // namespace ropecheck
