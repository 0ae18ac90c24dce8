// The subcommands of `ropecheck`. Each lives in its own source file, linked
// into the executable, and registers itself with a static Registration:
//
//   static const ropecheck::cli::Registration reg{{"name", add_options, run}};
//
// `add` creates the CLI11 subcommand and binds its options; `run` is called
// when that subcommand was parsed and returns the exit code
// (0 pass, 1 fail, 2 usage or input error).
#pragma once

#include <CLI/CLI.hpp>
#include <iostream>
#include <optional>

#include "core/features.hpp"
#include "properties/contract.hpp"
#include "reports/report.hpp"
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

namespace ropecheck::cli {

struct Command {
  std::string name;
  std::function<CLI::App*(CLI::App&)> add;
  std::function<int()> run;
};

std::vector<Command>& commands();

struct Registration {
  explicit Registration(Command c) { commands().push_back(std::move(c)); }
};

// An integer option parsed from its text: decimal digits with an optional '-' (signed types only), within
// [lo, hi]. Anything else ("-1" for a count, "1e30", "12abc", a value beyond the type) is a usage error
// naming the option and its range (exit 2), never a silently wrapped or saturated value.
template <class T>
CLI::Option* add_int_option(CLI::App* app, const std::string& name, T& var, T lo, T hi, const std::string& desc) {
  static_assert(std::is_integral_v<T>);
  auto* o = app->add_option_function<std::string>(
      name,
      [&var, name, lo, hi](const std::string& s) {
        const std::string range = "an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
        T v{};
        const char* b = s.data();
        const char* e = s.data() + s.size();
        if (s.empty() || (std::is_unsigned_v<T> && s[0] == '-'))
          throw CLI::ValidationError(name, "'" + s + "' is not " + range);
        const auto [p, ec] = std::from_chars(b, e, v, 10);
        if (ec == std::errc::result_out_of_range)
          throw CLI::ValidationError(name, "'" + s + "' is out of range: expected " + range);
        if (ec != std::errc() || p != e) throw CLI::ValidationError(name, "'" + s + "' is not " + range);
        if (v < lo || v > hi) throw CLI::ValidationError(name, "'" + s + "' is out of range: expected " + range);
        var = v;
      },
      desc);
  o->type_name("INT")->default_str(std::to_string(var));
  return o;
}

// --host-fd FD and --host-name NAME (gate, replay): the process at the other end of the socket FD serves the
// kernel calls (the Python package starts the gate so: docs/python.md). Hidden from --help: a program passes
// them, not a person. Excludes --kernel and --impl.
inline void add_host_options(CLI::App* app, int& fd, std::string& name, CLI::Option* kernel, CLI::Option* impl) {
  auto* f = add_int_option<int>(app, "--host-fd", fd, 3, 1 << 20,
                                "calls are served by the process at the other end of this socket (the Python package)");
  f->group("");
  f->excludes(kernel)->excludes(impl);
  app->add_option("--host-name", name, "the served kernel's name in the verdict")->group("")->needs(f);
}

// A finite number in [lo, hi] (lo excluded when lo_open): "inf", "nan", trailing text and out-of-range values
// are usage errors naming the option and its range.
inline CLI::Option* add_number_option(CLI::App* app, const std::string& name, double& var, double lo, bool lo_open,
                                      double hi, const std::string& desc, const std::string& type = "NUMBER") {
  char range[96];
  std::snprintf(range, sizeof range, "a finite number in %s%g, %g]", lo_open ? "(" : "[", lo, hi);
  auto* o = app->add_option_function<std::string>(
      name,
      [&var, name, lo, lo_open, hi, want = std::string(range)](const std::string& s) {
        size_t used = 0;
        double v = 0;
        try {
          v = std::stod(s, &used);
        } catch (const std::exception&) {
          throw CLI::ValidationError(name, "'" + s + "' is not " + want);
        }
        if (used != s.size() || !std::isfinite(v) || v > hi || (lo_open ? !(v > lo) : !(v >= lo)))
          throw CLI::ValidationError(name, "'" + s + "' is not " + want);
        var = v;
      },
      desc);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", var);
  o->type_name(type)->default_str(buf);
  return o;
}

// A number of seconds: finite and > 0, at most hi (inf, nan, 0 and negative values are usage errors).
inline CLI::Option* add_seconds_option(CLI::App* app, const std::string& name, double& var, double hi,
                                       const std::string& desc) {
  return add_number_option(app, name, var, 0, true, hi, desc, "SECONDS");
}

// The slack of a report comparison (`report compare`, `sweep --baseline`): one set of options.
inline void add_slack_options(CLI::App* app, report::Slack& slack, const std::string& prefix = "") {
  add_number_option(app, "--slack-rel", slack.relative, 0, false, 1e300,
                    prefix + "allowed relative growth of a bucket's max/mean error");
  add_number_option(app, "--slack-abs", slack.absolute, 0, false, 1e300, prefix + "allowed absolute growth, in u");
  add_number_option(app, "--bias-sigmas", slack.bias_sigmas, 0, false, 1e300,
                    prefix + "a bucket's bias (mean radial error) may move by this many standard deviations of the "
                             "difference of the two means, plus --bias-slack");
  add_number_option(app, "--bias-slack", slack.bias_absolute, 0, false, 1e300,
                    prefix + "the systematic part of the bias allowance, in u");
}

// A --contract value: nullopt when not given; on a bad SPEC prints the error and returns false (exit 2).
inline bool parse_contract_option(const std::string& spec, std::optional<Contract>& out) {
  out.reset();
  if (spec.empty()) return true;
  std::string err;
  out = parse_contract(spec, &err);
  if (!out) std::cerr << "error: " << err << "\n";
  return out.has_value();
}

// --supports / --require: a comma list of feature names (core/features.hpp; docs/gate.md, "Features"). nullopt
// when not given; on an unknown name prints the error (with the known names) and returns false (exit 2).
inline bool parse_features_option(const char* option, const CLI::Option* given, const std::string& text,
                                  std::optional<FeatureSet>& out) {
  out.reset();
  if (!given || given->count() == 0) return true;
  FeatureSet s;
  if (std::string err = parse_feature_list(text, s); !err.empty()) {
    std::cerr << "error: " << option << ": " << err << "\n";
    return false;
  }
  out = s;
  return true;
}

// --supports and --require together: --supports names at least one dtype and one layout (a kernel that implements
// none can be sent nothing), and every --require feature is in --supports (a feature that is never sent cannot have
// accepted calls). Prints the error and returns false (exit 2).
inline bool check_supports_require(const std::optional<FeatureSet>& supports, const std::optional<FeatureSet>& require,
                                   const RopeCase* model = nullptr) {
  if (supports) {
    auto any = [&](std::initializer_list<Feature> fs) {
      for (Feature f : fs)
        if (supports->has(f)) return true;
      return false;
    };
    if (!any({Feature::f32, Feature::f16, Feature::bf16})) {
      std::cerr << "error: --supports names no dtype (f32, f16, bf16): it lists everything the kernel implements, "
                   "dtypes and layouts included\n";
      return false;
    }
    if (!any({Feature::interleaved, Feature::half_split})) {
      std::cerr << "error: --supports names no layout (interleaved, half-split): it lists everything the kernel "
                   "implements, dtypes and layouts included\n";
      return false;
    }
    if (model && !supports->contains(model_features(*model))) {
      std::cerr << "error: --supports lacks " << model_features(*model).minus(*supports).text()
                << ", which every case in the model's configuration uses: nothing of the model could be sent\n";
      return false;
    }
    if (require && !supports->contains(*require)) {
      std::cerr << "error: --require " << require->minus(*supports).text()
                << ": not in --supports (a call outside --supports is never made, so it cannot be accepted)\n";
      return false;
    }
  }
  return true;
}

}  // namespace ropecheck::cli
