// The property engine's view of a kernel in the gate's kernel host (properties/engine.hpp): each run is one
// call in the host, checked as every gate call is (status, memory, FP environment: a finding makes the run a
// failed one naming it), its output handed to the property. The handle keeps the calls of the current
// property execution, so the gate can show, save and diagnose the smallest failing one.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "gate/isolation.hpp"
#include "properties/engine.hpp"

namespace ropecheck::gate {

// A property execution's call as the gate saw it.
struct HandleCall {
  RopeCase c;
  bool in_place = false;
  std::string fault;  // the call's fault ("crash", "out-of-bounds write", ...), empty when it returned cleanly
  std::string fault_text;  // and what it was (the first line of its message: "the kernel crashed with ...")
};

class HostHandle : public props::KernelHandle {
 public:
  using CallFn = std::function<CallResult(const RopeCase&, bool in_place)>;
  using CriteriaFn = std::function<Criteria(const RopeCase&)>;
  HostHandle(std::string name, CallFn call, CriteriaFn criteria, AngleModel model, std::function<bool()> stop);

  const std::string& name() const override { return name_; }
  props::RunResult run(const RopeCase& c, const props::RunRequest& r) override;
  Criteria criteria(const RopeCase& c) const override { return criteria_(c); }
  AngleModel angle_model() const override { return model_; }
  bool honours_out_fill() const override { return false; }  // the host poisons the output itself
  void begin_execution(uint64_t index, bool shrinking) override;
  void end_execution(const rc::detail::CaseResult& result) override;

  // Calls that are not to be made: the filter returns why (empty: make it). Such a call is answered as declined
  // without reaching the kernel (the property discards or skips it); an execution discarded after one is counted
  // under its reason, not as the kernel's decline.
  using SendFilter = std::function<std::string(const RopeCase&, bool in_place)>;
  void set_send_filter(SendFilter f) { send_filter_ = std::move(f); }
  // Executions (not shrinking candidates) discarded after a call was not made, by the first such call's reason.
  const std::map<std::string, uint64_t>& unsent_executions() const { return unsent_executions_; }

  uint64_t calls() const { return calls_; }                  // every call made
  uint64_t accepted_calls() const { return accepted_; }     // calls not declined
  uint64_t not_sent() const { return not_sent_; }           // cases not sent (CallResult::not_sent)
  // The calls of the last failing execution (after shrinking: the smallest failure), and its fault (the
  // first faulting call's, empty when the property's predicate failed).
  const std::vector<HandleCall>& failing_calls() const { return failing_; }
  const std::string& failing_fault() const { return failing_fault_; }
  // The first faulting call's fault_text of the last failing execution (empty: none faulted).
  const std::string& failing_fault_text() const { return failing_fault_text_; }
  bool hung() const { return hung_; }

 private:
  std::string name_;
  CallFn call_;
  CriteriaFn criteria_;
  AngleModel model_;
  std::function<bool()> stop_;
  SendFilter send_filter_;
  std::string unsent_;  // the current execution's first call not made: its reason
  bool shrinking_ = false;
  std::map<std::string, uint64_t> unsent_executions_;
  bool hung_ = false;
  uint64_t calls_ = 0, accepted_ = 0, not_sent_ = 0;
  std::vector<HandleCall> current_, failing_;
  std::string failing_fault_, failing_fault_text_;
};

}  // namespace ropecheck::gate
