#include "properties/error_model.hpp"

#include "properties/contract.hpp"
#include "reference/reference.hpp"

#include <algorithm>
#include <bit>
#include <limits>
#include <cmath>

namespace ropecheck {

KernelErrorModel KernelErrorModel::scalar_long_double() {
  // cos/sin of the angle (impls/trig_row.hpp: < 2^-50 absolute,
  // taken as 2^-44 = 2^-20 u32) rounded once to f32: relative 1 u32; the long
  // double theta and angle: 2^-63 * (3 + ln base) relative.
  KernelErrorModel m;
  m.trig_rel_u32 = 1.0;
  m.angle_rel = 0x1p-63;
  m.angle_rel_scales_with_log_base = true;
  m.trig_abs_u32 = 0x1p-20;
  return m;
}

KernelErrorModel KernelErrorModel::conventional_fp32() {
  // glibc cosf/sinf are within 1 ulp (2 u32) of the exact cos/sin of the f32
  // angle; the angle itself is the fp32 model's angle exactly.
  KernelErrorModel m;
  m.trig_rel_u32 = 2.0;
  return m;
}

KernelErrorModel KernelErrorModel::for_contract(const Contract& c) {
  KernelErrorModel m;
  m.trig_rel_u32 = 2.0;  // a 1-ulp libm
  m.angle_rel = 0x1p-52;  // angles=exact: theta and the angle in double
  m.angle_rel_scales_with_log_base = true;
  m.angle_f32 = c.angles == Contract::Angles::f32;
  m.angle_f32_ulps = c.angle_ulps;
  m.cos_sin = c.cos_sin;
  m.arith = c.arith;
  m.flush_denormals = c.flush_denormals;
  m.truncating_stores = c.truncating_stores;
  return m;
}

double max_abs_angle(const RopeCase& c) {
  double max_theta = 1.0;  // theta_0 = base^0 = 1
  if (c.freq_rule) {
    max_theta = 0;
    for (uint32_t i = 0; i < c.rotary_dim / 2; ++i) max_theta = std::max(max_theta, theta_value(c, i));
  } else if (!c.inv_freq.empty()) {
    max_theta = 0;
    for (double f : c.inv_freq) max_theta = std::max(max_theta, std::fabs(f));
  } else if (c.base < 1.0) {
    max_theta = std::pow(c.base, -double(c.rotary_dim - 2) / double(c.rotary_dim));
  }
  double max_m = 0;
  for (int64_t m : c.positions) max_m = std::max(max_m, std::fabs(double(m)));
  return max_m * std::fabs(c.position_scale) * max_theta;
}

double ulp32(double x) {
  if (!(x >= 0x1p-126)) return 0x1p-149;
  if (!(x <= std::numeric_limits<double>::max())) return std::ldexp(1.0, std::ilogb(x) - 23);  // +Inf (NaN: above)
  // 2^(ilogb(x) - 23) from x's exponent bits (x is a normal double here): the judge asks per pair.
  return Format::pow2(int((std::bit_cast<uint64_t>(x) >> 52) & 0x7ff) - 1023 - 23);
}

namespace {

constexpr double kU32 = 0x1p-24, kMn32 = 0x1p-126;

// Bound on ||fl(v) - v|| for a pair v with ||v|| <= norm, each component
// rounded to nearest in a format (u, mn): |err_k| <= max(u|v_k|, u*mn), or
// max(u|v_k|, mn) when results below mn may be flushed to zero.
double round_pair(double u, double mn, double norm, bool flush) {
  if (flush) return std::sqrt(u * u * norm * norm + 2 * mn * mn);
  return u * std::min(std::sqrt(norm * norm + 2 * mn * mn), std::sqrt(2.0) * std::max(norm, mn));
}

// ln of the base whose powers the table is built from: base, or for dynamic and ntk rules the scaled
// base' (theta_1 = base'^(-2/R)).
double log_base_of(const RopeCase& c) {
  if (c.freq_rule && c.rotary_dim > 2 &&
      (c.freq_rule->type == FrequencyRuleType::dynamic || c.freq_rule->type == FrequencyRuleType::ntk))
    return -double(c.rotary_dim) / 2 * std::log(theta_value(c, 1));
  // The last base's log, kept (asked for every pair the judge allows for).
  thread_local double base = 1.0, log_base = 0.0;
  if (!(std::bit_cast<uint64_t>(c.base) == std::bit_cast<uint64_t>(base))) {
    base = c.base;
    log_base = std::log(c.base);
  }
  return log_base;
}

double theta_of(const RopeCase& c, uint32_t i) {
  if (!c.inv_freq.empty()) return std::fabs(c.inv_freq[i]);
  if (c.freq_rule) return theta_value(c, i);
  return std::pow(c.base, -2.0 * double(i) / double(c.rotary_dim));
}

}  // namespace

double f32_angle_ulps(const RopeCase& c, uint32_t pair) {
  // Relative errors in u32 (docs/error-model.md, "angles=f32"): a table entry
  // rounded to f32 (1); or the exponent 2i/d rounded (amplified by
  // (2i/d)|ln base|), pow within 2 ulps (4) and the division 1/p (1); then
  // the position rounded to f32 (1) and the product (1); a scale rounded to
  // f32 and multiplied (2). A relative error rho*|phi| is below
  // (rho/u32) ulps of f32 at |phi|.
  //
  // A frequency rule (ABI v2) in f32: its pow is that of its base (dynamic and
  // ntk: the scaled base', whose own f32 rounding adds 1), then the rule's f32
  // steps after pow -- a division by the factor or by lambda_i (1), the
  // YaRN/llama3 blend of two positive terms (two products, one sum, and the
  // weight's own rounding: 4) -- docs/error-model.md, "Frequency rules".
  const double scale_terms = c.position_scale != 1.0 ? 2.0 : 0.0;
  double k;
  if (c.freq_rule) {
    const FrequencyRuleType t = c.freq_rule->type;
    const bool scaled_base = t == FrequencyRuleType::dynamic || t == FrequencyRuleType::ntk;
    const double ln_b = log_base_of(c);
    const double k_pow = 2.0 * double(pair) / double(c.rotary_dim) * std::fabs(ln_b) + 4.0 + 1.0;
    k = k_pow;
    if (scaled_base) k += 2.0 * double(pair) / double(c.rotary_dim);
    if (t == FrequencyRuleType::linear || t == FrequencyRuleType::longrope) k += 1.0;
    if (t == FrequencyRuleType::yarn || t == FrequencyRuleType::llama3) {
      // Unchanged pairs (theta = theta0) add nothing, divided ones (theta0/f) one division; a pair in the
      // blend band adds the blend's roundings (4) and its weight's absolute error e_w amplified by up to f
      // (theta moves by theta0*(1 - 1/f)*e_w, theta >= theta0/f): yarn's ramp (i - low)/(high - low) and
      // 1 - w, e_w <= 2 u32; llama3's smooth = (L/wavelen - low)/(high - low), wavelen = 2 pi/theta0 carrying
      // theta0's error (k_pow) and its own roundings, e_w <= high/(high - low)*(k_pow + 3) + 3 u32.
      const double f = c.freq_rule->factor.value_or(1.0);
      const double th = theta_value(c, pair), th0 = std::pow(c.base, -2.0 * double(pair) / double(c.rotary_dim));
      const double ratio = th / th0;
      if (std::fabs(ratio - 1.0) < 1e-9) {
      } else if (std::fabs(ratio * f - 1.0) < 1e-9) {
        k += 1.0;
      } else if (t == FrequencyRuleType::yarn) {
        k += 4.0 + 2.0 * f;
      } else {
        const double hi = c.freq_rule->high_freq_factor, lo = c.freq_rule->low_freq_factor;
        k += 4.0 + f * (hi / (hi - lo) * (k_pow + 3.0) + 3.0);
      }
    }
  } else {
    k = c.inv_freq.empty() ? 2.0 * double(pair) / double(c.rotary_dim) * std::fabs(std::log(c.base)) + 4.0 + 1.0
                           : 1.0;
  }
  k += 1.0 + 1.0 + scale_terms;
  return k * (1.0 + 0x1p-20);  // second-order terms
}

double angle_allowance(const KernelErrorModel& m, const RopeCase& c, uint32_t pair, double abs_phi) {
  if (!(abs_phi > 0)) return 0.0;  // an exact angle of 0 is 0 in every pipeline
  if (c.table) return 0.0;         // a given table: the angle (or cos and sin) as given, exactly
  if (m.angle_f32) {
    const double k = m.angle_f32_ulps > 0 ? m.angle_f32_ulps : f32_angle_ulps(c, pair);
    return k * ulp32(abs_phi);
  }
  double rel = m.angle_rel;
  // A rule's table adds its long double steps after powl (division, blend: docs/error-model.md,
  // "Frequency rules"), a few ulps of long double each: 4 more units.
  if (m.angle_rel_scales_with_log_base && c.inv_freq.empty())
    rel *= 3.0 + std::fabs(log_base_of(c)) + (c.freq_rule ? 4.0 : 0.0);
  return abs_phi * rel;
}

double table_entry_allowance(const KernelErrorModel& m, const RopeCase& angles, uint32_t pair, double abs_phi) {
  // Steps 1 and 2 of the per-pair allowance on the unit vector e^{j phi}, times af: the angle turns it by
  // 2 sin(d/2); cos and sin within rho|.| + alpha each (the libm); the attention factor's f32 product; the
  // rounding to the cos-sin type C when it is narrower than f32 (through f32: u_C + u32 (1 + u_C)).
  const double af = angles.attention_factor;
  const double delta = std::min(angle_allowance(m, angles, pair, abs_phi), M_PI);
  const double rho = m.trig_rel_u32 * kU32;
  const double alpha = m.trig_abs_u32 * kU32 + (m.flush_denormals ? kMn32 : kU32 * kMn32);
  double e = af * 2.0 * std::sin(delta / 2) + af * (rho + std::sqrt(2.0) * alpha);
  const double g = af * (1 + rho) + std::sqrt(2.0) * alpha * af;  // |(c~, s~)| before the last roundings
  if (af != 1.0) e += round_pair(kU32, kMn32, g, m.flush_denormals);
  const Format fc = format_of(m.cos_sin);
  if (m.cos_sin != Dtype::f32)
    e += round_pair(fc.unit_roundoff() + kU32 * (1 + fc.unit_roundoff()), fc.min_normal(), g * (1 + 2 * kU32),
                    m.flush_denormals);
  return e * (1.0 + 0x1p-30);
}

PairHint pair_hint(const Format& f, double x0, double x1, double e0, double e1) {
  auto sub = [&](double v) { return v != 0 && std::fabs(v) < f.min_normal() ? v : 0.0; };
  PairHint h;
  h.flushed_input_norm = pair_hypot(sub(x0), sub(x1));
  if (std::isfinite(e0) && std::isfinite(e1)) h.min_abs_output = std::min(std::fabs(e0), std::fabs(e1));
  return h;
}

PairAllowance pair_allowance(const KernelErrorModel& m, const RopeCase& c, uint32_t pair, double norm,
                             double abs_phi, const PairHint& hint) {
  // docs/error-model.md, "The per-pair allowance". Absolute error norms of the
  // pair first, then in u of the storage type relative to max(norm, mn).
  const Format fo = format_of(c.dtype), fa = format_of(m.arith), fc = format_of(m.cos_sin);
  // An f16/bf16 operation is an f32 operation rounded to the narrow type (CPU libraries, PyTorch): the
  // double rounding adds the f32 rounding, ua + u32 (1 + ua). Likewise a narrow cache of f32 cos/sin.
  const double uo = fo.unit_roundoff();
  const double ua = m.arith == Dtype::f32 ? kU32 : fa.unit_roundoff() + kU32 * (1 + fa.unit_roundoff());
  const double uc = fc.unit_roundoff();
  const double mno = fo.min_normal(), mna = fa.min_normal(), mnc = fc.min_normal();
  const bool flush = m.flush_denormals;
  const double r2 = std::sqrt(2.0);
  // Inputs: rounded to the arithmetic type when it is narrower; subnormal inputs flushed.
  double e_in = 0;
  if (ua > uo) e_in += round_pair(ua, mna, norm, flush);
  if (flush) e_in += hint.flushed_input_norm >= 0 ? hint.flushed_input_norm : r2 * mno;
  const double n1 = norm + e_in;
  // cos, sin against those of the kernel's angle: relative rho, absolute alpha. A given cos/sin table's values
  // are the kernel's cos and sin exactly (docs/error-model.md, "ABI v3"), unless it rounds them to a cos-sin
  // type narrower than the table's own.
  const bool cs_table = c.table && !c.table->is_angle();
  double rho = cs_table ? 0.0 : m.trig_rel_u32 * kU32;
  double alpha = cs_table ? 0.0 : m.trig_abs_u32 * kU32 + (flush ? kMn32 : kU32 * kMn32);
  if (cs_table ? uc > format_of(c.table->dtype).unit_roundoff() : uc > kU32) {
    alpha += flush ? mnc : uc * mnc;
    rho += uc * (1.0 + rho);
  }
  const double e_cs = r2 * rho * n1 + 2.0 * alpha * n1;
  // Two products per component, each within ua|p| + eta.
  const double eta_a = flush ? mna : ua * mna;
  const double prods = r2 * (1.0 + rho) * n1 + 2.0 * alpha * n1;
  const double e_prod = ua * prods + 2.0 * r2 * eta_a;
  // The sum, rounded in the arithmetic type.
  const double s = n1 + e_cs + e_prod;
  // An output can be flushed only if some component can come within reach of the subnormal range: not when
  // every exact output component exceeds the smallest normal by more than the whole non-flush error.
  const double delta = angle_allowance(m, c, pair, abs_phi) * (1.0 + 0x1p-30);
  const double reach = e_in + (s - n1) + (n1 + s) * (ua + uo) * 2 + n1 * std::min(delta, 2.0);
  const bool out_flush = flush && !(hint.min_abs_output >= 0 && hint.min_abs_output > reach + 2 * std::max(mno, mna));
  // stores=truncate (docs/error-model.md, "stores=truncate"): the conversion to the storage type rounds toward
  // zero, within one ulp (2 uo) where rounding to nearest is within half of one (uo). With arithmetic in the
  // storage type that conversion is the sum's last rounding (an f32 sum truncated to the narrow type).
  const bool trunc = m.truncating_stores;
  const double ua_sum = trunc && m.arith == c.dtype && m.arith != Dtype::f32
                            ? 2 * fa.unit_roundoff() + kU32 * (1 + 2 * fa.unit_roundoff())
                            : trunc && m.arith == c.dtype ? 2 * kU32
                                                          : ua;
  const double e_sum = round_pair(ua_sum, mna, s, m.arith == c.dtype ? out_flush : flush);
  // The store: a rounding unless every value of the arithmetic type is one of the storage type (same type,
  // or f16/bf16 arithmetic stored as f32); bf16 arithmetic stored as f16 rounds in f16's subnormal range.
  const bool representable = m.arith == c.dtype || (fa.precision <= fo.precision && fa.emin >= fo.emin);
  const double e_store = representable ? 0.0 : round_pair(trunc ? 2 * uo : uo, mno, s + e_sum, out_flush);
  const double e = (e_in + e_cs + e_prod + e_sum + e_store) * (1.0 + 0x1p-30);
  // Truncation shortens each element by a fraction of its ulp, half of one on average over the fractions: the
  // pair by at most uo |y| (+ the subnormal floor) on average, its conversion's unit of the storage type.
  const double u_conv = m.arith == c.dtype && m.arith != Dtype::f32 ? fa.unit_roundoff() : uo;
  const double radial_store_abs =
      trunc && (!representable || m.arith == c.dtype) ? u_conv * (s + e_sum + std::sqrt(2.0) * mno) : 0.0;
  // The angle: R(phi~)x - R(phi)x has radial part -2 n1 sin^2(d/2), tangential n1 sin d.
  const double dd = std::min(delta, M_PI);
  const double sh = std::sin(dd / 2);
  const double radial_angle = 2.0 * n1 * sh * sh + std::min(delta, 2.0) * e_in;
  const double radial = e + radial_angle;
  const double tangential = e + n1 * std::min(delta, 2.0);
  const double total = e + 2.0 * n1 * sh + std::min(delta, 2.0) * e_in;  // ||y - yhat|| itself
  const double unit = std::max(norm, mno) * uo;
  return {radial / unit, tangential / unit, total / unit, radial_angle / unit, e / unit, radial_store_abs / unit};
}

double error_bound(const KernelErrorModel& m, const RopeCase& c) {
  // The worst norm is the smallest normal (subnormal terms weigh most there;
  // below it the unit stops shrinking); each pair at its largest angle.
  double max_m = 0;
  for (int64_t p : c.positions) max_m = std::max(max_m, std::fabs(double(p)));
  const double mno = format_of(c.dtype).min_normal();
  double b = 0;
  for (uint32_t i = 0; i < c.rotary_dim / 2; ++i) {
    const double phi = max_m * std::fabs(c.position_scale) * theta_of(c, i);
    for (double n : {mno, 1.0}) {
      const PairAllowance a = pair_allowance(m, c, i, n, phi);
      b = std::max(b, a.total);
    }
  }
  return b;
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

PairError pair_error(Dtype d, double x0, double x1, double y0, double y1, double ex0, double ex1, double abs_phi,
                     double noise_rad, bool with_angle) {
  const Format f = format_of(d);
  const double norm = std::max(pair_hypot(x0, x1), f.min_normal());
  const double scale = 1.0 / (norm * f.unit_roundoff());
  const double d0 = y0 - ex0, d1 = y1 - ex1;
  PairError p;
  p.e = pair_hypot(d0, d1) * scale;
  const double en = pair_hypot(ex0, ex1);
  if (en > 0) {
    p.radial = (d0 * ex0 + d1 * ex1) / en * scale;
    p.tangential = (-d0 * ex1 + d1 * ex0) / en * scale;
    if (with_angle && norm >= 64 * f.min_normal() && (y0 != 0 || y1 != 0)) {
      p.angle = std::atan2(ex0 * y1 - ex1 * y0, ex0 * y0 + ex1 * y1);
      if (abs_phi > 0) {
        p.angle_ulps = std::fabs(p.angle) / ulp32(abs_phi);
        p.resolved = noise_rad <= kAngleResolution * ulp32(abs_phi);
        p.within_noise = std::fabs(p.angle) <= noise_rad;
      }
    }
  }
  return p;
}

void ErrorStats::add(const PairError& p, bool keep_value) {
  ++count;
  max = std::max(max, p.e);
  sum += p.e;
  sum_sq += p.e * p.e;
  sum_radial += p.radial;
  sum_tangential += p.tangential;
  add_components(p);
  if (keep_value) values.push_back(float(p.e));
}

void ErrorStats::add_components(const PairError& p) {
  max_radial = std::max(max_radial, std::fabs(p.radial));
  max_tangential = std::max(max_tangential, std::fabs(p.tangential));
  if (!std::isnan(p.angle)) {
    ++angle_count;
    max_angle = std::max(max_angle, std::fabs(p.angle));
    if (!std::isnan(p.angle_ulps)) max_angle_ulps = std::max(max_angle_ulps, p.angle_ulps);
    if (p.resolved) {
      ++resolved_angle_count;
      max_resolved_angle_ulps = std::max(max_resolved_angle_ulps, p.angle_ulps);
    }
    sum_angle += p.angle;
  }
}

void ErrorStats::merge(const ErrorStats& o) {
  count += o.count;
  max = std::max(max, o.max);
  sum += o.sum;
  sum_sq += o.sum_sq;
  sum_radial += o.sum_radial;
  sum_tangential += o.sum_tangential;
  max_radial = std::max(max_radial, o.max_radial);
  max_tangential = std::max(max_tangential, o.max_tangential);
  angle_count += o.angle_count;
  max_angle = std::max(max_angle, o.max_angle);
  max_angle_ulps = std::max(max_angle_ulps, o.max_angle_ulps);
  sum_angle += o.sum_angle;
  resolved_angle_count += o.resolved_angle_count;
  max_resolved_angle_ulps = std::max(max_resolved_angle_ulps, o.max_resolved_angle_ulps);
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
