// The error model: the per-pair error metric, and the bounds kernels are
// held to (derivations in docs/error-model.md).
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "core/rope_case.hpp"

namespace ropecheck {

// hypot(a, b) for the judge's pair norms: where neither square can overflow or underflow to a loss of
// precision (the larger magnitude within [2^-500, 2^500], as every finite f32/f16/bf16 value and its product
// with an attention factor is) sqrt(a^2 + b^2) with one fused rounding, within ~1 ulp as std::hypot is (the
// judge's slack for hypot's roundings is 2^-48 of the norm); std::hypot elsewhere (0, Inf, NaN, huge or tiny).
// glibc's hypot took ~5 % of a default gate's CPU time.
inline double pair_hypot(double a, double b) {
  const double m = std::fmax(std::fabs(a), std::fabs(b));
  if (m <= 0x1p500 && m >= 0x1p-500) return std::sqrt(std::fma(a, a, b * b));
  return std::hypot(a, b);
}

// What a kernel's bound is derived from (docs/error-model.md): a kernel takes
// values c~, s~ for cos and sin of its angle, forms x0*c~ - x1*s~ and
// x0*s~ + x1*c~ with each product and the sum rounded in its arithmetic type,
// and stores the result rounded to nearest even in the storage type.
struct KernelErrorModel {
  // Relative error of the f32 cos and sin the kernel computes, against the
  // exact cos/sin of its angle, in units of u32 = 2^-24 (1 = correctly rounded
  // from an accurate value; 2 = a 1-ulp libm).
  double trig_rel_u32 = 1.0;
  // Relative error of the kernel's angle (e.g. 2^-64 * (3 + ln base) for
  // long double), 0 when it computes its angle model's angle exactly.
  // The absolute angle error is |angle| times this. Ignored when angle_f32.
  double angle_rel = 0.0;
  // When true, angle_rel is multiplied by (3 + |ln base|): the error of
  // base^(-2i/d) evaluated in a format with angle_rel precision.
  bool angle_rel_scales_with_log_base = false;
  // Absolute error of cos/sin before their rounding to f32, from the method
  // (argument reduction, polynomial), in u32.
  double trig_abs_u32 = 0.0;
  // angles=f32[:K]: the angle may be off by K ulps of f32 at |phi| (K <= 0:
  // the derived default of the f32 pipeline, per pair; see f32_angle_ulps).
  bool angle_f32 = false;
  double angle_f32_ulps = 0.0;
  Dtype cos_sin = Dtype::f32;   // cos/sin rounded to this type before use
  Dtype arith = Dtype::f32;     // products and sum rounded in this type
  bool flush_denormals = false; // subnormal inputs, intermediates and outputs may become zero
  bool truncating_stores = false; // stores=truncate: the output's conversion to its type rounds toward zero

  static KernelErrorModel scalar_long_double();
  static KernelErrorModel conventional_fp32();
  // A kernel whose only promise is its contract: cos/sin within 1 f32 ulp of
  // those of its angle, the angle from double arithmetic (angles=exact) or the
  // clause's f32 allowance, and the contract's cache, arithmetic and denormals.
  static KernelErrorModel for_contract(const struct Contract& c);
};

// The factor by which pair i of token t scales its input's norm: the attention factor, or, with a given
// cos/sin table (ABI v3), the norm of the (cos, sin) the table gives for the token's position.
inline double pair_gain(const RopeCase& c, size_t t, uint32_t pair) {
  if (!c.table || c.table->is_angle()) return c.attention_factor;
  const size_t row = size_t(c.pair_position(t, pair));
  const uint32_t np = c.rotary_dim / 2;
  return pair_hypot(c.table->cos_at(row, pair, np), c.table->sin_at(row, pair, np));
}

// The angle allowance of angles=f32 without K for pair i of a case, in ulps of
// f32 at |phi| (docs/error-model.md, "angles=f32"): (2i/d)|ln base| + 7 (+2
// when position_scale != 1); 3 (+2) with a table.
double f32_angle_ulps(const RopeCase& c, uint32_t pair);

// The absolute angle error a model allows for pair i at exact angle |phi|.
double angle_allowance(const KernelErrorModel& m, const RopeCase& c, uint32_t pair, double abs_phi);

// Table fidelity (ABI v3 draft; docs/error-model.md, "Table fidelity"): how far a caller-built table's entry
// (af cos, af sin) for pair i at exact angle |phi| may lie from af e^{j phi}, as a 2-vector norm, when the
// table was built by the pipeline the model describes (its angle clause, its libm, its cos-sin type, the
// attention factor applied in f32). `angles` holds the angle fields (no table).
double table_entry_allowance(const KernelErrorModel& m, const RopeCase& angles, uint32_t pair, double abs_phi);

// The allowance of one pair, in u of the storage type, separately for the
// component of y - yhat along yhat (radial) and across it (tangential).
struct PairAllowance {
  double radial = 0, tangential = 0;
  double total = 0;  // on e itself (the norm of y - yhat): <= hypot(radial, tangential)
  double radial_angle = 0;  // the angle clause's share of radial: second order, systematic (<= 0 side)
  double rounding = 0;      // everything but the angle (cos/sin, products, sum, store): the rounding noise
  // stores=truncate: how much its stores may shorten the pair on average (a systematic share of the radial
  // bias, like radial_angle's; 0 for stores that round to nearest). Within `rounding` for any one pair.
  double radial_store = 0;
};
// What the judge knows of one pair that tightens denormals=flush: the norm of its subnormal input elements
// (what flushing the input can remove) and the smallest |exact output| (no output can be flushed when it is
// far from the subnormal range). Unknown (< 0): the worst case.
struct PairHint {
  double flushed_input_norm = -1;
  double min_abs_output = -1;
};
// The hint of a pair of storage format f: input (x0, x1), exact output (e0, e1).
PairHint pair_hint(const Format& f, double x0, double x1, double e0, double e1);
// norm: ||x|| of the input pair; abs_phi: |exact angle|.
PairAllowance pair_allowance(const KernelErrorModel& m, const RopeCase& c, uint32_t pair, double norm,
                             double abs_phi, const PairHint& hint = {});

// The bound, in u of the storage type, on every pair's error e of a case: the
// largest total allowance over its pairs at their largest
// angle and the worst input norm (a flat bound, for callers without a per-pair view).
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
  // The kernel's angle error: the angle from yhat to y in radians (> 0: rotated
  // too far; it wraps at pi), NaN where the input is too close to the rounding
  // noise to tell (norm < 64 mn, or a zero output); |that| in ulps of f32 at
  // |phi|; and whether it is resolved: the output's rounding (noise_rad, what
  // the pair's allowance without the angle clause allows as an angle) can
  // explain at most kAngleResolution ulps of it. Elsewhere, at small |phi|,
  // the figure measures the rounding, not the angle (5e3 ulps for an accurate
  // f32 kernel at position 1, 1.6e7 in bf16).
  double angle = std::numeric_limits<double>::quiet_NaN();
  double angle_ulps = std::numeric_limits<double>::quiet_NaN();
  bool resolved = false;
  // The angle error no larger than what the output's rounding alone can turn a pair by (noise_rad): it may be
  // the rounding's, not the kernel's angle.
  bool within_noise = false;
};
inline constexpr double kAngleResolution = 1.0 / 8;  // the rounding's share, in f32 ulps of |phi|
// with_angle = false skips the angle error (its atan2), for callers that measure many candidates.
PairError pair_error(Dtype d, double x0, double x1, double y0, double y1, double ex0, double ex1,
                     double abs_phi = 0, double noise_rad = 0, bool with_angle = true);

// ulp of f32 at |x| (x > 0): 2^(floor(log2 x) - 23), at least 2^-149.
double ulp32(double x);

// Summary of many pair errors.
struct ErrorStats {
  uint64_t count = 0;
  double max = 0;
  double sum = 0;
  double sum_radial = 0;
  double sum_tangential = 0;
  double max_radial = 0, max_tangential = 0;  // largest |radial|, |tangential|
  uint64_t angle_count = 0;                   // pairs whose angle error was measured
  double max_angle = 0;                       // largest |angle error| (rad)
  double max_angle_ulps = 0;                  // largest |angle error| in f32 ulps of |phi|, resolved or not
  double sum_angle = 0;                       // signed sum of angle errors (rad)
  uint64_t resolved_angle_count = 0;          // pairs whose angle error is resolved (PairError::resolved)
  double max_resolved_angle_ulps = 0;         // the largest of those, in f32 ulps of |phi|
  double sum_sq = 0;           // sum of e^2: the rms, whether or not the values are kept
  std::vector<float> values;  // every e, for percentiles (when kept)

  void add(const PairError& p, bool keep_value = true);
  void add_components(const PairError& p);  // the max/angle fields only (add() calls it)
  void merge(const ErrorStats& o);
  double mean() const { return count ? sum / double(count) : 0.0; }
  double bias() const { return count ? sum_radial / double(count) : 0.0; }
  double tangential_bias() const { return count ? sum_tangential / double(count) : 0.0; }
  double mean_angle() const { return angle_count ? sum_angle / double(angle_count) : 0.0; }
  double rms() const { return count ? std::sqrt(sum_sq / double(count)) : 0.0; }
  double percentile(double q) const;  // q in [0, 1]
};

}  // namespace ropecheck
