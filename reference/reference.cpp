#include "reference/reference.hpp"

#include "reference/frequency_rules.hpp"

#include <mpfr.h>

#include <algorithm>
#include <bit>
#include <boost/multiprecision/mpfr.hpp>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <cstdint>
#include <unordered_map>
#include <vector>

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
// The key is the fields' bit patterns, hashed and compared in place (no text: this lookup runs for every
// theta_value() and error bound of a rule's case).
struct RuleKey {
  FrequencyRule rule;  // theta's fields only (the attention-factor fields are not part of the key)
  uint32_t rotary_dim;
  double base;
  uint64_t seq_len;
  unsigned bits;
};

template <class T>
uint64_t bits_of(T v) {
  if constexpr (sizeof(T) == 8) return std::bit_cast<uint64_t>(v);
  else return uint64_t(v);
}

uint64_t rule_hash(const FrequencyRule& r, uint32_t rotary_dim, double base, uint64_t seq_len, unsigned bits) {
  uint64_t h = 0xcbf29ce484222325ull;
  auto mix = [&h](uint64_t v) {
    h ^= v;
    h *= 0x100000001b3ull;
    h ^= h >> 29;
  };
  mix(uint64_t(r.type));
  mix(r.factor.has_value());
  mix(bits_of(r.factor.value_or(0)));
  mix(r.max_position_embeddings);
  mix(r.original_max_position_embeddings);
  mix(bits_of(r.low_freq_factor));
  mix(bits_of(r.high_freq_factor));
  mix(bits_of(r.beta_fast));
  mix(bits_of(r.beta_slow));
  mix(r.truncate);
  mix(rotary_dim);
  mix(bits_of(base));
  mix(seq_len);
  mix(bits);
  mix(r.short_factor.size());
  for (double f : r.short_factor) mix(bits_of(f));
  mix(r.long_factor.size());
  for (double f : r.long_factor) mix(bits_of(f));
  return h;
}

bool same_doubles(const std::vector<double>& a, const std::vector<double>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0);
}

bool same_rule_key(const RuleKey& k, const FrequencyRule& r, uint32_t rotary_dim, double base, uint64_t seq_len,
                   unsigned bits) {
  const FrequencyRule& a = k.rule;
  auto same = [](double x, double y) { return std::bit_cast<uint64_t>(x) == std::bit_cast<uint64_t>(y); };
  return a.type == r.type && a.factor.has_value() == r.factor.has_value() &&
         same(a.factor.value_or(0), r.factor.value_or(0)) && a.max_position_embeddings == r.max_position_embeddings &&
         a.original_max_position_embeddings == r.original_max_position_embeddings &&
         same(a.low_freq_factor, r.low_freq_factor) && same(a.high_freq_factor, r.high_freq_factor) &&
         same(a.beta_fast, r.beta_fast) && same(a.beta_slow, r.beta_slow) && a.truncate == r.truncate &&
         k.rotary_dim == rotary_dim && same(k.base, base) && k.seq_len == seq_len && k.bits == bits &&
         same_doubles(a.short_factor, r.short_factor) && same_doubles(a.long_factor, r.long_factor);
}

const FrequencyTable& rule_table(const RopeCase& c, unsigned bits) {
  const FrequencyRule& r = *c.freq_rule;
  struct Entry {
    uint64_t hash;
    RuleKey key;
    std::unique_ptr<FrequencyTable> table;
  };
  thread_local std::vector<Entry> memo;
  const uint64_t h = rule_hash(r, c.rotary_dim, c.base, c.rule_seq_len, bits);
  for (const Entry& e : memo)
    if (e.hash == h && same_rule_key(e.key, r, c.rotary_dim, c.base, c.rule_seq_len, bits)) return *e.table;
  if (memo.size() >= 64) memo.clear();
  // Only theta matters here: the attention-factor fields are the case's own (attention_factor).
  FrequencyRule theta_only = r;
  theta_only.mscale.reset();
  theta_only.mscale_all_dim.reset();
  theta_only.attention_factor.reset();
  auto t = std::make_unique<FrequencyTable>(evaluate_frequency_rule(
      theta_only, c.rotary_dim, c.base, c.rule_seq_len ? std::optional<uint64_t>(c.rule_seq_len) : std::nullopt, bits));
  memo.push_back({h, RuleKey{std::move(theta_only), c.rotary_dim, c.base, c.rule_seq_len, bits}, std::move(t)});
  return *memo.back().table;
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

// ---- theta_i of a call -------------------------------------------------------

// theta_i = base^(-2i/R) for every pair at precision P, with each value's relative error bound in units of
// 2^-P. One pow per table, then products: with W = P + 64,
//   q = RN_W(base^RN_W(-2/R)):  the exponent's rounding (relative 2^-W, absolute (2/R) 2^-W) becomes a
//       relative error x <= (2/R)|ln base| 2^-W of the power (|exp(x) - 1| <= x(1 + x)), and pow rounds once:
//       q = q*(1 + eta), eta <= ((2/R)|ln base| + 1) 2^-W (1 + 2^-50);
//   t_0 = 1 (exact), t_i = RN_W(t_(i-1) q):  t_i = q*^i (1 + eta)^i prod(1 + d_j), |d_j| <= 2^-W, so
//       |t_i / theta_i - 1| <= mu (1 + mu) with mu = i ((2/R)|ln base| + 2) 2^-W (1 + 2^-50), mu < 2^-50 here
//       (i < 2^31, |ln base| < 745, W >= 96);
//   theta_i = RN_P(t_i):  relative error <= 2^-P + mu (1 + mu)(1 + 2^-P), i.e. 1 + 2 mu 2^P units of 2^-P
//       (the factor 2 covers the second-order terms and the double arithmetic of the bound).
// A table is the same numbers in every call with this (base, rotary_dim, P): the last few are kept.
struct ThetaTable {
  mpfr_prec_t P = 0;
  std::vector<Num> theta;  // theta_0 .. theta_(np-1) first (a recycled table may hold more: never read)
  std::vector<double> units;
  std::vector<double> hi, lo;  // each theta split into two doubles (|theta - hi - lo| <= 2^-106 theta)
};

std::shared_ptr<const ThetaTable> default_thetas(double base, uint32_t rotary_dim, mpfr_prec_t P) {
  struct Entry {
    uint64_t base;
    uint32_t rotary_dim;
    mpfr_prec_t P;
    std::shared_ptr<const ThetaTable> table;
  };
  thread_local std::vector<Entry> memo;  // most recently used first
  const uint64_t bb = std::bit_cast<uint64_t>(base);
  for (size_t k = 0; k < memo.size(); ++k)
    if (memo[k].base == bb && memo[k].rotary_dim == rotary_dim && memo[k].P == P) {
      std::rotate(memo.begin(), memo.begin() + long(k), memo.begin() + long(k) + 1);
      return memo.front().table;
    }
  const uint32_t np = rotary_dim / 2;
  const mpfr_prec_t W = P + 64;
  // The table evicted last, when nothing else holds it, is recycled: its MPFR numbers are set to P and
  // reused, and it keeps up to 256 beyond np. A call with a new base otherwise allocated and freed one per
  // pair; and in steady state (the memo full, the tables as long as the longest seen) a call with a new key
  // allocates nothing it keeps, so libFuzzer's leak check (which runs an input again whenever a call
  // allocated more blocks than it freed: ~11 % of fuzz_differential's executions) has nothing to chase.
  thread_local std::shared_ptr<ThetaTable> spare;
  std::shared_ptr<ThetaTable> t;
  if (spare && spare.use_count() == 1) {
    t = std::move(spare);
    if (t->theta.size() > std::max<size_t>(np, 256)) t->theta.erase(t->theta.begin() + np, t->theta.end());
    if (t->P != P)
      for (Num& n : t->theta) mpfr_set_prec(n.p(), P);
    t->P = P;
  } else {
    t = std::make_shared<ThetaTable>();
    t->P = P;
  }
  spare.reset();
  t->theta.reserve(np);
  t->units.assign(np, 0.0);
  Num e(W), b(kExactBits), q(W), cur(W), next(W);
  mpfr_set_si(e.p(), -2, MPFR_RNDN);
  mpfr_div_ui(e.p(), e.p(), rotary_dim, MPFR_RNDN);
  mpfr_set_d(b.p(), base, MPFR_RNDN);  // exact
  mpfr_pow(q.p(), b.p(), e.p(), MPFR_RNDN);
  mpfr_set_ui(cur.p(), 1, MPFR_RNDN);
  // mu / i, in units of 2^-P: ((2/R)|ln base| + 2) 2^-(W-P) (1 + 2^-50); |ln base| to double, hence 2x below.
  const double per_pair = (2.0 / double(rotary_dim) * std::fabs(std::log(base)) + 2.0) * 0x1p-64 * (1 + 0x1p-50);
  t->hi.resize(np);
  t->lo.resize(np);
  for (uint32_t i = 0; i < np; ++i) {
    if (i == t->theta.size()) t->theta.emplace_back(P);
    mpfr_set(t->theta[i].p(), cur.p(), MPFR_RNDN);
    t->units[i] = i == 0 ? 0.0 : 1.0 + 2.0 * double(i) * per_pair;
    t->hi[i] = mpfr_get_d(t->theta[i].p(), MPFR_RNDN);
    mpfr_sub_d(next.p(), t->theta[i].p(), t->hi[i], MPFR_RNDN);  // exact at W > P bits
    t->lo[i] = mpfr_get_d(next.p(), MPFR_RNDN);
    mpfr_mul(next.p(), cur.p(), q.p(), MPFR_RNDN);
    mpfr_swap(cur.p(), next.p());
  }
  memo.insert(memo.begin(), Entry{bb, rotary_dim, P, t});
  if (memo.size() > 64) {
    spare = std::const_pointer_cast<ThetaTable>(std::move(memo.back().table));
    memo.pop_back();
  }
  return t;
}

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
  const std::shared_ptr<const ThetaTable> t = default_thetas(c.base, c.rotary_dim, P);
  mpfr_set(out.p(), t->theta[i].p(), MPFR_RNDN);  // same precision: exact
  return t->units[i];
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
  uint32_t pair = 0;  // the pair these are for (a given table's column)
};

// The working angle of a pair at position m into `angle` (precision P; the fp32 model's f32 angle exactly),
// with |angle - exact angle| <= the returned bound. `ms` is scratch (kExactBits).
double working_angle(const RopeCase& c, const ReferenceOptions& opt, int64_t m, const AngleInputs& in, mpfr_prec_t P,
                     Num& angle, Num& ms) {
  if (c.table) {  // an angle table: the angle as given, exactly
    mpfr_set_prec(angle.p(), kExactBits);
    mpfr_set_d(angle.p(), c.table->cos_at(size_t(m), in.pair, c.rotary_dim / 2), MPFR_RNDN);
    return 0;
  }
  if (opt.angle_model == AngleModel::fp32) {
    mpfr_set_prec(angle.p(), kExactBits);
    mpfr_set_flt(angle.p(), fp32_angle_from_inv(c, in.inv_f32, m), MPFR_RNDN);  // exact, no error
    return 0;
  }
  mpfr_set_prec(angle.p(), P);
  mpfr_set_si(ms.p(), long(m), MPFR_RNDN);  // exact
  if (c.position_scale != 1.0) mpfr_mul_d(ms.p(), ms.p(), c.position_scale, MPFR_RNDN);  // exact: 64+53 bits
  mpfr_mul(angle.p(), ms.p(), in.theta->p(), MPFR_RNDN);
  return std::fabs(mpfr_get_d(angle.p(), MPFR_RNDA)) * (in.theta_units + 1.0) * std::ldexp(1.0, -int(P));
}

void compute_trig(const RopeCase& c, const ReferenceOptions& opt, int64_t m, const AngleInputs& in, mpfr_prec_t P,
                  Trig& r) {
  if (c.table && !c.table->is_angle()) {  // cos and sin as given (the attention factor in them), exactly
    const uint32_t np = c.rotary_dim / 2;
    const double cv = c.table->cos_at(size_t(m), in.pair, np), sv = c.table->sin_at(size_t(m), in.pair, np);
    mpfr_set_prec(r.c.p(), kExactBits);
    mpfr_set_prec(r.s.p(), kExactBits);
    mpfr_set_d(r.c.p(), cv, MPFR_RNDN);
    mpfr_set_d(r.s.p(), sv, MPFR_RNDN);
    r.abs_angle = std::fabs(std::atan2(sv, cv));
    r.zero_angle = cv == 1.0 && sv == 0.0;  // the identity: bits copied
    r.nonfinite_angle = false;
    r.err = r.err_c = r.err_s = 0;
    return;
  }
  Num angle(P), ms(kExactBits);
  const double angle_err = working_angle(c, opt, m, in, P, angle, ms);
  const double ulp = std::ldexp(1.0, -int(P));
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
// error of cos/sin plus the <= 2^-106 relative left after splitting them into
// two doubles, or the bound of the double-double evaluation, dd_cos_sin). For f32/f16/bf16 inputs x0, x1 (exact doubles), fast_rotate forms
//   x0*ch - x1*sh = s + t + e1 - e2   exactly (TwoProduct by fma, TwoSum),
//   tail = (t + (e1 - e2)) + (x0*cl - x1*sl)   in double,
//   (hi, lo) = TwoSum(s, tail)        exactly,
// so |x0 cos - x1 sin - (hi + lo)| <= ax*err + |error of tail| with ax = |x0|+|x1|.
// |t|, |e1 - e2|, |x0*cl - x1*sl| are each <= ~2^-52 ax, so the five roundings in
// tail (two products, three sums) err by at most ~10 * 2^-106 ax < 2^-100 ax.
// (fma makes e1, e2 exact unless they underflow.) Underflow adds at most
// 2^-1075 to any of these operations, nothing against E >= ax 2^-100 >= 2^-249.
// Same for y1 = x0 sin + x1 cos. With an attention factor |cos|, |sin| may
// exceed 1 and those roundings scale with g = max(1, |ch|, |sh|): the bound
// E = ax*(err + g 2^-100)*(1 + 2^-40) then decides the rounding in decide_dd,
// or the pair goes to MPFR.
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
  f.err = tr.err + 0x1p-105 * std::max({1.0, std::fabs(f.ch), std::fabs(f.sh)});  // |c| > 1: an attention factor
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
  // The tail's roundings scale with |cos|, |sin| (up to the attention factor).
  const double E =
      (std::fabs(x0) + std::fabs(x1)) * (t.err + 0x1p-100 * std::max({1.0, std::fabs(t.ch), std::fabs(t.sh)})) *
      (1 + 0x1p-40);
  return decide_dd(f, h0, l0, E, o.y0) && decide_dd(f, h1, l1, E, o.y1) && decide_dd(kDouble, h0, l0, E, o.e0) &&
         decide_dd(kDouble, h1, l1, E, o.e1);
}

// ---- cos and sin in double-double -------------------------------------------
//
// The first pass's cos/sin of a pair: the working angle A (MPFR, |A - angle| <= angle_err) reduced in MPFR
// and evaluated in double-double with a rigorous bound, so mpfr_sin_cos runs only for the pairs whose
// rounding this cannot decide (then the MPFR Trig is made and the pair goes through MPFR as before). The
// result is a FastTrig: fast_rotate and its bound above take it as they take MPFR's split cos/sin.
//
//  1. Reduction: k = the integer nearest fl(fl(A) fl(2/pi)) (|A| < 2^40, so |k| < 2^40 and
//     |A - k pi/2| <= pi/4 + 2^-10); r = A - k Hpi rounded to 160 bits, Hpi = pi/2 rounded to 256 bits:
//     k Hpi is exact at 320 bits, |Hpi - pi/2| <= 2^-256, so |r - (A - k pi/2)| <= |k| 2^-256 + 2^-160 |r|.
//     r = rh + rl + d, rh = RN(r), rl = RN(r - rh) (r - rh exact at 160 bits): |d| <= 2^-106 |r|.
//  2. u = |r| = j/512 + s with j the integer nearest 512|rh| (j <= 512): |rh| - j/512 is exact (Sterbenz: for
//     j >= 1, j/1024 <= |rh| <= j/256), and s = that + sign*rl exactly by TwoSum; |s| <= 2^-10 (1 + 2^-40).
//  3. sin s = s (1 - z/3! + z^2/5! - z^3/7!), cos s = 1 - z/2! + ... + z^4/8!, z = s^2, by Horner in
//     double-double with the 1/k! correctly rounded to double-double (relative 2^-106). Truncation:
//     |s|^9/9! < 2^-108, |s|^10/10! < 2^-121.
//  4. cos u = C_j cos s - S_j sin s, sin u = S_j cos s + C_j sin s with C_j, S_j = cos, sin(j/512) to
//     double-double (2^-106); sin r = sign sin u; then the quadrant k mod 4, and the attention factor.
// Double-double operations (Joldes, Muller, Popescu, "Tight and rigorous error bounds for basic building
// blocks of double-word arithmetic", ACM TOMS 2017): dd_add is AccurateDWPlusDW (relative error
// <= 3u^2/(1 - 4u), u = 2^-53), dd_mul DWTimesDW3 (<= 5u^2; 4u^2 by Muller and Rideau 2022), dd_mul_d
// DWTimesFP3 (<= 2u^2); every operand here is <= 1 in magnitude except the attention factor's product. Each
// operation thus errs by <= 5u^2 < 2^-103 times its result's magnitude; in Horner the earlier errors shrink by
// |z| <= 2^-20 per step, so each polynomial is within 2^-102 (coefficients and roundings), sin s within
// 2^-108 (plus its truncation), and each of the two products and the sum in step 4 adds <= 2^-103 + 2^-106:
// |error| < 2^-100 for
// cos r and sin r. The bound used is 2^-92 (256x that), plus the reduction's and the angle's errors (cos and
// sin are 1-Lipschitz), times the attention factor af, plus af 2^-103 for the product by af:
//   err = af (angle_err + |k| 2^-256 + 2^-105 + 2^-92)(1 + 2^-40) + af 2^-103 + 2^-1060.
// tests/test_reference.cpp (FastTrigAgreesWithMpfr...) checks it against MPFR on hard angles.
struct DD {
  double hi, lo;
};
inline DD dd_two_sum(double a, double b) {
  const double s = a + b, bb = s - a;
  return {s, (a - (s - bb)) + (b - bb)};
}
inline DD dd_fast_two_sum(double a, double b) {  // |a| >= |b| (or a == 0)
  const double s = a + b;
  return {s, b - (s - a)};
}
inline DD dd_two_prod(double a, double b) {
  const double p = a * b;
  return {p, std::fma(a, b, -p)};
}
inline DD dd_add(DD x, DD y) {
  const DD s = dd_two_sum(x.hi, y.hi), t = dd_two_sum(x.lo, y.lo);
  const DD v = dd_fast_two_sum(s.hi, s.lo + t.hi);
  return dd_fast_two_sum(v.hi, t.lo + v.lo);
}
inline DD dd_mul(DD x, DD y) {
  const DD c = dd_two_prod(x.hi, y.hi);
  const double tl1 = std::fma(x.hi, y.lo, x.lo * y.lo);
  const double cl2 = std::fma(x.lo, y.hi, tl1);
  return dd_fast_two_sum(c.hi, c.lo + cl2);
}
inline DD dd_mul_d(DD x, double y) {
  const DD c = dd_two_prod(x.hi, y);
  return dd_fast_two_sum(c.hi, std::fma(x.lo, y, c.lo));
}
inline DD dd_neg(DD x) { return {-x.hi, -x.lo}; }

DD dd_of(mpfr_srcptr v, Num& tmp) {
  DD d;
  d.hi = mpfr_get_d(v, MPFR_RNDN);
  mpfr_sub_d(tmp.p(), v, d.hi, MPFR_RNDN);  // exact at tmp's precision (>= v's)
  d.lo = mpfr_get_d(tmp.p(), MPFR_RNDN);
  return d;
}

constexpr mpfr_prec_t kPiBits = 256;     // pi/2 for the reduction
constexpr mpfr_prec_t kReducedBits = 160;  // the reduced angle r
constexpr double kDdTrigErr = 0x1p-92;     // cos r, sin r in double-double (< 2^-100 derived above)

// The constants of the double-double path, computed once with MPFR at 256 bits.
struct DdTrigConstants {
  Num half_pi{kPiBits};
  double half_pi_d[3];          // pi/2 as C1 + C2 + C3, each the nearest double to what is left
  DD sin_coef[4], cos_coef[5];  // (-1)^k / (2k+1)!, (-1)^k / (2k)!
  DD cos_j[513], sin_j[513];    // cos, sin(j/512)
  DdTrigConstants() {
    Num t(kPiBits), u(kPiBits), tmp(kPiBits);
    mpfr_const_pi(half_pi.p(), MPFR_RNDN);
    mpfr_div_2ui(half_pi.p(), half_pi.p(), 1, MPFR_RNDN);  // exact
    mpfr_set(t.p(), half_pi.p(), MPFR_RNDN);
    for (double& c : half_pi_d) {
      c = mpfr_get_d(t.p(), MPFR_RNDN);
      mpfr_sub_d(t.p(), t.p(), c, MPFR_RNDN);  // exact at 256 bits
    }
    mpfr_set_ui(t.p(), 1, MPFR_RNDN);                       // t = 1/n!
    for (unsigned n = 0; n <= 8; ++n) {
      if (n > 0) mpfr_div_ui(t.p(), t.p(), n, MPFR_RNDN);
      mpfr_set(u.p(), t.p(), MPFR_RNDN);
      if ((n / 2) % 2 == 1) mpfr_neg(u.p(), u.p(), MPFR_RNDN);
      if (n % 2 == 0 && n / 2 < 5) cos_coef[n / 2] = dd_of(u.p(), tmp);
      if (n % 2 == 1 && n / 2 < 4) sin_coef[n / 2] = dd_of(u.p(), tmp);
    }
    for (int j = 0; j <= 512; ++j) {
      mpfr_set_si(t.p(), j, MPFR_RNDN);
      mpfr_div_2ui(t.p(), t.p(), 9, MPFR_RNDN);  // j/512, exact
      mpfr_sin_cos(u.p(), tmp.p(), t.p(), MPFR_RNDN);
      cos_j[j] = dd_of(tmp.p(), t);
      sin_j[j] = dd_of(u.p(), t);
    }
  }
};

const DdTrigConstants& dd_trig_constants() {
  thread_local const DdTrigConstants k;  // MPFR numbers are per thread like the rest of the reference
  return k;
}

// Scratch MPFR numbers of the reduction, reused for every pair of a call.
struct ReduceScratch {
  Num t{kPiBits + 64}, r{kReducedBits}, tmp{kReducedBits};
};

// cos and sin of the working angle A (|A - angle| <= angle_err) times af, as a FastTrig; false when the
// double-double path does not apply (|A| outside [2^-800, 2^40), af outside [2^-512, 2^512], a non-finite
// product) and MPFR computes them. The bound's last term covers underflow in the products by af (each
// operation's error term is then at most 2^-1075 absolute).
constexpr double kTwoOverPi = 0x1.45f306dc9c883p-1, kShift = 0x1.8p52;

// cos and sin of A = k pi/2 + r, r = rh + rl (|rh| <= 1, normalized) within red_err of A - k pi/2, times af:
// steps 2-4 above. False when r is out of the table's range or a product is not finite.
bool dd_eval(double k, DD r, double angle_err, double red_err, double af, FastTrig& out) {
  const DdTrigConstants& K = dd_trig_constants();
  if (!(std::fabs(r.hi) >= 0x1p-800 && std::fabs(r.hi) <= 1.0)) return false;
  const double sign = r.hi < 0 ? -1.0 : 1.0;
  const double uh = std::fabs(r.hi), ul = sign * r.lo;
  const double j = (uh * 512 + kShift) - kShift;  // nearest integer
  const int ji = int(j);
  const DD sv = dd_two_sum(uh - j * 0x1p-9, ul);  // uh - j/512 exact (Sterbenz)
  const DD z = dd_mul(sv, sv);
  DD ps = K.sin_coef[3];
  for (int n = 2; n >= 0; --n) ps = dd_add(dd_mul(ps, z), K.sin_coef[n]);
  DD pc = K.cos_coef[4];
  for (int n = 3; n >= 0; --n) pc = dd_add(dd_mul(pc, z), K.cos_coef[n]);
  const DD sin_s = dd_mul(sv, ps), cos_s = pc;
  const DD cu = dd_add(dd_mul(K.cos_j[ji], cos_s), dd_neg(dd_mul(K.sin_j[ji], sin_s)));
  DD su = dd_add(dd_mul(K.sin_j[ji], cos_s), dd_mul(K.cos_j[ji], sin_s));
  if (sign < 0) su = dd_neg(su);
  DD cs, sn;
  switch (int64_t(k) & 3) {
    case 0: cs = cu, sn = su; break;
    case 1: cs = dd_neg(su), sn = cu; break;
    case 2: cs = dd_neg(cu), sn = dd_neg(su); break;
    default: cs = su, sn = dd_neg(cu); break;
  }
  if (af != 1.0) {
    cs = dd_mul_d(cs, af);
    sn = dd_mul_d(sn, af);
  }
  if (!(std::isfinite(cs.hi) && std::isfinite(cs.lo) && std::isfinite(sn.hi) && std::isfinite(sn.lo))) return false;
  out = {cs.hi, cs.lo, sn.hi, sn.lo,
         af * (angle_err + red_err + kDdTrigErr) * (1 + 0x1p-40) + af * 0x1p-103 + 0x1p-1060};
  return true;
}

// Step 1 in MPFR, from the working angle A (|A - angle| <= angle_err).
bool dd_cos_sin(mpfr_srcptr A, double angle_err, double af, ReduceScratch& rs, FastTrig& out) {
  const DdTrigConstants& K = dd_trig_constants();
  if (!(af >= 0x1p-512 && af <= 0x1p512)) return false;
  const double ah = mpfr_get_d(A, MPFR_RNDN);
  if (!(std::fabs(ah) >= 0x1p-800 && std::fabs(ah) < 0x1p40)) return false;
  const double k = (ah * kTwoOverPi + kShift) - kShift;  // nearest integer (|ah 2/pi| < 2^51)
  if (k == 0) {
    mpfr_set(rs.r.p(), A, MPFR_RNDN);
  } else {
    mpfr_mul_si(rs.t.p(), K.half_pi.p(), long(k), MPFR_RNDN);  // exact: 256 + 41 bits
    mpfr_sub(rs.r.p(), A, rs.t.p(), MPFR_RNDN);
  }
  return dd_eval(k, dd_of(rs.r.p(), rs.tmp), angle_err, std::fabs(k) * 0x1p-256 + 0x1p-105, af, out);
}

// a + b as a double-double, AccurateDWPlusFP (JMP17 Algorithm 4: relative error <= 2u^2).
inline DD dd_add_d(DD x, double y) {
  const DD s = dd_two_sum(x.hi, y);
  return dd_fast_two_sum(s.hi, x.lo + s.lo);
}

// The whole first pass in double arithmetic, from an angle given as a double-double A = ah + al (normalized)
// with |A - angle| <= angle_err:
//  1'. k = the integer nearest fl(ah fl(2/pi)) (|ah| < 2^40); pi/2 = C1 + C2 + C3 + d (each C the next 53 bits,
//      |d| < 2^-158); k C1 = P1 + E1 and k C2 = P2 + E2 exactly (TwoProduct by fma, |k| < 2^41), ah - P1 =
//      T + Te exactly (TwoSum); r = (T + al) - E1 - P2 - E2 - Te - fl(k C3) summed by TwoSum and DWPlusFP
//      (relative 2u^2 each, on partial sums below 2): |r - (A - k pi/2)| <= |k| 2^-158 + 2^-120 (fl(k C3)) +
//      2^-101 (the five additions) + angle_err, taken as |k| 2^-158 + 2^-100.
//  2-4. dd_eval.
bool dd_cos_sin_of_dd(DD A, double angle_err, double af, FastTrig& out) {
  const DdTrigConstants& K = dd_trig_constants();
  if (!(af >= 0x1p-512 && af <= 0x1p512)) return false;
  if (!(std::fabs(A.hi) >= 0x1p-800 && std::fabs(A.hi) < 0x1p40)) return false;
  const double k = (A.hi * kTwoOverPi + kShift) - kShift;
  DD r;
  if (k == 0) {
    r = A;
  } else {
    const DD p1 = dd_two_prod(k, K.half_pi_d[0]), p2 = dd_two_prod(k, K.half_pi_d[1]);
    const DD t = dd_two_sum(A.hi, -p1.hi);
    r = dd_two_sum(t.hi, A.lo);
    r = dd_add_d(r, -p1.lo);
    r = dd_add_d(r, -p2.hi);
    r = dd_add_d(r, -p2.lo);
    r = dd_add_d(r, t.lo);
    r = dd_add_d(r, -(k * K.half_pi_d[2]));
  }
  return dd_eval(k, r, angle_err, std::fabs(k) * 0x1p-158 + 0x1p-100, af, out);
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
    in.pair = i;
    if (c_.table) {
      // cos and sin, or the angle, from the table (compute_trig, working_angle)
    } else if (opt_.angle_model == AngleModel::exact) {
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

ThetaProbe theta_probe(const RopeCase& c, uint32_t pair, unsigned bits) {
  ThetaProbe p;
  Num th{mpfr_prec_t(bits)}, rest{mpfr_prec_t(bits) + 64};
  p.units = theta(c, pair, th, mpfr_prec_t(bits));
  p.exponent = mpfr_zero_p(th.p()) ? 0 : int(mpfr_get_exp(th.p()));
  mpfr_mul_2si(rest.p(), th.p(), -p.exponent, MPFR_RNDN);  // exact: in [1/2, 1)
  while (!mpfr_zero_p(rest.p())) {
    p.parts.push_back(mpfr_get_d(rest.p(), MPFR_RNDN));
    mpfr_sub_d(rest.p(), rest.p(), p.parts.back(), MPFR_RNDN);  // exact
  }
  return p;
}

std::string_view to_string(TablePipeline p) {
  return p == TablePipeline::correctly_rounded ? "correctly-rounded" : "conventional-f32";
}

namespace {

// v rounded to nearest even into d (through f32: exact for v a float; a float rounded once more for f16/bf16).
double to_dtype(Dtype d, float v) {
  unsigned char b[4];
  store_f32(d, b, 0, v);
  return double(load_f32(d, b, 0));
}

// cos and sin of an exact angle `a` (a double), each correctly rounded to f32 (Ziv: more bits until decided).
void cos_sin_f32(double a, float& cs, float& sn) {
  const Fmt f = fmt_of(Dtype::f32);
  for (mpfr_prec_t P = 128;; P *= 2) {
    Num A(53), C(P), S(P);
    mpfr_set_d(A.p(), a, MPFR_RNDN);  // exact
    mpfr_sin_cos(S.p(), C.p(), A.p(), MPFR_RNDN);
    Scratch sc(P);
    double c = 0, s = 0;
    const double ulp = std::ldexp(1.0, -int(P));
    // A zero cos or sin of a nonzero double angle cannot happen (pi/2 is irrational); sin(0) = 0 exactly.
    if (round_mpfr(f, C.p(), std::fabs(mpfr_get_d(C.p(), MPFR_RNDA)) * ulp, sc, c) &&
        (a == 0 || round_mpfr(f, S.p(), std::fabs(mpfr_get_d(S.p(), MPFR_RNDA)) * ulp, sc, s))) {
      cs = float(c);
      sn = a == 0 ? 0.0f : float(s);
      return;
    }
    if (P >= mpfr_prec_t(kMaxBits)) throw std::runtime_error("build_table: cos/sin rounding undecided at " +
                                                              std::to_string(P) + " bits for angle " + hexfloat(a));
  }
}

}  // namespace

CosSinTable build_table(const RopeCase& c, TableKind kind, Dtype dtype, size_t rows, TablePipeline p) {
  std::vector<int64_t> row_positions(rows);
  for (size_t r = 0; r < rows; ++r) row_positions[r] = int64_t(r);
  return build_table_rows(c, kind, dtype, row_positions, p);
}

CosSinTable build_table_rows(const RopeCase& c, TableKind kind, Dtype dtype, const std::vector<int64_t>& row_positions,
                             TablePipeline p) {
  if (c.table) throw std::invalid_argument("build_table: the case already has a table");
  const size_t rows = row_positions.size();
  RopeCase probe = c;  // validate the angle fields with positions inside the rows (how the call is passed aside)
  probe.tensor.reset();
  probe.positions.assign(probe.n_pos_axes, 0);
  probe.input.assign(probe.n_bytes(), 0);
  if (std::string why = probe.validate(); !why.empty()) throw std::invalid_argument("build_table: " + why);
  const uint32_t np = c.rotary_dim / 2;
  CosSinTable t;
  t.kind = kind;
  t.dtype = kind == TableKind::angle ? Dtype::f32 : dtype;
  t.rows = rows;
  t.cos.reserve(rows * np);
  if (kind != TableKind::angle) t.sin.reserve(rows * np);
  ReferenceOptions opt;
  Driver drv(probe, opt);
  const Fmt fd = fmt_of(t.dtype);
  // A row's values depend on its position alone: a position repeated (with_given_table repeats each one in a
  // misplaced row) copies the row computed first.
  std::unordered_map<int64_t, size_t> first_row;
  for (size_t r = 0; r < rows; ++r) {
    if (auto [it, fresh] = first_row.try_emplace(row_positions[r], r); !fresh) {
      const size_t from = it->second * np;
      for (uint32_t i = 0; i < np; ++i) t.cos.push_back(t.cos[from + i]);
      if (kind != TableKind::angle)
        for (uint32_t i = 0; i < np; ++i) t.sin.push_back(t.sin[from + i]);
      continue;
    }
    for (uint32_t i = 0; i < np; ++i) {
      const int64_t m = row_positions[r];
      if (p == TablePipeline::conventional_f32) {
        const float a = fp32_model_angle(c, i, m);
        if (kind == TableKind::angle) {
          t.cos.push_back(double(a));
          continue;
        }
        float cs, sn;
        cos_sin_f32(double(a), cs, sn);
        if (c.attention_factor != 1.0) {
          const volatile float af = float(c.attention_factor);
          cs = cs * af;
          sn = sn * af;
        }
        t.cos.push_back(to_dtype(t.dtype, cs));
        t.sin.push_back(to_dtype(t.dtype, sn));
        continue;
      }
      // correctly rounded: Ziv over the reference's stages
      for (size_t k = 0;; ++k) {
        Scratch& sc = drv.scratch(k);
        if (kind == TableKind::angle) {
          Num angle(drv.bits(k)), ms(kExactBits), th(drv.bits(k));
          AngleInputs in;
          in.pair = i;
          in.theta_units = theta(probe, i, th, drv.bits(k));
          in.theta = &th;
          const double err = working_angle(probe, opt, m, in, drv.bits(k), angle, ms);
          double v;
          if (round_mpfr(fd, angle.p(), err, sc, v)) {
            t.cos.push_back(v);
            break;
          }
        } else {
          Trig tr(drv.bits(k));
          drv.trig_at(i, m, k, tr);
          double cv, sv;
          if (round_mpfr(fd, tr.c.p(), tr.err_c, sc, cv) && round_mpfr(fd, tr.s.p(), tr.err_s, sc, sv)) {
            t.cos.push_back(cv == 0 ? 0.0 : cv);  // (a zero is +0: cos or sin of an exact zero angle)
            t.sin.push_back(sv == 0 ? 0.0 : sv);
            break;
          }
        }
        if (drv.bits(k) >= mpfr_prec_t(kMaxBits))
          throw std::runtime_error("build_table: rounding undecided for pair " + std::to_string(i) + " row " +
                                   std::to_string(r) + " of " + c.summary());
      }
    }
  }
  return t;
}

std::optional<RopeCase> with_given_table(const RopeCase& c, TableKind kind, Dtype dtype, TablePipeline p,
                                         std::string* why, GivenRows given_rows) {
  auto no = [&](const char* w) {
    if (why) *why = w;
    return std::nullopt;
  };
  if (c.table) return no("the case has a table already");
  // The call with its table: the angle fields a table replaces take their neutral values; the attention factor
  // is in a cos/sin table's values (an angle table leaves it to the kernel).
  auto with_table = [&](RopeCase t, const std::vector<int64_t>& row_positions) {
    t.table = build_table_rows(c, kind, dtype, row_positions, p);
    t.base = 10000.0;
    t.position_scale = 1.0;
    t.inv_freq.clear();
    t.freq_rule.reset();
    t.rule_seq_len = 0;
    if (kind != TableKind::angle) t.attention_factor = 1.0;
    return t;
  };
  if (c.n_pos_axes != 1 || !c.pair_axis.empty()) return no("a table has one row per position: one position axis only");
  if (given_rows != GivenRows::renumbered) {
    // The positions as they are: a row per distinct position kept (the others not there), laid out by position
    // (sparse) or per token.
    std::vector<int64_t> distinct = c.positions;
    std::sort(distinct.begin(), distinct.end());
    distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
    if (distinct.empty() || distinct.front() < 0) return no("a table has no rows of negative positions");
    RopeCase t = with_table(c, distinct);
    t.table->stored = distinct;
    t.table->rows = size_t(distinct.back()) + 1;
    t.table->by_token = given_rows == GivenRows::by_token;
    return t;
  }
  if (c.tensor && c.tensor->pos == PositionForm::implicit) {
    // Implicit positions (token s of sequence b at s + seq_offsets[b]) stay implicit: each sequence gets an offset
    // of its own into the table, the sequences' rows in the opposite order to the sequences, one row of another
    // position between them, the table ending with a row the call reads; without offsets (every sequence from 0)
    // the rows are the positions themselves.
    const TensorCall& tc = *c.tensor;
    const uint64_t T = c.n_tokens();
    std::vector<uint64_t> start, len;  // each sequence's first token and length
    if (tc.rank == 4) {
      for (uint64_t b = 0; b < tc.batch; ++b) {
        start.push_back(b * (T / tc.batch));
        len.push_back(T / tc.batch);
      }
    } else if (!tc.cu_seqlens.empty()) {
      for (size_t b = 0; b + 1 < tc.cu_seqlens.size(); ++b) {
        start.push_back(uint64_t(tc.cu_seqlens[b]));
        len.push_back(uint64_t(tc.cu_seqlens[b + 1] - tc.cu_seqlens[b]));
      }
    } else {
      start.push_back(0);
      len.push_back(T);
    }
    RopeCase t = c;
    std::vector<int64_t> row_positions;
    if (tc.seq_offsets.empty()) {
      uint64_t longest = 0;
      for (uint64_t n : len) longest = std::max(longest, n);
      for (uint64_t r = 0; r < std::max<uint64_t>(longest, 1); ++r) row_positions.push_back(int64_t(r));
    } else {
      std::vector<int64_t> offsets(start.size());
      row_positions.push_back(c.positions.empty() ? 0 : c.positions.front());  // row 0: a real row, misplaced
      for (size_t b = start.size(); b-- > 0;) {
        offsets[b] = int64_t(row_positions.size());
        for (uint64_t k = 0; k < len[b]; ++k) row_positions.push_back(tc.seq_offsets[b] + int64_t(k));
        if (b > 0 || len[b] == 0)  // the row past the sequence's last (the table ends with sequence 0's last row)
          row_positions.push_back(tc.seq_offsets[b] + int64_t(len[b]));
      }
      for (size_t b = 0; b < start.size(); ++b)
        for (uint64_t k = 0; k < len[b]; ++k) t.positions[start[b] + k] = offsets[b] + int64_t(k);
      t.tensor->seq_offsets = offsets;
    }
    return with_table(std::move(t), row_positions);
  }
  // The distinct positions, ascending; position p_k gets row 2(n-1-k)+1 (descending odd rows), so that rows and
  // positions run in opposite directions and a kernel that indexes the table by anything but the position (the
  // token, the position's low bits, the row before) reads another position's values. Each even row 2j repeats
  // the row of p_{j mod n}: a real row in the wrong place. The last row is p_0's: a row the call reads ends
  // where the table ends (the kernel host places it flush against a guard page in some calls, so a read past
  // a row's end faults).
  std::vector<int64_t> distinct = c.positions;
  std::sort(distinct.begin(), distinct.end());
  distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
  const size_t n = distinct.size();
  std::vector<int64_t> own(n);  // own[k]: the row of distinct[k]
  std::vector<int64_t> row_positions(2 * n);
  for (size_t k = 0; k < n; ++k) {
    own[k] = int64_t(2 * (n - 1 - k) + 1);
    row_positions[size_t(own[k])] = distinct[k];
  }
  for (size_t j = 0; j < n; ++j) row_positions[2 * j] = distinct[j % n];
  RopeCase t = c;
  for (int64_t& m : t.positions)
    m = own[size_t(std::lower_bound(distinct.begin(), distinct.end(), m) - distinct.begin())];
  return with_table(std::move(t), row_positions);
}

void exact_cos_sin(const RopeCase& c, uint32_t pair, int64_t position, double& af_cos, double& af_sin) {
  if (c.table) throw std::invalid_argument("exact_cos_sin: the case's angles come from a table");
  ReferenceOptions opt;
  Driver drv(c, opt);
  Trig tr(drv.bits(0));
  drv.trig_at(pair, position, 0, tr);
  af_cos = mpfr_get_d(tr.c.p(), MPFR_RNDN);
  af_sin = mpfr_get_d(tr.s.p(), MPFR_RNDN);
}

bool dd_cos_sin_of(double angle, double attention_factor, DdCosSin& out, bool mpfr_reduction) {
  FastTrig f;
  if (mpfr_reduction) {
    Num a(53);
    mpfr_set_d(a.p(), angle, MPFR_RNDN);  // exact
    ReduceScratch rs;
    if (!dd_cos_sin(a.p(), 0.0, attention_factor, rs, f)) return false;
  } else if (!dd_cos_sin_of_dd({angle, 0.0}, 0.0, attention_factor, f)) {
    return false;
  }
  out = {f.ch, f.cl, f.sh, f.sl, f.err};
  return true;
}

ReferenceOutput reference_rope(const RopeCase& c, const ReferenceOptions& opt) {
  if (std::string why = c.validate(); !why.empty()) throw std::invalid_argument("reference: " + why);
  if (c.direction == Direction::inverse) {
    // af e^{-j phi} z: the forward rotation by the negated angle, which is exact: the negated sin (or angle) of
    // a table, else the negated positions (the angle m*scale*theta, and the fp32 model's f32(f32(m)*inv), are
    // odd in m). Only m = INT64_MIN has no negation: there, conj(af e^{j phi} conj(z)), the forward rotation of
    // (x0, -x1) with its second output negated (exact too; an exactly zero output may differ in sign from
    // IEEE arithmetic on the negated sin).
    RopeCase f = c;
    f.direction = Direction::forward;
    f.tensor.reset();  // (how the call is passed, not what it computes: its positions are negated below)
    if (f.table) {
      for (double& v : f.table->is_angle() ? f.table->cos : f.table->sin) v = -v;
      return reference_rope(f, opt);
    }
    if (std::find(c.positions.begin(), c.positions.end(), std::numeric_limits<int64_t>::min()) == c.positions.end()) {
      for (int64_t& m : f.positions) m = -m;
      return reference_rope(f, opt);
    }
    auto flip_seconds = [&](Bytes& b) {
      for (size_t t = 0; t < c.n_tokens(); ++t)
        for (size_t h = 0; h < c.n_heads; ++h)
          for (uint32_t i = 0; i < c.rotary_dim / 2; ++i)
            flip_sign_bit(c.dtype, b.data(), head_offset(c, t, h) + pair_elements(c, i).second);
    };
    flip_seconds(f.input);
    ReferenceOutput out = reference_rope(f, opt);
    flip_seconds(out.rounded);
    for (size_t t = 0; t < c.n_tokens(); ++t)
      for (size_t h = 0; h < c.n_heads; ++h)
        for (uint32_t i = 0; i < c.rotary_dim / 2; ++i) {
          double& e = out.exact[head_offset(c, t, h) + pair_elements(c, i).second];
          e = -e;
        }
    return out;
  }
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

  // theta_i (or the f32 inv_freq) once per call: a default table from default_thetas (kept across calls),
  // a rule's table looked up once, a table's entries exact.
  std::shared_ptr<const ThetaTable> table;
  std::vector<Num> own;  // rules and tables: this call's values
  std::vector<AngleInputs> inputs(npairs);
  // For the double-double first pass: theta as hi + lo, and its relative error bound (theta's own, in
  // units of 2^-P, plus the split's 2^-106, taken as 2^-105).
  std::vector<DD> theta_dd(opt.angle_model == AngleModel::exact ? npairs : 0);
  std::vector<double> theta_rel(theta_dd.size());
  const double ulp_p = std::ldexp(1.0, -int(P));
  for (uint32_t i = 0; i < npairs; ++i) inputs[i].pair = i;
  if (c.table) {
    // The table's values are the angles or cos and sin: no theta.
  } else if (opt.angle_model == AngleModel::exact) {
    if (c.inv_freq.empty() && !c.freq_rule) {
      table = default_thetas(c.base, c.rotary_dim, P);
      for (uint32_t i = 0; i < npairs; ++i) {
        inputs[i] = {&table->theta[i], table->units[i], 0, i};
        theta_dd[i] = {table->hi[i], table->lo[i]};
        theta_rel[i] = table->units[i] * ulp_p + 0x1p-105;
      }
    } else {
      own.reserve(npairs);
      const FrequencyTable* rule =
          c.freq_rule ? &rule_table(c, std::max<unsigned>(kDefaultRuleBits, unsigned(P) + 64)) : nullptr;
      Num split_tmp(std::max<mpfr_prec_t>(P, kExactBits));
      for (uint32_t i = 0; i < npairs; ++i) {
        if (rule) {  // as theta(): the rule's value 64 bits beyond P, rounded once
          own.emplace_back(P);
          mpfr_set(own.back().p(), rule->theta[i].backend().data(), MPFR_RNDN);
          inputs[i] = {&own.back(), 2.0, 0, i};
          theta_dd[i] = dd_of(own.back().p(), split_tmp);
          theta_rel[i] = 2.0 * ulp_p + 0x1p-105;
        } else {
          own.emplace_back(kExactBits);
          mpfr_set_d(own.back().p(), c.inv_freq[i], MPFR_RNDN);  // exact
          inputs[i] = {&own.back(), 0.0, 0, i};
          theta_dd[i] = {c.inv_freq[i], 0.0};
          theta_rel[i] = 0;
        }
      }
    }
  } else {
    for (uint32_t i = 0; i < npairs; ++i) inputs[i].inv_f32 = fp32_inv_freq(c, i);
  }

  // cos/sin once per (distinct positions of the token, pair), shared by all heads. A token's key is its
  // position on every axis: row_of[t] is its row of pair values.
  const size_t n_tok = c.n_tokens();
  std::vector<size_t> row_of(n_tok), order(n_tok);
  for (size_t t = 0; t < n_tok; ++t) order[t] = t;
  auto key_less = [&](size_t a, size_t b) {
    for (uint32_t ax = 0; ax < c.n_pos_axes; ++ax)
      if (c.position(a, ax) != c.position(b, ax)) return c.position(a, ax) < c.position(b, ax);
    return a < b;
  };
  auto same_key = [&](size_t a, size_t b) {
    for (uint32_t ax = 0; ax < c.n_pos_axes; ++ax)
      if (c.position(a, ax) != c.position(b, ax)) return false;
    return true;
  };
  std::sort(order.begin(), order.end(), key_less);
  size_t n_rows = 0;
  std::vector<size_t> first_of_row;  // the first token of each row (rows numbered in token order below)
  {
    std::vector<size_t> group(n_tok);  // sorted position -> group id
    for (size_t k = 0; k < n_tok; ++k) group[k] = k > 0 && same_key(order[k - 1], order[k]) ? group[k - 1] : k;
    std::vector<size_t> row_of_group(n_tok, SIZE_MAX);
    std::vector<size_t> group_of(n_tok);
    for (size_t k = 0; k < n_tok; ++k) group_of[order[k]] = group[k];
    for (size_t t = 0; t < n_tok; ++t) {
      size_t& r = row_of_group[group_of[t]];
      if (r == SIZE_MAX) {
        r = n_rows++;
        first_of_row.push_back(t);
      }
      row_of[t] = r;
    }
  }

  // Per (row, pair): the double-double cos/sin (FastTrig; for the pairs MPFR computed, their split), and the
  // stage-0 MPFR Trig when it was needed (made on demand: fast_path decides most pairs without it).
  struct PairTrig {
    FastTrig f{};
    double abs_angle = 0;
    bool zero_angle = false;       // the identity: bits copied
    bool nonfinite_angle = false;  // fp32 model: an f32 angle of +-Inf
    bool exact_trig = false;       // cos, sin exact (a zero angle times the attention factor)
    int64_t m = 0;
    std::unique_ptr<Trig> mp;
  };
  std::vector<PairTrig> trig(n_rows * npairs);
  Num tmp(P), angle(P), ms(kExactBits);
  ReduceScratch rs;
  const double af = c.attention_factor;
  auto make_mpfr = [&](PairTrig& pt, uint32_t i) -> const Trig& {
    if (!pt.mp) {
      pt.mp = std::make_unique<Trig>(P);
      compute_trig(c, opt, pt.m, inputs[i], P, *pt.mp);
      ++out.mpfr_trig;
    }
    return *pt.mp;
  };
  // The first pass without MPFR: the angle in double-double (m exactly as hi + lo, times the scale and
  // theta_i by DWTimesFP3 and DWTimesDW3: relative 2u^2 + 5u^2 < 2^-102 on top of theta's own error), its
  // rounding to double decided as the MPFR angle's would be (else the MPFR angle is made), then
  // dd_cos_sin_of_dd. Position 0, scale 0 or a zero theta: the exact zero angle. False: not applicable here.
  auto first_pass_dd = [&](PairTrig& pt, uint32_t i) -> bool {
    DD A;
    double angle_err = 0;
    if (c.table && !c.table->is_angle()) {  // cos and sin exactly as given
      const double cv = c.table->cos_at(size_t(pt.m), i, npairs), sv = c.table->sin_at(size_t(pt.m), i, npairs);
      pt.abs_angle = std::fabs(std::atan2(sv, cv));
      pt.zero_angle = cv == 1.0 && sv == 0.0;
      pt.exact_trig = true;
      pt.f = {cv, 0, sv, 0, 0};
      return true;
    }
    if (c.table) {  // an angle table: the angle exactly as given
      A = {c.table->cos_at(size_t(pt.m), i, npairs), 0.0};
    } else if (opt.angle_model == AngleModel::fp32) {
      const float a = fp32_angle_from_inv(c, inputs[i].inv_f32, pt.m);
      if (!std::isfinite(a)) return false;
      A = {double(a), 0.0};
    } else {
      if (pt.m <= -(int64_t(1) << 62) || pt.m >= (int64_t(1) << 62)) return false;
      const double mh = double(pt.m);
      DD M{mh, double(pt.m - int64_t(mh))};  // exact
      double rel = theta_rel[i];
      if (c.position_scale != 1.0) {
        M = dd_mul_d(M, c.position_scale);
        rel += 0x1p-105;
      }
      const DD th = theta_dd[i];
      if (M.hi == 0 || th.hi == 0) {
        A = {0.0, 0.0};
      } else {
        const double am = std::fabs(M.hi), at = std::fabs(th.hi);
        if (!(am >= 0x1p-500 && am <= 0x1p500 && at >= 0x1p-500 && at <= 0x1p500)) return false;
        A = dd_mul(M, th);
        angle_err = std::fabs(A.hi) * (rel + 0x1p-102) * (1 + 0x1p-50);
      }
    }
    if (A.hi == 0) {  // cos = af, sin = +0 exactly
      pt.abs_angle = 0;
      pt.zero_angle = af == 1.0;
      pt.exact_trig = true;
      pt.f = {af, 0, 0, 0, 0};
      return true;
    }
    // |angle| to double as the MPFR angle (within |angle| (units + 1) 2^-P of it) rounds.
    double rounded;
    if (!decide_dd(kDouble, A.hi, A.lo, 2 * angle_err + std::fabs(A.hi) * 4 * ulp_p, rounded)) return false;
    if (!dd_cos_sin_of_dd(A, angle_err, af, pt.f)) return false;
    pt.abs_angle = std::fabs(rounded);
    ++out.dd_trig;
    return true;
  };
  for (size_t row = 0; row < n_rows; ++row) {
    const size_t t = first_of_row[row];
    for (uint32_t i = 0; i < npairs; ++i) {
      PairTrig& pt = trig[row * npairs + i];
      pt.m = c.pair_position(t, i);
      if (opt.fast_path && first_pass_dd(pt, i)) continue;
      if (opt.fast_path) {
        const double angle_err = working_angle(c, opt, pt.m, inputs[i], P, angle, ms);
        pt.abs_angle = std::fabs(mpfr_get_d(angle.p(), MPFR_RNDN));
        if (!mpfr_number_p(angle.p())) {  // cos(+-Inf), sin(+-Inf) are NaN
          pt.nonfinite_angle = true;
          const double nan = std::numeric_limits<double>::quiet_NaN();
          pt.f = {nan, nan, nan, nan, 0};
          continue;
        }
        if (mpfr_zero_p(angle.p())) {  // cos = af, sin = +0 exactly
          pt.zero_angle = af == 1.0;
          pt.exact_trig = true;
          pt.f = {af, 0, 0, 0, 0};
          continue;
        }
        if (dd_cos_sin(angle.p(), angle_err, af, rs, pt.f)) {
          ++out.dd_trig;
          continue;
        }
      }
      const Trig& tr = make_mpfr(pt, i);
      pt.abs_angle = tr.abs_angle;
      pt.zero_angle = tr.zero_angle;
      pt.nonfinite_angle = tr.nonfinite_angle;
      pt.exact_trig = tr.err_c == 0 && tr.err_s == 0;
      pt.f = split(tr, tmp);
    }
  }

  Scratch& s0 = drv.scratch(0);
  for (size_t t = 0; t < n_tok; ++t) {
    PairTrig* row = &trig[row_of[t] * npairs];
    for (uint32_t i = 0; i < npairs; ++i) out.angle[t * npairs + i] = row[i].abs_angle;
    for (size_t h = 0; h < c.n_heads; ++h) {
      const size_t base = head_offset(c, t, h);
      for (uint32_t i = 0; i < npairs; ++i) {
        PairTrig& pt = row[i];
        if (pt.zero_angle) continue;  // identity: bits already copied
        const int64_t m = pt.m;
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
        if (pt.nonfinite_angle || std::isinf(x0) || std::isinf(x1) || (x0 == 0 && x1 == 0)) {
          // Only the signs (and nonzero-ness) of cos and sin matter here; make sure they are certain
          // (they are when cos and sin are exact: a zero angle scaled by the attention factor).
          double cd = pt.f.ch, sd = pt.f.sh;
          if (!pt.nonfinite_angle && !pt.exact_trig && !(std::fabs(cd) > 2 * pt.f.err && std::fabs(sd) > 2 * pt.f.err)) {
            const Trig& tr = make_mpfr(pt, i);
            cd = mpfr_get_d(tr.c.p(), MPFR_RNDN);
            sd = mpfr_get_d(tr.s.p(), MPFR_RNDN);
            if (!(std::fabs(cd) > 2 * tr.err_c && std::fabs(sd) > 2 * tr.err_s)) drv.signs(i, m, cd, sd);
          }
          rotate_ieee(x0, x1, cd, sd, o);
        } else if (!(opt.fast_path && fast_rotate(drv.fmt(), x0, x1, pt.f, o))) {
          ++out.mpfr_pairs;
          const Rounded r = rotate_mpfr(drv.fmt(), x0, x1, make_mpfr(pt, i), s0, o);
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
