// What the judging side holds a kernel to. Kernels (impls/) know nothing of how they are judged: the angle
// model, the error model a bound is derived from and the contract are attached here, by name for the
// built-ins, from the options (--angle-model, --contract) for a loaded kernel.
#pragma once

#include <optional>
#include <string_view>

#include "core/rope_case.hpp"
#include "impls/registry.hpp"
#include "properties/contract.hpp"
#include "properties/error_model.hpp"
#include "reference/reference.hpp"

namespace ropecheck {

struct KernelPromise {
  AngleModel angle_model = AngleModel::exact;  // the reference's angles it is judged against
  KernelErrorModel error_model;                // what its bound is derived from
  Contract contract;                           // what it promises (built-ins: identity=bits)
  // The error bound (in u of the storage type) for a case.
  double bound(const RopeCase& c) const { return error_bound(error_model, c); }
};

// The error model a loaded kernel is held to by default: the rotation in f32 arithmetic with RNE stores,
// cos/sin within 1 ulp of f32 (2 u32) of the exact cos/sin of its angle, and the angle itself computed in
// double (relative error 2^-52 per step, times (3 + |ln base|) for base^(-2i/d)). Under the fp32 angle model
// the angle is that model's angle exactly (angle_rel 0).
KernelErrorModel loaded_kernel_error_model(AngleModel model);

// A built-in kernel's promise, by its registry name: scalar and every simd* kernel (exact angles, long
// double angle arithmetic), conventional-fp32 (the fp32 angle model); all copy the input's bits at angle 0.
// nullopt for any other name.
std::optional<KernelPromise> builtin_promise(std::string_view name);
// A loaded kernel's (or an external program's): judged under `model`, the default contract.
KernelPromise loaded_promise(AngleModel model = AngleModel::exact);
// builtin_promise(impl.name), else loaded_promise().
KernelPromise promise_of(const Implementation& impl);

}  // namespace ropecheck
