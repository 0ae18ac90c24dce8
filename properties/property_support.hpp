// Shared machinery of the property suite: the (implementation x dtype x
// layout) parameters read from the registry at run time, running a property
// under RapidCheck inside a gtest test with a failure message that carries the
// RC_PARAMS reproduce string, running kernels, and the error terms the
// tolerances are derived from.
//
// Tolerances. A kernel's bound B (impl.bound(case), in u of the storage type)
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

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "core/rope_case.hpp"
#include "impls/registry.hpp"

namespace ropecheck::props {

struct KernelParam {
  std::string impl;  // registry name
  Dtype dtype;
  Layout layout;
};

void PrintTo(const KernelParam& p, std::ostream* os);

// Every registered implementation x supported dtype x supported layout.
std::vector<KernelParam> kernel_params();
// Every registered implementation x supported dtype (layout: interleaved),
// for implementations supporting both layouts.
std::vector<KernelParam> kernel_dtype_params();
// gtest parameter name: "conventional_fp32_f16_half_split".
std::string param_name(const testing::TestParamInfo<KernelParam>& info);
// "conventional_fp32_f16" (suites that run both layouts in one test).
std::string param_name_no_layout(const testing::TestParamInfo<KernelParam>& info);

class KernelTest : public testing::TestWithParam<KernelParam> {
 protected:
  const Implementation& impl() const;
  Dtype dtype() const { return GetParam().dtype; }
  Layout layout() const { return GetParam().layout; }
};

// The RapidCheck test id of the current gtest test ("Suite/Test/param").
std::string current_test_id();

// Empty on success; otherwise the whole failure text: RapidCheck's result
// (counterexample, the property's message), the RC_PARAMS reproduce string
// and the gtest filter to rerun it.
std::string failure_text(const rc::detail::TestResult& result, const std::string& id);

// Run a property under RapidCheck with the current test's id.
template <typename Testable>
rc::detail::TestResult run_property(const std::string& id, Testable&& testable) {
  rc::detail::TestMetadata md;
  md.id = id;
  md.description = id;
  return rc::detail::checkTestable(std::forward<Testable>(testable), md);
}

// Run a property without RapidCheck's console reporting (no end-of-run
// reproduce banner): for properties that are expected to fail.
class SilentListener : public rc::detail::TestListener {
 public:
  void onTestCaseFinished(const rc::detail::CaseDescription&) override {}
  void onShrinkTried(const rc::detail::CaseDescription&, bool) override {}
  void onTestFinished(const rc::detail::TestMetadata&, const rc::detail::TestResult&) override {}
};
template <typename Testable>
rc::detail::TestResult run_property_quiet(const std::string& id, Testable&& testable,
                                          const rc::detail::TestParams& params) {
  rc::detail::TestMetadata md;
  md.id = id;
  md.description = id;
  SilentListener listener;
  return rc::detail::checkProperty(rc::detail::toProperty(std::forward<Testable>(testable)), md, params, listener);
}

// Run a property inside the current gtest test; a failure fails the test with
// failure_text.
template <typename Testable>
void check_property(Testable&& testable) {
  const std::string id = current_test_id();
  const auto result = run_property(id, std::forward<Testable>(testable));
  const std::string text = failure_text(result, id);
  if (!text.empty()) ADD_FAILURE() << text;
}

// Run the kernel out of place / in place. RC_UNSUPPORTED discards the case;
// any other non-zero return fails it.
Bytes run_or_discard(const Implementation& impl, const RopeCase& c);
Bytes run_in_place_or_discard(const Implementation& impl, const RopeCase& c);

// Value of element k of a buffer of the case's dtype, exactly, as a double.
inline double value(const RopeCase& c, const void* buf, size_t k) { return load_f32(c.dtype, buf, k); }

// ||(a, b)|| in double; a and b are f32 values, so a*a + b*b is exact up to
// one rounding (relative error <= 2^-52 after the square root).
double pair_norm(double a, double b);

// B u max(||x||, min_normal): the kernel's allowed error on a pair of norm n.
double pair_error_allowance(const RopeCase& c, double bound, double n);

// The angle model's deviation from the exact rotation for pair i at position
// m, as a multiple of ||x||: min(|model angle - exact angle| + slack, 2);
// 0 for the exact model.
double model_deviation(const Implementation& impl, const RopeCase& c, uint32_t pair, int64_t m);

// ---- the properties, as RapidCheck testables for one (implementation, dtype,
// layout); the parameterised tests run them for the registry, and the mutant
// tests (property_mutants.cpp) run them against deliberately broken kernels.
using Property = std::function<void()>;
Property property_OrthogonalityBasisMatrix(const Implementation& im, Dtype d, Layout l);
Property property_InnerProductsPreserved(const Implementation& im, Dtype d, Layout l);
Property property_NormPreserved(const Implementation& im, Dtype d, Layout l);
Property property_RelativeInvariance(const Implementation& im, Dtype d, Layout l);
Property property_Composition(const Implementation& im, Dtype d, Layout l);
Property property_PositionZeroIsIdentity(const Implementation& im, Dtype d, Layout l);
Property property_PassThroughDimsBitExact(const Implementation& im, Dtype d, Layout l);
Property property_InputUntouchedOutOfPlace(const Implementation& im, Dtype d, Layout l);
Property property_InPlaceEqualsOutOfPlace(const Implementation& im, Dtype d, Layout l);
Property property_InterleavedEqualsPermutedHalfSplit(const Implementation& im, Dtype d, Layout l);
Property property_WithinBoundOfReference(const Implementation& im, Dtype d, Layout l);
Property property_SpecialValuesFollowTheRules(const Implementation& im, Dtype d, Layout l);

// Hex bits of an element for messages.
std::string bits_text(const RopeCase& c, const void* buf, size_t k);

}  // namespace ropecheck::props
