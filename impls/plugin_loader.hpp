// Loading a kernel under test from a shared library: dlopen the file, look up
// rc_rope_apply (include/ropecheck/kernel_abi.h) and wrap it as an
// Implementation, so the judge, the reference and the gate treat it exactly as
// a built-in kernel.
#pragma once

#include <optional>
#include <string>

#include "impls/registry.hpp"

namespace ropecheck {

// The error model a loaded kernel is held to by default: the rotation in f32
// arithmetic with RNE stores, cos/sin within 1 ulp of f32 (2 u32) of the exact
// cos/sin of its angle, and the angle itself computed in double (relative
// error 2^-52 per step, times (3 + |ln base|) for base^(-2i/d)). Under the
// fp32 angle model the angle is that model's angle exactly (angle_rel 0).
KernelErrorModel loaded_kernel_error_model(AngleModel model);

struct PluginLoad {
  std::optional<Implementation> impl;  // set on success
  std::string error;                   // why not, on failure
};

// Load PATH; the implementation's name is the file stem ("libmykernel").
// Every dtype and layout is listed as supported: a kernel declines what it
// does not do by returning RC_UNSUPPORTED. The library stays loaded for the
// life of the process.
PluginLoad load_kernel_plugin(const std::string& path, AngleModel model = AngleModel::exact);

}  // namespace ropecheck
