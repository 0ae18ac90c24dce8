// cos and sin of a long double angle, rounded to f32, for the built-in
// kernels (`scalar` and every SIMD target call this one function, so their
// rows are bit-identical).
//
// Method (error in docs/error-model.md, "Bounds for kernels computing in f32"):
//  - |angle| < 2^30: Cody-Waite reduction in long double, r = angle - k*pi/2
//    with pi/2 split as P1 (32 bits, so k*P1 is exact for |k| < 2^32; the
//    subtraction is exact by Sterbenz) + P2 (the next 64 bits): the reduction
//    adds < 2^-62 absolute error; r is then rounded to double (2^-54) and sin,
//    cos of r in [-pi/4, pi/4] are Taylor polynomials to r^19 / r^18 in double
//    (truncation < 1e-19, rounding a few 2^-53): in all < 2^-50 absolute.
//  - larger angles: sincosl (glibc's long double sin/cos with full reduction).
// Every double operation is written out (the build disables FP contraction),
// so the result does not depend on the libm or the target.
#pragma once

#include <cmath>
#include <cstdint>

namespace ropecheck {

inline constexpr long double kCodyWaiteLimit = 0x1p30L;

inline void accurate_cos_sin(long double angle, float& c, float& s) {
  if (!(std::fabs(angle) < kCodyWaiteLimit)) {
    long double sl, cl;
    sincosl(angle, &sl, &cl);
    c = float(cl);
    s = float(sl);
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
  const double z = r * r;
  double sp = -8.22063524662433e-18;
  sp = sp * z + 2.8114572543455206e-15;
  sp = sp * z + -7.647163731819816e-13;
  sp = sp * z + 1.6059043836821613e-10;
  sp = sp * z + -2.505210838544172e-08;
  sp = sp * z + 2.7557319223985893e-06;
  sp = sp * z + -0.0001984126984126984;
  sp = sp * z + 0.008333333333333333;
  sp = sp * z + -0.16666666666666666;
  const double sn = r + r * z * sp;
  double cp = -1.5619206968586225e-16;
  cp = cp * z + 4.779477332387385e-14;
  cp = cp * z + -1.1470745597729725e-11;
  cp = cp * z + 2.08767569878681e-09;
  cp = cp * z + -2.755731922398589e-07;
  cp = cp * z + 2.48015873015873e-05;
  cp = cp * z + -0.001388888888888889;
  cp = cp * z + 0.041666666666666664;
  const double cs = 1.0 + z * (-0.5 + z * cp);
  switch (int64_t(k) & 3) {
    case 0: c = float(cs); s = float(sn); break;
    case 1: c = float(-sn); s = float(cs); break;
    case 2: c = float(-cs); s = float(-sn); break;
    default: c = float(sn); s = float(-cs); break;
  }
}

}  // namespace ropecheck
