// The exact reference (reference/reference.hpp), checked against an
// independent computation written here: Boost's cpp_bin_float at 400 bits
// (no MPFR), its own argument reduction and its own rounding to f32/f16/bf16
// and to double. Plus identities, closed-form angles, inputs constructed to
// land next to rounding boundaries (driving the Ziv retries), special values,
// the fp32 angle model, and invalid cases.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <boost/math/constants/constants.hpp>
#include <boost/multiprecision/cpp_bin_float.hpp>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <limits>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/rope_case.hpp"
#include "reference/frequency_rules.hpp"
#include "reference/reference.hpp"
#include "impls/registry.hpp"
#include "properties/judge.hpp"
#include "properties/promise.hpp"
#include "tests/random_cases.hpp"

using namespace ropecheck;
using namespace ropecheck::testing;

namespace {

namespace mp = boost::multiprecision;
using HP = mp::number<mp::cpp_bin_float<400, mp::digit_base_2>, mp::et_off>;

// ---- independent rounding -----------------------------------------------------

struct Fmt {
  int p, emin;
  double max_finite;
};
Fmt fmt(Dtype d) {
  const Format f = format_of(d);
  return {f.precision, f.emin, f.max_finite()};
}
const Fmt kDbl{53, -1022, std::numeric_limits<double>::max()};

// Round a nonzero HP to the format, nearest even, IEEE subnormals and overflow.
// `margin` receives the distance to the nearest rounding boundary, in quanta.
double round_hp(const HP& y, const Fmt& f, double* margin = nullptr) {
  if (y == 0) throw std::logic_error("round_hp: zero");
  int e2;
  (void)frexp(y, &e2);  // |y| = m 2^e2, m in [1/2, 1)
  const int E = e2 - 1;
  const int q = std::max(E, f.emin) - (f.p - 1);
  const HP t = ldexp(y, -q);
  const HP fl = floor(t);
  const HP frac = t - fl;  // [0, 1)
  HP k;
  if (frac > HP(0.5)) k = fl + 1;
  else if (frac < HP(0.5)) k = fl;
  else k = (fmod(fl, HP(2)) == 0) ? fl : fl + 1;
  if (margin) *margin = std::fabs(static_cast<double>(frac - HP(0.5)));
  double v = std::ldexp(static_cast<double>(k), q);  // k has <= p+1 bits: exact
  if (std::fabs(v) > f.max_finite) v = std::copysign(INFINITY, static_cast<double>(y));
  if (v == 0) v = y < 0 ? -0.0 : 0.0;
  return v;
}

uint32_t to_bits(Dtype d, double v) { return double_to_bits_exact(d, v); }

// ---- independent RoPE ---------------------------------------------------------

const HP& two_pi() {
  static const HP v = 2 * boost::math::constants::pi<HP>();
  return v;
}

// The fp32 model, emulated in plain float; pow correctly rounded via HP.
float emulated_fp32_angle(const RopeCase& c, uint32_t i, int64_t m) {
  float inv;
  if (!c.inv_freq.empty()) {
    inv = float(c.inv_freq[i]);
  } else {
    const float e = float(2 * i) / float(c.rotary_dim);
    const HP p = pow(HP(float(c.base)), HP(e));
    const float pf = float(round_hp(p, fmt(Dtype::f32)));
    inv = 1.0f / pf;
  }
  float mf = float(m);
  if (c.position_scale != 1.0) mf = mf * float(c.position_scale);
  return mf * inv;
}

// theta_i of a frequency rule: the one input taken from ropecheck (evaluate_frequency_rule at 400 bits; the
// rules themselves are checked against an independent mpmath implementation in test_frequency_rules).
HP rule_theta_hp(const RopeCase& c, uint32_t i) {
  const FrequencyTable t = evaluate_frequency_rule(
      *c.freq_rule, c.rotary_dim, c.base, c.rule_seq_len ? std::optional<uint64_t>(c.rule_seq_len) : std::nullopt, 420);
  return HP(t.theta[i].str(0, std::ios_base::scientific));
}

HP exact_angle_hp(const RopeCase& c, uint32_t i, int64_t m, AngleModel model) {
  if (model == AngleModel::fp32) return HP(emulated_fp32_angle(c, i, m));
  const HP th = c.freq_rule          ? rule_theta_hp(c, i)
                : c.inv_freq.empty() ? pow(HP(c.base), HP(-2 * int64_t(i)) / HP(c.rotary_dim))
                                     : HP(c.inv_freq[i]);
  return HP(m) * HP(c.position_scale) * th;
}

struct Indep {
  Bytes rounded;
  std::vector<double> exact;
};

Indep independent(const RopeCase& c, AngleModel model) {
  const Dtype d = c.dtype;
  Indep r;
  r.rounded = c.input;
  r.exact.resize(c.n_elements());
  for (size_t k = 0; k < c.n_elements(); ++k) r.exact[k] = load_f32(d, c.input.data(), k);
  const uint32_t npairs = c.rotary_dim / 2;
  for (size_t t = 0; t < c.n_tokens(); ++t)
    for (uint32_t i = 0; i < npairs; ++i) {
      // ABI v2: the pair's own axis, the attention factor on cos and sin, the slice's offset.
      // ABI v3: a cos/sin table's values as given (the attention factor in them), an angle table's angle;
      // the inverse direction negates sin.
      const int64_t m = c.pair_position(t, i);
      const bool cs_table = c.table && !c.table->is_angle();
      const HP a = cs_table  ? HP(0)
                   : c.table ? HP(c.table->cos_at(size_t(m), i, npairs))
                             : exact_angle_hp(c, i, m, model);
      HP cs, sn;
      if (cs_table) {
        cs = HP(c.table->cos_at(size_t(m), i, npairs));
        sn = HP(c.table->sin_at(size_t(m), i, npairs));
        if (cs == 1 && sn == 0) continue;  // identity
      } else {
        if (a == 0 && c.attention_factor == 1.0) continue;  // identity
        const HP red = a - round(a / two_pi()) * two_pi();
        cs = a == 0 ? HP(c.attention_factor) : HP(cos(red) * HP(c.attention_factor));
        sn = a == 0 ? HP(0) : HP(sin(red) * HP(c.attention_factor));
      }
      if (c.direction == Direction::inverse) sn = -sn;
      const double cd = static_cast<double>(cs), sd = static_cast<double>(sn);
      for (size_t h = 0; h < c.n_heads; ++h) {
        auto [d0, d1] = pair_dims(c.layout, c.rotary_dim, i);
        d0 += c.rotary_offset;
        d1 += c.rotary_offset;
        const size_t k0 = head_offset(c, t, h) + d0, k1 = head_offset(c, t, h) + d1;
        const double x0 = r.exact[k0], x1 = r.exact[k1];
        double y0, y1, e0, e1;
        if (std::isnan(x0) || std::isnan(x1)) {
          y0 = y1 = e0 = e1 = NAN;
        } else if (std::isinf(x0) || std::isinf(x1) || (x0 == 0 && x1 == 0)) {
          y0 = e0 = x0 * cd - x1 * sd;
          y1 = e1 = x0 * sd + x1 * cd;
        } else {
          const HP Y0 = HP(x0) * cs - HP(x1) * sn, Y1 = HP(x0) * sn + HP(x1) * cs;
          double m0 = 1, m1 = 1;
          // An exactly zero result (a zero angle scaled by the attention factor, x1 = 0): IEEE's signed zero.
          if (Y0 == 0) y0 = e0 = x0 * cd - x1 * sd;
          else y0 = round_hp(Y0, fmt(d), &m0), e0 = round_hp(Y0, kDbl);
          if (Y1 == 0) y1 = e1 = x0 * sd + x1 * cd;
          else y1 = round_hp(Y1, fmt(d), &m1), e1 = round_hp(Y1, kDbl);
          // (cos and sin from a table are exact: a tie is a tie, rounded to even)
          if (!cs_table && !(m0 > 1e-50 && m1 > 1e-50)) throw std::logic_error("independent computation too close to call");
        }
        store_bits(d, r.rounded.data(), k0, std::isnan(y0) ? 0x7fc00000u >> (d == Dtype::f32 ? 0 : 16) : to_bits(d, y0));
        store_bits(d, r.rounded.data(), k1, std::isnan(y1) ? 0x7fc00000u >> (d == Dtype::f32 ? 0 : 16) : to_bits(d, y1));
        r.exact[k0] = e0;
        r.exact[k1] = e1;
      }
    }
  return r;
}

bool is_nan_bits(Dtype d, uint32_t b) { return std::isnan(bits_to_double(d, b)); }

// Bit-exact comparison of the reference's output with the independent one
// (NaN compares by being NaN). Returns an empty string when equal.
std::string compare(const RopeCase& c, const ReferenceOutput& got, const Indep& want) {
  std::ostringstream s;
  for (size_t k = 0; k < c.n_elements(); ++k) {
    const uint32_t g = load_bits(c.dtype, got.rounded.data(), k), w = load_bits(c.dtype, want.rounded.data(), k);
    const bool same = (is_nan_bits(c.dtype, g) && is_nan_bits(c.dtype, w)) || g == w;
    const bool same_exact = (std::isnan(got.exact[k]) && std::isnan(want.exact[k])) ||
                            std::bit_cast<uint64_t>(got.exact[k]) == std::bit_cast<uint64_t>(want.exact[k]);
    if (!same || !same_exact) {
      s << "element " << k << ": got bits 0x" << std::hex << g << " want 0x" << w << std::dec << ", exact got "
        << hexfloat(got.exact[k]) << " want " << hexfloat(want.exact[k]) << " input "
        << hexfloat(load_f32(c.dtype, c.input.data(), k)) << " in " << c.summary() << "\n";
      break;
    }
  }
  return s.str();
}

// ---- case building ------------------------------------------------------------

RopeCase make_case(Dtype d, Layout l, uint32_t head_dim, uint32_t rotary_dim, std::vector<int64_t> positions,
                   const std::vector<float>& values, uint32_t heads = 1) {
  RopeCase c;
  c.dtype = d;
  c.layout = l;
  c.head_dim = head_dim;
  c.rotary_dim = rotary_dim;
  c.n_heads = heads;
  c.positions = std::move(positions);
  c.input.resize(c.n_bytes());
  for (size_t k = 0; k < c.n_elements(); ++k) store_f32(d, c.input.data(), k, values[k % values.size()]);
  return c;
}

// ---- agreement with the independent computation -------------------------------

TEST(Reference, AgreesWithIndependentComputationOnRandomCases) {
  std::mt19937_64 rng(20261121);
  uint64_t pairs = 0;
  for (int n = 0; n < 500; ++n) {
    const RopeCase c = random_case(rng, n % 4 == 3);
    for (AngleModel model : {AngleModel::exact, AngleModel::fp32}) {
      ReferenceOptions opt;
      opt.angle_model = model;
      const ReferenceOutput got = reference_rope(c, opt);
      const Indep want = independent(c, model);
      const std::string diff = compare(c, got, want);
      ASSERT_TRUE(diff.empty()) << "case " << n << " model " << to_string(model) << ": " << diff;
      pairs += c.n_tokens() * c.n_heads * c.rotary_dim / 2;
    }
  }
  EXPECT_GT(pairs, 2000u);
}

TEST(Reference, AgreesWithIndependentComputationOnV3Cases) {
  std::mt19937_64 rng(20261125);
  uint64_t pairs = 0, inverse = 0, kinds[5] = {};
  for (int n = 0; n < 300; ++n) {
    const RopeCase c = random_v3_case(rng, n % 4 == 3);
    ASSERT_EQ(c.validate(), "") << n;
    const ReferenceOutput got = reference_rope(c);
    const Indep want = independent(c, AngleModel::exact);
    const std::string diff = compare(c, got, want);
    ASSERT_TRUE(diff.empty()) << "v3 case " << n << ": " << diff;
    pairs += c.n_tokens() * c.n_heads * c.rotary_dim / 2;
    inverse += c.direction == Direction::inverse;
    ++kinds[c.table ? int(c.table->kind) : 0];
  }
  EXPECT_GT(pairs, 1000u);
  EXPECT_GT(inverse, 100u);
  for (int k = 0; k < 5; ++k) EXPECT_GT(kinds[k], 20u) << k;
}

// The inverse at the one position that has no negation, INT64_MIN (reference_rope rotates (x0, -x1) forward
// there), agrees with the independent computation (nonzero inputs: an exactly zero output's sign is IEEE's).
TEST(Reference, InverseAtTheMostNegativePosition) {
  std::mt19937_64 rng(77);
  int checked = 0;
  for (int n = 0; n < 100; ++n) {
    RopeCase c = random_v2_case(rng, false);
    c.direction = Direction::inverse;
    for (size_t k = 0; k < c.n_tokens(); ++k)
      if (k % 2 == 0) c.positions[k] = std::numeric_limits<int64_t>::min();
    for (size_t k = 0; k < c.n_elements(); ++k)
      if (load_f32(c.dtype, c.input.data(), k) == 0) store_f32(c.dtype, c.input.data(), k, 1.5f);
    const std::string diff = compare(c, reference_rope(c), independent(c, AngleModel::exact));
    ASSERT_TRUE(diff.empty()) << "case " << n << ": " << diff;
    ++checked;
  }
  EXPECT_EQ(checked, 100);
}

// The built-in scalar kernel speaks the v3 draft's legacy form (the v2 fields, int64 positions, plus the
// direction and a table of any kind and dtype): judged on random v3 cases under its own promise (its arithmetic
// on a given table: docs/error-model.md, "ABI v3"), out of place and in place; its v3 call with neutral fields
// is its v2 call, bit for bit.
TEST(ScalarKernelV3, RandomV3CasesWithinItsPromise) {
  const Implementation& k = *find_implementation("scalar");
  const KernelPromise p = promise_of(k);
  const Criteria cr = Criteria::of(p.error_model, p.contract);
  std::mt19937_64 rng(31);
  int judged = 0, tables = 0, inverse = 0;
  for (int n = 0; n < 300; ++n) {
    const RopeCase c = random_v3_case(rng, n % 4 == 3);
    const ReferenceOutput ref = reference_rope(c);
    for (bool in_place : {false, true}) {
      Bytes out = in_place ? c.input : Bytes(c.n_bytes(), 0);
      const rc_rope_args a = c.args(in_place ? out.data() : c.input.data(), out.data(), 3);
      ASSERT_EQ(ropecheck_scalar_rope(&a), RC_OK) << n << " " << c.summary();
      const Judgement j = judge_output(c, ref, out.data(), cr);
      ASSERT_TRUE(j.ok()) << "case " << n << (in_place ? " in place " : " ") << c.summary() << "\n" << j.report(2);
      ++judged;
    }
    tables += bool(c.table);
    inverse += c.direction == Direction::inverse;
    if (!c.uses_v3()) {
      Bytes v2(c.n_bytes(), 0), v3(c.n_bytes(), 0);
      const rc_rope_args a2 = c.args(c.input.data(), v2.data(), 2), a3 = c.args(c.input.data(), v3.data(), 3);
      ASSERT_EQ(ropecheck_scalar_rope(&a2), RC_OK);
      ASSERT_EQ(ropecheck_scalar_rope(&a3), RC_OK);
      ASSERT_EQ(v2, v3) << n;
    }
  }
  EXPECT_EQ(judged, 600);
  EXPECT_GT(tables, 150);
  EXPECT_GT(inverse, 100);
}

// A position outside the table is an error before anything is written; a cos/sin table with an attention
// factor other than 1 is declined; a call giving q as a tensor and the legacy fields too is malformed (the
// tensor form itself: tests/test_tensor_form.cpp).
TEST(ScalarKernelV3, RejectsWhatTheDraftForbids) {
  std::mt19937_64 rng(32);
  RopeCase c;
  do c = random_v3_case(rng, false);
  while (!c.table || c.table->is_angle());
  Bytes out(c.n_bytes(), 0x5a);
  rc_rope_args a = c.args(c.input.data(), out.data(), 3);
  const int64_t saved = c.positions[0];
  c.positions[0] = int64_t(c.table->rows);
  a = c.args(c.input.data(), out.data(), 3);
  EXPECT_EQ(ropecheck_scalar_rope(&a), 2);
  EXPECT_EQ(out, Bytes(c.n_bytes(), 0x5a)) << "nothing written";
  c.positions[0] = saved;
  a = c.args(c.input.data(), out.data(), 3);
  a.attention_factor = 2.0;
  EXPECT_EQ(ropecheck_scalar_rope(&a), RC_UNSUPPORTED);
  a = c.args(c.input.data(), out.data(), 3);
  int64_t shape[3] = {1, 1, 8};
  a.q.data = out.data();
  a.q.ndim = 3;
  a.q.shape = shape;
  EXPECT_EQ(ropecheck_scalar_rope(&a), 2);
  a = c.args(c.input.data(), out.data(), 3);
  a.direction = 7;
  EXPECT_EQ(ropecheck_scalar_rope(&a), 2);
}

// The tensor form says how a call is passed, not what it computes: the reference of a tensor-form case (the
// inverse with implicit positions included, whose negated positions no longer read as implicit) is the
// reference of the same case without it. And a tensor form whose encoding contradicts the positions is invalid.
TEST(Reference, TheTensorFormIsHowACallIsPassedNotWhatItComputes) {
  std::mt19937_64 rng(54);
  int inverse_implicit = 0;
  for (int n = 0; n < 300; ++n) {
    RopeCase c = random_tensor_case(rng, false);
    ASSERT_EQ(c.validate(), "") << n;
    RopeCase plain = c;
    plain.tensor.reset();
    EXPECT_EQ(reference_rope(c).rounded, reference_rope(plain).rounded) << n << " " << c.summary();
    inverse_implicit += c.direction == Direction::inverse && c.tensor->pos == PositionForm::implicit && !c.table;
    if (c.tensor->pos == PositionForm::implicit) {
      c.positions[0] += 1;
      EXPECT_NE(c.validate().find("implicit positions: token 0"), std::string::npos) << c.validate();
    }
  }
  EXPECT_GT(inverse_implicit, 3);
}

TEST(Reference, TablesAreValidated) {
  RopeCase c = make_case(Dtype::f32, Layout::interleaved, 4, 4, {0, 3}, {1.0f, 2.0f});
  CosSinTable t;
  t.rows = 3;
  t.cos.assign(6, 1.0);
  t.sin.assign(6, 0.0);
  c.table = t;
  EXPECT_NE(c.validate().find("position 3 is outside the table's rows [0, 3)"), std::string::npos) << c.validate();
  c.positions = {0, 2};
  EXPECT_EQ(c.validate(), "");
  c.attention_factor = 2.0;
  EXPECT_NE(c.validate().find("attention_factor must be 1"), std::string::npos) << c.validate();
  c.attention_factor = 1.0;
  c.table->cos[1] = 0.1;  // not an f32
  EXPECT_NE(c.validate().find("finite values of f32"), std::string::npos) << c.validate();
  c.table->cos[1] = 1.0;
  c.table->sin.pop_back();
  EXPECT_NE(c.validate().find("not 3 rows"), std::string::npos) << c.validate();
  c.table->sin.push_back(0.0);
  c.table->kind = TableKind::angle;
  EXPECT_NE(c.validate().find("not 3 rows"), std::string::npos) << c.validate();  // an angle table has no sin
  c.table->sin.clear();
  EXPECT_EQ(c.validate(), "");
  c.inv_freq = {1.0, 0.5};
  EXPECT_NE(c.validate().find("excludes inv_freq"), std::string::npos) << c.validate();
}

TEST(Reference, AgreesWithIndependentComputationOnV2Cases) {
  std::mt19937_64 rng(20261123);
  uint64_t pairs = 0, scaled = 0, ruled = 0, multi = 0;
  for (int n = 0; n < 300; ++n) {
    const RopeCase c = random_v2_case(rng, n % 4 == 3);
    ASSERT_EQ(c.validate(), "") << n;
    const ReferenceOutput got = reference_rope(c);
    const Indep want = independent(c, AngleModel::exact);
    const std::string diff = compare(c, got, want);
    ASSERT_TRUE(diff.empty()) << "v2 case " << n << ": " << diff;
    pairs += c.n_tokens() * c.n_heads * c.rotary_dim / 2;
    scaled += c.attention_factor != 1.0;
    ruled += bool(c.freq_rule);
    multi += c.n_pos_axes > 1;
  }
  EXPECT_GT(pairs, 1000u);
  EXPECT_GT(scaled, 100u);
  EXPECT_GT(ruled, 100u);
  EXPECT_GT(multi, 100u);
}

// With an attention factor, an angle of 0 is no longer the identity: the pair is s times its input,
// correctly rounded; everything outside the rotated slice keeps its bits.
TEST(Reference, AttentionFactorScalesZeroAnglePairsAndOffsetKeepsTheRest) {
  RopeCase c;
  c.dtype = Dtype::f32;
  c.layout = Layout::interleaved;
  c.head_dim = 8;
  c.rotary_dim = 4;
  c.rotary_offset = 2;
  c.positions = {0};
  c.attention_factor = 1.5;
  c.input.resize(c.n_bytes());
  for (size_t k = 0; k < 8; ++k) store_f32(c.dtype, c.input.data(), k, float(k + 1) * 0.75f);
  const ReferenceOutput r = reference_rope(c);
  for (uint32_t k = 0; k < 8; ++k) {
    const float x = load_f32(c.dtype, c.input.data(), k), y = load_f32(c.dtype, r.rounded.data(), k);
    EXPECT_EQ(y, is_rotated(c, k) ? x * 1.5f : x) << k;
  }
}

// Regression (found by the variant-accuracy property): at angle 0 an attention factor of 1.5 makes 1.5*x an
// exact tie of the storage type for some x; the reference must round it to even, not give up at 1064 bits.
TEST(Reference, AttentionFactorTiesRoundToEven) {
  for (Dtype d : kAllDtypes) {
    RopeCase c;
    c.dtype = d;
    c.head_dim = c.rotary_dim = 2;
    c.positions = {0};
    c.attention_factor = 1.5;
    c.input.resize(c.n_bytes());
    const Format f = format_of(d);
    // x = 1 + 2^-(p-1) (the last bit set): 1.5x = 1.5 + 1.5*2^-(p-1) lies halfway between two neighbours.
    const double x = 1.0 + std::ldexp(1.0, -(f.precision - 1));
    store_f32(d, c.input.data(), 0, float(x));
    store_f32(d, c.input.data(), 1, float(-x));
    const ReferenceOutput r = reference_rope(c);
    const double want = load_f32(d, c.input.data(), 0) * 1.5;
    const double got = load_f32(d, r.rounded.data(), 0);
    EXPECT_LE(std::fabs(got - want), std::ldexp(1.0, -(f.precision - 1)) * 0.75 + 1e-300) << to_string(d);
    // Ties to even: the rounded significand is even.
    Bytes b(4);
    store_f32(d, b.data(), 0, float(got));
    EXPECT_EQ(load_bits(d, b.data(), 0) & 1u, 0u) << to_string(d);
    EXPECT_EQ(load_f32(d, r.rounded.data(), 1), -got) << to_string(d);
  }
}

TEST(Reference, V2CallsNegotiateTheirVersion) {
  RopeCase c;
  c.head_dim = c.rotary_dim = 4;
  c.positions = {3};
  c.input.resize(c.n_bytes());
  EXPECT_EQ(c.args(nullptr, nullptr).abi_version, 1u);
  RopeCase n = c;
  n.positions = {-3};
  EXPECT_EQ(n.args(nullptr, nullptr).abi_version, 2u);  // negative positions are v2
  RopeCase a = c;
  a.attention_factor = 2;
  EXPECT_EQ(a.args(nullptr, nullptr).abi_version, 2u);
  RopeCase r = c;
  r.freq_rule = FrequencyRule{};
  const rc_rope_args ra = r.args(nullptr, nullptr);
  ASSERT_EQ(ra.abi_version, 2u);
  ASSERT_NE(ra.freq_rule, nullptr);
  EXPECT_EQ(ra.freq_rule->kind, uint32_t(RC_FREQ_DEFAULT));
  EXPECT_EQ(ra.n_pos_axes, 1u);
  EXPECT_EQ(ra.attention_factor, 1.0);
  // A v2 call round-trips through the ABI.
  RopeCase m = c;
  m.head_dim = 6;
  m.rotary_offset = 2;
  m.n_pos_axes = 2;
  m.positions = {3, -5};
  m.pair_axis = {1, 0};
  m.input.resize(m.n_bytes());
  const RopeCase back = case_from_args(m.args(m.input.data(), nullptr));
  EXPECT_EQ(back.rotary_offset, 2u);
  EXPECT_EQ(back.n_pos_axes, 2u);
  EXPECT_EQ(back.positions, m.positions);
  EXPECT_EQ(back.pair_axis, m.pair_axis);
  EXPECT_EQ(back.validate(), "");
}

TEST(Reference, ThetaOfARuleIsItsExactTableRounded) {
  RopeCase c;
  c.head_dim = c.rotary_dim = 128;
  c.base = 500000;
  FrequencyRule r;
  r.type = FrequencyRuleType::llama3;
  r.factor = 8;
  r.original_max_position_embeddings = 8192;
  c.freq_rule = r;
  const std::vector<double> want = theta_as_double(evaluate_frequency_rule(r, 128, 500000));
  for (uint32_t i = 0; i < 64; ++i) EXPECT_EQ(theta_value(c, i), want[i]) << i;
}

// The double-double fast path, the MPFR path, and a retry-heavy MPFR path
// (first precision 32 bits) give bit-identical outputs.
TEST(Reference, FastPathAndMpfrPathsAgree) {
  std::mt19937_64 rng(99);
  uint64_t retries = 0, fast_left = 0;
  for (int n = 0; n < 300; ++n) {
    const RopeCase c = random_case(rng, n % 5 == 4);
    ReferenceOptions fast, slow, low;
    slow.fast_path = false;
    low.fast_path = false;
    low.working_bits = 32;
    const ReferenceOutput a = reference_rope(c, fast), b = reference_rope(c, slow), l = reference_rope(c, low);
    ASSERT_EQ(a.rounded, b.rounded) << c.summary();
    ASSERT_EQ(a.angle, b.angle) << c.summary();  // |angle| to double: decided as MPFR's rounds
    ASSERT_EQ(a.rounded, l.rounded) << c.summary();
    for (size_t k = 0; k < c.n_elements(); ++k) {
      ASSERT_TRUE((std::isnan(a.exact[k]) && std::isnan(b.exact[k])) ||
                  std::bit_cast<uint64_t>(a.exact[k]) == std::bit_cast<uint64_t>(b.exact[k]))
          << k << " " << c.summary();
      ASSERT_TRUE((std::isnan(a.exact[k]) && std::isnan(l.exact[k])) ||
                  std::bit_cast<uint64_t>(a.exact[k]) == std::bit_cast<uint64_t>(l.exact[k]))
          << k << " " << c.summary();
    }
    retries += l.ziv_retries + l.exact_retries;
    fast_left += a.mpfr_pairs;
  }
  EXPECT_GT(retries, 100u);  // 32 bits cannot decide doubles: the retry path really ran
  std::cout << "pairs left to MPFR by the fast path: " << fast_left << "\n";
}

// Many pairs per call (the shape kernels see): the fast path's decisions are
// bit-identical to MPFR's on every dtype, with values across the whole range.
TEST(Reference, FastPathAgreesWithMpfrOnManyPairs) {
  std::mt19937_64 rng(2024);
  for (Dtype d : kAllDtypes) {
    RopeCase c;
    c.dtype = d;
    c.layout = Layout::half_split;
    c.head_dim = 72;
    c.rotary_dim = 64;
    c.n_heads = 4;
    for (int t = 0; t < 48; ++t) c.positions.push_back(t < 16 ? t : int64_t(rng() >> (1 + rng() % 40)));
    c.base = 500000.0;
    c.input.resize(c.n_bytes());
    for (size_t k = 0; k < c.n_elements(); ++k) store_f32(d, c.input.data(), k, random_value(rng, d, false));
    ReferenceOptions slow;
    slow.fast_path = false;
    const ReferenceOutput a = reference_rope(c), b = reference_rope(c, slow);
    ASSERT_EQ(a.rounded, b.rounded) << to_string(d);
    ASSERT_EQ(a.angle, b.angle) << to_string(d);
    for (size_t k = 0; k < c.n_elements(); ++k)
      ASSERT_EQ(std::bit_cast<uint64_t>(a.exact[k]), std::bit_cast<uint64_t>(b.exact[k])) << to_string(d) << " " << k;
    EXPECT_LT(a.mpfr_pairs, b.mpfr_pairs / 10) << "the fast path should decide almost every pair";
  }
}

// ---- identities and closed forms -------------------------------------------------

TEST(Reference, PositionZeroIsTheIdentityBitExactly) {
  for (Dtype d : kAllDtypes)
    for (Layout l : kAllLayouts)
      for (AngleModel model : {AngleModel::exact, AngleModel::fp32}) {
        RopeCase c = make_case(d, l, 10, 8, {0, 0}, {1.0f}, 2);
        // special bit patterns: -0, smallest subnormal, NaN with payload, -Inf, largest finite
        const uint32_t special32[] = {0x80000000u, 0x00000001u, 0x7fa00001u, 0xff800000u, 0x7f7fffffu,
                                      0x3f800001u, 0x807fffffu, 0xffc00123u, 0x00400000u, 0x12345678u};
        const uint32_t special16[] = {0x8000u, 0x0001u, 0x7d01u, 0xfc00u, 0x7bffu,
                                      0x3c01u, 0x83ffu, 0xff81u, 0x0200u, 0x1234u};
        for (size_t k = 0; k < c.n_elements(); ++k)
          store_bits(d, c.input.data(), k, d == Dtype::f32 ? special32[k % 10] : special16[k % 10]);
        ReferenceOptions opt;
        opt.angle_model = model;
        const ReferenceOutput out = reference_rope(c, opt);
        EXPECT_EQ(out.rounded, c.input) << c.summary();
        // a scale of 0 and a zero table entry are zero angles too
        RopeCase z = c;
        z.positions = {12345, -7};
        z.position_scale = 0.0;
        EXPECT_EQ(reference_rope(z, opt).rounded, c.input);
        RopeCase t = c;
        t.positions = {99, 3};
        t.inv_freq = {0.0, 0.0, 0.0, 0.0};
        EXPECT_EQ(reference_rope(t, opt).rounded, c.input);
      }
}

// theta = RN(pi/2) as a table entry: cos ~ 6e-17, sin = 1 - 2^-110-ish, so the
// correctly rounded outputs are exactly (-x1, x0) at position 1, (-x0, -x1) at
// position 2 (angle ~ pi) and (x1, -x0) at position 3, unless |x0| and |x1|
// differ by ~2^50.
TEST(Reference, QuarterTurnsAreExactRotations) {
  const double half_pi = std::acos(-1.0) / 2;
  std::mt19937_64 rng(5);
  for (Dtype d : kAllDtypes)
    for (Layout l : kAllLayouts) {
      std::vector<float> vals;
      for (int k = 0; k < 8; ++k) {
        std::normal_distribution<float> nd(0, 100);
        unsigned char b[4];
        store_f32(d, b, 0, nd(rng));
        vals.push_back(load_f32(d, b, 0));
      }
      RopeCase c = make_case(d, l, 8, 8, {1, 2, 3, -1}, vals);
      c.inv_freq.assign(4, half_pi);
      for (int tok = 0; tok < 4; ++tok)
        for (size_t k = 0; k < 8; ++k) store_f32(d, c.input.data(), tok * 8 + k, vals[k]);
      const ReferenceOutput out = reference_rope(c);
      for (uint32_t i = 0; i < 4; ++i) {
        const auto [d0, d1] = pair_dims(l, 8, i);
        const float x0 = vals[d0], x1 = vals[d1];
        const float want[4][2] = {{-x1, x0}, {-x0, -x1}, {x1, -x0}, {x1, -x0}};
        for (int tok = 0; tok < 4; ++tok) {
          EXPECT_EQ(load_f32(d, out.rounded.data(), tok * 8 + d0), want[tok][0]) << tok << " " << c.summary();
          EXPECT_EQ(load_f32(d, out.rounded.data(), tok * 8 + d1), want[tok][1]) << tok << " " << c.summary();
        }
      }
    }
}

// The rotation by an angle with cos and sin known in closed form: 2 pi / 3
// (cos = -1/2, sin = sqrt(3)/2) given as a double table entry; the output is
// the closed form within the angle's rounding, so for moderate x it is the
// correctly rounded closed form except within that tiny distance of a boundary.
TEST(Reference, ThirdTurnMatchesClosedForm) {
  const double a = 2 * std::acos(-1.0) / 3;
  const RopeCase c0 = make_case(Dtype::f32, Layout::interleaved, 2, 2, {1}, {3.0f, 1.0f});
  RopeCase c = c0;
  c.inv_freq = {a};
  const ReferenceOutput out = reference_rope(c);
  // y0 = 3(-1/2) - sqrt(3)/2, y1 = 3 sqrt(3)/2 - 1/2
  const HP s3 = sqrt(HP(3));
  EXPECT_EQ(load_f32(Dtype::f32, out.rounded.data(), 0), float(round_hp(HP(-1.5) - s3 / 2, fmt(Dtype::f32))));
  EXPECT_EQ(load_f32(Dtype::f32, out.rounded.data(), 1), float(round_hp(3 * s3 / 2 - HP(0.5), fmt(Dtype::f32))));
}

TEST(Reference, PositionScaleIsLinearInterpolation) {
  std::mt19937_64 rng(11);
  for (Dtype d : kAllDtypes) {
    std::vector<float> vals;
    for (int k = 0; k < 16; ++k) vals.push_back(random_value(rng, d, false));
    RopeCase a = make_case(d, Layout::half_split, 16, 16, {2000, -6, 1 << 20}, vals);
    RopeCase b = a;
    a.position_scale = 0.5;
    b.positions = {1000, -3, 1 << 19};
    EXPECT_EQ(reference_rope(a).rounded, reference_rope(b).rounded);
    RopeCase c = a;
    c.position_scale = 1.0;
    EXPECT_NE(reference_rope(a).rounded, reference_rope(c).rounded);
  }
}

// theta_0 = 1 for every base, so pair 0 rotates by the position itself; an
// explicit table reproduces any theta exactly.
TEST(Reference, InvFreqTableAndPairZero) {
  std::mt19937_64 rng(3);
  std::vector<float> vals;
  for (int k = 0; k < 8; ++k) vals.push_back(random_value(rng, Dtype::f32, false));
  RopeCase a = make_case(Dtype::f32, Layout::interleaved, 8, 8, {5, 1 << 30, -77}, vals);
  RopeCase b = a;
  b.inv_freq = {1.0, 0.5, 0.25, 0.125};
  a.base = 16.0;  // theta_i = 16^(-2i/8) = 2^-i exactly
  EXPECT_EQ(reference_rope(a).rounded, reference_rope(b).rounded);
  EXPECT_EQ(exact_angle(a, 2, 8), 2.0);
  EXPECT_EQ(exact_angle(b, 3, -8), -1.0);
}

// ---- near rounding boundaries ----------------------------------------------------

struct NearCase {
  double x0, x1, angle, target;
};

// An angle (a double) making x0 cos a - x1 sin a land within ~2^-48 relative of
// `target`: a = acos(target / R) - atan2(x1, x0) computed in HP, then rounded
// to double and nudged by k ulps.
double angle_for(double x0, double x1, double target, int k) {
  const HP R = sqrt(HP(x0) * HP(x0) + HP(x1) * HP(x1));
  HP a = acos(HP(target) / R) - atan2(HP(x1), HP(x0));
  if (a < 0) a += two_pi();
  double ad = static_cast<double>(a);
  for (int j = 0; j < std::abs(k); ++j) ad = std::nextafter(ad, k > 0 ? INFINITY : 0.0);
  return ad;
}

HP y0_of(double x0, double x1, double angle) { return HP(x0) * cos(HP(angle)) - HP(x1) * sin(HP(angle)); }

double in_dtype(Dtype d, double v) {
  unsigned char b[4];
  store_f32(d, b, 0, float(v));
  return load_f32(d, b, 0);
}

// Midpoints between neighbours of each format: ties in the middle of a binade,
// below a power of two, in the subnormal range, between 0 and the smallest
// subnormal, and the overflow threshold; with both signs.
// ---- the double-double cos/sin and the theta tables against 400-bit values -------------------

HP hp_cos_red(const HP& a, bool sine) {
  const HP red = a - round(a / two_pi()) * two_pi();
  return sine ? HP(sin(red)) : HP(cos(red));
}

// Angles where the double-double path is weakest: next to multiples of pi/2 (tiny reduced angles, quadrant
// changes), next to the table's j/512 and its midpoints, the ends of its range, and log-uniform ones.
// (min_angle: 2^-800, the smallest the path takes; cases fed to the whole reference use 2^-400: at 2^-800 a
// pair can sit 2^-1600 from a rounding tie, beyond the reference's 1064 bits.)
std::vector<double> hard_angles(std::mt19937_64& rng, double min_angle = 0x1p-800) {
  std::vector<double> a;
  for (double k : {1.0, 2.0, 3.0, 4.0, 5.0, 7.0, 100.0, 12345.0, 1048577.0, 1073741823.0, 0x1p39 + 1, 0x1.45f306dc9c882p39}) {
    const double v = static_cast<double>(HP(k) * two_pi() / 4);
    for (int s = -3; s <= 3; ++s) {
      double w = v;
      for (int n = 0; n < std::abs(s); ++n) w = std::nextafter(w, s > 0 ? INFINITY : -INFINITY);
      if (std::fabs(w) < 0x1p40) a.push_back(w), a.push_back(-w);
    }
  }
  for (int j = 0; j <= 512; ++j)  // the table's points j/512 and the midpoints between them
    for (double off : {-0x1p-10, 0.0, 0x1p-10}) {
      const double v = j / 512.0 + off;
      if (v > 0) a.push_back(v), a.push_back(std::nextafter(v, 0.0)), a.push_back(std::nextafter(v, 2.0));
    }
  for (double v : {min_angle, 2 * min_angle, 0x1p-30, 0.7853981633974483, 0.7853981633974484, 0x1p40 - 0x1p-12, 1.0})
    a.push_back(v), a.push_back(-v);
  std::uniform_real_distribution<double> lg(std::log2(min_angle), 40);
  for (int n = 0; n < 4000; ++n) a.push_back(std::ldexp(1.0 + double(rng() >> 12) * 0x1p-52, int(lg(rng))) * ((rng() & 1) ? 1 : -1));
  return a;
}

TEST(Reference, DoubleDoubleCosSinIsWithinItsBound) {
  std::mt19937_64 rng(777);
  const std::vector<double> angles = hard_angles(rng);
  double worst_ratio = 0, worst_err = 0;  // |error| / bound, |error| / af
  uint64_t n = 0;
  for (double af : {1.0, 0.5, 1.1386294361119891, 3.0, 0x1p-500, 0x1p500}) {
    for (double a : angles) {
      for (bool mpfr_reduction : {false, true}) {
      DdCosSin r;
      ASSERT_TRUE(dd_cos_sin_of(a, af, r, mpfr_reduction)) << hexfloat(a);
      ASSERT_TRUE(std::fabs(r.cl) <= std::fabs(r.ch) * 0x1p-52 && std::fabs(r.sl) <= std::fabs(r.sh) * 0x1p-52);
      const HP c = hp_cos_red(HP(a), false) * HP(af), s = hp_cos_red(HP(a), true) * HP(af);
      const double ec = static_cast<double>(abs(c - HP(r.ch) - HP(r.cl)));
      const double es = static_cast<double>(abs(s - HP(r.sh) - HP(r.sl)));
      ASSERT_LE(ec, r.err) << "cos of " << hexfloat(a) << " times " << af;
      ASSERT_LE(es, r.err) << "sin of " << hexfloat(a) << " times " << af;
      worst_ratio = std::max({worst_ratio, ec / r.err, es / r.err});
      worst_err = std::max({worst_err, ec / af, es / af});
      ++n;
      }
    }
  }
  // The derivation beside dd_cos_sin: < 2^-100 for cos and sin (the bound takes 2^-92), plus af's product.
  EXPECT_LT(worst_err, 0x1p-100 + 0x1p-102);
  std::cout << n << " angles; largest error " << worst_err << " (2^" << std::log2(worst_err) << ") x af, "
            << worst_ratio << " of the bound\n";
  // Outside its range the path declines (MPFR computes those).
  DdCosSin r;
  for (bool mpfr_reduction : {false, true}) {
    for (double a : {0.0, 0x1p-801, 0x1p40, -0x1p40, 0x1p60, double(NAN), double(INFINITY)})
      EXPECT_FALSE(dd_cos_sin_of(a, 1.0, r, mpfr_reduction)) << a;
    EXPECT_FALSE(dd_cos_sin_of(1.0, 0x1p-513, r, mpfr_reduction));
    EXPECT_FALSE(dd_cos_sin_of(1.0, 0x1p513, r, mpfr_reduction));
  }
}

// theta_i from one pow and products (default_thetas) against base^(-2i/R) at 400 bits, within the bound it
// states, on wide heads (the bound grows with i), bases far from 10000 and low precisions.
TEST(Reference, ThetaTableIsWithinItsBound) {
  double worst = 0;  // |error| / bound
  for (double base : {10000.0, 2.0, 1.0000001, 1e300, 0.5, 1e-300, 499999.99999999994})
    for (uint32_t rd : {2u, 6u, 128u, 4096u, 1u << 16})
      for (unsigned bits : {32u, 64u, 134u, 268u}) {
        if (rd > 4096 && bits > 134) continue;  // 32768 products per table: enough at two precisions
        RopeCase c;
        c.head_dim = c.rotary_dim = rd;
        c.base = base;
        for (uint32_t i : {0u, 1u, 2u, rd / 4, rd / 2 - 1}) {
          if (i >= rd / 2) continue;
          const ThetaProbe p = theta_probe(c, i, bits);
          HP got = 0;
          for (double v : p.parts) got += HP(v);
          got = ldexp(got, p.exponent);
          const HP want = pow(HP(base), HP(-2 * int64_t(i)) / HP(rd));
          const double rel = static_cast<double>(abs(got / want - 1));
          const double bound = p.units * std::ldexp(1.0, -int(bits));
          ASSERT_LE(rel, bound) << "base " << base << " R " << rd << " i " << i << " bits " << bits;
          if (i == 0) {
            EXPECT_EQ(rel, 0.0);
          }
          if (bound > 0) worst = std::max(worst, rel / bound);
        }
      }
  std::cout << "theta: largest error " << worst << " of its bound\n";
}

// Cases whose angles are the hard ones above (position 1 and a table: the angle is the entry itself; or
// positions times a table): the double-double first pass, MPFR alone, and the independent 400-bit computation
// give the same bits; out-of-range angles (huge positions, tiny entries) go to MPFR.
TEST(Reference, FastCosSinAgreesWithMpfrOnHardAngles) {
  std::mt19937_64 rng(4242);
  std::vector<double> angles = hard_angles(rng, 0x1p-400);
  std::shuffle(angles.begin(), angles.end(), rng);
  angles.resize(600);
  uint64_t fast_trig = 0, mpfr_trig = 0, cases = 0;
  for (size_t start = 0; start < angles.size(); start += 24) {
    for (double af : {1.0, 1.1386294361119891, 0.75}) {
      RopeCase c;
      c.dtype = kAllDtypes[cases % 3];
      c.layout = kAllLayouts[(cases / 3) % 2];
      c.rotary_dim = 48;
      c.head_dim = 50;
      c.n_heads = 2;
      c.attention_factor = af;
      // (With af != 1 a tiny angle puts x af cos within 2^-2|angle|^2 of x af, which can be a rounding tie of
      // the storage type: too close for the independent computation's margin; such angles are moved up.)
      for (size_t i = 0; i < 24; ++i) {
        const double e = angles[(start + i) % angles.size()];
        c.inv_freq.push_back(af != 1.0 && std::fabs(e) < 0x1p-40 ? std::ldexp(e, -40 - std::ilogb(e)) : e);
      }
      // position 1 (the angle itself), a large one (past 2^40 for the large entries: MPFR) and a negative one
      c.positions = {1, int64_t(1) << (20 + cases % 30), -3};
      c.input.resize(c.n_bytes());
      for (size_t k = 0; k < c.n_elements(); ++k)
        store_f32(c.dtype, c.input.data(), k, random_value(rng, c.dtype, cases % 4 == 3));
      ReferenceOptions slow;
      slow.fast_path = false;
      const ReferenceOutput a = reference_rope(c), b = reference_rope(c, slow);
      ASSERT_EQ(a.rounded, b.rounded) << c.summary();
      ASSERT_EQ(a.angle, b.angle) << c.summary();
      for (size_t k = 0; k < c.n_elements(); ++k)
        ASSERT_TRUE((std::isnan(a.exact[k]) && std::isnan(b.exact[k])) ||
                    std::bit_cast<uint64_t>(a.exact[k]) == std::bit_cast<uint64_t>(b.exact[k]))
            << k << " " << c.summary();
      if (cases % 8 == 0) {
        const std::string diff = compare(c, a, independent(c, AngleModel::exact));
        ASSERT_TRUE(diff.empty()) << diff;
      }
      EXPECT_EQ(b.mpfr_trig, c.n_tokens() * 24);  // MPFR alone: every (position, pair)
      uint64_t out_of_range = 0;  // the double-double path's range: 2^-800 <= |angle| < 2^40
      for (int64_t m : c.positions)
        for (double th : c.inv_freq) out_of_range += !(std::fabs(double(m) * th) >= 0x1p-800 && std::fabs(double(m) * th) < 0x1p40);
      EXPECT_EQ(a.dd_trig, c.n_tokens() * 24 - out_of_range) << c.summary();
      EXPECT_GE(a.mpfr_trig, out_of_range) << c.summary();
      EXPECT_EQ(b.dd_trig, 0u);
      mpfr_trig += out_of_range;
      fast_trig += a.dd_trig;
      ++cases;
    }
  }
  EXPECT_GT(mpfr_trig, 50u);  // huge angles
  EXPECT_GT(fast_trig, 1000u);
  std::cout << cases << " cases: cos/sin by double-double " << fast_trig << ", by MPFR " << mpfr_trig << "\n";
}

std::vector<double> midpoints(Dtype d) {
  const Format f = format_of(d);
  const int p = f.precision;
  const double sub = std::ldexp(1.0, f.emin - p + 1);
  std::vector<double> m = {1 + std::ldexp(1.0, -p),      1 + 3 * std::ldexp(1.0, -p), 1 - std::ldexp(1.0, -p - 1),
                           0.75 + std::ldexp(5.0, -p - 1), 2.5 * sub,                   0.5 * sub,
                           std::ldexp(1.0, f.emin) - 0.5 * sub,
                           f.max_finite() + std::ldexp(1.0, f.emax - p)};
  const size_t n = m.size();
  for (size_t k = 0; k < n; ++k) m.push_back(-m[k]);
  return m;
}

TEST(Reference, NearMidpointsRoundCorrectlyAndDriveZivRetries) {
  for (Dtype d : kAllDtypes) {
    const Format f = format_of(d);
    const double sub = std::ldexp(1.0, f.emin - f.precision + 1);
    std::vector<NearCase> near, control;
    int above = 0, below = 0;
    for (double M : midpoints(d)) {
      // inputs of the storage type with |x| > |M|
      double x0 = std::max(in_dtype(d, 0.9 * std::fabs(M)), sub);
      double x1 = -std::max(in_dtype(d, 0.8 * std::fabs(M)), sub);
      if (std::fabs(M) < 2 * sub) x0 = 2 * sub, x1 = -sub;
      for (int k = -3; k <= 3; ++k) {
        const double a = angle_for(x0, x1, M, k);
        const HP y = y0_of(x0, x1, a);
        const HP rel = abs((y - HP(M)) / HP(M));
        ASSERT_LT(rel, HP(std::ldexp(1.0, -40))) << "construction missed " << M;
        ASSERT_NE(y, HP(M));
        (y > HP(M) ? above : below)++;
        near.push_back({x0, x1, a, M});
      }
      // control: the same inputs aimed at a representable value (far from boundaries)
      const double rep = in_dtype(d, M * (1 + std::ldexp(1.0, -3)));
      if (std::isfinite(rep) && std::fabs(rep) >= std::ldexp(1.0, f.emin) &&
          std::fabs(rep) < std::sqrt(x0 * x0 + x1 * x1))
        control.push_back({x0, x1, angle_for(x0, x1, rep, 0), rep});
    }
    EXPECT_GT(above, 10);
    EXPECT_GT(below, 10);
    // One call: pair i of the head is near[i] (or control[i - near.size()]).
    std::vector<NearCase> all = near;
    all.insert(all.end(), control.begin(), control.end());
    RopeCase c;
    c.dtype = d;
    c.layout = Layout::interleaved;
    c.rotary_dim = c.head_dim = uint32_t(2 * all.size());
    c.positions = {1};
    c.input.resize(c.n_bytes());
    for (size_t i = 0; i < all.size(); ++i) {
      store_f32(d, c.input.data(), 2 * i, float(all[i].x0));
      store_f32(d, c.input.data(), 2 * i + 1, float(all[i].x1));
      c.inv_freq.push_back(all[i].angle);
    }
    const Indep want = independent(c, AngleModel::exact);
    // The expected y0 is the neighbour of M on the side of the exact value.
    for (size_t i = 0; i < near.size(); ++i) {
      const HP y = y0_of(near[i].x0, near[i].x1, near[i].angle);
      const double got = load_f32(d, want.rounded.data(), 2 * i);
      const double M = near[i].target;
      ASSERT_TRUE(y > HP(M) ? got > M : got < M) << to_string(d) << " M=" << hexfloat(M) << " got " << hexfloat(got);
    }
    ReferenceOptions deflt, mpfr_only, low;
    mpfr_only.fast_path = false;
    low.fast_path = false;
    low.working_bits = 44;  // error bound > 2^-46 relative: cannot separate y0 from M
    for (const ReferenceOptions* o : {&deflt, &mpfr_only, &low}) {
      const ReferenceOutput out = reference_rope(c, *o);
      const std::string diff = compare(c, out, want);
      EXPECT_TRUE(diff.empty()) << to_string(d) << " bits " << o->working_bits << ": " << diff;
      if (o == &low) {
        // exactly the near-midpoint pairs needed more precision for the storage type
        EXPECT_EQ(out.ziv_retries, near.size()) << to_string(d);
      } else {
        EXPECT_EQ(out.ziv_retries, 0u);
      }
    }
  }
}

// ---- special values ----------------------------------------------------------------

TEST(Reference, NanAndInfInputs) {
  for (Dtype d : kAllDtypes) {
    // angle 0.5 rad: cos, sin > 0
    RopeCase c = make_case(d, Layout::interleaved, 10, 8, {1}, {NAN, 1.0f, INFINITY, 1.0f, INFINITY, -INFINITY, 2.0f,
                                                                   -3.0f, NAN, INFINITY});
    c.inv_freq = {0.5, 0.5, 0.5, 0.5};
    const ReferenceOutput out = reference_rope(c);
    auto v = [&](size_t k) { return double(load_f32(d, out.rounded.data(), k)); };
    EXPECT_TRUE(std::isnan(v(0)) && std::isnan(v(1)));  // NaN in a pair: both NaN
    EXPECT_EQ(v(2), INFINITY);                          // Inf c - 1 s
    EXPECT_EQ(v(3), INFINITY);                          // Inf s + 1 c
    EXPECT_EQ(v(4), INFINITY);                          // Inf c - (-Inf) s
    EXPECT_TRUE(std::isnan(v(5)));                      // Inf s + (-Inf) c
    const Indep want = independent(c, AngleModel::exact);
    EXPECT_EQ(compare(c, out, want), "");
    EXPECT_TRUE(std::isnan(v(8)));  // pass-through keeps NaN and Inf bits
    EXPECT_EQ(load_bits(d, out.rounded.data(), 8), load_bits(d, c.input.data(), 8));
    EXPECT_EQ(load_bits(d, out.rounded.data(), 9), load_bits(d, c.input.data(), 9));
  }
}

TEST(Reference, OverflowAndSubnormalOutputs) {
  for (Dtype d : kAllDtypes) {
    const Format f = format_of(d);
    const float big = float(f.max_finite());
    RopeCase c = make_case(d, Layout::interleaved, 2, 2, {1}, {big, big});
    c.inv_freq = {std::acos(-1.0) / 4};  // y1 = sqrt(2) max
    ReferenceOutput out = reference_rope(c);
    EXPECT_EQ(load_f32(d, out.rounded.data(), 1), INFINITY);
    EXPECT_EQ(compare(c, out, independent(c, AngleModel::exact)), "");
    // tiny inputs: outputs in the subnormal range, and rounding to zero with sign
    const double sub = std::ldexp(1.0, f.emin - f.precision + 1);
    for (double x : {3 * sub, sub, 100 * sub}) {
      RopeCase t = make_case(d, Layout::interleaved, 4, 4, {1, 7, -3}, {float(x), float(-x), float(sub), 0.0f});
      t.inv_freq = {0.3, 1.9};
      out = reference_rope(t);
      EXPECT_EQ(compare(t, out, independent(t, AngleModel::exact)), "");
    }
  }
}

// ---- the fp32 angle model ----------------------------------------------------------

TEST(Reference, Fp32AngleModelMatchesPlainFloatEmulation) {
  std::mt19937_64 rng(17);
  for (int n = 0; n < 200; ++n) {
    RopeCase c = random_case(rng, false);
    for (uint32_t i = 0; i < c.rotary_dim / 2; ++i)
      for (int64_t m : c.positions) {
        const float got = fp32_model_angle(c, i, m), want = emulated_fp32_angle(c, i, m);
        ASSERT_EQ(std::bit_cast<uint32_t>(got), std::bit_cast<uint32_t>(want)) << c.summary() << " pair " << i;
      }
  }
  // It drifts from the exact angle at large positions: f32(2^24 + 1) = 2^24.
  RopeCase c = make_case(Dtype::f32, Layout::interleaved, 4, 4, {(1 << 24) + 1}, {1.0f, 2.0f, 3.0f, 4.0f});
  EXPECT_EQ(fp32_model_angle(c, 0, (1 << 24) + 1), 16777216.0f);
  EXPECT_EQ(exact_angle(c, 0, (1 << 24) + 1), 16777217.0);
  // theta_1 = 0.01: f32(2^31 - 1) = 2^31 and f32(0.01) shift the angle by ~0.47 rad
  const double e1 = exact_angle(c, 1, 2147483647), f1 = fp32_model_angle(c, 1, 2147483647);
  EXPECT_GT(std::fabs(e1 - f1), 0.4);
  ReferenceOptions fp;
  fp.angle_model = AngleModel::fp32;
  EXPECT_NE(reference_rope(c).rounded, reference_rope(c, fp).rounded);
  // at small positions with a representable table, the two models agree
  RopeCase s = make_case(Dtype::f32, Layout::interleaved, 4, 4, {3}, {1.0f, 2.0f, 3.0f, 4.0f});
  s.inv_freq = {1.0, 0.5};
  EXPECT_EQ(reference_rope(s).rounded, reference_rope(s, fp).rounded);
}

TEST(Reference, NegativePositionsRotateBackwards) {
  std::mt19937_64 rng(23);
  std::vector<float> vals;
  for (int k = 0; k < 8; ++k) vals.push_back(random_value(rng, Dtype::f32, false));
  RopeCase c = make_case(Dtype::f32, Layout::half_split, 8, 8, {-1, -1000, -(int64_t(1) << 40)}, vals);
  for (int tok = 0; tok < 3; ++tok)
    for (size_t k = 0; k < 8; ++k) store_f32(Dtype::f32, c.input.data(), tok * 8 + k, vals[k]);
  EXPECT_EQ(compare(c, reference_rope(c), independent(c, AngleModel::exact)), "");
  EXPECT_EQ(exact_angle(c, 0, -1000), -1000.0);
}

// ---- invalid cases -------------------------------------------------------------------

TEST(Reference, InvalidCasesThrow) {
  const RopeCase ok = make_case(Dtype::f32, Layout::interleaved, 4, 4, {1}, {1.0f});
  EXPECT_NO_THROW(reference_rope(ok));
  auto bad = [&](auto mutate) {
    RopeCase c = ok;
    mutate(c);
    return c;
  };
  EXPECT_THROW(reference_rope(bad([](RopeCase& c) { c.rotary_dim = 3; })), std::invalid_argument);
  EXPECT_THROW(reference_rope(bad([](RopeCase& c) { c.rotary_dim = 6; })), std::invalid_argument);
  EXPECT_THROW(reference_rope(bad([](RopeCase& c) { c.rotary_dim = 0; })), std::invalid_argument);
  EXPECT_THROW(reference_rope(bad([](RopeCase& c) { c.head_dim = 0; })), std::invalid_argument);
  EXPECT_THROW(reference_rope(bad([](RopeCase& c) { c.n_heads = 0; })), std::invalid_argument);
  EXPECT_THROW(reference_rope(bad([](RopeCase& c) { c.positions.clear(); })), std::invalid_argument);
  EXPECT_THROW(reference_rope(bad([](RopeCase& c) { c.input.pop_back(); })), std::invalid_argument);
  EXPECT_THROW(reference_rope(bad([](RopeCase& c) { c.base = 0; })), std::invalid_argument);
  EXPECT_THROW(reference_rope(bad([](RopeCase& c) { c.base = -2; })), std::invalid_argument);
  EXPECT_THROW(reference_rope(bad([](RopeCase& c) { c.base = INFINITY; })), std::invalid_argument);
  EXPECT_THROW(reference_rope(bad([](RopeCase& c) { c.position_scale = NAN; })), std::invalid_argument);
  EXPECT_THROW(reference_rope(bad([](RopeCase& c) { c.inv_freq = {1.0}; })), std::invalid_argument);
  EXPECT_THROW(reference_rope(bad([](RopeCase& c) { c.inv_freq = {1.0, NAN}; })), std::invalid_argument);
  // ABI v2 fields.
  EXPECT_THROW(reference_rope(bad([](RopeCase& c) { c.rotary_offset = 1; })), std::invalid_argument);
  EXPECT_THROW(reference_rope(bad([](RopeCase& c) { c.n_pos_axes = 5; })), std::invalid_argument);
  EXPECT_THROW(reference_rope(bad([](RopeCase& c) { c.n_pos_axes = 2; })), std::invalid_argument);  // 1 position
  EXPECT_THROW(reference_rope(bad([](RopeCase& c) { c.pair_axis = {0, 1}; })), std::invalid_argument);
  EXPECT_THROW(reference_rope(bad([](RopeCase& c) { c.pair_axis = {0}; })), std::invalid_argument);
  EXPECT_THROW(reference_rope(bad([](RopeCase& c) { c.attention_factor = 0; })), std::invalid_argument);
  EXPECT_THROW(reference_rope(bad([](RopeCase& c) { c.attention_factor = INFINITY; })), std::invalid_argument);
  EXPECT_THROW(reference_rope(bad([](RopeCase& c) {
                 c.freq_rule = FrequencyRule{};
                 c.freq_rule->type = FrequencyRuleType::yarn;  // no factor
               })),
               std::invalid_argument);
  EXPECT_THROW(reference_rope(bad([](RopeCase& c) {
                 c.freq_rule = FrequencyRule{};
                 c.inv_freq = {1.0, 0.5};
               })),
               std::invalid_argument);
  ReferenceOptions low;
  low.working_bits = 16;
  EXPECT_THROW(reference_rope(ok, low), std::invalid_argument);
}

}  // namespace
