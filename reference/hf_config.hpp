// A model's Hugging Face config.json, reduced to what RoPE needs: the rotated slice of each head, the
// base, the frequency rule (reference/frequency_rules.hpp), the pairing, and the M-RoPE axis map.
//
// Which keys are read, and in which order (docs/variants.md has the table):
//  - the config itself, or its "text_config" when the top level has neither hidden_size nor head_dim
//    (multimodal configs such as Qwen3-VL nest the language model there);
//  - head_dim: "head_dim"; else DeepSeek MLA's qk_nope_head_dim + qk_rope_head_dim; else ChatGLM's
//    "kv_channels"; else hidden_size / num_attention_heads (GPT-J/GPT-2 spelling: n_embd / n_head; an
//    exact division is required);
//  - the rotated slice [rotary_offset, rotary_offset + rotary_dim):
//      qk_rope_head_dim (DeepSeek: offset qk_nope_head_dim, the q head being [q_nope | q_pe]) >
//      rotary_dim (GPT-J, absolute) > partial_rotary_factor (top level or inside rope_parameters;
//      int(head_dim * factor) as HF) > rotary_pct (GPT-NeoX; int(head_dim * pct)) >
//      model_type "chatglm" (head_dim / 2, as ChatGLM2/3 and GLM-4's RotaryEmbedding(rotary_dim // 2)) >
//      the whole head;
//  - base: rope_parameters.rope_theta > rope_theta > rotary_emb_base (older GPT-NeoX configs) > 10000,
//    times ChatGLM's rope_ratio (GLM-4: base = 10000 * rope_ratio; some ChatGLM2 derivatives divided
//    the positions instead -- not followed, see the doc);
//  - the rule: rope_parameters (HF v5) or rope_scaling (older), "rope_type" or its older spelling "type";
//    "mrope" (Qwen2-VL's config) is HF's default rule, "su" (early Phi-3) is longrope; "dynamic" with an
//    "alpha" (Hunyuan) is the fixed NTK-alpha rule; "ntk" (HF's former type) is the same rule with
//    alpha = factor;
//  - original_max_position_embeddings (llama3, yarn, longrope): the top-level key wins (HF's Phi-3
//    exception), then the one inside rope_scaling, then max_position_embeddings (HF's
//    standardize_rope_params);
//  - max_position_embeddings: "max_position_embeddings", else ChatGLM's "seq_length", else GPT-J's
//    "n_positions";
//  - M-RoPE: mrope_section (3 sections, in rope_scaling / rope_parameters or at the top level) and
//    mrope_interleaved (true, or model_type qwen3_vl*, whose HF rotary module always interleaves);
//  - the pairing: half-split (HF rotate_half) unless the model type pairs adjacent elements: chatglm,
//    glm, glm4, gptj, roformer, deepseek_v2, deepseek_v3, kimi_k2 (see RopeConfig::layout).
//
// Errors (std::invalid_argument, naming the key): an unknown rope type, a missing required field, a field
// of the wrong JSON type, a file larger than 16 MiB, malformed JSON.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/rope_case.hpp"
#include "reference/frequency_rules.hpp"

namespace ropecheck {

enum class PairLayout {
  half_split,   // pair i = (o+i, o+i+R/2): GPT-NeoX, HF rotate_half
  interleaved,  // pair i = (o+2i, o+2i+1): GPT-J, ChatGLM2+, RoFormer, DeepSeek MLA
};
std::string_view to_string(PairLayout l);

// Which position axis drives each frequency pair (Qwen2-VL / Qwen3-VL M-RoPE). Axis 0 = temporal,
// 1 = height, 2 = width. The frequency index is global (theta_i = base^(-2i/R) for every axis).
struct MropeSpec {
  std::vector<uint32_t> section;  // pairs per axis, 3 entries, summing to rotary_dim/2
  bool interleaved = false;       // Qwen3-VL's stride-3 map instead of Qwen2-VL's contiguous sections
};

// Per-pair axis index, n_pairs entries. Sectioned (HF qwen2_vl apply_multimodal_rotary_pos_emb):
// pairs [0, s0) -> 0, [s0, s0+s1) -> 1, the rest -> 2 (the partner half of rotate_half repeats the map).
// Interleaved (HF qwen3_vl Qwen3VLTextRotaryEmbedding.apply_interleaved_mrope): pair i -> 1 if
// i % 3 == 1 and i < 3*s1, -> 2 if i % 3 == 2 and i < 3*s2, else 0. Throws std::invalid_argument when
// the sections do not have 3 entries, do not sum to n_pairs, or (interleaved) the stride-3 map would not
// give each axis its section's count.
std::vector<uint32_t> mrope_pair_axes(const MropeSpec& spec, uint32_t n_pairs);

struct RopeConfig {
  std::string model_type;           // "" when the config has none
  uint32_t head_dim = 0;            // elements per (q/k) head
  uint32_t rotary_dim = 0;          // R: rotated elements, even
  uint32_t rotary_offset = 0;       // first rotated element (DeepSeek MLA: qk_nope_head_dim)
  double base = 10000.0;            // after rope_ratio
  FrequencyRule rule;               // resolved parameters (factor derived where HF derives it)
  uint64_t max_position_embeddings = 0;  // 0 when the config has none
  PairLayout layout = PairLayout::half_split;
  // HF DeepSeek-V3 (config.rope_interleave, default true): the kernel de-interleaves its input and writes
  // the rotated pair i to elements (o+i, o+R/2+i): outputs differ from the interleaved reference by that
  // permutation (research note section 6).
  bool output_half_split = false;
  std::optional<MropeSpec> mrope;

  // theta_i and the attention factor of this config at `seq_len` (see evaluate_frequency_rule).
  FrequencyTable frequencies(std::optional<uint64_t> seq_len = std::nullopt,
                             unsigned bits = kDefaultRuleBits) const;
};

// A model's configuration as the case template every command uses (`reference`, `gate`, `cases export`,
// `sweep` with --hf-config / --preset): core/rope_case.hpp apply_case_template puts it on a generated case.
struct ModelCase {
  std::string name;  // the preset's name, or the config file's path
  // The template: layout, head_dim, rotary_dim, rotary_offset, base, freq_rule (none for the default rule),
  // rule_seq_len, attention_factor (the rule's exact factor correctly rounded to double: HF multiplies cos
  // and sin by it), n_pos_axes and pair_axis (M-RoPE: 3 axes, mrope_pair_axes). dtype, heads, positions and
  // input are left for the caller (one token at position 0, no input).
  RopeCase shape;
  uint64_t max_position_embeddings = 0;  // the config's, 0 when it has none
  // The resolved configuration, one line each (rule, theta range, attention factor, slice, layout, axes).
  std::vector<std::string> description;
  // What the ABI cannot express and the commands judge instead (DeepSeek's rope_interleave output
  // permutation): said in every command's output.
  std::vector<std::string> caveats;
};

// Whether a rule's table depends on the sequence length (dynamic, longrope).
bool rule_uses_seq_len(FrequencyRuleType t);

// The case template of a config at `seq_len` (the rules that depend on it: dynamic, longrope; nullopt: HF's
// table before any growth -- dynamic unscaled, longrope's short factors), with its pairing or `layout`.
// Throws std::invalid_argument: a seq_len for a rule that does not use it (or 0), a bad rule.
ModelCase model_case(const RopeConfig& cfg, std::string name, std::optional<uint64_t> seq_len = std::nullopt,
                     std::optional<PairLayout> layout = std::nullopt);

// The same, on an existing case (keeps its dtype, heads, tokens, input when the head size is unchanged):
// apply_case_template(model_case(cfg, "", seq_len).shape, c).
void apply_model_config(const RopeConfig& cfg, std::optional<uint64_t> seq_len, RopeCase& c);

constexpr size_t kMaxHfConfigBytes = 16u << 20;  // 16 MiB

// Parses config.json text. Throws std::invalid_argument with a message naming the offending key.
RopeConfig parse_hf_config(std::string_view json_text);
// Reads and parses a file; refuses a file larger than kMaxHfConfigBytes (std::invalid_argument) and
// throws std::runtime_error when it cannot be read.
RopeConfig load_hf_config(const std::filesystem::path& path);

// Named small configs (`--preset`-style): the JSON text of a minimal config.json and where its values
// come from.
struct HfPreset {
  std::string_view name;
  std::string_view source;  // the published config it is taken from, and how the values were obtained
  std::string_view json;
};
std::span<const HfPreset> hf_presets();
const HfPreset* find_hf_preset(std::string_view name);  // nullptr when unknown
// parse_hf_config of a preset; std::invalid_argument naming the known presets when unknown.
RopeConfig preset_config(std::string_view name);

}  // namespace ropecheck
