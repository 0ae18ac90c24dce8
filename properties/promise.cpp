#include "properties/promise.hpp"

namespace ropecheck {

KernelErrorModel loaded_kernel_error_model(AngleModel model) {
  if (model == AngleModel::fp32) return {2.0, 0.0, false};
  return {2.0, 0x1p-52, true};
}

std::optional<KernelPromise> builtin_promise(std::string_view name) {
  KernelPromise p;
  p.contract.identity_bits = true;  // every built-in copies the input's bits at angle 0
  if (name == "scalar" || name == "simd" || name.rfind("simd-", 0) == 0) {
    p.angle_model = AngleModel::exact;
    p.error_model = KernelErrorModel::scalar_long_double();
    return p;
  }
  if (name == "conventional-fp32") {
    p.angle_model = AngleModel::fp32;
    p.error_model = KernelErrorModel::conventional_fp32();
    return p;
  }
  return std::nullopt;
}

KernelPromise loaded_promise(AngleModel model) {
  KernelPromise p;
  p.angle_model = model;
  p.error_model = loaded_kernel_error_model(model);
  return p;
}

KernelPromise promise_of(const Implementation& impl) {
  if (auto p = builtin_promise(impl.name)) return *p;
  return loaded_promise();
}

}  // namespace ropecheck
