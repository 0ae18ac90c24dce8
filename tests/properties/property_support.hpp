// The gtest side of the property suite: the (implementation x dtype x layout)
// parameters read from the registry at run time, and running a property (one
// definition each, properties/suite.hpp) under RapidCheck inside a gtest test
// with a failure message that carries the RC_PARAMS reproduce string.
#pragma once

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "core/rope_case.hpp"
#include "impls/registry.hpp"
#include "properties/engine.hpp"
#include "properties/suite.hpp"

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
  // The kernel as a property handle (properties/engine.hpp): its implementation's bound, its angle model.
  KernelHandle& handle() {
    if (!handle_) handle_.emplace(impl());
    return *handle_;
  }
  Dtype dtype() const { return GetParam().dtype; }
  Layout layout() const { return GetParam().layout; }

 private:
  std::optional<ImplementationHandle> handle_;
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

}  // namespace ropecheck::props
