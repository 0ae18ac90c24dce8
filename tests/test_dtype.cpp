// core/dtype.hpp: f32 <-> f16/bf16 conversions, checked on chosen values
// (ties, subnormals, overflow, NaN), on every 16-bit pattern, and on a large
// sample of f32 against two independent conversions: the compiler's
// _Float16 (libgcc soft-fp, round to nearest even) and an arithmetic rounding
// in double written here.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <random>

#include "core/dtype.hpp"

using namespace ropecheck;

namespace {

float f32(uint32_t bits) { return std::bit_cast<float>(bits); }
uint32_t bits(float f) { return std::bit_cast<uint32_t>(f); }

bool f16_is_nan(uint16_t h) { return (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0; }
bool bf16_is_nan(uint16_t h) { return (h & 0x7f80u) == 0x7f80u && (h & 0x7fu) != 0; }

// Independent: round a finite float to a binary format (p bits, emin, largest
// finite value maxf) in double arithmetic: scale to the quantum, round to
// nearest even with nearbyint, scale back. Returns the rounded value (+-Inf on
// overflow).
double round_arith(float x, int p, int emin, double maxf) {
  const double v = x;
  if (v == 0) return v;
  const int e = std::ilogb(v);
  const int q = std::max(e, emin) - (p - 1);
  const double r = std::ldexp(std::nearbyint(std::ldexp(v, -q)), q);
  if (std::fabs(r) > maxf) return std::copysign(INFINITY, v);
  if (r == 0) return std::copysign(0.0, v);
  return r;
}

constexpr double kF16Max = 65504.0;
const double kBf16Max = std::ldexp(255.0 / 128.0, 127);

// Decode without the library: sign, exponent, fraction by definition.
double decode(uint16_t h, int ebits, int mbits) {
  const int bias = (1 << (ebits - 1)) - 1;
  const int e = (h >> mbits) & ((1 << ebits) - 1);
  const int m = h & ((1 << mbits) - 1);
  const double s = (h >> 15) ? -1.0 : 1.0;
  if (e == (1 << ebits) - 1) return m ? NAN : s * INFINITY;
  if (e == 0) return s * std::ldexp(double(m), 1 - bias - mbits);
  return s * std::ldexp(double(m + (1 << mbits)), e - bias - mbits);
}

void check_f16(float x) {
  const uint16_t got = f32_to_f16_bits(x);
  if (std::isnan(x)) {
    ASSERT_TRUE(f16_is_nan(got)) << std::hexfloat << x;
    ASSERT_EQ(got >> 15, bits(x) >> 31);
    return;
  }
  const _Float16 h = static_cast<_Float16>(x);
  ASSERT_EQ(got, std::bit_cast<uint16_t>(h)) << "f32 " << std::hexfloat << x << " bits " << std::hex << bits(x);
  const double want = round_arith(x, 11, -14, kF16Max);
  ASSERT_EQ(std::bit_cast<uint64_t>(double(f16_bits_to_f32(got))), std::bit_cast<uint64_t>(want))
      << std::hexfloat << x;
}

void check_bf16(float x) {
  const uint16_t got = f32_to_bf16_bits(x);
  if (std::isnan(x)) {
    ASSERT_TRUE(bf16_is_nan(got)) << std::hex << bits(x);
    ASSERT_EQ(got >> 15, bits(x) >> 31);
    return;
  }
  const double want = round_arith(x, 8, -126, kBf16Max);
  ASSERT_EQ(std::bit_cast<uint64_t>(double(bf16_bits_to_f32(got))), std::bit_cast<uint64_t>(want))
      << "f32 " << std::hexfloat << x << " bits " << std::hex << bits(x) << " got " << got;
}

TEST(DtypeF16, ChosenValues) {
  EXPECT_EQ(f32_to_f16_bits(1.0f), 0x3c00);
  EXPECT_EQ(f32_to_f16_bits(-2.0f), 0xc000);
  EXPECT_EQ(f32_to_f16_bits(0.0f), 0x0000);
  EXPECT_EQ(f32_to_f16_bits(-0.0f), 0x8000);
  // ties to even in the normal range
  EXPECT_EQ(f32_to_f16_bits(1.0f + 0x1p-11f), 0x3c00);        // 1 | 1+2^-10: even is 1
  EXPECT_EQ(f32_to_f16_bits(1.0f + 3 * 0x1p-11f), 0x3c02);    // 1+2^-10 | 1+2^-9: even is 1+2^-9
  EXPECT_EQ(f32_to_f16_bits(1.0f + 0x1p-11f + 0x1p-23f), 0x3c01);  // just above the tie
  EXPECT_EQ(f32_to_f16_bits(std::nextafter(1.0f + 0x1p-11f, 0.0f)), 0x3c00);
  EXPECT_EQ(f32_to_f16_bits(2.0f - 0x1p-11f), 0x4000);  // tie 0x3fff | 2: even is 2, the next binade
  EXPECT_EQ(f32_to_f16_bits(2.0f - 0x1p-11f - 0x1p-22f), 0x3fff);
  // overflow: 65504 is the largest finite; 65520 is the tie with 2^16 -> Inf
  EXPECT_EQ(f32_to_f16_bits(65504.0f), 0x7bff);
  EXPECT_EQ(f32_to_f16_bits(65519.996f), 0x7bff);
  EXPECT_EQ(f32_to_f16_bits(65520.0f), 0x7c00);
  EXPECT_EQ(f32_to_f16_bits(-65520.0f), 0xfc00);
  EXPECT_EQ(f32_to_f16_bits(1e10f), 0x7c00);
  EXPECT_EQ(f32_to_f16_bits(INFINITY), 0x7c00);
  EXPECT_EQ(f32_to_f16_bits(-INFINITY), 0xfc00);
  // subnormals: quantum 2^-24
  EXPECT_EQ(f32_to_f16_bits(0x1p-24f), 0x0001);
  EXPECT_EQ(f32_to_f16_bits(0x1p-25f), 0x0000);               // tie 0 | 2^-24: even is 0
  EXPECT_EQ(f32_to_f16_bits(-0x1p-25f), 0x8000);
  EXPECT_EQ(f32_to_f16_bits(0x1p-25f + 0x1p-40f), 0x0001);
  EXPECT_EQ(f32_to_f16_bits(3 * 0x1p-25f), 0x0002);           // tie 1 | 2 quanta
  EXPECT_EQ(f32_to_f16_bits(5 * 0x1p-25f), 0x0002);           // tie 2 | 3 quanta
  EXPECT_EQ(f32_to_f16_bits(0x1p-14f - 0x1p-25f), 0x0400);    // tie 0x3ff | 0x400 (min normal)
  EXPECT_EQ(f32_to_f16_bits(0x1p-14f - 0x1p-24f), 0x03ff);    // largest subnormal
  EXPECT_EQ(f32_to_f16_bits(0x1p-30f), 0x0000);
  EXPECT_EQ(f32_to_f16_bits(f32(0x00000001u)), 0x0000);       // f32 subnormal
  // NaN stays NaN with its sign, including payloads that would truncate to Inf
  EXPECT_TRUE(f16_is_nan(f32_to_f16_bits(NAN)));
  EXPECT_TRUE(f16_is_nan(f32_to_f16_bits(f32(0x7f800001u))));
  EXPECT_TRUE(f16_is_nan(f32_to_f16_bits(f32(0xff800001u))));
  EXPECT_EQ(f32_to_f16_bits(f32(0xff800001u)) >> 15, 1);
  EXPECT_TRUE(std::isnan(f16_bits_to_f32(0x7c01)));
  EXPECT_EQ(f16_bits_to_f32(0x7c00), INFINITY);
  EXPECT_EQ(f16_bits_to_f32(0x0001), 0x1p-24f);
  EXPECT_EQ(bits(f16_bits_to_f32(0x8000)), 0x80000000u);
}

TEST(DtypeBf16, ChosenValues) {
  EXPECT_EQ(f32_to_bf16_bits(1.0f), 0x3f80);
  EXPECT_EQ(f32_to_bf16_bits(-0.0f), 0x8000);
  EXPECT_EQ(f32_to_bf16_bits(1.0f + 0x1p-8f), 0x3f80);        // tie: even is 1
  EXPECT_EQ(f32_to_bf16_bits(1.0f + 3 * 0x1p-8f), 0x3f82);    // tie: even is 1+2^-6
  EXPECT_EQ(f32_to_bf16_bits(1.0f + 0x1p-8f + 0x1p-23f), 0x3f81);
  EXPECT_EQ(f32_to_bf16_bits(2.0f - 0x1p-8f), 0x4000);  // tie with 2
  EXPECT_EQ(f32_to_bf16_bits(2.0f - 0x1p-8f - 0x1p-22f), 0x3fff);
  // overflow: largest bf16 0x7f7f; the tie above it and anything beyond -> Inf
  EXPECT_EQ(f32_to_bf16_bits(f32(0x7f7f0000u)), 0x7f7f);
  EXPECT_EQ(f32_to_bf16_bits(f32(0x7f7f7fffu)), 0x7f7f);
  EXPECT_EQ(f32_to_bf16_bits(f32(0x7f7f8000u)), 0x7f80);
  EXPECT_EQ(f32_to_bf16_bits(f32(0x7f7fffffu)), 0x7f80);
  EXPECT_EQ(f32_to_bf16_bits(f32(0xff7fffffu)), 0xff80);
  EXPECT_EQ(f32_to_bf16_bits(INFINITY), 0x7f80);
  // subnormals: quantum 2^-133
  EXPECT_EQ(f32_to_bf16_bits(f32(0x00008000u)), 0x0000);  // tie 0 | 1 quantum
  EXPECT_EQ(f32_to_bf16_bits(f32(0x00008001u)), 0x0001);
  EXPECT_EQ(f32_to_bf16_bits(f32(0x00018000u)), 0x0002);  // tie 1 | 2
  EXPECT_EQ(f32_to_bf16_bits(f32(0x007fffffu)), 0x0080);  // largest f32 subnormal -> min normal
  EXPECT_EQ(f32_to_bf16_bits(f32(0x80000001u)), 0x8000);
  // NaN: a signalling NaN with a low payload must not become Inf
  EXPECT_TRUE(bf16_is_nan(f32_to_bf16_bits(f32(0x7f800001u))));
  EXPECT_TRUE(bf16_is_nan(f32_to_bf16_bits(f32(0xff800001u))));
  EXPECT_EQ(f32_to_bf16_bits(f32(0xff800001u)) >> 15, 1);
  EXPECT_TRUE(bf16_is_nan(f32_to_bf16_bits(NAN)));
}

TEST(DtypeF16, EveryPatternRoundTrips) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = f16_bits_to_f32(uint16_t(h));
    const _Float16 ref = std::bit_cast<_Float16>(uint16_t(h));
    const double dec = decode(uint16_t(h), 5, 10);
    if (f16_is_nan(uint16_t(h))) {
      ASSERT_TRUE(std::isnan(f)) << h;
      ASSERT_TRUE(std::isnan(static_cast<float>(ref)));
      ASSERT_TRUE(f16_is_nan(f32_to_f16_bits(f))) << h;
      ASSERT_EQ(bits(f) >> 31, h >> 15);
      continue;
    }
    ASSERT_EQ(bits(f), bits(static_cast<float>(ref))) << std::hex << h;
    ASSERT_EQ(std::bit_cast<uint64_t>(double(f)), std::bit_cast<uint64_t>(dec)) << std::hex << h;
    ASSERT_EQ(f32_to_f16_bits(f), h) << std::hex << h;
  }
}

TEST(DtypeBf16, EveryPatternRoundTrips) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = bf16_bits_to_f32(uint16_t(h));
    const double dec = decode(uint16_t(h), 8, 7);
    if (bf16_is_nan(uint16_t(h))) {
      ASSERT_TRUE(std::isnan(f)) << h;
      ASSERT_TRUE(bf16_is_nan(f32_to_bf16_bits(f))) << h;
      ASSERT_EQ(bits(f) >> 31, h >> 15);
      continue;
    }
    ASSERT_EQ(std::bit_cast<uint64_t>(double(f)), std::bit_cast<uint64_t>(dec)) << std::hex << h;
    ASSERT_EQ(f32_to_bf16_bits(f), h) << std::hex << h;
  }
}

// Every f32 whose low bits sit at or next to a tie for the target, in every
// binade, plus a strided sweep of all 2^32 patterns and random patterns.
template <class Check>
void sweep_f32(Check check, int drop_bits) {
  const uint32_t half = 1u << (drop_bits - 1);
  for (uint32_t sign = 0; sign < 2; ++sign)
    for (uint32_t exp = 0; exp < 256; ++exp)
      for (uint32_t hi = 0; hi < 64; ++hi) {  // a few kept-bit patterns per binade
        const uint32_t kept = (hi * 0x9e3779b9u) & (0x7fffffu >> drop_bits);
        for (int64_t delta : {-2, -1, 0, 1, 2}) {
          const uint32_t low = uint32_t(int64_t(half) + delta) & ((1u << drop_bits) - 1);
          check(f32((sign << 31) | (exp << 23) | (kept << drop_bits) | low));
        }
      }
  for (uint64_t u = 0; u < (uint64_t(1) << 32); u += 4093) check(f32(uint32_t(u)));
  std::mt19937 rng(7);
  for (int k = 0; k < 1000000; ++k) check(f32(rng()));
}

TEST(DtypeF16, SampleOfF32AgainstFloat16AndArithmetic) {
  sweep_f32([](float x) { check_f16(x); }, 13);
  // the whole range that matters for f16, exhaustively with a small stride
  for (uint32_t u = 0x33000000u; u <= 0x47800000u; u += 61) {
    check_f16(f32(u));
    check_f16(-f32(u));
  }
}

TEST(DtypeBf16, SampleOfF32AgainstArithmetic) { sweep_f32([](float x) { check_bf16(x); }, 16); }

TEST(DtypeAccess, LoadStoreBits) {
  unsigned char buf[8] = {};
  store_f32(Dtype::f16, buf, 1, 65520.0f);
  EXPECT_EQ(load_bits(Dtype::f16, buf, 1), 0x7c00u);
  store_f32(Dtype::bf16, buf, 2, 1.0f + 3 * 0x1p-8f);
  EXPECT_EQ(load_bits(Dtype::bf16, buf, 2), 0x3f82u);
  EXPECT_EQ(load_f32(Dtype::bf16, buf, 2), 1.0f + 0x1p-6f);
  store_f32(Dtype::f32, buf, 1, -0.0f);
  EXPECT_EQ(load_bits(Dtype::f32, buf, 1), 0x80000000u);
  EXPECT_EQ(bits_to_double(Dtype::f16, 0x0001), 0x1p-24);
  EXPECT_EQ(double_to_bits_exact(Dtype::bf16, 0x1p-133), 0x0001u);
}

}  // namespace
