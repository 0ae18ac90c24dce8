// `ropecheck replay FILE --kernel PATH.so | --impl NAME`: rerun exactly one
// saved case (a gate replay file) and judge it the same way.
#include <iostream>

#include "cli/commands.hpp"
#include "gate/case_json.hpp"
#include "gate/gate.hpp"
#include "gate/isolation.hpp"
#include "impls/plugin_loader.hpp"

using namespace ropecheck;

namespace {

struct ReplayArgs {
  std::string file, kernel, impl, tolerance;
  double call_timeout = 10;
} g;

CLI::App* add(CLI::App& app) {
  auto* s = app.add_subcommand("replay", "rerun one saved case (a gate replay file) on a kernel: exit 0 pass, 1 fail, 2 error");
  s->add_option("file", g.file, "replay file written by `ropecheck gate`")->required();
  auto* k = s->add_option("--kernel", g.kernel, "shared library exporting rc_rope_apply");
  auto* i = s->add_option("--impl", g.impl, "a built-in implementation instead");
  k->excludes(i);
  s->add_option("--tolerance", g.tolerance, "override the recorded bound (u): one number or per dtype");
  s->add_option("--call-timeout", g.call_timeout, "seconds before the call counts as hung")->capture_default_str();
  return s;
}

int run() {
  if (g.kernel.empty() == g.impl.empty()) {
    std::cerr << "error: give exactly one of --kernel PATH.so or --impl NAME\n";
    return 2;
  }
  gate::CaseRecord rec;
  try {
    rec = gate::read_record(g.file);
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 2;
  }
  Implementation impl;
  if (!g.kernel.empty()) {
    PluginLoad pl = load_kernel_plugin(g.kernel, rec.angle_model);
    if (!pl.impl) {
      std::cerr << "error: " << pl.error << "\n";
      return 2;
    }
    impl = *pl.impl;
  } else {
    const Implementation* b = find_implementation(g.impl);
    if (!b) {
      std::cerr << "error: unknown implementation '" << g.impl << "'\n";
      return 2;
    }
    impl = *b;
  }
  double bound = rec.bound;
  if (!g.tolerance.empty()) {
    std::map<Dtype, double> tol;
    if (std::string e = gate::parse_tolerance(g.tolerance, tol); !e.empty()) {
      std::cerr << "error: " << e << "\n";
      return 2;
    }
    if (auto it = tol.find(rec.c.dtype); it != tol.end()) bound = it->second;
  }
  std::cout << "replay: " << rec.c.summary() << (rec.in_place ? " in-place" : " out-of-place") << ", angle model "
            << to_string(rec.angle_model) << ", bound " << bound << " u"
            << (rec.check.empty() ? "" : ", from check '" + rec.check + "'") << "\n";
  try {
    const gate::CallResult cr = gate::call_isolated(impl.fn, rec.c, rec.in_place, g.call_timeout);
    const gate::CaseVerdict v = gate::judge_call(rec.c, rec.in_place, rec.angle_model, bound, cr);
    if (!v.accepted) {
      std::cout << "the kernel declined the case (RC_UNSUPPORTED)\nverdict: FAIL (nothing checked)\n";
      return 1;
    }
    if (v.pass) {
      std::cout << "max pair error " << v.worst_error << " u\nverdict: PASS\n";
      return 0;
    }
    std::cout << v.message << "\nverdict: FAIL\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 2;
  }
}

const cli::Registration reg{{"replay", add, run}};

}  // namespace
