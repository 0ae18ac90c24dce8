#include "cli/model_options.hpp"

#include <charconv>
#include <iostream>
#include <sstream>

#include "cli/commands.hpp"
#include "reference/hf_config.hpp"

namespace ropecheck::cli {

std::string ResolvedModel::text(const std::string& prefix) const {
  std::string o;
  for (const auto& l : description) o += prefix + l + "\n";
  for (const auto& l : caveats) o += prefix + "note: " + l + "\n";
  return o;
}

void add_model_options(CLI::App* app, ModelArgs& a) {
  std::string known;
  for (const HfPreset& p : hf_presets()) known += (known.empty() ? "" : ", ") + std::string(p.name);
  auto* f = app->add_option("--hf-config", a.hf_config,
                            "a Hugging Face config.json: the model's head, rotated slice, base, frequency rule, "
                            "attention factor, pairing and position axes (docs/variants.md)");
  auto* p = app->add_option("--preset", a.preset, "a named model configuration instead: " + known);
  f->excludes(p);
  a.seq_len_opt = add_int_option<uint64_t>(app, "--seq-len", a.seq_len, 1, UINT64_MAX,
                                           "with --hf-config/--preset: the sequence length, for the rules whose "
                                           "table depends on it (dynamic, longrope)");
}

bool resolve_model(const ModelArgs& a, const std::string& layout, std::optional<ResolvedModel>& out) {
  out.reset();
  const bool seq_given = a.seq_len_opt && a.seq_len_opt->count() > 0;
  if (!a.given()) {
    if (seq_given) {
      std::cerr << "error: --seq-len needs --hf-config FILE or --preset NAME (it selects a model's "
                   "sequence-length-dependent table)\n";
      return false;
    }
    return true;
  }
  std::optional<PairLayout> pl;
  if (!layout.empty()) {
    if (layout == "interleaved") pl = PairLayout::interleaved;
    else if (layout == "half-split") pl = PairLayout::half_split;
    else {
      std::cerr << "error: --layout: with --hf-config/--preset give one layout (interleaved or half-split; default "
                   "the config's pairing), got '"
                << layout << "'\n";
      return false;
    }
  }
  try {
    RopeConfig cfg;
    std::string name;
    if (!a.preset.empty()) {
      cfg = preset_config(a.preset);  // names the known presets when unknown
      name = a.preset;
    } else {
      cfg = load_hf_config(a.hf_config);
      name = a.hf_config;
    }
    ModelCase m = model_case(cfg, name, seq_given ? std::optional<uint64_t>(a.seq_len) : std::nullopt, pl);
    ResolvedModel r;
    r.name = m.name;
    r.shape = std::move(m.shape);
    r.max_position_embeddings = m.max_position_embeddings;
    r.description = std::move(m.description);
    r.caveats = std::move(m.caveats);
    out = std::move(r);
    return true;
  } catch (const std::exception& e) {
    std::cerr << "error: " << (a.preset.empty() ? "--hf-config " + a.hf_config : "--preset " + a.preset) << ": "
              << e.what() << "\n";
    return false;
  }
}

std::string parse_positions(const std::string& s, uint32_t n_axes, std::vector<int64_t>& out) {
  out.clear();
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    int64_t v = 0;
    const auto [p, ec] = std::from_chars(item.data(), item.data() + item.size(), v, 10);
    if (item.empty() || ec != std::errc() || p != item.data() + item.size())
      return "--position: '" + item + "' is not an integer in [" + std::to_string(INT64_MIN) + ", " +
             std::to_string(INT64_MAX) + "]";
    out.push_back(v);
  }
  if (!s.empty() && s.back() == ',') return "--position: '" + s + "' ends with a comma";
  if (out.size() != n_axes)
    return n_axes == 1 ? "--position: one position expected (the scheme has 1 position axis), got " +
                             std::to_string(out.size()) + " ('" + s + "')"
                       : "--position: the scheme has " + std::to_string(n_axes) +
                             " position axes (M-RoPE: temporal, height, width): give one integer per axis, "
                             "comma-separated (e.g. 3,1,2), got " +
                             std::to_string(out.size()) + " ('" + s + "')";
  return "";
}

}  // namespace ropecheck::cli
