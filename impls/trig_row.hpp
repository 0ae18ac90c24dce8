// The per-token cos/sin row of the built-in kernels, rounded to f32. `scalar`
// calls the plain C++ form here; every SIMD target evaluates the same double
// operations in the same order with Highway (impls/simd/simd_kernels.cpp,
// TrigRow), so the rows are bit-identical (tests/test_simd.cpp checks each
// target against cos_sin_row below).
//
// Angle: m * theta_i with m = position * position_scale (long double, 64-bit
// significand, as before) and theta_i in long double (powl or the table).
// Both are split exactly into double-double (hi + lo); the product is formed
// as p = m_hi * th_hi plus its exact rounding error (Dekker's two-product, no
// FMA so every target rounds the same) plus the cross terms: |A - m*th| <
// 2^-100 |A|, more accurate than the long double product.
//
// Reduction and polynomials (error in docs/error-model.md, "Bounds for kernels
// computing in f32"):
//  - |p| < 2^32: k = nearest integer to p*2/pi (|k| < 2^31.4; the 1.5*2^52
//    shift rounds it and its low bits give k mod 4). r = p - k*(P1 + P2 + P3)
//    + A_lo with P1 and P2 of 21 bits each, so k*P1 and k*P2 are exact and
//    p - k*P1 is exact (a multiple of ulp(p) no larger than p); the next
//    subtraction is kept exact by a two-sum; P3 is the next 53 bits of pi/2
//    (the rest < 2^-103, times k < 2^-71). The reduced angle has < 2^-53.3
//    absolute error (its final rounding) + < 2^-63, and |r| <= pi/4 + 2^-12.
//    sin and cos of r are Taylor polynomials to r^15 / r^16 in double
//    (truncation < 2^-54, rounding a few 2^-53): in all < 2^-50 absolute.
//    tests/test_trig_row.cpp checks against MPFR that every value is within
//    half an f32 ulp + 2^-50 of the exact cos/sin of m*theta.
//  - otherwise (|p| >= 2^32, or m or theta outside [2^-400, 2^400]): the long
//    double path accurate_cos_sin (the product rounded to long double, 2^-64
//    relative; Cody-Waite in long double below 2^30, sincosl beyond).
// Every double operation is written out (the build disables FP contraction),
// so the result does not depend on the libm or the target.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <vector>

#include "impls/rule_theta.hpp"
#include "ropecheck/kernel_abi.h"

namespace ropecheck {

inline constexpr long double kCodyWaiteLimit = 0x1p30L;

// Taylor polynomials of sin and cos on the reduced angle r, z = r*r (shared
// by both paths; the SIMD row evaluates the same coefficients in the same order).
namespace trig_poly {
// sin: r + r*z*(c15 z^6 + ... + c3), the Taylor coefficients -1/15! ... -1/3!;
// truncation < (pi/4 + 2^-12)^17/17! < 2^-54.
inline constexpr double kSin[] = {-7.647163731819816e-13, 1.6059043836821613e-10, -2.505210838544172e-08, 2.7557319223985893e-06,
                                  -0.0001984126984126984, 0.008333333333333333,   -0.16666666666666666};
// cos: 1 + z*(-1/2 + z*(c16 z^6 + ... + c4)), 1/16! ... 1/4!; truncation < 2^-58.
inline constexpr double kCos[] = {4.779477332387385e-14, -1.1470745597729725e-11,
                                  2.08767569878681e-09,    -2.755731922398589e-07, 2.48015873015873e-05,
                                  -0.001388888888888889,   0.041666666666666664};

inline void sin_cos(double r, double& sn, double& cs) {
  const double z = r * r;
  double sp = kSin[0];
  for (size_t j = 1; j < std::size(kSin); ++j) sp = sp * z + kSin[j];
  sn = r + r * z * sp;
  double cp = kCos[0];
  for (size_t j = 1; j < std::size(kCos); ++j) cp = cp * z + kCos[j];
  cs = 1.0 + z * (-0.5 + z * cp);
}

// cos, sin of k*pi/2 + r from the quadrant q = k mod 4, times the attention
// factor af (ABI v2; 1 is exact, so a v1 row is unchanged), rounded once to f32.
inline void by_quadrant(uint64_t q, double sn, double cs, float& c, float& s, double af = 1.0) {
  switch (q & 3) {
    case 0: c = float(cs * af); s = float(sn * af); break;
    case 1: c = float(-sn * af); s = float(cs * af); break;
    case 2: c = float(-cs * af); s = float(-sn * af); break;
    default: c = float(sn * af); s = float(-cs * af); break;
  }
}
}  // namespace trig_poly

// cos and sin of a long double angle, rounded to f32: the fallback path.
//  - |angle| < 2^30: Cody-Waite reduction in long double, r = angle - k*pi/2
//    with pi/2 split as P1 (32 bits, so k*P1 is exact for |k| < 2^32; the
//    subtraction is exact by Sterbenz) + P2 (the next 64 bits): the reduction
//    adds < 2^-62 absolute error; r is rounded to double (2^-54), then the
//    Taylor polynomials above (< 2^-50 absolute in all).
//  - larger angles: sincosl (glibc's long double sin/cos with full reduction).
inline void accurate_cos_sin(long double angle, float& c, float& s, double af = 1.0) {
  if (!(std::fabs(angle) < kCodyWaiteLimit)) {
    long double sl, cl;
    sincosl(angle, &sl, &cl);
    c = float(cl * (long double)af);
    s = float(sl * (long double)af);
    return;
  }
  constexpr long double kTwoOverPi = 0xa2f9836e4e44152ap-64L;
  constexpr long double kPio2Hi = 0xc90fdaa200000000p-63L;  // pi/2 to 32 bits
  constexpr long double kPio2Lo = 0x85a308d313198a2ep-97L;  // the next 64 bits
  // Round to the nearest integer by adding and removing 1.5*2^63 (exact for
  // |x| < 2^62 in the 64-bit significand); nearbyintl would save and restore
  // the FP environment on every call.
  constexpr long double kRound = 0x3p62L;
  volatile long double shifted = angle * kTwoOverPi + kRound;
  const long double k = shifted - kRound;
  const double r = double((angle - k * kPio2Hi) - k * kPio2Lo);
  double sn, cs;
  trig_poly::sin_cos(r, sn, cs);
  trig_poly::by_quadrant(uint64_t(int64_t(k)), sn, cs, c, s, af);
}

// ---- the double-double row --------------------------------------------------

namespace trig_dd {
inline constexpr double kSplit = 134217729.0;            // 2^27 + 1 (Dekker)
inline constexpr double kFastLimit = 0x1p32;              // |p| below: the double-double path
inline constexpr double kMinMag = 0x1p-400, kMaxMag = 0x1p400;  // m, theta: no overflow/underflow in the products
inline constexpr double kTwoOverPi = 0x1.45f306dc9c883p-1;
inline constexpr double kShift = 0x1.8p52;                // rounds to an integer; low bits = k mod 2^51
inline constexpr double kP1 = 0x1.921fbp+0;               // pi/2, 21 significant bits
inline constexpr double kP2 = 0x1.5110bp-22;              // the next 21
inline constexpr double kP3 = 0x1.18469898cc517p-44;      // the next 53 (rest < 2^-103)

inline void split(double x, double& h, double& l) {
  const double t = kSplit * x;
  h = t - (t - x);
  l = x - h;
}

// Whether x (a long double angle factor rounded to double) may take the
// double-double path: 0 or 2^-400 <= |x| <= 2^400.
inline bool in_range(double x) {
  const double a = std::fabs(x);
  return a == 0 || (a >= kMinMag && a <= kMaxMag);
}
}  // namespace trig_dd

// The per-call theta table: theta_i in long double and, for the row, its
// double-double form hi + lo (exact) and the Dekker split of hi. Arrays are
// padded with zeros to a multiple of 16 so whole vectors can be loaded.
struct ThetaTable {
  std::vector<long double> th;
  std::vector<double> hi, lo, hs, ls;
  bool fast = true;       // every theta in range (else every row uses accurate_cos_sin)
  bool any_zero = false;  // some theta is 0 (that pair's angle is 0 at every position)
};

inline ThetaTable make_theta_table(const rc_rope_args* a) {
  const uint32_t np = a->rotary_dim / 2;
  const bool rule = a->abi_version >= 2 && a->freq_rule;
  const std::vector<long double> rule_th = rule ? rule_theta_table(a) : std::vector<long double>();
  const size_t padded = (np + 15) / 16 * 16 + 16;
  ThetaTable t;
  t.th.assign(padded, 0.0L);
  t.hi.assign(padded, 0.0);
  t.lo.assign(padded, 0.0);
  t.hs.assign(padded, 0.0);
  t.ls.assign(padded, 0.0);
  for (uint32_t i = 0; i < np; ++i) {
    const long double th = rule         ? rule_th[i]
                           : a->inv_freq ? (long double)a->inv_freq[i]
                                         : powl((long double)a->base, -(long double)(2 * i) / (long double)a->rotary_dim);
    t.th[i] = th;
    t.hi[i] = double(th);
    t.lo[i] = double(th - (long double)t.hi[i]);
    t.fast = t.fast && trig_dd::in_range(t.hi[i]);
    if (t.fast) trig_dd::split(t.hi[i], t.hs[i], t.ls[i]);
    t.any_zero = t.any_zero || th == 0;
  }
  return t;
}

// The same table, cached per thread for the last 64 (base, rotary_dim) when no
// frequency table is given: 64 powl cost ~25 us, which dominated a decode call,
// and a caller alternating a few bases (a model's q and k, a test's cases)
// would otherwise rebuild it on every call. Entries are replaced in turn; the
// reference returned stays valid until this thread's next call.
inline const ThetaTable& theta_table_cached(const rc_rope_args* a) {
  struct Entry {
    double base = 0;
    uint32_t rotary_dim = 0;
    ThetaTable table;
  };
  constexpr size_t kEntries = 64;
  thread_local Entry cached[kEntries];
  thread_local size_t next = 0;
  thread_local ThetaTable table;
  if (a->inv_freq || (a->abi_version >= 2 && a->freq_rule)) {
    table = make_theta_table(a);
    return table;
  }
  thread_local size_t last = 0;  // the entry found last: a model's calls, a test's, repeat one (base, rotary_dim)
  const auto hit = [a](const Entry& e) {
    return e.rotary_dim == a->rotary_dim && e.base == a->base && !e.table.th.empty();
  };
  if (hit(cached[last])) return cached[last].table;
  for (size_t k = 0; k < kEntries; ++k)
    if (hit(cached[k])) {
      last = k;
      return cached[k].table;
    }
  last = next;
  Entry& e = cached[next];
  next = (next + 1) % kEntries;
  e.table = make_theta_table(a);
  e.base = a->base;
  e.rotary_dim = a->rotary_dim;
  return e.table;
}

// One token's angle factor m = position * position_scale (long double), its
// double-double form and the Dekker split of its high part.
struct TokenAngle {
  long double m = 0;
  double hi = 0, lo = 0, hs = 0, ls = 0;
  bool fast = false;      // this row may take the double-double path (the table's too)
  bool simple = false;    // lo == 0 and ls == 0 (e.g. an integer position below 2^26, scale 1)
  bool identity = false;  // some pair's angle is exactly 0 (m == 0 or a zero theta)
};

// The position of `token` on `axis` (ABI v2: axis-major positions) times position_scale.
inline TokenAngle token_angle(const rc_rope_args* a, const ThetaTable& t, uint64_t token, uint32_t axis = 0) {
  TokenAngle m;
  m.m = (long double)a->positions[axis * a->n_tokens + token] * (long double)a->position_scale;
  m.hi = double(m.m);
  m.lo = double(m.m - (long double)m.hi);
  m.fast = t.fast && std::isfinite(m.hi) && trig_dd::in_range(m.hi);
  if (m.fast) trig_dd::split(m.hi, m.hs, m.ls);
  m.simple = m.lo == 0 && m.ls == 0;
  m.identity = m.m == 0 || t.any_zero;
  return m;
}

// Whether pair i's angle m * theta_i is exactly 0 (m or theta is 0: the long
// double product of two doubles' worth of range cannot underflow); such a
// pair's bits are copied.
inline bool angle_is_zero(const TokenAngle& m, const ThetaTable& t, size_t i) { return m.m * t.th[i] == 0; }

// cos/sin of pair i's angle times the attention factor af, rounded to f32 (the scalar form of the row).
inline void cos_sin_pair(const TokenAngle& m, const ThetaTable& t, size_t i, float& c, float& s, double af = 1.0) {
  using namespace trig_dd;
  const double p = m.hi * t.hi[i];
  if (!m.fast || !(std::fabs(p) < kFastLimit)) {
    accurate_cos_sin(m.m * t.th[i], c, s, af);
    return;
  }
  // The rounding error of p (exact: Dekker), then the cross terms. When m.lo
  // and m.ls are 0 their terms are dropped: they add zeros, which can change
  // only the sign of a zero alo, and r does not depend on that (below, alo is
  // added to p when k = 0 and p != 0, and to -k*P3 != 0 otherwise).
  double e, alo;
  if (m.simple) {
    e = (m.hs * t.hs[i] - p) + m.hs * t.ls[i];
    alo = e + m.hi * t.lo[i];
  } else {
    e = (((m.hs * t.hs[i] - p) + m.hs * t.ls[i]) + m.ls * t.hs[i]) + m.ls * t.ls[i];
    alo = e + (m.hi * t.lo[i] + m.lo * t.hi[i]);
  }
  const double shifted = p * kTwoOverPi + kShift;
  const double k = shifted - kShift;
  uint64_t kbits;
  std::memcpy(&kbits, &shifted, sizeof kbits);
  const double r0 = p - k * kP1;       // exact
  const double b = k * -kP2;           // exact
  const double r1 = r0 + b;            // two-sum: r0 + b = r1 + e1 exactly
  const double bb = r1 - r0;
  const double e1 = (r0 - (r1 - bb)) + (b - bb);
  const double r = r1 + (e1 + (alo - k * kP3));
  double sn, cs;
  trig_poly::sin_cos(r, sn, cs);
  trig_poly::by_quadrant(kbits, sn, cs, c, s, af);
}

// The whole row: c[i], s[i] for i < rotary_dim/2, times the attention factor af.
inline void cos_sin_row(const TokenAngle& m, const ThetaTable& t, size_t npairs, float* c, float* s,
                        double af = 1.0) {
  for (size_t i = 0; i < npairs; ++i) cos_sin_pair(m, t, i, c[i], s[i], af);
}

}  // namespace ropecheck
