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

#include "core/frequency_rule.hpp"

namespace ropecheck {

using MpFloat = boost::multiprecision::mpfr_float;  // variable precision, set per evaluation

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
// A known way to get a rule wrong, evaluated as exactly as the rule itself: the diagnosis asks whether a kernel's
// outputs fit it (properties/diagnosis.cpp). The reference always evaluates `none`.
enum class RuleMistake : uint8_t {
  none,
  yarn_ramp_reversed,     // YaRN: theta0*ramp + theta0/f*(1 - ramp): interpolated where it should extrapolate
  llama3_ratio_inverted,  // llama3: smooth = (wavelen/L - low)/(high - low), the ratio L/wavelen inverted
};

FrequencyTable evaluate_frequency_rule(const FrequencyRule& rule, uint32_t rotary_dim, double base,
                                       std::optional<uint64_t> seq_len = std::nullopt,
                                       unsigned bits = kDefaultRuleBits, RuleMistake mistake = RuleMistake::none);

// The table correctly rounded (to nearest, ties to even) from the MPFR values to double / to float.
std::vector<double> theta_as_double(const FrequencyTable& t);
std::vector<float> theta_as_float(const FrequencyTable& t);
double to_double(const MpFloat& v);
float to_float(const MpFloat& v);


}  // namespace ropecheck
