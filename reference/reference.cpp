#include "reference/reference.hpp"

#include "reference/frequency_rules.hpp"

#include <mpfr.h>

#include <algorithm>
#include <bit>
#include <boost/multiprecision/mpfr.hpp>
#include <cmath>
#include <limits>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <map>
#include <set>
#include <unordered_map>

namespace ropecheck {
namespace {

namespace mp = boost::multiprecision;

// A Boost.Multiprecision MPFR number at a binary precision chosen at run time.
// The arithmetic goes through the mpfr_* functions on its backend, so every
// rounding is explicit.
class Num {
 public:
  explicit Num(mpfr_prec_t bits) { mpfr_set_prec(v_.backend().data(), bits); }
  mpfr_ptr p() { return v_.backend().data(); }
  mpfr_srcptr p() const { return v_.backend().data(); }

 private:
  mp::number<mp::mpfr_float_backend<0>, mp::et_off> v_;
};

// Wide enough to hold any f32 value, int64 and double exactly, and m*scale
// (64 + 53 bits) exactly.
constexpr mpfr_prec_t kExactBits = 128;
// Ziv stops after the stage whose precision first reaches this many bits.
constexpr mpfr_prec_t kMaxBits = 1064;

// A binary format for rounding: precision, smallest normal exponent, largest
// exponent.
struct Fmt {
  int p, emin, emax;
  double max_finite;
};
const Fmt kDouble{53, -1022, 1023, std::numeric_limits<double>::max()};
Fmt fmt_of(Dtype d) {
  const Format f = format_of(d);
  return {f.precision, f.emin, f.emax, f.max_finite()};
}

// ---- frequency rules -------------------------------------------------------

// The exact table of the case's frequency rule at >= `bits` bits (reference/frequency_rules.hpp), kept per
// thread for the last few (rule, rotary_dim, base, seq_len, bits): a call evaluates it once per precision.
const FrequencyTable& rule_table(const RopeCase& c, unsigned bits) {
  const FrequencyRule& r = *c.freq_rule;
  std::ostringstream k;
  k << int(r.type) << ' ' << hexfloat(r.factor.value_or(0)) << ' ' << r.max_position_embeddings << ' '
    << r.original_max_position_embeddings << ' ' << hexfloat(r.low_freq_factor) << ' ' << hexfloat(r.high_freq_factor)
    << ' ' << hexfloat(r.beta_fast) << ' ' << hexfloat(r.beta_slow) << ' ' << r.truncate << ' ' << c.rotary_dim << ' '
    << hexfloat(c.base) << ' ' << c.rule_seq_len << ' ' << bits;
  for (double f : r.short_factor) k << ' ' << hexfloat(f);
  k << " |";
  for (double f : r.long_factor) k << ' ' << hexfloat(f);
  thread_local std::unordered_map<std::string, std::unique_ptr<FrequencyTable>> memo;
  const std::string key = k.str();
  if (auto it = memo.find(key); it != memo.end()) return *it->second;
  if (memo.size() >= 64) memo.clear();
  // Only theta matters here: the attention-factor fields are the case's own (attention_factor).
  FrequencyRule theta_only = r;
  theta_only.mscale.reset();
  theta_only.mscale_all_dim.reset();
  theta_only.attention_factor.reset();
  auto t = std::make_unique<FrequencyTable>(evaluate_frequency_rule(
      theta_only, c.rotary_dim, c.base, c.rule_seq_len ? std::optional<uint64_t>(c.rule_seq_len) : std::nullopt, bits));
  return *memo.emplace(key, std::move(t)).first->second;
}

// ---- the fp32 angle model -------------------------------------------------

// f32 inv_freq of pair i in the fp32 model; pow is correctly rounded (MPFR).
float fp32_inv_freq(const RopeCase& c, uint32_t i) {
  if (!c.inv_freq.empty()) return float(c.inv_freq[i]);
  if (c.freq_rule) return to_float(rule_table(c, kDefaultRuleBits).theta[i]);  // an f32 table of the rule
  volatile float e = float(2 * i) / float(c.rotary_dim);
  Num b(kExactBits), ex(kExactBits), p(kExactBits);
  mpfr_set_flt(b.p(), float(c.base), MPFR_RNDN);
  mpfr_set_flt(ex.p(), e, MPFR_RNDN);
  mpfr_pow(p.p(), b.p(), ex.p(), MPFR_RNDN);
  const float pf = mpfr_get_flt(p.p(), MPFR_RNDN);
  volatile float one = 1.0f;
  return one / pf;
}

float fp32_angle_from_inv(const RopeCase& c, float inv, int64_t m) {
  volatile float mf = float(m);
  if (c.position_scale != 1.0) mf = mf * float(c.position_scale);
  volatile float angle = mf * inv;
  return angle;
}

// ---- cos and sin of one (position, pair) at one precision -----------------

// The value of theta_i at precision P into `out`; returns its relative error
// bound in units of 2^-P.
double theta(const RopeCase& c, uint32_t i, Num& out, mpfr_prec_t P) {
  if (!c.inv_freq.empty()) {
    mpfr_set_prec(out.p(), kExactBits);
    mpfr_set_d(out.p(), c.inv_freq[i], MPFR_RNDN);  // exact
    return 0;
  }
  mpfr_set_prec(out.p(), P);
  if (c.freq_rule) {
    // The rule's exact value, evaluated 64 bits beyond P (its own error far below 2^-P), rounded once.
    const FrequencyTable& t = rule_table(c, std::max<unsigned>(kDefaultRuleBits, unsigned(P) + 64));
    mpfr_set(out.p(), t.theta[i].backend().data(), MPFR_RNDN);
    return 2.0;
  }
  if (i == 0) {  // base^0 = 1 exactly
    mpfr_set_ui(out.p(), 1, MPFR_RNDN);
    return 0;
  }
  // e = -2i/d rounds once (relative 2^-P); pow rounds once (2^-P) and turns
  // the exponent's absolute error |e| 2^-P <= 2^-P into a relative error of
  // |ln base| 2^-P (to first order; the +1 covers the rest).
  Num e(P), b(kExactBits);
  mpfr_set_si(e.p(), -2 * long(i), MPFR_RNDN);
  mpfr_div_ui(e.p(), e.p(), c.rotary_dim, MPFR_RNDN);
  mpfr_set_d(b.p(), c.base, MPFR_RNDN);
  // base^(-2i/d) is the same number in every call with this base and rotary_dim: it is kept (a pure
  // memo, at most kThetaMemo values per thread; a call with many pairs or new bases just computes).
  struct Key {
    uint64_t base;
    uint32_t rotary_dim, i;
    mpfr_prec_t P;
    bool operator==(const Key&) const = default;
  };
  struct KeyHash {
    size_t operator()(const Key& k) const {
      return std::hash<uint64_t>()(k.base ^ (uint64_t(k.rotary_dim) << 40) ^ (uint64_t(k.i) << 20) ^ uint64_t(k.P));
    }
  };
  constexpr size_t kThetaMemo = 1 << 14;
  thread_local std::unordered_map<Key, std::unique_ptr<Num>, KeyHash> memo;
  const Key key{std::bit_cast<uint64_t>(c.base), c.rotary_dim, i, P};
  if (auto it = memo.find(key); it != memo.end()) {
    mpfr_set(out.p(), it->second->p(), MPFR_RNDN);  // same precision: exact
  } else {
    mpfr_pow(out.p(), b.p(), e.p(), MPFR_RNDN);
    if (memo.size() >= kThetaMemo) memo.clear();
    auto v = std::make_unique<Num>(P);
    mpfr_set(v->p(), out.p(), MPFR_RNDN);
    memo.emplace(key, std::move(v));
  }
  return 1.0 + std::fabs(std::log(c.base)) + 1.0;
}

struct Trig {
  explicit Trig(mpfr_prec_t P) : c(P), s(P) {}
  Num c, s;
  double err = 0;    // |cos - c| and |sin - s| are at most this (max of the two below)
  double err_c = 0;  // |cos - c| <= err_c
  double err_s = 0;  // |sin - s| <= err_s (relative to |s|: decides tiny sines' signs)
  double abs_angle = 0;  // |angle| rounded to double
  bool zero_angle = false;
  bool nonfinite_angle = false;  // fp32 model only: an f32 angle of +-Inf (c = s = NaN)
};

// Shared per-call inputs of the angle: theta_i (exact model) or the f32
// inv_freq (fp32 model), with theta's error in units of 2^-P.
struct AngleInputs {
  const Num* theta = nullptr;
  double theta_units = 0;
  float inv_f32 = 0;
};

void compute_trig(const RopeCase& c, const ReferenceOptions& opt, int64_t m, const AngleInputs& in, mpfr_prec_t P,
                  Trig& r) {
  Num angle(P);
  double angle_err = 0;
  const double ulp = std::ldexp(1.0, -int(P));
  if (opt.angle_model == AngleModel::fp32) {
    mpfr_set_prec(angle.p(), kExactBits);
    mpfr_set_flt(angle.p(), fp32_angle_from_inv(c, in.inv_f32, m), MPFR_RNDN);  // exact, no error
  } else {
    Num ms(kExactBits);
    mpfr_set_si(ms.p(), long(m), MPFR_RNDN);  // exact
    if (c.position_scale != 1.0) mpfr_mul_d(ms.p(), ms.p(), c.position_scale, MPFR_RNDN);  // exact: 64+53 bits
    mpfr_mul(angle.p(), ms.p(), in.theta->p(), MPFR_RNDN);
    angle_err = std::fabs(mpfr_get_d(angle.p(), MPFR_RNDA)) * (in.theta_units + 1.0) * ulp;
  }
  r.zero_angle = mpfr_zero_p(angle.p());
  r.nonfinite_angle = !mpfr_number_p(angle.p());
  r.abs_angle = std::fabs(mpfr_get_d(angle.p(), MPFR_RNDN));
  if (r.nonfinite_angle) {  // cos(+-Inf), sin(+-Inf) are NaN
    mpfr_set_nan(r.c.p());
    mpfr_set_nan(r.s.p());
    r.err = 0;
    return;
  }
  const double af = c.attention_factor;
  if (r.zero_angle) {
    // cos = af, sin = +0 exactly. With af == 1 the pair is the identity (its bits are copied); otherwise
    // it is scaled by af like any other pair.
    mpfr_set_d(r.c.p(), af, MPFR_RNDN);
    mpfr_set_ui(r.s.p(), 0, MPFR_RNDN);
    r.zero_angle = af == 1.0;
    r.err = r.err_c = r.err_s = 0;
    return;
  }
  // Each of cos, sin rounds within 2^-P (|value| <= 1); the angle's error
  // passes through with factor <= 1. Factor 2: slack for the double arithmetic.
  mpfr_sin_cos(r.s.p(), r.c.p(), angle.p(), MPFR_RNDN);
  // cos and sin are correctly rounded (2^-P relative) values of the working
  // angle, whose error passes through with factor <= 1. The attention factor
  // (an exact double) multiplies both with one more rounding: af*cos is
  // within af*angle_err + af|cos|2^-P + |af*cos|2^-P.
  double units = 1.0;
  if (af != 1.0) {
    mpfr_mul_d(r.c.p(), r.c.p(), af, MPFR_RNDN);
    mpfr_mul_d(r.s.p(), r.s.p(), af, MPFR_RNDN);
    units = 2.0 * (1.0 + 0x1p-40);
  }
  r.err_c = 2.0 * (af * angle_err + std::fabs(mpfr_get_d(r.c.p(), MPFR_RNDA)) * units * ulp);
  r.err_s = 2.0 * (af * angle_err + std::fabs(mpfr_get_d(r.s.p(), MPFR_RNDA)) * units * ulp);
  r.err = std::max(r.err_c, r.err_s);
}

// ---- rounding with a Ziv check ---------------------------------------------

// Scratch numbers of one precision, reused for every element.
struct Scratch {
  explicit Scratch(mpfr_prec_t P) : P(P), x0(kExactBits), x1(kExactBits), y0(P), y1(P), t(P), r(P), d(P) {}
  mpfr_prec_t P;
  Num x0, x1, y0, y1, t, r, d;
};

// Round y to the format f, to nearest even, with IEEE subnormals and overflow.
// `err` bounds |y - exact|. Returns false when [y-err, y+err] may hold a
// rounding boundary (or, for a result of zero, zero itself: its sign), i.e.
// when the rounding of the exact value is not decided.
bool round_mpfr(const Fmt& f, mpfr_srcptr y, double err, Scratch& s, double& out) {
  if (mpfr_zero_p(y)) {
    out = mpfr_signbit(y) ? -0.0 : 0.0;
    return err == 0;
  }
  const long E = long(mpfr_get_exp(y)) - 1;                    // |y| in [2^E, 2^(E+1))
  const long q = std::max<long>(E, f.emin) - (f.p - 1);        // quantum exponent
  mpfr_mul_2si(s.t.p(), y, -q, MPFR_RNDN);                     // exact
  mpfr_rint(s.r.p(), s.t.p(), MPFR_RNDN);                      // ties to even; exact (|r| <= 2^p, P > p)
  if (err > 0) {
    mpfr_sub(s.d.p(), s.t.p(), s.r.p(), MPFR_RNDN);  // exact: |d| <= 1/2, on the grid of t
    mpfr_abs(s.d.p(), s.d.p(), MPFR_RNDN);
    mpfr_d_sub(s.d.p(), 0.5, s.d.p(), MPFR_RNDN);  // 1/2 - |t - r|, exact: distance to the boundary in quanta
    const double gap = mpfr_get_d(s.d.p(), MPFR_RNDZ);  // <= the distance
    // err in quanta; + denorm_min covers an underflowing ldexp. The factor
    // covers the rounding of the product.
    const double err_q = std::ldexp(err, int(-q)) + std::numeric_limits<double>::denorm_min();
    if (!(err_q * (1 + 0x1p-50) < gap)) return false;
    if (mpfr_zero_p(s.r.p())) {  // result is a signed zero: y must not straddle 0
      const double at = std::fabs(mpfr_get_d(s.t.p(), MPFR_RNDZ));  // <= |t|
      if (!(at > err_q * (1 + 0x1p-50))) return false;
    }
  }
  const double k = mpfr_get_d(s.r.p(), MPFR_RNDN);  // |k| <= 2^p, exact
  double v = std::ldexp(k, int(q));
  if (std::fabs(v) > f.max_finite) v = std::copysign(std::numeric_limits<double>::infinity(), v);
  if (v == 0) v = mpfr_signbit(y) ? -0.0 : 0.0;
  out = v;
  return true;
}

struct PairOut {
  double y0, y1;  // rounded, as doubles (exactly representable in d)
  double e0, e1;  // exact, rounded to double
};

// One pair rotated with cos/sin `tr` at the scratch precision. Inputs are
// finite and not both zero.
enum class Rounded { ok, exact_undecided, undecided };
Rounded rotate_mpfr(const Fmt& f, double x0, double x1, const Trig& tr, Scratch& s, PairOut& o) {
  mpfr_set_d(s.x0.p(), x0, MPFR_RNDN);  // exact
  mpfr_set_d(s.x1.p(), x1, MPFR_RNDN);
  // y0 = x0 c - x1 s, y1 = x0 s + x1 c, each with a single rounding (2^-P relative).
  const int t0 = mpfr_fmms(s.y0.p(), s.x0.p(), tr.c.p(), s.x1.p(), tr.s.p(), MPFR_RNDN);
  const int t1 = mpfr_fmma(s.y1.p(), s.x0.p(), tr.s.p(), s.x1.p(), tr.c.p(), MPFR_RNDN);
  const double ulp = std::ldexp(1.0, -int(s.P));
  const double b0 = std::fabs(x0), b1 = std::fabs(x1);
  const double a0 = std::fabs(mpfr_get_d(s.y0.p(), MPFR_RNDA)), a1 = std::fabs(mpfr_get_d(s.y1.p(), MPFR_RNDA));
  // Exact cos and sin (a zero angle times the attention factor) and exact sums (ternary 0): the values are
  // exact, and an exact tie of the storage type rounds to even (an error bound > 0 could never decide it).
  const bool exact_trig = tr.err_c == 0 && tr.err_s == 0;
  const double err0 = exact_trig && t0 == 0 ? 0.0 : 2.0 * (b0 * tr.err_c + b1 * tr.err_s + a0 * ulp);
  const double err1 = exact_trig && t1 == 0 ? 0.0 : 2.0 * (b0 * tr.err_s + b1 * tr.err_c + a1 * ulp);
  if (!round_mpfr(f, s.y0.p(), err0, s, o.y0) || !round_mpfr(f, s.y1.p(), err1, s, o.y1)) return Rounded::undecided;
  if (!round_mpfr(kDouble, s.y0.p(), err0, s, o.e0) || !round_mpfr(kDouble, s.y1.p(), err1, s, o.e1)) {
    // `exact` only measures error: where its correct rounding to double is out
    // of reach (values near the bottom of double's range, where the error
    // bound, computed in double, cannot shrink below the subnormal quantum),
    // the faithful value of the highest precision is used.
    if (s.P >= kMaxBits) {
      o.e0 = mpfr_get_d(s.y0.p(), MPFR_RNDN);
      o.e1 = mpfr_get_d(s.y1.p(), MPFR_RNDN);
      return Rounded::ok;
    }
    return Rounded::exact_undecided;
  }
  return Rounded::ok;
}

// ---- the double-double fast path -------------------------------------------
//
// cos = ch + cl + dc and sin = sh + sl + ds with |dc|, |ds| <= err (the MPFR
// error of cos/sin plus the <= 2^-106 left after splitting them into two
// doubles). For f32/f16/bf16 inputs x0, x1 (exact doubles), fast_rotate forms
//   x0*ch - x1*sh = s + t + e1 - e2   exactly (TwoProduct by fma, TwoSum),
//   tail = (t + (e1 - e2)) + (x0*cl - x1*sl)   in double,
//   (hi, lo) = TwoSum(s, tail)        exactly,
// so |x0 cos - x1 sin - (hi + lo)| <= ax*err + |error of tail| with ax = |x0|+|x1|.
// |t|, |e1 - e2|, |x0*cl - x1*sl| are each <= ~2^-52 ax, so the five roundings in
// tail (two products, three sums) err by at most ~10 * 2^-106 ax < 2^-100 ax.
// (fma makes e1, e2 exact unless they underflow.) Underflow adds at most
// 2^-1075 to any of these operations, nothing against E >= ax 2^-100 >= 2^-249.
// Same for y1 = x0 sin + x1 cos. The bound E = ax*(err + 2^-100)*(1 + 2^-40)
// then decides the rounding in decide_dd, or the pair goes to MPFR.
struct FastTrig {
  double ch, cl, sh, sl, err;
};

FastTrig split(const Trig& tr, Num& tmp) {
  FastTrig f;
  f.ch = mpfr_get_d(tr.c.p(), MPFR_RNDN);
  mpfr_sub_d(tmp.p(), tr.c.p(), f.ch, MPFR_RNDN);  // exact: the bits of c below its top 53
  f.cl = mpfr_get_d(tmp.p(), MPFR_RNDN);          // |c - ch - cl| <= 2^-53 |cl| <= 2^-106
  f.sh = mpfr_get_d(tr.s.p(), MPFR_RNDN);
  mpfr_sub_d(tmp.p(), tr.s.p(), f.sh, MPFR_RNDN);
  f.sl = mpfr_get_d(tmp.p(), MPFR_RNDN);
  f.err = tr.err + 0x1p-105;
  return f;
}

inline void two_sum(double a, double b, double& s, double& t) {
  s = a + b;
  const double bb = s - a;
  t = (a - (s - bb)) + (b - bb);
}

// a*b + sign*(c*d) as hi + lo (|error| bounded as in the comment above).
inline void dd_dot(double a, double bh, double bl, double c, double dh, double dl, double& hi, double& lo) {
  const double p1 = a * bh, e1 = std::fma(a, bh, -p1);
  const double p2 = c * dh, e2 = std::fma(c, dh, -p2);
  double s, t;
  two_sum(p1, p2, s, t);
  const double tail = (t + (e1 + e2)) + (a * bl + c * dl);
  two_sum(s, tail, hi, lo);
}

// Exponent of a normal double (floor(log2|v|)) and 2^k for normal k, by bits.
inline int exponent_of(double v) { return int((std::bit_cast<uint64_t>(v) >> 52) & 0x7ff) - 1023; }
inline double pow2(int k) { return std::bit_cast<double>(uint64_t(k + 1023) << 52); }

// Round y = hi + lo, known within E of the exact value, to the format f.
// False when undecided. All steps are exact or bounded as commented.
bool decide_dd(const Fmt& f, double hi, double lo, double E, double& out) {
  const double a = std::fabs(hi);
  if (!(a >= 0x1p-1000) || !(a <= 0x1p1000)) return false;  // zero, tiny, huge, NaN: MPFR decides
  const double l = hi < 0 ? -lo : lo;  // y = sign * (a + l)
  double F;                           // a rounded to f, to nearest even
  if (f.p == 53) {
    F = a;
  } else {
    const int q = std::max(exponent_of(a), f.emin) - (f.p - 1);  // quantum at a (|q| <= 149 here)
    const double v = a * pow2(-q);                                 // exact, < 2^(p+1)
    const double k = (v + 0x1p52) - 0x1p52;                        // RNE to an integer (v < 2^52)
    if (k == 0) return false;                                      // rounds to zero: MPFR decides the sign
    F = k * pow2(q);                                               // exact
  }
  const int ef = exponent_of(F);
  const int qf = std::max(ef, f.emin) - (f.p - 1);
  // Distances from F to the midpoints with its neighbours (the one below is
  // nearer when F is a power of two above the subnormal range).
  const double half_away = pow2(qf - 1);
  const bool pow_of_two = (std::bit_cast<uint64_t>(F) & ((uint64_t(1) << 52) - 1)) == 0;
  const double half_toward = (ef > f.emin && pow_of_two) ? pow2(qf - 2) : half_away;
  const double D = a - F;                          // exact (Sterbenz: F/2 <= a <= 2F)
  const double u = D + l;                          // (a + l) - F, relative error <= 2^-53
  const double m = (std::fabs(u) + E) * 0x1p-50;   // covers the roundings of u and of the sums below
  if (!(u + E + m < half_away && -u + E + m < half_toward)) return false;
  out = std::copysign(F > f.max_finite ? std::numeric_limits<double>::infinity() : F, hi);
  return true;
}

bool fast_rotate(const Fmt& f, double x0, double x1, const FastTrig& t, PairOut& o) {
  double h0, l0, h1, l1;
  dd_dot(x0, t.ch, t.cl, -x1, t.sh, t.sl, h0, l0);
  dd_dot(x0, t.sh, t.sl, x1, t.ch, t.cl, h1, l1);
  const double E = (std::fabs(x0) + std::fabs(x1)) * (t.err + 0x1p-100) * (1 + 0x1p-40);
  return decide_dd(f, h0, l0, E, o.y0) && decide_dd(f, h1, l1, E, o.y1) && decide_dd(kDouble, h0, l0, E, o.e0) &&
         decide_dd(kDouble, h1, l1, E, o.e1);
}

// ---- per-call driver ---------------------------------------------------------

uint32_t quiet_nan_bits(Dtype d) {
  switch (d) {
    case Dtype::f32: return 0x7fc00000u;
    case Dtype::f16: return 0x7e00u;
    case Dtype::bf16: return 0x7fc0u;
  }
  return 0;
}

// IEEE arithmetic on the signs/values of the exact cos and sin (as doubles,
// whose signs and zeros are those of the exact values): non-finite inputs and
// the (+-0, +-0) pair.
void rotate_ieee(double x0, double x1, double cd, double sd, PairOut& o) {
  o.y0 = o.e0 = x0 * cd - x1 * sd;
  o.y1 = o.e1 = x0 * sd + x1 * cd;
}

class Driver {
 public:
  Driver(const RopeCase& c, const ReferenceOptions& opt) : c_(c), opt_(opt), f_(fmt_of(c.dtype)) {}

  // Precision of Ziv stage k.
  mpfr_prec_t bits(size_t k) const { return mpfr_prec_t(opt_.working_bits) << k; }

  Scratch& scratch(size_t k) {
    while (scratch_.size() <= k) scratch_.push_back(std::make_unique<Scratch>(bits(scratch_.size())));
    return *scratch_[k];
  }

  // cos/sin of pair i at position m at stage k's precision.
  void trig_at(uint32_t i, int64_t m, size_t k, Trig& tr) {
    const mpfr_prec_t P = bits(k);
    Num th(P);
    AngleInputs in;
    if (opt_.angle_model == AngleModel::exact) {
      in.theta_units = theta(c_, i, th, P);
      in.theta = &th;
    } else {
      in.inv_f32 = fp32_inv_freq(c_, i);
    }
    compute_trig(c_, opt_, m, in, P, tr);
  }

  [[noreturn]] void undecided(const char* what, uint32_t i, int64_t m, double x0, double x1, mpfr_prec_t P) {
    std::ostringstream s;
    s << "reference: " << what << " undecided at " << P << " bits for pair " << i << " position " << m << " x = ("
      << hexfloat(x0) << ", " << hexfloat(x1) << ") in " << c_.summary();
    throw std::runtime_error(s.str());
  }

  // Recompute pair i at position m at stages 1, 2, ... until it rounds.
  void retry(uint32_t i, int64_t m, double x0, double x1, PairOut& o) {
    for (size_t k = 1;; ++k) {
      Trig tr(bits(k));
      trig_at(i, m, k, tr);
      if (rotate_mpfr(f_, x0, x1, tr, scratch(k), o) == Rounded::ok) return;
      if (bits(k) >= kMaxBits) undecided("rounding", i, m, x0, x1, bits(k));
    }
  }

  // Certain signs of cos and sin (as doubles) for pair i at position m.
  void signs(uint32_t i, int64_t m, double& cd, double& sd) {
    for (size_t k = 1;; ++k) {
      Trig tr(bits(k));
      trig_at(i, m, k, tr);
      // Rounded away from zero, a nonzero cos/sin below double's range stays a
      // nonzero double of its sign; its bound (relative, underflowed to 0) is
      // then far below it.
      cd = mpfr_get_d(tr.c.p(), MPFR_RNDA);
      sd = mpfr_get_d(tr.s.p(), MPFR_RNDA);
      if (std::fabs(cd) > 2 * tr.err_c && std::fabs(sd) > 2 * tr.err_s) return;
      if (bits(k) >= kMaxBits) undecided("sign of cos/sin", i, m, cd, sd, bits(k));
    }
  }

 private:
  const RopeCase& c_;
  const ReferenceOptions& opt_;
  Fmt f_;
  std::vector<std::unique_ptr<Scratch>> scratch_;

 public:
  const Fmt& fmt() const { return f_; }
};

}  // namespace

std::string_view to_string(AngleModel m) { return m == AngleModel::exact ? "exact" : "fp32"; }

std::optional<AngleModel> parse_angle_model(std::string_view s) {
  if (s == "exact") return AngleModel::exact;
  if (s == "fp32") return AngleModel::fp32;
  return std::nullopt;
}

float fp32_model_angle(const RopeCase& c, uint32_t pair, int64_t position) {
  return fp32_angle_from_inv(c, fp32_inv_freq(c, pair), position);
}

double exact_angle(const RopeCase& c, uint32_t pair, int64_t position) {
  Num th(134), ms(kExactBits), a(134);
  theta(c, pair, th, 134);
  mpfr_set_si(ms.p(), long(position), MPFR_RNDN);
  mpfr_mul_d(ms.p(), ms.p(), c.position_scale, MPFR_RNDN);
  mpfr_mul(a.p(), ms.p(), th.p(), MPFR_RNDN);
  return mpfr_get_d(a.p(), MPFR_RNDN);
}

double theta_value(const RopeCase& c, uint32_t pair) {
  Num th(134);
  theta(c, pair, th, 134);
  return mpfr_get_d(th.p(), MPFR_RNDN);
}

ReferenceOutput reference_rope(const RopeCase& c, const ReferenceOptions& opt) {
  if (std::string why = c.validate(); !why.empty()) throw std::invalid_argument("reference: " + why);
  if (opt.working_bits < 32 || opt.working_bits > kMaxBits)
    throw std::invalid_argument("reference: working_bits must be in [32, " + std::to_string(kMaxBits) + "] (got " +
                                std::to_string(opt.working_bits) + ")");
  const Dtype d = c.dtype;
  const uint32_t npairs = c.rotary_dim / 2;
  const mpfr_prec_t P = opt.working_bits;
  Driver drv(c, opt);
  ReferenceOutput out;
  out.rounded = c.input;  // pass-through dims and zero-angle pairs keep their bits
  out.exact.resize(c.n_elements());
  out.angle.assign(c.n_tokens() * npairs, 0.0);
  for (size_t k = 0; k < c.n_elements(); ++k) out.exact[k] = load_f32(d, c.input.data(), k);

  // theta_i (or the f32 inv_freq) once per call.
  std::vector<Num> thetas;
  std::vector<AngleInputs> inputs(npairs);
  thetas.reserve(npairs);
  for (uint32_t i = 0; i < npairs; ++i) {
    thetas.emplace_back(P);
    if (opt.angle_model == AngleModel::exact) {
      inputs[i].theta_units = theta(c, i, thetas[i], P);
      inputs[i].theta = &thetas[i];
    } else {
      inputs[i].inv_f32 = fp32_inv_freq(c, i);
    }
  }

  // cos/sin once per (distinct positions of the token, pair), shared by all heads. A token's key is its
  // position on every axis.
  std::map<std::vector<int64_t>, size_t> seen;  // positions -> row start
  std::vector<Trig> trigs;
  std::vector<FastTrig> fast;
  const size_t n_tok = c.n_tokens();
  auto key_of = [&](size_t t) {
    std::vector<int64_t> k(c.n_pos_axes);
    for (uint32_t a = 0; a < c.n_pos_axes; ++a) k[a] = c.position(t, a);
    return k;
  };
  {
    std::set<std::vector<int64_t>> distinct;
    for (size_t t = 0; t < n_tok; ++t) distinct.insert(key_of(t));
    trigs.reserve(distinct.size() * npairs);  // no reallocation: the MPFR numbers are never moved
    fast.reserve(distinct.size() * npairs);
  }
  Num tmp(P);
  Scratch& s0 = drv.scratch(0);
  for (size_t t = 0; t < n_tok; ++t) {
    auto [it, fresh] = seen.emplace(key_of(t), trigs.size());
    if (fresh)
      for (uint32_t i = 0; i < npairs; ++i) {
        trigs.emplace_back(P);
        compute_trig(c, opt, c.pair_position(t, i), inputs[i], P, trigs.back());
        fast.push_back(split(trigs.back(), tmp));
      }
    const Trig* row = &trigs[it->second];
    const FastTrig* frow = &fast[it->second];
    for (uint32_t i = 0; i < npairs; ++i) out.angle[t * npairs + i] = row[i].abs_angle;
    for (size_t h = 0; h < c.n_heads; ++h) {
      const size_t base = head_offset(c, t, h);
      for (uint32_t i = 0; i < npairs; ++i) {
        const Trig& tr = row[i];
        if (tr.zero_angle) continue;  // identity: bits already copied
        const int64_t m = c.pair_position(t, i);
        const auto [d0, d1] = pair_elements(c, i);
        const size_t k0 = base + d0, k1 = base + d1;
        const double x0 = out.exact[k0], x1 = out.exact[k1];
        PairOut o;
        if (std::isnan(x0) || std::isnan(x1)) {
          store_bits(d, out.rounded.data(), k0, quiet_nan_bits(d));
          store_bits(d, out.rounded.data(), k1, quiet_nan_bits(d));
          out.exact[k0] = out.exact[k1] = std::numeric_limits<double>::quiet_NaN();
          continue;
        }
        if (tr.nonfinite_angle || std::isinf(x0) || std::isinf(x1) || (x0 == 0 && x1 == 0)) {
          // Only the signs (and nonzero-ness) of cos and sin matter here; make sure they are certain
          // (they are when cos and sin are exact: a zero angle scaled by the attention factor).
          double cd = frow[i].ch, sd = frow[i].sh;
          const bool exact_trig = tr.err_c == 0 && tr.err_s == 0;
          if (!tr.nonfinite_angle && !exact_trig && !(std::fabs(cd) > 2 * tr.err_c && std::fabs(sd) > 2 * tr.err_s))
            drv.signs(i, m, cd, sd);
          rotate_ieee(x0, x1, cd, sd, o);
        } else if (!(opt.fast_path && fast_rotate(drv.fmt(), x0, x1, frow[i], o))) {
          ++out.mpfr_pairs;
          const Rounded r = rotate_mpfr(drv.fmt(), x0, x1, tr, s0, o);
          if (r != Rounded::ok) {
            ++(r == Rounded::undecided ? out.ziv_retries : out.exact_retries);
            drv.retry(i, m, x0, x1, o);
          }
        }
        store_bits(d, out.rounded.data(), k0, std::isnan(o.y0) ? quiet_nan_bits(d) : double_to_bits_exact(d, o.y0));
        store_bits(d, out.rounded.data(), k1, std::isnan(o.y1) ? quiet_nan_bits(d) : double_to_bits_exact(d, o.y1));
        out.exact[k0] = o.e0;
        out.exact[k1] = o.e1;
      }
    }
  }
  return out;
}

}  // namespace ropecheck
