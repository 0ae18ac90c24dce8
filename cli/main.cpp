// ropecheck command line: ask the reference, sweep the built-in kernels.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include <sstream>
#include <stdexcept>

#include "cli/commands.hpp"
#include "cli/model_options.hpp"
#include "core/rope_case.hpp"
#include "gate/gate.hpp"
#include "reference/reference.hpp"

using namespace ropecheck;

namespace {

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) out.push_back(item);
  return out;
}

double parse_number(const std::string& s, const char* what) {
  size_t used = 0;
  double v;
  try {
    v = std::stod(s, &used);  // accepts decimal and C99 hex floats, inf, nan
  } catch (const std::exception&) {
    throw CLI::ValidationError(what, "not a number: '" + s + "'");
  }
  if (used != s.size()) throw CLI::ValidationError(what, "not a number: '" + s + "'");
  return v;
}

}  // namespace

namespace ropecheck::cli {
std::vector<Command>& commands() {
  static std::vector<Command> c;
  return c;
}
}  // namespace ropecheck::cli

namespace {

struct ReferenceArgs {
  std::string dtype_s = "f32", layout_s, model_s = "exact", values_s, inv_freq_s, position_s = "0";
  uint32_t head_dim = 0, rotary_dim = 0;
  double base = 10000.0, scale = 1.0;
  cli::ModelArgs model;
  // Options a model fixes (an error with --hf-config / --preset).
  std::vector<CLI::Option*> shape_opts;
  CLI::Option* position_opt = nullptr;
} g_ref;

CLI::App* add_reference(CLI::App& app) {
  auto* ref = app.add_subcommand("reference", "print the exact, correctly rounded RoPE of one head vector");
  auto& a = g_ref;
  ref->add_option("--dtype", a.dtype_s, "f32, f16 or bf16")->check(CLI::IsMember({"f32", "f16", "bf16"}));
  ref->add_option("--layout", a.layout_s,
                  "interleaved or half-split (default interleaved; with --hf-config/--preset the config's pairing)")
      ->check(CLI::IsMember({"interleaved", "half-split"}));
  a.shape_opts.push_back(
      cli::add_int_option<uint32_t>(ref, "--head-dim", a.head_dim, 1, 1u << 20, "elements per head (required unless "
                                                                                 "--hf-config/--preset)"));
  a.shape_opts.push_back(cli::add_int_option<uint32_t>(ref, "--rotary-dim", a.rotary_dim, 0, 1u << 20,
                                                       "rotated elements (even); default (0) head-dim"));
  a.position_opt = ref->add_option("--position", a.position_s,
                  "token position (int64, may be negative); with a multi-axis scheme (M-RoPE: 3 axes) one integer "
                  "per axis, comma-separated, e.g. 3,1,2")
      ->capture_default_str();
  a.shape_opts.push_back(
      cli::add_number_option(ref, "--base", a.base, 0, true, 1e300, "theta_i = base^(-2i/rotary_dim)"));
  a.shape_opts.push_back(cli::add_number_option(ref, "--position-scale", a.scale, -1e300, false, 1e300,
                                                "angle = position * scale * theta_i"));
  a.shape_opts.push_back(
      ref->add_option("--inv-freq", a.inv_freq_s, "comma-separated table of rotary_dim/2 frequencies (replaces base)"));
  cli::add_model_options(ref, a.model);
  ref->add_option("--angle-model", a.model_s, "exact or fp32")->check(CLI::IsMember({"exact", "fp32"}));
  ref->add_option("--values", a.values_s, "comma-separated head_dim input values (decimal or hex floats)")
      ->required();
  return ref;
}

int run_reference() {
  auto& a = g_ref;
  std::optional<cli::ResolvedModel> model;
  if (!cli::resolve_model(a.model, a.layout_s, model)) return 2;
  if (model) {
    for (const CLI::Option* o : a.shape_opts)
      if (o->count()) {
        std::cerr << "error: " << o->get_name() << " is fixed by the model (--hf-config/--preset): leave it out\n";
        return 2;
      }
  } else if (a.head_dim == 0) {
    std::cerr << "error: --head-dim is required (or --hf-config FILE / --preset NAME)\n";
    return 2;
  }
  try {
      RopeCase c;
      if (model) {
        c = model->shape;
      } else {
        c.layout = *parse_layout(a.layout_s.empty() ? "interleaved" : a.layout_s);
        c.head_dim = a.head_dim;
        c.rotary_dim = a.rotary_dim ? a.rotary_dim : a.head_dim;
        c.base = a.base;
        c.position_scale = a.scale;
        if (!a.inv_freq_s.empty())
          for (const auto& s : split_commas(a.inv_freq_s)) c.inv_freq.push_back(parse_number(s, "--inv-freq"));
      }
      c.dtype = *parse_dtype(a.dtype_s);
      if (!a.position_opt->count()) {
        c.positions.assign(c.n_pos_axes, 0);  // every axis at 0
      } else if (std::string e = cli::parse_positions(a.position_s, c.n_pos_axes, c.positions); !e.empty()) {
        std::cerr << "error: " << e << "\n";
        return 2;
      }
      const uint32_t head_dim = c.head_dim;
      const auto vals = split_commas(a.values_s);
      if (vals.size() != head_dim) {
        std::cerr << "error: --values has " << vals.size() << " values, " << (model ? "the model's head_dim" : "--head-dim")
                  << " is " << head_dim << "\n";
        return 2;
      }
      c.input.resize(c.n_bytes());
      for (size_t k = 0; k < vals.size(); ++k) {
        const double v = parse_number(vals[k], "--values");
        const float f = float(v);
        if (double(f) != v && std::isfinite(v) && c.dtype == Dtype::f32)
          std::cerr << "note: value " << vals[k] << " is not an f32; using the nearest, " << hexfloat(f) << "\n";
        store_f32(c.dtype, c.input.data(), k, f);
        const double stored = load_f32(c.dtype, c.input.data(), k);
        if (c.dtype != Dtype::f32 && stored != v && std::isfinite(v))
          std::cerr << "note: value " << vals[k] << " is not a " << to_string(c.dtype) << "; using the nearest, "
                    << hexfloat(stored) << "\n";
      }
      if (std::string why = c.validate(); !why.empty()) {
        std::cerr << "error: " << why << "\n";
        return 2;
      }
      ReferenceOptions opt;
      opt.angle_model = *parse_angle_model(a.model_s);
      const ReferenceOutput out = reference_rope(c, opt);
      if (model) {
        std::cout << model->text("# ");
        std::cout << "# position:";
        for (int64_t p : c.positions) std::cout << " " << p;
        std::cout << "; dtype " << to_string(c.dtype) << "; " << c.n_elements() << " outputs, correctly rounded:\n"
                  << std::flush;
        for (const auto& l : model->caveats) std::cerr << "note: " << l << "\n";
      }
      for (size_t k = 0; k < c.n_elements(); ++k) {
        const double v = load_f32(c.dtype, out.rounded.data(), k);
        std::printf("%a %.9g\n", v, v);
      }
      return 0;
    } catch (const std::exception& e) {
      std::cerr << "error: " << e.what() << "\n";
      return 2;
    }
}

const ropecheck::cli::Registration reg_reference{{"reference", add_reference, run_reference}};

}  // namespace

int main(int argc, char** argv) {
  ropecheck::gate::keep_large_buffers_in_heap();
  CLI::App app{"ropecheck: proves RoPE kernels right or wrong against an exact reference"};
  app.require_subcommand(1);
  // The release (semver; CHANGES.md) and the kernel ABI version its header defines.
  app.set_version_flag("--version", std::string("ropecheck ") + ROPECHECK_VERSION + " (kernel ABI " +
                                        std::to_string(ROPECHECK_ABI_VERSION) + ")");
  std::vector<std::pair<CLI::App*, const ropecheck::cli::Command*>> subs;
  for (const auto& c : ropecheck::cli::commands()) subs.emplace_back(c.add(app), &c);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  for (const auto& [sub, cmd] : subs)
    if (sub->parsed()) return cmd->run();
  return 2;
}
