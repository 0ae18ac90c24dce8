#include "reference/hf_config.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

namespace ropecheck {
namespace {

using nlohmann::json;

[[noreturn]] void bad(const std::string& msg) { throw std::invalid_argument(msg); }

std::string type_name(const json& j) { return j.type_name(); }

// A key that is present and not null.
const json* get(const json& obj, std::string_view key) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

bool present(const json& obj, std::string_view key) { return get(obj, key) != nullptr; }

double as_number(const json& j, const std::string& name) {
  if (!j.is_number()) bad(fmt::format("{} must be a number (got {})", name, type_name(j)));
  return j.get<double>();
}

uint64_t as_count(const json& j, const std::string& name) {
  if (j.is_number_unsigned()) return j.get<uint64_t>();
  if (j.is_number_integer()) {
    const int64_t v = j.get<int64_t>();
    if (v < 0) bad(fmt::format("{} must be >= 0 (got {})", name, v));
    return static_cast<uint64_t>(v);
  }
  if (j.is_number_float()) {
    const double v = j.get<double>();
    if (!(v >= 0) || v != std::floor(v) || v > 9007199254740992.0)
      bad(fmt::format("{} must be a non-negative integer (got {})", name, v));
    return static_cast<uint64_t>(v);
  }
  bad(fmt::format("{} must be an integer (got {})", name, type_name(j)));
}

uint32_t as_dim(const json& j, const std::string& name) {
  const uint64_t v = as_count(j, name);
  if (v > (1u << 24)) bad(fmt::format("{} is too large (got {})", name, v));
  return static_cast<uint32_t>(v);
}

bool as_bool(const json& j, const std::string& name) {
  if (!j.is_boolean()) bad(fmt::format("{} must be true or false (got {})", name, type_name(j)));
  return j.get<bool>();
}

std::vector<double> as_number_list(const json& j, const std::string& name) {
  if (!j.is_array()) bad(fmt::format("{} must be a list of numbers (got {})", name, type_name(j)));
  std::vector<double> out;
  out.reserve(j.size());
  for (size_t i = 0; i < j.size(); ++i) out.push_back(as_number(j[i], fmt::format("{}[{}]", name, i)));
  return out;
}

// Reads `key` from the first object that has it (nullptr: absent everywhere).
struct Scope {
  const json* obj;
  std::string prefix;  // "rope_scaling." etc.
};
std::pair<const json*, std::string> find_in(std::initializer_list<Scope> scopes, std::string_view key) {
  for (const Scope& s : scopes)
    if (s.obj)
      if (const json* v = get(*s.obj, key)) return {v, s.prefix + std::string(key)};
  return {nullptr, std::string(key)};
}

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

}  // namespace

std::string_view to_string(PairLayout l) {
  return l == PairLayout::half_split ? "half-split" : "interleaved";
}

std::vector<uint32_t> mrope_pair_axes(const MropeSpec& spec, uint32_t n_pairs) {
  if (spec.section.size() != 3)
    bad(fmt::format("mrope_section must have 3 entries (temporal, height, width), got {}", spec.section.size()));
  uint64_t sum = 0;
  for (uint32_t s : spec.section) sum += s;
  if (sum != n_pairs)
    bad(fmt::format("mrope_section [{}, {}, {}] sums to {}, but the rotary slice has {} pairs", spec.section[0],
                    spec.section[1], spec.section[2], sum, n_pairs));
  std::vector<uint32_t> axis(n_pairs, 0);
  if (!spec.interleaved) {
    uint32_t i = 0;
    for (uint32_t a = 0; a < 3; ++a)
      for (uint32_t k = 0; k < spec.section[a]; ++k) axis[i++] = a;
    return axis;
  }
  // HF Qwen3VLTextRotaryEmbedding.apply_interleaved_mrope: freqs_t[..., off : 3*section[d] : 3] = freqs[d]
  // for (d, off) in ((1, 1), (2, 2)); everything else keeps the temporal axis.
  std::array<uint32_t, 3> count{0, 0, 0};
  for (uint32_t i = 0; i < n_pairs; ++i) {
    if (i % 3 == 1 && uint64_t(i) < 3ull * spec.section[1])
      axis[i] = 1;
    else if (i % 3 == 2 && uint64_t(i) < 3ull * spec.section[2])
      axis[i] = 2;
    ++count[axis[i]];
  }
  for (uint32_t a = 0; a < 3; ++a)
    if (count[a] != spec.section[a])
      bad(fmt::format("mrope_section [{}, {}, {}] cannot be interleaved over {} pairs: the stride-3 map gives "
                      "axis {} {} pairs instead of {}",
                      spec.section[0], spec.section[1], spec.section[2], n_pairs, a, count[a], spec.section[a]));
  return axis;
}

FrequencyTable RopeConfig::frequencies(std::optional<uint64_t> seq_len, unsigned bits) const {
  return evaluate_frequency_rule(rule, rotary_dim, base, seq_len, bits);
}

RopeConfig parse_hf_config(std::string_view text) {
  if (text.size() > kMaxHfConfigBytes)
    bad(fmt::format("config.json is {} bytes; the limit is {} (16 MiB)", text.size(), kMaxHfConfigBytes));
  json root;
  try {
    root = json::parse(text.begin(), text.end());
  } catch (const json::parse_error& e) {
    bad(fmt::format("config.json is not valid JSON: {}", e.what()));
  }
  if (!root.is_object()) bad(fmt::format("config.json must be a JSON object (got {})", type_name(root)));

  // Multimodal configs (Qwen3-VL, ...) nest the language model under text_config.
  const json* cfg = &root;
  std::string cp;  // key prefix for messages
  if (!present(root, "hidden_size") && !present(root, "head_dim") && !present(root, "n_embd"))
    if (const json* tc = get(root, "text_config"); tc && tc->is_object()) {
      cfg = tc;
      cp = "text_config.";
    }

  RopeConfig rc;
  if (const json* mt = get(*cfg, "model_type"); mt && mt->is_string())
    rc.model_type = mt->get<std::string>();
  else if (const json* rmt = get(root, "model_type"); rmt && rmt->is_string())
    rc.model_type = rmt->get<std::string>();

  // ---- the rope dict: rope_scaling (older) wins over rope_parameters when both are set, as HF v5's
  // convert_rope_params_to_dict (`rope_scaling or self.rope_parameters`).
  const json* rope = nullptr;
  std::string rp;
  for (const char* k : {"rope_scaling", "rope_parameters"}) {
    const json* v = get(*cfg, k);
    if (!v) continue;
    if (!v->is_object()) bad(fmt::format("{}{} must be an object (got {})", cp, k, type_name(*v)));
    if (v->empty()) continue;
    rope = v;
    rp = cp + k + ".";
    break;
  }
  if (rope) {
    bool all_objects = true;
    for (const auto& [k, v] : rope->items()) all_objects = all_objects && v.is_object();
    if (all_objects)
      bad(fmt::format("{} holds one rope dict per layer type ({}); per-layer RoPE is not supported",
                      rp.substr(0, rp.size() - 1), rope->begin().key()));
  }
  auto rope_key = [&](std::string_view key) -> std::pair<const json*, std::string> {
    if (!rope) return {nullptr, rp + std::string(key)};
    return {get(*rope, key), rp + std::string(key)};
  };

  std::string type = "default";
  for (const char* k : {"rope_type", "type"}) {
    auto [v, name] = rope_key(k);
    if (!v) continue;
    if (!v->is_string()) bad(fmt::format("{} must be a string (got {})", name, type_name(*v)));
    type = v->get<std::string>();
    break;
  }
  const std::string type_key = rope ? rp + (present(*rope, "rope_type") ? "rope_type" : "type") : "rope_type";

  // ---- head_dim and the rotated slice
  const auto qk_rope = get(*cfg, "qk_rope_head_dim");
  if (qk_rope) {
    // DeepSeek MLA: q head = [q_nope (qk_nope_head_dim) | q_pe (qk_rope_head_dim)]; only q_pe rotates.
    // (HF's DeepseekV3Config sets head_dim = qk_rope_head_dim; a config's head_dim is that rope width.)
    rc.rotary_dim = as_dim(*qk_rope, cp + "qk_rope_head_dim");
    const json* nope = get(*cfg, "qk_nope_head_dim");
    rc.rotary_offset = nope ? as_dim(*nope, cp + "qk_nope_head_dim") : 0;
    rc.head_dim = rc.rotary_offset + rc.rotary_dim;
  } else {
    if (const json* hd = get(*cfg, "head_dim")) {
      rc.head_dim = as_dim(*hd, cp + "head_dim");
    } else if (const json* kv = get(*cfg, "kv_channels")) {
      rc.head_dim = as_dim(*kv, cp + "kv_channels");
    } else {
      // GPT-J / GPT-2 style configs spell them n_embd / n_head (HF's attribute_map).
      const char* hs_key = present(*cfg, "hidden_size") || !present(*cfg, "n_embd") ? "hidden_size" : "n_embd";
      const char* nh_key = present(*cfg, "num_attention_heads") || !present(*cfg, "n_head") ? "num_attention_heads"
                                                                                              : "n_head";
      const json* hs = get(*cfg, hs_key);
      const json* nh = get(*cfg, nh_key);
      if (!hs || !nh)
        bad(fmt::format("{}head_dim is missing and cannot be derived: it needs hidden_size and num_attention_heads",
                        cp));
      const uint64_t h = as_count(*hs, cp + hs_key), n = as_count(*nh, cp + nh_key);
      if (n == 0) bad(fmt::format("{}num_attention_heads must be > 0", cp));
      if (h % n != 0)
        bad(fmt::format("{}hidden_size ({}) is not a multiple of num_attention_heads ({})", cp, h, n));
      if (h / n > (1u << 24)) bad(fmt::format("{}head_dim (hidden_size / num_attention_heads) is too large", cp));
      rc.head_dim = static_cast<uint32_t>(h / n);
    }
    if (rc.head_dim == 0) bad(fmt::format("{}head_dim must be > 0", cp));
    auto [prf, prf_name] = find_in({{rope, rp}, {cfg, cp}}, "partial_rotary_factor");
    if (const json* rd = get(*cfg, "rotary_dim")) {
      rc.rotary_dim = as_dim(*rd, cp + "rotary_dim");  // GPT-J: an absolute count
    } else if (prf) {
      const double f = as_number(*prf, prf_name);
      if (!(f > 0 && f <= 1)) bad(fmt::format("{} must be in (0, 1] (got {})", prf_name, f));
      rc.rotary_dim = static_cast<uint32_t>(rc.head_dim * f);  // HF: int(head_dim * partial_rotary_factor)
    } else if (const json* pct = get(*cfg, "rotary_pct")) {
      const double f = as_number(*pct, cp + "rotary_pct");
      if (!(f > 0 && f <= 1)) bad(fmt::format("{}rotary_pct must be in (0, 1] (got {})", cp, f));
      rc.rotary_dim = static_cast<uint32_t>(rc.head_dim * f);  // HF GPT-NeoX: int(head_size * rotary_pct)
    } else if (rc.model_type == "chatglm") {
      rc.rotary_dim = rc.head_dim / 2;  // ChatGLM2/3, GLM-4: RotaryEmbedding(rotary_dim // 2)
    } else {
      rc.rotary_dim = rc.head_dim;
    }
  }
  if (rc.rotary_dim < 2 || rc.rotary_dim % 2 != 0)
    bad(fmt::format("the rotary dimension must be even and >= 2 (got {} from {})", rc.rotary_dim,
                    qk_rope ? "qk_rope_head_dim" : "head_dim and the partial-rotary keys"));
  if (uint64_t(rc.rotary_offset) + rc.rotary_dim > rc.head_dim)
    bad(fmt::format("the rotated slice [{}, {}) does not fit the head ({} elements)", rc.rotary_offset,
                    rc.rotary_offset + rc.rotary_dim, rc.head_dim));

  // ---- base
  {
    auto [theta, name] = find_in({{rope, rp}, {cfg, cp}}, "rope_theta");
    if (!theta) std::tie(theta, name) = find_in({{cfg, cp}}, "rotary_emb_base");
    rc.base = theta ? as_number(*theta, name) : 10000.0;
    if (!(std::isfinite(rc.base) && rc.base > 0)) bad(fmt::format("{} must be finite and > 0 (got {})", name, rc.base));
    if (const json* rr = get(*cfg, "rope_ratio")) {
      const double r = as_number(*rr, cp + "rope_ratio");
      if (!(std::isfinite(r) && r > 0)) bad(fmt::format("{}rope_ratio must be finite and > 0 (got {})", cp, r));
      rc.base *= r;  // GLM-4 / ChatGLM3 code: base = base * rope_ratio
      if (!std::isfinite(rc.base)) bad(fmt::format("{}rope_ratio overflows the base", cp));
    }
  }

  // ---- context lengths
  for (const char* k : {"max_position_embeddings", "seq_length", "n_positions"})
    if (const json* v = get(*cfg, k)) {
      rc.max_position_embeddings = as_count(*v, cp + k);
      break;
    }

  // ---- the rule
  FrequencyRule& r = rc.rule;
  auto number = [&](std::string_view key) -> std::optional<double> {
    auto [v, name] = rope_key(key);
    if (!v) return std::nullopt;
    return as_number(*v, name);
  };
  auto required_number = [&](std::string_view key) -> double {
    auto [v, name] = rope_key(key);
    if (!v) bad(fmt::format("{} is required for rope_type '{}'", name, type));
    return as_number(*v, name);
  };
  // HF standardize_rope_params: the top-level key (Phi-3) first, then the rope dict's, then
  // max_position_embeddings.
  auto original_max = [&]() -> uint64_t {
    if (const json* v = get(*cfg, "original_max_position_embeddings"))
      return as_count(*v, cp + "original_max_position_embeddings");
    if (auto [v, name] = rope_key("original_max_position_embeddings"); v) return as_count(*v, name);
    if (rc.max_position_embeddings == 0)
      bad(fmt::format("{}original_max_position_embeddings (or max_position_embeddings) is required for rope_type "
                      "'{}'",
                      rp, type));
    return rc.max_position_embeddings;
  };
  r.max_position_embeddings = rc.max_position_embeddings;

  if (type == "default" || type == "mrope") {
    r.type = FrequencyRuleType::default_;
  } else if (type == "linear") {
    r.type = FrequencyRuleType::linear;
    r.factor = required_number("factor");
  } else if (type == "dynamic" && number("alpha")) {
    r.type = FrequencyRuleType::ntk;  // Hunyuan: base * alpha^(R/(R-2)), fixed
    r.factor = number("alpha");
  } else if (type == "dynamic") {
    r.type = FrequencyRuleType::dynamic;
    r.factor = required_number("factor");
    if (rc.max_position_embeddings == 0)
      bad(fmt::format("{}max_position_embeddings is required for rope_type 'dynamic'", cp));
  } else if (type == "ntk") {
    r.type = FrequencyRuleType::ntk;
    r.factor = required_number("factor");
  } else if (type == "yarn") {
    r.type = FrequencyRuleType::yarn;
    auto [f, fname] = rope_key("factor");
    if (rope && !rope->contains("factor")) bad(fmt::format("{} is required for rope_type 'yarn'", fname));
    r.original_max_position_embeddings = original_max();
    if (f) {
      r.factor = as_number(*f, fname);
    } else {  // "factor": null -- HF v5 derives it
      if (rc.max_position_embeddings == 0)
        bad(fmt::format("{} is null and cannot be derived without max_position_embeddings", fname));
      r.factor = double(rc.max_position_embeddings) / double(r.original_max_position_embeddings);
    }
    if (auto v = number("beta_fast")) r.beta_fast = *v;
    if (auto v = number("beta_slow")) r.beta_slow = *v;
    r.mscale = number("mscale");
    r.mscale_all_dim = number("mscale_all_dim");
    r.attention_factor = number("attention_factor");
    if (auto [t, tname] = rope_key("truncate"); t) r.truncate = as_bool(*t, tname);
  } else if (type == "longrope" || type == "su") {
    r.type = FrequencyRuleType::longrope;
    for (const char* k : {"short_factor", "long_factor"}) {
      auto [v, name] = rope_key(k);
      if (!v) bad(fmt::format("{} is required for rope_type 'longrope'", name));
      (std::string_view(k) == "short_factor" ? r.short_factor : r.long_factor) = as_number_list(*v, name);
    }
    r.original_max_position_embeddings = original_max();
    r.factor = number("factor");
    r.attention_factor = number("attention_factor");
  } else if (type == "llama3") {
    r.type = FrequencyRuleType::llama3;
    r.factor = required_number("factor");
    r.low_freq_factor = required_number("low_freq_factor");
    r.high_freq_factor = required_number("high_freq_factor");
    r.original_max_position_embeddings = original_max();
  } else {
    bad(fmt::format("{} '{}' is not supported (supported: default, linear, dynamic, ntk, yarn, longrope, llama3; "
                    "'mrope' is read as default, 'su' as longrope)",
                    type_key, type));
  }

  // ---- M-RoPE
  {
    auto [sec, sname] = find_in({{rope, rp}, {cfg, cp}}, "mrope_section");
    if (sec) {
      if (!sec->is_array()) bad(fmt::format("{} must be a list of integers (got {})", sname, type_name(*sec)));
      MropeSpec spec;
      for (size_t i = 0; i < sec->size(); ++i) spec.section.push_back(as_dim((*sec)[i], fmt::format("{}[{}]", sname, i)));
      auto [il, iname] = find_in({{rope, rp}, {cfg, cp}}, "mrope_interleaved");
      spec.interleaved = (il && as_bool(*il, iname)) || starts_with(rc.model_type, "qwen3_vl");
      try {
        (void)mrope_pair_axes(spec, rc.rotary_dim / 2);
      } catch (const std::invalid_argument& e) {
        bad(fmt::format("{}: {}", sname, e.what()));
      }
      rc.mrope = std::move(spec);
    }
  }

  // ---- pairing
  static const std::array<std::string_view, 8> kInterleaved = {"chatglm", "glm",         "glm4",        "gptj",
                                                               "roformer", "deepseek_v2", "deepseek_v3", "kimi_k2"};
  if (std::find(kInterleaved.begin(), kInterleaved.end(), rc.model_type) != kInterleaved.end())
    rc.layout = PairLayout::interleaved;
  if (rc.model_type == "deepseek_v3" || rc.model_type == "kimi_k2") {
    // HF DeepseekV3Config.rope_interleave (default true): de-interleave, rotate_half, half-split output.
    // false: plain rotate_half on the slice.
    bool interleave = true;
    if (const json* ri = get(*cfg, "rope_interleave")) interleave = as_bool(*ri, cp + "rope_interleave");
    if (interleave)
      rc.output_half_split = true;
    else
      rc.layout = PairLayout::half_split;
  }

  validate_frequency_rule(rc.rule, rc.rotary_dim, rc.base);
  return rc;
}

RopeConfig load_hf_config(const std::filesystem::path& path) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) throw std::runtime_error(fmt::format("cannot read {}: {}", path.string(), ec.message()));
  if (size > kMaxHfConfigBytes)
    bad(fmt::format("{} is {} bytes; the limit for a config.json is {} (16 MiB)", path.string(), size,
                    kMaxHfConfigBytes));
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(fmt::format("cannot open {}", path.string()));
  std::string text;
  text.resize(size);
  in.read(text.data(), static_cast<std::streamsize>(size));
  if (in.gcount() != static_cast<std::streamsize>(size) || in.peek() != std::char_traits<char>::eof())
    throw std::runtime_error(fmt::format("{} changed while it was read", path.string()));
  return parse_hf_config(text);
}

bool rule_uses_seq_len(FrequencyRuleType t) {
  return t == FrequencyRuleType::dynamic || t == FrequencyRuleType::longrope;
}

namespace {

std::string describe_rule(const FrequencyRule& r) {
  std::string s(to_string(r.type));
  std::vector<std::string> p;
  auto num = [](double v) { return fmt::format("{:g}", v); };
  switch (r.type) {
    case FrequencyRuleType::default_: break;
    case FrequencyRuleType::linear: p.push_back("factor " + num(r.factor.value_or(1))); break;
    case FrequencyRuleType::dynamic:
      p.push_back("factor " + num(r.factor.value_or(1)));
      p.push_back(fmt::format("max_position_embeddings {}", r.max_position_embeddings));
      break;
    case FrequencyRuleType::ntk: p.push_back("alpha " + num(r.factor.value_or(1))); break;
    case FrequencyRuleType::yarn:
      p.push_back("factor " + num(r.factor.value_or(1)));
      p.push_back(fmt::format("original_max_position_embeddings {}", r.original_max_position_embeddings));
      p.push_back("beta_fast " + num(r.beta_fast));
      p.push_back("beta_slow " + num(r.beta_slow));
      if (r.mscale) p.push_back("mscale " + num(*r.mscale));
      if (r.mscale_all_dim) p.push_back("mscale_all_dim " + num(*r.mscale_all_dim));
      if (!r.truncate) p.push_back("truncate false");
      if (r.attention_factor) p.push_back("attention_factor " + num(*r.attention_factor));
      break;
    case FrequencyRuleType::longrope:
      if (r.factor) p.push_back("factor " + num(*r.factor));
      p.push_back(fmt::format("max_position_embeddings {}", r.max_position_embeddings));
      p.push_back(fmt::format("original_max_position_embeddings {}", r.original_max_position_embeddings));
      p.push_back(fmt::format("{} short / {} long factors", r.short_factor.size(), r.long_factor.size()));
      if (r.attention_factor) p.push_back("attention_factor " + num(*r.attention_factor));
      break;
    case FrequencyRuleType::llama3:
      p.push_back("factor " + num(r.factor.value_or(1)));
      p.push_back("low_freq_factor " + num(r.low_freq_factor));
      p.push_back("high_freq_factor " + num(r.high_freq_factor));
      p.push_back(fmt::format("original_max_position_embeddings {}", r.original_max_position_embeddings));
      break;
  }
  if (!p.empty()) s += " (" + fmt::format("{}", fmt::join(p, ", ")) + ")";
  return s;
}

}  // namespace

ModelCase model_case(const RopeConfig& cfg, std::string name, std::optional<uint64_t> seq_len,
                     std::optional<PairLayout> layout) {
  if (seq_len && !rule_uses_seq_len(cfg.rule.type))
    bad(fmt::format("--seq-len: the rule of {} is {}, whose table does not depend on the sequence length (only "
                    "dynamic and longrope do): leave --seq-len out",
                    name, to_string(cfg.rule.type)));
  if (seq_len && *seq_len == 0) bad("--seq-len must be > 0");
  ModelCase m;
  m.name = std::move(name);
  m.max_position_embeddings = cfg.max_position_embeddings;
  RopeCase& c = m.shape;
  const PairLayout pl = layout.value_or(cfg.layout);
  c.layout = pl == PairLayout::half_split ? Layout::half_split : Layout::interleaved;
  c.head_dim = cfg.head_dim;
  c.rotary_dim = cfg.rotary_dim;
  c.rotary_offset = cfg.rotary_offset;
  c.base = cfg.base;
  if (cfg.rule.type != FrequencyRuleType::default_) c.freq_rule = cfg.rule;
  c.rule_seq_len = seq_len.value_or(0);
  const FrequencyTable table = cfg.frequencies(seq_len);
  c.attention_factor = to_double(table.attention_factor);
  const uint32_t n_pairs = cfg.rotary_dim / 2;
  if (cfg.mrope) {
    c.n_pos_axes = 3;
    for (uint32_t a : mrope_pair_axes(*cfg.mrope, n_pairs)) c.pair_axis.push_back(uint8_t(a));
  }
  c.positions.assign(c.n_pos_axes, 0);

  auto& d = m.description;
  d.push_back(fmt::format("model: {}{}", m.name, cfg.model_type.empty() ? "" : " (model_type " + cfg.model_type + ")"));
  d.push_back(fmt::format("head: head_dim {}, rotated slice [{}, {}) ({} pairs), layout {}{}", cfg.head_dim,
                          cfg.rotary_offset, cfg.rotary_offset + cfg.rotary_dim, n_pairs, to_string(pl),
                          layout && *layout != cfg.layout
                              ? fmt::format(" (--layout; the config pairs {})", to_string(cfg.layout))
                              : " (the config's pairing)"));
  d.push_back(fmt::format("rule: {}; base {:g}", describe_rule(cfg.rule), cfg.base));
  if (rule_uses_seq_len(cfg.rule.type)) {
    std::string sl = seq_len ? fmt::format("seq_len {}", *seq_len)
                             : std::string("no --seq-len: HF's table before any growth");
    if (cfg.rule.type == FrequencyRuleType::longrope)
      sl += table.longrope_long ? ": the long factors" : ": the short factors";
    if (cfg.rule.type == FrequencyRuleType::dynamic)
      sl += fmt::format(": effective base {:.17g}", to_double(table.effective_base));
    d.push_back(sl);
  }
  if (n_pairs > 0) {
    const std::vector<double> th = theta_as_double(table);
    const auto [lo, hi] = std::minmax_element(th.begin(), th.end());
    d.push_back(fmt::format("theta: {} frequencies in [{:.9g}, {:.9g}] (theta_0 {}, theta_{} {})", th.size(), *lo,
                            *hi, hexfloat(th.front()), th.size() - 1, hexfloat(th.back())));
  }
  d.push_back(fmt::format("attention factor: {:.17g} ({}; multiplies cos and sin, as HF)", c.attention_factor,
                          hexfloat(c.attention_factor)));
  if (cfg.mrope)
    d.push_back(fmt::format("position axes: 3 (temporal, height, width), mrope_section [{}], {}; one position per "
                            "axis and token",
                            fmt::join(cfg.mrope->section, ", "),
                            cfg.mrope->interleaved ? "interleaved (stride-3) axis map" : "sectioned axis map"));
  else
    d.push_back("position axes: 1");
  if (cfg.max_position_embeddings) d.push_back(fmt::format("max_position_embeddings: {}", cfg.max_position_embeddings));
  if (cfg.output_half_split && c.layout == Layout::interleaved)
    m.caveats.push_back(
        "the config's rope_interleave (HF DeepSeek-V3: de-interleave, rotate, write pair i to elements o+i and "
        "o+R/2+i) is not expressible in the kernel ABI: the interleaved map is judged instead (pair i read from and "
        "written to elements o+2i, o+2i+1); HF's outputs are that permutation of these");
  return m;
}

void apply_model_config(const RopeConfig& cfg, std::optional<uint64_t> seq_len, RopeCase& c) {
  apply_case_template(model_case(cfg, "", seq_len).shape, c);
}

}  // namespace ropecheck
