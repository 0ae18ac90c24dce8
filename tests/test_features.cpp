// The feature vocabulary (core/features.hpp): names, versions, predicates, parsing, the model's configuration
// and the coverage tally.
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "core/features.hpp"

using namespace ropecheck;

namespace {

RopeCase plain(uint32_t hd = 64, uint32_t rd = 64) {
  RopeCase c;
  c.head_dim = hd;
  c.rotary_dim = rd;
  c.positions = {0, 1, 7};
  c.input.assign(c.n_bytes(), 0);
  return c;
}

std::vector<std::string> names(const FeatureSet& s) { return s.names(); }

}  // namespace

// The names are a released interface: lowercase words joined by hyphens, each once, in the enum's order, and
// the ones released (docs/gate.md, "Features") keep their spelling.
TEST(Features, NamesAreReleasedOnceEachLowercaseHyphenated) {
  const std::regex shape("[a-z0-9]+(-[a-z0-9]+)*");
  std::set<std::string_view> seen;
  size_t k = 0;
  for (const FeatureInfo& f : all_features()) {
    EXPECT_EQ(size_t(f.feature), k++) << f.name;
    EXPECT_TRUE(std::regex_match(std::string(f.name), shape)) << f.name;
    EXPECT_TRUE(seen.insert(f.name).second) << f.name << " twice";
    EXPECT_TRUE(f.abi_version >= 1 && f.abi_version <= 4) << f.name;
    EXPECT_FALSE(f.meaning.empty()) << f.name;
    EXPECT_EQ(parse_feature(f.name), f.feature);
    EXPECT_EQ(to_string(f.feature), f.name);
  }
  EXPECT_EQ(FeatureSet::all().text(),
            "f32, f16, bf16, interleaved, half-split, partial-rotary, in-place, inv-freq, position-scale, "
            "positions-beyond-int32, rotary-offset, position-axes, attention-factor, negative-positions, rule-default, "
            "rule-linear, rule-dynamic, rule-ntk, rule-yarn, rule-longrope, rule-llama3, inverse, table-cos-sin-2, "
            "table-cos-sin-cat, table-cos-sin-full, table-angle, tensor-form, strides, q-and-k, batched, varlen, "
            "implicit-positions, int32-positions, table-per-token");
  EXPECT_EQ(FeatureSet::of_abi_version(1).text(),
            "f32, f16, bf16, interleaved, half-split, partial-rotary, in-place, inv-freq, position-scale, "
            "positions-beyond-int32");
  EXPECT_FALSE(parse_feature("F32"));
  EXPECT_FALSE(parse_feature("half_split"));
  EXPECT_FALSE(parse_feature(""));
}

TEST(Features, PredicatesNameWhatACallUses) {
  RopeCase c = plain();
  EXPECT_EQ(names(features_of(c, false)), (std::vector<std::string>{"f32", "interleaved"}));
  EXPECT_EQ(names(features_of(c, true)), (std::vector<std::string>{"f32", "interleaved", "in-place"}));
  c.dtype = Dtype::bf16;
  c.layout = Layout::half_split;
  c.rotary_dim = 32;
  c.position_scale = 0.25;
  c.inv_freq.assign(16, 0.5);
  c.positions = {3, int64_t(1) << 31};
  EXPECT_EQ(names(features_of(c, false)), (std::vector<std::string>{"bf16", "half-split", "partial-rotary", "inv-freq",
                                                                     "position-scale", "positions-beyond-int32"}));
  c.positions = {int64_t(INT32_MAX)};
  EXPECT_FALSE(features_of(c, false).has(Feature::positions_beyond_int32));
  c.positions = {int64_t(INT32_MIN)};
  EXPECT_FALSE(features_of(c, false).has(Feature::positions_beyond_int32));
  EXPECT_TRUE(features_of(c, false).has(Feature::negative_positions));
  c.positions = {int64_t(INT32_MIN) - 1};
  EXPECT_TRUE(features_of(c, false).has(Feature::positions_beyond_int32));

  RopeCase v = plain(192, 64);
  v.rotary_offset = 128;
  v.n_pos_axes = 3;
  v.positions = {1, 2, 3, 4, 5, 6};
  v.pair_axis.assign(32, 1);
  v.attention_factor = 1.25;
  FrequencyRule r;
  r.type = FrequencyRuleType::yarn;
  r.factor = 4;
  v.freq_rule = r;
  EXPECT_EQ(names(features_of(v, false)), (std::vector<std::string>{"f32", "interleaved", "partial-rotary",
                                                                     "rotary-offset", "position-axes",
                                                                     "attention-factor", "rule-yarn"}));
  for (auto [t, name] : {std::pair{FrequencyRuleType::default_, "rule-default"}, {FrequencyRuleType::linear, "rule-linear"},
                         {FrequencyRuleType::dynamic, "rule-dynamic"}, {FrequencyRuleType::ntk, "rule-ntk"},
                         {FrequencyRuleType::longrope, "rule-longrope"}, {FrequencyRuleType::llama3, "rule-llama3"}}) {
    v.freq_rule->type = t;
    EXPECT_TRUE(features_of(v, false).has(*parse_feature(name))) << name;
  }
}

// A call is an ABI v1 call exactly when it uses no feature introduced by ABI v2 (RopeCase::is_v1 decides the
// abi_version the harness passes).
TEST(Features, AV1CallIsOneWithoutV2Features) {
  const FeatureSet v1 = FeatureSet::of_abi_version(1);
  std::vector<RopeCase> cases;
  RopeCase c = plain(80, 64);
  cases.push_back(c);
  c.positions = {-1, 5};
  cases.push_back(c);
  c = plain(80, 64);
  c.rotary_offset = 8;
  cases.push_back(c);
  c = plain();
  c.pair_axis.assign(32, 0);  // one axis, but a map: a v2 call
  cases.push_back(c);
  c = plain();
  c.attention_factor = 0.5;
  cases.push_back(c);
  c = plain();
  c.freq_rule = FrequencyRule{};
  cases.push_back(c);
  c = plain();
  c.positions = {int64_t(1) << 40};
  cases.push_back(c);
  for (const RopeCase& x : cases)
    for (bool ip : {false, true})
      EXPECT_EQ(x.is_v1(), v1.contains(features_of(x, ip))) << x.summary() << ": " << features_of(x, ip).text();
}

TEST(Features, ListsParseAndNameWhatIsUnknown) {
  FeatureSet s;
  EXPECT_EQ(parse_feature_list("f32, half-split,rule-llama3", s), "");
  EXPECT_EQ(s.text(), "f32, half-split, rule-llama3");
  const std::string err = parse_feature_list("f32,llama3,,half_split", s);
  EXPECT_NE(err.find("unknown features 'llama3', '' (an empty name), 'half_split'"), std::string::npos) << err;
  EXPECT_NE(err.find("the features are: f32, f16, bf16"), std::string::npos) << err;
  FeatureSet a, b;
  a.add(Feature::f32);
  a.add(Feature::rule_yarn);
  b.add(Feature::f32);
  EXPECT_TRUE(a.contains(b));
  EXPECT_FALSE(b.contains(a));
  EXPECT_EQ(a.minus(b).text(), "rule-yarn");
  EXPECT_EQ(FeatureSet().text(), "none");
}

TEST(Features, ModelConfigurationAndCoverage) {
  RopeCase model = plain(128, 128);
  model.layout = Layout::half_split;
  model.base = 500000;
  FrequencyRule r;
  r.type = FrequencyRuleType::llama3;
  r.factor = 8;
  r.original_max_position_embeddings = 8192;
  model.freq_rule = r;
  EXPECT_EQ(model_features(model).text(), "half-split, rule-llama3");
  RopeCase c = plain(64, 64);
  c.dtype = Dtype::bf16;
  c.n_heads = 3;
  apply_case_template(model, c);
  EXPECT_TRUE(in_model_configuration(c, model));
  RopeCase d = c;
  d.freq_rule->factor = 4;
  EXPECT_FALSE(in_model_configuration(d, model));
  d = c;
  d.freq_rule.reset();
  EXPECT_FALSE(in_model_configuration(d, model));
  d = c;
  d.layout = Layout::interleaved;
  EXPECT_FALSE(in_model_configuration(d, model));

  Coverage cv;
  cv.add(c, false, false, &model);
  cv.add(c, true, true, &model);
  RopeCase g = plain();
  g.positions = {-3, int64_t(1) << 33};
  cv.add(g, false, true, &model);
  EXPECT_EQ(cv.sent, 3u);
  EXPECT_EQ(cv.accepted, 2u);
  EXPECT_EQ(cv.model_sent, 2u);
  EXPECT_EQ(cv.model_accepted, 1u);
  EXPECT_EQ(cv.of(Feature::rule_llama3).sent, 2u);
  EXPECT_EQ(cv.of(Feature::rule_llama3).accepted, 1u);
  EXPECT_EQ(cv.of(Feature::in_place).accepted, 1u);
  EXPECT_EQ(cv.of(Feature::positions_beyond_int32).accepted, 1u);
  EXPECT_TRUE(cv.any_position);
  EXPECT_EQ(cv.min_position, -3);
  EXPECT_EQ(cv.max_position, int64_t(1) << 33);
}

// Coverage counts what a call carried to the kernel: a case sent in another form (a table the gate built, the
// tensor form) is counted with the asked case's features, the sent call's ABI v3 and v4 features, and the sent
// call's positions -- a table kernel's positions are rows of its table, so an asked position past int32 is not
// one it reached, nor is a negative one; an int32 kernel's calls are int32 as sent.
TEST(Coverage, CountsWhatTheCallsCarried) {
  RopeCase asked = plain(64, 64);
  asked.inv_freq.assign(32, 0.5);
  asked.positions = {int64_t(1) << 35, 3};
  RopeCase renumbered = asked;  // (as a table call: small rows, a table kind)
  renumbered.inv_freq.clear();
  renumbered.positions = {1, 3};
  CosSinTable t;
  t.kind = TableKind::cos_sin_full;
  t.rows = 4;
  t.cos.assign(4 * 32, 1.0);
  t.sin.assign(4 * 32, 0.0);
  renumbered.table = t;
  Coverage cv;
  cv.add(asked, false, true, nullptr, &renumbered);
  EXPECT_EQ(cv.of(Feature::positions_beyond_int32).sent, 0u);
  EXPECT_EQ(cv.max_position, 3);
  EXPECT_EQ(cv.min_position, 1);
  EXPECT_EQ(cv.of(Feature::table_cos_sin_full).accepted, 1u);  // how it was sent
  EXPECT_EQ(cv.of(Feature::inv_freq).accepted, 1u);            // the values the table carries
  EXPECT_EQ(cv.of(Feature::table_per_token).sent, 0u);
  // The same asked positions as a sparse table's rows (the long positions row): reached.
  RopeCase sparse = renumbered;
  sparse.positions = asked.positions;
  sparse.table->stored = {3, int64_t(1) << 35};
  sparse.table->rows = (size_t(1) << 35) + 1;
  sparse.table->cos.assign(2 * 32, 1.0);
  sparse.table->sin.assign(2 * 32, 0.0);
  Coverage sp;
  sp.add(asked, false, true, nullptr, &sparse);
  EXPECT_EQ(sp.of(Feature::positions_beyond_int32).accepted, 1u);
  EXPECT_EQ(sp.max_position, int64_t(1) << 35);
  // A per-token table, and negative positions the sent call does not carry.
  RopeCase neg = plain(64, 64);
  neg.positions = {-2, 5};
  RopeCase per_token = neg;
  per_token.positions = {0, 5};
  per_token.table = t;
  per_token.table->by_token = true;
  Coverage pt;
  pt.add(neg, true, false, nullptr, &per_token);
  EXPECT_EQ(pt.of(Feature::negative_positions).sent, 0u);
  EXPECT_EQ(pt.of(Feature::table_per_token).sent, 1u);
  EXPECT_EQ(pt.of(Feature::table_per_token).accepted, 0u);
  EXPECT_FALSE(pt.any_position);  // (nothing accepted)
  // int32 positions in the tensor form as sent.
  RopeCase flat = plain(64, 64);
  flat.positions = {7, 9};
  RopeCase as_int32 = flat;
  as_int32.tensor = TensorCall{};
  as_int32.tensor->pos = PositionForm::int32;
  Coverage i32;
  i32.add(flat, false, true, nullptr, &as_int32);
  EXPECT_EQ(i32.of(Feature::int32_positions).accepted, 1u);
  EXPECT_EQ(i32.of(Feature::tensor_form).accepted, 1u);
}

// Defined once, documented once: docs/gate.md ("Features") has one table row per feature with its ABI version
// and meaning, as the code says.
TEST(Features, DocsListEveryFeatureAsDefined) {
  std::ifstream f(std::string(ROPECHECK_SOURCE_DIR) + "/docs/gate.md");
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string doc = ss.str();
  for (const FeatureInfo& i : all_features()) {
    std::string meaning;
    for (char ch : i.meaning) meaning += ch == '|' ? std::string("\\|") : std::string(1, ch);
    const std::string row = "| `" + std::string(i.name) + "` | " + std::to_string(i.abi_version) + " | " + meaning + " |";
    EXPECT_NE(doc.find("\n" + row + "\n"), std::string::npos) << "docs/gate.md lacks the row\n" << row;
  }
}
