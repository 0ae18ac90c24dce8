// --hf-config FILE / --preset NAME, --seq-len N and --position a,b,c: a model's RoPE configuration for
// `reference`, `gate`, `cases export` and `sweep` (reference/hf_config.hpp model_case is the one place a
// config becomes a case template).
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/rope_case.hpp"

namespace ropecheck::cli {

struct ModelArgs {
  std::string hf_config, preset;
  uint64_t seq_len = 0;
  CLI::Option* seq_len_opt = nullptr;
  bool given() const { return !hf_config.empty() || !preset.empty(); }
};

// What a command needs of a resolved model.
struct ResolvedModel {
  std::string name;
  RopeCase shape;  // the case template (ModelCase::shape)
  uint64_t max_position_embeddings = 0;
  std::vector<std::string> description, caveats;
  // description and caveats, one line each, each line prefixed.
  std::string text(const std::string& prefix) const;
};

// Adds --hf-config, --preset (mutually exclusive) and --seq-len to a subcommand.
void add_model_options(CLI::App* app, ModelArgs& a);

// Resolves the model options: nullopt when neither --hf-config nor --preset was given (then --seq-len is an
// error). layout: the command's --layout when the user gave one ("interleaved" or "half-split"; anything
// else, e.g. a comma list, is an error with a model), empty for the config's pairing. On an error prints
// "error: ..." to stderr and returns false (exit 2).
bool resolve_model(const ModelArgs& a, const std::string& layout, std::optional<ResolvedModel>& out);

// "a,b,c": one int64 per position axis. Returns an error message, or empty.
std::string parse_positions(const std::string& s, uint32_t n_axes, std::vector<int64_t>& out);

}  // namespace ropecheck::cli
