// The error model: the per-pair error metric, and the bounds kernels are
// held to (derivations in docs/error-model.md).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/rope_case.hpp"

namespace ropecheck {

// What a kernel's bound is derived from. Kernels that compute the rotation in
// f32 arithmetic with f32 cos/sin, then store with round-to-nearest-even.
struct KernelErrorModel {
  // Relative error of the f32 cos and sin the kernel multiplies by, against
  // the exact cos/sin of its angle model's angle, in units of u32 = 2^-24
  // (1 = correctly rounded from an accurate value; 2 = a 1-ulp libm).
  double trig_rel_u32 = 1.0;
  // Relative error of the kernel's angle (e.g. 2^-64 * (3 + ln base) for
  // long double), 0 when it computes its angle model's angle exactly.
  // The absolute angle error is |angle| times this.
  double angle_rel = 0.0;
  // When true, angle_rel is multiplied by (3 + |ln base|): the error of
  // base^(-2i/d) evaluated in a format with angle_rel precision.
  bool angle_rel_scales_with_log_base = false;
  // Absolute error of cos/sin before their rounding to f32, from the method
  // (argument reduction, polynomial), in u32.
  double trig_abs_u32 = 0.0;

  static KernelErrorModel scalar_long_double();
  static KernelErrorModel conventional_fp32();
};

// The bound, in u of the case's storage type, on every pair's error e.
double error_bound(const KernelErrorModel& m, const RopeCase& c);

// The largest |m * scale * theta_i| of a case (double precision is enough).
double max_abs_angle(const RopeCase& c);

// u of a dtype (2^-24, 2^-11, 2^-8).
inline double unit_roundoff(Dtype d) { return format_of(d).unit_roundoff(); }

// Log2 position bucket: 0 for m = 0, b >= 1 for 2^(b-1) <= |m| < 2^b.
int position_bucket(int64_t m);
std::string bucket_label(int b);

// The error of one pair: e = ||y - yhat|| / (max(||x||, min_normal) * u), and
// its components along yhat (radial: > 0 means too long) and along i*yhat
// (tangential: > 0 means rotated too far), in the same units.
struct PairError {
  double e = 0, radial = 0, tangential = 0;
};
PairError pair_error(Dtype d, double x0, double x1, double y0, double y1, double ex0, double ex1);

// Summary of many pair errors.
struct ErrorStats {
  uint64_t count = 0;
  double max = 0;
  double sum = 0;
  double sum_radial = 0;
  double sum_tangential = 0;
  std::vector<float> values;  // every e, for percentiles

  void add(const PairError& p);
  void merge(const ErrorStats& o);
  double mean() const { return count ? sum / double(count) : 0.0; }
  double bias() const { return count ? sum_radial / double(count) : 0.0; }
  double tangential_bias() const { return count ? sum_tangential / double(count) : 0.0; }
  double percentile(double q) const;  // q in [0, 1]
};

}  // namespace ropecheck
