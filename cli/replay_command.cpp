// `ropecheck replay FILE --kernel PATH.so | --impl NAME`: rerun exactly one
// saved case (a gate replay file) and judge it the same way; a property's
// failure is its execution again (the seed, case and shrink path recorded).
#include <fmt/format.h>

#include <cstring>
#include <filesystem>
#include <iostream>

#include "cli/commands.hpp"
#include "gate/case_json.hpp"
#include "gate/gate.hpp"
#include "gate/host_handle.hpp"
#include "gate/isolation.hpp"
#include "gate/npy.hpp"
#include "reference/reference.hpp"
#include "impls/plugin_loader.hpp"

using namespace ropecheck;

namespace {

struct ReplayArgs {
  std::string file, kernel, impl, tolerance, contract;
  double call_timeout = 10;
  int host_fd = -1;
  std::string host_name, dump;
} g;

// --dump DIR: the case as arrays (python/ropecheck Result.case): input.npy and, when the kernel's output of this
// call is known, output.npy ([n_tokens][n_heads][head_dim] in the storage type, bf16 as uint16 bits);
// expected.npy (the correctly rounded output); exact.txt (the exact output rounded to double, one hex float per
// element); positions.npy (int64, axis-major); case.txt (the case in one line). A tensor-form case: q's arrays
// so, compact (its strides are the replay file's), and k's beside them when it has k: k_input.npy,
// k_output.npy, k_expected.npy, k_exact.txt ([n_tokens][k_heads][head_dim]).
void dump_case(const std::string& dir, const RopeCase& c, const gate::CallResult* call) {
  std::filesystem::create_directories(dir);
  const std::string descr = c.dtype == Dtype::f32 ? "<f4" : c.dtype == Dtype::f16 ? "<f2" : "<u2";
  auto one = [&](const RopeCase& x, const Bytes& input, const Bytes* output, const std::string& prefix) {
    auto arr = [&](const Bytes& b) {
      return gate::NpyArray{descr, {x.n_tokens(), x.n_heads, x.head_dim}, std::vector<unsigned char>(b.begin(), b.end())};
    };
    gate::npy_write(dir + "/" + prefix + "input.npy", arr(input));
    if (output) gate::npy_write(dir + "/" + prefix + "output.npy", arr(*output));
    const ReferenceOutput ref = reference_rope(x);
    gate::npy_write(dir + "/" + prefix + "expected.npy", arr(ref.rounded));
    std::string exact;
    for (double v : ref.exact) exact += fmt::format("{:a}\n", v);
    gate::write_regular_file(dir + "/" + prefix + "exact.txt", exact);
  };
  const bool ok = call && call->status == gate::CallStatus::ok;
  one(c, c.input, ok ? &call->out : nullptr, "");
  if (c.tensor && c.tensor->k_heads) {
    const RopeCase k = c.k_case();
    one(k, k.input, ok && !call->k_out.empty() ? &call->k_out : nullptr, "k_");
  }
  gate::NpyArray pos{"<i8", {c.positions.size()}, {}};
  pos.data.resize(c.positions.size() * 8);
  std::memcpy(pos.data.data(), c.positions.data(), pos.data.size());
  gate::npy_write(dir + "/positions.npy", pos);
  gate::write_regular_file(dir + "/case.txt", c.summary() + "\n");
}

CLI::App* add(CLI::App& app) {
  auto* s = app.add_subcommand("replay", "rerun one saved case (a gate replay file) on a kernel: exit 0 pass, 1 fail, 2 error");
  s->add_option("file", g.file, "replay file written by `ropecheck gate`")->required();
  auto* k = s->add_option("--kernel", g.kernel, "shared library exporting rc_rope_apply");
  auto* i = s->add_option("--impl", g.impl, "a built-in implementation instead");
  k->excludes(i);
  cli::add_host_options(s, g.host_fd, g.host_name, k, i);
  s->add_option("--dump", g.dump,
                "write the case as arrays into this directory: input.npy, output.npy (the kernel's), expected.npy "
                "(correctly rounded), exact.txt, positions.npy, case.txt (the flat form only)");
  s->add_option("--contract", g.contract, "judge under this contract instead of the recorded one (docs/gate.md)");
  s->add_option("--tolerance", g.tolerance, "a flat bound on every pair's error (u), replacing the contract's allowances");
  cli::add_seconds_option(s, "--call-timeout", g.call_timeout, gate::kMaxCallTimeoutSeconds,
                          "seconds before the call counts as hung");
  return s;
}

int run() {
  if (int(!g.kernel.empty()) + int(!g.impl.empty()) + int(g.host_fd >= 0) != 1) {
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
  // What its bounds derive from: a loaded kernel's error model under the recorded angle model, or a built-in's
  // own when the angle model is its own (properties/promise.hpp).
  KernelErrorModel error_model = loaded_kernel_error_model(rec.angle_model);
  if (g.host_fd >= 0) {
    impl = served_implementation(g.host_fd, g.host_name);
  } else if (!g.kernel.empty()) {
    PluginLoad pl = plugin_implementation(g.kernel);
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
    if (const KernelPromise p = promise_of(*b); p.angle_model == rec.angle_model) error_model = p.error_model;
  }
  std::optional<Contract> contract;
  if (!cli::parse_contract_option(g.contract, contract)) return 2;
  if (contract) {
    rec.contract = *contract;
    rec.tolerance = 0;
  }
  if (!g.tolerance.empty()) {
    std::map<Dtype, double> tol;
    if (std::string e = gate::parse_tolerance(g.tolerance, tol); !e.empty()) {
      std::cerr << "error: " << e << "\n";
      return 2;
    }
    if (auto it = tol.find(rec.c.dtype); it != tol.end()) rec.tolerance = it->second;
  }
  // The criteria the gate used: the kernel's error model under the recorded contract, or the flat override.
  auto criteria = [&](const RopeCase&) {
    return rec.tolerance > 0 ? Criteria::flat_bound(rec.tolerance, rec.contract.identity_bits)
                             : Criteria::of(error_model, rec.contract);
  };
  std::cout << "replay: " << rec.c.summary() << (rec.in_place ? " in-place" : " out-of-place") << ", angle model "
            << to_string(rec.angle_model) << ", contract " << rec.contract.spec()
            << (rec.tolerance > 0 ? " overridden by a flat bound of " + std::to_string(rec.tolerance) + " u" : "")
            << (rec.check.empty() ? "" : ", from check '" + rec.check + "'")
            << (rec.property.empty() ? "" : ", property " + rec.property) << "\n";
  if (!rec.diagnosis.empty()) std::cout << "recorded: " << rec.diagnosis << "\n";
  try {
    gate::HostOptions ho;
    ho.load_timeout_seconds = std::max(2.0, g.call_timeout);
    ho.input_padding = size_t(rec.input_padding);  // placed as the gate placed the call (--input-padding)
    gate::KernelHost host(gate::KernelSource{impl.library, impl.fn, impl.host_fd}, ho);
    host.start();
    if (!host.load_fp_change().empty()) std::cout << host.load_fp_change() << "\n";
    auto quote = [&] { std::cout << host.captured_output(); };
    if (!rec.property.empty()) {
      // The property's execution again, as the engine made it in the gate (properties/engine.hpp).
      const props::PropertyDef* p = props::find_property(rec.property);
      if (!p) {
        std::cerr << "error: " << g.file << ": property '" << rec.property << "' is not one of this ropecheck's\n";
        return 2;
      }
      // As the gate called it: a kernel that takes tables only gets each call with the table the gate gave that
      // case (gate::SendWays of turn case_turn, its ways in order), judged with the table's rounding in the cos-sin
      // clause.
      auto property_call = [&](const RopeCase& c, bool in_place) {
        if (!host.abi().probed) host.negotiate({c.dtype}, {c.layout}, g.call_timeout);
        return gate::property_call(c, in_place, host.abi(), rec.contract, rec.angle_model,
                                   [&](const RopeCase& s, bool ip) { return host.call(s, ip, g.call_timeout); });
      };
      auto property_criteria = [&](const RopeCase& c) {
        if (rec.tolerance > 0) return criteria(c);
        return Criteria::of(error_model, gate::property_contract(c, host.abi(), rec.contract));
      };
      gate::HostHandle h(impl.name, property_call, property_criteria, rec.angle_model, nullptr);
      std::cout << "property " << p->id << " (" << p->what << "), " << to_string(rec.c.dtype) << " "
                << to_string(rec.property_layout) << ", seed " << rec.property_seed << ", case " << rec.property_case
                << " of " << rec.property_cases
                << (rec.property_shrink.empty() ? "" : ", shrink " + props::shrink_path_text(rec.property_shrink))
                << "\n";
      if (!g.dump.empty()) dump_case(g.dump, rec.c, nullptr);  // (the property's recorded case, not its calls)
      const auto r = props::replay_execution(*p, h, rec.c.dtype, rec.property_layout,
                                             props::Scope{rec.property_max_position}, rec.property_seed,
                                             rec.property_case, rec.property_shrink, rec.property_cases);
      quote();
      std::cout << h.calls() << " call(s)\n";
      if (r.type == rc::detail::CaseResult::Type::Failure) {
        std::cout << r.description << "\nverdict: FAIL\n";
        return 1;
      }
      if (r.type == rc::detail::CaseResult::Type::Discard) {
        std::cout << "the kernel declined a call of the property (RC_UNSUPPORTED)\nverdict: FAIL (nothing checked)\n";
        return 1;
      }
    } else {
      const gate::CallResult cr = host.call(rec.c, rec.in_place, g.call_timeout);
      if (!g.dump.empty()) dump_case(g.dump, rec.c, &cr);
      const gate::CaseVerdict v = gate::judge_call(rec.c, rec.in_place, rec.angle_model, criteria(rec.c), cr);
      if (!v.accepted) {
        std::cout << "the kernel declined the case (RC_UNSUPPORTED)\nverdict: FAIL (nothing checked)\n";
        return 1;
      }
      if (!v.pass) {
        // As the gate diagnoses a failing case: its fault, an in-place failure that passes out of place, else
        // what the output fits.
        std::string diagnosis;
        if (rec.in_place && v.fault.empty())
          diagnosis = gate::in_place_aliasing(rec.c, rec.angle_model, criteria(rec.c),
                                              host.call(rec.c, false, g.call_timeout));
        if (diagnosis.empty()) diagnosis = gate::diagnose_call(rec.c, rec.angle_model, criteria(rec.c), v, cr);
        std::cout << v.message << "\n" << diagnosis << "\n";
        quote();
        std::cout << "verdict: FAIL\n";
        return 1;
      }
      std::cout << "max pair error " << v.worst_error << " u (within the contract)\n";
      quote();
    }
    if (!host.load_fp_change().empty()) {
      std::cout << "verdict: FAIL (the library changed the FP environment when loaded)\n";
      return 1;
    }
    std::cout << "verdict: PASS\n";
    return 0;
  } catch (const gate::LoadError& e) {
    std::cerr << "error: cannot load the kernel: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 2;
  }
}

const cli::Registration reg{{"replay", add, run}};

}  // namespace
