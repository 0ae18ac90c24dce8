// The properties of the suite (properties/suite_*.cpp), each a RapidCheck testable over a kernel handle:
// engine.hpp's property_set() lists them with their ids and gate rows; the gtest suite
// (property_*.cpp) and the mutation tests call them directly.
//
// Tolerances. A kernel's bound B (KernelHandle::bound(case): the implementation's bound, or
// the flat bound of the contract's allowances under the gate), in u of the storage type)
// says: for every pair x_i, ||y_i - R x_i|| <= B u max(||x_i||, min_normal),
// where R is the exact rotation by the angle of the kernel's angle model.
// Properties that hold for every rotation (orthogonality, norm preservation,
// layout equivalence) use that R. Properties that hold only for exact angles
// (relative invariance, composition) compare against the exact-angle rotation
// R*, and add the angle model's own deviation: ||R x - R* x|| = 2|sin(d/2)|
// ||x|| <= min(|d|, 2) ||x||, d the model's angle minus the exact angle
// (0 for the exact model). Every tolerance below is built from these per-pair
// terms plus the rounding of the double arithmetic that evaluates the check.
#pragma once

#include <algorithm>
#include <functional>
#include <string>

#include "properties/engine.hpp"
#include "properties/generators.hpp"

namespace ropecheck::props {

// Geometry (suite_geometry.cpp): the kernel applies a rotation per pair.
Property property_OrthogonalityBasisMatrix(KernelHandle& k, Dtype d, Layout l, const Scope& s = {});
Property property_InnerProductsPreserved(KernelHandle& k, Dtype d, Layout l, const Scope& s = {});
Property property_NormPreserved(KernelHandle& k, Dtype d, Layout l, const Scope& s = {});
Property property_RelativeInvariance(KernelHandle& k, Dtype d, Layout l, const Scope& s = {});
Property property_Composition(KernelHandle& k, Dtype d, Layout l, const Scope& s = {});
// Identity and memory (suite_memory.cpp): identity, pass-through (the identity clause), input, in place, layouts.
Property property_PositionZeroIsIdentity(KernelHandle& k, Dtype d, Layout l, const Scope& s = {});
Property property_PassThroughDimsKept(KernelHandle& k, Dtype d, Layout l, const Scope& s = {});
Property property_InputUntouchedOutOfPlace(KernelHandle& k, Dtype d, Layout l, const Scope& s = {});
Property property_InPlaceEqualsOutOfPlace(KernelHandle& k, Dtype d, Layout l, const Scope& s = {});
Property property_InterleavedEqualsPermutedHalfSplit(KernelHandle& k, Dtype d, Layout l, const Scope& s = {});
// Accuracy (suite_accuracy.cpp): against the exact reference.
Property property_WithinBoundOfReference(KernelHandle& k, Dtype d, Layout l, const Scope& s = {});
Property property_SpecialValuesFollowTheRules(KernelHandle& k, Dtype d, Layout l, const Scope& s = {});
// ABI v2 variants (suite_variants.cpp): attention factor, per-axis relative invariance, linear and NTK rules as
// plain RoPE, the offset slice, every rule against the reference. A kernel declining v2 discards.
Property property_AttentionFactorScalesNorms(KernelHandle& k, Dtype d, Layout l, const Scope& s = {});
Property property_RelativeInvariancePerAxis(KernelHandle& k, Dtype d, Layout l, const Scope& s = {});
Property property_LinearRuleEqualsScaledPositions(KernelHandle& k, Dtype d, Layout l, const Scope& s = {});
Property property_NtkRuleEqualsScaledBase(KernelHandle& k, Dtype d, Layout l, const Scope& s = {});
Property property_OffsetSliceEqualsSubHead(KernelHandle& k, Dtype d, Layout l, const Scope& s = {});
Property property_VariantsWithinBoundOfReference(KernelHandle& k, Dtype d, Layout l, const Scope& s = {});
// ABI v3 (suite_variants.cpp): the inverse rotation undoes the forward one, the attention factor kept by both.
Property property_InverseUndoesForward(KernelHandle& k, Dtype d, Layout l, const Scope& s = {});
// <forward(x), y> = <x, inverse(y)> per pair: the inverse is the forward's transpose (a backward pass's equation).
Property property_InverseIsForwardTransposed(KernelHandle& k, Dtype d, Layout l, const Scope& s = {});

// ABI v3 call shapes (suite_tensor.cpp): each of the tensor form's freedoms gives what the plain call gives --
// padded strides = compact, q and k in one call = two calls, varlen and batched implicit positions = one
// explicit call per sequence, int32 = int64 indices, the cos/sin table kinds with equal values agree. Bit for
// bit for a kernel that promises it (KernelHandle::bit_exact_shapes: the built-ins); otherwise each side within
// its allowances (real kernels take other vector and tail paths for other shapes). A kernel that declines the
// tensor form (or tables) discards.
Property property_StridesEqualCompact(KernelHandle& k, Dtype d, Layout l, const Scope& s = {});
Property property_QAndKEqualTwoCalls(KernelHandle& k, Dtype d, Layout l, const Scope& s = {});
Property property_SequencesEqualOneCallEach(KernelHandle& k, Dtype d, Layout l, const Scope& s = {});
Property property_Int32EqualsInt64(KernelHandle& k, Dtype d, Layout l, const Scope& s = {});
Property property_TableKindsAgree(KernelHandle& k, Dtype d, Layout l, const Scope& s = {});
// The same tensor-form call twice gives the same output under the identity clause (races: vLLM #52415).
Property property_SameCallTwiceSameOutput(KernelHandle& k, Dtype d, Layout l, const Scope& s = {});

// Two calls whose exact pairs differ by at most dphi(t, i) radians (times ||y*||): every rotated pair within
// E_a + E_b + dphi ||y*||, every other element the same output (the identity clause); RC_FAIL naming `what`.
// ca and cb have the same tokens, heads and head_dim (oa and ob compact [T][H][D]).
void expect_same_rotation(const KernelHandle& ker, const RopeCase& ca, const Bytes& oa, const RopeCase& cb,
                          const Bytes& ob, const char* what, const std::function<double(size_t, uint32_t)>& dphi,
                          const std::string& context);

// A case shape within the scope (positions at most scope.max_position).
// Rounding of a double sum of n exact products: <= n 2^-53 sum|terms|.
inline double sum_slack(size_t n, double abs_sum) { return double(n + 2) * 0x1p-52 * abs_sum; }

// The buffer offsets of pair i of a head.
struct PairView {
  size_t k0, k1;
};
inline PairView pair_at(const RopeCase& c, size_t token, size_t head, uint32_t i) {
  const auto [d0, d1] = pair_elements(c, i);
  const size_t b = head_offset(c, token, head);
  return {b + d0, b + d1};
}

inline gen::CaseShape scoped(const Scope& scope, gen::CaseShape sh = {}) {
  sh.max_position = std::min(sh.max_position, scope.max_position);
  return sh;
}

// The judgement of an output against the exact reference under the handle's angle model and criteria.
Judgement judge_with(const KernelHandle& k, const RopeCase& c, const Bytes& out);

}  // namespace ropecheck::props
