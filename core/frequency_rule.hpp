// A frequency rule's parameters: which Hugging Face rule builds theta_i and with what. Plain data, shared
// by the case (core/rope_case.hpp), the kernel ABI's rc_freq_rule and the exact evaluation
// (reference/frequency_rules.hpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace ropecheck {

enum class FrequencyRuleType {
  default_,  // theta_i = base^(-2i/R)                                  HF _compute_default_rope_parameters
  linear,    // theta_i = base^(-2i/R) / factor                         HF _compute_linear_scaling_rope_parameters
  dynamic,   // NTK by sequence length: base' = base*(f*s/L - (f-1))^(R/(R-2)), s = max(seq_len, L)
             //                                                         HF _compute_dynamic_ntk_parameters
  ntk,       // fixed NTK-alpha: base' = base * alpha^(R/(R-2))         HF's former "ntk" type (factor),
             //                  Hunyuan "dynamic"+"alpha" (HF hunyuan modeling, vLLM DynamicNTKAlpha)
  yarn,      // YaRN ramp between base^(-2i/R) and base^(-2i/R)/factor, attention factor
             //                                                         HF _compute_yarn_parameters
  longrope,  // theta_i = base^(-2i/R) / lambda_i, lambda = short or long factors, attention factor
             //                                                         HF _compute_longrope_parameters
  llama3,    // wavelength bands: unchanged / smoothed / divided by factor
             //                                                         HF _compute_llama3_parameters
};

std::string_view to_string(FrequencyRuleType t);
// "default", "linear", "dynamic", "ntk", "yarn", "longrope", "llama3"; nullopt otherwise.
std::optional<FrequencyRuleType> parse_frequency_rule_type(std::string_view s);

// Every parameter HF's rope_scaling / rope_parameters carries for these rules. Fields a rule does not
// use are ignored by it. Values are as resolved by the config parser (reference/hf_config.hpp), e.g. a
// YaRN factor already derived from max/original when the config left it null.
struct FrequencyRule {
  FrequencyRuleType type = FrequencyRuleType::default_;

  // linear, dynamic, yarn, llama3: the scaling factor s. ntk: alpha (HF's former "ntk" type called it
  // factor; Hunyuan's configs call it alpha). longrope: used only for the default attention factor; when
  // absent there it is max_position_embeddings / original_max_position_embeddings (HF).
  std::optional<double> factor;

  // dynamic: L, the context length the table is unscaled up to (HF uses config.max_position_embeddings).
  // longrope: the numerator of the derived factor.
  uint64_t max_position_embeddings = 0;
  // yarn: L of the correction range; longrope: the short/long switch and the attention factor's log;
  // llama3: old_context_len. (HF's standardize_rope_params fills it from max_position_embeddings when a
  // config has none; the parser does the same.)
  uint64_t original_max_position_embeddings = 0;

  // llama3
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;

  // yarn (HF reads them with `.get(...) or default`, so 0 means the default too)
  double beta_fast = 32.0;
  double beta_slow = 1.0;
  std::optional<double> mscale;          // used only when both mscale and mscale_all_dim are non-zero
  std::optional<double> mscale_all_dim;  // (HF: `if mscale and mscale_all_dim`)
  bool truncate = true;                  // floor/ceil the correction range (gpt-oss ships false)

  // yarn, longrope: the attention factor itself; when set, it overrides the default formula.
  std::optional<double> attention_factor;

  // longrope: rotary_dim/2 rescale factors each (lambda_i)
  std::vector<double> short_factor;
  std::vector<double> long_factor;
};

// Checks the rule's parameters against rotary_dim and base without evaluating (the same errors
// evaluate_frequency_rule throws).
void validate_frequency_rule(const FrequencyRule& rule, uint32_t rotary_dim, double base);

}  // namespace ropecheck
