#include "properties/property_support.hpp"

#include <algorithm>
#include <cctype>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "reference/reference.hpp"

namespace ropecheck::props {

void PrintTo(const KernelParam& p, std::ostream* os) {
  *os << p.impl << " " << to_string(p.dtype) << " " << to_string(p.layout);
}

std::vector<KernelParam> kernel_params() {
  std::vector<KernelParam> v;
  for (const Implementation& impl : implementations())
    for (Dtype d : kAllDtypes)
      for (Layout l : kAllLayouts)
        if (impl.supports(d) && impl.supports(l)) v.push_back({impl.name, d, l});
  return v;
}

std::vector<KernelParam> kernel_dtype_params() {
  std::vector<KernelParam> v;
  for (const Implementation& impl : implementations())
    for (Dtype d : kAllDtypes)
      if (impl.supports(d) && impl.supports(Layout::interleaved) && impl.supports(Layout::half_split))
        v.push_back({impl.name, d, Layout::interleaved});
  return v;
}

std::string param_name_no_layout(const testing::TestParamInfo<KernelParam>& info) {
  std::string s = info.param.impl + "_" + std::string(to_string(info.param.dtype));
  for (char& ch : s)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return s;
}

std::string param_name(const testing::TestParamInfo<KernelParam>& info) {
  std::string s = info.param.impl + "_" + std::string(to_string(info.param.dtype));
  if (info.param.layout == Layout::half_split) s += "_half_split";
  else s += "_interleaved";
  for (char& ch : s)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return s;
}

const Implementation& KernelTest::impl() const {
  const Implementation* p = find_implementation(GetParam().impl);
  if (!p) throw std::logic_error("implementation vanished from the registry: " + GetParam().impl);
  return *p;
}

std::string current_test_id() {
  const auto* info = testing::UnitTest::GetInstance()->current_test_info();
  return std::string(info->test_suite_name()) + "/" + info->name();
}

std::string failure_text(const rc::detail::TestResult& result, const std::string& id) {
  if (result.is<rc::detail::SuccessResult>()) return {};
  std::ostringstream o;
  rc::detail::printResultMessage(result, o);
  o << "\n";
  if (result.is<rc::detail::FailureResult>()) {
    rc::detail::Configuration cfg = rc::detail::configuration();
    cfg.reproduce.clear();
    cfg.reproduce[id] = result.get<rc::detail::FailureResult>().reproduce;
    const auto* info = testing::UnitTest::GetInstance()->current_test_info();
    o << "To reproduce: RC_PARAMS=\"" << rc::detail::configToMinimalString(cfg) << "\" ropecheck_properties";
    if (info) o << " --gtest_filter='" << info->test_suite_name() << "." << info->name() << "'";
    o << "\n";
  } else {
    o << "(RapidCheck did not reach a verdict: a property that discards or errors cannot pass)\n";
  }
  return o.str();
}

}  // namespace ropecheck::props
