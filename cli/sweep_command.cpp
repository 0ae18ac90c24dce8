#include <fmt/format.h>

#include <iostream>

#include "cli/commands.hpp"
#include "reports/sweep.hpp"

namespace ropecheck {
namespace {
CLI::App* g_sweep = nullptr;
SweepOptions g_opt;
}  // namespace

CLI::App* add_sweep_command(CLI::App& app) {
  g_sweep = app.add_subcommand("sweep", "accuracy sweep of the built-in kernels over position buckets");
  g_sweep->add_option("--impl", g_opt.impls, "implementations to sweep (default: all)");
  g_sweep->add_option("--seed", g_opt.seed, "random seed");
  g_sweep->add_option("--max-log2-position", g_opt.max_log2_position, "largest position is 2^this")
      ->check(CLI::Range(0, 62));
  g_sweep->add_option("--bucket-step", g_opt.bucket_step, "octaves between sampled buckets")->check(CLI::Range(1, 62));
  g_sweep->add_option("--tokens-per-bucket", g_opt.tokens_per_bucket)->check(CLI::Range(1, 4096));
  g_sweep->add_option("--heads", g_opt.n_heads)->check(CLI::Range(1, 256));
  g_sweep->add_option("--head-dim", g_opt.head_dim)->check(CLI::Range(2, 4096));
  g_sweep->add_option("--rotary-dim", g_opt.rotary_dim)->check(CLI::Range(2, 4096));
  g_sweep->add_option("--base", g_opt.base)->check(CLI::PositiveNumber);
  return g_sweep;
}

int run_sweep_command() {
  if (g_opt.rotary_dim % 2 || g_opt.rotary_dim > g_opt.head_dim) {
    std::cerr << "error: --rotary-dim must be even and <= --head-dim\n";
    return 2;
  }
  try {
    const auto rows = run_sweep(g_opt);
    std::cout << format_sweep_table(rows);
    int failed = 0;
    for (const auto& r : rows)
      if (r.expected_to_pass && r.violations) {
        ++failed;
        std::cerr << "\nFAIL " << r.impl << " " << to_string(r.dtype) << " " << to_string(r.layout) << ": "
                  << r.violations << " violation(s)\n"
                  << r.first_finding;
      }
    return failed ? 1 : 0;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 2;
  }
}

const cli::Registration reg_sweep{{"sweep", add_sweep_command, run_sweep_command}};

}  // namespace ropecheck
