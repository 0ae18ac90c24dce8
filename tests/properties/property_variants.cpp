// The ABI v2 variant properties (definitions and tolerances in suite_variants.cpp) for every registered kernel
// that takes v2 calls. A kernel that declines a plain v2 call (an attention factor of 1/2) is skipped: declining
// is never a failure, and RapidCheck cannot pass a property whose every case is discarded.
//
//  - attention factor: ||out pair|| = s ||in pair||;
//  - relative invariance per axis (and pairs on other axes unmoved);
//  - linear rule = plain RoPE at positions scaled by 1/f; NTK rule = plain RoPE with base alpha^(R/(R-2));
//  - offset slice: outside, the input kept (the identity clause); the slice = the sub-head's output;
//  - variant accuracy: every rule against the exact reference;
//  - ABI v3: inverse(forward(x)) = s^2 x; <forward(x), y> = <x, inverse(y)>.
#include "properties/property_support.hpp"
#include "reference/reference.hpp"

namespace ropecheck::props {

class Variants : public KernelTest {
 protected:
  // Whether the kernel takes a v2 call of this dtype and layout at all.
  bool accepts_v2() { return handle().run(v2_probe_case(dtype(), layout()), {}).status != RunResult::Status::declined; }
};

#define ROPECHECK_V2_PROPERTY(Name)                                                             \
  TEST_P(Variants, Name) {                                                                      \
    if (!accepts_v2()) GTEST_SKIP() << GetParam().impl << " declines v2 calls (RC_UNSUPPORTED)"; \
    check_property(property_##Name(handle(), dtype(), layout()));                               \
  }

ROPECHECK_V2_PROPERTY(AttentionFactorScalesNorms)
ROPECHECK_V2_PROPERTY(RelativeInvariancePerAxis)
ROPECHECK_V2_PROPERTY(LinearRuleEqualsScaledPositions)
ROPECHECK_V2_PROPERTY(NtkRuleEqualsScaledBase)
ROPECHECK_V2_PROPERTY(OffsetSliceEqualsSubHead)
ROPECHECK_V2_PROPERTY(VariantsWithinBoundOfReference)

// ABI v3: the inverse undoes the forward rotation (kernels that decline an inverse call are skipped).
TEST_P(Variants, InverseUndoesForward) {
  RopeCase probe = v2_probe_case(dtype(), layout());
  probe.attention_factor = 1.0;
  probe.direction = Direction::inverse;
  if (handle().run(probe, {}).status == RunResult::Status::declined)
    GTEST_SKIP() << GetParam().impl << " declines the inverse rotation (RC_UNSUPPORTED)";
  check_property(property_InverseUndoesForward(handle(), dtype(), layout()));
}

TEST_P(Variants, InverseIsForwardTransposed) {
  for (const RopeCase& probe : inverse_probe_cases(dtype(), layout()))
    if (handle().run(probe, {}).status == RunResult::Status::declined)
      GTEST_SKIP() << GetParam().impl << " declines the inverse rotation (RC_UNSUPPORTED)";
  check_property(property_InverseIsForwardTransposed(handle(), dtype(), layout()));
}

// ABI v3 call shapes (suite_tensor.cpp): kernels that decline one of the property's plainest calls are skipped.
#define ROPECHECK_V3_SHAPE_PROPERTY(Name, probes)                                                  \
  TEST_P(Variants, Name) {                                                                         \
    for (const RopeCase& probe : probes(dtype(), layout()))                                        \
      if (handle().run(probe, {}).status == RunResult::Status::declined)                           \
        GTEST_SKIP() << GetParam().impl << " declines " << probe.summary() << " (RC_UNSUPPORTED)"; \
    check_property(property_##Name(handle(), dtype(), layout()));                                 \
  }

ROPECHECK_V3_SHAPE_PROPERTY(StridesEqualCompact, tensor_probe_cases)
ROPECHECK_V3_SHAPE_PROPERTY(QAndKEqualTwoCalls, q_and_k_probe_cases)
ROPECHECK_V3_SHAPE_PROPERTY(SequencesEqualOneCallEach, sequences_probe_cases)
ROPECHECK_V3_SHAPE_PROPERTY(Int32EqualsInt64, int32_probe_cases)
ROPECHECK_V3_SHAPE_PROPERTY(SameCallTwiceSameOutput, tensor_probe_cases)

// Tables of every kind, legacy form (the built-ins take all three cos/sin kinds).
std::vector<RopeCase> table_probes(Dtype d, Layout l) {
  RopeCase c = v2_probe_case(d, l);
  c.attention_factor = 1.0;
  return {*with_given_table(c, TableKind::cos_sin_cat, Dtype::f32, TablePipeline::correctly_rounded)};
}
ROPECHECK_V3_SHAPE_PROPERTY(TableKindsAgree, table_probes)

INSTANTIATE_TEST_SUITE_P(Registry, Variants, testing::ValuesIn(kernel_params()), param_name);

}  // namespace ropecheck::props
