#include "core/features.hpp"

#include <algorithm>
#include <climits>

namespace ropecheck {

namespace {

bool rule_is(const RopeCase& c, FrequencyRuleType t) { return c.freq_rule && c.freq_rule->type == t; }

bool beyond_int32(const RopeCase& c) {
  return std::any_of(c.positions.begin(), c.positions.end(),
                     [](int64_t m) { return m > int64_t(INT32_MAX) || m < int64_t(INT32_MIN); });
}

bool table_is(const RopeCase& c, TableKind k) { return c.table && c.table->kind == k; }

bool padded(const RopeCase& c) {
  if (!c.tensor) return false;
  for (const auto& t : c.tensor->pad)
    for (uint32_t p : t)
      if (p) return true;
  return false;
}

bool negative(const RopeCase& c) {
  return std::any_of(c.positions.begin(), c.positions.end(), [](int64_t m) { return m < 0; });
}

// The meanings are what docs/gate.md ("Features") lists; the predicates are the definitions.
const std::array<FeatureInfo, kFeatureCount> kFeatures = {{
    {Feature::f32, "f32", 1, "float32 data", [](const RopeCase& c, bool) { return c.dtype == Dtype::f32; }},
    {Feature::f16, "f16", 1, "float16 data", [](const RopeCase& c, bool) { return c.dtype == Dtype::f16; }},
    {Feature::bf16, "bf16", 1, "bfloat16 data", [](const RopeCase& c, bool) { return c.dtype == Dtype::bf16; }},
    {Feature::interleaved, "interleaved", 1, "pairs (2i, 2i+1) (GPT-J, Meta llama, ggml's default)",
     [](const RopeCase& c, bool) { return c.layout == Layout::interleaved; }},
    {Feature::half_split, "half-split", 1, "pairs (i, i + R/2) (GPT-NeoX, Hugging Face rotate_half)",
     [](const RopeCase& c, bool) { return c.layout == Layout::half_split; }},
    {Feature::partial_rotary, "partial-rotary", 1,
     "rotary_dim < head_dim: the other elements of each head pass through",
     [](const RopeCase& c, bool) { return c.rotary_dim < c.head_dim; }},
    {Feature::in_place, "in-place", 1, "the call writes its output over its input (out == in)",
     [](const RopeCase&, bool in_place) { return in_place; }},
    {Feature::inv_freq, "inv-freq", 1, "an explicit inv_freq table replaces base^(-2i/R)",
     [](const RopeCase& c, bool) { return !c.inv_freq.empty(); }},
    {Feature::position_scale, "position-scale", 1, "position_scale != 1 (linear position interpolation)",
     [](const RopeCase& c, bool) { return c.position_scale != 1.0; }},
    {Feature::positions_beyond_int32, "positions-beyond-int32", 1,
     "a position outside int32's range (|m| >= 2^31; positions are int64 in every ABI version)",
     [](const RopeCase& c, bool) { return beyond_int32(c); }},
    {Feature::rotary_offset, "rotary-offset", 2,
     "rotary_offset > 0: the rotated slice starts inside the head (DeepSeek MLA), elements pass through on both "
     "sides",
     [](const RopeCase& c, bool) { return c.rotary_offset != 0; }},
    {Feature::position_axes, "position-axes", 2,
     "several position axes with a per-pair axis map (M-RoPE, axial vision grids)",
     [](const RopeCase& c, bool) { return c.n_pos_axes != 1 || !c.pair_axis.empty(); }},
    {Feature::attention_factor, "attention-factor", 2, "attention_factor != 1 multiplies cos and sin (YaRN, LongRoPE)",
     [](const RopeCase& c, bool) { return c.attention_factor != 1.0; }},
    {Feature::negative_positions, "negative-positions", 2, "a negative position (axial grids centred on 0)",
     [](const RopeCase& c, bool) { return negative(c); }},
    {Feature::rule_default, "rule-default", 2, "a frequency-rule descriptor of kind default (theta_i = base^(-2i/R))",
     [](const RopeCase& c, bool) { return rule_is(c, FrequencyRuleType::default_); }},
    {Feature::rule_linear, "rule-linear", 2, "the linear frequency rule (theta_i / factor)",
     [](const RopeCase& c, bool) { return rule_is(c, FrequencyRuleType::linear); }},
    {Feature::rule_dynamic, "rule-dynamic", 2, "the dynamic NTK rule (base scaled by the sequence length)",
     [](const RopeCase& c, bool) { return rule_is(c, FrequencyRuleType::dynamic); }},
    {Feature::rule_ntk, "rule-ntk", 2, "the fixed NTK-alpha rule (base' = base * alpha^(R/(R-2)))",
     [](const RopeCase& c, bool) { return rule_is(c, FrequencyRuleType::ntk); }},
    {Feature::rule_yarn, "rule-yarn", 2, "the YaRN rule (a ramp between theta_i and theta_i / factor)",
     [](const RopeCase& c, bool) { return rule_is(c, FrequencyRuleType::yarn); }},
    {Feature::rule_longrope, "rule-longrope", 2, "the LongRoPE rule (theta_i / lambda_i, short or long factors)",
     [](const RopeCase& c, bool) { return rule_is(c, FrequencyRuleType::longrope); }},
    {Feature::rule_llama3, "rule-llama3", 2, "the llama3 rule (wavelength bands: unchanged, smoothed, divided)",
     [](const RopeCase& c, bool) { return rule_is(c, FrequencyRuleType::llama3); }},
    {Feature::inverse, "inverse", 3, "the inverse rotation (backward pass: sin negated, the attention factor kept)",
     [](const RopeCase& c, bool) { return c.direction == Direction::inverse; }},
    {Feature::table_cos_sin_2, "table-cos-sin-2", 3,
     "cos and sin given by the caller as two tables [P][R/2] (FlashAttention, ONNX Runtime)",
     [](const RopeCase& c, bool) { return table_is(c, TableKind::cos_sin_2); }},
    {Feature::table_cos_sin_cat, "table-cos-sin-cat", 3,
     "cos and sin given as one table [P][R], cos then sin (vLLM, FlashInfer)",
     [](const RopeCase& c, bool) { return table_is(c, TableKind::cos_sin_cat); }},
    {Feature::table_cos_sin_full, "table-cos-sin-full", 3,
     "cos and sin given as two full-width tables [P][R], each value twice (Hugging Face, Liger)",
     [](const RopeCase& c, bool) { return table_is(c, TableKind::cos_sin_full); }},
    {Feature::table_angle, "table-angle", 3, "f32 angles given as a full-width table [P][R] (TransformerEngine)",
     [](const RopeCase& c, bool) { return table_is(c, TableKind::angle); }},
    {Feature::tensor_form, "tensor-form", 3, "the call in the tensor form (DLPack-layout q, q_out, positions)",
     [](const RopeCase& c, bool) { return c.tensor.has_value(); }},
    {Feature::strides, "strides", 3, "tensors with strides wider than compact (gaps the kernel must not write)",
     [](const RopeCase& c, bool) { return padded(c); }},
    {Feature::q_and_k, "q-and-k", 3, "q and k in one call, each with its own head count (GQA, MQA)",
     [](const RopeCase& c, bool) { return c.tensor && c.tensor->k_heads > 0; }},
    {Feature::batched, "batched", 3, "q of rank 4: B sequences of S tokens",
     [](const RopeCase& c, bool) { return c.tensor && c.tensor->rank == 4; }},
    {Feature::varlen, "varlen", 3, "sequences of their own lengths given by cu_seqlens",
     [](const RopeCase& c, bool) { return c.tensor && !c.tensor->cu_seqlens.empty(); }},
    {Feature::implicit_positions, "implicit-positions", 3,
     "no positions given: token s of sequence b at s + seq_offsets[b]",
     [](const RopeCase& c, bool) { return c.tensor && c.tensor->pos == PositionForm::implicit; }},
    {Feature::int32_positions, "int32-positions", 3, "positions (or offsets, cu_seqlens) given as int32",
     [](const RopeCase& c, bool) {
       return c.tensor && (c.tensor->pos == PositionForm::int32 || c.tensor->index_int32);
     }},
    {Feature::table_per_token, "table-per-token", 4,
     "a caller-given table whose rows follow the tokens, gathered at their positions (Hugging Face's cos[position_ids], "
     "Liger, XNNPACK)",
     [](const RopeCase& c, bool) { return c.table && c.table->by_token; }},
}};

bool same_rule(const FrequencyRule& a, const FrequencyRule& b) {
  return a.type == b.type && a.factor == b.factor && a.max_position_embeddings == b.max_position_embeddings &&
         a.original_max_position_embeddings == b.original_max_position_embeddings &&
         a.low_freq_factor == b.low_freq_factor && a.high_freq_factor == b.high_freq_factor &&
         a.beta_fast == b.beta_fast && a.beta_slow == b.beta_slow && a.mscale == b.mscale &&
         a.mscale_all_dim == b.mscale_all_dim && a.truncate == b.truncate && a.attention_factor == b.attention_factor &&
         a.short_factor == b.short_factor && a.long_factor == b.long_factor;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

}  // namespace

const std::array<FeatureInfo, kFeatureCount>& all_features() { return kFeatures; }

const FeatureInfo& feature_info(Feature f) { return kFeatures[size_t(f)]; }

std::string_view to_string(Feature f) { return feature_info(f).name; }

std::optional<Feature> parse_feature(std::string_view name) {
  for (const FeatureInfo& i : kFeatures)
    if (i.name == name) return i.feature;
  return std::nullopt;
}

FeatureSet FeatureSet::all() {
  FeatureSet s;
  for (const FeatureInfo& i : kFeatures) s.add(i.feature);
  return s;
}

FeatureSet FeatureSet::of_abi_version(int max_version) {
  FeatureSet s;
  for (const FeatureInfo& i : kFeatures)
    if (i.abi_version <= max_version) s.add(i.feature);
  return s;
}

std::vector<Feature> FeatureSet::list() const {
  std::vector<Feature> v;
  for (const FeatureInfo& i : kFeatures)
    if (has(i.feature)) v.push_back(i.feature);
  return v;
}

std::vector<std::string> FeatureSet::names() const {
  std::vector<std::string> v;
  for (Feature f : list()) v.emplace_back(to_string(f));
  return v;
}

std::string FeatureSet::text() const {
  std::string o;
  for (Feature f : list()) o += (o.empty() ? "" : ", ") + std::string(to_string(f));
  return o.empty() ? "none" : o;
}

FeatureSet features_of(const RopeCase& c, bool in_place) {
  FeatureSet s;
  for (const FeatureInfo& i : kFeatures)
    if (i.used_by(c, in_place)) s.add(i.feature);
  return s;
}

std::string parse_feature_list(std::string_view text, FeatureSet& out) {
  out = FeatureSet();
  std::vector<std::string> unknown;
  size_t start = 0;
  while (true) {
    const size_t comma = text.find(',', start);
    const std::string_view item = trim(text.substr(start, comma == std::string_view::npos ? text.npos : comma - start));
    if (item.empty()) {
      unknown.push_back("'' (an empty name)");
    } else if (const auto f = parse_feature(item)) {
      out.add(*f);
    } else {
      unknown.push_back("'" + std::string(item) + "'");
    }
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  if (unknown.empty()) return "";
  std::string msg = "unknown feature";
  msg += unknown.size() > 1 ? "s " : " ";
  for (size_t k = 0; k < unknown.size(); ++k) msg += (k ? ", " : "") + unknown[k];
  msg += "; the features are: " + FeatureSet::all().text();
  return msg;
}

FeatureSet model_features(const RopeCase& model) {
  FeatureSet dtypes;
  for (Feature f : {Feature::f32, Feature::f16, Feature::bf16}) dtypes.add(f);
  return features_of(model, false).minus(dtypes);
}

bool in_model_configuration(const RopeCase& c, const RopeCase& m) {
  if (c.layout != m.layout || c.head_dim != m.head_dim || c.rotary_dim != m.rotary_dim ||
      c.rotary_offset != m.rotary_offset || c.base != m.base || c.position_scale != m.position_scale ||
      c.inv_freq != m.inv_freq || c.rule_seq_len != m.rule_seq_len || c.attention_factor != m.attention_factor ||
      c.n_pos_axes != m.n_pos_axes || c.pair_axis != m.pair_axis || c.freq_rule.has_value() != m.freq_rule.has_value())
    return false;
  return !c.freq_rule || same_rule(*c.freq_rule, *m.freq_rule);
}

void Coverage::add(const RopeCase& c, bool in_place, bool was_accepted, const RopeCase* model, const RopeCase* as_sent) {
  ++sent;
  accepted += was_accepted;
  // The asked case's features, with what the call as sent carried (its table, its form, its positions): the
  // positions a table call passes are rows of the table the gate built, which need not be the asked ones.
  FeatureSet fs = features_of(c, in_place);
  if (as_sent) {
    FeatureSet of_positions;
    of_positions.add(Feature::positions_beyond_int32);
    of_positions.add(Feature::negative_positions);
    const FeatureSet sent = features_of(*as_sent, in_place);
    fs = fs.minus(of_positions);
    for (Feature f : sent.list())
      if (feature_info(f).abi_version >= 3 || of_positions.has(f)) fs.add(f);
  }
  for (Feature f : fs.list()) {
    ++features[size_t(f)].sent;
    features[size_t(f)].accepted += was_accepted;
  }
  if (model && in_model_configuration(c, *model)) {
    ++model_sent;
    model_accepted += was_accepted;
  }
  const std::vector<int64_t>& positions = as_sent ? as_sent->positions : c.positions;
  if (!was_accepted || positions.empty()) return;
  const auto [lo, hi] = std::minmax_element(positions.begin(), positions.end());
  if (!any_position) {
    min_position = *lo;
    max_position = *hi;
    any_position = true;
  } else {
    min_position = std::min(min_position, *lo);
    max_position = std::max(max_position, *hi);
  }
}

}  // namespace ropecheck
