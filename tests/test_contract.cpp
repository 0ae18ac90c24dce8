// Contracts (properties/contract.hpp) and the per-pair allowances derived from
// them (docs/error-model.md, "Contracts"):
//  - the SPEC grammar: every clause, presets, errors, exact round trips;
//  - widening a clause never shrinks an allowance;
//  - simulated pipelines that do exactly what a clause allows (f32 angles off by
//    K ulps, a cos/sin cache rounded to f16/bf16, products and sums rounded in
//    f16/bf16 through f32, flushed subnormals) pass under that clause, and
//    reach a sizeable share of the derived allowance (the bound is not vacuous);
//  - the identity clause (values vs bits) and denormals=flush in the judge;
//  - power: at small positions a sign flip, a swapped cos/sin and an
//    off-by-one position are far outside even the loosest contract.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <random>
#include <string>

#include "core/rope_case.hpp"
#include "properties/contract.hpp"
#include "properties/error_model.hpp"
#include "properties/judge.hpp"
#include "properties/table_fidelity.hpp"
#include "reference/reference.hpp"

using namespace ropecheck;

namespace {

Contract parse(const std::string& s) {
  std::string err;
  auto c = parse_contract(s, &err);
  EXPECT_TRUE(c.has_value()) << s << ": " << err;
  return c.value_or(Contract{});
}

std::string parse_error(const std::string& s) {
  std::string err;
  EXPECT_FALSE(parse_contract(s, &err).has_value()) << s;
  return err;
}

Criteria criteria(const Contract& c) { return Criteria::of(KernelErrorModel::for_contract(c), c); }

double round_to(Dtype t, double v) {
  unsigned char b[4];
  store_f32(t, b, 0, float(v));
  return load_f32(t, b, 0);
}

// One operation of a narrow type as CPU libraries do it: in f32, rounded to the type.
double op(Dtype t, double v) { return round_to(t, double(float(v))); }

double flush(const Format& f, double v, bool on) { return on && std::fabs(v) < f.min_normal() ? 0.0 * v : v; }

// v converted to t toward zero (a truncating store: vLLM's CPU bf16 conversion keeps the top 16 bits).
double trunc_to(Dtype t, double v) {
  if (t == Dtype::f32) {
    float r = float(v);
    if (std::fabs(double(r)) > std::fabs(v)) r = std::nextafter(r, 0.0f);
    return r;
  }
  double r = round_to(t, v);
  if (std::isfinite(r) && r != 0 && std::fabs(r) > std::fabs(v)) {
    unsigned char b[4];
    store_f32(t, b, 0, float(r));
    const uint32_t bits = load_bits(t, b, 0);
    r = bits_to_double(t, bits - 1);  // (sign and magnitude: one step toward zero)
  }
  return r;
}

// A case with random inputs of moderate magnitude (some tiny) at the given positions.
RopeCase random_case(Dtype d, Layout l, std::vector<int64_t> positions, uint32_t hd, double base, std::mt19937_64& rng,
                     bool tiny = false) {
  RopeCase c;
  c.dtype = d;
  c.layout = l;
  c.head_dim = hd;
  c.rotary_dim = hd;
  c.n_heads = 2;
  c.positions = std::move(positions);
  c.base = base;
  c.input.assign(c.n_bytes(), 0);
  std::uniform_real_distribution<double> mant(1.0, 2.0);
  const Format f = format_of(d);
  for (size_t k = 0; k < c.n_elements(); ++k) {
    const int e = tiny ? f.emin - int(rng() % 6) + 2 : int(rng() % 13) - 6;
    store_f32(d, c.input.data(), k, float(std::ldexp(mant(rng), e) * ((rng() & 1) ? -1 : 1)));
  }
  return c;
}

// A kernel that does exactly what a contract allows, as badly as it allows: the angle off by up to K ulps of
// f32 (K drawn per pair, the sign at random), cos/sin of that angle rounded to the cache type, the input
// rounded to a narrower arithmetic type, each product and the sum rounded in it (through f32), subnormal
// inputs and results flushed, the result stored to nearest even.
Bytes simulate(const RopeCase& c, const Contract& k, double angle_ulps, std::mt19937_64& rng) {
  Bytes out = c.input;
  const Dtype d = c.dtype;
  const Format fo = format_of(d), fa = format_of(k.arith), fc = format_of(k.cos_sin);
  const bool fl = k.flush_denormals;
  std::uniform_real_distribution<double> unit(-1.0, 1.0);
  for (size_t t = 0; t < c.n_tokens(); ++t)
    for (uint32_t i = 0; i < c.rotary_dim / 2; ++i) {
      const double theta = std::pow(c.base, -2.0 * i / c.rotary_dim);
      const double phi = double(c.positions[t]) * theta;
      const double dphi = phi == 0 ? 0 : angle_ulps * ulp32(phi) * unit(rng);
      double cs = std::cos(phi + dphi), sn = std::sin(phi + dphi);
      cs = flush(fc, op(k.cos_sin, cs), fl);
      sn = flush(fc, op(k.cos_sin, sn), fl);
      for (size_t h = 0; h < c.n_heads; ++h) {
        const size_t b = head_offset(c, t, h);
        const auto [d0, d1] = pair_dims(c.layout, c.rotary_dim, i);
        double x0 = flush(fo, load_f32(d, c.input.data(), b + d0), fl);
        double x1 = flush(fo, load_f32(d, c.input.data(), b + d1), fl);
        if (fa.precision < fo.precision) {
          x0 = round_to(k.arith, x0);
          x1 = round_to(k.arith, x1);
        }
        auto mul = [&](double a, double b) { return flush(fa, op(k.arith, a * b), fl); };
        // stores=truncate: the conversion to the storage type rounds toward zero (with arithmetic in that type,
        // the sum's last rounding is that conversion).
        const bool trunc_sum = k.truncating_stores && k.arith == d;
        auto sum = [&](double a, double b) {
          if (trunc_sum) return flush(fa, trunc_to(d, d == Dtype::f32 ? a + b : double(float(a + b))), fl);
          return flush(fa, op(k.arith, a + b), fl);
        };
        auto store = [&](double y) { return k.truncating_stores && !trunc_sum ? trunc_to(d, y) : round_to(d, y); };
        const double y0 = sum(mul(x0, cs), -mul(x1, sn)), y1 = sum(mul(x0, sn), mul(x1, cs));
        store_f32(d, out.data(), b + d0, float(flush(fo, store(y0), fl)));
        store_f32(d, out.data(), b + d1, float(flush(fo, store(y1), fl)));
      }
    }
  return out;
}

}  // namespace

TEST(ContractGrammar, EveryClauseAndItsValues) {
  const Contract c = parse("angles=f32:64,cos-sin=bf16,arith=f16,denormals=flush,identity=bits");
  EXPECT_EQ(c.angles, Contract::Angles::f32);
  EXPECT_EQ(c.angle_ulps, 64);
  EXPECT_EQ(c.cos_sin, Dtype::bf16);
  EXPECT_EQ(c.arith, Dtype::f16);
  EXPECT_TRUE(c.flush_denormals);
  EXPECT_TRUE(c.identity_bits);
  EXPECT_EQ(parse("angles=exact"), Contract{});
  EXPECT_EQ(parse(" angles = f32 , identity=values ").angles, Contract::Angles::f32);
  EXPECT_EQ(parse("angles=f32").angle_ulps, 0);  // derived per pair
  EXPECT_EQ(parse("denormals=keep,cos-sin=f32,arith=f32"), Contract{});
  EXPECT_TRUE(parse("stores=truncate").truncating_stores);
  EXPECT_EQ(parse("stores=nearest"), Contract{});
  // The canonical spec of a contract without the clause reads as before the clause existed (reports, JUnit
  // and verdicts of unchanged runs keep their text); with it, it is named last.
  EXPECT_EQ(Contract{}.spec(), "angles=exact,cos-sin=f32,arith=f32,denormals=keep,identity=values");
  EXPECT_EQ(parse("stores=truncate,arith=bf16").spec(),
            "angles=exact,cos-sin=f32,arith=bf16,denormals=keep,identity=values,stores=truncate");
  EXPECT_EQ(parse("stores=truncate").short_spec(), "stores=truncate");
  EXPECT_EQ(loosest_contract(), parse("angles=f32:64,cos-sin=bf16,arith=bf16,denormals=flush"));
}

TEST(ContractGrammar, PresetsExpandAndEveryPresetParses) {
  for (const auto& p : contract_presets()) EXPECT_EQ(parse(p.name), parse(p.spec)) << p.name;
  EXPECT_EQ(parse("hf-eager-bf16"), parse("angles=f32,cos-sin=bf16,arith=bf16"));
  EXPECT_EQ(parse("loosest"), loosest_contract());
  EXPECT_TRUE(parse("builtin").identity_bits);
}

TEST(ContractGrammar, ClearErrors) {
  EXPECT_NE(parse_error("").find("empty"), std::string::npos);
  EXPECT_NE(parse_error("nosuchpreset").find("preset"), std::string::npos);
  EXPECT_NE(parse_error("angles=f64").find("angles"), std::string::npos);
  EXPECT_NE(parse_error("angles=f32:0").find("K"), std::string::npos);
  EXPECT_NE(parse_error("angles=f32:-3").find("K"), std::string::npos);
  EXPECT_NE(parse_error("angles=f32:nan").find("K"), std::string::npos);
  EXPECT_NE(parse_error("angles=f32:1e300").find("K"), std::string::npos);
  EXPECT_NE(parse_error("cos-sin=f8").find("cos-sin"), std::string::npos);
  EXPECT_NE(parse_error("arith=").find("arith"), std::string::npos);
  EXPECT_NE(parse_error("denormals=daz").find("denormals"), std::string::npos);
  EXPECT_NE(parse_error("identity=maybe").find("identity"), std::string::npos);
  EXPECT_NE(parse_error("angles=exact,angles=f32").find("twice"), std::string::npos);
  EXPECT_NE(parse_error("colour=red").find("unknown clause"), std::string::npos);
  EXPECT_NE(parse_error("stores=down").find("stores"), std::string::npos);
  EXPECT_NE(parse_error("angles=exact,,arith=f32").find("KEY=VALUE"), std::string::npos);
}

TEST(ContractGrammar, SpecRoundTripsExactly) {
  std::mt19937_64 rng(5);
  const Dtype ds[] = {Dtype::f32, Dtype::f16, Dtype::bf16};
  for (int k = 0; k < 500; ++k) {
    Contract c;
    if (rng() % 2) {
      c.angles = Contract::Angles::f32;
      c.angle_ulps = rng() % 3 == 0 ? 0 : std::ldexp(double(rng() % 1000001) + 1, int(rng() % 30) - 15);
    }
    c.cos_sin = ds[rng() % 3];
    c.arith = ds[rng() % 3];
    c.flush_denormals = rng() % 2;
    c.identity_bits = rng() % 2;
    c.truncating_stores = rng() % 2;
    EXPECT_EQ(parse(c.spec()), c) << c.spec();
    EXPECT_EQ(parse(c.short_spec() == "default" ? "angles=exact" : c.short_spec()), c) << c.short_spec();
  }
}

// Widening any clause never shrinks any part of any pair's allowance.
TEST(ContractAllowance, WideningNeverShrinks) {
  std::mt19937_64 rng(11);
  const Dtype ds[] = {Dtype::f32, Dtype::f16, Dtype::bf16};
  for (int k = 0; k < 3000; ++k) {
    RopeCase c;
    c.dtype = ds[rng() % 3];
    c.rotary_dim = c.head_dim = 2 * uint32_t(1 + rng() % 64);
    c.base = std::exp(std::uniform_real_distribution<double>(0.5, 14)(rng));
    c.positions = {1};
    const uint32_t i = uint32_t(rng() % (c.rotary_dim / 2));
    const double norm = std::ldexp(1.0, int(rng() % 300) - 150);
    const double phi = std::ldexp(1.0, int(rng() % 60) - 30) * std::uniform_real_distribution<double>(1, 2)(rng);
    Contract a;
    a.cos_sin = ds[rng() % 3];
    a.arith = ds[rng() % 3];
    if (rng() % 2) {
      a.angles = Contract::Angles::f32;
      a.angle_ulps = double(1 + rng() % 100);
    }
    Contract b = a;
    switch (rng() % 6) {
      case 5: b.truncating_stores = true; break;
      case 0:
        b.angles = Contract::Angles::f32;
        b.angle_ulps = a.angles == Contract::Angles::f32 ? a.angle_ulps * 2 : 1e6;
        break;
      // f16 and bf16 are not ordered (bf16 is coarser, f16's range narrower): widening starts from f32.
      case 1:
        if (a.cos_sin == Dtype::f32) b.cos_sin = rng() % 2 ? Dtype::f16 : Dtype::bf16;
        break;
      case 2:
        if (a.arith == Dtype::f32) b.arith = rng() % 2 ? Dtype::f16 : Dtype::bf16;
        break;
      case 3: b.flush_denormals = true; break;
      default: b.identity_bits = true; break;  // no effect on the allowance
    }
    const PairAllowance pa = criteria(a).allowance(c, i, norm, phi), pb = criteria(b).allowance(c, i, norm, phi);
    ASSERT_GE(pb.radial, pa.radial) << a.spec() << " -> " << b.spec();
    ASSERT_GE(pb.tangential, pa.tangential) << a.spec() << " -> " << b.spec();
    ASSERT_GE(pb.total, pa.total) << a.spec() << " -> " << b.spec();
    ASSERT_LE(pa.total, std::hypot(pa.radial, pa.tangential) * (1 + 1e-12));
  }
}

// The derived allowances hold for pipelines that do exactly what each clause allows, and are not vacuous:
// the simulated worst case reaches a sizeable share of them.
TEST(ContractAllowance, SimulatedPipelinesPassAndComeClose) {
  struct Row {
    const char* spec;
    Dtype d;
    double angle_ulps;  // the simulated angle error (0: none)
    bool tiny;          // inputs near the smallest normal
  };
  const Row rows[] = {
      {"angles=exact", Dtype::f32, 0, false},
      {"angles=exact", Dtype::bf16, 0, false},
      {"angles=f32:64", Dtype::f32, 64, false},
      {"angles=f32:8", Dtype::f16, 8, false},
      {"cos-sin=bf16", Dtype::f32, 0, false},
      {"cos-sin=f16", Dtype::f32, 0, false},
      {"cos-sin=bf16", Dtype::bf16, 0, false},
      {"arith=bf16", Dtype::bf16, 0, false},
      {"arith=f16", Dtype::f16, 0, false},
      {"angles=f32:16,cos-sin=bf16,arith=bf16", Dtype::bf16, 16, false},
      {"angles=f32:16,cos-sin=f16,arith=f16", Dtype::f16, 16, false},
      {"arith=bf16", Dtype::f16, 0, false},
      {"denormals=flush", Dtype::f32, 0, true},
      {"denormals=flush", Dtype::f16, 0, true},
      {"angles=f32:64,cos-sin=bf16,arith=bf16,denormals=flush", Dtype::bf16, 64, false},
      // stores=truncate: f32 arithmetic stored toward zero (vLLM's CPU kernel), and the sum truncated in the
      // storage type itself.
      {"stores=truncate", Dtype::bf16, 0, false},
      {"stores=truncate", Dtype::f16, 0, false},
      {"stores=truncate", Dtype::f32, 0, false},
      {"stores=truncate,arith=bf16", Dtype::bf16, 0, false},
      {"stores=truncate,cos-sin=bf16,arith=bf16", Dtype::bf16, 0, false},
      {"stores=truncate,denormals=flush", Dtype::bf16, 0, true},
  };
  std::mt19937_64 rng(2026);
  for (const Row& row : rows) {
    const Contract k = parse(row.spec);
    double worst = 0;
    for (int rep = 0; rep < 6; ++rep) {
      for (Layout l : {Layout::interleaved, Layout::half_split}) {
        const RopeCase c = random_case(row.d, l, {0, 1, 2, 3, 7, 1000, 77777, 1 << 20}, 64,
                                       rep % 2 ? 10000.0 : 500000.0, rng, row.tiny);
        const ReferenceOutput ref = reference_rope(c);
        const Bytes got = simulate(c, k, row.angle_ulps, rng);
        const Judgement j = judge_output(c, ref, got.data(), criteria(k));
        ASSERT_TRUE(j.ok()) << row.spec << " on " << c.summary() << "\n" << j.report(2);
        worst = std::max(worst, j.worst_ratio);
      }
    }
    // Not vacuous: random inputs reach a sizeable share of the worst case.
    EXPECT_GT(worst, 0.2) << row.spec << " " << to_string(row.d) << ": worst ratio " << worst;
    std::printf("%-58s %-5s worst pair at %.3f of its allowance\n", row.spec, std::string(to_string(row.d)).c_str(),
                worst);
  }
}

// stores=truncate is needed and enough: a pipeline that truncates its bf16 stores (vLLM's CPU kernel) leaves
// pairs beyond the default allowance and a mean radial error far past the bias check's 1/8 u; under the
// clause every pair is within its allowance and the clause's systematic share covers the shortening.
TEST(ContractAllowance, TruncatingStoresNeedTheirClauseAndItCoversTheirBias) {
  std::mt19937_64 rng(77);
  const Contract trunc = parse("stores=truncate");
  for (Dtype d : {Dtype::bf16, Dtype::f16}) {
    size_t default_failures = 0;
    double n = 0, sum_r = 0, sum_sys_trunc = 0, sum_sys_default = 0;
    for (int rep = 0; rep < 24; ++rep) {
      const RopeCase c = random_case(d, rep % 2 ? Layout::interleaved : Layout::half_split, {1, 2, 3, 7, 1000, 77777},
                                     64, 10000.0, rng);
      const ReferenceOutput ref = reference_rope(c);
      const Bytes got = simulate(c, trunc, 0, rng);
      const Judgement jt = judge_output(c, ref, got.data(), criteria(trunc));
      ASSERT_TRUE(jt.ok()) << c.summary() << "\n" << jt.report(2);
      const Judgement jd = judge_output(c, ref, got.data(), criteria(Contract{}));
      default_failures += jd.violations;
      n += double(jt.bias.n);
      sum_r += jt.bias.by_cache[0].sum_r;
      sum_sys_trunc += jt.bias.sum_systematic;
      sum_sys_default += jd.bias.sum_systematic;
    }
    const double mean = sum_r / n;
    EXPECT_GT(default_failures, 0u) << to_string(d);
    EXPECT_LT(mean, -0.3) << to_string(d);                          // outputs shortened
    EXPECT_LT(sum_sys_default / n, 1e-9) << to_string(d);             // the default allows no such share
    EXPECT_LE(-mean, 0.125 + sum_sys_trunc / n) << to_string(d);      // the clause's share covers it
    EXPECT_LE(sum_sys_trunc / n, 1.1) << to_string(d);                // and is about one u, not more
    std::printf("%s: mean radial %+.3f u, stores=truncate's systematic share %.3f u\n", std::string(to_string(d)).c_str(),
                mean, sum_sys_trunc / n);
  }
}

// ---- ABI v3: a table given by the caller -------------------------------------------------------------------

namespace {

// A random case with a table of `kind` in `table_dtype`: rows 0..top, the af-scaled cos and sin of the exact
// angles of base 10000 rounded to the table's type (angle tables: the f32 angle), positions among the rows.
RopeCase table_case(Dtype d, Layout l, TableKind kind, Dtype table_dtype, double af, std::mt19937_64& rng,
                    bool tiny = false) {
  RopeCase c = random_case(d, l, {0, 1, 2, 3, 7, 1000, 4095, 77}, 64, 10000.0, rng, tiny);
  CosSinTable t;
  t.kind = kind;
  t.dtype = kind == TableKind::angle ? Dtype::f32 : table_dtype;
  t.rows = 4096;
  const uint32_t np = c.rotary_dim / 2;
  for (size_t r = 0; r < t.rows; ++r)
    for (uint32_t i = 0; i < np; ++i) {
      const double phi = double(r) * std::pow(10000.0, -2.0 * i / c.rotary_dim);
      if (kind == TableKind::angle) {
        t.cos.push_back(double(float(phi)));
      } else {
        t.cos.push_back(round_to(t.dtype, af * std::cos(phi)));
        t.sin.push_back(round_to(t.dtype, af * std::sin(phi)));
      }
    }
  c.attention_factor = kind == TableKind::angle ? af : 1.0;
  c.table = std::move(t);
  return c;
}

// A kernel on a given table, as badly as the contract allows: cos and sin as given (rounded to the cos-sin type
// when that is narrower than the table's), or of the f32 angle (rounded to f32, then the cos-sin type, times
// the attention factor); the input rounded to a narrower arithmetic type, products and sums rounded in it,
// the store to nearest even. Bugs: `sin_sign` -1 negates sin; `row_of_token` takes row t (the token's index)
// instead of row m (its position).
Bytes simulate_table(const RopeCase& c, const Contract& k, double sin_sign = 1, bool row_of_token = false) {
  Bytes out = c.input;
  const Dtype d = c.dtype;
  const Format fo = format_of(d), fa = format_of(k.arith);
  const CosSinTable& tb = *c.table;
  const uint32_t np = c.rotary_dim / 2;
  const bool narrower = format_of(k.cos_sin).precision < format_of(tb.dtype).precision;
  for (size_t t = 0; t < c.n_tokens(); ++t)
    for (uint32_t i = 0; i < np; ++i) {
      const size_t row = row_of_token ? t : size_t(c.positions[t]);
      double cs, sn;
      if (tb.is_angle()) {
        const double a = tb.cos_at(row, i, np);
        cs = c.attention_factor * op(k.cos_sin, double(float(std::cos(a))));
        sn = c.attention_factor * op(k.cos_sin, double(float(std::sin(a))));
      } else {
        cs = tb.cos_at(row, i, np);
        sn = tb.sin_at(row, i, np);
        if (narrower) {
          cs = round_to(k.cos_sin, cs);
          sn = round_to(k.cos_sin, sn);
        }
      }
      sn *= sin_sign;
      for (size_t h = 0; h < c.n_heads; ++h) {
        const size_t b = head_offset(c, t, h);
        const auto [d0, d1] = pair_dims(c.layout, c.rotary_dim, i);
        double x0 = load_f32(d, c.input.data(), b + d0), x1 = load_f32(d, c.input.data(), b + d1);
        if (fa.precision < fo.precision) {
          x0 = round_to(k.arith, x0);
          x1 = round_to(k.arith, x1);
        }
        auto mul = [&](double a, double b) { return op(k.arith, a * b); };
        auto sum = [&](double a, double b) { return op(k.arith, a + b); };
        const double y0 = sum(mul(x0, cs), -mul(x1, sn)), y1 = sum(mul(x0, sn), mul(x1, cs));
        store_f32(d, out.data(), b + d0, float(round_to(d, y0)));
        store_f32(d, out.data(), b + d1, float(round_to(d, y1)));
      }
    }
  return out;
}

}  // namespace

// The kernel's arithmetic on the table it was given: judged against the exact values of the table as given
// (no angle or cos/sin allowance for them), its contract's arithmetic and cache clauses still apply.
TEST(ContractAllowance, TableGivenPipelinesPassAndComeClose) {
  struct Row {
    const char* spec;
    Dtype d;
    TableKind kind;
    Dtype table;
    double af;
  };
  const Row rows[] = {
      {"angles=exact", Dtype::f32, TableKind::cos_sin_2, Dtype::f32, 1.0},
      {"angles=exact", Dtype::f32, TableKind::cos_sin_cat, Dtype::bf16, 1.0},
      {"angles=exact", Dtype::bf16, TableKind::cos_sin_full, Dtype::f32, 1.1386294361119891},
      {"arith=bf16", Dtype::bf16, TableKind::cos_sin_2, Dtype::bf16, 1.0},
      {"arith=f16", Dtype::f16, TableKind::cos_sin_cat, Dtype::f16, 0.75},
      {"cos-sin=bf16", Dtype::f32, TableKind::cos_sin_2, Dtype::f32, 1.0},  // FlashAttention #823's cast
      {"cos-sin=f16,arith=f16", Dtype::f16, TableKind::cos_sin_full, Dtype::f32, 1.0},
      {"angles=exact", Dtype::f32, TableKind::angle, Dtype::f32, 1.0},
      {"cos-sin=bf16,arith=bf16", Dtype::bf16, TableKind::angle, Dtype::f32, 1.25},
  };
  std::mt19937_64 rng(2027);
  for (const Row& row : rows) {
    const Contract k = parse(row.spec);
    double worst = 0;
    for (int rep = 0; rep < 4; ++rep)
      for (Layout l : {Layout::interleaved, Layout::half_split}) {
        const RopeCase c = table_case(row.d, l, row.kind, row.table, row.af, rng);
        ASSERT_EQ(c.validate(), "");
        const ReferenceOutput ref = reference_rope(c);
        const Bytes got = simulate_table(c, k);
        const Judgement j = judge_output(c, ref, got.data(), criteria(k));
        ASSERT_TRUE(j.ok()) << row.spec << " " << to_string(row.kind) << " on " << c.summary() << "\n" << j.report(2);
        worst = std::max(worst, j.worst_ratio);
      }
    EXPECT_GT(worst, 0.2) << row.spec << " " << to_string(row.kind) << ": worst ratio " << worst;
    std::printf("table %-12s %-5s %-26s %-5s worst pair at %.3f of its allowance\n",
                std::string(to_string(row.kind)).c_str(), std::string(to_string(row.table)).c_str(), row.spec,
                std::string(to_string(row.d)).c_str(), worst);
  }
}

// Under the loosest contract a table-given kernel that negates sin or indexes the table by the token's index
// instead of its position fails by far (the angle clause does not apply to a given table).
TEST(ContractPower, TableBugsFailUnderTheLoosest) {
  std::mt19937_64 rng(5);
  for (Dtype d : {Dtype::f32, Dtype::f16, Dtype::bf16})
    for (TableKind kind : {TableKind::cos_sin_2, TableKind::angle}) {
      const RopeCase c = table_case(d, Layout::half_split, kind, Dtype::bf16, 1.0, rng);
      const ReferenceOutput ref = reference_rope(c);
      for (int bug = 0; bug < 2; ++bug) {
        const Bytes got = simulate_table(c, loosest_contract(), bug == 0 ? -1.0 : 1.0, bug == 1);
        const Judgement j = judge_output(c, ref, got.data(), criteria(loosest_contract()));
        EXPECT_FALSE(j.ok()) << (bug ? "row of token" : "sin sign") << " " << to_string(d);
        EXPECT_GT(j.worst_ratio, 10.0) << (bug ? "row of token" : "sin sign") << " " << to_string(d);
      }
    }
}

// ---- ABI v3: table fidelity ----------------------------------------------------------------------------------

namespace {

RopeCase angle_source(double base, double af, bool rule) {
  RopeCase c;
  c.head_dim = c.rotary_dim = 64;
  c.base = base;
  c.attention_factor = af;
  if (rule) {
    FrequencyRule r;
    r.type = FrequencyRuleType::yarn;
    r.factor = 4;
    r.original_max_position_embeddings = 32768;
    c.freq_rule = r;
  }
  c.positions = {0};
  c.input.assign(c.n_bytes(), 0);
  return c;
}

}  // namespace

// The tables the harness builds pass the contracts that describe their pipelines, and reach a sizeable share of
// the allowance; the conventional f32 pipeline's tables fail angles=exact at far positions (they are less
// accurate than that clause promises).
TEST(TableFidelity, BuiltTablesPassTheContractsOfTheirPipelines) {
  struct Row {
    TableKind kind;
    Dtype dtype;
    TablePipeline pipeline;
    const char* contract;
    double af;
    bool rule;
    bool pass;
  };
  const Row rows[] = {
      {TableKind::cos_sin_2, Dtype::f32, TablePipeline::correctly_rounded, "angles=exact", 1.0, false, true},
      {TableKind::cos_sin_cat, Dtype::bf16, TablePipeline::correctly_rounded, "angles=exact,cos-sin=bf16", 1.0, false, true},
      {TableKind::cos_sin_full, Dtype::f16, TablePipeline::correctly_rounded, "angles=exact,cos-sin=f16", 1.1386294361119891, true, true},
      {TableKind::cos_sin_2, Dtype::f32, TablePipeline::conventional_f32, "angles=f32", 1.0, false, true},
      {TableKind::cos_sin_2, Dtype::bf16, TablePipeline::conventional_f32, "angles=f32,cos-sin=bf16", 1.1386294361119891, true, true},
      {TableKind::angle, Dtype::f32, TablePipeline::correctly_rounded, "angles=exact", 1.0, false, true},
      {TableKind::angle, Dtype::f32, TablePipeline::conventional_f32, "angles=f32", 1.0, true, true},
      {TableKind::cos_sin_2, Dtype::f32, TablePipeline::conventional_f32, "angles=exact", 1.0, false, false},
  };
  for (const Row& row : rows) {
    const RopeCase src = angle_source(500000.0, row.af, row.rule);
    const CosSinTable t = build_table(src, row.kind, row.dtype, 600, row.pipeline);
    const TableJudgement j = judge_table(src, t, KernelErrorModel::for_contract(parse(row.contract)));
    const std::string what = std::string(to_string(row.kind)) + " " + std::string(to_string(row.dtype)) + " " +
                             std::string(to_string(row.pipeline)) + " under " + row.contract;
    EXPECT_EQ(j.ok(), row.pass) << what << "\n" << j.report();
    if (row.pass) {
      EXPECT_GT(j.worst_ratio, 0.1) << what;
    }
    std::printf("%-58s %s worst %.3f\n", what.c_str(), j.ok() ? "pass" : "FAIL", j.worst_ratio);
  }
}

// A table built wrong fails with its cause named.
TEST(TableFidelity, WrongTablesFailWithTheirCause) {
  const RopeCase src = angle_source(10000.0, 1.25, false);
  const KernelErrorModel f32 = KernelErrorModel::for_contract(parse("angles=exact"));
  const CosSinTable good = build_table(src, TableKind::cos_sin_2, Dtype::f32, 300, TablePipeline::correctly_rounded);
  ASSERT_TRUE(judge_table(src, good, f32).ok());
  struct Bug {
    const char* cause;
    std::function<void(CosSinTable&)> plant;
  };
  const uint32_t np = 32;
  const Bug bugs[] = {
      {"sin negated", [](CosSinTable& t) { for (double& v : t.sin) v = -v; }},
      {"cos and sin swapped", [](CosSinTable& t) { std::swap(t.cos, t.sin); }},
      {"attention factor (1.25) is missing", [](CosSinTable& t) {
         for (double& v : t.cos) v = double(float(v / 1.25));
         for (double& v : t.sin) v = double(float(v / 1.25));
       }},
      {"attention factor (1.25) is applied twice", [](CosSinTable& t) {
         for (double& v : t.cos) v = double(float(v * 1.25));
         for (double& v : t.sin) v = double(float(v * 1.25));
       }},
      {"row r holds the values of position r+1", [&](CosSinTable& t) {
         t.cos.erase(t.cos.begin(), t.cos.begin() + np);
         t.sin.erase(t.sin.begin(), t.sin.begin() + np);
         t.rows -= 1;
       }},
      {"rounded to bf16", [](CosSinTable& t) {
         for (double& v : t.cos) v = round_to(Dtype::bf16, v);
         for (double& v : t.sin) v = round_to(Dtype::bf16, v);
       }},
  };
  for (const Bug& b : bugs) {
    CosSinTable t = good;
    b.plant(t);
    const TableJudgement j = judge_table(src, t, f32);
    EXPECT_FALSE(j.ok()) << b.cause;
    EXPECT_NE(j.cause.find(b.cause), std::string::npos) << b.cause << "\n" << j.report();
  }
  // The bf16 table passes the contract that declares it.
  CosSinTable narrow = good;
  for (double& v : narrow.cos) v = round_to(Dtype::bf16, v);
  for (double& v : narrow.sin) v = round_to(Dtype::bf16, v);
  EXPECT_TRUE(judge_table(src, narrow, KernelErrorModel::for_contract(parse("angles=exact,cos-sin=bf16"))).ok());
  // An angle table with its angles negated.
  CosSinTable ang = build_table(src, TableKind::angle, Dtype::f32, 300, TablePipeline::correctly_rounded);
  for (double& v : ang.cos) v = -v;
  const TableJudgement ja = judge_table(src, ang, f32);
  EXPECT_NE(ja.cause.find("angles negated"), std::string::npos) << ja.report();
}

TEST(ContractJudge, IdentityValuesAcceptsSignedZeroAndBitsDoesNot) {
  RopeCase c;
  c.dtype = Dtype::f32;
  c.head_dim = c.rotary_dim = 2;
  c.positions = {0};
  c.input.assign(c.n_bytes(), 0);
  store_f32(c.dtype, c.input.data(), 0, -0.0f);
  store_f32(c.dtype, c.input.data(), 1, -3.0f);
  const ReferenceOutput ref = reference_rope(c);
  Bytes got = c.input;
  store_f32(c.dtype, got.data(), 0, +0.0f);  // x0*1 - x1*0 turns -0 into +0
  EXPECT_TRUE(judge_output(c, ref, got.data(), criteria(parse("identity=values"))).ok());
  const Judgement bits = judge_output(c, ref, got.data(), criteria(parse("identity=bits")));
  ASSERT_FALSE(bits.ok());
  EXPECT_EQ(bits.findings[0].check, "identity");
  // A changed value fails under either.
  store_f32(c.dtype, got.data(), 1, -3.0000002f);
  EXPECT_FALSE(judge_output(c, ref, got.data(), criteria(parse("identity=values"))).ok());
}

// Pass-through elements on both sides of the rotated slice are held to the identity clause: their values under
// identity=values (a quieted signalling NaN, -0 as +0: a float conversion, autograd's zeros + g), their bits
// under identity=bits. A different number, or a NaN turned into a number, fails under both.
TEST(ContractJudge, PassThroughByValueUnderIdentityValuesBitsUnderIdentityBits) {
  RopeCase c;
  c.dtype = Dtype::f16;
  c.head_dim = 4;
  c.rotary_dim = 2;
  c.rotary_offset = 1;  // elements 0 and 3 pass through
  c.positions = {1};
  c.input.assign(c.n_bytes(), 0);
  store_bits(c.dtype, c.input.data(), 0, 0x7c01);  // a signalling NaN
  store_f32(c.dtype, c.input.data(), 1, 0.75f);
  store_f32(c.dtype, c.input.data(), 2, -1.5f);
  store_bits(c.dtype, c.input.data(), 3, 0x8000);  // -0
  const ReferenceOutput ref = reference_rope(c);
  Bytes got = ref.rounded;
  ASSERT_EQ(load_bits(c.dtype, got.data(), 0), 0x7c01u);
  store_bits(c.dtype, got.data(), 0, 0x7e01);  // quieted by a float conversion
  store_bits(c.dtype, got.data(), 3, 0x0000);  // 0 + (-0) = +0
  for (const Criteria& values : {criteria(parse("identity=values")), Criteria::flat_bound(3)})
    EXPECT_TRUE(judge_output(c, ref, got.data(), values).ok()) << judge_output(c, ref, got.data(), values).report();
  for (const Criteria& bits : {criteria(parse("identity=bits")), Criteria::flat_bound(3, true)}) {
    const Judgement j = judge_output(c, ref, got.data(), bits);
    ASSERT_EQ(j.violations, 2u) << j.report();
    EXPECT_EQ(j.findings[0].check, "pass-through");
  }
  // Clobbered: the NaN turned into 0, the zero into a number. Every contract fails it.
  for (uint32_t nan_to : {0x0000u, 0x3c00u})
    for (uint32_t zero_to : {0x8000u, 0x3c00u}) {
      Bytes bad = ref.rounded;
      store_bits(c.dtype, bad.data(), 0, nan_to);
      store_bits(c.dtype, bad.data(), 3, zero_to);
      for (const char* spec : {"default", "identity=bits", "loosest"}) {
        const Judgement j = judge_output(c, ref, bad.data(), criteria(parse(spec)));
        EXPECT_EQ(j.violations, zero_to == 0x8000u ? 1u : 2u) << spec << "\n" << j.report();
        EXPECT_FALSE(j.ok()) << spec;
      }
    }
  // The element rules themselves.
  const Criteria v = criteria(parse("identity=values")), b = criteria(parse("identity=bits"));
  EXPECT_TRUE(keeps_input(v, Dtype::f16, 0x7c01, 0x7e01));
  EXPECT_TRUE(keeps_input(v, Dtype::f32, 0x7fa00001, 0x7fe00001));
  EXPECT_TRUE(keeps_input(v, Dtype::bf16, 0x8000, 0x0000));
  EXPECT_FALSE(keeps_input(v, Dtype::f16, 0x7c01, 0x7c00));  // a NaN turned into an infinity
  EXPECT_FALSE(keeps_input(v, Dtype::f32, 0x00000001, 0x00000000));  // a subnormal flushed: only under denormals=flush
  EXPECT_TRUE(keeps_input(criteria(parse("denormals=flush")), Dtype::f32, 0x00000001, 0x80000000));
  EXPECT_FALSE(keeps_input(b, Dtype::f16, 0x7c01, 0x7e01));
  EXPECT_FALSE(keeps_input(b, Dtype::bf16, 0x8000, 0x0000));
  EXPECT_TRUE(keeps_input(b, Dtype::f16, 0x7c01, 0x7c01));
  // Two outputs: any NaN for a NaN under both; +-0 alike only under identity=values.
  EXPECT_TRUE(same_output(Dtype::f16, 0x7c01, 0x7e01, true));
  EXPECT_TRUE(same_output(Dtype::f32, 0x80000000, 0x00000000, false));
  EXPECT_FALSE(same_output(Dtype::f32, 0x80000000, 0x00000000, true));
  EXPECT_FALSE(same_output(Dtype::f32, 0x3f800000, 0x3f800001, false));
}

TEST(ContractJudge, FlushedSubnormalsOnlyUnderDenormalsFlush) {
  for (Dtype d : {Dtype::f32, Dtype::f16, Dtype::bf16}) {
    const Format f = format_of(d);
    for (int64_t m : {0, 3}) {
      RopeCase c;
      c.dtype = d;
      c.head_dim = c.rotary_dim = 2;
      c.positions = {m};
      c.input.assign(c.n_bytes(), 0);
      store_f32(d, c.input.data(), 0, float(std::ldexp(1.0, f.emin - 2)));  // subnormal
      store_f32(d, c.input.data(), 1, float(-std::ldexp(1.5, f.emin - 3)));
      const ReferenceOutput ref = reference_rope(c);
      Bytes got(c.n_bytes(), 0);  // both flushed to +0
      EXPECT_FALSE(judge_output(c, ref, got.data(), criteria(Contract{})).ok()) << to_string(d) << " m=" << m;
      EXPECT_TRUE(judge_output(c, ref, got.data(), criteria(parse("denormals=flush"))).ok()) << to_string(d) << " m=" << m;
    }
  }
}

// At positions 1, 2, 3, 7 every structural bug is far outside even the loosest contract.
TEST(ContractPower, SmallPositionsCatchStructuralBugsUnderTheLoosest) {
  std::mt19937_64 rng(3);
  for (Dtype d : {Dtype::f32, Dtype::f16, Dtype::bf16}) {
    const RopeCase c = random_case(d, Layout::interleaved, {1, 2, 3, 7}, 64, 10000.0, rng);
    const ReferenceOutput ref = reference_rope(c);
    struct Bug {
      const char* name;
      int64_t shift;
      double sign;
      bool swap;
    };
    for (const Bug& bug : {Bug{"sign", 0, -1, false}, Bug{"m+1", 1, 1, false}, Bug{"cos/sin swapped", 0, 1, true}}) {
      Bytes got = c.input;
      for (size_t t = 0; t < c.n_tokens(); ++t)
        for (uint32_t i = 0; i < c.rotary_dim / 2; ++i) {
          const double phi = bug.sign * double(c.positions[t] + bug.shift) * std::pow(c.base, -2.0 * i / c.rotary_dim);
          const double cs = bug.swap ? std::sin(phi) : std::cos(phi), sn = bug.swap ? std::cos(phi) : std::sin(phi);
          for (size_t h = 0; h < c.n_heads; ++h) {
            const size_t b = head_offset(c, t, h) + 2 * i;
            const double x0 = load_f32(d, c.input.data(), b), x1 = load_f32(d, c.input.data(), b + 1);
            store_f32(d, got.data(), b, float(x0 * cs - x1 * sn));
            store_f32(d, got.data(), b + 1, float(x0 * sn + x1 * cs));
          }
        }
      const Judgement j = judge_output(c, ref, got.data(), criteria(loosest_contract()));
      EXPECT_FALSE(j.ok()) << bug.name << " " << to_string(d);
      EXPECT_GT(j.worst_ratio, 10.0) << bug.name << " " << to_string(d) << ": only " << j.worst_ratio
                                     << "x the loosest allowance";
    }
  }
}

// ---- ABI v2 frequency rules under angles=f32 -----------------------------------------------------------------

namespace {

// Hugging Face's float32 table of a rule (modeling_rope_utils.py), emulated step by step in float: the
// pipeline `angles=f32` must be fair to. pow is taken correctly rounded (torch's is within 1-2 ulps; the K's
// pow term allows 4).
std::vector<float> hf_f32_table(const RopeCase& c) {
  const FrequencyRule& r = *c.freq_rule;
  const uint32_t R = c.rotary_dim, np = R / 2;
  std::vector<float> pos(np), inv(np);
  for (uint32_t i = 0; i < np; ++i) {
    const float e = float(2 * i) / float(R);
    pos[i] = float(std::pow(double(float(c.base)), double(e)));
    inv[i] = 1.0f / pos[i];
  }
  const float f = float(r.factor.value_or(1.0));
  std::vector<float> out(np);
  if (r.type == FrequencyRuleType::yarn) {
    const double L = double(r.original_max_position_embeddings), b = c.base;
    auto corr = [&](double n) { return R * std::log(L / (n * 2 * M_PI)) / (2 * std::log(b)); };
    double lo = corr(r.beta_fast), hi = corr(r.beta_slow);
    if (r.truncate) lo = std::floor(lo), hi = std::ceil(hi);
    lo = std::max(lo, 0.0);
    hi = std::min(hi, double(R - 1));
    if (lo == hi) hi += 0.001;
    for (uint32_t i = 0; i < np; ++i) {
      const float interp = 1.0f / (f * pos[i]);
      float ramp = (float(i) - float(lo)) / (float(hi) - float(lo));
      ramp = std::clamp(ramp, 0.0f, 1.0f);
      const float extrap_factor = 1.0f - ramp;
      out[i] = interp * (1.0f - extrap_factor) + inv[i] * extrap_factor;
    }
  } else if (r.type == FrequencyRuleType::llama3) {
    const float L = float(r.original_max_position_embeddings);
    const float lo = float(r.low_freq_factor), hi = float(r.high_freq_factor);
    const float low_wavelen = L / lo, high_wavelen = L / hi;
    for (uint32_t i = 0; i < np; ++i) {
      const float wavelen = float(2 * M_PI) / inv[i];
      const float llama = wavelen > low_wavelen ? inv[i] / f : inv[i];
      const float smooth = (L / wavelen - lo) / (hi - lo);
      const float smoothed = (1.0f - smooth) * llama / f + smooth * llama;
      const bool medium = !(wavelen < high_wavelen) && !(wavelen > low_wavelen);
      out[i] = medium ? smoothed : llama;
    }
  } else if (r.type == FrequencyRuleType::linear) {
    for (uint32_t i = 0; i < np; ++i) out[i] = inv[i] / f;
  }
  return out;
}

}  // namespace

// The derived K of each rule (docs/error-model.md, "ABI v2") covers HF's float32 table of that rule, per pair:
// the table's relative error is below K_i minus the position's and the product's roundings (2), measured
// here at the configs models ship.
TEST(ContractAllowance, HfFloat32RuleTablesStayWithinTheirDerivedK) {
  struct Cfg {
    const char* name;
    uint32_t R;
    double base;
    FrequencyRule rule;
  };
  auto yarn = [](double f, uint64_t L, bool truncate) {
    FrequencyRule r;
    r.type = FrequencyRuleType::yarn;
    r.factor = f;
    r.original_max_position_embeddings = L;
    r.truncate = truncate;
    return r;
  };
  FrequencyRule l3;
  l3.type = FrequencyRuleType::llama3;
  l3.factor = 8;
  l3.original_max_position_embeddings = 8192;
  FrequencyRule lin;
  lin.type = FrequencyRuleType::linear;
  lin.factor = 4;
  const Cfg cfgs[] = {{"qwen2.5 yarn x4", 128, 1e6, yarn(4, 32768, true)},
                      {"gpt-oss yarn x32", 64, 150000, yarn(32, 4096, false)},
                      {"deepseek yarn x40", 64, 10000, yarn(40, 4096, true)},
                      {"llama-3.1", 128, 500000, l3},
                      {"linear x4", 128, 10000, lin}};
  for (const Cfg& g : cfgs) {
    RopeCase c;
    c.head_dim = c.rotary_dim = g.R;
    c.base = g.base;
    c.freq_rule = g.rule;
    c.positions = {1};
    const std::vector<float> hf = hf_f32_table(c);
    double worst = 0, worst_k = 0;
    for (uint32_t i = 0; i < g.R / 2; ++i) {
      const double exact = theta_value(c, i);
      const double rel_u32 = std::fabs(double(hf[i]) - exact) / exact / 0x1p-24;
      const double k = f32_angle_ulps(c, i) - 2.0;
      EXPECT_LE(rel_u32, k) << g.name << " pair " << i;
      if (rel_u32 / k > worst) worst = rel_u32 / k, worst_k = k;
    }
    std::printf("%-18s worst table error / allowance: %.3f (K - 2 = %.1f at that pair)\n", g.name, worst, worst_k);
  }
}
