// Reports of one run: report.json (a versioned schema), report.md (Boost.Math
// style error tables), report.html (one self-contained file with inline SVG
// plots), and the baseline compare that fails CI when a kernel got less
// accurate. Schema and compare rules: docs/reports.md.
//
// This side only reads findings: it never runs a kernel. The run side that
// makes a Report (the sweep, this machine's Environment) is runs/.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace ropecheck::report {

// Bump when a field changes meaning or is removed; adding a field does not.
inline constexpr int kSchemaVersion = 1;
inline constexpr const char* kSchemaName = "ropecheck-report";

// A corrupt, unreadable or incompatible report (the CLI exits 2).
struct ReportError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The worst pair of a bucket, with its bits (hex, of the storage type).
struct WorstCase {
  double error = 0, radial = 0, tangential = 0;
  int64_t position = 0;
  uint64_t token = 0, head = 0;
  uint32_t pair = 0, dim0 = 0, dim1 = 0;
  std::string input[2], got[2], rounded[2];  // "0x3f800000"
  std::string exact[2];                      // C99 hex float of the exact output (double)
};

// A bucket's error split into its components and the kernel's angle error
// (docs/reports.md, "The error's components and the angle error"). Reports
// written before they were recorded lack them (same schema version).
struct Decomposition {
  double max_radial = 0, max_tangential = 0;  // largest |radial|, |tangential| component (u)
  uint64_t angle_count = 0;                   // pairs whose angle error was measured
  double max_angle_rad = 0;                   // largest |angle error| (rad; atan2, so at most pi)
  double mean_angle_rad = 0;                  // signed mean angle error (rad; > 0: rotated too far)
  // Largest |angle error| / ulp32(|phi|) over every measured pair: where |phi| is
  // small this measures the output's rounding, not the angle.
  double max_angle_ulps = 0;
  // The same over the pairs where rounding can explain at most 1/8 ulp of f32
  // at |phi| (PairError::resolved): the kernel's angle error to within 1/8 ulp.
  uint64_t resolved_angle_count = 0;
  double max_resolved_angle_ulps = 0;
};

struct BucketStats {
  int bucket = 0;  // position_bucket(): 0 for position 0, b for [2^(b-1), 2^b)
  std::string label;
  uint64_t count = 0;
  double max = 0, p99 = 0, mean = 0, bias = 0, tangential_bias = 0;
  // sqrt(mean e^2), u: bounds the standard deviation of the radial component
  // from above (|radial| <= e); the bias compare's spread. Absent in reports
  // written before it was recorded (the compare then falls back to `max`).
  std::optional<double> rms;
  std::optional<Decomposition> decomposition;
  std::optional<WorstCase> worst;
};

// One kernel judged under one angle model on one dtype and layout.
struct Series {
  std::string kernel, angle_model, dtype, layout;
  double bound = 0;                   // u: the flat case bound of its criteria (display; the verdict is per pair)
  bool judged_under_own_model = true;  // false: under another angle model (e.g. fp32 pipeline under exact)
  // The contract it was judged under (Contract::spec()) and the largest
  // fraction of its allowance any pair used. Absent in older reports.
  std::optional<std::string> contract;
  std::optional<double> worst_ratio;
  uint64_t violations = 0;
  std::string first_finding;
  BucketStats all;                    // every bucket together (bucket = -1)
  std::vector<BucketStats> buckets;   // ascending bucket
  std::vector<uint64_t> histogram;    // counts per Report::histogram_edges bin
  std::string key() const { return kernel + " / " + angle_model + " / " + dtype + " / " + layout; }
};

// One pass/fail check of the run. The sweep adds one per series judged under
// its kernel's own model ("accuracy/<kernel>/<model>/<dtype>/<layout>"); a
// gate adds its own with source "gate".
struct Check {
  std::string name;
  std::string source = "sweep";
  std::string status;  // "pass", "fail" or "skip"
  std::string detail;
  std::string cause_id;  // a failing gate row's cause (properties/causes.hpp); written only when set
};

struct Environment {
  std::string tool_version, compiler, build_type, cpu_model;
  // Highway targets (hwy::TargetName: "AVX3_DL", "AVX2", ...) compiled in and supported by this CPU: the
  // targets of the `simd-<target>` kernels that ran.
  std::vector<std::string> simd_targets;
  // Every target compiled in, whether this CPU runs it or not. Absent in reports written before it was
  // recorded (then a compare cannot tell a CPU without a target from a build without it).
  std::optional<std::vector<std::string>> simd_compiled_targets;
  std::vector<std::string> implementations;  // registered kernels
};

// The SIMD target a kernel's series needs: "simd-<target>" (impls/simd names each kernel "simd-" + the
// lower-case hwy::TargetName) needs that target, returned as Highway spells it ("simd-avx3_dl" ->
// "AVX3_DL"); every other kernel (scalar, conventional-fp32, the dispatched `simd`, plugins) none.
std::optional<std::string> simd_target_of(const std::string& kernel);
// Whether a target list (Environment::simd_targets, ...) holds this target, ignoring case.
bool lists_target(const std::vector<std::string>& targets, const std::string& target);

struct Report {
  int schema_version = kSchemaVersion;
  std::string kind = "sweep";
  Environment environment;
  uint64_t seed = 0;
  nlohmann::json parameters = nlohmann::json::object();  // every run parameter
  std::vector<double> histogram_edges;  // bin i is [edges[i], edges[i+1]), the last one unbounded
  std::vector<Check> checks;
  std::vector<Series> series;

  const Series* find(const std::string& key) const;
  const Check* find_check(const std::string& name) const;
  // The sweep's check of a series ("accuracy/<kernel>/<model>/<dtype>/<layout>"), or null: a series
  // without one is informational.
  const Check* check_of(const Series& s) const;
  bool all_checks_pass() const;
};

// The histogram bins: [0, 2^-12), [2^-12, 2^-11), ..., [2^30, inf).
std::vector<double> default_histogram_edges();

nlohmann::json to_json(const Report& r);
Report from_json(const nlohmann::json& j);  // throws ReportError
// A regular file of at most kMaxReportBytes (a FIFO or a huge file is refused before reading); throws ReportError.
inline constexpr uintmax_t kMaxReportBytes = uintmax_t(256) << 20;
Report load_report(const std::string& path);

// ---- what report.md and report.html open with ------------------------------------------

// The verdict: the checks, and which of them fail (in report order). pass() with no failing check.
struct Verdict {
  size_t checks = 0, passing = 0, skipped = 0;
  std::vector<const Check*> failing;
  bool pass() const { return failing.empty(); }
  std::string headline() const;  // "PASS: 12 of 12 checks pass" / "FAIL: 2 of 12 checks fail" / "NO CHECKS ..."
};
Verdict verdict_of(const Report& r);

// One series in a line: its verdict, its worst error against its bound and where it occurs, and why it
// fails.
struct SeriesSummary {
  const Series* series = nullptr;
  const Check* check = nullptr;           // null: informational (not a check)
  std::string verdict;                    // "pass", "FAIL", "skip", or "not a check"
  const BucketStats* worst_bucket = nullptr;  // the bucket with the largest max (the first of equal ones)
  std::string where;                      // "2^28.. (position 301989888)": the worst bucket and pair, or "-"
  // Failing: the check's detail; a series with violations also its first finding (the judge's diagnosis
  // with the case and the bits, several lines). Empty for a passing series.
  std::string detail, finding;
};
std::vector<SeriesSummary> summarize(const Report& r);

// A run parameter in words: a list as "a, b", an object as "k: v; k: v", a string as itself. An empty list
// of the sweep's `impls`, `dtypes` or `layouts` means every one: it reads "every one (f32, f16, bf16)",
// the kernels, dtypes or layouts the report holds.
std::string parameter_text(const Report& r, const std::string& key);
// The run in words, one (name, value) a row: the build, the machine, the seed and every parameter.
std::vector<std::pair<std::string, std::string>> run_facts(const Report& r);

std::string render_markdown(const Report& r);
// A recorded contract SPEC in its short form ("identity=bits"; the SPEC itself if it does not parse).
std::string short_contract(const std::string& spec);
std::string render_html(const Report& r);

// Writes DIR/report.json, DIR/report.md, DIR/report.html (creates DIR).
// Throws ReportError when a file cannot be written.
void write_report_dir(const Report& r, const std::string& dir);
void write_text_file(const std::string& path, const std::string& text);

// ---- the headline plot --------------------------------------------------------

// (Its sweep: headline_options() in runs/sweep_report.hpp.)
// Max pair error (u, log scale) against position, one panel per dtype:
// accurate angles (scalar) vs the conventional fp32 pipeline judged under the exact model.
std::string render_headline_svg(const Report& r);

// ---- baseline compare ------------------------------------------------------------

// A bucket's max (and mean) may grow to base * (1 + relative) + absolute u.
// Its bias (mean radial error) may move by
//   bias_sigmas * sqrt(s_b^2 / n_b + s_c^2 / n_c) + bias_absolute u,
// s = the bucket's rms (an upper bound on the radial standard deviation; the
// bucket's max when a report has no rms), n = its count: the gate's bias
// check (docs/gate.md) for a difference of two means (docs/reports.md).
struct Slack {
  double relative = 0.25;
  double absolute = 0.05;
  double bias_sigmas = 5.0;
  double bias_absolute = 0.125;
  double limit(double base) const { return base * (1.0 + relative) + absolute; }
  double bias_allowance(double spread_base, uint64_t n_base, double spread_cur, uint64_t n_cur) const;
};

// The rules of a compare with this slack, in one line (the CLI prints it).
std::string describe(const Slack& slack);

struct Difference {
  bool failing = false;
  std::string kind;    // "regression", "coverage", "check", "improved", "new", "parameter", "bound",
                       // "contract", "info" (a component or angle error moved beyond the slack: never fails),
                       // "not-run-here" (a series, or its check, of a SIMD target this CPU lacks: never fails)
  std::string what;    // series key or check name
  std::string bucket;  // bucket label, or "" when not per bucket
  std::string metric;  // "max", "mean", "bias", "count", "status", ...
  std::string baseline, current, limit;
};

struct CompareResult {
  std::vector<Difference> diffs;
  size_t series_compared = 0, buckets_compared = 0, checks_compared = 0;
  // Buckets whose bias was compared with the spread of the baseline's
  // (current's) side bounded by its max, for want of an rms (a report written
  // before rms was recorded): a wider, still sound allowance.
  size_t bias_fallback_baseline = 0, bias_fallback_current = 0;
  // Buckets compared whose baseline (current) report has no error decomposition
  // (written before it was recorded): their components and angle errors were not compared.
  size_t decomposition_missing_baseline = 0, decomposition_missing_current = 0;
  // Baseline series (and their checks) absent here because this CPU lacks their SIMD target (compiled in,
  // not supported): informational, not a coverage loss. The targets, as the baseline's kernels name them.
  size_t series_not_run_here = 0, checks_not_run_here = 0;
  std::vector<std::string> targets_not_here;
  bool failed() const;
  // The differences as an aligned table and a one-line verdict.
  std::string table() const;
};

// A baseline series the current report lacks is a coverage loss, except when it is not run here: its kernel
// needs a SIMD target (simd_target_of) that the current report's environment does not list in simd_targets
// (this CPU does not run it) but does list in simd_compiled_targets (the build has it), or records no
// compiled targets (a report from before they were). Its check goes with it. The baseline's own target list
// is not consulted: the series being in the baseline shows its machine ran it (docs/reports.md, "Baselines
// from other CPUs").
CompareResult compare_reports(const Report& baseline, const Report& current, const Slack& slack = {});

}  // namespace ropecheck::report
