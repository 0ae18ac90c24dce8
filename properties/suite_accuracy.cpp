// Accuracy against the exact reference and special values:
//
//  - accuracy: every pair's error against reference_rope(case, the handle's angle model) is within the
//    handle's criteria (judge_output);
//  - special values: NaN and +-Inf inputs are judged by judge_output's documented rules (the reference gives
//    the exact special results).
#include "properties/failure.hpp"
#include "properties/generators.hpp"
#include "properties/judge.hpp"
#include "properties/suite.hpp"
#include "reference/reference.hpp"

namespace ropecheck::props {

Judgement judge_with(const KernelHandle& k, const RopeCase& c, const Bytes& out) {
  const ReferenceOutput ref = reference_rope(c, ReferenceOptions{k.angle_model()});
  JudgeOptions jo;
  jo.keep_values = false;
  return judge_output(c, ref, out.data(), k.criteria(c), jo);
}

Property property_WithinBoundOfReference(KernelHandle& ker, Dtype d, Layout l, const Scope& scope) {
  return [&ker, d, l, scope] {
    const RopeCase c = *gen::rope_case(d, l, gen::Values::finite, scoped(scope));
    const Bytes out = run_or_discard(ker, c);
    const Judgement j = judge_with(ker, c, out);
    if (!j.ok())
      RC_FAIL(FailureText("accuracy of " + ker.name() + " under the " + std::string(to_string(ker.angle_model())) +
                          " angle model")
                  .note(": " + j.report())
                  .str());
  };
}

Property property_SpecialValuesFollowTheRules(KernelHandle& ker, Dtype d, Layout l, const Scope& scope) {
  return [&ker, d, l, scope] {
    const RopeCase c = *gen::rope_case(d, l, gen::Values::specials, scoped(scope));
    for (int pass = 0; pass < 2; ++pass) {
      const std::optional<Bytes> got = pass == 0 ? run_or_discard(ker, c) : run_if_accepted(ker, c, {true, -1});
      if (!got) continue;  // no in-place mode: the out-of-place pass was checked
      const Bytes& out = *got;
      const Judgement j = judge_with(ker, c, out);
      if (!j.ok())
        RC_FAIL(FailureText("special values" + std::string(pass ? " (in place)" : "") + " of " + ker.name() +
                            " under the " + std::string(to_string(ker.angle_model())) + " angle model")
                    .note(": " + j.report())
                    .str());
    }
  };
}

}  // namespace ropecheck::props
