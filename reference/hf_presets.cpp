// Named small configs: the JSON text of a minimal config.json per model (only the keys RoPE reads, plus
// model_type), each citing the published config it is taken from and how its values were obtained. None of
// these was downloaded from the Hub (this machine cannot reach it): the values were read from public copies
// of the configs in source code, from the research note (shared/research/rope-variants.md), or from HF's
// own config classes, as each comment says.
#include <algorithm>
#include <string>

#include <fmt/format.h>

#include "reference/hf_config.hpp"

namespace ropecheck {
namespace {

constexpr HfPreset kPresets[] = {
    {"chatglm2-6b",
     "THUDM/chatglm2-6b config.json: the RoPE keys as printed by transformers 4.30/4.31 when loading that "
     "checkpoint (a public training log) and as in the research note section 12 (mirror GLM2@944d831). "
     "Head 128 (kv_channels), rotary_dim 64 (RotaryEmbedding(kv_channels // 2)), interleaved, base 10000, "
     "no rope_ratio.",
     R"({
  "model_type": "chatglm",
  "hidden_size": 4096,
  "num_attention_heads": 32,
  "kv_channels": 128,
  "multi_query_attention": true,
  "multi_query_group_num": 2,
  "original_rope": true,
  "seq_length": 32768,
  "torch_dtype": "float16"
})"},
    {"llama-3.1-8b",
     "meta-llama/Llama-3.1-8B-Instruct config.json as printed by transformers 4.45.2 (a public copy); the "
     "llama3 constants also match Meta's reference (research note section 8, LM@a9c89c4).",
     R"({
  "model_type": "llama",
  "hidden_size": 4096,
  "num_attention_heads": 32,
  "num_key_value_heads": 8,
  "head_dim": 128,
  "max_position_embeddings": 131072,
  "rope_theta": 500000.0,
  "rope_scaling": {
    "factor": 8.0,
    "high_freq_factor": 4.0,
    "low_freq_factor": 1.0,
    "original_max_position_embeddings": 8192,
    "rope_type": "llama3"
  }
})"},
    {"qwen2-vl-7b",
     "Qwen/Qwen2-VL-7B-Instruct config.json: hidden 3584 / 28 heads (head 128), rope_theta 1e6, rope_scaling "
     "{type: mrope, mrope_section [16, 24, 24]} -- the rope block as in the research note section 9 and in "
     "public copies of the Qwen2-VL / Qwen2.5-VL 7B configs; max_position_embeddings 32768 as recalled.",
     R"({
  "model_type": "qwen2_vl",
  "hidden_size": 3584,
  "num_attention_heads": 28,
  "num_key_value_heads": 4,
  "max_position_embeddings": 32768,
  "rope_theta": 1000000.0,
  "rope_scaling": {
    "type": "mrope",
    "mrope_section": [16, 24, 24]
  }
})"},
    {"qwen3-vl-8b",
     "Qwen/Qwen3-VL-8B-Instruct config.json, text_config only: head 128, rope_theta 5e6, rope_scaling "
     "{mrope_interleaved: true, mrope_section [24, 20, 20], rope_type: default} -- section and base as in the "
     "research note section 9.2 (seen there in third-party ports); hidden size and context length recalled, "
     "not verified.",
     R"({
  "model_type": "qwen3_vl",
  "text_config": {
    "model_type": "qwen3_vl_text",
    "hidden_size": 4096,
    "num_attention_heads": 32,
    "head_dim": 128,
    "max_position_embeddings": 262144,
    "rope_theta": 5000000,
    "rope_scaling": {
      "mrope_interleaved": true,
      "mrope_section": [24, 20, 20],
      "rope_type": "default"
    }
  }
})"},
    {"deepseek-v3",
     "deepseek-ai/DeepSeek-V3 config.json: MLA q head [q_nope 128 | q_pe 64], rope_theta 10000, yarn factor 40, "
     "original 4096, beta 32/1, mscale = mscale_all_dim = 1.0, max_position_embeddings 163840 -- the research "
     "note sections 6 and 21 and the reference inference/model.py ModelArgs (qk_nope_head_dim 128, "
     "qk_rope_head_dim 64, rope_factor 40, original_seq_len 4096); the rope_scaling block has the same form "
     "in public copies of DeepSeek-V2's published config.",
     R"({
  "model_type": "deepseek_v3",
  "hidden_size": 7168,
  "num_attention_heads": 128,
  "num_key_value_heads": 128,
  "qk_nope_head_dim": 128,
  "qk_rope_head_dim": 64,
  "v_head_dim": 128,
  "kv_lora_rank": 512,
  "q_lora_rank": 1536,
  "max_position_embeddings": 163840,
  "rope_theta": 10000,
  "rope_scaling": {
    "beta_fast": 32,
    "beta_slow": 1,
    "factor": 40,
    "mscale": 1.0,
    "mscale_all_dim": 1.0,
    "original_max_position_embeddings": 4096,
    "type": "yarn"
  }
})"},
    {"gpt-neox-20b",
     "EleutherAI/gpt-neox-20b config.json (a public copy written by transformers 4.19.0.dev0): head 96, "
     "rotary_pct 0.25 -> rotary_dim 24, rotary_emb_base 10000, half-split (research note section 2).",
     R"({
  "model_type": "gpt_neox",
  "hidden_size": 6144,
  "num_attention_heads": 64,
  "max_position_embeddings": 2048,
  "rotary_emb_base": 10000,
  "rotary_pct": 0.25
})"},
    {"roformer",
     "junnyu/roformer_chinese_base: HF's RoFormerConfig defaults, which its docstring says reproduce that "
     "checkpoint (hidden 768, 12 heads, max_position_embeddings 1536). RoFormer's sinusoidal table has no "
     "base key: 10000, interleaved (rotate every two), the whole head (64).",
     R"({
  "model_type": "roformer",
  "hidden_size": 768,
  "num_attention_heads": 12,
  "max_position_embeddings": 1536
})"},
    {"qwen2.5-7b-yarn4",
     "Qwen/Qwen2.5-7B-Instruct config.json (hidden 3584 / 28 heads, rope_theta 1e6, max 32768) with the YaRN "
     "block its README recommends for long context: {factor 4.0, original_max_position_embeddings 32768, "
     "type yarn} (research note section 5; the same block is in the Qwen2.5-VL README, QVL@f0af299).",
     R"({
  "model_type": "qwen2",
  "hidden_size": 3584,
  "num_attention_heads": 28,
  "num_key_value_heads": 4,
  "max_position_embeddings": 32768,
  "rope_theta": 1000000.0,
  "rope_scaling": {
    "factor": 4.0,
    "original_max_position_embeddings": 32768,
    "type": "yarn"
  }
})"},
    {"gpt-oss-20b",
     "openai/gpt-oss-20b config.json: head_dim 64, rope_theta 150000, YaRN factor 32, original 4096, beta 32/1, "
     "truncate false (research note sections 5 and 21; HF GptOssConfig defaults); hidden 2880 / 64 heads. The "
     "YaRN factor-32 preset.",
     R"({
  "model_type": "gpt_oss",
  "hidden_size": 2880,
  "num_attention_heads": 64,
  "head_dim": 64,
  "max_position_embeddings": 131072,
  "rope_theta": 150000,
  "rope_scaling": {
    "beta_fast": 32.0,
    "beta_slow": 1.0,
    "factor": 32.0,
    "original_max_position_embeddings": 4096,
    "rope_type": "yarn",
    "truncate": false
  }
})"},
    {"phi-3-vision-128k",
     "microsoft/Phi-3-vision-128k-instruct config.json (transformers 4.38.1 era, type 'su'), language-model "
     "keys, from a public copy; the research note section 7 uses the same 48 + 48 factors. Phi-3-mini-128k-"
     "instruct has the same geometry (head 96, base 1e4, original 4096, max 131072) and long factors, but "
     "its published short factors differ and are not reproduced here.",
     R"({
  "model_type": "phi3",
  "hidden_size": 3072,
  "num_attention_heads": 32,
  "num_key_value_heads": 32,
  "max_position_embeddings": 131072,
  "original_max_position_embeddings": 4096,
  "rope_theta": 10000.0,
  "rope_scaling": {
    "long_factor": [
      1.0299999713897705, 1.0499999523162842, 1.0499999523162842, 1.0799999237060547, 1.2299998998641968,
      1.2299998998641968, 1.2999999523162842, 1.4499999284744263, 1.5999999046325684, 1.6499998569488525,
      1.8999998569488525, 2.859999895095825, 3.68999981880188, 5.419999599456787, 5.489999771118164,
      5.489999771118164, 9.09000015258789, 11.579999923706055, 15.65999984741211, 15.769999504089355,
      15.789999961853027, 18.360000610351562, 21.989999771118164, 23.079999923706055, 30.009998321533203,
      32.35000228881836, 32.590003967285156, 35.56000518798828, 39.95000457763672, 53.840003967285156,
      56.20000457763672, 57.95000457763672, 59.29000473022461, 59.77000427246094, 59.920005798339844,
      61.190006256103516, 61.96000671386719, 62.50000762939453, 63.3700065612793, 63.48000717163086,
      63.48000717163086, 63.66000747680664, 63.850006103515625, 64.08000946044922, 64.760009765625,
      64.80001068115234, 64.81001281738281, 64.81001281738281
    ],
    "short_factor": [
      1.05, 1.05, 1.05, 1.1, 1.1, 1.1, 1.2500000000000002, 1.2500000000000002, 1.4000000000000004,
      1.4500000000000004, 1.5500000000000005, 1.8500000000000008, 1.9000000000000008, 2.000000000000001,
      2.000000000000001, 2.000000000000001, 2.000000000000001, 2.000000000000001, 2.000000000000001,
      2.000000000000001, 2.000000000000001, 2.000000000000001, 2.000000000000001, 2.000000000000001,
      2.000000000000001, 2.000000000000001, 2.000000000000001, 2.000000000000001, 2.000000000000001,
      2.000000000000001, 2.000000000000001, 2.000000000000001, 2.1000000000000005, 2.1000000000000005, 2.2,
      2.3499999999999996, 2.3499999999999996, 2.3499999999999996, 2.3499999999999996, 2.3999999999999995,
      2.3999999999999995, 2.6499999999999986, 2.6999999999999984, 2.8999999999999977, 2.9499999999999975,
      3.049999999999997, 3.049999999999997, 3.049999999999997
    ],
    "type": "su"
  }
})"},
};

}  // namespace

std::span<const HfPreset> hf_presets() { return kPresets; }

const HfPreset* find_hf_preset(std::string_view name) {
  for (const HfPreset& p : kPresets)
    if (p.name == name) return &p;
  return nullptr;
}

RopeConfig preset_config(std::string_view name) {
  if (const HfPreset* p = find_hf_preset(name)) return parse_hf_config(p->json);
  std::string known;
  for (const HfPreset& p : kPresets) known += (known.empty() ? "" : ", ") + std::string(p.name);
  throw std::invalid_argument(fmt::format("unknown preset '{}' (known: {})", name, known));
}

}  // namespace ropecheck
