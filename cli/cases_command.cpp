// `ropecheck cases export --dir D` / `ropecheck cases check --dir D`: the gate
// for kernels that cannot be loaded (GPU, Python). See gate/case_set.hpp.
#include <fstream>
#include <iostream>
#include <sstream>

#include <filesystem>

#include "cli/commands.hpp"
#include "cli/model_options.hpp"
#include "gate/case_set.hpp"
#include "gate/gate_report.hpp"

using namespace ropecheck;

namespace {

struct CasesArgs {
  std::string dir, dtype = "all", layout = "all", angle_model = "exact", tolerance, junit, contract, report_dir, baseline,
      supports, require, tables = "export";
  report::Slack slack;
  int64_t max_position = int64_t(1) << 24;
  uint64_t seed = 1;
  uint64_t random_cases = 32;
  uint64_t property_cases = 8;
  CLI::App* exp = nullptr;
  CLI::App* chk = nullptr;
  cli::ModelArgs model;
  CLI::Option* layout_opt = nullptr;
  CLI::Option* max_position_opt = nullptr;
  CLI::Option* supports_opt = nullptr;
  CLI::Option* require_opt = nullptr;
} g;

CLI::App* add(CLI::App& app) {
  auto* s = app.add_subcommand("cases", "export a case set for an external kernel, or check its outputs");
  s->require_subcommand(1);
  g.exp = s->add_subcommand("export", "write inputs (.npy) and manifest.json to a directory");
  g.exp->add_option("--dir", g.dir, "output directory")->required();
  g.exp->add_option("--dtype", g.dtype, "f32, f16, bf16, a comma list, or all")->capture_default_str();
  g.layout_opt = g.exp->add_option("--layout", g.layout,
                                   "interleaved, half-split, a comma list, or all (with --hf-config/--preset: one "
                                   "layout, default the config's pairing)")
                     ->capture_default_str();
  g.max_position_opt = cli::add_int_option<int64_t>(
      g.exp, "--max-position", g.max_position, 1, int64_t(1) << 62,
      "largest position, in every row (default: 2^24, and 2^40 for the long positions row; with --hf-config/--preset "
      "the model's max_position_embeddings - 1)");
  cli::add_model_options(g.exp, g.model);
  g.supports_opt = g.exp->add_option(
      "--supports", g.supports,
      "what the external program implements, a comma list of features (dtypes and layouts included; docs/gate.md, "
      "\"Features\"): only cases using these are written (default: every ABI v1 feature, and a model's), and "
      "`check` requires an accepted case of each that has cases");
  g.exp->add_option("--tables", g.tables,
                    "export: the cases' tables are written as .npy for the program; program: the program builds "
                    "each table itself (from the case's angle fields) and writes it next to its output, and `check` "
                    "judges the table in the table fidelity row (docs/gate.md, \"ABI v3 cases\")")
      ->check(CLI::IsMember({"export", "program"}))
      ->capture_default_str();
  g.exp->add_option("--angle-model", g.angle_model, "exact or fp32")->check(CLI::IsMember({"exact", "fp32"}));
  g.exp->add_option("--contract", g.contract, "what the external kernel promises (recorded in the manifest; docs/gate.md)");
  g.exp->add_option("--tolerance", g.tolerance, "a flat bound (u) replacing the contract's allowances: one number or f32=8,bf16=1.5");
  cli::add_int_option<uint64_t>(g.exp, "--seed", g.seed, 0, UINT64_MAX, "seed of the generated cases");
  cli::add_int_option<uint64_t>(g.exp, "--random-cases", g.random_cases, 0, gate::kMaxExportRandomCases,
                                "random cases added to the systematic ones");
  cli::add_int_option<uint64_t>(g.exp, "--property-cases", g.property_cases, 1, gate::kMaxPropertyCases,
                                "executions of each exportable property per dtype x layout (the gate's first ones)");
  g.chk = s->add_subcommand("check", "judge the outputs (.npy) and declines an external program wrote: exit 0 pass, 1 fail, "
                                     "2 error");
  g.chk->add_option("--dir", g.dir, "the exported directory, with the outputs written")->required();
  g.chk->add_option("--contract", g.contract, "judge under this contract instead of the manifest's");
  g.chk->add_option("--tolerance", g.tolerance, "a flat bound (u) replacing the contract's allowances: one number or f32=8,bf16=1.5");
  g.require_opt = g.chk->add_option("--require", g.require,
                                    "features that must have an accepted case, a comma list (docs/gate.md, "
                                    "\"Features\"): FAIL naming each one without");
  g.chk->add_option("--junit", g.junit, "write JUnit XML here");
  g.chk->add_option("--report-dir", g.report_dir, "write the check's report.{json,md,html} here");
  g.chk->add_option("--baseline", g.baseline,
                    "compare the check's report with a committed report.json (exit 1 on a regression, 2 if unreadable)");
  cli::add_slack_options(g.chk, g.slack, "with --baseline: ");
  return s;
}

int run() {
  std::map<Dtype, double> tol;
  if (!g.tolerance.empty())
    if (std::string e = gate::parse_tolerance(g.tolerance, tol); !e.empty()) {
      std::cerr << "error: " << e << "\n";
      return 2;
    }
  std::optional<Contract> contract;
  if (!cli::parse_contract_option(g.contract, contract)) return 2;
  try {
    if (g.exp->parsed()) {
      gate::ExportOptions opt;
      if (!parse_dtype_list(g.dtype, opt.dtypes)) {
        std::cerr << "error: --dtype: expected f32, f16, bf16, a comma list, or all\n";
        return 2;
      }
      std::optional<cli::ResolvedModel> model;
      if (!cli::resolve_model(g.model, g.layout_opt->count() ? g.layout : "", model)) return 2;
      if (model) {
        opt.layouts = {model->shape.layout};
      } else if (!parse_layout_list(g.layout, opt.layouts)) {
        std::cerr << "error: --layout: expected interleaved, half-split, a comma list, or all\n";
        return 2;
      }
      std::optional<FeatureSet> supports;
      if (!cli::parse_features_option("--supports", g.supports_opt, g.supports, supports) ||
          !cli::check_supports_require(supports, std::nullopt, model ? &model->shape : nullptr))
        return 2;
      opt.supports = supports;
      opt.program_tables = g.tables == "program";
      opt.max_position = g.max_position;
      // The long positions row reaches kDefaultLongMaxPosition unless positions are bounded (--max-position, a
      // model's context).
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
        opt.model_description = model->description;
        for (const auto& l : model->caveats) opt.model_description.push_back("note: " + l);
        std::cout << model->text("")
                  << "model cases: the matrix, special-value and random cases take this configuration (positions 0 .. "
                  << opt.max_position
                  << "); the property rows' cases are the generic ones (the property generators cannot take a "
                     "model)\n";
      }
      opt.angle_model = *parse_angle_model(g.angle_model);
      opt.tolerance = tol;
      opt.contract = contract.value_or(Contract{});
      opt.seed = g.seed;
      opt.random_cases = g.random_cases;
      opt.property_cases = g.property_cases;
      const gate::ExportedSet set = gate::export_case_set(g.dir, opt);
      std::cout << "wrote " << set.cases << " cases to " << g.dir << " (manifest.json version " << set.version
                << ", NNNN.in.npy; run id " << set.run_id << "): for each case write its \"output\" (NNNN."
                << set.run_id << ".out.npy; in place when \"in_place\") or its \"declined\" marker, then run: "
                << "ropecheck cases check --dir " << g.dir << "\n";
      std::cout << "features of the cases: " << set.features.text() << "\n";
      if (set.left_out)
        std::cout << set.left_out << " call(s) of the gate's rows left out: they use a feature outside "
                  << (supports ? std::string("--supports")
                               : std::string("the default export's (every ABI v1 feature") +
                                     (model ? " and the model's" : "") +
                                     "; --supports names what the program implements)")
                  << "\n";
      return 0;
    }
    if (!g.baseline.empty()) (void)report::load_report(g.baseline);  // a bad baseline fails before the check
    std::optional<FeatureSet> require;
    if (!cli::parse_features_option("--require", g.require_opt, g.require, require)) return 2;
    const gate::GateResult r = gate::check_case_set(g.dir, contract, tol, require.value_or(FeatureSet{}));
    int rc = gate::emit_verdict(r, g.junit);
    if (!g.report_dir.empty() || !g.baseline.empty()) {
      nlohmann::json params = {{"dir", std::filesystem::path(g.dir).filename().string()},
                               {"contract_override", g.contract},
                               {"tolerance", g.tolerance}};
      if (require) params["require"] = require->names();  // only when given: a baseline compares key by key
      const int cmp = gate::write_and_compare(gate::make_gate_report(r, "cases-check", params), g.report_dir,
                                              g.baseline, g.slack, std::cout);
      if (rc == 0 && cmp) rc = 1;
    }
    return rc;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 2;
  }
}

const cli::Registration reg{{"cases", add, run}};

}  // namespace
