// The exact frequency rules (reference/frequency_rules.hpp) and the Hugging Face config parser
// (reference/hf_config.hpp).
//
//  - Golden tables: every rule at representative configs (named below; the same names and parameters are
//    in scripts/golden_frequency_rules.py, which computes the values independently from the published
//    formulas with mpmath at 320 bits into tests/golden_frequency_rules.inc). The MPFR values must agree
//    to 40 significant digits; their double roundings must equal the golden decimal rounded to double.
//  - Properties: linear = default / factor; dynamic at seq_len <= L = default; ntk = default at the
//    scaled base; llama3 leaves high-frequency pairs alone and divides low-frequency ones by the factor
//    exactly; yarn with factor 1 = default; longrope's short/long switch; the M-RoPE axis maps.
//  - The parser on every preset (cross-checked against the golden tables) and on malformed configs, each
//    error message checked.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "reference/frequency_rules.hpp"
#include "reference/hf_config.hpp"

using namespace ropecheck;

namespace {

namespace mp = boost::multiprecision;

struct Golden {
  const char* name;
  int code;  // pair index, or -1 attention factor, -2 effective base, -3/-4 YaRN low/high
  const char* value;
};
const Golden kGolden[] = {
#include "golden_frequency_rules.inc"
};

const std::vector<double> kPhi3Long = {
    1.0299999713897705, 1.0499999523162842, 1.0499999523162842, 1.0799999237060547, 1.2299998998641968,
    1.2299998998641968, 1.2999999523162842, 1.4499999284744263, 1.5999999046325684, 1.6499998569488525,
    1.8999998569488525, 2.859999895095825,  3.68999981880188,   5.419999599456787,  5.489999771118164,
    5.489999771118164,  9.09000015258789,   11.579999923706055, 15.65999984741211,  15.769999504089355,
    15.789999961853027, 18.360000610351562, 21.989999771118164, 23.079999923706055, 30.009998321533203,
    32.35000228881836,  32.590003967285156, 35.56000518798828,  39.95000457763672,  53.840003967285156,
    56.20000457763672,  57.95000457763672,  59.29000473022461,  59.77000427246094,  59.920005798339844,
    61.190006256103516, 61.96000671386719,  62.50000762939453,  63.3700065612793,   63.48000717163086,
    63.48000717163086,  63.66000747680664,  63.850006103515625, 64.08000946044922,  64.760009765625,
    64.80001068115234,  64.81001281738281,  64.81001281738281};
std::vector<double> phi3_short() {
  std::vector<double> v = {1.05, 1.05, 1.05, 1.1, 1.1, 1.1, 1.2500000000000002, 1.2500000000000002,
                           1.4000000000000004, 1.4500000000000004, 1.5500000000000005, 1.8500000000000008,
                           1.9000000000000008};
  v.insert(v.end(), 19, 2.000000000000001);
  for (double x : {2.1000000000000005, 2.1000000000000005, 2.2, 2.3499999999999996, 2.3499999999999996,
                   2.3499999999999996, 2.3499999999999996, 2.3999999999999995, 2.3999999999999995,
                   2.6499999999999986, 2.6999999999999984, 2.8999999999999977, 2.9499999999999975,
                   3.049999999999997, 3.049999999999997, 3.049999999999997})
    v.push_back(x);
  return v;
}

// One representative config: the rule, the rotated width, the base, the call's sequence length.
struct Case {
  FrequencyRule rule;
  uint32_t R = 0;
  double base = 0;
  std::optional<uint64_t> seq_len;
};

FrequencyRule make(FrequencyRuleType t, std::optional<double> factor = std::nullopt) {
  FrequencyRule r;
  r.type = t;
  r.factor = factor;
  return r;
}

FrequencyRule yarn(double factor, uint64_t original) {
  FrequencyRule r = make(FrequencyRuleType::yarn, factor);
  r.original_max_position_embeddings = original;
  return r;
}

FrequencyRule llama3(double factor, double low, double high, uint64_t original) {
  FrequencyRule r = make(FrequencyRuleType::llama3, factor);
  r.low_freq_factor = low;
  r.high_freq_factor = high;
  r.original_max_position_embeddings = original;
  return r;
}

FrequencyRule phi3_longrope() {
  FrequencyRule r = make(FrequencyRuleType::longrope);
  r.short_factor = phi3_short();
  r.long_factor = kPhi3Long;
  r.original_max_position_embeddings = 4096;
  r.max_position_embeddings = 131072;
  return r;
}

FrequencyRule dynamic(double factor, uint64_t L) {
  FrequencyRule r = make(FrequencyRuleType::dynamic, factor);
  r.max_position_embeddings = L;
  return r;
}

// The configs of scripts/golden_frequency_rules.py, by name.
const std::map<std::string, Case>& cases() {
  static const std::map<std::string, Case> m = [] {
    std::map<std::string, Case> c;
    c["default/llama3-unscaled"] = {make(FrequencyRuleType::default_), 128, 500000, {}};
    c["default/gpt-neox-20b"] = {make(FrequencyRuleType::default_), 24, 10000, {}};
    c["default/qwen3-vl"] = {make(FrequencyRuleType::default_), 128, 5000000, {}};
    c["linear/gemma3-global"] = {make(FrequencyRuleType::linear, 8.0), 256, 1000000, {}};
    c["dynamic/seq4096"] = {dynamic(2.0, 4096), 128, 10000, 4096};
    c["dynamic/seq6000"] = {dynamic(2.0, 4096), 128, 10000, 6000};
    c["dynamic/seq8192"] = {dynamic(2.0, 4096), 128, 10000, 8192};
    c["ntk/alpha1000"] = {make(FrequencyRuleType::ntk, 1000.0), 128, 10000, {}};
    c["yarn/qwen2.5-f4"] = {yarn(4.0, 32768), 128, 1000000, {}};
    {
      FrequencyRule r = yarn(32.0, 4096);
      r.truncate = false;
      c["yarn/gpt-oss-f32"] = {r, 64, 150000, {}};
      r.truncate = true;
      c["yarn/gpt-oss-f32-truncated"] = {r, 64, 150000, {}};
    }
    {
      FrequencyRule r = yarn(40.0, 4096);
      r.mscale = 1.0;
      r.mscale_all_dim = 1.0;
      c["yarn/deepseek-v3"] = {r, 64, 10000, {}};
      r.mscale = 0.707;
      r.mscale_all_dim.reset();
      c["yarn/mscale-only"] = {r, 64, 10000, {}};
      r.mscale_all_dim = 1.0;
      c["yarn/mscale-pair"] = {r, 64, 10000, {}};
    }
    {
      FrequencyRule r = yarn(32.0, 4096);
      r.beta_fast = 1.0;
      r.beta_slow = 1.0;
      c["yarn/kimi-k2"] = {r, 64, 50000, {}};
    }
    c["longrope/phi3-short"] = {phi3_longrope(), 96, 10000, {}};
    c["longrope/phi3-long"] = {phi3_longrope(), 96, 10000, 4097};
    c["llama3/llama-3.1-8b"] = {llama3(8.0, 1.0, 4.0, 8192), 128, 500000, {}};
    c["llama3/llama-3.2-f32"] = {llama3(32.0, 1.0, 4.0, 8192), 128, 500000, {}};
    c["llama3/llama4-scout"] = {llama3(16.0, 1.0, 1.0, 8192), 128, 500000, {}};
    return c;
  }();
  return m;
}

const FrequencyTable& table_of(const std::string& name) {
  static std::map<std::string, FrequencyTable> memo;
  auto it = memo.find(name);
  if (it != memo.end()) return it->second;
  const Case& c = cases().at(name);
  return memo.emplace(name, evaluate_frequency_rule(c.rule, c.R, c.base, c.seq_len)).first->second;
}

const MpFloat& value_of(const FrequencyTable& t, int code) {
  switch (code) {
    case -1: return t.attention_factor;
    case -2: return t.effective_base;
    case -3: return t.yarn_low;
    case -4: return t.yarn_high;
    default: return t.theta.at(static_cast<size_t>(code));
  }
}

// Values the test builds itself (goldens, expected ratios) carry 100 decimal digits, whatever order the
// tests run in (the rules' own results carry the precision they were evaluated at).
class MpPrecision : public ::testing::Environment {
 public:
  void SetUp() override { MpFloat::default_precision(100); }
};
[[maybe_unused]] ::testing::Environment* const kMpPrecision = ::testing::AddGlobalTestEnvironment(new MpPrecision);

MpFloat parse_mp(const char* s) { return MpFloat(s); }

// |a - b| <= 10^-digits * |b| (or <= 10^-digits absolutely when b == 0)
::testing::AssertionResult agrees(const MpFloat& a, const MpFloat& b, int digits) {
  const MpFloat tol = mp::pow(MpFloat(10), -digits) * (b == 0 ? MpFloat(1) : MpFloat(mp::abs(b)));
  if (mp::abs(a - b) <= tol) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << a.str(50) << " vs " << b.str(50) << " (" << digits << " digits)";
}

::testing::AssertionResult same_table(const FrequencyTable& a, const FrequencyTable& b, int digits) {
  if (a.theta.size() != b.theta.size()) return ::testing::AssertionFailure() << "sizes differ";
  for (size_t i = 0; i < a.theta.size(); ++i) {
    auto r = agrees(a.theta[i], b.theta[i], digits);
    if (!r) return r << " at pair " << i;
  }
  return ::testing::AssertionSuccess();
}

template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("unexpected exception type: ") + e.what();
  }
  return "no exception";
}

#define EXPECT_ERROR(expr, substring) \
  EXPECT_PRED_FORMAT2(::testing::IsSubstring, substring, error_of([&] { (void)(expr); }))

}  // namespace

// ---- golden tables -----------------------------------------------------------------------------------

TEST(FrequencyRulesGolden, EveryGoldenValueAgreesTo40Digits) {
  size_t n = 0;
  std::set<std::string> names;
  for (const Golden& g : kGolden) {
    ASSERT_TRUE(cases().count(g.name)) << g.name;
    const FrequencyTable& t = table_of(g.name);
    EXPECT_GE(t.bits, 256u);
    EXPECT_TRUE(agrees(value_of(t, g.code), parse_mp(g.value), 40)) << g.name << " code " << g.code;
    ++n;
    names.insert(g.name);
  }
  EXPECT_EQ(names.size(), cases().size()) << "a case of the test has no golden values";
  EXPECT_GE(n, 100u);
}

TEST(FrequencyRulesGolden, DoubleAndFloatTablesAreTheCorrectRoundings) {
  for (const Golden& g : kGolden) {
    if (g.code < 0) continue;
    const FrequencyTable& t = table_of(g.name);
    const double d = std::strtod(g.value, nullptr);  // correctly rounded from 45 digits
    EXPECT_EQ(theta_as_double(t).at(g.code), d) << g.name << " pair " << g.code;
    EXPECT_EQ(theta_as_float(t).at(g.code), std::strtof(g.value, nullptr)) << g.name << " pair " << g.code;
  }
  EXPECT_EQ(to_double(table_of("yarn/qwen2.5-f4").attention_factor), 1.1386294361119891);
}

TEST(FrequencyRulesGolden, ResearchNoteValuesAt17Digits) {
  // A few values of the research note (shared/research/rope-variants.md, Appendix B) as printed there, to
  // 17 significant digits (so they agree to 16).
  EXPECT_TRUE(agrees(table_of("llama3/llama-3.1-8b").theta[29], parse_mp("2.1665707635033586e-3"), 16));
  EXPECT_TRUE(agrees(table_of("yarn/deepseek-v3").theta[16], parse_mp("0.0055"), 40));
  EXPECT_TRUE(agrees(table_of("yarn/mscale-only").attention_factor, parse_mp("1.3688879454113937"), 16));
  EXPECT_TRUE(agrees(table_of("longrope/phi3-short").attention_factor, parse_mp("1.1902380714238083"), 16));
  EXPECT_TRUE(agrees(table_of("dynamic/seq8192").effective_base, parse_mp("30527.736748806698"), 16));
  EXPECT_TRUE(agrees(table_of("yarn/gpt-oss-f32").theta[10], parse_mp("0.019335001126540358"), 16));
  EXPECT_TRUE(agrees(table_of("yarn/qwen2.5-f4").theta[39], parse_mp("6.4903943208370288e-5"), 16));
}

// ---- properties --------------------------------------------------------------------------------------

// The rules' known mistakes (RuleMistake, for the diagnosis) differ from the rule only where the mistake acts: the
// YaRN blend everywhere but at ramp 1/2 (reversed: theta0*ramp + theta0/f*(1-ramp)), llama3 only inside the
// smoothing band (pairs kept or divided by f stay); the reference's own table is the one evaluated without one.
TEST(FrequencyRulesProperties, EachKnownMistakeChangesOnlyWhatItMisreads) {
  for (const char* name : {"yarn/qwen2.5-f4", "llama3/llama-3.1-8b"}) {
    SCOPED_TRACE(name);
    const Case& c = cases().at(name);
    const bool yarn = c.rule.type == FrequencyRuleType::yarn;
    const RuleMistake mk = yarn ? RuleMistake::yarn_ramp_reversed : RuleMistake::llama3_ratio_inverted;
    const FrequencyTable right = evaluate_frequency_rule(c.rule, c.R, c.base, c.seq_len);
    const FrequencyTable wrong = evaluate_frequency_rule(c.rule, c.R, c.base, c.seq_len, kDefaultRuleBits, mk);
    const FrequencyTable plain = evaluate_frequency_rule(make(FrequencyRuleType::default_), c.R, c.base);
    const MpFloat f(*c.rule.factor);
    size_t changed = 0;
    for (size_t i = 0; i < right.theta.size(); ++i) {
      if (right.theta[i] == wrong.theta[i]) continue;
      ++changed;
      if (yarn) {  // reversed blend: right + wrong = theta0 (1 + 1/f)
        EXPECT_TRUE(agrees(right.theta[i] + wrong.theta[i], plain.theta[i] * (1 + 1 / f), 60)) << i;
      } else {  // inside the band only: neither kept (theta0) nor divided (theta0/f) by the rule
        EXPECT_NE(right.theta[i], plain.theta[i]) << i;
        EXPECT_NE(right.theta[i], plain.theta[i] / f) << i;
      }
    }
    EXPECT_GT(changed, 0u);
    if (!yarn) EXPECT_LT(changed, right.theta.size());  // (YaRN's reversed blend moves every pair off ramp 1/2)
    EXPECT_EQ(right.attention_factor, wrong.attention_factor);
  }
}

TEST(FrequencyRulesProperties, LinearIsDefaultDividedByFactor) {
  for (double s : {0.5, 2.0, 8.0, 3.7}) {
    const auto lin = evaluate_frequency_rule(make(FrequencyRuleType::linear, s), 128, 1e6);
    const auto def = evaluate_frequency_rule(make(FrequencyRuleType::default_), 128, 1e6);
    for (size_t i = 0; i < def.theta.size(); ++i)
      EXPECT_TRUE(agrees(lin.theta[i], def.theta[i] / MpFloat(s), 70)) << "factor " << s << " pair " << i;
    EXPECT_EQ(lin.attention_factor, 1);
  }
}

TEST(FrequencyRulesProperties, DynamicUpToTheContextLengthIsDefault) {
  const auto def = evaluate_frequency_rule(make(FrequencyRuleType::default_), 128, 10000);
  for (std::optional<uint64_t> s : {std::optional<uint64_t>{}, std::optional<uint64_t>{1}, std::optional<uint64_t>{4095},
                                    std::optional<uint64_t>{4096}}) {
    const auto dyn = evaluate_frequency_rule(dynamic(2.0, 4096), 128, 10000, s);
    EXPECT_EQ(dyn.effective_base, MpFloat(10000));
    for (size_t i = 0; i < def.theta.size(); ++i) EXPECT_EQ(dyn.theta[i], def.theta[i]) << i;
  }
  // ... and grows with the sequence length beyond it.
  const auto a = evaluate_frequency_rule(dynamic(2.0, 4096), 128, 10000, 4097);
  const auto b = evaluate_frequency_rule(dynamic(2.0, 4096), 128, 10000, 8192);
  EXPECT_GT(a.effective_base, MpFloat(10000));
  EXPECT_GT(b.effective_base, a.effective_base);
}

TEST(FrequencyRulesProperties, NtkAndDynamicAreDefaultAtTheScaledBase) {
  for (const char* name : {"ntk/alpha1000", "dynamic/seq6000"}) {
    const FrequencyTable& t = table_of(name);
    const Case& c = cases().at(name);
    for (size_t i = 0; i < t.theta.size(); ++i) {
      const MpFloat expect = i == 0 ? MpFloat(1) : MpFloat(mp::pow(t.effective_base, MpFloat(-2 * long(i)) / c.R));
      EXPECT_TRUE(agrees(t.theta[i], expect, 70)) << name << " pair " << i;
    }
  }
}

TEST(FrequencyRulesProperties, Llama3KeepsHighAndDividesLowFrequenciesExactly) {
  for (const char* name : {"llama3/llama-3.1-8b", "llama3/llama-3.2-f32", "llama3/llama4-scout"}) {
    const Case& c = cases().at(name);
    const FrequencyTable& t = table_of(name);
    const auto def = evaluate_frequency_rule(make(FrequencyRuleType::default_), c.R, c.base);
    const double L = double(c.rule.original_max_position_embeddings);
    int high = 0, low = 0, mid = 0;
    for (size_t i = 0; i < def.theta.size(); ++i) {
      const double wavelen = 2 * M_PI / to_double(def.theta[i]);
      if (wavelen < L / c.rule.high_freq_factor * (1 - 1e-9)) {
        EXPECT_EQ(t.theta[i], def.theta[i]) << name << " pair " << i;
        ++high;
      } else if (wavelen > L / c.rule.low_freq_factor * (1 + 1e-9)) {
        EXPECT_EQ(t.theta[i], MpFloat(def.theta[i] / MpFloat(*c.rule.factor))) << name << " pair " << i;
        ++low;
      } else {  // smoothed: strictly between theta/factor and theta
        EXPECT_LT(t.theta[i], def.theta[i]);
        EXPECT_GT(t.theta[i], MpFloat(def.theta[i] / MpFloat(*c.rule.factor)));
        ++mid;
      }
    }
    EXPECT_GT(high, 0);
    EXPECT_GT(low, 0);
    if (std::string(name) == "llama3/llama-3.1-8b") {  // research note: bands 29 / 6 / 29
      EXPECT_EQ(high, 29);
      EXPECT_EQ(mid, 6);
      EXPECT_EQ(low, 29);
    }
    if (std::string(name) == "llama3/llama4-scout") {
      EXPECT_EQ(mid, 0);  // low == high: no band
    }
  }
}

TEST(FrequencyRulesProperties, YarnWithFactorOneIsDefault) {
  for (bool truncate : {true, false}) {
    FrequencyRule r = yarn(1.0, 4096);
    r.truncate = truncate;
    const auto y = evaluate_frequency_rule(r, 128, 10000);
    const auto def = evaluate_frequency_rule(make(FrequencyRuleType::default_), 128, 10000);
    EXPECT_TRUE(same_table(y, def, 70));
    EXPECT_EQ(y.attention_factor, 1);
  }
}

TEST(FrequencyRulesProperties, YarnRampRunsFromDefaultToDividedMonotonically) {
  const FrequencyTable& t = table_of("yarn/qwen2.5-f4");
  const auto def = evaluate_frequency_rule(make(FrequencyRuleType::default_), 128, 1e6);
  MpFloat prev = 2;
  for (size_t i = 0; i < t.theta.size(); ++i) {
    const MpFloat ratio = t.theta[i] / def.theta[i];  // 1 below low, 1/factor above high
    EXPECT_LE(ratio, prev) << i;
    if (i <= 23) {
      EXPECT_TRUE(agrees(ratio, MpFloat(1), 70)) << i;
    }
    if (i >= 40) {
      EXPECT_TRUE(agrees(ratio, MpFloat(1) / 4, 70)) << i;
    }
    prev = ratio;
  }
  // research note: ratio at i = 24 is 1 - (3/4)(1/17)
  EXPECT_TRUE(agrees(t.theta[24] / def.theta[24], MpFloat(1) - MpFloat(3) / 68, 70));
}

TEST(FrequencyRulesProperties, YarnAttentionFactorRules) {
  FrequencyRule r = yarn(40.0, 4096);
  r.attention_factor = 0.75;  // explicit: wins over mscale
  r.mscale = 0.707;
  r.mscale_all_dim = 1.0;
  EXPECT_EQ(evaluate_frequency_rule(r, 64, 10000).attention_factor, MpFloat(0.75));
  r.attention_factor.reset();
  r.mscale = 0.0;  // HF: `if mscale and mscale_all_dim` -- a zero falls back to get_mscale(factor)
  EXPECT_TRUE(agrees(evaluate_frequency_rule(r, 64, 10000).attention_factor,
                     parse_mp("1.36888794541139363028524556976007173437521018"), 40));
  FrequencyRule below = yarn(0.5, 4096);  // get_mscale(s <= 1) = 1
  EXPECT_EQ(evaluate_frequency_rule(below, 64, 10000).attention_factor, 1);
}

TEST(FrequencyRulesProperties, LongropeSwitchesToLongFactorsAboveTheOriginalLength) {
  const FrequencyRule r = phi3_longrope();
  for (std::optional<uint64_t> s : {std::optional<uint64_t>{}, std::optional<uint64_t>{1}, std::optional<uint64_t>{4096}}) {
    const auto t = evaluate_frequency_rule(r, 96, 10000, s);
    EXPECT_FALSE(t.longrope_long);
    EXPECT_TRUE(same_table(t, table_of("longrope/phi3-short"), 70));
  }
  for (uint64_t s : {4097u, 131072u, 1000000u}) {
    const auto t = evaluate_frequency_rule(r, 96, 10000, s);
    EXPECT_TRUE(t.longrope_long);
    EXPECT_TRUE(same_table(t, table_of("longrope/phi3-long"), 70));
  }
  // An explicit factor replaces max/original for the attention factor; an explicit attention factor wins.
  FrequencyRule f = r;
  f.factor = 1.0;
  EXPECT_EQ(evaluate_frequency_rule(f, 96, 10000).attention_factor, 1);
  f.attention_factor = 1.25;
  EXPECT_EQ(evaluate_frequency_rule(f, 96, 10000).attention_factor, MpFloat(1.25));
}

TEST(FrequencyRulesProperties, RulesWithoutAMagnitudeHaveAttentionFactorOne) {
  for (const char* name : {"default/llama3-unscaled", "linear/gemma3-global", "dynamic/seq8192", "ntk/alpha1000",
                           "llama3/llama-3.1-8b"})
    EXPECT_EQ(table_of(name).attention_factor, 1) << name;
}

TEST(FrequencyRulesProperties, PrecisionIsTheRequestedOne) {
  const auto t = evaluate_frequency_rule(yarn(4.0, 32768), 128, 1e6, std::nullopt, 1024);
  EXPECT_GE(t.bits, 1024u);
  EXPECT_TRUE(same_table(t, table_of("yarn/qwen2.5-f4"), 75));
}

TEST(FrequencyRulesErrors, BadParametersNameTheField) {
  const auto def = make(FrequencyRuleType::default_);
  EXPECT_ERROR(evaluate_frequency_rule(def, 7, 10000), "rotary_dim must be even and >= 2 (got 7)");
  EXPECT_ERROR(evaluate_frequency_rule(def, 0, 10000), "rotary_dim must be even and >= 2 (got 0)");
  EXPECT_ERROR(evaluate_frequency_rule(def, 64, -1), "base must be finite and > 0 (got -1)");
  EXPECT_ERROR(evaluate_frequency_rule(def, 64, 10000, std::nullopt, 32), "bits must be in [64, 100000] (got 32)");
  EXPECT_ERROR(evaluate_frequency_rule(make(FrequencyRuleType::linear, 0.0), 64, 10000),
               "linear: factor must be finite and > 0 (got 0)");
  EXPECT_ERROR(evaluate_frequency_rule(make(FrequencyRuleType::linear), 64, 10000), "linear: factor is required");
  EXPECT_ERROR(evaluate_frequency_rule(dynamic(-2.0, 4096), 64, 10000),
               "dynamic: factor must be finite and > 0 (got -2)");
  EXPECT_ERROR(evaluate_frequency_rule(dynamic(2.0, 0), 64, 10000), "dynamic: max_position_embeddings must be > 0");
  EXPECT_ERROR(evaluate_frequency_rule(dynamic(2.0, 4096), 2, 10000), "dynamic: rotary_dim must be > 2");
  EXPECT_ERROR(evaluate_frequency_rule(make(FrequencyRuleType::ntk, 0.0), 64, 10000),
               "ntk: factor (alpha) must be finite and > 0 (got 0)");
  EXPECT_ERROR(evaluate_frequency_rule(yarn(0.0, 4096), 64, 10000), "yarn: factor must be finite and > 0 (got 0)");
  EXPECT_ERROR(evaluate_frequency_rule(yarn(4.0, 0), 64, 10000), "yarn: original_max_position_embeddings must be > 0");
  EXPECT_ERROR(evaluate_frequency_rule(yarn(4.0, 4096), 64, 1), "yarn: base must be != 1");
  {
    FrequencyRule r = yarn(4.0, 4096);
    r.beta_fast = 1;
    r.beta_slow = 32;
    EXPECT_ERROR(evaluate_frequency_rule(r, 64, 10000), "yarn: beta_fast (1) must be >= beta_slow (32)");
    r.beta_fast = -3;
    EXPECT_ERROR(evaluate_frequency_rule(r, 64, 10000), "yarn: beta_fast must be finite and >= 0");
    r = yarn(4.0, 4096);
    r.attention_factor = -1;
    EXPECT_ERROR(evaluate_frequency_rule(r, 64, 10000), "yarn: attention_factor must be finite and > 0 (got -1)");
  }
  {
    FrequencyRule r = phi3_longrope();
    r.short_factor.pop_back();
    EXPECT_ERROR(evaluate_frequency_rule(r, 96, 10000), "longrope: short_factor has 47 entries, expected rotary_dim/2 = 48");
    r = phi3_longrope();
    r.long_factor[5] = 0;
    EXPECT_ERROR(evaluate_frequency_rule(r, 96, 10000), "longrope: long_factor[5] must be finite and > 0 (got 0)");
    r = phi3_longrope();
    EXPECT_ERROR(evaluate_frequency_rule(r, 64, 10000), "longrope: short_factor has 48 entries, expected rotary_dim/2 = 32");
    r.original_max_position_embeddings = 0;
    EXPECT_ERROR(evaluate_frequency_rule(r, 96, 10000), "longrope: original_max_position_embeddings must be > 0");
  }
  EXPECT_ERROR(evaluate_frequency_rule(llama3(8.0, 4.0, 1.0, 8192), 128, 500000),
               "llama3: high_freq_factor (1) must be >= low_freq_factor (4)");
  EXPECT_ERROR(evaluate_frequency_rule(llama3(8.0, 0.0, 4.0, 8192), 128, 500000),
               "llama3: low_freq_factor must be finite and > 0 (got 0)");
  EXPECT_ERROR(evaluate_frequency_rule(llama3(8.0, 1.0, 4.0, 0), 128, 500000),
               "llama3: original_max_position_embeddings must be > 0");
  EXPECT_ERROR(evaluate_frequency_rule(llama3(-8.0, 1.0, 4.0, 8192), 128, 500000),
               "llama3: factor must be finite and > 0 (got -8)");
}

TEST(FrequencyRuleType, NamesRoundTrip) {
  for (auto t : {FrequencyRuleType::default_, FrequencyRuleType::linear, FrequencyRuleType::dynamic,
                 FrequencyRuleType::ntk, FrequencyRuleType::yarn, FrequencyRuleType::longrope, FrequencyRuleType::llama3})
    EXPECT_EQ(parse_frequency_rule_type(to_string(t)), t);
  EXPECT_FALSE(parse_frequency_rule_type("su"));
}

// ---- M-RoPE axis maps --------------------------------------------------------------------------------

namespace {
std::string axes_string(const std::vector<uint32_t>& a) {
  std::string s;
  for (uint32_t x : a) s += "thw"[x];
  return s;
}
void expect_partition(const MropeSpec& spec, uint32_t n_pairs) {
  const auto axes = mrope_pair_axes(spec, n_pairs);
  ASSERT_EQ(axes.size(), n_pairs);
  uint32_t count[3] = {0, 0, 0};
  for (uint32_t a : axes) {
    ASSERT_LT(a, 3u);  // every pair has exactly one axis, one of t/h/w
    ++count[a];
  }
  for (int k = 0; k < 3; ++k) EXPECT_EQ(count[k], spec.section[k]) << "axis " << k;
}
}  // namespace

TEST(MropeAxes, Qwen2VlSectionsAreContiguous) {
  const MropeSpec spec{{16, 24, 24}, false};
  expect_partition(spec, 64);
  EXPECT_EQ(axes_string(mrope_pair_axes(spec, 64)), std::string(16, 't') + std::string(24, 'h') + std::string(24, 'w'));
}

TEST(MropeAxes, Qwen3VlInterleavesWithStrideThree) {
  const MropeSpec spec{{24, 20, 20}, true};
  expect_partition(spec, 64);
  // research note section 9.2, HF's map
  EXPECT_EQ(axes_string(mrope_pair_axes(spec, 64)),
            "thwthwthwthwthwthwthwthwthwthwthwthwthwthwthwthwthwthwthwthwtttt");
  const MropeSpec q35{{11, 11, 10}, true};  // Qwen3.5, 32 pairs
  expect_partition(q35, 32);
  EXPECT_EQ(axes_string(mrope_pair_axes(q35, 32)), "thwthwthwthwthwthwthwthwthwthwth");
}

TEST(MropeAxes, ManySectionsPartitionThePairs) {
  for (uint32_t n : {3u, 8u, 32u, 64u})
    for (uint32_t a = 0; a <= n; ++a)
      for (uint32_t b = 0; a + b <= n; ++b) {
        const MropeSpec spec{{a, b, n - a - b}, false};
        expect_partition(spec, n);
        MropeSpec il{{a, b, n - a - b}, true};
        try {
          expect_partition(il, n);
        } catch (const std::invalid_argument& e) {
          EXPECT_PRED_FORMAT2(::testing::IsSubstring, "cannot be interleaved", e.what());
        }
      }
}

TEST(MropeAxes, BadSectionsAreRejected) {
  EXPECT_ERROR(mrope_pair_axes({{16, 24, 20}, false}, 64),
               "mrope_section [16, 24, 20] sums to 60, but the rotary slice has 64 pairs");
  EXPECT_ERROR(mrope_pair_axes({{16, 24, 24, 0}, false}, 64), "mrope_section must have 3 entries");
  EXPECT_ERROR(mrope_pair_axes({{4, 30, 30}, true}, 64),
               "mrope_section [4, 30, 30] cannot be interleaved over 64 pairs: the stride-3 map gives axis 0 22 pairs "
               "instead of 4");
}

// ---- the config parser: presets -----------------------------------------------------------------------

namespace {
void expect_table_matches_golden(const RopeConfig& rc, const std::string& golden_name,
                                 std::optional<uint64_t> seq_len = std::nullopt) {
  const FrequencyTable t = rc.frequencies(seq_len);
  for (const Golden& g : kGolden) {
    if (g.name == golden_name) {
      EXPECT_TRUE(agrees(value_of(t, g.code), parse_mp(g.value), 40)) << golden_name << " code " << g.code;
    }
  }
}
}  // namespace

TEST(HfPresets, EveryPresetParsesAndCitesItsSource) {
  ASSERT_GE(hf_presets().size(), 9u);
  for (const HfPreset& p : hf_presets()) {
    EXPECT_GT(p.source.size(), 40u) << p.name;
    const RopeConfig rc = preset_config(p.name);
    EXPECT_GE(rc.rotary_dim, 2u) << p.name;
    EXPECT_NO_THROW((void)rc.frequencies(std::nullopt, 128)) << p.name;
  }
  EXPECT_ERROR(preset_config("llama-2"), "unknown preset 'llama-2' (known: chatglm2-6b, llama-3.1-8b,");
  EXPECT_EQ(find_hf_preset("nope"), nullptr);
}

TEST(HfPresets, Chatglm2) {
  const RopeConfig rc = preset_config("chatglm2-6b");
  EXPECT_EQ(rc.model_type, "chatglm");
  EXPECT_EQ(rc.head_dim, 128u);
  EXPECT_EQ(rc.rotary_dim, 64u);
  EXPECT_EQ(rc.rotary_offset, 0u);
  EXPECT_EQ(rc.base, 10000.0);
  EXPECT_EQ(rc.layout, PairLayout::interleaved);
  EXPECT_EQ(rc.rule.type, FrequencyRuleType::default_);
  EXPECT_EQ(rc.max_position_embeddings, 32768u);
  EXPECT_FALSE(rc.mrope);
}

TEST(HfPresets, Llama31) {
  const RopeConfig rc = preset_config("llama-3.1-8b");
  EXPECT_EQ(rc.head_dim, 128u);
  EXPECT_EQ(rc.rotary_dim, 128u);
  EXPECT_EQ(rc.base, 500000.0);
  EXPECT_EQ(rc.layout, PairLayout::half_split);
  EXPECT_EQ(rc.rule.type, FrequencyRuleType::llama3);
  EXPECT_EQ(rc.rule.factor, 8.0);
  EXPECT_EQ(rc.rule.low_freq_factor, 1.0);
  EXPECT_EQ(rc.rule.high_freq_factor, 4.0);
  EXPECT_EQ(rc.rule.original_max_position_embeddings, 8192u);
  expect_table_matches_golden(rc, "llama3/llama-3.1-8b");
}

TEST(HfPresets, Qwen2Vl) {
  const RopeConfig rc = preset_config("qwen2-vl-7b");
  EXPECT_EQ(rc.head_dim, 128u);
  EXPECT_EQ(rc.rotary_dim, 128u);
  EXPECT_EQ(rc.base, 1e6);
  EXPECT_EQ(rc.rule.type, FrequencyRuleType::default_);  // "type": "mrope" is HF's default rule
  ASSERT_TRUE(rc.mrope);
  EXPECT_EQ(rc.mrope->section, (std::vector<uint32_t>{16, 24, 24}));
  EXPECT_FALSE(rc.mrope->interleaved);
  expect_partition(*rc.mrope, rc.rotary_dim / 2);
}

TEST(HfPresets, Qwen3VlNestsTextConfigAndInterleaves) {
  const RopeConfig rc = preset_config("qwen3-vl-8b");
  EXPECT_EQ(rc.model_type, "qwen3_vl_text");
  EXPECT_EQ(rc.head_dim, 128u);
  EXPECT_EQ(rc.base, 5e6);
  ASSERT_TRUE(rc.mrope);
  EXPECT_TRUE(rc.mrope->interleaved);
  expect_table_matches_golden(rc, "default/qwen3-vl");
}

TEST(HfPresets, DeepseekV3) {
  const RopeConfig rc = preset_config("deepseek-v3");
  EXPECT_EQ(rc.head_dim, 192u);
  EXPECT_EQ(rc.rotary_dim, 64u);
  EXPECT_EQ(rc.rotary_offset, 128u);
  EXPECT_EQ(rc.layout, PairLayout::interleaved);
  EXPECT_TRUE(rc.output_half_split);  // HF rope_interleave (default true)
  EXPECT_EQ(rc.rule.type, FrequencyRuleType::yarn);
  EXPECT_EQ(rc.rule.factor, 40.0);
  EXPECT_EQ(rc.rule.original_max_position_embeddings, 4096u);
  EXPECT_EQ(rc.rule.mscale, 1.0);
  EXPECT_EQ(rc.rule.mscale_all_dim, 1.0);
  expect_table_matches_golden(rc, "yarn/deepseek-v3");
}

TEST(HfPresets, GptNeox20b) {
  const RopeConfig rc = preset_config("gpt-neox-20b");
  EXPECT_EQ(rc.head_dim, 96u);
  EXPECT_EQ(rc.rotary_dim, 24u);
  EXPECT_EQ(rc.base, 10000.0);  // rotary_emb_base
  EXPECT_EQ(rc.layout, PairLayout::half_split);
  expect_table_matches_golden(rc, "default/gpt-neox-20b");
}

TEST(HfPresets, Roformer) {
  const RopeConfig rc = preset_config("roformer");
  EXPECT_EQ(rc.head_dim, 64u);
  EXPECT_EQ(rc.rotary_dim, 64u);
  EXPECT_EQ(rc.base, 10000.0);
  EXPECT_EQ(rc.layout, PairLayout::interleaved);
  EXPECT_EQ(rc.max_position_embeddings, 1536u);
}

TEST(HfPresets, YarnFactor4And32) {
  const RopeConfig q = preset_config("qwen2.5-7b-yarn4");
  EXPECT_EQ(q.rule.type, FrequencyRuleType::yarn);
  EXPECT_EQ(q.rule.factor, 4.0);  // explicit, even though max == original (HF v5 keeps it)
  EXPECT_TRUE(q.rule.truncate);
  expect_table_matches_golden(q, "yarn/qwen2.5-f4");
  const RopeConfig g = preset_config("gpt-oss-20b");
  EXPECT_EQ(g.head_dim, 64u);
  EXPECT_EQ(g.rule.factor, 32.0);
  EXPECT_FALSE(g.rule.truncate);
  expect_table_matches_golden(g, "yarn/gpt-oss-f32");
}

TEST(HfPresets, Phi3Longrope) {
  const RopeConfig rc = preset_config("phi-3-vision-128k");
  EXPECT_EQ(rc.head_dim, 96u);
  EXPECT_EQ(rc.rule.type, FrequencyRuleType::longrope);  // "type": "su"
  EXPECT_EQ(rc.rule.original_max_position_embeddings, 4096u);
  EXPECT_EQ(rc.rule.short_factor, phi3_short());
  EXPECT_EQ(rc.rule.long_factor, kPhi3Long);
  expect_table_matches_golden(rc, "longrope/phi3-short");
  expect_table_matches_golden(rc, "longrope/phi3-long", 5000);
}

// ---- the config parser: spellings ---------------------------------------------------------------------

TEST(HfConfig, RopeParametersNestRopeThetaAndBothTypeSpellingsWork) {
  const RopeConfig a = parse_hf_config(R"({"hidden_size": 3584, "num_attention_heads": 28,
    "max_position_embeddings": 32768, "rope_theta": 10000,
    "rope_parameters": {"rope_type": "yarn", "rope_theta": 1000000.0, "factor": 4.0,
                        "original_max_position_embeddings": 32768}})");
  EXPECT_EQ(a.base, 1e6);  // the nested rope_theta wins
  EXPECT_EQ(a.rule.type, FrequencyRuleType::yarn);
  expect_table_matches_golden(a, "yarn/qwen2.5-f4");
  const RopeConfig b = parse_hf_config(R"({"hidden_size": 64, "num_attention_heads": 1,
    "rope_scaling": {"type": "linear", "factor": 2}})");
  EXPECT_EQ(b.rule.type, FrequencyRuleType::linear);
  EXPECT_EQ(b.rule.factor, 2.0);
  EXPECT_EQ(b.base, 10000.0);  // the default
  // rope_type wins over type (Qwen configs carry both: {"type": "mrope", "rope_type": "default"})
  const RopeConfig c = parse_hf_config(R"({"hidden_size": 64, "num_attention_heads": 1,
    "rope_scaling": {"type": "linear", "rope_type": "default"}})");
  EXPECT_EQ(c.rule.type, FrequencyRuleType::default_);
}

TEST(HfConfig, YarnNullFactorIsDerivedAndOriginalFallsBack) {
  const RopeConfig a = parse_hf_config(R"({"head_dim": 64, "hidden_size": 1, "num_attention_heads": 1,
    "max_position_embeddings": 163840,
    "rope_scaling": {"type": "yarn", "factor": null, "original_max_position_embeddings": 4096}})");
  EXPECT_EQ(a.rule.factor, 40.0);
  const RopeConfig b = parse_hf_config(R"({"head_dim": 64, "max_position_embeddings": 8192,
    "rope_scaling": {"rope_type": "yarn", "factor": 2.0}})");
  EXPECT_EQ(b.rule.original_max_position_embeddings, 8192u);  // HF standardize_rope_params
}

TEST(HfConfig, TopLevelOriginalMaxWinsForLongrope) {
  const RopeConfig rc = parse_hf_config(R"({"hidden_size": 32, "num_attention_heads": 2,
    "max_position_embeddings": 1024, "original_max_position_embeddings": 256,
    "rope_scaling": {"type": "longrope", "original_max_position_embeddings": 999,
                     "short_factor": [1, 1, 1, 1, 1, 1, 1, 1], "long_factor": [2, 2, 2, 2, 2, 2, 2, 2]}})");
  EXPECT_EQ(rc.rule.original_max_position_embeddings, 256u);
  EXPECT_FALSE(rc.rule.factor);
  // default attention factor: sqrt(1 + ln 4 / ln 256) = sqrt(5/4)
  EXPECT_TRUE(agrees(rc.frequencies().attention_factor, mp::sqrt(MpFloat(5) / 4), 70));
}

TEST(HfConfig, PartialRotaryKeys) {
  EXPECT_EQ(parse_hf_config(R"({"hidden_size": 3072, "num_attention_heads": 24, "partial_rotary_factor": 0.75})")
                .rotary_dim,
            96u);  // Phi-4-mini: head 128
  EXPECT_EQ(parse_hf_config(R"({"hidden_size": 4096, "num_attention_heads": 32,
                              "rope_parameters": {"rope_type": "default", "partial_rotary_factor": 0.5}})")
                .rotary_dim,
            64u);
  const RopeConfig gptj = parse_hf_config(R"({"model_type": "gptj", "n_embd": 4096, "n_head": 16,
                                             "rotary_dim": 64, "n_positions": 2048})");
  EXPECT_EQ(gptj.head_dim, 256u);
  EXPECT_EQ(gptj.rotary_dim, 64u);
  EXPECT_EQ(gptj.layout, PairLayout::interleaved);
  EXPECT_EQ(gptj.max_position_embeddings, 2048u);
}

TEST(HfConfig, RopeRatioScalesTheBase) {
  const RopeConfig rc = parse_hf_config(R"({"model_type": "chatglm", "hidden_size": 4096,
    "num_attention_heads": 32, "kv_channels": 128, "seq_length": 131072, "rope_ratio": 500})");
  EXPECT_EQ(rc.base, 5e6);  // GLM-4-9B
  EXPECT_EQ(rc.rotary_dim, 64u);
  EXPECT_EQ(theta_as_double(rc.frequencies())[31], 3.2387155637387736e-7);  // research note section 12
}

TEST(HfConfig, HunyuanAlphaAndFormerNtkTypeAreFixedNtk) {
  const RopeConfig a = parse_hf_config(R"({"hidden_size": 128, "num_attention_heads": 1,
    "max_position_embeddings": 4096, "rope_scaling": {"type": "dynamic", "alpha": 1000.0, "factor": 1.0}})");
  EXPECT_EQ(a.rule.type, FrequencyRuleType::ntk);
  expect_table_matches_golden(a, "ntk/alpha1000");
  const RopeConfig b = parse_hf_config(R"({"hidden_size": 128, "num_attention_heads": 1,
    "rope_scaling": {"rope_type": "ntk", "factor": 1000}})");
  expect_table_matches_golden(b, "ntk/alpha1000");
  const RopeConfig d = parse_hf_config(R"({"hidden_size": 128, "num_attention_heads": 1,
    "max_position_embeddings": 4096, "rope_scaling": {"rope_type": "dynamic", "factor": 2.0}})");
  EXPECT_EQ(d.rule.type, FrequencyRuleType::dynamic);
  expect_table_matches_golden(d, "dynamic/seq6000", 6000);
}

TEST(HfConfig, DeepseekWithoutRopeInterleaveIsHalfSplit) {
  const RopeConfig rc = parse_hf_config(R"({"model_type": "deepseek_v3", "qk_nope_head_dim": 32,
    "qk_rope_head_dim": 16, "rope_interleave": false})");
  EXPECT_EQ(rc.layout, PairLayout::half_split);
  EXPECT_FALSE(rc.output_half_split);
  EXPECT_EQ(rc.rotary_offset, 32u);
  EXPECT_EQ(rc.head_dim, 48u);
}

TEST(HfConfig, LoadsFromAFileAndRefusesLargeOnes) {
  const auto dir = std::filesystem::temp_directory_path() / ("ropecheck_hf_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto ok = dir / "config.json";
  std::ofstream(ok) << find_hf_preset("llama-3.1-8b")->json;
  EXPECT_EQ(load_hf_config(ok).rule.type, FrequencyRuleType::llama3);
  const auto big = dir / "big.json";
  {
    std::ofstream out(big);
    out << "{\"x\": \"" << std::string(kMaxHfConfigBytes, 'a') << "\"}";
  }
  EXPECT_ERROR(load_hf_config(big), "the limit for a config.json is 16777216 (16 MiB)");
  EXPECT_ERROR(parse_hf_config(std::string(kMaxHfConfigBytes + 1, ' ')), "the limit is 16777216 (16 MiB)");
  EXPECT_THROW(load_hf_config(dir / "missing.json"), std::runtime_error);
  std::filesystem::remove_all(dir);
}

// ---- the config parser: malformed configs -------------------------------------------------------------

TEST(HfConfigErrors, EachMessageNamesTheProblem) {
  const std::string head = R"("hidden_size": 128, "num_attention_heads": 2, "max_position_embeddings": 4096)";
  auto with = [&](const std::string& rest) { return "{" + head + (rest.empty() ? "" : ", " + rest) + "}"; };

  EXPECT_ERROR(parse_hf_config("{not json"), "config.json is not valid JSON");
  EXPECT_ERROR(parse_hf_config("[1, 2]"), "config.json must be a JSON object (got array)");
  EXPECT_ERROR(parse_hf_config(R"({"rope_theta": 10000})"),
               "head_dim is missing and cannot be derived: it needs hidden_size and num_attention_heads");
  EXPECT_ERROR(parse_hf_config(R"({"hidden_size": 100, "num_attention_heads": 3})"),
               "hidden_size (100) is not a multiple of num_attention_heads (3)");
  EXPECT_ERROR(parse_hf_config(R"({"hidden_size": 100, "num_attention_heads": 0})"), "num_attention_heads must be > 0");
  EXPECT_ERROR(parse_hf_config(R"({"hidden_size": "big", "num_attention_heads": 2})"),
               "hidden_size must be an integer (got string)");
  EXPECT_ERROR(parse_hf_config(with(R"("rope_scaling": {"rope_type": "foo", "factor": 2})")),
               "rope_scaling.rope_type 'foo' is not supported (supported: default, linear, dynamic, ntk, yarn, "
               "longrope, llama3");
  EXPECT_ERROR(parse_hf_config(with(R"("rope_parameters": {"type": "proportional"})")),
               "rope_parameters.type 'proportional' is not supported");
  EXPECT_ERROR(parse_hf_config(with(R"("rope_scaling": "yarn")")), "rope_scaling must be an object (got string)");
  EXPECT_ERROR(parse_hf_config(with(R"("rope_scaling": {"rope_type": 3})")),
               "rope_scaling.rope_type must be a string (got number)");
  EXPECT_ERROR(parse_hf_config(with(R"("rope_scaling": {"rope_type": "linear"})")),
               "rope_scaling.factor is required for rope_type 'linear'");
  EXPECT_ERROR(parse_hf_config(with(R"("rope_scaling": {"rope_type": "linear", "factor": "2"})")),
               "rope_scaling.factor must be a number (got string)");
  EXPECT_ERROR(parse_hf_config(with(R"("rope_scaling": {"rope_type": "linear", "factor": 0})")),
               "linear: factor must be finite and > 0 (got 0)");
  EXPECT_ERROR(parse_hf_config(with(R"("rope_scaling": {"rope_type": "dynamic"})")),
               "rope_scaling.factor is required for rope_type 'dynamic'");
  EXPECT_ERROR(parse_hf_config(R"({"hidden_size": 128, "num_attention_heads": 2,
                                  "rope_scaling": {"rope_type": "dynamic", "factor": 2}})"),
               "max_position_embeddings is required for rope_type 'dynamic'");
  EXPECT_ERROR(parse_hf_config(with(R"("rope_scaling": {"rope_type": "yarn", "original_max_position_embeddings": 1024})")),
               "rope_scaling.factor is required for rope_type 'yarn'");
  EXPECT_ERROR(parse_hf_config(with(R"("rope_scaling": {"rope_type": "yarn", "factor": 4, "beta_fast": 1, "beta_slow": 32})")),
               "yarn: beta_fast (1) must be >= beta_slow (32): the ramp would run backwards");
  EXPECT_ERROR(parse_hf_config(with(R"("rope_scaling": {"rope_type": "yarn", "factor": 4, "truncate": "no"})")),
               "rope_scaling.truncate must be true or false (got string)");
  EXPECT_ERROR(parse_hf_config(R"({"hidden_size": 128, "num_attention_heads": 2,
                                  "rope_scaling": {"rope_type": "yarn", "factor": 4}})"),
               "rope_scaling.original_max_position_embeddings (or max_position_embeddings) is required for rope_type "
               "'yarn'");
  EXPECT_ERROR(parse_hf_config(with(R"("rope_scaling": {"rope_type": "llama3", "factor": 8, "high_freq_factor": 4,
                                                        "original_max_position_embeddings": 1024})")),
               "rope_scaling.low_freq_factor is required for rope_type 'llama3'");
  EXPECT_ERROR(parse_hf_config(with(R"("rope_scaling": {"rope_type": "llama3", "factor": 8, "low_freq_factor": 4,
                                                        "high_freq_factor": 1, "original_max_position_embeddings": 1024})")),
               "llama3: high_freq_factor (1) must be >= low_freq_factor (4)");
  EXPECT_ERROR(parse_hf_config(with(R"("rope_scaling": {"rope_type": "longrope", "short_factor": [1, 1]})")),
               "rope_scaling.long_factor is required for rope_type 'longrope'");
  EXPECT_ERROR(parse_hf_config(with(R"("rope_scaling": {"rope_type": "longrope", "short_factor": [1, 1],
                                                        "long_factor": [1, 1]})")),
               "longrope: short_factor has 2 entries, expected rotary_dim/2 = 32");
  EXPECT_ERROR(parse_hf_config(with(R"("rope_scaling": {"rope_type": "longrope", "short_factor": 3, "long_factor": [1]})")),
               "rope_scaling.short_factor must be a list of numbers (got number)");
  EXPECT_ERROR(parse_hf_config(with(R"("rope_scaling": {"rope_type": "longrope", "short_factor": [1, "x"], "long_factor": [1]})")),
               "rope_scaling.short_factor[1] must be a number (got string)");
  EXPECT_ERROR(parse_hf_config(with(R"("partial_rotary_factor": 1.5)")), "partial_rotary_factor must be in (0, 1] (got 1.5)");
  EXPECT_ERROR(parse_hf_config(R"({"head_dim": 10, "partial_rotary_factor": 0.3})"),
               "the rotary dimension must be even and >= 2 (got 3");
  EXPECT_ERROR(parse_hf_config(R"({"head_dim": 128, "rotary_dim": 200})"),
               "the rotated slice [0, 200) does not fit the head (128 elements)");
  EXPECT_ERROR(parse_hf_config(with(R"("rope_theta": -5)")), "rope_theta must be finite and > 0 (got -5)");
  EXPECT_ERROR(parse_hf_config(with(R"("rope_ratio": 0)")), "rope_ratio must be finite and > 0 (got 0)");
  EXPECT_ERROR(parse_hf_config(with(R"("rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 20]})")),
               "rope_scaling.mrope_section: mrope_section [16, 24, 20] sums to 60, but the rotary slice has 32 pairs");
  EXPECT_ERROR(parse_hf_config(with(R"("rope_scaling": {"type": "mrope", "mrope_section": "16,24,24"})")),
               "rope_scaling.mrope_section must be a list of integers (got string)");
  EXPECT_ERROR(parse_hf_config(with(R"("rope_scaling": {"type": "mrope", "mrope_section": [8, 8, 16],
                                                        "mrope_interleaved": true})")),
               "cannot be interleaved over 32 pairs");
  EXPECT_ERROR(parse_hf_config(with(R"("rope_parameters": {"full_attention": {"rope_type": "default"},
                                                           "sliding_attention": {"rope_type": "default"}})")),
               "rope_parameters holds one rope dict per layer type (full_attention); per-layer RoPE is not supported");
  EXPECT_ERROR(parse_hf_config(with(R"("max_position_embeddings": -1)")), "max_position_embeddings must be >= 0 (got -1)");
}
