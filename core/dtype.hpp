// Storage types of RoPE inputs and outputs: their formats, and exact
// conversions to and from f32 with round-to-nearest-even stores.
#pragma once

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ropecheck/kernel_abi.h"

namespace ropecheck {

enum class Dtype : uint32_t { f32 = RC_F32, f16 = RC_F16, bf16 = RC_BF16 };
enum class Layout : uint32_t { interleaved = RC_INTERLEAVED, half_split = RC_HALF_SPLIT };

inline constexpr Dtype kAllDtypes[] = {Dtype::f32, Dtype::f16, Dtype::bf16};
inline constexpr Layout kAllLayouts[] = {Layout::interleaved, Layout::half_split};

// An IEEE binary format: p significand bits (with the hidden one), emin the
// exponent of the smallest normal (value 2^emin), emax of the largest binade.
struct Format {
  int precision;
  int emin;
  int emax;
  // Unit roundoff u = 2^-p (half an ulp of 1).
  double unit_roundoff() const { return pow2(-precision); }
  double min_normal() const { return pow2(emin); }
  double max_finite() const { return (2.0 - pow2(1 - precision)) * pow2(emax); }

  // 2^k for a normal double's exponent k (the judge asks for these per pair: no ldexp call).
  static constexpr double pow2(int k) { return std::bit_cast<double>(uint64_t(k + 1023) << 52); }
};

constexpr Format format_of(Dtype d) {
  switch (d) {
    case Dtype::f32: return {24, -126, 127};
    case Dtype::f16: return {11, -14, 15};
    case Dtype::bf16: return {8, -126, 127};
  }
  return {0, 0, 0};
}

constexpr size_t dtype_size(Dtype d) { return d == Dtype::f32 ? 4 : 2; }

std::string_view to_string(Dtype d);
std::string_view to_string(Layout l);
std::optional<Dtype> parse_dtype(std::string_view s);
std::optional<Layout> parse_layout(std::string_view s);
// "all", or a comma-separated list of names; false on an unknown or empty item.
bool parse_dtype_list(std::string_view s, std::vector<Dtype>& out);
bool parse_layout_list(std::string_view s, std::vector<Layout>& out);

// ---- conversions -----------------------------------------------------------

inline float bf16_bits_to_f32(uint16_t h) { return std::bit_cast<float>(uint32_t(h) << 16); }

// Round to nearest even; NaN stays NaN (quieted, sign and top payload kept).
inline uint16_t f32_to_bf16_bits(float f) {
  uint32_t u = std::bit_cast<uint32_t>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x0040u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}

inline float f16_bits_to_f32(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t man = h & 0x3ffu;
  if (exp == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (man << 13));
  if (exp == 0) {  // zero or subnormal: man * 2^-24, exact in f32
    const float v = float(man) * 0x1p-24f;
    return std::bit_cast<float>(std::bit_cast<uint32_t>(v) | sign);
  }
  return std::bit_cast<float>(sign | ((exp + 112u) << 23) | (man << 13));
}

// Round to nearest even; overflow to +-Inf; subnormals rounded as IEEE does;
// NaN stays NaN (quieted, sign and top payload kept).
inline uint16_t f32_to_f16_bits(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  x &= 0x7fffffffu;
  uint32_t o;
  if (x >= 0x47800000u) {  // |f| >= 65536, Inf or NaN
    o = x > 0x7f800000u ? (0x7e00u | ((x >> 13) & 0x3ffu)) : 0x7c00u;
  } else if (x < 0x38800000u) {  // result subnormal or zero: align the 10 bits at the bottom
    // Adding 0.5 puts the f16 subnormal quantum 2^-24 at the f32 ulp of 0.5;
    // the f32 addition rounds to nearest even.
    const float v = std::bit_cast<float>(x) + 0.5f;
    o = std::bit_cast<uint32_t>(v) - 0x3f000000u;
  } else {
    const uint32_t odd = (x >> 13) & 1u;
    x += (uint32_t(15 - 127) << 23) + 0xfffu + odd;
    o = x >> 13;  // a carry into the exponent gives the next binade or Inf
  }
  return uint16_t(o | sign);
}

// ---- typed element access over raw storage ---------------------------------

inline float load_f32(Dtype d, const void* base, size_t i) {
  switch (d) {
    case Dtype::f32: {
      float v;
      std::memcpy(&v, static_cast<const char*>(base) + 4 * i, 4);
      return v;
    }
    case Dtype::f16: {
      uint16_t h;
      std::memcpy(&h, static_cast<const char*>(base) + 2 * i, 2);
      return f16_bits_to_f32(h);
    }
    case Dtype::bf16: {
      uint16_t h;
      std::memcpy(&h, static_cast<const char*>(base) + 2 * i, 2);
      return bf16_bits_to_f32(h);
    }
  }
  return 0;
}

// Flip the sign bit of element i (exact negation, NaN payloads kept).
inline void flip_sign_bit(Dtype d, void* base, size_t i) {
  const size_t sz = d == Dtype::f32 ? 4 : 2;
  static_cast<unsigned char*>(base)[sz * i + sz - 1] ^= 0x80;  // little-endian: the sign is the top bit of the last byte
}

inline void store_f32(Dtype d, void* base, size_t i, float v) {
  switch (d) {
    case Dtype::f32: std::memcpy(static_cast<char*>(base) + 4 * i, &v, 4); return;
    case Dtype::f16: {
      const uint16_t h = f32_to_f16_bits(v);
      std::memcpy(static_cast<char*>(base) + 2 * i, &h, 2);
      return;
    }
    case Dtype::bf16: {
      const uint16_t h = f32_to_bf16_bits(v);
      std::memcpy(static_cast<char*>(base) + 2 * i, &h, 2);
      return;
    }
  }
}

// Whether x is exactly a value of d.
inline bool is_value_of(Dtype d, double x) {
  const float f = float(x);
  if (double(f) != x) return false;
  unsigned char b[4];
  store_f32(d, b, 0, f);
  return load_f32(d, b, 0) == f;
}

// Raw bits of element i (zero-extended), for printing and bit-exact compares.
inline uint32_t load_bits(Dtype d, const void* base, size_t i) {
  if (d == Dtype::f32) {
    uint32_t v;
    std::memcpy(&v, static_cast<const char*>(base) + 4 * i, 4);
    return v;
  }
  uint16_t h;
  std::memcpy(&h, static_cast<const char*>(base) + 2 * i, 2);
  return h;
}

inline void store_bits(Dtype d, void* base, size_t i, uint32_t bits) {
  if (d == Dtype::f32) {
    std::memcpy(static_cast<char*>(base) + 4 * i, &bits, 4);
  } else {
    const uint16_t h = uint16_t(bits);
    std::memcpy(static_cast<char*>(base) + 2 * i, &h, 2);
  }
}

// The value of a bit pattern of type d, exactly (every f32/f16/bf16 is a double).
inline double bits_to_double(Dtype d, uint32_t bits) {
  switch (d) {
    case Dtype::f32: return std::bit_cast<float>(bits);
    case Dtype::f16: return f16_bits_to_f32(uint16_t(bits));
    case Dtype::bf16: return bf16_bits_to_f32(uint16_t(bits));
  }
  return 0;
}

// Bits of a double that is exactly representable in d (as a float first).
inline uint32_t double_to_bits_exact(Dtype d, double v) {
  const float f = float(v);
  switch (d) {
    case Dtype::f32: return std::bit_cast<uint32_t>(f);
    case Dtype::f16: return f32_to_f16_bits(f);
    case Dtype::bf16: return f32_to_bf16_bits(f);
  }
  return 0;
}

}  // namespace ropecheck
