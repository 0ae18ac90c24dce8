// `ropecheck gate`: judge a kernel (a shared library, or a built-in) and give a
// CI verdict. See docs/gate.md.
#include <fmt/format.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "cli/commands.hpp"
#include "cli/model_options.hpp"
#include "gate/gate.hpp"
#include "gate/gate_report.hpp"
#include "impls/plugin_loader.hpp"

using namespace ropecheck;

namespace {

struct GateArgs {
  std::string kernel, impl, dtype = "all", layout = "all", angle_model, tolerance, report_dir = "ropecheck-gate-report",
                                junit, contract, baseline, supports, require, verdict_json;
  report::Slack slack;
  int64_t max_position = int64_t(1) << 24;
  uint64_t seed = 1;
  uint64_t cases = gate::kDefaultRandomCases;
  uint64_t property_cases = gate::kDefaultPropertyCases;
  uint64_t shrink_tries = 400;
  uint64_t failing_cases = 3;
  uint64_t input_padding = 0;
  double budget = 60, call_timeout = 10;
  int host_fd = -1;
  std::string host_name;
  bool quiet = false;
  bool verbose = false;
  cli::ModelArgs model;
  uint32_t rotary_dim = 0, rotary_offset = 0;
  double rotary_pct = 0;
  CLI::Option* rotary_dim_opt = nullptr;
  CLI::Option* rotary_pct_opt = nullptr;
  CLI::Option* rotary_offset_opt = nullptr;
  CLI::Option* layout_opt = nullptr;
  CLI::Option* max_position_opt = nullptr;
  CLI::Option* supports_opt = nullptr;
  CLI::Option* require_opt = nullptr;
} g;

CLI::App* add(CLI::App& app) {
  auto* s = app.add_subcommand("gate", "judge a kernel for CI: exit 0 pass, 1 fail, 2 usage or load error");
  auto* k = s->add_option("--kernel", g.kernel, "shared library exporting rc_rope_apply (include/ropecheck/kernel_abi.h)");
  auto* i = s->add_option("--impl", g.impl, "a built-in implementation instead");
  k->excludes(i);
  cli::add_host_options(s, g.host_fd, g.host_name, k, i);
  s->add_option("--dtype", g.dtype, "f32, f16, bf16, a comma list, or all")->capture_default_str();
  g.layout_opt = s->add_option("--layout", g.layout,
                               "interleaved, half-split, a comma list, or all (with --hf-config/--preset: one "
                               "layout, default the config's pairing)")
                    ->capture_default_str();
  g.max_position_opt = cli::add_int_option<int64_t>(
      s, "--max-position", g.max_position, 1, int64_t(1) << 62,
      "largest position tried, by every row (default: 2^24, and 2^40 for the long positions row; with "
      "--hf-config/--preset the model's max_position_embeddings - 1)");
  cli::add_model_options(s, g.model);
  g.rotary_dim_opt = cli::add_int_option<uint32_t>(
      s, "--rotary-dim", g.rotary_dim, 2, 1u << 16,
      "without a model: every case rotates this many elements of each head (even; the head at least as wide), "
      "for a kernel of one rotated slice (GPT-J's rotary_dim; docs/gate.md, \"Partial rotary\")");
  g.rotary_pct_opt = cli::add_number_option(
      s, "--rotary-pct", g.rotary_pct, 0, true, 1,
      "without a model: every case rotates int(head_dim * F) elements of each head (GPT-NeoX's rotary_pct, "
      "Hugging Face's partial_rotary_factor)", "F");
  g.rotary_pct_opt->excludes(g.rotary_dim_opt);
  g.rotary_offset_opt = cli::add_int_option<uint32_t>(
      s, "--rotary-offset", g.rotary_offset, 0, 1u << 16,
      "with --rotary-dim or --rotary-pct: the rotated slice starts at this element (DeepSeek's slice after 128 "
      "pass-through elements)");
  g.supports_opt = s->add_option(
      "--supports", g.supports,
      "what the kernel implements, a comma list of features (dtypes and layouts included; docs/gate.md, "
      "\"Features\"): calls using any other feature are not made, and each of these the run calls must have an "
      "accepted call");
  g.require_opt = s->add_option("--require", g.require,
                                "features that must have an accepted call, a comma list (docs/gate.md, \"Features\"): "
                                "FAIL naming each one without");
  s->add_option("--angle-model", g.angle_model, "exact (default for --kernel) or fp32")
      ->check(CLI::IsMember({"exact", "fp32"}));
  s->add_option("--contract", g.contract,
                "what the kernel promises: a comma list of angles=exact|f32[:K], cos-sin=f32|f16|bf16, "
                "arith=f32|f16|bf16, denormals=keep|flush, identity=values|bits, or a preset (docs/gate.md)");
  s->add_option("--tolerance", g.tolerance,
                "override the contract's derived allowances with one flat bound on every pair's error (u): one "
                "number, or per dtype like f32=8,bf16=1.5");
  cli::add_int_option<uint64_t>(s, "--seed", g.seed, 0, UINT64_MAX, "seed of the generated cases");
  cli::add_int_option<uint64_t>(s, "--cases", g.cases, 1, gate::kMaxRandomCases,
                                "random cases after the systematic part (their number follows from this, not the clock)");
  cli::add_int_option<uint64_t>(s, "--property-cases", g.property_cases, 1, gate::kMaxPropertyCases,
                                "executions of each property of the suite per dtype x layout (RapidCheck-generated, "
                                "seeded from --seed; a failure is shrunk to its smallest case)");
  cli::add_int_option<uint64_t>(s, "--shrink-tries", g.shrink_tries, 0, 1'000'000,
                                "candidates RapidCheck's shrinking tries on a property row's failure, at most (0: no "
                                "shrinking; the failing execution is shown as found)");
  cli::add_int_option<uint64_t>(s, "--failing-cases", g.failing_cases, 0, 1000,
                                "failing cases per row written as replay files besides the smallest (0: the smallest "
                                "only)");
  cli::add_int_option<uint64_t>(s, "--input-padding", g.input_padding, 0, gate::kMaxInputPadding,
                                "bytes after each input and table the kernel may read, as its documentation promises "
                                "its callers (XNNPACK's XNN_EXTRA_BYTES): their guard pages lie that much later; a "
                                "write there still fails (default 0: every buffer may end at a guard page)");
  cli::add_seconds_option(s, "--budget-seconds", g.budget, gate::kMaxBudgetSeconds,
                          "wall-time cap on the whole run (systematic part, random cases, shrinking)");
  cli::add_seconds_option(s, "--call-timeout", g.call_timeout, gate::kMaxCallTimeoutSeconds,
                          "seconds before a kernel call counts as hung");
  s->add_option("--report-dir", g.report_dir,
                "where report.{json,md,html}, failing cases (replay files) and the kernel's captured output go")
      ->capture_default_str();
  s->add_option("--baseline", g.baseline,
                "compare this run's report with a committed report.json (exit 1 on a regression, 2 if unreadable)");
  cli::add_slack_options(s, g.slack, "with --baseline: ");
  s->add_option("--junit", g.junit, "write JUnit XML here");
  s->add_option("--verdict-json", g.verdict_json,
                "write the verdict as JSON here: pass, the reason, coverage, and per row its counts, worst error and "
                "allowance, diagnosis and replay file (docs/gate.md)");
  s->add_flag("--quiet", g.quiet, "no progress lines");
  s->add_flag("--verbose", g.verbose,
              "print every table: each check's row, the notes, the error by position and each failure in full (the "
              "report has them too; without it the verdict is brief: coverage, contract, worst margin, one line per "
              "failing row and a reproduce line)");
  return s;
}


int run() {
  gate::GateOptions opt;
  if (int(!g.kernel.empty()) + int(!g.impl.empty()) + int(g.host_fd >= 0) != 1) {
    std::cerr << "error: give exactly one of --kernel PATH.so or --impl NAME\n";
    return 2;
  }
  if (!parse_dtype_list(g.dtype, opt.dtypes)) {
    std::cerr << "error: --dtype: expected f32, f16, bf16, a comma list of them, or all; got '" << g.dtype << "'\n";
    return 2;
  }
  std::optional<cli::ResolvedModel> model;
  if (!cli::resolve_model(g.model, g.layout_opt->count() ? g.layout : "", model)) return 2;
  const bool slice_given = g.rotary_dim_opt->count() || g.rotary_pct_opt->count();
  if (g.rotary_offset_opt->count() && !slice_given) {
    std::cerr << "error: --rotary-offset needs --rotary-dim N or --rotary-pct F (the slice it offsets)\n";
    return 2;
  }
  if (slice_given && model) {
    std::cerr << "error: --rotary-dim/--rotary-pct: a model (--hf-config/--preset) fixes the rotated slice itself\n";
    return 2;
  }
  if (slice_given) {
    RotarySlice sl;
    sl.fraction = g.rotary_pct_opt->count() ? g.rotary_pct : 0;
    sl.rotary_dim = g.rotary_dim_opt->count() ? g.rotary_dim : 0;
    sl.rotary_offset = g.rotary_offset;
    if (!sl.fraction && sl.rotary_dim % 2) {
      std::cerr << "error: --rotary-dim must be even (pairs are rotated), got " << sl.rotary_dim << "\n";
      return 2;
    }
    if (!sl.head_dim_from(2)) {
      std::cerr << "error: --rotary-pct " << g.rotary_pct << " with --rotary-offset " << g.rotary_offset
                << " gives no head_dim up to 65536 an even rotated slice\n";
      return 2;
    }
    opt.slice = sl;
    opt.slice_given = g.rotary_pct_opt->count() ? fmt::format("--rotary-pct {:g}", g.rotary_pct)
                                                : fmt::format("--rotary-dim {}", g.rotary_dim);
    if (g.rotary_offset) opt.slice_given += fmt::format(" --rotary-offset {}", g.rotary_offset);
  }
  if (model) {
    opt.layouts = {model->shape.layout};
  } else if (!parse_layout_list(g.layout, opt.layouts)) {
    std::cerr << "error: --layout: expected interleaved, half-split, a comma list, or all; got '" << g.layout << "'\n";
    return 2;
  }
  if (!g.tolerance.empty()) {
    if (std::string e = gate::parse_tolerance(g.tolerance, opt.tolerance); !e.empty()) {
      std::cerr << "error: " << e << "\n";
      return 2;
    }
  }
  std::optional<Contract> contract;
  if (!cli::parse_contract_option(g.contract, contract)) return 2;
  std::optional<FeatureSet> supports, require;
  if (!cli::parse_features_option("--supports", g.supports_opt, g.supports, supports) ||
      !cli::parse_features_option("--require", g.require_opt, g.require, require) ||
      !cli::check_supports_require(supports, require, model ? &model->shape : nullptr))
    return 2;
  opt.supports = supports;
  opt.require = require.value_or(FeatureSet{});
  opt.max_position = g.max_position;
  // The long positions row reaches kDefaultLongMaxPosition unless positions are bounded: by --max-position, or by
  // the model's context.
  if (g.max_position_opt->count()) {
    opt.long_max_position = g.max_position;
    opt.long_positions_bound = "--max-position";
  }
  if (model) {
    const uint64_t ctx = std::max(model->max_position_embeddings, model->shape.rule_seq_len);
    if (!g.max_position_opt->count()) {
      if (ctx > 1) opt.max_position = int64_t(std::min<uint64_t>(ctx - 1, int64_t(1) << 62));
      opt.long_max_position = opt.max_position;
      opt.long_positions_bound = "the model's context";
    }
    opt.model = model->shape;
    opt.model_name = model->name;
    opt.model_text = model->text("") +
                     fmt::format("model cases: every matrix, special-value, sequence, repeat, large and random case "
                                 "takes this configuration (head, rotated slice, base, rule, attention factor, axis "
                                 "map, layout); positions (0 .. {}), inputs, dtypes, heads and tokens vary; the "
                                 "property rows cannot take it (their notes say so)\n",
                                 opt.max_position);
  }
  opt.seed = g.seed;
  opt.budget_seconds = g.budget;
  opt.random_cases = g.cases;
  opt.property_cases = g.property_cases;
  opt.shrink_tries = g.shrink_tries;
  opt.failing_cases = g.failing_cases;
  opt.input_padding = g.input_padding;
  opt.call_timeout_seconds = g.call_timeout;
  opt.report_dir = g.report_dir;
  opt.quiet = g.quiet;
  Implementation impl;
  if (g.host_fd >= 0) {  // the Python package: its own process serves the calls (docs/python.md)
    impl = served_implementation(g.host_fd, g.host_name);
    opt.angle_model = g.angle_model.empty() ? AngleModel::exact : *parse_angle_model(g.angle_model);
    opt.error_model = loaded_kernel_error_model(opt.angle_model);
    opt.kernel_arg = "--host-fd";
    opt.contract = contract.value_or(Contract{});
  } else if (!g.kernel.empty()) {
    opt.angle_model = g.angle_model.empty() ? AngleModel::exact : *parse_angle_model(g.angle_model);
    PluginLoad pl = plugin_implementation(g.kernel);
    opt.error_model = loaded_kernel_error_model(opt.angle_model);
    if (!pl.impl) {
      std::cerr << "error: " << pl.error << "\n";
      return 2;
    }
    impl = *pl.impl;
    opt.kernel_arg = "--kernel " + g.kernel;
    opt.contract = contract.value_or(Contract{});
  } else {
    opt.kernel_arg = "--impl " + g.impl;
    const Implementation* b = find_implementation(g.impl);
    if (!b) {
      std::cerr << "error: unknown implementation '" << g.impl << "'; known:";
      for (const auto& n : implementation_names()) std::cerr << " " << n;
      std::cerr << "\n";
      return 2;
    }
    impl = *b;
    const KernelPromise promise = promise_of(*b);  // the built-in's, by name (properties/promise.hpp)
    opt.angle_model = g.angle_model.empty() ? promise.angle_model : *parse_angle_model(g.angle_model);
    opt.error_model =
        opt.angle_model == promise.angle_model ? promise.error_model : loaded_kernel_error_model(opt.angle_model);
    opt.contract = contract.value_or(promise.contract);
  }
  if (!g.baseline.empty()) {
    try {
      (void)report::load_report(g.baseline);  // a bad baseline fails before the run
    } catch (const std::exception& e) {
      std::cerr << "error: --baseline: " << e.what() << "\n";
      return 2;
    }
  }
  gate::GateResult r;
  try {
    r = gate::run_gate(impl, opt);
  } catch (const gate::LoadError& e) {
    std::cerr << "error: cannot load the kernel: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "error: the gate could not run: " << e.what() << "\n";
    return 2;
  }
  int rc = gate::emit_verdict(
      r, g.junit, g.verbose,
      g.report_dir.empty() ? "details: --verbose" : "details: --verbose, or " + g.report_dir + "/report.md");
  if (!g.verdict_json.empty()) {
    std::ofstream f(g.verdict_json);
    f << gate::verdict_json(r).dump(2) << "\n";
    if (!f) {
      std::cerr << "error: cannot write " << g.verdict_json << "\n";
      return 2;
    }
  }
  // The kernel by file name (not its path: a committed baseline compares across checkouts).
  nlohmann::json params = {{"kernel_arg", g.host_fd >= 0       ? "python " + impl.name
                                          : g.kernel.empty() ? "--impl " + g.impl
                                                             : "--kernel " + std::filesystem::path(g.kernel).filename().string()},
                           {"dtype", g.dtype},
                           {"layout", g.layout},
                           {"max_position", opt.max_position},
                           {"angle_model", std::string(to_string(opt.angle_model))},
                           {"seed", opt.seed},
                           {"cases", opt.random_cases},
                           {"property_cases", opt.property_cases},
                           {"budget_seconds", opt.budget_seconds},
                           {"call_timeout_seconds", opt.call_timeout_seconds},
                           {"tolerance", g.tolerance}};
  // Recorded only when given (a baseline of an earlier release compares its parameters key by key).
  if (supports) params["supports"] = supports->names();
  if (g.input_padding) params["input_padding"] = g.input_padding;
  if (require) params["require"] = require->names();
  if (!r.rotary_slice.empty()) params["rotary_slice"] = r.rotary_slice + " (" + r.rotary_slice_found + ")";
  if (model) {
    params["model"] = g.model.preset.empty() ? std::filesystem::path(g.model.hf_config).filename().string()
                                              : g.model.preset;
    if (model->shape.rule_seq_len) params["seq_len"] = model->shape.rule_seq_len;
  }
  try {
    const int cmp = gate::write_and_compare(gate::make_gate_report(r, "gate", params), g.report_dir, g.baseline,
                                            g.slack, std::cout);
    if (!g.report_dir.empty()) std::cerr << "wrote " << g.report_dir << "/report.{json,md,html}\n";
    if (rc == 0 && cmp) rc = 1;
  } catch (const std::exception& e) {
    std::cerr << "error: the report: " << e.what() << "\n";
    return 2;
  }
  return rc;
}

const cli::Registration reg{{"gate", add, run}};

}  // namespace
