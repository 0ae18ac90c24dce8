// The property engine: every property of RoPE is defined once (properties/suite_*.cpp) as a RapidCheck
// testable over a kernel handle, and run on any kernel:
//
//  - a built-in or in-process kernel (ImplementationHandle): the gtest suite, the mutation tests;
//  - a loaded kernel called through the gate's kernel host (gate/gate.cpp's handle): the gate's rows;
//  - an external program's outputs read from a case directory (gate/case_set.cpp's recording and
//    playback handles): `cases export` and `cases check`.
//
// A property builds its cases with the generators (properties/generators.hpp), runs the kernel through the
// handle, and states its predicate with a tolerance derived from the handle's criteria (the contract's
// bounds; docs/error-model.md). The predicates that compare outputs are plain functions of cases and outputs
// (below), so the fuzzers use them too.
//
// run_property() is the gate's driver: execution i of property P for (dtype, layout) is a pure function of
// (seed, P, dtype, layout, i) (its rc::Random is keyed on them), so the gate, `cases export` and `cases
// check` generate the same cases, and a failure is reproduced by (seed, i, shrink path): RapidCheck's own
// shrinking (each step the first smaller candidate that still fails, as rc::check does) applied to the
// failing execution.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <rapidcheck.h>

#include "core/rope_case.hpp"
#include "impls/registry.hpp"
#include "properties/judge.hpp"
#include "properties/predicates.hpp"
#include "properties/promise.hpp"

namespace ropecheck::props {

// How a property calls the kernel.
struct RunRequest {
  bool in_place = false;
  int out_fill = -1;  // out of place: the byte the output buffer holds before the call (-1: the handle's own)
};

struct RunResult {
  enum class Status { ok, declined, failed };
  Status status = Status::ok;
  Bytes out;
  // A tensor-form call with k (ABI v3): k's output, compact [n_tokens][k_heads][head_dim] (empty otherwise).
  Bytes k_out;
  // Out of place: the input buffer after the call, when the handle can see it (in-process kernels). A
  // handle that checks the input itself (the gate's host) reports a change as a failure instead.
  std::optional<Bytes> input_after;
  std::string failure;  // failed: what happened (crash, memory finding, error code), printable
  std::string fault;    // failed: its short name ("crash", "out-of-bounds write", ...)
};

// A kernel as the properties see it.
class KernelHandle {
 public:
  virtual ~KernelHandle() = default;
  virtual const std::string& name() const = 0;
  virtual RunResult run(const RopeCase& c, const RunRequest& r) = 0;
  // What an output of c is held to (the contract's per-pair allowances, or a flat bound).
  virtual Criteria criteria(const RopeCase& c) const = 0;
  // The angle model outputs are judged under (the reference's angles).
  virtual AngleModel angle_model() const = 0;
  // The kernel promises interleaved(x) == P^-1 halfsplit(P x) bit for bit.
  virtual bool bit_exact_layouts() const { return false; }
  // The kernel promises the same bits for a head whatever the call's shape (strides, q and k, sequences, index
  // widths, table kinds): the v3 call-shape properties then require bit identity.
  virtual bool bit_exact_shapes() const { return false; }
  // Whether the handle can give a call an output buffer prefilled with out_fill (external programs cannot).
  virtual bool honours_out_fill() const { return true; }
  // The driver's hooks: an execution of a property starts (shrinking: a smaller candidate of a failure),
  // and ends with its result.
  virtual void begin_execution(uint64_t /*index*/, bool /*shrinking*/) {}
  virtual void end_execution(const rc::detail::CaseResult& /*result*/) {}

  // The flat bound B (u of the storage type) on every pair's error in c: Criteria::case_bound.
  double bound(const RopeCase& c) const { return criteria(c).case_bound(c); }
};

// A kernel called in this process through its entry point (built-ins, mutants, in-process plugins), held to
// a promise (properties/promise.hpp; default: promise_of(impl)): the flat bound of its error model, under its
// angle model, with its contract's identity clause.
class ImplementationHandle : public KernelHandle {
 public:
  explicit ImplementationHandle(const Implementation& impl, std::optional<KernelPromise> promise = std::nullopt);
  const std::string& name() const override { return impl_.name; }
  RunResult run(const RopeCase& c, const RunRequest& r) override;
  Criteria criteria(const RopeCase& c) const override;
  AngleModel angle_model() const override { return promise_.angle_model; }
  bool bit_exact_layouts() const override { return impl_.bit_exact_layouts; }
  bool bit_exact_shapes() const override { return impl_.bit_exact_shapes; }

 private:
  RunResult run_tensor_form(const RopeCase& c, const RunRequest& r, uint32_t version);
  const Implementation& impl_;
  KernelPromise promise_;
};

// Where a property draws from.
struct Scope {
  int64_t max_position = int64_t(1) << 31;  // positions (and position sums) at most this
};

using Property = std::function<void()>;
using PropertyMaker = Property (*)(KernelHandle& k, Dtype d, Layout l, const Scope& s);

// One property of the suite.
struct PropertyDef {
  const char* id;     // "orthogonality", ... (replay files, `cases` manifests)
  const char* row;    // the gate's row: "property: orthogonality"
  const char* what;   // one line: the equation it checks
  PropertyMaker make;
  bool both_layouts;  // needs both layouts of a dtype (run once per dtype, the layout argument ignored)
  bool exact_angles;  // holds for exact angles only (skipped under the fp32 angle model: not shift-invariant)
  bool exportable;    // its cases can be exported (no input depends on an output, no prefilled outputs)
  bool abi_v2 = false;  // its cases are ABI v2 calls: run only where the kernel takes v2_probe_case
  bool gives_tables = false;  // its cases carry cos/sin tables (ABI v3): run on a kernel that takes tables only too
  // The plainest calls of its cases' forms (ABI v3: the tensor form, q and k, implicit positions, int32 and int64
  // indices, ...), or null: a kernel that declines one of them, out of place and in place, is not asked for the
  // property's cases (coverage, said so), rather than declining them one by one.
  std::vector<RopeCase> (*probe)(Dtype d, Layout l) = nullptr;
  bool out_of_place = false;  // it checks what an out-of-place call does: not run on a kernel taking in place only
};
// The probe cases of the v3 properties (suite_tensor.cpp): the inverse rotation, and the call shapes.
std::vector<RopeCase> inverse_probe_cases(Dtype d, Layout l);
std::vector<RopeCase> tensor_probe_cases(Dtype d, Layout l);
std::vector<RopeCase> q_and_k_probe_cases(Dtype d, Layout l);
std::vector<RopeCase> sequences_probe_cases(Dtype d, Layout l);
std::vector<RopeCase> int32_probe_cases(Dtype d, Layout l);
// A plain ABI v2 call (an attention factor of 1/2 on an 8-element head at position 3): a kernel that declines
// it does not take v2 calls, and the v2 properties are not run on it (declining is never a failure).
RopeCase v2_probe_case(Dtype d, Layout l);
// The suite, in the gate's row order.
const std::vector<PropertyDef>& property_set();
const PropertyDef* find_property(std::string_view id);

// ---- the driver ------------------------------------------------------------------------------------------
struct DriverOptions {
  uint64_t seed = 1;
  uint64_t cases = 100;               // executions that ran (passed or failed)
  // Discarded executions (a declined call, a generator's own discard) do not count: the driver goes on to at
  // most cases * (1 + max_discard_ratio) executions in all, as rc::check's maxDiscardRatio does, so a kernel
  // that declines most shapes still gets its properties checked on those it accepts.
  uint64_t max_discard_ratio = kDefaultMaxDiscardRatio;
  bool shrink = true;
  uint64_t max_shrink_tries = 400;    // candidates tried while shrinking, at most
  std::function<bool()> stop;         // true: make no further execution (budget, hangs)
  // Asked once a failing execution is found (shrink set): false leaves it as found (PropertyOutcome::
  // shrink_skipped). The gate: a fault another row has shrunk already.
  std::function<bool()> shrink_this;
};

struct PropertyOutcome {
  uint64_t executions = 0, passed = 0, discarded = 0;
  bool failed = false;
  std::string message;                // the smallest failing execution's description
  uint64_t index = 0;                 // which execution failed first
  std::vector<size_t> shrink_path;    // the shrinks taken from it
  uint64_t shrinks_tried = 0;
  bool shrink_cut = false;            // DriverOptions::stop ended shrinking before the failure was fully shrunk
  bool shrink_capped = false;         // max_shrink_tries ended it
  bool shrink_skipped = false;        // DriverOptions::shrink_this said no
  bool stopped = false;               // DriverOptions::stop ended the run early
  // "property P, DTYPE LAYOUT, seed S, case I, shrink a.b.c"
  std::string reproduce(const PropertyDef& p, Dtype d, Layout l, uint64_t seed) const;
};

PropertyOutcome run_property(const PropertyDef& p, KernelHandle& k, Dtype d, Layout l, const Scope& s,
                             const DriverOptions& o);
// One execution again: case `index` of (seed, p, d, l), then the shrink path. Returns its result.
rc::detail::CaseResult replay_execution(const PropertyDef& p, KernelHandle& k, Dtype d, Layout l, const Scope& s,
                                        uint64_t seed, uint64_t index, const std::vector<size_t>& shrink_path,
                                        uint64_t cases = 100);
// ---- what the properties share ---------------------------------------------------------------------------
// Run the kernel; RC_DISCARD when it declines, RC_FAIL with the handle's text when the call failed.
Bytes run_or_discard(KernelHandle& k, const RopeCase& c, const RunRequest& r = {});
inline Bytes run_in_place_or_discard(KernelHandle& k, const RopeCase& c) { return run_or_discard(k, c, {true, -1}); }
// The same, but a declined call gives nullopt (for a property's second, in-place pass: a kernel without an
// in-place mode still gets its out-of-place pass checked).
std::optional<Bytes> run_if_accepted(KernelHandle& k, const RopeCase& c, const RunRequest& r);

}  // namespace ropecheck::props
