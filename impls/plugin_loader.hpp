// Kernels under test from shared libraries. The gate never loads one into its
// own process: it describes the library (plugin_implementation) and its kernel
// host (gate/isolation.hpp) opens it with open_kernel_library. Tools that run a
// kernel in-process on purpose (the libFuzzer target, unit tests of trusted
// kernels) use load_kernel_plugin.
#pragma once

#include <optional>
#include <string>

#include "impls/registry.hpp"

namespace ropecheck {

// Check that PATH names a regular file ("" when it does, else why not).
std::string check_kernel_path(const std::string& path);

// dlopen PATH and look up rc_rope_apply. On failure fn is null and error says why.
struct OpenedKernel {
  rc_rope_apply_fn fn = nullptr;
  std::string error;
};
OpenedKernel open_kernel_library(const std::string& path);

// An implementation naming the library without loading it (impl.library set,
// impl.fn null); the name is the file stem ("libmykernel"). Every dtype and
// layout is listed as supported: a kernel declines what it does not do by
// returning RC_UNSUPPORTED. nullopt with error set when the path is not a file.
struct PluginLoad {
  std::optional<Implementation> impl;  // set on success
  std::string error;                   // why not, on failure
};
PluginLoad plugin_implementation(const std::string& path);

// A kernel whose calls the process at the other end of host_fd serves (`--host-fd`: the Python package,
// docs/python.md): every dtype and layout listed, nothing promised bit-exact, named `name`.
Implementation served_implementation(int host_fd, const std::string& name);

// plugin_implementation, then open_kernel_library in this process (impl.fn
// set). The library stays loaded for the life of the process.
PluginLoad load_kernel_plugin(const std::string& path);

}  // namespace ropecheck
