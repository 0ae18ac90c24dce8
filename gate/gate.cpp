#include "gate/gate.hpp"
#include "properties/localisation.hpp"

#include <malloc.h>

#include <csignal>
#include <sys/resource.h>
#include <time.h>

#include <fstream>
#include <iostream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <random>
#include <set>
#include <sstream>

#include "gate/host_handle.hpp"
#include "gate/isolation.hpp"
#include "properties/causes.hpp"
#include "properties/diagnosis.hpp"

namespace ropecheck::gate {

namespace {

using Clock = std::chrono::steady_clock;
using Rng = Mt19937_64;  // std::mt19937_64's sequence (gate/mt64.hpp)

// Failing cases a row keeps for its diagnosis (the richest of them is diagnosed) besides its smallest.
constexpr uint64_t kDiagnosedFailing = 3;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// What the budget counts (docs/gate.md, "The budget"): the CPU seconds of the gate process and of its kernel
// hosts (the live host's CPU clock; hosts that ended were reaped by the gate and are in RUSAGE_CHILDREN), plus
// the seconds kernel calls were blocked (CallResult::blocked_seconds: sleeping, waiting on I/O or a device).
// Time spent waiting for a CPU counts nowhere, so a busy machine does not reach the budget sooner.
class BudgetMeter {
 public:
  BudgetMeter() : self0_(self_cpu()), children0_(children_cpu()) {}
  double used(const KernelHost& host) const {
    return (self_cpu() - self0_) + (children_cpu() - children0_) + host.live_cpu_seconds() + blocked_;
  }
  void add(const CallResult& r) { blocked_ += r.blocked_seconds; }

 private:
  static double self_cpu() {
    timespec ts{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
  }
  static double children_cpu() {
    rusage ru{};
    getrusage(RUSAGE_CHILDREN, &ru);
    return double(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) + double(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
  }
  double self0_, children0_;
  double blocked_ = 0;
};

}  // namespace

namespace {

HostOptions host_options(const GateOptions& opt) {
  HostOptions h;
  h.load_timeout_seconds = std::max(2.0, opt.call_timeout_seconds);
  // CPU time of one host process: generous (threads count), but a kernel that spins after returning ends.
  h.cpu_seconds = 4 * opt.budget_seconds + 60;
  h.input_padding = size_t(opt.input_padding);
  return h;
}

class Gate {
 public:
  Gate(const Implementation& impl, const GateOptions& opt)
      : impl_(impl),
        opt_(opt),
        t0_(Clock::now()),
        max_position_(opt.max_position),
        slice_(opt.slice),
        host_(KernelSource{impl.library, impl.fn, impl.host_fd}, host_options(opt)),
        property_handle_(impl.name, [this](const RopeCase& c, bool in_place) { return property_call(c, in_place); },
                         [this](const RopeCase& c) { return property_criteria(c); }, opt.angle_model,
                         [this] { return aborted_ || over_budget(); }) {
    property_handle_.set_send_filter([this](const RopeCase& c, bool in_place) { return why_not_sent(c, in_place); });
  }

  GateResult run();

 private:
  struct Outcome {
    CaseVerdict v;
    CallResult call;
    std::optional<RopeCase> sent;  // the case as it was sent, when that is not the asked one (SendWays)
  };

  CheckRow& row(const std::string& name, const std::string& what) {
    for (auto& r : res_.rows)
      if (r.name == name) return r;
    res_.rows.push_back({});
    res_.rows.back().name = name;
    res_.rows.back().what = what;
    return res_.rows.back();
  }

  void progress(const std::string& s) {
    if (!opt_.quiet)
      std::fprintf(stderr, "[gate %6.1fs, budget %6.1fs] %s\n", seconds_since(t0_), budget_used(), s.c_str());
  }

  // The budget's count so far (BudgetMeter): CPU seconds of the gate and its hosts plus blocked call time.
  double budget_used() const { return meter_.used(host_); }
  // What the part of the run since the last charge counted, under its name (GateResult::cost).
  void charge(const std::string& part) {
    const double now = budget_used();
    res_.cost.push_back({part, now - charged_});
    charged_ = now;
  }

  // The budget caps the whole run: once reached, no further kernel call starts (a call already running
  // ends within its --call-timeout).
  // Whether the budget's count has reached `limit`. Asked before every call, so the count (three system
  // calls) is read at most every 10 ms of wall time; in between it is estimated from above as the last
  // reading plus 4 x the wall time since (the gate's thread, the host's and blocked time each advance at
  // most as fast as the clock; a kernel running more threads gets at most 10 ms of them ahead). Near the
  // limit the estimate reaches it first, and the count is read before every call.
  bool count_reached(double limit) {
    const Clock::time_point now = Clock::now();
    const double since = std::chrono::duration<double>(now - last_reading_at_).count();
    if (since < 1e-2 && last_reading_ + 4 * since < limit) return false;
    last_reading_ = budget_used();
    last_reading_at_ = now;
    return last_reading_ >= limit;
  }

  bool over_budget() {
    if (budget_reached_) return true;
    if (count_reached(opt_.budget_seconds)) {
      budget_reached_ = true;
      progress(fmt::format("the budget ({:g} s) was reached: the remaining calls are not made", opt_.budget_seconds));
    }
    return budget_reached_;
  }

  // One call in the kernel host. A host that cannot be started again after a crash makes the call a crash.
  CallResult call(const RopeCase& c, bool in_place) {
    try {
      CallResult r = host_.call(c, in_place, opt_.call_timeout_seconds);
      meter_.add(r);
      end_if_host_gone();
      return r;
    } catch (const LoadError& e) {
      CallResult r;
      r.status = CallStatus::crashed;
      r.host_error = e.what();
      end_if_host_gone();
      return r;
    }
  }
  // A process serving the calls (Python's check, not isolated) that hung or ended cannot be restarted: no call is
  // made after it (each would be "could not be loaded again"); the row of the call that did it has its failure, the
  // rows after it say why they did not run.
  void end_if_host_gone() {
    if (aborted_ || host_.cannot_call().empty()) return;
    aborted_ = true;
    abort_why_ = host_.cannot_call() + " (in process nothing can stop a call: isolated=True makes a hang or a crash "
                 "one failing call)";
    progress(abort_why_ + ": the remaining cases are not run");
  }

  // A call a row makes, counted in the run's coverage (reruns for shrinking and diagnosis are not): what the
  // case `asked` carried to the kernel as it was sent (`sent`: another form of it, a table the gate built).
  void count(const RopeCase& asked, const RopeCase& sent, bool in_place, const CallResult& r) {
    res_.coverage.add(asked, in_place, r.status != CallStatus::declined, model(), &sent);
  }
  static CallResult not_made(std::string why) {
    CallResult r;
    r.status = CallStatus::declined;
    r.rc = RC_UNSUPPORTED;
    r.not_sent = std::move(why);
    return r;
  }
  // A call in one of a case's ways, unless --supports or the ABI versions say it is not to be made.
  CallResult call_unless_not_sent(const RopeCase& c, bool in_place) {
    if (std::string why = why_not_sent(c, in_place); !why.empty()) return not_made(why);
    return call(c, in_place);
  }

  // A property's call. A kernel that takes tables only gets the case with a table the gate builds, of the kind
  // that is a function of the case (case_turn: its replay gets the same), in the first of its ways it does not
  // decline, judged as the case asked under property_criteria.
  CallResult property_call(const RopeCase& c, bool in_place) {
    std::optional<RopeCase> sent;
    bool ip = in_place;
    CallResult r = gate::property_call(
        c, in_place, host_.abi(), opt_.contract, opt_.angle_model,
        [this](const RopeCase& s, bool sip) { return call_unless_not_sent(s, sip); }, &sent, &ip);
    if (sent) count(c, *sent, ip, r);
    return r;
  }
  // What a property's output is held to: the contract's clauses, with a table's rounding in the cos-sin clause
  // when the gate gives the call a table (property_contract).
  Criteria property_criteria(const RopeCase& c) const {
    return case_criteria(opt_.error_model, c, property_contract(c, host_.abi(), opt_.contract), opt_.tolerance);
  }

  // Why a call is not made (empty: it is): it uses a feature outside --supports. Never a failure, never the
  // kernel's decline: the row counts it under this reason (CheckRow::not_sent).
  std::string why_not_sent(const RopeCase& c, bool in_place) const {
    if (opt_.supports && !opt_.supports->contains(features_of(c, in_place))) return "outside --supports";
    // No ABI version the kernel speaks expresses the call (core/abi_versions.hpp).
    if (host_.abi().version_for(c.min_abi_version(), host_.features_declared()) == 0)
      return host_.abi().why_not_sent(c.min_abi_version());
    return "";
  }

  // The case alone in a fresh host process (the row's own host keeps its state).
  CallResult call_isolated_like(const RopeCase& c, bool in_place = false) {
    try {
      CallResult r = host_.call_alone(c, in_place, opt_.call_timeout_seconds);
      meter_.add(r);
      end_if_host_gone();
      return r;  // (its CPU: RUSAGE_CHILDREN once it is reaped)
    } catch (const LoadError& e) {
      CallResult r;
      r.status = CallStatus::crashed;
      r.host_error = e.what();
      end_if_host_gone();
      return r;
    }
  }

  const RopeCase* model() const { return opt_.model ? &*opt_.model : nullptr; }
  const RotarySlice* slice() const { return slice_ ? &*slice_ : nullptr; }

  Criteria criteria(const RopeCase& c) const { return case_criteria(opt_.error_model, c, opt_.contract, opt_.tolerance); }
  Criteria criteria_for_dtype(Dtype d) const {
    RopeCase c;
    c.dtype = d;
    return criteria(c);
  }

  CaseRecord record(const CheckRow& r, const RopeCase& c, bool in_place, const Criteria& cr,
                    const std::string& msg) const {
    CaseRecord rec;
    rec.c = c;
    rec.in_place = in_place;
    rec.angle_model = opt_.angle_model;
    rec.bound = cr.case_bound(c);
    rec.check = r.name;
    rec.failure = msg;
    rec.contract = opt_.contract;
    rec.tolerance = cr.flat;
    rec.input_padding = opt_.input_padding;
    return rec;
  }

  // How the sequence and repeat rows call (their calls are out of place): in place for a kernel that takes in-place
  // calls only (vLLM's: its stale state is checked all the same), as run_case and the property rows do.
  bool stateful_in_place() const { return host_.abi().in_place_only; }

  // The table kinds a kernel that takes tables only is given in turn, case after case (the turn of a case that
  // needs a table).
  uint64_t next_turn(const RopeCase& asked) {
    return host_.abi().tables_only && !asked.table ? table_turn_++ : table_turn_;
  }

  // Call and judge one case, attributing it to a row. Returns the outcome.
  // in_bias: the call's pairs join the radial bias check (docs/gate.md). The repeat row's 300 copies of one
  // case are not independent clusters, and the large row's prefill would outweigh every other row's pairs:
  // both stay out of it (their pairs are in the error decomposition all the same).
  Outcome run_case(CheckRow& r, const RopeCase& asked, bool asked_in_place, bool in_bias = true,
                   GivenRows rows = GivenRows::renumbered) {
    // A kernel that takes in-place calls only (vLLM's) gets every case in place: its out-of-place output would be
    // what the in-place call gives, and declining it would check nothing (the property rows do the same).
    const bool in_place = asked_in_place || host_.abi().in_place_only;
    Outcome o;
    if (aborted_) return o;
    if (over_budget()) {
      ++not_run_[r.name];
      return o;
    }
    // In the first of the case's ways the kernel does not decline, the way that was taken last tried first.
    SendWays ways(asked, host_.abi(), opt_.contract, opt_.angle_model, next_turn(asked), rows);
    const RopeCase* sent = nullptr;
    size_t way = 0;
    o.call = call_in_ways(ways, [&](const RopeCase& w) { return call_unless_not_sent(w, in_place); },
                          taken_way_ % std::max<size_t>(1, ways.size()), &sent, &way);
    if (!sent) {
      ++r.not_sent[o.call.not_sent];
      return o;
    }
    if (o.call.status != CallStatus::declined) taken_way_ = way;
    if (sent != &asked) o.sent = *sent;
    const RopeCase& c = *sent;
    const Criteria cr = criteria(c);
    count(asked, c, in_place, o.call);
    ++res_.calls;
    if (o.call.status == CallStatus::ok) ++ok_calls_;
    o.v = judge_call(c, in_place, opt_.angle_model, cr, o.call);
    if (!o.v.accepted) {
      ++r.declined;
      return o;
    }
    ++res_.accepted;
    ++r.cases;
    r.ran = true;
    if (o.v.judged) {
      std::map<Dtype, BiasSums> unused;
      res_.add(r, c, o.v.judgement, in_bias ? bias_ : unused);
    }
    if (!o.v.pass) record_failure(r, record(r, c, in_place, cr, o.v.message), o.v.fault);
    if (o.call.status == CallStatus::hung && ++hangs_ >= 2) {
      aborted_ = true;
      progress("the kernel hung twice: the remaining cases are not run");
    }
    return o;
  }

  // The probes found no ABI version the kernel speaks, and no call made since returned RC_OK.
  bool rejected_everything() const {
    return !aborted_ && ok_calls_ == 0 && !host_.abi().refusal().empty();
  }

  void record_failure(CheckRow& r, CaseRecord rec, const std::string& fault = "") {
    rec.fault = fault;
    ++r.failed;
    r.failed_check = true;
    ++r.faults[!fault.empty() ? fault : rec.property.empty() ? "accuracy" : "property"];
    // A fault (crash, hang, memory) is shown whatever else the row found: its case is the row's smallest
    // until a smaller case with a fault replaces it.
    const bool has_fault = !fault.empty();
    const bool smallest_has_fault = r.smallest && !r.smallest_fault.empty();
    if (!r.smallest || (has_fault && !smallest_has_fault) ||
        (has_fault == smallest_has_fault && rec.c.n_elements() < r.smallest->c.n_elements())) {
      r.smallest = rec;
      r.smallest_message = rec.failure;
      r.smallest_fault = fault;
    }
    // Every failure for re-judging a suggestion (within 8 MiB of inputs a row).
    size_t kept = 0;
    for (const CaseRecord& f : r.rejudge) kept += f.c.input.size() + (f.c.tensor ? f.c.tensor->k_input.size() : 0);
    if (kept + rec.c.input.size() <= (size_t(8) << 20)) r.rejudge.push_back(rec);
    else ++r.rejudge_dropped;
    // Three are kept whatever --failing-cases says: the diagnosis reads the richest of them; more are kept only to
    // be written.
    if (r.failing.size() < std::max<uint64_t>(kDiagnosedFailing, opt_.failing_cases)) r.failing.push_back(std::move(rec));
  }

  // What a property's smallest failing execution shows: its fault, else the first of its calls that fails
  // alone against the reference, diagnosed; else the property alone is violated.
  std::string diagnose_property(const props::PropertyDef& p, const std::vector<HandleCall>& calls,
                                const std::string& fault, const std::string& message, std::string* suggestion) {
    suggestion->clear();
    if (!fault.empty()) return fault + ": " + message.substr(0, message.find('\n'));
    size_t judged = 0;
    for (const HandleCall& hc : calls) {
      if (aborted_ || over_budget()) return "not diagnosed: the budget was reached";
      // The call as the property made it (with the gate's table for a kernel that takes tables only), judged
      // alone against the reference (a table call: against its table as given).
      std::optional<RopeCase> sent;
      bool in_place = hc.in_place;
      const CallResult res = gate::property_call(
          hc.c, hc.in_place, host_.abi(), opt_.contract, opt_.angle_model,
          [this](const RopeCase& s, bool ip) { return call_unless_not_sent(s, ip); }, &sent, &in_place);
      if (!sent) continue;
      const RopeCase& c = *sent;
      const Criteria cr = criteria(c);
      const CaseVerdict v = judge_call(c, in_place, opt_.angle_model, cr, res);
      if (v.accepted && !v.pass) return diagnose_call(c, opt_.angle_model, cr, v, res, suggestion);
      judged += v.accepted;
    }
    if (judged < calls.size())
      return fmt::format("property {} violated ({} of its {} call(s) judged alone, each within its allowance)", p.id,
                         judged, calls.size());
    return fmt::format("property {} violated (each of its {} call(s) alone is within its allowance)", p.id,
                       calls.size());
  }

  // How many of the failing cases a row kept (its smallest and the others; for a property row, the property run again,
  // every execution) still fail when judged under contract w: each re-run in the row's host (not counted in the
  // coverage).
  // `of`: how many were judged. What a suggestion ("would pass with --contract w") must leave at 0 to be printed.
  uint64_t failing_under(const CheckRow& r, const Contract& w, uint64_t& of);
  // Every row's suggestion, re-judged on the row's failing cases: one that leaves some failing is not printed (the
  // diagnosis says so instead).
  void verify_suggestions();

  // Try to shrink a row's smallest failing case to one token, then one head.
  void shrink(CheckRow& r);
  // Name what the kernel most likely computes on the row's smallest failing case.
  void diagnose_row(CheckRow& r);

  void run_matrix();
  void run_specials();
  void run_long_positions();
  void run_feature_rows(int version);  // the "v2: ..." (2), "v3: ..." (3) or "v4: ..." (4) rows
  void run_properties();
  bool table_probe_taken(Dtype d, Layout l, CheckRow& r);
  bool probe_taken(const RopeCase& probe, CheckRow& r);
  void run_sequences();
  void run_repeat();
  void run_large();
  void run_random();
  void find_rotary_slice();
  void find_position_limit();
  void bisect_positions(const std::function<CallResult(const RopeCase&)>& probe);
  void finish_sandbox();
  void finish_bias();
  void finish_not_sent();
  void save_files();

  const Implementation& impl_;
  const GateOptions& opt_;
  Clock::time_point t0_;
  BudgetMeter meter_;
  double charged_ = 0;  // the budget's count at the last charge()
  double last_reading_ = 0;  // over_budget's last reading of the count, and when
  Clock::time_point last_reading_at_{};
  GateResult res_;
  std::map<Dtype, BiasSums> bias_;
  bool aborted_ = false;
  std::string abort_why_;  // why no call is made any more, when not two hangs (end_if_host_gone)
  bool budget_reached_ = false;
  std::map<std::string, uint64_t> not_run_;  // per row: calls the budget cut
  std::vector<std::string> budget_cuts_;     // what the budget cut besides calls (random phase, shrinking, ...)
  int hangs_ = 0;
  uint64_t ok_calls_ = 0;  // calls of run_case that returned RC_OK
  uint64_t table_turn_ = 0;  // SendWays: whose turn among the table kinds the kernel takes
  size_t taken_way_ = 0;     // the way of the last case the kernel took (run_case tries it first)
  std::vector<std::pair<Dtype, Layout>> accepted_combos_;
  // The largest position the rows give: --max-position (or the model's context), or below it the largest one the
  // kernel takes (find_position_limit).
  int64_t max_position_;
  // The rotated slice every row's cases take: --rotary-dim / --rotary-pct, or the one the probes found
  // (find_rotary_slice); none: the rows' own.
  std::optional<RotarySlice> slice_;
  KernelHost host_;
  std::map<std::string, std::string> shrunk_faults_;  // a fault's description -> the property row that shrank it
  HostHandle property_handle_;  // the kernel host as the property engine's kernel
};


void Gate::shrink(CheckRow& r) {
  if (!r.smallest || aborted_ || !r.smallest->property.empty()) return;  // a property is not one call
  if (r.smallest->c.tensor) return;  // (a tensor-form call's k and sequences are not sliced: shown as it failed)
  CaseRecord best = *r.smallest;
  if (r.smallest_fault == "hang") return;  // a hang costs a timeout per try
  bool cut = false;
  auto try_case = [&](const RopeCase& c) -> bool {
    if (over_budget()) {
      cut = true;
      return false;
    }
    const Criteria cr = criteria(c);
    const CallResult res = call(c, best.in_place);
    const CaseVerdict v = judge_call(c, best.in_place, opt_.angle_model, cr, res);
    // Keep the kind of failure: a crash shrinks to a smaller crash, not to an accuracy failure.
    if (v.accepted && !v.pass && v.fault == r.smallest_fault) {
      best = record(r, c, best.in_place, cr, v.message);
      return true;
    }
    return false;
  };
  auto slice = [](const RopeCase& c, size_t t0, size_t nt, size_t h0, size_t nh) {
    RopeCase s = c;
    s.positions.clear();  // tokens t0 .. t0+nt-1 on every axis (axis-major)
    for (uint32_t ax = 0; ax < c.n_pos_axes; ++ax)
      for (size_t t = t0; t < t0 + nt; ++t) s.positions.push_back(c.position(t, ax));
    s.n_heads = uint32_t(nh);
    s.input.assign(s.n_bytes(), 0);
    const size_t es = dtype_size(c.dtype);
    for (size_t t = 0; t < nt; ++t)
      for (size_t h = 0; h < nh; ++h)
        std::memcpy(s.input.data() + ((t * nh + h) * c.head_dim) * es,
                    c.input.data() + (((t0 + t) * c.n_heads + h0 + h) * c.head_dim) * es, c.head_dim * es);
    return s;
  };
  // Many tokens (the large row): halve while a half still fails, then at most 16 single tokens, spread.
  while (best.c.n_tokens() > 8) {
    const RopeCase c = best.c;
    const size_t half = c.n_tokens() / 2;
    if (!try_case(slice(c, 0, half, 0, c.n_heads)) && !try_case(slice(c, half, c.n_tokens() - half, 0, c.n_heads)))
      break;
  }
  if (best.c.n_tokens() > 1) {
    const RopeCase c = best.c;
    const size_t n = c.n_tokens(), tries = std::min<size_t>(n, 16);
    for (size_t k = 0; k < tries; ++k)
      if (try_case(slice(c, k * n / tries, 1, 0, c.n_heads))) break;
  }
  if (best.c.n_heads > 1) {
    const RopeCase c = best.c;
    for (size_t h = 0; h < c.n_heads; ++h)
      if (try_case(slice(c, 0, c.n_tokens(), h, 1))) break;
  }
  r.smallest = best;
  r.smallest_message = best.failure;
  if (cut) budget_cuts_.push_back("shrinking the smallest failing case of '" + r.name + "' (not fully shrunk)");
}

uint64_t Gate::failing_under(const CheckRow& r, const Contract& w, uint64_t& of) {
  of = 0;
  uint64_t failing = 0;
  std::vector<const CaseRecord*> recs;  // (the smallest, shrunk, and every failure kept)
  if (r.smallest) recs.push_back(&*r.smallest);
  for (const CaseRecord& f : r.rejudge) recs.push_back(&f);
  std::set<std::string> replayed;  // (a property's execution once)
  for (const CaseRecord* f : recs) {
    if (aborted_ || over_budget()) break;
    if (!f->fault_free()) continue;
    if (!f->property.empty()) {
      const props::PropertyDef* p = props::find_property(f->property);
      const std::string key = fmt::format("{}/{}/{}", f->property, to_string(f->c.dtype), to_string(f->property_layout));
      if (!p || !replayed.insert(key).second) continue;
      HostHandle h(
          impl_.name,
          [this](const RopeCase& c, bool ip) {
            return gate::property_call(c, ip, host_.abi(), opt_.contract, opt_.angle_model,
                                       [this](const RopeCase& s, bool sip) { return call_unless_not_sent(s, sip); });
          },
          [&](const RopeCase& c) {
            return case_criteria(opt_.error_model, c, property_contract(c, host_.abi(), w), opt_.tolerance);
          },
          opt_.angle_model, [this] { return aborted_ || over_budget(); });
      h.set_send_filter([this](const RopeCase& c, bool ip) { return why_not_sent(c, ip); });
      // The property run again under w, every execution (the one that failed, and those after it that the run
      // stopped before), unshrunk: the row passes under w only if none fails.
      props::DriverOptions drv;
      drv.seed = f->property_seed;
      drv.cases = f->property_cases;
      drv.max_discard_ratio = f->property_max_discard_ratio;
      drv.shrink = false;
      drv.stop = [this] { return aborted_ || over_budget(); };
      const props::PropertyOutcome o = props::run_property(*p, h, f->c.dtype, f->property_layout,
                                                           props::Scope{f->property_max_position}, drv);
      if (o.stopped || (o.passed == 0 && !o.failed)) continue;
      ++of;
      failing += o.failed;
      continue;
    }
    const Criteria cr = case_criteria(opt_.error_model, f->c, w, opt_.tolerance);
    const CaseVerdict v = judge_call(f->c, f->in_place, opt_.angle_model, cr, call(f->c, f->in_place));
    if (!v.accepted) continue;
    ++of;
    failing += !v.pass;
  }
  return failing;
}

void Gate::verify_suggestions() {
  for (CheckRow& r : res_.rows) {
    if (!r.failed_check || r.suggestion.empty()) continue;
    std::string err;
    const std::optional<Contract> w = parse_contract(r.suggestion, &err);
    uint64_t of = 0;
    const uint64_t left = w ? failing_under(r, *w, of) : 1;
    if (w && left == 0 && of > 0 && r.rejudge_dropped == 0) continue;  // verified on every failure
    // Not printed: the suggestion of the row's diagnosis is replaced by what re-judging found.
    const std::string would = "; would pass with --contract " + r.suggestion;
    const std::string said =
        of == 0 ? fmt::format("; --contract {} could not be re-judged on this row's failing cases: not suggested",
                              r.suggestion)
        : left ? fmt::format("; --contract {} re-judged on this row's {} failing case(s) leaves {} failing: not "
                             "suggested",
                             r.suggestion, of, left)
               : fmt::format("; --contract {} passes the {} failing case(s) of this row re-judged, {} not kept: not "
                             "suggested",
                             r.suggestion, of, r.rejudge_dropped);
    for (std::string* d : {&r.diagnosis, r.smallest ? &r.smallest->diagnosis : nullptr})
      if (d)
        if (const size_t at = d->rfind(would); at != std::string::npos) d->replace(at, would.size(), said);
    for (CaseRecord& f : r.failing)
      if (const size_t at = f.diagnosis.rfind(would); at != std::string::npos) f.diagnosis.replace(at, would.size(), said);
    r.suggestion.clear();
  }
}

void Gate::diagnose_row(CheckRow& r) {
  if (!r.smallest) return;
  if (!r.diagnosis.empty()) {  // the row diagnosed its own failure (sequence, repeat)
    r.smallest->diagnosis = r.diagnosis;
    for (CaseRecord& f : r.failing) f.diagnosis = r.diagnosis;
    return;
  }
  if (aborted_ && r.smallest_fault.empty()) return;  // no more calls after two hangs
  // The most evidence: the largest failing case the row kept (before shrinking), else the smallest.
  // (At most 1 << 16 elements: the diagnosis measures every pair against each candidate explanation.)
  const CaseRecord* richest = &*r.smallest;
  for (size_t k = 0; k < std::min<size_t>(r.failing.size(), kDiagnosedFailing); ++k)
    if (const CaseRecord& f = r.failing[k]; f.property.empty() && f.c.n_elements() > richest->c.n_elements() && f.c.n_elements() <= (size_t(1) << 16))
      richest = &f;
  const CaseRecord& rec = *richest;
  if (!r.smallest->property.empty()) {
    r.diagnosis = r.smallest->diagnosis;  // diagnose_property's, made when the failure was found
    r.suggestion = r.smallest->suggestion;
  } else if (r.smallest_fault == "hang") {
    r.diagnosis = "hang: the kernel did not return within the timeout";
  } else if (!r.smallest_fault.empty()) {
    r.diagnosis = r.smallest_fault + ": " + r.smallest->failure.substr(0, r.smallest->failure.find('\n'));
  } else if (over_budget()) {
    r.diagnosis = "not diagnosed: the budget was reached";
    budget_cuts_.push_back("the diagnosis of '" + r.name + "'");
  } else {
    // Rerun the smallest case once to look at its output (the rows keep no outputs).
    const Criteria cr = criteria(rec.c);
    const CallResult res = call(rec.c, rec.in_place);
    const CaseVerdict v = judge_call(rec.c, rec.in_place, opt_.angle_model, cr, res);
    // The same case in a fresh process: a kernel that fails only after other calls keeps state across them.
    const CallResult alone = call_isolated_like(rec.c, rec.in_place);
    const CaseVerdict va = judge_call(rec.c, rec.in_place, opt_.angle_model, cr, alone);
    const bool fails_alone = va.accepted && !va.pass;
    if (v.accepted && !v.pass && !fails_alone && va.accepted)
      r.diagnosis = "state across calls: the case fails in the long-running host process and passes in a fresh one "
                    "(a call counter, or a cache kept across calls)";
    else if (v.accepted && !v.pass)
      r.diagnosis = diagnose_call(rec.c, opt_.angle_model, cr, v, res, &r.suggestion);
    else if (fails_alone)
      r.diagnosis = diagnose_call(rec.c, opt_.angle_model, cr, va, alone, &r.suggestion);
    if (const CaseVerdict& w = v.accepted && !v.pass ? v : va; w.judged && !w.pass)
      r.where = localise(rec.c, w.judgement, w.has_k ? &w.k_judgement : nullptr, w.angles).text();
    else
      r.diagnosis = "not reproduced on a rerun, alone or after other calls: the output depends on the calls before "
                    "it (a stale cache or counter) or is not deterministic";
    if (rec.in_place && v.accepted && !v.pass) {
      // In place only? The same call out of place.
      if (std::string a = in_place_aliasing(rec.c, opt_.angle_model, cr, call(rec.c, false)); !a.empty()) {
        r.diagnosis = std::move(a);
        r.suggestion.clear();
      }
    }
  }
  r.smallest->diagnosis = r.diagnosis;
  for (CaseRecord& f : r.failing) f.diagnosis = r.diagnosis;
}

void Gate::run_matrix() {
  for (Dtype d : opt_.dtypes)
    for (Layout l : opt_.layouts) {
      if (!impl_.supports(d) || !impl_.supports(l)) continue;
      const std::string name = fmt::format("matrix {} {}", to_string(d), to_string(l));
      CheckRow& r = row(name, row_what(name, opt_.contract));
      std::vector<bool> ip;
      const auto cases = systematic_cases(d, l, max_position_, opt_.seed, &ip, model(), slice());
      for (size_t k = 0; k < cases.size(); ++k) run_case(r, cases[k], ip[k]);
      if (r.ran) accepted_combos_.push_back({d, l});
      else if (budget_reached_ && r.declined == 0) r.note = "not run: the budget was reached";
      else if (!aborted_ && r.declined > 0) r.note = "every case declined (RC_UNSUPPORTED)";
    }
}

void Gate::run_feature_rows(int version) {
  if (opt_.model) return;  // a model's run tests that model's configuration: every row already carries its features
  // One row per ABI v2 (v3) feature, over every accepted dtype x layout. Declining is fine (a v1 kernel declines
  // every v2 call); the row says which cases were declined.
  std::map<std::string, std::vector<std::string>> declined;
  std::vector<std::string> order;
  for (const auto& [d, l] : accepted_combos_)
    for (const V2Case& v : version == 2   ? v2_feature_cases(d, l, max_position_, opt_.seed)
                           : version == 3 ? v3_feature_cases(d, l, max_position_, opt_.seed)
                                          : v4_feature_cases(d, l, max_position_, opt_.seed)) {
      const std::string name = fmt::format("v{}: {}", version, v.feature);
      if (std::find(order.begin(), order.end(), name) == order.end()) order.push_back(name);
      CheckRow& r = row(name, row_what(name, opt_.contract));
      const uint64_t before = r.declined;
      run_case(r, v.c, v.in_place);
      if (r.declined > before) {
        auto& list = declined[name];
        if (std::find(list.begin(), list.end(), v.what) == list.end()) list.push_back(v.what);
      }
    }
  for (const std::string& name : order) {
    CheckRow& r = row(name, row_what(name, opt_.contract));
    if (!r.ran && r.declined > 0 && !aborted_)
      r.note = fmt::format("declined (RC_UNSUPPORTED): the kernel does not implement this ABI v{} feature", version);
    else if (r.declined > 0)
      r.note = fmt::format("declined: {}", fmt::join(declined[name], "; "));
  }
}

void Gate::run_specials() {
  CheckRow& r = row("special values", row_what("special values", opt_.contract));
  for (const auto& [d, l] : accepted_combos_) {
    const auto cases = special_value_cases(d, l, opt_.seed, max_position_, model(), slice());
    for (size_t k = 0; k < cases.size(); ++k) run_case(r, cases[k], k % 2 == 1);
  }
  if (!r.ran && !aborted_) r.note = budget_reached_ ? "not run: the budget was reached" : "no accepted dtype/layout";
}

// Positions far past the other rows' (docs/gate.md, "Positions"): f32-inexact ones within int32, then beyond
// int32 up to the long maximum, over every accepted dtype x layout. A kernel that takes int32 positions declines
// the latter; one that rounds positions to f32 or truncates them to 32 bits fails. Out of the bias check: at
// these angles an angle clause's second-order radial share outweighs the rounding the check is about.
void Gate::run_long_positions() {
  CheckRow& r = row("long positions", row_what("long positions", opt_.contract));
  const int64_t top = opt_.long_max_position;
  if (top < kLongPositionsFrom) {
    r.note = fmt::format("not run: positions are bounded to {} by {} (this row's start at 2^25 + 1)", top,
                         opt_.long_positions_bound.empty() ? "--max-position" : opt_.long_positions_bound);
    return;
  }
  // A kernel that takes tables only: the positions index its table as they are (a sparse table: only the rows of
  // the call's positions are there), on narrow rows, up to the position a table of them can reach.
  const bool tables = host_.abi().tables_only;
  const int64_t reached = tables ? std::min(top, long_table_max_position(model(), slice())) : top;
  // The declined calls counted by the positions they held (not a cause: a call may be declined for anything else).
  uint64_t sent[2] = {0, 0}, declined[2] = {0, 0};  // [beyond int32]
  for (const auto& [d, l] : accepted_combos_)
    for (const auto& [c, in_place] : long_position_cases(d, l, top, opt_.seed, model(), tables, slice())) {
      const uint64_t before = r.declined, made = r.cases + r.declined;
      run_case(r, c, in_place, /*in_bias=*/false, tables ? GivenRows::sparse : GivenRows::renumbered);
      const int beyond = features_of(c, in_place).has(Feature::positions_beyond_int32);
      sent[beyond] += r.cases + r.declined - made;
      declined[beyond] += r.declined - before;
    }
  std::string note = fmt::format("positions {} .. {}{}", kLongPositionsFrom, reached,
                                 opt_.long_positions_bound.empty() ? "" : " (bounded by " + opt_.long_positions_bound + ")");
  if (tables)
    note += fmt::format("; the kernel takes tables only: each call's positions index a sparse table (the rows of its "
                        "positions only){}, up to {} (what such a table's address space holds)",
                        model()   ? ""
                        : slice() ? fmt::format(", in the rotated slice ({})", slice_->describe())
                                  : fmt::format(", at rotary_dim {}", kLongTableRotaryDim),
                        reached);
  if (declined[0] + declined[1]) {
    std::vector<std::string> parts;
    if (declined[0]) parts.push_back(fmt::format("{} of the {} call(s) with positions below 2^31", declined[0], sent[0]));
    if (declined[1])
      parts.push_back(fmt::format("{} of the {} call(s) with positions beyond int32", declined[1], sent[1]));
    note += fmt::format("; declined (RC_UNSUPPORTED): {}", fmt::join(parts, ", "));
  }
  if (opt_.tolerance.empty() && (opt_.contract.angles == Contract::Angles::f32 || opt_.error_model.angle_f32))
    note += "; under angles=f32 a pair whose K ulps of f32 at |angle| reach pi has no direction to keep: there these "
            "cases test the pair's length only";
  if (!r.ran && !aborted_ && budget_reached_) note = "not run: the budget was reached";
  else if (!r.ran && !aborted_ && r.declined == 0 && r.not_sent.empty()) note = "no accepted dtype/layout";
  r.note = note;
}

// The suite's properties (properties/engine.hpp), each on every accepted dtype x layout, driven by the engine:
// --property-cases executions each, seeded from --seed, a failure shrunk by RapidCheck to its smallest
// failing execution, which the row shows and the replay file reproduces.
void Gate::run_properties() {
  const props::Scope scope{max_position_};
  props::DriverOptions drv;
  drv.seed = opt_.seed;
  drv.cases = opt_.property_cases;
  drv.max_shrink_tries = opt_.shrink_tries;
  drv.stop = [this] { return aborted_ || over_budget(); };
  for (const props::PropertyDef& p : props::property_set()) {
    CheckRow& r = row(p.row, row_what(p.row, opt_.contract));
    if (opt_.model)
      r.note = "not in the model's configuration: generic shapes (the property generators cannot take a model)";
    else if (slice_)
      r.note = "not in the rotated slice (" + slice_->describe() + "): generic shapes (the property generators "
               "cannot take a slice)";
    if (p.exact_angles && opt_.angle_model != AngleModel::exact) {
      r.note = "skipped: the fp32 angle model's angles are not shift-invariant";
      continue;
    }
    if (std::string_view(p.id) == "int32-positions" && host_.abi().tensor_form_only &&
        host_.abi().tensor_form.pos == PositionForm::int32) {
      r.note = "not run: the kernel takes int32 positions only (its int64 calls go as int32: nothing to compare)";
      continue;
    }
    // A kernel that takes caller-given tables only gets each call with a table the gate builds (property_call).
    if (p.out_of_place && host_.abi().in_place_only) {
      r.note = "not run: the kernel takes in-place calls only";
      continue;
    }
    std::vector<std::pair<Dtype, Layout>> combos;
    for (const auto& [d, l] : accepted_combos_) {
      if (!p.both_layouts) combos.push_back({d, l});
      else if (l == Layout::interleaved &&
               std::count(accepted_combos_.begin(), accepted_combos_.end(), std::pair{d, Layout::half_split}))
        combos.push_back({d, l});
    }
    for (const auto& [d, l] : combos) {
      if (aborted_) continue;  // (two hangs: the row says "not run: the kernel hung twice", not the budget)
      if (over_budget()) {
        ++not_run_[r.name];
        continue;
      }
      // A kernel whose ABI versions cannot express a v2 call is not asked for the v2 properties' cases.
      if (p.abi_v2 && host_.abi().version_for(2, host_.features_declared()) == 0) {
        r.note = "not run: " + host_.abi().why_not_sent(2);
        continue;
      }
      // A property whose cases carry tables, on a kernel that takes tables only: it needs two table kinds.
      if (p.gives_tables && host_.abi().tables_only) {
        int kinds = 0;
        for (TableKind k : {TableKind::cos_sin_2, TableKind::cos_sin_cat, TableKind::cos_sin_full})
          kinds += host_.abi().takes_table(k);
        if (kinds < 2) {
          r.note = "not run: the kernel takes one kind of cos/sin table";
          continue;
        }
      } else if (p.gives_tables && !table_probe_taken(d, l, r)) {
        continue;
      }
      if (p.probe) {
        bool taken = true;
        for (const RopeCase& probe : p.probe(d, l)) taken = taken && probe_taken(probe, r);
        if (!taken) continue;
      }
      // A kernel that declines a plain v2 call is not asked for the v2 properties' cases (with --supports, the
      // calls outside it are not made: the probe is not needed). A property with probes of its own (the v3 call
      // shapes) was asked its plainest calls above instead: a kernel that takes the tensor form but no attention
      // factor (FlashInfer's apply_rope_pos_ids) runs them.
      if (p.abi_v2 && !p.probe && !(p.gives_tables && host_.abi().tables_only) &&
          why_not_sent(props::v2_probe_case(d, l), false).empty()) {
        const uint64_t before = property_handle_.calls(), accepted_before = property_handle_.accepted_calls();
        const bool declined =
            property_handle_.run(props::v2_probe_case(d, l), {}).status == props::RunResult::Status::declined;
        res_.calls += property_handle_.calls() - before;
        res_.accepted += property_handle_.accepted_calls() - accepted_before;
        if (declined) {
          ++r.declined;
          r.note = "not run: the kernel declines ABI v2 calls (RC_UNSUPPORTED)";
          continue;
        }
      }
      const uint64_t calls_before = property_handle_.calls(), accepted_before = property_handle_.accepted_calls();
      const std::map<std::string, uint64_t> unsent_before = property_handle_.unsent_executions();
      // A row's first failure is shrunk; another dtype x layout that fails too is counted, not shrunk again.
      props::DriverOptions dl = drv;
      dl.shrink = !r.failed_check && opt_.shrink_tries > 0;
      // A fault is shrunk once: a failure that is a fault an earlier row shrank (the same description) is kept
      // as found (shrinking a crash restarts the host per candidate: a crashing kernel's whole budget).
      std::string fault_text, shrunk_in;
      dl.shrink_this = [&] {
        fault_text = property_handle_.failing_fault_text();
        const auto it = fault_text.empty() ? shrunk_faults_.end() : shrunk_faults_.find(fault_text);
        if (it == shrunk_faults_.end()) return true;
        shrunk_in = it->second;
        return false;
      };
      const props::PropertyOutcome o = props::run_property(p, property_handle_, d, l, scope, dl);
      if (o.failed && dl.shrink && !o.shrink_skipped && !fault_text.empty()) shrunk_faults_.emplace(fault_text, r.name);
      res_.calls += property_handle_.calls() - calls_before;
      if (property_handle_.hung() && ++hangs_ >= 2) aborted_ = true;
      r.cases += o.passed + (o.failed ? 1 : 0);
      // Executions discarded because a call was not made are not the kernel's declines.
      uint64_t unsent = 0;
      for (const auto& [why, n] : property_handle_.unsent_executions()) {
        const auto it = unsent_before.find(why);
        const uint64_t k = n - (it == unsent_before.end() ? 0 : it->second);
        if (k) r.not_sent[why] += k;
        unsent += k;
      }
      r.declined += o.discarded - std::min(o.discarded, unsent);
      res_.accepted += property_handle_.accepted_calls() - accepted_before;
      if (o.passed || o.failed) r.ran = true;
      if (o.stopped && !aborted_) ++not_run_[r.name];  // (stopped by the budget, not by a second hang)
      if (!o.failed) continue;
      const auto& calls = property_handle_.failing_calls();
      const RopeCase first = calls.empty() ? RopeCase{} : calls.front().c;
      CaseRecord rec = record(r, first, !calls.empty() && calls.front().in_place, criteria(first),
                              o.message + "\n  reproduce: " + o.reproduce(p, d, l, opt_.seed));
      rec.property = p.id;
      rec.property_layout = l;
      rec.property_seed = opt_.seed;
      rec.property_case = o.index;
      rec.property_cases = opt_.property_cases;
      rec.property_max_discard_ratio = dl.max_discard_ratio;
      rec.property_shrink = o.shrink_path;
      rec.property_max_position = max_position_;
      rec.diagnosis = diagnose_property(p, calls, property_handle_.failing_fault(), o.message, &rec.suggestion);
      record_failure(r, std::move(rec), property_handle_.failing_fault());
      if (o.shrink_cut)
        budget_cuts_.push_back(fmt::format("shrinking the failure of '{}' ({} {}; not fully shrunk)", r.name,
                                           to_string(d), to_string(l)));
      else if (o.shrink_capped && r.note.empty())
        r.note = fmt::format("{} {}: shrinking stopped after {} candidates ({} step(s) taken)", to_string(d),
                             to_string(l), o.shrinks_tried, o.shrink_path.size());
      else if (o.shrink_skipped && r.note.empty())
        r.note = fmt::format("{} {}: not shrunk: the same fault was shrunk in '{}'", to_string(d), to_string(l),
                             shrunk_in);
    }
    if (!r.ran && r.note.empty() && !aborted_ && (r.declined > 0 || r.not_sent.empty() || budget_reached_))
      r.note = budget_reached_ ? "not run: the budget was reached"
               : combos.empty() ? (p.both_layouts ? "no dtype with both layouts accepted" : "no accepted dtype/layout")
                                : "every execution discarded (the kernel declined its cases)";
    charge(p.row);
  }
}

// Whether a kernel that also takes computed angles takes a caller-given table of some kind (a cos_sin_2, cat or
// full table of 2 rows, f32, the legacy form, else the tensor form): a kernel that declines all of them is not
// asked for a property's table cases (row r's note says so), as a kernel that declines v2 is not for v2's.
bool Gate::table_probe_taken(Dtype d, Layout l, CheckRow& r) {
  bool sent = false;
  for (TableKind k : {TableKind::cos_sin_2, TableKind::cos_sin_cat, TableKind::cos_sin_full})
    for (bool tensor : {false, true}) {
      const RopeCase probe = abi_table_probe_case(d, l, k, Dtype::f32, tensor);
      if (!why_not_sent(probe, false).empty()) continue;  // (outside --supports: not made)
      sent = true;
      const uint64_t before = property_handle_.calls(), accepted_before = property_handle_.accepted_calls();
      const bool declined = property_handle_.run(probe, {}).status == props::RunResult::Status::declined;
      res_.calls += property_handle_.calls() - before;
      res_.accepted += property_handle_.accepted_calls() - accepted_before;
      if (!declined) return true;
    }
  if (!sent) return true;  // every probe outside --supports: the property's cases say "not made" themselves
  ++r.declined;
  r.note = "not run: the kernel declines caller-given cos/sin tables (RC_UNSUPPORTED)";
  return false;
}

// Whether the kernel takes a property's probe case (PropertyDef::probe; with a table the gate builds when it
// takes tables only), out of place or in place: one that does not is not asked for the property's cases (row
// r's note says so).
bool Gate::probe_taken(const RopeCase& probe, CheckRow& r) {
  // A probe outside --supports is not made: the property's cases say "not made" for themselves.
  if (!why_not_sent(probe, false).empty()) return true;
  for (bool in_place : {false, true}) {
    const uint64_t before = property_handle_.calls(), accepted_before = property_handle_.accepted_calls();
    const bool declined =
        property_handle_.run(probe, {in_place, -1}).status == props::RunResult::Status::declined;
    res_.calls += property_handle_.calls() - before;
    res_.accepted += property_handle_.accepted_calls() - accepted_before;
    if (!declined) return true;
  }
  ++r.declined;
  r.note = "not run: the kernel declines its plainest call (" + probe.summary() + "; RC_UNSUPPORTED)";
  return false;
}

// Calls in one process with one parameter changing between them, each judged: a cache keyed on some of the
// parameters (base but not rotary_dim, ...) serves a stale table after a change.
void Gate::run_sequences() {
  CheckRow& r = row("sequence",
                    "calls in one process, one parameter changing between calls (base, rotary_dim, head_dim, "
                    "scale, table, dtype, layout) and back: stale caches");
  if (accepted_combos_.empty()) return;
  if (opt_.model)
    r.note = "the model fixes base, rotary_dim, head_dim, scale and table: only the dtype x layout changes run";
  const std::vector<RopeCase> cases = sequence_cases(accepted_combos_, max_position_, opt_.seed, model(), slice());
  // Failing cases rerun alone that failed there too: after two, the row's failures are the kernel's own (each
  // rerun is a fresh host; a kernel wrong everywhere would start one per case), diagnosed as any row's.
  constexpr int kFailedAloneEnough = 2;
  int failed_alone = 0;
  for (size_t n = 0; n < cases.size(); ++n) {
    const RopeCase& c = cases[n];
    const uint64_t failed_before = r.failed;
    const Outcome o = run_case(r, c, stateful_in_place());
    if (r.failed > failed_before && n > 0 && o.v.fault.empty() && r.diagnosis.empty() &&
        failed_alone < kFailedAloneEnough && !over_budget()) {
      // Does it fail alone? A case that passes in a fresh process failed because of the calls before it.
      const RopeCase& sent = o.sent ? *o.sent : c;  // (as run_case sent it)
      const CallResult alone = call_isolated_like(sent, stateful_in_place());
      const CaseVerdict va = judge_call(sent, stateful_in_place(), opt_.angle_model, criteria(sent), alone);
      if (va.accepted && va.pass)
        r.diagnosis = fmt::format("stale state across calls: {} fails right after {} in the same process and passes "
                                  "in a fresh one (a cache keyed on some of the parameters?)",
                                  c.summary(), cases[n - 1].summary());
      else
        ++failed_alone;
    }
  }
  if (!r.ran && !aborted_ && r.not_sent.empty())
    r.note = budget_reached_ ? "not run: the budget was reached"
             : r.declined   ? "every call declined (RC_UNSUPPORTED)"
                            : "no accepted dtype/layout";
}

// The same case many times in one process: every output judged and the same as the first (bit for bit, or
// value for value under identity=values; a call counter, a cache filled on the first call, uninitialised memory).
void Gate::run_repeat() {
  constexpr int kRepeats = 300;
  CheckRow& r = row("repeat", fmt::format("the same case {} times in one process: every output within the contract "
                                          "and the same as the first (the identity clause: bits or values)",
                                          kRepeats));
  if (accepted_combos_.empty()) return;
  const RopeCase asked =
      repeat_case(accepted_combos_[0].first, accepted_combos_[0].second, max_position_, opt_.seed, model(),
                    slice());
  // The way the case is sent: the first of its ways the kernel does not decline (the first call of the 300), then
  // that way each time.
  SendWays ways(asked, host_.abi(), opt_.contract, opt_.angle_model, next_turn(asked));
  if (over_budget()) {
    ++not_run_[r.name];
    return;
  }
  const RopeCase* sent = nullptr;
  const bool ip = stateful_in_place();
  CallResult first_call = call_in_ways(ways, [&](const RopeCase& w) { return call_unless_not_sent(w, ip); },
                                       taken_way_ % std::max<size_t>(1, ways.size()), &sent);
  if (!sent) {
    r.not_sent[first_call.not_sent] += kRepeats;
    return;
  }
  const RopeCase& c = *sent;
  const Criteria cr = criteria(c);
  ReferenceOptions ro;
  ro.angle_model = opt_.angle_model;
  const ReferenceOutput ref = reference_rope(c, ro);
  Bytes first;
  uint64_t start = 0;
  for (int k = 0; k < kRepeats && !aborted_; ++k) {
    if (k > 0 && over_budget()) {
      ++not_run_[r.name];
      break;
    }
    const CallResult res = k == 0 ? std::move(first_call) : call(c, ip);
    count(asked, c, ip, res);
    ++res_.calls;
    const CaseVerdict v = judge_call(c, ip, opt_.angle_model, cr, res, &ref);
    if (!v.accepted) {
      ++r.declined;
      if (k == 0) {  // (declined in every way the kernel took: the same call 299 times more tells nothing)
        r.note = fmt::format("declined (RC_UNSUPPORTED): its case ({}{}), in every form the kernel took",
                             asked.summary(), ip ? ", in place" : "");
        break;
      }
      continue;
    }
    ++res_.accepted;
    ++r.cases;
    r.ran = true;
    if (v.judged) {
      std::map<Dtype, BiasSums> unused;  // not independent clusters: out of the bias check (run_case)
      res_.add(r, c, v.judgement, unused);
    }
    std::string msg = v.message;
    if (v.pass && res.status == CallStatus::ok) {
      if (first.empty() || res.host_start != start) {
        first = res.out;  // a new process (after a crash) starts a new comparison
        start = res.host_start;
      } else if (const size_t e = props::first_output_difference(c, first.data(), res.out.data(), cr.identity_bits);
                 e != SIZE_MAX) {
        msg = fmt::format("repeat: call {} of the same case in one process gave a different output than the first "
                          "(element {}: {} then {}); a kernel's output must not depend on the calls before it",
                          k + 1, e, describe_element(c.dtype, load_bits(c.dtype, first.data(), e)),
                          describe_element(c.dtype, load_bits(c.dtype, res.out.data(), e)));
      }
    }
    if (!msg.empty()) {
      if (r.failed == 0 && v.fault.empty() && k > 0)
        r.diagnosis = fmt::format("state across calls: call {} of the same case {}", k + 1,
                                  v.pass ? "differs from the first" : "fails, the first ones passed");
      record_failure(r, record(r, c, ip, cr, msg), v.fault);
      if (r.failed >= 3) break;  // enough evidence; keep the budget for the rest
    }
  }
}

// Shapes of real prefill and MLA models, one per dtype: thousands of tokens x heads, head_dim up to 576,
// so tiled or threaded paths run.
void Gate::run_large() {
  CheckRow& r = row("large", "prefill-sized cases: 128 tokens x 16 heads (head_dim 128), 128 tokens x 16 heads "
                             "(head_dim 576, rotary 64 as in MLA models), 32 tokens x 8 heads (head_dim 576, all "
                             "rotated)");
  if (opt_.model) r.note = "tokens x heads as said, each head the model's";
  for (const auto& [c, in_place] : large_cases(accepted_combos_, max_position_, opt_.seed, model(), slice()))
    run_case(r, c, in_place, /*in_bias=*/false);
  if (!r.ran && !aborted_ && r.not_sent.empty())
    r.note = budget_reached_ ? "not run: the budget was reached" : "no accepted dtype/layout";
}

// The host's FP environment after loading, its isolation, and what the kernel printed.
void Gate::finish_sandbox() {
  CheckRow& r = row("fp environment", "loading the library and each call leave the process's FP environment "
                                      "(rounding, flush-to-zero, exception masks) as they found it");
  r.ran = true;
  r.cases = 1;
  if (!host_.load_fp_change().empty()) {
    r.failed_check = true;
    r.failed = 1;
    ++r.faults["fp environment"];
    r.diagnosis = "fp environment: " + host_.load_fp_change() + " (crtfastmath.o from -ffast-math at link time?)";
    r.smallest_message = host_.load_fp_change() +
                         "; every program that loads the library would compute differently (the calls here ran in "
                         "the environment the host had before loading)";
  }
  uint64_t changed = 0;
  for (const auto& row : res_.rows) {
    auto it = row.faults.find("fp environment");
    if (it != row.faults.end() && &row != &r) changed += it->second;
  }
  if (changed) r.note = fmt::format("{} call(s) changed the FP environment (see their rows)", changed);
  res_.sandbox = host_.sandbox_summary();
  res_.kernel_output = host_.captured_output();
}

void Gate::run_random() {
  CheckRow& r = row("random", fmt::format("{} {}", opt_.random_cases, row_what("random", opt_.contract)));
  if (accepted_combos_.empty()) {
    r.note = "no accepted dtype/layout";
    return;
  }
  // The cases follow from the seed alone; the budget only caps how many of them run (the random phase
  // stops at 85 % of it, leaving the rest for shrinking and diagnosis).
  Rng rng(opt_.seed ^ 0xabcdef12345ull);
  const double stop_at = opt_.budget_seconds * 0.85;
  uint64_t n = 0;
  for (uint64_t k = 0; k < opt_.random_cases && !aborted_ && !budget_reached_; ++k) {
    if (count_reached(stop_at)) {
      progress(fmt::format("85 % of the budget ({:g} s) used: the random phase stops", opt_.budget_seconds));
      break;
    }
    const auto [d, l] = accepted_combos_[rng() % accepted_combos_.size()];
    const RopeCase c = random_case(d, l, max_position_, rng, model(), slice());
    run_case(r, c, rng() % 2 == 1);
    ++n;
  }
  if (n < opt_.random_cases && !aborted_) {
    const std::string what = fmt::format("{} of {} random cases ran", n, opt_.random_cases);
    r.note = what + " (the random phase stops at 85 % of the budget)";
    budget_cuts_.push_back("random: " + what);
  }
}

void Gate::finish_bias() {
  for (Dtype d : opt_.dtypes) {
    auto it = bias_.find(d);
    if (it == bias_.end() || it->second.n == 0) continue;
    res_.rows.push_back(bias_row(d, it->second, criteria_for_dtype(d).model));
  }
}

// Rows with calls not made say how many and why (a row that made none says it did not run).
void Gate::finish_not_sent() {
  for (auto& r : res_.rows) {
    if (r.not_sent.empty()) continue;
    const char* unit = r.name.rfind("property: ", 0) == 0 ? "execution(s)" : "call(s)";
    std::vector<std::string> parts;
    for (const auto& [why, n] : r.not_sent) parts.push_back(fmt::format("{} {} not made: {}", n, unit, why));
    if (!r.ran && r.declined == 0 && !r.failed_check)
      r.note = fmt::format("not run: {}{}", fmt::join(parts, "; "),
                           r.note.empty() || r.note.rfind("not run", 0) == 0 ? "" : " (" + r.note + ")");
    else
      r.note += fmt::format("{}{}", r.note.empty() ? "" : "; ", fmt::join(parts, "; "));
  }
}

void Gate::save_files() {
  if (opt_.report_dir.empty()) return;
  // The kernel's whole stdout/stderr (the verdict quotes the first lines).
  for (const std::string& p : host_.save_captured_output(opt_.report_dir))
    res_.kernel_output += "  (all of it: " + p + ")\n";
  bool any = false;
  for (auto& r : res_.rows) any |= r.smallest.has_value();
  if (!any) return;
  std::error_code ec;
  std::filesystem::create_directories(opt_.report_dir, ec);
  if (ec) {
    std::fprintf(stderr, "warning: cannot create %s: %s\n", opt_.report_dir.c_str(), ec.message().c_str());
    return;
  }
  auto slug = [](std::string s) {
    for (char& ch : s)
      if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '-';
    return s;
  };
  for (auto& r : res_.rows) {
    if (!r.smallest) continue;
    try {
      const std::string p = (std::filesystem::path(opt_.report_dir) / (slug(r.name) + ".smallest.json")).string();
      write_record(p, *r.smallest);
      r.smallest_file = p;
      for (size_t k = 0; k < std::min<size_t>(r.failing.size(), opt_.failing_cases); ++k)
        write_record((std::filesystem::path(opt_.report_dir) / fmt::format("{}.{}.json", slug(r.name), k)).string(),
                     r.failing[k]);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "warning: %s\n", e.what());
    }
  }
}

// Positions a kernel takes (issue 51, scope 1): a kernel with a bounded cache (max_position_embeddings rows, a
// module's buffer) declines positions past it, and every matrix case holds the largest position the rows give. Its
// simplest call (abi_probe_cases: one token, with the model's configuration where there is one) is asked at position
// 1 and at that largest position; taken at 1 and declined there, the bound is bisected (declines are cheap: about
// log2 of the largest position in calls) and every row stays within the largest position taken. The coverage line
// says so; where the largest position was required (an explicit --max-position, a model's context) the coverage row
// fails (judge_coverage). A call that is neither taken nor declined ends the search: the rows report it.
// A kernel that took no probe call, in a run with neither a model nor a slice given, may be one whose heads must have a
// rotated slice of one shape (GPT-NeoX's rotary_pct 0.25, ChatGLM's half, Phi-2's 32 of 80, GPT-J's rotary_dim 64 of
// 256, DeepSeek's 64 at offset 128 of 192): every full-rotary probe is declined. The neutral probes are asked again on
// each such shape; on the first taken, the rule is told apart by one call at a wider head (the same fraction of it,
// the same rotary_dim, else that head shape only), the kernel is negotiated in full on it, and every row's cases take
// it (apply_rotary_slice). The coverage line says so; none taken, the refusal says which were tried.
void Gate::find_rotary_slice() {
  const AbiVersions full = host_.abi();
  // (some version declined the shapes, none crashed or hung: a shape question; an error code is a version's refusal)
  if (opt_.model || slice_ || !full.probed || full.accepted || full.stopped || !full.declined) return;
  for (const AbiProbe& p : full.probes)
    if (!p.outcome.empty()) return;
  // Each shape as {fraction, rotary_dim, rotary_offset, head_dim}.
  static const RotarySlice kShapes[] = {{0, 32, 0, 64}, {0, 64, 0, 128}, {0, 16, 0, 64}, {0, 32, 0, 128},
                                        {0, 32, 0, 80}, {0, 64, 0, 256}, {0, 64, 128, 192}};
  progress("kernel " + impl_.name + ": the rotated slice it takes");
  uint64_t calls = 0;
  auto count_call = [&](const CallResult& r) {
    ++calls;
    meter_.add(r);
  };
  auto stop = [this] { return over_budget(); };
  std::vector<std::string> tried;
  for (const RotarySlice& shape : kShapes) {
    const AbiVersions& v = host_.negotiate(opt_.dtypes, opt_.layouts, opt_.call_timeout_seconds, stop, count_call,
                                           &shape, /*neutral_only=*/true);
    tried.push_back(shape.describe());
    bool odd = false;  // a probe that crashed or hung: the search ends, the rows find it
    for (const AbiProbe& p : v.probes) odd |= !p.outcome.empty();
    if (v.stopped || odd) break;
    if (!v.accepted) continue;
    // (a copy: the negotiations below replace v)
    const AbiProbe taken = *std::find_if(v.probes.begin(), v.probes.end(), [](const AbiProbe& p) { return p.ok(); });
    // The rule: the same fraction of a wider head, else the same rotary_dim (at the same offset) there, else this
    // head shape only.
    const uint32_t wider = shape.rotary_offset ? shape.head_dim + 64 : 2 * shape.head_dim;
    std::vector<RotarySlice> rules;
    if (!shape.rotary_offset) rules.push_back({double(shape.rotary_dim) / shape.head_dim, 0, 0, 0});
    rules.push_back({0, shape.rotary_dim, shape.rotary_offset, 0});
    RotarySlice found = shape;
    host_.probe_calls(opt_.call_timeout_seconds, count_call, [&](const std::function<CallResult(const RopeCase&)>& call) {
      for (const RotarySlice& rule : rules) {
        RotarySlice at = rule;
        at.head_dim = wider;
        if (!at.rotary_dim_of(wider) || over_budget()) continue;
        const RopeCase c = abi_probe_cases({taken.dtype}, {taken.layout}, &at).front();
        if (call(c).status == CallStatus::ok) {
          found = rule;
          return;
        }
      }
    });
    slice_ = found;
    host_.negotiate(opt_.dtypes, opt_.layouts, opt_.call_timeout_seconds, stop, count_call, &*slice_);
    res_.rotary_slice = slice_->describe();
    res_.rotary_slice_found =
        fmt::format("found by probing: the kernel declined every full-rotary probe and took {} ({} probe calls)",
                    taken.call, calls);
    return;
  }
  host_.set_abi(full, false);  // (what the full-rotary probes found: the refusal names them)
  res_.rotary_slices_tried = fmt::format("rotated slices tried too, none taken ({} calls): {}", calls,
                                         fmt::join(tried, "; "));
}

void Gate::find_position_limit() {
  const AbiVersions& abi = host_.abi();
  if (!abi.probed || abi.accepted == 0 || max_position_ <= 1) return;  // (a kernel that takes tables only: their
                                                                       //  rows are positions the gate lays out)
  for (const AbiProbe& p : abi.probes)
    if (!p.outcome.empty()) return;  // a probe crashed or hung: the rows find it, no call more to wait out here
  progress("kernel " + impl_.name + ": positions it takes");
  // (in a host process of its own, as the ABI probes: what the kernel keeps from a call stays out of the rows')
  host_.probe_calls(opt_.call_timeout_seconds, [this](const CallResult& r) { meter_.add(r); },
                    [&](const std::function<CallResult(const RopeCase&)>& probe) { bisect_positions(probe); });
}

void Gate::bisect_positions(const std::function<CallResult(const RopeCase&)>& probe) {
  uint64_t calls = 0;
  auto taken_at = [&](RopeCase c, int64_t m) -> std::optional<bool> {
    c.positions = {m};
    if (!why_not_sent(c, false).empty() || over_budget()) return std::nullopt;
    ++calls;
    const CallResult r = probe(c);
    if (r.status == CallStatus::ok) return true;
    if (r.status == CallStatus::declined) return false;
    return std::nullopt;
  };
  for (RopeCase c : abi_probe_cases(opt_.dtypes, opt_.layouts, slice())) {
    if (model()) {
      apply_case_template(*model(), c);
      c.input.assign(c.n_bytes(), 0);
    }
    const std::optional<bool> low = taken_at(c, 1);
    if (!low) return;
    if (!*low) continue;  // (this shape is not taken at all: the next)
    const std::optional<bool> high = taken_at(c, max_position_);
    if (!high || *high) return;  // taken there too: no bound below it (the same cases as ever)
    int64_t lo = 1, hi = max_position_;  // taken at lo, declined at hi
    while (hi - lo > 1) {
      const int64_t mid = lo + (hi - lo) / 2;
      const std::optional<bool> t = taken_at(c, mid);
      if (!t) return;
      (*t ? lo : hi) = mid;
    }
    res_.positions_asked = max_position_;
    res_.position_limit = lo;
    res_.position_probes = calls;
    res_.positions_required_by = opt_.long_positions_bound;
    max_position_ = lo;
    return;
  }
}

GateResult Gate::run() {
  host_.start();  // a load error (LoadError) ends the run before anything is judged
  charge("start");
  // Which ABI versions the kernel speaks (core/abi_versions.hpp): no call goes at a version it refused.
  progress("kernel " + impl_.name + ": ABI versions");
  res_.abi = host_
                 .negotiate(opt_.dtypes, opt_.layouts, opt_.call_timeout_seconds, [this] { return over_budget(); },
                            [this](const CallResult& r) { meter_.add(r); }, slice())
                 .summary();
  find_rotary_slice();  // (charged with the ABI's probes, as are the positions')
  if (opt_.slice) {
    res_.rotary_slice = opt_.slice->describe();
    res_.rotary_slice_found = "given: " + opt_.slice_given;
  }
  if (slice_ && !opt_.slice) res_.abi = host_.abi().summary() + " (on its rotated slice)";
  // --supports declares the features the kernel implements: calls using them are sent at the version that
  // expresses them whatever the probes found (those outside it are not sent at all: why_not_sent).
  if (opt_.supports) {
    host_.set_abi(host_.abi(), /*features_declared=*/true);
    res_.abi += "; --supports declares its features";
  }
  find_position_limit();
  charge("abi");
  if (opt_.input_padding)
    res_.padding = fmt::format("padding: the kernel may read {} byte(s) past each input and table it reads "
                               "(--input-padding: its inputs, q and k, tables, positions and index arrays each end {} "
                               "byte(s) before their guard page; a write there is still out of bounds)",
                               opt_.input_padding, opt_.input_padding);
  res_.kernel = impl_.name;
  res_.kernel_arg = opt_.kernel_arg;
  res_.contract = opt_.contract.spec();
  res_.model = opt_.model_text;
  res_.bounds = describe_bounds(opt_.error_model, opt_.contract, opt_.dtypes, max_position_);
  res_.angle_model = std::string(to_string(opt_.angle_model));
  for (Dtype d : opt_.dtypes) {
    RopeCase c;
    c.dtype = d;
    c.head_dim = c.rotary_dim = 128;
    c.positions = {1};
    res_.dtype_bound[d] = criteria(c).case_bound(c);
  }
  if (!opt_.tolerance.empty()) {
    std::string t;
    for (const auto& [d, v] : opt_.tolerance) t += fmt::format("{}{}={:g}", t.empty() ? "" : ",", to_string(d), v);
    res_.contract += " (overridden by --tolerance " + t + ": every pair's e within that flat bound)";
  }
  progress("kernel " + impl_.name + ": systematic matrix");
  res_.model_name = opt_.model_name;
  run_matrix();
  charge("matrix");
  // A kernel that refused every probe and returned RC_OK on no matrix call either: every further row would
  // only repeat the refusal. The verdict says it once (AbiVersions::refusal).
  if (rejected_everything()) {
    for (auto& r : res_.rows)
      if (r.failed_check) r.diagnosis = "the kernel rejected every call (the verdict says which and why)";
  } else if (!accepted_combos_.empty()) {
    progress("special values");
    run_specials();
    charge("special values");
    progress("long positions");
    run_long_positions();
    charge("long positions");
    progress("ABI v2 features");
    run_feature_rows(2);
    charge("v2");
    progress("ABI v3 call shapes");
    run_feature_rows(3);
    charge("v3");
    progress("ABI v4 call shapes");
    run_feature_rows(4);
    charge("v4");
    progress("properties");
    run_properties();
    progress("sequences of calls in one process");
    run_sequences();
    charge("sequence");
    run_repeat();
    charge("repeat");
    progress("large shapes");
    run_large();
    charge("large");
    progress(fmt::format("{} random cases", opt_.random_cases));
    run_random();
    charge("random");
  }
  finish_sandbox();
  finish_bias();
  finish_not_sent();
  // What must have been exercised: something; each --require feature; each --supports feature the run made
  // calls of; with a model, a call in its configuration (a "coverage" row when one is not met).
  const bool any_not_sent = std::any_of(res_.rows.begin(), res_.rows.end(), [](const CheckRow& r) {
    return r.name.rfind("matrix ", 0) == 0 && !r.not_sent.empty();
  });
  judge_coverage(res_, opt_.supports, opt_.require, opt_.model.has_value(),
                 aborted_          ? (abort_why_.empty() ? "the kernel hung" : abort_why_) + ": nothing could be checked"
                 : budget_reached_ ? "the budget was reached before the kernel accepted a case"
                 : any_not_sent && res_.calls == 0
                     ? "no call of the matrix is within --supports: nothing was sent to the kernel"
                     : "the kernel declined every case of every dtype x layout asked for: a gate that checked nothing "
                       "is not a pass");
  for (auto& r : res_.rows)
    if (r.failed_check && r.smallest) {
      shrink(r);
      diagnose_row(r);
    }
  progress("done");
  // What the budget cut: calls of the systematic rows (a FAIL: a gate that did not run its systematic part
  // has not checked the kernel), then the random phase, shrinking and diagnosis (said, not failed).
  bool systematic_cut = false;
  std::vector<std::string> cut_rows;  // (the verdict line names them briefly: brief_cuts)
  uint64_t cut_calls = 0;
  for (auto& r : res_.rows)
    if (auto it = not_run_.find(r.name); it != not_run_.end() && r.name != "random") {
      systematic_cut = true;
      cut_rows.push_back(r.name);
      cut_calls += it->second;
      res_.budget_cuts.push_back(fmt::format("{}: {} call(s) not made", r.name, it->second));
      r.note = r.ran ? fmt::format("{} call(s) not made: the budget was reached", it->second)
                     : "not run: the budget was reached";
    }
  if (budget_reached_ && accepted_combos_.empty() && !aborted_) systematic_cut = true;
  for (const auto& c : budget_cuts_) res_.budget_cuts.push_back(c);
  // The verdict line: up to three cut rows in full; more as their count, the first and the last, and where
  // each is said (its row's note; the JSON verdict's budget_cuts lists every one). Then the rest of what was cut.
  std::string cuts_brief;
  if (cut_rows.size() <= 3) {
    cuts_brief = fmt::format("{}", fmt::join(res_.budget_cuts, "; "));
  } else {
    cuts_brief = fmt::format("{} rows, {} call(s) not made: {} .. {}, each row's note says how many", cut_rows.size(),
                             cut_calls, cut_rows.front(), cut_rows.back());
    for (const auto& c : budget_cuts_) cuts_brief += "; " + c;
  }
  if (aborted_)
    for (auto& r : res_.rows)
      if (!r.ran && (r.note.empty() || (r.cases + r.declined == 0 && r.note.rfind("not run", 0) != 0))) {
        const std::string why = abort_why_.empty() ? "not run: the kernel hung twice" : "not run: " + abort_why_;
        r.note = r.note.empty() ? why : why + "; " + r.note;
      }
  res_.seconds = seconds_since(t0_);
  res_.pass = res_.accepted > 0;
  for (const auto& r : res_.rows) res_.pass &= !r.failed_check;
  if (aborted_) res_.pass = false;
  if (systematic_cut) res_.pass = false;
  // What the budget cut, on the verdict line: whole where it fits beside the causes, else counted, every cut then
  // on a line of its own (format_brief_verdict, res_.budget_line).
  const std::string budget_full =
      res_.budget_cuts.empty() ? "" : fmt::format("the budget ({:g} s) cut: {}", opt_.budget_seconds, cuts_brief);
  auto fit_with_budget = [&](const std::vector<std::string>& parts, const std::string& more_what) {
    if (budget_full.empty()) return fit_verdict_reason(parts, more_what);
    const std::string whole = fmt::format("{}; {}", fmt::join(parts, "; "), budget_full);
    if (fits_verdict_line(whole)) return whole;
    res_.budget_line = budget_full;  // (said whole on the line before the verdict)
    return fit_verdict_reason(parts, more_what,
                              fmt::format("the budget ({:g} s) cut {} part(s) of the run: the line above lists them",
                                          opt_.budget_seconds, res_.budget_cuts.size()));
  };
  if (res_.pass) {
    res_.verdict_reason = fit_with_budget({"every check passed under the contract"}, "");
  } else if (systematic_cut && std::none_of(res_.rows.begin(), res_.rows.end(),
                                            [](const CheckRow& r) { return r.failed_check; })) {
    const std::string whole = fmt::format("the budget ({:g} s) was reached before the systematic checks finished "
                                          "(not run: {}); a gate that did not run them is not a pass: raise "
                                          "--budget-seconds",
                                          opt_.budget_seconds, cuts_brief);
    if (fits_verdict_line(whole)) {
      res_.verdict_reason = whole;
    } else {
      res_.budget_line = fmt::format("the budget ({:g} s) did not reach: {}", opt_.budget_seconds, cuts_brief);
      res_.verdict_reason = fit_verdict_reason(
          {fmt::format("the budget ({:g} s) was reached before the systematic checks finished (the line above says "
                       "what did not run); a gate that did not run them is not a pass: raise --budget-seconds",
                       opt_.budget_seconds)},
          "");
    }
    res_.cause = "the budget was reached";
    res_.cause_id = "budget-reached";
  } else if (rejected_everything()) {
    // Every call rejected, the simplest ones at every version too: one line, not a row-by-row wall (the verdict's
    // brief, the refusal line whole).
    res_.refusal = host_.abi().refusal();
    if (!res_.rotary_slices_tried.empty()) res_.refusal += "; " + res_.rotary_slices_tried;
    res_.verdict_reason = fit_verdict_reason({host_.abi().refusal_brief()}, "");
    res_.cause = res_.refusal;
    res_.cause_id = "coverage";
  } else {
    // Name the causes: each distinct diagnosis (or fault) with the first row that shows it. Precision causes
    // of several rows (each row's smallest widening of the contract: on a few pairs just past the allowance
    // they differ from row to row) are one cause, the join of the widenings, where every row has one.
    std::vector<std::string> causes, precision_texts, precision_causes;
    std::vector<CheckRow*> precision_rows;  // (the rows of precision_texts)
    std::vector<std::string> row_causes;  // each failing row's cause
    std::vector<std::string> explained;  // the causes of rows with a fault or a named diagnosis
    bool bias_diagnosed_in_a_case = false;  // a row other than the bias rows was diagnosed a radial bias
    auto cause_of = [](const CheckRow& r) {
      std::string cause = !r.smallest_fault.empty() ? r.smallest_fault : r.diagnosis.empty() ? r.name : r.diagnosis;
      if (const size_t cut = cause.find(" ("); cut != std::string::npos) cause.resize(cut);
      if (cause.rfind("diagnosis: ", 0) == 0) cause = cause.substr(11);
      // An unexplained failure says where it is instead (properties/localisation.hpp).
      if (cause == name_of(Cause::unexplained) && !r.where.empty()) cause += " (where: " + r.where + ")";
      return cause;
    };
    // Truncation, where a row's case shows it element by element: its error per element is below one ulp, twice
    // the correctly rounded one, so a row whose smallest case is only a precision excess of at most 2x the
    // allowance (a few pairs, too few elements to show each one's direction) is what truncation does there.
    const std::string trunc_tail(name_of(Cause::truncating_stores_tail)), trunc(name_of(Cause::truncating_stores)),
        bias(name_of(Cause::radial_bias));
    std::string truncation;
    bool table_truncated = false;  // a row's case shows a truncating cos/sin table
    const std::string trunc_table(name_of(Cause::truncating_cos_sin_table));
    for (const auto& r : res_.rows)
      if (r.failed_check && r.smallest_fault.empty()) {
        const std::string c = cause_of(r);
        if (c == trunc_tail || (c == trunc && truncation.empty())) truncation = c;
        table_truncated |= c == trunc_table;
      }
    // A truncating table is a narrow cache too, and shortens pairs: the rows whose cases are too small to show each
    // pair's direction (or whose outputs are as coarse as the table: bf16) show it as the cache's precision or as a
    // radial bias, and are its rows.
    // (By id: a bias row names "radial bias of a bf16 cos/sin cache" when a cache's share would explain it.)
    auto part_of_table = [](const std::string& cause) {
      const std::string_view id = cause_id(cause);
      return id == id_of(Cause::cos_sin_bf16) || id == id_of(Cause::cos_sin_f16) || id == id_of(Cause::radial_bias);
    };
    for (auto& r : res_.rows) {
      if (!r.failed_check) continue;
      std::string cause = cause_of(r);
      if (!truncation.empty() && r.smallest_fault.empty() && is_precision_cause(cause) &&
          precision_excess(r.diagnosis) <= 2.0)
        cause = truncation;
      if (table_truncated && r.smallest_fault.empty() && part_of_table(cause)) cause = trunc_table;
      if ((!r.smallest_fault.empty() || !r.diagnosis.empty()) && cause.find("unexplained") == std::string::npos)
        explained.push_back(cause);
      if (cause == "radial bias" && r.name.rfind("bias ", 0) != 0) bias_diagnosed_in_a_case = true;
      if (r.smallest_fault.empty() && is_precision_cause(cause)) {
        precision_texts.push_back(r.diagnosis);
        precision_rows.push_back(&r);
        if (std::find(precision_causes.begin(), precision_causes.end(), cause) == precision_causes.end())
          precision_causes.push_back(cause);
      }
      if (std::find(causes.begin(), causes.end(), cause) == causes.end()) causes.push_back(cause);
      row_causes.push_back(cause);
    }
    if (precision_causes.size() > 1)
      if (const std::optional<PrecisionJoin> j = join_precision(precision_texts, opt_.contract)) {
        std::vector<std::string> merged;
        // Said only once every such row's failing cases pass under it (each re-judged; verify_suggestions).
        std::string err;
        const std::optional<Contract> w = parse_contract(j->spec, &err);
        uint64_t left = 0, of = 0, dropped = 0;
        for (CheckRow* pr : precision_rows) {
          uint64_t n = 0;
          left += w ? failing_under(*pr, *w, n) : 1;
          of += n;
          dropped += pr->rejudge_dropped;
        }
        const std::string joined =
            w && left == 0 && of > 0 && dropped == 0
                ? fmt::format("precision: {}; every such row passes with --contract {}", j->causes, j->spec)
                : fmt::format("precision: {}; --contract {} re-judged on their {} failing case(s) leaves {} failing",
                              j->causes, j->spec, of, left);
        for (const std::string& cause : causes) {
          const bool precision = std::find(precision_causes.begin(), precision_causes.end(), cause) !=
                                 precision_causes.end();
          if (!precision) merged.push_back(cause);
          else if (cause == precision_causes.front())
            merged.push_back(joined);
        }
        for (std::string& rc : row_causes)  // (the rows of every precision cause are the joined cause's)
          if (std::find(precision_causes.begin(), precision_causes.end(), rc) != precision_causes.end()) rc = joined;
        causes = std::move(merged);
      }
    // A cause some rows show in full is the cause of the rows that show only part of it (rows add detail, never
    // contradict: issue 23, scope 4): truncation in a tail loop explains rows whose cases are all tail (fewer
    // pairs than the vector loop takes: "truncating stores" there), and truncation explains the radial bias it
    // causes (the rows whose cases show the bias but not each element's direction).
    auto absorb = [&](const std::string& finer, const std::string& coarser) {
      if (std::find(causes.begin(), causes.end(), finer) == causes.end()) return;
      const auto it = std::find(causes.begin(), causes.end(), coarser);
      if (it == causes.end()) return;
      causes.erase(it);
      for (std::string& rc : row_causes)
        if (rc == coarser) rc = finer;
    };
    absorb(trunc_tail, trunc);
    absorb(trunc_tail, bias);
    absorb(trunc, bias);
    // A plain radial bias is named only when nothing else explains the failing rows (issue 23, scope 4): a
    // kernel that rotates by the wrong angle or crashes also moves the mean radial error, and its bias row
    // fails with it; the row still says so (the table, the brief verdict's FAILED line).
    // (Only when the bias rows alone say it: a row whose own failing case is diagnosed a radial bias -- truncating
    // stores -- keeps it named.)
    const auto plain_bias = std::find(causes.begin(), causes.end(), "radial bias");
    if (plain_bias != causes.end() && !bias_diagnosed_in_a_case &&
        std::any_of(explained.begin(), explained.end(), [](const std::string& c) { return c != "radial bias"; }))
      causes.erase(plain_bias);
    // The cause that explains the most failing rows first (issue 23, scope 4: the verdict's cause), then the
    // others by the rows they explain (ties in row order).
    // A row read as part of a truncation (its case too small to show each element's or pair's direction, or a
    // bias row) says so, and drops the clause its own diagnosis suggested: the kernel fails under it (issue 23,
    // scope 4: rows add detail, never contradict). Its cause id is then the verdict's.
    {
      const std::string finer[] = {trunc_tail, trunc, trunc_table};
      size_t k = 0;
      for (auto& r : res_.rows) {
        if (!r.failed_check) continue;
        const std::string& rc = row_causes[k++];
        if (!r.smallest_fault.empty() || cause_of(r) == rc ||
            std::find(std::begin(finer), std::end(finer), rc) == std::end(finer))
          continue;
        std::string own = r.diagnosis.empty() ? r.name : r.diagnosis;
        if (own.rfind("diagnosis: ", 0) == 0) own = own.substr(11);
        for (const char* suggestion : {"; would pass with --contract ", ": would pass with "})
          if (const size_t at = own.find(suggestion); at != std::string::npos) own.resize(at);
        r.diagnosis = fmt::format("{} (this row's cases show it in part: {})", rc, own);
        r.suggestion.clear();  // (the text no longer makes it: it is not the row's advice)
      }
    }
    auto rows_of = [&](const std::string& c) { return std::count(row_causes.begin(), row_causes.end(), c); };
    std::stable_sort(causes.begin(), causes.end(),
                     [&](const std::string& a, const std::string& b) { return rows_of(a) > rows_of(b); });
    if (!causes.empty()) {
      res_.cause = causes.front();
      res_.cause_id = std::string(cause_id(causes.front()));
    }
    res_.causes = causes;
    std::vector<std::string> parts = causes;
    if (!parts.empty()) parts.front() = "failed: " + parts.front();
    else parts.push_back("failed");
    res_.verdict_reason = fit_with_budget(parts, "cause(s), each on its FAILED line");
  }
  // Each row's own suggestion, re-judged on its failing cases (after the verdict joined the rows' suggestions and
  // re-judged the joined one on them all), then the files with what was verified.
  verify_suggestions();
  save_files();
  charge("verdict");
  res_.budget_used = charged_;
  return std::move(res_);  // the Gate ends here: its error statistics (megabytes of values) are moved out
}

}  // namespace

GateResult run_gate(const Implementation& impl, const GateOptions& opt) { return Gate(impl, opt).run(); }

void keep_large_buffers_in_heap() {
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
}

}  // namespace ropecheck::gate
