#include <fmt/format.h>

#include <unistd.h>

#include <iostream>

#include "cli/commands.hpp"
#include "cli/model_options.hpp"
#include "reports/report.hpp"
#include "runs/sweep_report.hpp"

namespace ropecheck {
namespace {
CLI::App* g_sweep = nullptr;
SweepOptions g_opt;
std::string g_report_dir, g_baseline;  // reports
std::string g_contract;                 // --contract SPEC (empty: each kernel's own)
report::Slack g_slack;                  // reports
cli::ModelArgs g_model;                 // --hf-config / --preset / --seq-len
std::string g_layout;                   // --layout (with a model)
std::vector<CLI::Option*> g_shape_opts;  // what a model fixes
bool g_summary = false;                  // --summary
}  // namespace

CLI::App* add_sweep_command(CLI::App& app) {
  g_sweep = app.add_subcommand("sweep", "accuracy sweep of the built-in kernels over position buckets");
  g_sweep->add_option("--impl", g_opt.impls, "implementations to sweep (default: all)");
  cli::add_int_option<uint64_t>(g_sweep, "--seed", g_opt.seed, 0, UINT64_MAX, "random seed");
  cli::add_int_option<int>(g_sweep, "--max-log2-position", g_opt.max_log2_position, 0, 62,
                           "largest position is 2^this");
  cli::add_int_option<int>(g_sweep, "--bucket-step", g_opt.bucket_step, 1, 62, "octaves between sampled buckets");
  cli::add_int_option<uint32_t>(g_sweep, "--tokens-per-bucket", g_opt.tokens_per_bucket, 1, 4096,
                                "tokens per position bucket");
  cli::add_int_option<uint32_t>(g_sweep, "--heads", g_opt.n_heads, 1, 256, "heads per case");
  g_shape_opts = {
      cli::add_int_option<uint32_t>(g_sweep, "--head-dim", g_opt.head_dim, 2, 4096, "elements per head"),
      cli::add_int_option<uint32_t>(g_sweep, "--rotary-dim", g_opt.rotary_dim, 2, 4096, "rotated elements (even)"),
      cli::add_number_option(g_sweep, "--base", g_opt.base, 0, true, 1e300, "theta_i = base^(-2i/rotary_dim)")};
  cli::add_model_options(g_sweep, g_model);
  g_sweep->add_option("--layout", g_layout,
                      "interleaved or half-split (default: both; with --hf-config/--preset the config's pairing)")
      ->check(CLI::IsMember({"interleaved", "half-split"}));
  g_sweep->add_option("--contract", g_contract,
                      "judge every kernel under this contract (SPEC or preset, e.g. angles=f32 or pytorch-f32; "
                      "docs/reports.md); its series under the exact angle model become checks too. Default: each "
                      "kernel's own (built-ins: identity=bits)");
  g_sweep->add_option("--report-dir", g_report_dir, "write report.json, report.md and report.html here");
  g_sweep->add_flag("--summary", g_summary,
                    "print one line per kernel and angle model (the largest error and the verdict per dtype) instead "
                    "of the tables, which report.md keeps (with --report-dir)");
  g_sweep->add_option("--baseline", g_baseline,
                      "compare against this report.json (exit 1 on a regression, 2 if it is unreadable)");
  cli::add_slack_options(g_sweep, g_slack, "with --baseline: ");
  return g_sweep;
}

int run_sweep_command() {
  std::optional<cli::ResolvedModel> model;
  if (!cli::resolve_model(g_model, g_layout, model)) return 2;
  std::vector<std::string> declined;
  if (model) {
    for (const CLI::Option* o : g_shape_opts)
      if (o->count()) {
        std::cerr << "error: " << o->get_name() << " is fixed by the model (--hf-config/--preset): leave it out\n";
        return 2;
      }
    g_opt.model = model->shape;
    g_opt.head_dim = model->shape.head_dim;  // recorded in the report's parameters
    g_opt.rotary_dim = model->shape.rotary_dim;
    g_opt.base = model->shape.base;
    g_opt.layouts = {model->shape.layout};
    g_opt.declined = &declined;
    std::cout << model->text("");
  } else if (!g_layout.empty()) {
    g_opt.layouts = {*parse_layout(g_layout)};
  }
  if (g_opt.rotary_dim % 2 || g_opt.rotary_dim > g_opt.head_dim) {
    std::cerr << "error: --rotary-dim must be even and <= --head-dim\n";
    return 2;
  }
  if (!g_contract.empty()) {
    std::string err;
    const auto c = parse_contract(g_contract, &err);
    if (!c) {
      std::cerr << "error: " << err << "\n";
      return 2;
    }
    g_opt.contract = *c;
  }
  try {
    std::optional<report::Report> baseline;
    if (!g_baseline.empty()) baseline = report::load_report(g_baseline);  // a bad file fails before the sweep
    if (isatty(2))
      g_opt.progress = [](size_t done, size_t total) {
        std::cerr << "\rsweep: " << done << "/" << total << " dtype x layout blocks" << (done == total ? "\n" : "")
                  << std::flush;
      };
    const auto rows = run_sweep(g_opt);
    std::cout << (g_summary ? format_sweep_summary(rows) : format_sweep_table(rows));
    for (const auto& d : declined)
      std::cout << "declined (RC_UNSUPPORTED, no row): " << d << "\n";
    int compare_rc = 0;
    if (!g_report_dir.empty() || baseline) {
      const report::Report rep = report::make_sweep_report(g_opt, rows);
      if (!g_report_dir.empty()) {
        report::write_report_dir(rep, g_report_dir);
        std::cerr << "wrote " << g_report_dir << "/report.{json,md,html}\n";
      }
      if (baseline) {
        const report::CompareResult res = report::compare_reports(*baseline, rep, g_slack);
        std::cout << "\nBaseline compare against " << g_baseline << " (" << report::describe(g_slack) << ")\n\n"
                  << res.table();
        compare_rc = res.failed() ? 1 : 0;
      }
    }
    int failed = 0;
    for (const auto& r : rows)
      if (r.expected_to_pass && r.violations) {
        ++failed;
        std::cerr << "\nFAIL " << r.impl << " " << to_string(r.model) << " " << to_string(r.dtype) << " "
                  << to_string(r.layout) << " (contract " << r.contract.short_spec() << "): " << r.violations
                  << " violation(s)\n"
                  << r.first_finding;
      }
    return failed || compare_rc ? 1 : 0;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 2;
  }
}

const cli::Registration reg_sweep{{"sweep", add_sweep_command, run_sweep_command}};

}  // namespace ropecheck
