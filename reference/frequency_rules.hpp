// Frequency rules: the inverse-frequency table theta_i (i = 0 .. rotary_dim/2 - 1) and the attention
// factor (the magnitude multiplying cos and sin) of every RoPE scaling rule Hugging Face transformers
// ships (src/transformers/modeling_rope_utils.py, ROPE_INIT_FUNCTIONS), evaluated exactly: every step is
// a real-number operation in MPFR at the requested precision (default 256 bits), never a float32 step.
//
// The rules follow HF's newest modeling_rope_utils.py (the v5-era text with `standardize_rope_params`,
// `truncate`, `mscale`/`mscale_all_dim`); docs/variants.md gives each formula, the HF function it follows
// and where vLLM and ggml differ. Where HF computes in float32 (torch.arange(...).float() / dim, the
// float32 `base ** exponent`, the float32 ramp of YaRN, the float32 short/long factors of LongRoPE, the
// float32 smooth factor of llama3) the comment on that rule says so as "engine: ..." -- that is what an
// engine does, not what the reference does. The exact rule is the real-number formula, every input
// (a double from the config) taken as the exact value it holds.
//
// Errors: a bad parameter throws std::invalid_argument whose message names the field (e.g.
// "yarn: factor must be > 0 (got -1)").
#pragma once

#include <boost/multiprecision/mpfr.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ropecheck {

using MpFloat = boost::multiprecision::mpfr_float;  // variable precision, set per evaluation

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

// The table of one rule at one (rotary_dim, base, seq_len).
struct FrequencyTable {
  unsigned bits = 0;              // MPFR precision every value below was computed at
  std::vector<MpFloat> theta;     // rotary_dim/2 entries
  MpFloat attention_factor;       // 1 for rules without one
  // What the rule resolved to, for reports and tests:
  MpFloat effective_base;         // dynamic / ntk: base'; otherwise the base
  MpFloat yarn_low, yarn_high;    // yarn: the correction range after floor/ceil (if truncate), the
                                  // clamping and the +1/1000 guard; 0 otherwise
  bool longrope_long = false;     // longrope: the long factors were used
};

constexpr unsigned kDefaultRuleBits = 256;

// Evaluates `rule` for a head whose rotated slice is `rotary_dim` wide (even, >= 2) with RoPE base
// `base` (> 0, finite). `seq_len` is the sequence length of the call for the rules that depend on it:
//  - dynamic: HF's seq_len = max(position_ids)+1 (default, and any value <= L: the unscaled table). HF's
//    cache grows and only resets below L, so the seq_len a call sees is history-dependent: the caller
//    passes the one HF would have used (see docs/variants.md).
//  - longrope: the long factors iff seq_len > original_max_position_embeddings (HF, per forward call);
//    no seq_len = the short factors (HF's table at init).
// `bits` is the MPFR precision (>= 64; the values carry at least that many bits). Calls are serialized:
// Boost 1.74 keeps mpfr_float's default precision in a process-wide static, which this function sets
// for its duration. Throws std::invalid_argument naming the bad field.
FrequencyTable evaluate_frequency_rule(const FrequencyRule& rule, uint32_t rotary_dim, double base,
                                       std::optional<uint64_t> seq_len = std::nullopt,
                                       unsigned bits = kDefaultRuleBits);

// The table correctly rounded (to nearest, ties to even) from the MPFR values to double / to float.
std::vector<double> theta_as_double(const FrequencyTable& t);
std::vector<float> theta_as_float(const FrequencyTable& t);
double to_double(const MpFloat& v);
float to_float(const MpFloat& v);

// Checks the rule's parameters against rotary_dim and base without evaluating (the same errors
// evaluate_frequency_rule throws).
void validate_frequency_rule(const FrequencyRule& rule, uint32_t rotary_dim, double base);

}  // namespace ropecheck
