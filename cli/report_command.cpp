// `ropecheck report compare`: a run's report against a baseline (exit 1 on a
// regression, 2 on a corrupt or incompatible file).
// `ropecheck report headline`: the README's plot (error against position,
// accurate angles vs the conventional fp32 pipeline).
// `ropecheck report render`: report.md and report.html again from a report.json.
#include <unistd.h>

#include <iostream>

#include "cli/commands.hpp"
#include "reports/report.hpp"
#include "runs/sweep_report.hpp"

namespace ropecheck {
namespace {

CLI::App* g_report = nullptr;
CLI::App* g_compare = nullptr;
CLI::App* g_headline = nullptr;
CLI::App* g_render = nullptr;
std::string g_baseline, g_current, g_out = "docs/headline.svg", g_json_out, g_in, g_out_dir;
report::Slack g_slack;
uint64_t g_seed = 1;
uint32_t g_tokens = 16;

CLI::App* add_report_command(CLI::App& app) {
  g_report = app.add_subcommand("report", "compare reports against a baseline; draw the headline plot");
  g_report->require_subcommand(1);
  g_compare = g_report->add_subcommand(
      "compare", "exit 1 when a bucket's max or mean error grew beyond the slack, its bias moved beyond its "
                 "statistical allowance, a passing check fails, or coverage shrank; exit 2 on a corrupt or "
                 "incompatible report");
  g_compare->add_option("--baseline", g_baseline, "the baseline report.json")->required();
  g_compare->add_option("--current", g_current, "this run's report.json")->required();
  cli::add_slack_options(g_compare, g_slack);
  g_headline = g_report->add_subcommand(
      "headline", "sweep scalar and conventional-fp32 from position 1 to 2^24 and draw max error against position");
  g_headline->add_option("--out", g_out, "SVG file to write")->capture_default_str();
  g_headline->add_option("--json", g_json_out, "also write the sweep's report.json here");
  cli::add_int_option<uint64_t>(g_headline, "--seed", g_seed, 0, UINT64_MAX, "seed of the sweep");
  cli::add_int_option<uint32_t>(g_headline, "--tokens-per-bucket", g_tokens, 1, 4096, "tokens per position bucket");
  g_render = g_report->add_subcommand("render", "write report.json/.md/.html of a report.json into a directory");
  g_render->add_option("--in", g_in, "a report.json")->required();
  g_render->add_option("--out-dir", g_out_dir, "directory to write")->required();
  return g_report;
}

int run_report_command() {
  try {
    if (g_compare->parsed()) {
      const report::Report base = report::load_report(g_baseline);
      const report::Report cur = report::load_report(g_current);
      const report::CompareResult res = report::compare_reports(base, cur, g_slack);
      std::cout << "baseline: " << g_baseline << "\ncurrent:  " << g_current << "\n"
                << "slack: " << report::describe(g_slack) << "\n\n"
                << res.table();
      return res.failed() ? 1 : 0;
    }
    if (g_headline->parsed()) {
      SweepOptions o = report::headline_options(g_seed, g_tokens);
      if (isatty(2))
        o.progress = [](size_t done, size_t total) {
          std::cerr << "\rheadline sweep: " << done << "/" << total << (done == total ? "\n" : "") << std::flush;
        };
      const auto rows = run_sweep(o);
      const report::Report r = report::make_sweep_report(o, rows);
      report::write_text_file(g_out, report::render_headline_svg(r));
      if (!g_json_out.empty()) report::write_text_file(g_json_out, report::to_json(r).dump(1) + "\n");
      std::cerr << "wrote " << g_out << "\n";
      return 0;
    }
    if (g_render->parsed()) {
      report::write_report_dir(report::load_report(g_in), g_out_dir);
      std::cerr << "wrote " << g_out_dir << "/report.{json,md,html}\n";
      return 0;
    }
  } catch (const report::ReportError& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 2;
  }
  return 2;
}

const cli::Registration reg_report{{"report", add_report_command, run_report_command}};

}  // namespace
}  // namespace ropecheck
