// `ropecheck contract SPEC`: what a contract expands to and the allowances
// derived from it (docs/error-model.md, "Contracts"), per dtype, for a
// unit-norm pair at a few angles; `ropecheck contract --list`: the presets.
#include <fmt/format.h>

#include <iostream>

#include "cli/commands.hpp"
#include "impls/plugin_loader.hpp"
#include "properties/judge.hpp"
#include "properties/promise.hpp"

using namespace ropecheck;

namespace {

struct ContractArgs {
  std::string spec;
  bool list = false;
  double base = 10000;
  uint32_t rotary_dim = 128;
} g;

CLI::App* add(CLI::App& app) {
  auto* s = app.add_subcommand("contract", "explain a --contract SPEC: its clauses and the allowances derived from it");
  s->add_option("spec", g.spec, "a comma list of clauses, or a preset name");
  s->add_flag("--list", g.list, "list the presets and what each expands to");
  cli::add_number_option(s, "--base", g.base, 1, true, 1e300, "base of the example pairs' frequencies");
  cli::add_int_option<uint32_t>(s, "--rotary-dim", g.rotary_dim, 2, 1u << 20, "rotary_dim of the example pairs");
  return s;
}

int run() {
  if (g.list) {
    for (const auto& p : contract_presets())
      std::cout << fmt::format("{:<14} {}\n{:<14} {}\n", p.name, p.spec, "", p.what);
    return 0;
  }
  if (g.spec.empty()) {
    std::cerr << "error: give a contract SPEC or --list\n";
    return 2;
  }
  std::string err;
  const auto c = parse_contract(g.spec, &err);
  if (!c) {
    std::cerr << "error: " << err << "\n";
    return 2;
  }
  if (!(std::isfinite(g.base) && g.base > 1) || g.rotary_dim < 2 || g.rotary_dim % 2 || g.rotary_dim > 1u << 16) {
    std::cerr << "error: --base must be > 1 and --rotary-dim even in [2, 65536]\n";
    return 2;
  }
  std::cout << "contract: " << c->spec() << "\n";
  if (c->angles == Contract::Angles::f32 && c->angle_ulps == 0)
    std::cout << "angles=f32 without K: per pair K = (2i/d)|ln base| + 7 (+2 with a position scale), 3 (+2) with a "
                 "table; here pair 0: "
              << fmt::format("{:.4g}", [&] {
                   RopeCase rc;
                   rc.rotary_dim = rc.head_dim = g.rotary_dim;
                   rc.base = g.base;
                   return f32_angle_ulps(rc, 0);
                 }())
              << ", last pair: " << fmt::format("{:.4g}", [&] {
                   RopeCase rc;
                   rc.rotary_dim = rc.head_dim = g.rotary_dim;
                   rc.base = g.base;
                   return f32_angle_ulps(rc, g.rotary_dim / 2 - 1);
                 }())
              << "\n";
  std::cout << "allowances of a unit-norm pair (u of the dtype), for a kernel loaded with --kernel:\n\n"
            << "| dtype | angle (rad) | radial | tangential | total e |\n|---|---:|---:|---:|---:|\n";
  const Criteria cr = Criteria::of(loaded_kernel_error_model(AngleModel::exact), *c);
  for (Dtype d : kAllDtypes) {
    RopeCase rc;
    rc.dtype = d;
    rc.rotary_dim = rc.head_dim = g.rotary_dim;
    rc.base = g.base;
    for (double phi : {0.001, 1.0, 1000.0, 1048576.0, 16777216.0}) {
      const PairAllowance a = cr.allowance(rc, 0, 1.0, phi);
      std::cout << fmt::format("| {} | {:g} | {:.4g} | {:.4g} | {:.4g} |\n", to_string(d), phi, a.radial, a.tangential,
                               a.total);
    }
  }
  return 0;
}

const cli::Registration reg{{"contract", add, run}};

}  // namespace
