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

}  // namespace
}  // namespace ropecheck
