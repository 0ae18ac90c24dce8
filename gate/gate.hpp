// The CI gate: a kernel (loaded or built in) against a systematic case matrix,
// properties and random cases, each call isolated in a child process, judged
// against the exact reference. See docs/gate.md.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "gate/case_json.hpp"
#include "impls/registry.hpp"
#include "properties/judge.hpp"

namespace ropecheck::gate {

struct GateOptions {
  std::vector<Dtype> dtypes{std::begin(kAllDtypes), std::end(kAllDtypes)};
  std::vector<Layout> layouts{std::begin(kAllLayouts), std::end(kAllLayouts)};
  int64_t max_position = int64_t(1) << 24;
  AngleModel angle_model = AngleModel::exact;
  std::map<Dtype, double> tolerance;  // bound overrides (u)
  uint64_t seed = 1;
  double budget_seconds = 60;
  double call_timeout_seconds = 10;
  std::string report_dir;  // where failing cases are written (empty: nowhere)
  bool quiet = false;      // no progress lines on stderr
  std::string kernel_arg = "--kernel ...";  // how replay hints name the kernel
};

// Parse "--tolerance": one number for every dtype, or "f32=8,bf16=1.5".
// Returns an error message, or empty on success.
std::string parse_tolerance(const std::string& s, std::map<Dtype, double>& out);

// One row of the verdict.
struct CheckRow {
  std::string name;   // short id ("matrix f32 interleaved", "bias bf16", ...)
  std::string what;   // one line: what it checks
  uint64_t cases = 0, declined = 0, failed = 0;
  double worst_error = 0, worst_bound = 0;  // the pair error (u) with the largest error/bound ratio, and its bound
  double worst_ratio = 0;
  bool ran = false;       // at least one accepted case
  bool failed_check = false;
  std::string note;       // skipped / aborted / declined: why; bias: the statistic
  std::optional<CaseRecord> smallest;  // smallest failing case
  std::string smallest_message;        // what went wrong with it
  std::string smallest_file;           // its replay file, when saved
  std::vector<CaseRecord> failing;     // a few failing cases (saved as replay files)
};

struct GateResult {
  std::string kernel;
  std::string kernel_arg;
  std::vector<CheckRow> rows;
  uint64_t calls = 0, accepted = 0;
  double seconds = 0;
  bool pass = false;
  std::string verdict_reason;
};

GateResult run_gate(const Implementation& impl, const GateOptions& opt);

// The bias check of one dtype from accumulated pair errors (sum of radial
// components, sum of e^2, count): |mean radial| <= 5 sigma/sqrt(n) + 1/8 u
// (+ the f32 intermediate's share for f16/bf16). docs/gate.md derives it.
CheckRow bias_row(Dtype d, uint64_t count, double sum_radial, double sum_e2, const KernelErrorModel& em);

// The verdict table (markdown-like) and summary lines.
std::string format_verdict(const GateResult& r);
// JUnit XML: one testsuite, one testcase per check.
std::string junit_xml(const GateResult& r);
// Print the verdict to stdout and, when junit_path is not empty, write the JUnit XML there.
// Returns the exit code: 0 pass, 1 fail, 2 when the XML cannot be written.
int emit_verdict(const GateResult& r, const std::string& junit_path);

// Judge one call (already made) of a case: memory checks, status, the
// reference. Returns an empty string when it passes, else why not (printable).
struct CaseVerdict {
  bool accepted = false;  // the kernel did not decline
  bool pass = true;
  std::string message;
  double worst_error = 0;  // max pair error (u) over finite pairs
  Judgement judgement;     // when the output was judged
};
CaseVerdict judge_call(const RopeCase& c, bool in_place, AngleModel model, double bound, const struct CallResult& r,
                       const ReferenceOutput* ref = nullptr);

// The bound a case is held to: the tolerance override for its dtype, or the
// implementation's error model.
double case_bound(const Implementation& impl, const RopeCase& c, const std::map<Dtype, double>& tolerance);

// The case generators (deterministic in the seed).
std::vector<RopeCase> systematic_cases(Dtype d, Layout l, int64_t max_position, uint64_t seed,
                                       std::vector<bool>* in_place);
std::vector<RopeCase> special_value_cases(Dtype d, Layout l, uint64_t seed);

}  // namespace ropecheck::gate
