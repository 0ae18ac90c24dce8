#include "reference/reference.hpp"

#include <mpfr.h>

#include <boost/multiprecision/mpfr.hpp>
#include <cmath>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <unordered_map>

namespace ropecheck {
namespace {

namespace mp = boost::multiprecision;

// Working precisions, in decimal digits: 40 digits is 134 bits, and each
// Ziv retry doubles it (267, 533, 1064 bits).
template <unsigned Digits>
using Big = mp::number<mp::mpfr_float_backend<Digits, mp::allocate_stack>, mp::et_off>;

template <unsigned Digits>
mpfr_prec_t bits_of() {
  Big<Digits> x;
  return mpfr_get_prec(x.backend().data());
}

// cos, sin of one (position, pair) angle and a bound on their absolute error.
template <unsigned Digits>
struct Trig {
  Big<Digits> c, s;
  double err = 0;   // |cos - c| and |sin - s| are at most this
  bool zero_angle = false;
};

float f32_of_big(const mpfr_t v) { return mpfr_get_flt(v, MPFR_RNDN); }

// The fp32 model's angle (see AngleModel::fp32). Every step is an f32
// operation rounded to nearest; pow is correctly rounded through MPFR.
float fp32_angle(const RopeCase& c, uint32_t i, int64_t m) {
  float inv;
  if (!c.inv_freq.empty()) {
    inv = float(c.inv_freq[i]);
  } else {
    volatile float e = float(2 * i) / float(c.rotary_dim);
    Big<40> b = float(c.base), ex = float(e), p;
    mpfr_pow(p.backend().data(), b.backend().data(), ex.backend().data(), MPFR_RNDN);
    const float pf = f32_of_big(p.backend().data());
    volatile float one = 1.0f;
    inv = one / pf;
  }
  volatile float mf = float(m);
  if (c.position_scale != 1.0) mf = mf * float(c.position_scale);
  volatile float angle = mf * inv;
  return angle;
}

// theta_i at a precision, with its relative error bound in units of 2^-P.
template <unsigned Digits>
Big<Digits> theta(const RopeCase& c, uint32_t i, double& rel_err_units) {
  if (!c.inv_freq.empty()) {
    rel_err_units = 0;
    return Big<Digits>(c.inv_freq[i]);
  }
  // exponent -2i/d rounds once (1 unit); pow rounds once (1 unit) and turns the
  // exponent's error into ln(base) units.
  Big<Digits> e = Big<Digits>(-2.0 * double(i)) / Big<Digits>(double(c.rotary_dim));
  Big<Digits> t = pow(Big<Digits>(c.base), e);
  rel_err_units = 1.0 + std::fabs(std::log(c.base)) + 1.0;
  if (i == 0) rel_err_units = 0;  // base^0 = 1 exactly
  return t;
}

template <unsigned Digits>
Trig<Digits> trig(const RopeCase& c, const ReferenceOptions& opt, uint32_t i, int64_t m,
                  const Big<Digits>* theta_cached, double theta_err_units) {
  Trig<Digits> r;
  const double ulp = std::ldexp(1.0, -int(bits_of<Digits>()));
  Big<Digits> angle;
  double angle_err = 0;
  if (opt.angle_model == AngleModel::fp32) {
    angle = Big<Digits>(fp32_angle(c, i, m));  // exact f32 value, no error
  } else {
    double units = theta_err_units;
    Big<Digits> th = theta_cached ? *theta_cached : theta<Digits>(c, i, units);
    // m (int64) and m*scale (64+53 bits) are exact at >= 134 bits.
    angle = Big<Digits>(m);
    if (c.position_scale != 1.0) angle *= Big<Digits>(c.position_scale);
    angle *= th;
    units += 1.0;
    angle_err = std::fabs(double(angle)) * units * ulp;
  }
  r.zero_angle = (angle == 0);
  if (r.zero_angle) {
    r.c = 1;
    r.s = 0;
    r.err = 0;
    return r;
  }
  mpfr_sin_cos(r.s.backend().data(), r.c.backend().data(), angle.backend().data(), MPFR_RNDN);
  r.err = 2.0 * (angle_err + ulp);  // factor 2: slack for the double arithmetic of the bound
  return r;
}

// Round y to the format of d, to nearest even, with IEEE subnormals and
// overflow. `err` bounds |y - exact|. Returns false when the interval
// [y-err, y+err] holds a rounding boundary, so the result is undecided.
template <unsigned Digits>
bool round_to(Dtype d, const Big<Digits>& y, double err, double& out) {
  const Format f = format_of(d);
  mpfr_srcptr yp = y.backend().data();
  if (mpfr_zero_p(yp)) {
    out = mpfr_signbit(yp) ? -0.0 : 0.0;
    return err == 0 || err < std::ldexp(0.5, f.emin - (f.precision - 1));
  }
  const long E = long(mpfr_get_exp(yp)) - 1;  // y = 1.f * 2^E
  const long q = std::max<long>(E, f.emin) - (f.precision - 1);  // quantum exponent
  Big<Digits> t, r, dlt;
  mpfr_mul_2si(t.backend().data(), yp, -q, MPFR_RNDN);  // exact
  mpfr_rint(r.backend().data(), t.backend().data(), MPFR_RNDN);  // ties to even
  if (err > 0) {
    mpfr_sub(dlt.backend().data(), t.backend().data(), r.backend().data(), MPFR_RNDN);  // exact
    const double dist_to_boundary = 0.5 - std::fabs(mpfr_get_d(dlt.backend().data(), MPFR_RNDN));
    const double err_q = std::ldexp(err, int(-q));
    if (!(dist_to_boundary > err_q * 1.000001 + 0x1p-70)) return false;
  }
  const double k = mpfr_get_d(r.backend().data(), MPFR_RNDN);  // |k| <= 2^p, exact
  double v = std::ldexp(k, int(q));
  if (std::fabs(v) > f.max_finite()) v = std::copysign(std::numeric_limits<double>::infinity(), v);
  if (v == 0) v = mpfr_signbit(yp) ? -0.0 : 0.0;
  out = v;
  return true;
}

uint32_t quiet_nan_bits(Dtype d) {
  switch (d) {
    case Dtype::f32: return 0x7fc00000u;
    case Dtype::f16: return 0x7e00u;
    case Dtype::bf16: return 0x7fc0u;
  }
  return 0;
}

struct PairOut {
  double y0, y1;          // rounded, as doubles (exactly representable in d)
  double e0, e1;          // exact, to double
};

// One pair rotated at precision Digits. Returns false if undecided.
template <unsigned Digits>
bool rotate_pair(Dtype d, double x0, double x1, const Trig<Digits>& tr, PairOut& o) {
  Big<Digits> X0(x0), X1(x1), y0, y1;
  // y0 = x0 c - x1 s, y1 = x0 s + x1 c, each with a single rounding.
  mpfr_fmms(y0.backend().data(), X0.backend().data(), tr.c.backend().data(), X1.backend().data(),
            tr.s.backend().data(), MPFR_RNDN);
  mpfr_fmma(y1.backend().data(), X0.backend().data(), tr.s.backend().data(), X1.backend().data(),
            tr.c.backend().data(), MPFR_RNDN);
  const double ulp = std::ldexp(1.0, -int(bits_of<Digits>()));
  const double ax = std::fabs(x0) + std::fabs(x1);
  o.e0 = mpfr_get_d(y0.backend().data(), MPFR_RNDN);
  o.e1 = mpfr_get_d(y1.backend().data(), MPFR_RNDN);
  const double err0 = tr.err == 0 ? 0 : 2.0 * (ax * tr.err + std::fabs(o.e0) * ulp);
  const double err1 = tr.err == 0 ? 0 : 2.0 * (ax * tr.err + std::fabs(o.e1) * ulp);
  if (!round_to(d, y0, err0, o.y0) || !round_to(d, y1, err1, o.y1)) return false;
  // Exact zeros take the IEEE sign of the formula evaluated on the signs.
  if (mpfr_zero_p(y0.backend().data())) {
    const double cd = double(tr.c), sd = double(tr.s);
    o.y0 = o.e0 = x0 * cd - x1 * sd;
  }
  if (mpfr_zero_p(y1.backend().data())) {
    const double cd = double(tr.c), sd = double(tr.s);
    o.y1 = o.e1 = x0 * sd + x1 * cd;
  }
  return true;
}

// Non-finite inputs: IEEE arithmetic on the exact cos and sin (as doubles,
// whose signs and zeros are those of the exact values).
template <unsigned Digits>
void rotate_nonfinite(double x0, double x1, const Trig<Digits>& tr, PairOut& o) {
  const double cd = double(tr.c), sd = double(tr.s);
  o.y0 = o.e0 = x0 * cd - x1 * sd;
  o.y1 = o.e1 = x0 * sd + x1 * cd;
}

// Recompute one pair at more precision until it rounds.
template <unsigned Digits>
void rotate_pair_retry(const RopeCase& c, const ReferenceOptions& opt, uint32_t i, int64_t m, double x0,
                       double x1, PairOut& o) {
  Trig<Digits> tr = trig<Digits>(c, opt, i, m, nullptr, 0);
  if (rotate_pair<Digits>(c.dtype, x0, x1, tr, o)) return;
  if constexpr (Digits < 320) {
    rotate_pair_retry<Digits * 2>(c, opt, i, m, x0, x1, o);
  } else {
    std::ostringstream s;
    s << "reference: rounding undecided at " << bits_of<Digits>() << " bits for pair " << i << " position " << m
      << " x = (" << hexfloat(x0) << ", " << hexfloat(x1) << ") in " << c.summary();
    throw std::runtime_error(s.str());
  }
}

}  // namespace

std::string_view to_string(AngleModel m) { return m == AngleModel::exact ? "exact" : "fp32"; }

std::optional<AngleModel> parse_angle_model(std::string_view s) {
  if (s == "exact") return AngleModel::exact;
  if (s == "fp32") return AngleModel::fp32;
  return std::nullopt;
}

float fp32_model_angle(const RopeCase& c, uint32_t pair, int64_t position) { return fp32_angle(c, pair, position); }

double exact_angle(const RopeCase& c, uint32_t pair, int64_t position) {
  double units = 0;
  Big<40> th = theta<40>(c, pair, units);
  Big<40> a(position);
  a *= Big<40>(c.position_scale);
  a *= th;
  return double(a);
}

ReferenceOutput reference_rope(const RopeCase& c, const ReferenceOptions& opt) {
  if (std::string why = c.validate(); !why.empty()) throw std::invalid_argument("reference: " + why);
  const Dtype d = c.dtype;
  const uint32_t npairs = c.rotary_dim / 2;
  ReferenceOutput out;
  out.rounded = c.input;  // pass-through dims keep their bits
  out.exact.resize(c.n_elements());
  for (size_t k = 0; k < c.n_elements(); ++k) out.exact[k] = load_f32(d, c.input.data(), k);

  // theta_i once per call.
  std::vector<Big<40>> thetas(npairs);
  std::vector<double> theta_units(npairs, 0);
  if (opt.angle_model == AngleModel::exact)
    for (uint32_t i = 0; i < npairs; ++i) thetas[i] = theta<40>(c, i, theta_units[i]);

  // cos/sin once per (distinct position, pair), shared by all heads.
  std::vector<Trig<40>> trig_row(npairs);
  std::unordered_map<int64_t, size_t> seen;  // position -> first token
  std::vector<Trig<40>> trig_cache;           // rows of npairs, by first token order
  for (size_t t = 0; t < c.n_tokens(); ++t) {
    const int64_t m = c.positions[t];
    auto [it, fresh] = seen.emplace(m, trig_cache.size() / npairs);
    if (fresh)
      for (uint32_t i = 0; i < npairs; ++i)
        trig_cache.push_back(trig<40>(c, opt, i, m, opt.angle_model == AngleModel::exact ? &thetas[i] : nullptr,
                                      theta_units[i]));
    const Trig<40>* row = &trig_cache[it->second * npairs];
    for (size_t h = 0; h < c.n_heads; ++h) {
      const size_t base = head_offset(c, t, h);
      for (uint32_t i = 0; i < npairs; ++i) {
        const auto [d0, d1] = pair_dims(c.layout, c.rotary_dim, i);
        const size_t k0 = base + d0, k1 = base + d1;
        const Trig<40>& tr = row[i];
        if (tr.zero_angle) continue;  // identity: bits already copied
        const double x0 = out.exact[k0], x1 = out.exact[k1];
        PairOut o;
        if (std::isnan(x0) || std::isnan(x1)) {
          store_bits(d, out.rounded.data(), k0, quiet_nan_bits(d));
          store_bits(d, out.rounded.data(), k1, quiet_nan_bits(d));
          out.exact[k0] = out.exact[k1] = std::numeric_limits<double>::quiet_NaN();
          continue;
        }
        if (std::isinf(x0) || std::isinf(x1)) {
          rotate_nonfinite<40>(x0, x1, tr, o);
        } else if (!rotate_pair<40>(d, x0, x1, tr, o)) {
          ++out.ziv_retries;
          rotate_pair_retry<80>(c, opt, i, m, x0, x1, o);
        }
        store_bits(d, out.rounded.data(), k0,
                   std::isnan(o.y0) ? quiet_nan_bits(d) : double_to_bits_exact(d, o.y0));
        store_bits(d, out.rounded.data(), k1,
                   std::isnan(o.y1) ? quiet_nan_bits(d) : double_to_bits_exact(d, o.y1));
        out.exact[k0] = o.e0;
        out.exact[k1] = o.e1;
      }
    }
  }
  return out;
}

}  // namespace ropecheck
