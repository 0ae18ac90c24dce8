// The CI gate: a kernel (loaded or built in) against a systematic case matrix,
// properties and random cases, each call isolated in a child process, judged
// against the exact reference. See docs/gate.md.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/abi_versions.hpp"
#include "core/features.hpp"
#include "gate/case_json.hpp"
#include "gate/isolation.hpp"
#include "gate/mt64.hpp"
#include "impls/registry.hpp"
#include "properties/judge.hpp"
#include "properties/promise.hpp"

namespace ropecheck::gate {

// The number of random cases after the systematic part follows from --cases (default below), not from the
// clock: one seed gives one report on any machine. The budget is a cap: when it cuts the run, the verdict
// says what did not run (docs/gate.md, "The budget").
inline constexpr uint64_t kDefaultRandomCases = 4000;
inline constexpr uint64_t kMaxRandomCases = 10'000'000;
// Executions of each property per dtype x layout (--property-cases): properties/engine.hpp's driver.
inline constexpr uint64_t kDefaultPropertyCases = 25;
inline constexpr uint64_t kMaxPropertyCases = 100'000;
inline constexpr double kMaxBudgetSeconds = 7 * 24 * 3600;    // --budget-seconds at most a week
inline constexpr double kMaxCallTimeoutSeconds = 24 * 3600;   // --call-timeout at most a day
inline constexpr uint64_t kMaxExportRandomCases = 100'000;    // cases export --random-cases
// The systematic rows' largest position by default (--max-position), and the long positions row's: well past
// 2^31, so a kernel that rounds positions to f32 or truncates them to 32 bits fails (docs/gate.md, "Positions").
inline constexpr int64_t kDefaultMaxPosition = int64_t(1) << 24;
inline constexpr int64_t kDefaultLongMaxPosition = int64_t(1) << 40;
// The long positions row's positions start here: above every default row's (2^24, bucket 2^24..), where f32
// no longer holds every integer.
inline constexpr int64_t kLongPositionsFrom = (int64_t(1) << 25) + 1;

struct GateOptions {
  std::vector<Dtype> dtypes{std::begin(kAllDtypes), std::end(kAllDtypes)};
  std::vector<Layout> layouts{std::begin(kAllLayouts), std::end(kAllLayouts)};
  int64_t max_position = kDefaultMaxPosition;
  // The long positions row's largest position: kDefaultLongMaxPosition, or what bounds positions (an explicit
  // --max-position, a model's context), said by long_positions_bound ("--max-position", "the model's context").
  int64_t long_max_position = kDefaultLongMaxPosition;
  std::string long_positions_bound;
  AngleModel angle_model = AngleModel::exact;
  KernelErrorModel error_model = loaded_kernel_error_model(AngleModel::exact);  // what its bounds derive from
  Contract contract;                  // what the kernel promises (--contract; built-ins: their own)
  std::map<Dtype, double> tolerance;  // flat bound overrides (u), replacing the contract's allowances
  uint64_t seed = 1;
  uint64_t random_cases = kDefaultRandomCases;
  uint64_t property_cases = kDefaultPropertyCases;
  uint64_t shrink_tries = 400;  // candidates a property row's first failure is shrunk through, at most
  uint64_t failing_cases = 3;   // failing cases written per row besides its smallest (--failing-cases); the
                                // diagnosis reads the same three kept cases whatever this is
  double budget_seconds = 60;  // a cap on the whole run
  double call_timeout_seconds = 10;
  std::string report_dir;  // where failing cases are written (empty: nowhere)
  bool quiet = false;      // no progress lines on stderr
  std::string kernel_arg = "--kernel ...";  // how replay hints name the kernel
  // A model's configuration (--hf-config / --preset; reference/hf_config.hpp model_case): the case template
  // every matrix, special-value, sequence, repeat, large and random case takes (core/rope_case.hpp
  // apply_case_template: head, rotated slice, base, rule, attention factor, axis map, layout); positions,
  // inputs, dtypes, heads and tokens still vary. The property rows generate their own shapes and say so.
  std::optional<RopeCase> model;
  std::string model_text;  // the resolved configuration, one line each (the verdict's header)
  std::string model_name;  // its name (the coverage line)
  // Without a model: the rotated slice every matrix, special-value, long-position, sequence, repeat, large and random
  // case takes (--rotary-dim / --rotary-pct / --rotary-offset; core/rope_case.hpp apply_rotary_slice), as said by
  // slice_given ("--rotary-pct 0.25"). None given and every full-rotary probe declined, the gate looks for one itself
  // (docs/gate.md, "Partial rotary").
  std::optional<RotarySlice> slice;
  std::string slice_given;
  // What the kernel implements (--supports; nullopt: not declared, every call is made): a call using any other
  // feature is not made ("not run: outside --supports"), and each supported feature the run makes calls of
  // must have an accepted one. core/features.hpp.
  std::optional<FeatureSet> supports;
  // Features that must have an accepted call (--require). A run with a model requires an accepted call in the
  // model's configuration as well.
  FeatureSet require;
  // --input-padding: the bytes after each input and table the kernel's documented contract lets it read
  // (HostOptions::input_padding; 0: none).
  uint64_t input_padding = 0;
};

// Parse "--tolerance": one number for every dtype, or "f32=8,bf16=1.5".
// Returns an error message, or empty on success.
std::string parse_tolerance(const std::string& s, std::map<Dtype, double>& out);

// One row of the verdict.
struct CheckRow {
  std::string name;   // short id ("matrix f32 interleaved", "bias bf16", ...)
  std::string what;   // one line: what it checks
  uint64_t cases = 0, declined = 0, failed = 0;
  // The pair with the largest ratio to its allowance: its error e, its bound (the case's flat bound, or its
  // total allowance), and its radial and tangential components with their allowances (u).
  double worst_error = 0, worst_bound = 0;
  double worst_ratio = 0;
  double worst_radial = 0, worst_tangential = 0, allowed_radial = 0, allowed_tangential = 0;
  double max_angle_ulps = 0;  // largest angle error seen, in f32 ulps of |phi|
  // Failures that are not accuracy: "crash", "hang", "error code", "memory" (guard bytes, unwritten output,
  // input modified) with their counts; shown first whatever else the row found.
  std::map<std::string, uint64_t> faults;
  // Calls (property rows: executions) not made, by reason ("outside --supports"): never a failure, never the
  // kernel's decline.
  std::map<std::string, uint64_t> not_sent;
  std::string diagnosis;  // what the smallest failing case's kernel most likely computes
  // Where its violations are (properties/localisation.hpp: the pairs, heads, tokens, tensor, angle) on the case the
  // diagnosis read; empty for a fault or a property row.
  std::string where;
  // The --contract SPEC its diagnosis suggests ("would pass with --contract SPEC"), kept only once every failing case
  // the row kept passes under it (for a property row: its failing execution, replayed); empty: none.
  std::string suggestion;
  // Fold one judged call's worst pair and angle error into the row.
  void add(const Judgement& j);
  bool ran = false;       // at least one accepted case
  bool failed_check = false;
  std::string note;       // skipped / aborted / declined: why; bias: the statistic
  std::optional<CaseRecord> smallest;  // smallest failing case
  std::string smallest_message;        // what went wrong with it
  std::string smallest_fault;          // its fault ("crash", ...), or empty for an accuracy failure
  std::string smallest_file;           // its replay file, when saved
  std::vector<CaseRecord> failing;     // a few failing cases (saved as replay files)
  // Every failing case, for re-judging a suggestion on them all (Gate::failing_under), while their inputs take at
  // most 8 MiB; rejudge_dropped: those not kept past that.
  std::vector<CaseRecord> rejudge;
  uint64_t rejudge_dropped = 0;
};

struct GateResult {
  std::string command = "ropecheck gate";  // what ran, for the verdict's first line ("ropecheck cases check")
  std::string kernel;
  std::string kernel_arg;
  std::string contract;  // the canonical contract SPEC (or "tolerance override")
  std::string model;     // GateOptions::model_text (empty: no model)
  std::string angle_model = "exact";
  std::map<Dtype, double> dtype_bound;  // the flat bound of a 128-dim case per dtype (display)
  std::string bounds;    // one line per dtype: the contract's derived allowances at small and large angles
  // The error decomposition of every accepted call's finite pairs, per dtype and log2 position bucket.
  std::map<Dtype, std::map<int, ErrorStats>> by_bucket;
  // The same per dtype x layout (the report's series), with the judged calls that failed there: the series'
  // accuracy check ("accuracy/KERNEL/MODEL/DTYPE/LAYOUT") fails when one did.
  struct Combo {
    std::map<int, ErrorStats> by_bucket;
    uint64_t calls = 0, failed = 0;
    std::string first_failure;  // "ROW: the first line of its message"
  };
  std::map<std::pair<Dtype, Layout>, Combo> by_combo;
  // Fold one judged call of case c into a row, the error decompositions and the bias sums of its dtype.
  void add(CheckRow& r, const RopeCase& c, const Judgement& j, std::map<Dtype, BiasSums>& bias);
  std::vector<CheckRow> rows;
  uint64_t calls = 0, accepted = 0;
  // What was exercised (the verdict's coverage line): per feature, the positions, the model's configuration.
  Coverage coverage;
  std::string model_name;                // with a model: its name
  std::optional<FeatureSet> supports;    // --supports (gate) or the export's (cases check)
  FeatureSet require;                    // --require
  double seconds = 0;
  // What the run counted against --budget-seconds ("The budget": CPU seconds of the gate and its kernel hosts
  // plus blocked call time), in all and per part in run order ("start", "matrix", "special values", "v2",
  // each property row, "sequence", "repeat", "large", "random", "verdict": shrinking, diagnosis, files).
  // bench/bench_gate.cpp reports them.
  double budget_used = 0;
  std::vector<std::pair<std::string, double>> cost;
  // What the budget cut, one line each ("random: 812 of 4000 cases ran", "matrix bf16 half-split: 12 of 60
  // cases not run", "shrinking", ...); empty when the run completed.
  std::vector<std::string> budget_cuts;
  bool pass = false;
  std::string verdict_reason;
  // A failing verdict's cause: the one that explains the most failing rows (first in verdict_reason), and its
  // stable id (properties/causes.hpp; "" for a text the table does not know). Empty for a pass.
  std::string cause, cause_id;
  // A bound on the positions the kernel takes (Gate: find_position_limit): the largest position the rows would have
  // given, the largest one it took (-1: no bound found below it; every row then as without it), the calls that found
  // it, and what required positions up to the former ("--max-position", "the model's context"; "": nothing).
  int64_t positions_asked = 0, position_limit = -1;
  uint64_t position_probes = 0;
  std::string positions_required_by;
  // The rotated slice the rows' cases took (RotarySlice::describe; empty: their own) and how it came (given, or
  // found by probing and the call that found it); a kernel that took no slice either: the slices tried.
  std::string rotary_slice, rotary_slice_found, rotary_slices_tried;
  // Every cause of a failing verdict, the verdict's first (verdict_reason shows as many as fit on its line).
  std::vector<std::string> causes;
  // Lines said in full where the verdict line has room for a brief only: every probe refused
  // (AbiVersions::refusal), what the budget cut.
  std::string refusal, budget_line;
  std::string sandbox;        // one line: the kernel host's isolation (seccomp, process starts)
  std::string padding;        // one line when --input-padding was given: what the kernel may read past its inputs
  std::string abi;            // one line: the ABI versions the kernel speaks (core/abi_versions.hpp summary)
  std::string kernel_output;  // the kernel's captured stdout/stderr, quoted line by line (empty: silent)
};

// Throws LoadError when the kernel library cannot be loaded (the CLI's exit 2).
GateResult run_gate(const Implementation& impl, const GateOptions& opt);

// A failing row's cause id (properties/causes.hpp): of its fault, else its diagnosis, else its name (the
// coverage row); "" for a row that did not fail.
std::string row_cause_id(const CheckRow& r);

// For a process that runs gates (the CLI; the gate's benchmark, to count what the CLI costs): buffers of
// megabytes, made and freed case after case (the large row's cases, their exact outputs, the kernel's), stay in
// the heap once made rather than being mapped and unmapped each time, a page fault per page per case (measured:
// 8% of a short gate's CPU, most of it system time). Process-wide (mallopt): not for a library's host process.
void keep_large_buffers_in_heap();

// The radial bias check of one dtype from the judged pairs' radial components
// (BiasSums): |mean radial| <= 5 SE + 1/8 u + the contract's systematic share,
// SE the cluster-robust standard error (docs/gate.md derives it).
CheckRow bias_row(Dtype d, const BiasSums& b, const KernelErrorModel& em);

// The coverage requirements of a run (docs/gate.md, "Coverage"): something accepted; each feature of
// `require`; each supported feature the run sent calls of; with a model, a call in its configuration. Sets
// r.require and r.supports, and adds a failing "coverage" row naming each requirement not met (or, when
// requirements were given and are met, a passing one). Returns whether they were met.
bool judge_coverage(GateResult& r, const std::optional<FeatureSet>& supports, const FeatureSet& require,
                    bool model_required, const std::string& nothing_accepted_why,
                    const std::string& nothing_accepted_diagnosis = "");
// The verdict line, "verdict: PASS (REASON)" or "verdict: FAIL (REASON)", in at most kVerdictLineMax characters
// (issue 50, scope 5): REASON is `parts` joined by "; ", each whole, as many as fit in order, then `keep` (always
// kept: what the budget cut); the parts left out are counted, "N more MORE_WHAT" (a part longer than the line on
// its own is cut at a word, " ...").
inline constexpr size_t kVerdictLineMax = 200;
// Whether "verdict: FAIL (REASON)" is within kVerdictLineMax.
inline bool fits_verdict_line(std::string_view reason) {
  return reason.size() + std::string_view("verdict: FAIL ()").size() <= kVerdictLineMax;
}
std::string fit_verdict_reason(const std::vector<std::string>& parts, const std::string& more_what,
                               const std::string& keep = "");
// The verdict's coverage line: calls accepted (and that most were declined), per feature, the positions, the
// model's configuration, what was not sent.
std::string coverage_line(const GateResult& r);

// The error decomposition per dtype and position bucket (markdown tables).
std::string format_error_table(const std::map<Dtype, std::map<int, ErrorStats>>& by_bucket);
// The verdict table (markdown-like) and summary lines.
std::string format_verdict(const GateResult& r);
// The verdict in at most ~15 lines for a pass (docs/gate.md, "Output"); `details`: a last line saying where
// the rest is (empty: none).
std::string format_brief_verdict(const GateResult& r, const std::string& details = "");
// The verdict as data (`gate --verdict-json`; the Python package's Result): pass, the reason, the coverage line,
// and each row's counts, worst error and its allowance, diagnosis, smallest failing case and replay file.
nlohmann::json verdict_json(const GateResult& r);
// JUnit XML: one testsuite, one testcase per check.
std::string junit_xml(const GateResult& r);
// Print the verdict to stdout and, when junit_path is not empty, write the JUnit XML there.
// Returns the exit code: 0 pass, 1 fail, 2 when the XML cannot be written.
int emit_verdict(const GateResult& r, const std::string& junit_path, bool verbose = true,
                 const std::string& details = "");

// Judge one call (already made) of a case: memory checks, status, the
// reference. Returns an empty string when it passes, else why not (printable).
struct CaseVerdict {
  bool accepted = false;  // the kernel did not decline
  bool pass = true;
  std::string message;
  std::string fault;       // "crash", "hang", "error code", "memory", or empty (see CheckRow::faults)
  double worst_error = 0;  // max pair error (u) over finite pairs
  Judgement judgement;     // when the output was judged
  bool judged = false;     // the output was judged against the reference
  // A failing judged call: the tensor form's k judged on its own (its violations; has_k), and the reference's
  // angles [token][pair] (localise() reads them).
  Judgement k_judgement;
  bool has_k = false;
  std::vector<double> angles;
};
// The checks of a call that need no reference: its status (crash, hang, error code, declined), memory (guard
// bytes and pages, arguments, input, unwritten output) and FP environment. judge_call adds the reference.
CaseVerdict check_call(const RopeCase& c, bool in_place, const struct CallResult& r);
CaseVerdict judge_call(const RopeCase& c, bool in_place, AngleModel model, const Criteria& cr,
                       const struct CallResult& r, const ReferenceOutput* ref = nullptr);

// The ways a case is sent to a kernel whose negotiation found `abi` (docs/gate.md, "Kernels that take tables"), the
// preferred first. To a kernel that takes the flat form's neutral calls, one: as asked. To one that took only the
// ABI v3 forms of a call: when it takes caller-given tables only and the case has none, with a table the harness
// builds of each kind it took in turn, starting at kind number `turn` (by position, or per token when it took
// those only) -- its cos/sin (times the attention factor) under the contract's clauses: in the call's dtype or f32
// as the kernel took them, by the conventional f32 pipeline under angles=f32 or the fp32 angle model (else
// correctly rounded) -- each in every form it took that expresses the case (the flat form, then each tensor form it
// took: in_tensor_form). A way is made when first asked for (a table costs its exact values). A call declined in one
// way is made in the next (call_in_ways): a form that takes only some calls (a decode-only flat form beside a
// general tensor form) never hides the others.
class SendWays {
 public:
  // rows: how the tables the harness builds are laid out (GivenRows::sparse: the positions index the table, for the
  // long positions row); per-token kinds are per token whatever it says.
  SendWays(const RopeCase& asked, const AbiVersions& abi, const Contract& contract, AngleModel model, uint64_t turn,
           GivenRows rows = GivenRows::renumbered);
  size_t size() const { return n_tables_ * n_forms_; }
  // Way i (< size()); nullptr when it cannot express the case (not_sent() says why). The asked case itself when
  // it goes as asked.
  const RopeCase* way(size_t i);
  // Why no way tried expresses the case: "the kernel takes tables only and a table cannot express this case (...)".
  const std::string& not_sent() const { return why_; }

 private:
  const RopeCase& asked_;
  const AbiVersions& abi_;
  const Contract& contract_;
  AngleModel model_;
  uint64_t turn_;
  GivenRows rows_;
  size_t n_tables_ = 1, n_forms_ = 1;
  std::vector<std::optional<TensorForm>> forms_;          // nullopt: as it is (the flat form, or its own tensors)
  std::vector<std::optional<std::optional<RopeCase>>> tables_;  // per table way: not yet made / nullopt / the case
  std::vector<std::optional<std::optional<RopeCase>>> ways_;
  std::string why_;
  const RopeCase* base(size_t t);
};
// The call of `asked` in the first of its ways (from way `first` on, then around) that the kernel does not
// decline: `call` makes the call of one way (a result with not_sent set: that way is not to be made). Returns the
// result of the accepted call, else of the first declined one (what the case is counted as), else (no way made) one
// with not_sent saying why; *sent: the case of that result's way (nullptr: none made); *way: its index.
CallResult call_in_ways(SendWays& ways, const std::function<CallResult(const RopeCase&)>& call, size_t first = 0,
                        const RopeCase** sent = nullptr, size_t* way = nullptr);
// The contract a call with a table the harness built is judged under when it is judged as the case asked (the
// property rows): its cos-sin clause the coarsest of the contract's and the tables' dtypes (the table rounds cos and
// sin); an angle table's rounding in its angle clause (docs/error-model.md, "Caller-given tables").
Contract table_call_contract(const AbiVersions& abi, Dtype d, const Contract& contract);
// How the harness builds the tables it gives a kernel under a contract and angle model: by the conventional f32
// pipeline under angles=f32 with its derived K or the fp32 angle model; else correctly rounded.
TablePipeline table_pipeline(const Contract& contract, AngleModel model);
// The case as the kernel takes it, in the first of its ways (SendWays; form left empty when that is `asked`
// itself). false (not_sent: why) when no way expresses the case: the call is not made.
bool sent_form(const RopeCase& asked, const AbiVersions& abi, const Contract& contract, AngleModel model,
               uint64_t turn, std::optional<RopeCase>& form, std::string& not_sent);
// A turn for SendWays that is a function of the case (its dtype, shape, positions and input): a property's
// replayed execution gets the kinds its gate run gave it.
uint64_t case_turn(const RopeCase& c);

// A property's call of `asked` on a kernel whose negotiation found `abi` (the gate and `ropecheck replay` alike): in
// place when the kernel takes in-place calls only, in the first of its ways (SendWays of turn case_turn(asked)) the
// kernel does not decline; `call` makes one call (a result with not_sent: not made). *sent: the case of the call whose
// result is returned (nullopt: none made). criteria is what the property's outputs are held to (property_contract).
CallResult property_call(const RopeCase& asked, bool in_place, const AbiVersions& abi, const Contract& contract,
                         AngleModel model, const std::function<CallResult(const RopeCase&, bool)>& call,
                         std::optional<RopeCase>* sent = nullptr, bool* sent_in_place = nullptr);
Contract property_contract(const RopeCase& asked, const AbiVersions& abi, const Contract& contract);

Criteria case_criteria(const KernelErrorModel& em, const RopeCase& c, const Contract& contract,
                       const std::map<Dtype, double>& tolerance);

// The diagnosis of a failing call (faults named as such, else properties/diagnosis). *suggestion: the --contract SPEC
// the diagnosis says the call would pass under (empty: none), which a row prints only once verified on its other
// failing cases (Gate::verify_suggestions).
std::string diagnose_call(const RopeCase& c, AngleModel model, const Criteria& cr, const CaseVerdict& v,
                          const struct CallResult& r, std::string* suggestion = nullptr);
// A failing in-place call whose case passes out of place (`out_of_place`: the same case called out of place):
// "in-place aliasing: ..." (the kernel reads what it already wrote when out == in); empty otherwise.
std::string in_place_aliasing(const RopeCase& c, AngleModel model, const Criteria& cr,
                              const struct CallResult& out_of_place);

// One line per dtype asked: the derived allowances of a contract at a small and a large angle.
std::string describe_bounds(const KernelErrorModel& em, const Contract& contract, const std::vector<Dtype>& dtypes,
                            int64_t max_position);

// One random case of a dtype and layout (the gate's random row; `cases export` draws the same).
// model: a case template (GateOptions::model) every generated case takes before its input is drawn.
// slice: the rotated slice every case takes (GateOptions::slice), after the model's template (never both).
RopeCase random_case(Dtype d, Layout l, int64_t max_position, std::mt19937_64& rng, const RopeCase* model = nullptr,
                     const RotarySlice* slice = nullptr);
// The same, from Mt19937_64 (the same sequence, faster: gate/mt64.hpp), as the gate and case sets draw them.
RopeCase random_case(Dtype d, Layout l, int64_t max_position, Mt19937_64& rng, const RopeCase* model = nullptr,
                     const RotarySlice* slice = nullptr);
// What a row of the verdict checks ("matrix DTYPE LAYOUT", "special values", "property: ...", "random",
// "coverage"), in one set of words for the gate and `cases check`.
std::string row_what(const std::string& name, const Contract& contract);

// The case generators (deterministic in the seed).
std::vector<RopeCase> systematic_cases(Dtype d, Layout l, int64_t max_position, uint64_t seed,
                                       std::vector<bool>* in_place, const RopeCase* model = nullptr,
                                       const RotarySlice* slice = nullptr);
std::vector<RopeCase> special_value_cases(Dtype d, Layout l, uint64_t seed, int64_t max_position,
                                          const RopeCase* model = nullptr, const RotarySlice* slice = nullptr);
// ABI v2 features, one group per row (rotary offset, position axes, attention factor, frequency rules,
// combined): what each case exercises, the case, and whether it is called in place. Deterministic in the
// seed. A kernel may decline any of them.
struct V2Case {
  std::string feature;
  std::string what;
  RopeCase c;
  bool in_place = false;
  // Not in a case set: its tensors span gigabytes, which only the gate's own host lays out sparse.
  bool gate_only = false;
};
std::vector<V2Case> v2_feature_cases(Dtype d, Layout l, int64_t max_position, uint64_t seed);
// ABI v3 call shapes, one group per row (inverse, tables, strides, q and k, sequences, int32 positions): the
// same form as the v2 rows'. Tables are built correctly rounded (in f32 and in the case's dtype; the angle
// kind f32); deterministic in the seed. A kernel may decline any of them.
std::vector<V2Case> v3_feature_cases(Dtype d, Layout l, int64_t max_position, uint64_t seed);
// ABI v4: per-token tables (RC_ROWS_BY_TOKEN), each kind in f32 and the data's type, the flat form and the tensor
// form (q and k, rank 4 with shared or own rows, varlen, the inverse). Tables correctly rounded. Not in a case set.
std::vector<V2Case> v4_feature_cases(Dtype d, Layout l, int64_t max_position, uint64_t seed);
// The sequence row's calls: a base case and variants (base, rotary_dim, head_dim, scale, table, every other
// accepted dtype x layout) as base, v1, base, v2, ..., then the variants back to back. With a model only the
// dtype x layout variants (the model fixes the rest).
std::vector<RopeCase> sequence_cases(const std::vector<std::pair<Dtype, Layout>>& combos, int64_t max_position,
                                     uint64_t seed, const RopeCase* model = nullptr,
                                     const RotarySlice* slice = nullptr);
// The repeat row's case.
RopeCase repeat_case(Dtype d, Layout l, int64_t max_position, uint64_t seed, const RopeCase* model = nullptr,
                     const RotarySlice* slice = nullptr);
// The long positions row's cases (and whether each runs in place): positions from kLongPositionsFrom to
// max_position -- f32-inexact ones below 2^31, then beyond int32 (2^31, 2^31 + 1, 2^32 +- 1, ..., max) -- over
// a dtype and layout. Empty when max_position < kLongPositionsFrom.
// for_tables: for a kernel that takes tables only, whose table (sparse: GivenRows::sparse) the positions index: the
// same positions up to long_table_max_position(model), on heads of rotary_dim kLongTableRotaryDim (16 and 12
// elements) unless a model fixes them.
std::vector<std::pair<RopeCase, bool>> long_position_cases(Dtype d, Layout l, int64_t max_position, uint64_t seed,
                                                           const RopeCase* model = nullptr, bool for_tables = false,
                                                           const RotarySlice* slice = nullptr);
inline constexpr uint32_t kLongTableRotaryDim = 8;
inline constexpr int64_t kLongTableMaxPosition = int64_t(1) << 34;
// The largest position a table kernel's long positions row reaches: 2^34, or less where the model's rotary_dim makes
// a row of f32 values so wide that (position + 2^31) rows would span more than 2^42 bytes of address space.
int64_t long_table_max_position(const RopeCase* model, const RotarySlice* slice = nullptr);
// The large row's cases (and whether each runs in place): prefill and MLA shapes, the combinations taking turns.
std::vector<std::pair<RopeCase, bool>> large_cases(const std::vector<std::pair<Dtype, Layout>>& combos,
                                                   int64_t max_position, uint64_t seed,
                                                   const RopeCase* model = nullptr,
                                                   const RotarySlice* slice = nullptr);

}  // namespace ropecheck::gate
