#include "gate/host_handle.hpp"

#include "gate/gate.hpp"

namespace ropecheck::gate {

HostHandle::HostHandle(std::string name, CallFn call, CriteriaFn criteria, AngleModel model, std::function<bool()> stop)
    : name_(std::move(name)), call_(std::move(call)), criteria_(std::move(criteria)), model_(model), stop_(std::move(stop)) {}

void HostHandle::begin_execution(uint64_t, bool shrinking) {
  current_.clear();
  unsent_.clear();
  shrinking_ = shrinking;
}

void HostHandle::end_execution(const rc::detail::CaseResult& result) {
  if (result.type == rc::detail::CaseResult::Type::Discard && !unsent_.empty() && !shrinking_)
    ++unsent_executions_[unsent_];
  if (result.type != rc::detail::CaseResult::Type::Failure) return;
  failing_ = current_;
  failing_fault_.clear();
  failing_fault_text_.clear();
  for (const HandleCall& c : failing_)
    if (!c.fault.empty()) {
      failing_fault_ = c.fault;
      failing_fault_text_ = c.fault_text;
      break;
    }
}

props::RunResult HostHandle::run(const RopeCase& c, const props::RunRequest& r) {
  props::RunResult res;
  // After a hang (each costs a timeout) or once the gate stops, no further call: the property discards.
  if (hung_ || (stop_ && stop_())) {
    res.status = props::RunResult::Status::declined;
    return res;
  }
  if (send_filter_) {
    if (std::string why = send_filter_(c, r.in_place); !why.empty()) {
      if (unsent_.empty()) unsent_ = std::move(why);
      res.status = props::RunResult::Status::declined;
      return res;
    }
  }
  const CallResult call = call_(c, r.in_place);
  if (!call.not_sent.empty()) {  // no ABI version the kernel speaks expresses c: not the kernel's decline
    ++not_sent_;
    res.status = props::RunResult::Status::declined;
    return res;
  }
  ++calls_;
  const CaseVerdict v = check_call(c, r.in_place, call);
  HandleCall hc{c, r.in_place, v.fault, v.fault.empty() ? "" : v.message.substr(0, v.message.find('\n'))};
  current_.push_back(hc);
  if (call.status == CallStatus::hung) hung_ = true;
  if (!v.accepted) {
    res.status = props::RunResult::Status::declined;
    return res;
  }
  ++accepted_;
  if (!v.pass) {
    res.status = props::RunResult::Status::failed;
    res.failure = v.message;
    res.fault = v.fault;
    return res;
  }
  res.out = call.out;
  res.k_out = call.k_out;
  return res;
}

}  // namespace ropecheck::gate
