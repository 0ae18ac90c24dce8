// The feature vocabulary: one name for each thing a RoPE call can ask of a kernel (a dtype, a layout, partial
// rotary, in place, an inv_freq table, each ABI v2 field, each frequency rule, each ABI v3 call shape, ...), defined once here and used
// everywhere a feature is named: `gate --supports/--require`, `cases export --supports`, `cases check
// --require`, the case-set manifest, the verdict's coverage line. docs/gate.md, "Features", lists them.
//
// The names are a released interface: a name, once released, keeps its meaning; new features get new names.
// Each feature has the ABI version that introduced it and a predicate over a case (and whether the call is
// made in place): features_of(c, in_place) is every feature the call exercises.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/rope_case.hpp"

namespace ropecheck {

enum class Feature : uint8_t {
  // ABI v1
  f32,
  f16,
  bf16,
  interleaved,
  half_split,
  partial_rotary,          // rotary_dim < head_dim: elements pass through
  in_place,                // out == in
  inv_freq,                // an explicit inv_freq table instead of base
  position_scale,          // position_scale != 1
  positions_beyond_int32,  // a position outside int32's range (|m| >= 2^31)
  // ABI v2
  rotary_offset,
  position_axes,
  attention_factor,
  negative_positions,
  rule_default,
  rule_linear,
  rule_dynamic,
  rule_ntk,
  rule_yarn,
  rule_longrope,
  rule_llama3,
  // ABI v3
  inverse,
  table_cos_sin_2,
  table_cos_sin_cat,
  table_cos_sin_full,
  table_angle,
  tensor_form,
  strides,
  q_and_k,
  batched,
  varlen,
  implicit_positions,
  int32_positions,
  // ABI v4
  table_per_token,
};
inline constexpr size_t kFeatureCount = size_t(Feature::table_per_token) + 1;

struct FeatureInfo {
  Feature feature;
  std::string_view name;     // lowercase, hyphenated: "half-split", "rule-llama3", ...
  int abi_version;           // the ABI version that introduced it
  std::string_view meaning;  // one line
  bool (*used_by)(const RopeCase& c, bool in_place);
};

// Every feature, in the order of the enum (the order every list of features is printed in).
const std::array<FeatureInfo, kFeatureCount>& all_features();
const FeatureInfo& feature_info(Feature f);
std::string_view to_string(Feature f);
std::optional<Feature> parse_feature(std::string_view name);

// A set of features.
class FeatureSet {
 public:
  FeatureSet() = default;
  static FeatureSet all();
  static FeatureSet of_abi_version(int max_version);  // every feature introduced at or before that version
  bool has(Feature f) const { return bits_ >> unsigned(f) & 1u; }
  void add(Feature f) { bits_ |= uint64_t(1) << unsigned(f); }
  bool empty() const { return bits_ == 0; }
  bool contains(const FeatureSet& o) const { return (o.bits_ & ~bits_) == 0; }
  FeatureSet minus(const FeatureSet& o) const { FeatureSet s; s.bits_ = bits_ & ~o.bits_; return s; }
  FeatureSet intersect(const FeatureSet& o) const { FeatureSet s; s.bits_ = bits_ & o.bits_; return s; }
  std::vector<Feature> list() const;
  std::vector<std::string> names() const;
  std::string text() const;  // "f32, half-split, rule-llama3" (enum order); "none" when empty
  bool operator==(const FeatureSet&) const = default;

 private:
  uint64_t bits_ = 0;
};

// Every feature the call of case c (in place or not) exercises.
FeatureSet features_of(const RopeCase& c, bool in_place);

// "f32,half-split,rule-llama3": a comma list of feature names (spaces around names allowed). Returns an error
// message naming what is unknown and listing the known names, or empty on success.
std::string parse_feature_list(std::string_view text, FeatureSet& out);

// The features every case in a model's configuration uses (its layout, partial rotary, rotary offset, axes,
// attention factor, rule): features_of the template, dtypes aside (the model does not fix the data type).
FeatureSet model_features(const RopeCase& model);

// Whether case c is in a model's configuration: every field a model fixes (core/rope_case.hpp,
// apply_case_template: layout, head_dim, rotary_dim, rotary_offset, base, position_scale, inv_freq, freq_rule,
// rule_seq_len, attention_factor, n_pos_axes, pair_axis) equal to the template's.
bool in_model_configuration(const RopeCase& c, const RopeCase& model);

// What a run exercised: per feature, the calls sent and accepted (not declined); the positions of the accepted
// calls; the calls in a model's configuration. The gate, `cases check` and the verdict's coverage line use it.
struct FeatureTally {
  uint64_t sent = 0, accepted = 0;
};
struct Coverage {
  std::array<FeatureTally, kFeatureCount> features{};
  uint64_t sent = 0, accepted = 0;
  bool any_position = false;  // an accepted call had a position (min/max below are set)
  int64_t min_position = 0, max_position = 0;
  uint64_t model_sent = 0, model_accepted = 0;  // calls in the model's configuration (with a model)
  // One call: its features, whether it was accepted, and (with a model) whether it is in its configuration.
  // `as_sent`: the call as it was made when the harness changed how c is passed (a table it built for a kernel
  // that takes tables only, another form): c's features are counted, with as_sent's ABI v3 features, and the
  // positions as_sent carried (with them positions-beyond-int32 and negative-positions): a table call's positions
  // are rows of the table the gate built.
  void add(const RopeCase& c, bool in_place, bool accepted, const RopeCase* model = nullptr,
           const RopeCase* as_sent = nullptr);
  const FeatureTally& of(Feature f) const { return features[size_t(f)]; }
};

}  // namespace ropecheck
