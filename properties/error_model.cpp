#include "properties/error_model.hpp"

#include <algorithm>
#include <cmath>

namespace ropecheck {

KernelErrorModel KernelErrorModel::scalar_long_double() {
  // cos/sin of the angle (impls/trig_row.hpp: < 2^-50 absolute,
  // taken as 2^-44 = 2^-20 u32) rounded once to f32: relative 1 u32; the long
  // double theta and angle: 2^-63 * (3 + ln base) relative.
  return {1.0, 0x1p-63, true, 0x1p-20};
}

KernelErrorModel KernelErrorModel::conventional_fp32() {
  // glibc cosf/sinf are within 1 ulp (2 u32) of the exact cos/sin of the f32
  // angle; the angle itself is the fp32 model's angle exactly.
  return {2.0, 0.0, false, 0.0};
}

double max_abs_angle(const RopeCase& c) {
  double max_theta = 1.0;  // theta_0 = base^0 = 1
  if (!c.inv_freq.empty()) {
    max_theta = 0;
    for (double f : c.inv_freq) max_theta = std::max(max_theta, std::fabs(f));
  } else if (c.base < 1.0) {
    max_theta = std::pow(c.base, -double(c.rotary_dim - 2) / double(c.rotary_dim));
  }
  double max_m = 0;
  for (int64_t m : c.positions) max_m = std::max(max_m, std::fabs(double(m)));
  return max_m * std::fabs(c.position_scale) * max_theta;
}

double error_bound(const KernelErrorModel& m, const RopeCase& c) {
  const double u32 = 0x1p-24;
  // Absolute error of cos and sin from the angle, in u32.
  double angle_rel = m.angle_rel;
  if (m.angle_rel_scales_with_log_base && c.inv_freq.empty()) angle_rel *= 3.0 + std::fabs(std::log(c.base));
  const double a = max_abs_angle(c) * angle_rel / u32 + m.trig_abs_u32;
  // f32 result: sqrt2*(r+1) [cos/sin and product roundings]
  //           + sqrt2 [rounding of the sum, incl. subnormal results]
  //           + sqrt2 [underflow of the two products]
  //           + 2a [absolute cos/sin error from the angle]
  const double b32 = std::sqrt(2.0) * (m.trig_rel_u32 + 3.0) + 2.0 * a;
  if (c.dtype == Dtype::f32) return b32;
  // f16/bf16: the f32 result within b32*u32, then one RNE store.
  const double ut = unit_roundoff(c.dtype);
  return std::sqrt(2.0) * (1.0 + b32 * u32) + b32 * u32 / ut;
}

int position_bucket(int64_t m) {
  if (m == 0) return 0;
  const uint64_t a = m < 0 ? uint64_t(-(m + 1)) + 1 : uint64_t(m);
  return 64 - __builtin_clzll(a);
}

std::string bucket_label(int b) {
  if (b == 0) return "0";
  if (b == 1) return "1";
  return "2^" + std::to_string(b - 1) + "..";
}

PairError pair_error(Dtype d, double x0, double x1, double y0, double y1, double ex0, double ex1) {
  const Format f = format_of(d);
  const double norm = std::max(std::hypot(x0, x1), f.min_normal());
  const double scale = 1.0 / (norm * f.unit_roundoff());
  const double d0 = y0 - ex0, d1 = y1 - ex1;
  PairError p;
  p.e = std::hypot(d0, d1) * scale;
  const double en = std::hypot(ex0, ex1);
  if (en > 0) {
    p.radial = (d0 * ex0 + d1 * ex1) / en * scale;
    p.tangential = (-d0 * ex1 + d1 * ex0) / en * scale;
  }
  return p;
}

void ErrorStats::add(const PairError& p) {
  ++count;
  max = std::max(max, p.e);
  sum += p.e;
  sum_radial += p.radial;
  sum_tangential += p.tangential;
  values.push_back(float(p.e));
}

void ErrorStats::merge(const ErrorStats& o) {
  count += o.count;
  max = std::max(max, o.max);
  sum += o.sum;
  sum_radial += o.sum_radial;
  sum_tangential += o.sum_tangential;
  values.insert(values.end(), o.values.begin(), o.values.end());
}

double ErrorStats::percentile(double q) const {
  if (values.empty()) return 0.0;
  std::vector<float> v = values;
  const size_t k = std::min(v.size() - 1, size_t(std::ceil(q * double(v.size()))) - (q > 0 ? 1 : 0));
  std::nth_element(v.begin(), v.begin() + long(k), v.end());
  return v[k];
}

}  // namespace ropecheck
