// Kernels under test. Every implementation, built-in or loaded, is called
// through the C ABI (rc_rope_apply_fn), so one code path judges them all.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/rope_case.hpp"
#include "ropecheck/kernel_abi.h"

namespace ropecheck {

// A kernel: its entry point (or library) and what it accepts. How it is judged (angle model, error model,
// contract) is the judging side's: properties/promise.hpp.
struct Implementation {
  std::string name;
  std::string description;
  rc_rope_apply_fn fn = nullptr;  // built-in (or loaded in this process on purpose: fuzzers, tests)
  std::vector<Dtype> dtypes;
  std::vector<Layout> layouts;
  bool bit_exact_layouts = true;  // interleaved(x) == P^-1 halfsplit(P x) bit for bit (a fact of its code)
  std::string library;  // a kernel library the gate's host loads (fn null): impls/plugin_loader.hpp
  int host_fd = -1;     // >= 0: calls are served by the process at the other end of this socket (fn null, library
                        // empty): the Python package's own process (gate/isolation.hpp KernelSource, docs/python.md)
  bool bit_exact_shapes = true;  // each head's bits do not depend on the call's shape (ABI v3: strides, q and k,
                                 // sequences, index widths, table kinds; a fact of its code)

  bool supports(Dtype d) const;
  bool supports(Layout l) const;
};

// All registered implementations, built-in first (scalar, conventional-fp32,
// then one per compiled SIMD target).
const std::vector<Implementation>& implementations();
const Implementation* find_implementation(std::string_view name);
std::vector<std::string> implementation_names();

// Call a kernel on a case: out is resized to the case's bytes and written.
// Returns the kernel's return code. The call goes at the version the kernel speaks (core/abi_versions.hpp:
// probed once per entry point); a case no version it speaks expresses is not made: RC_UNSUPPORTED.
int run_kernel(const Implementation& impl, const RopeCase& c, Bytes& out);
// In place: out starts as a copy of the input and is passed as both in and out.
int run_kernel_in_place(const Implementation& impl, const RopeCase& c, Bytes& out);

// ---- built-in kernels (ABI entry points) ---------------------------------
extern "C" int ropecheck_scalar_rope(const rc_rope_args* a);
extern "C" int ropecheck_conventional_fp32_rope(const rc_rope_args* a);

// Shared argument checks for built-in kernels: RC_OK when the call is well
// formed, RC_UNSUPPORTED for an abi_version outside 1..ROPECHECK_ABI_VERSION, 2 (an error) otherwise.
// A v3 call in the tensor form passes with its tensors unchecked: a kernel that takes the tensor form
// checks them (impls/tensor_form.hpp), one that does not declines it.
// `newest`: the newest version the kernel takes (each built-in kernel names its own: scalar and the SIMD
// targets 3; conventional-fp32 3, declining every v3 feature).
int check_kernel_args(const rc_rope_args* a, uint32_t newest);
// The call a built-in kernel computes: n is a copy of *a with every field added after a's abi_version at its
// neutral value (of a v1 call only the v1 fields are read: a v1 caller's struct ends at `out`), and the zeros
// a v1-style caller leaves in the fields v2 added (a zero-initialised struct, abi_version set to the header's
// ROPECHECK_ABI_VERSION) read as neutral: n_pos_axes 0 is one axis, attention_factor 0 is 1 (a zero in a field
// a version adds means "as before"; docs/gate.md, "ABI versions"). Returns check_kernel_args(&n).
int normalize_kernel_args(const rc_rope_args* a, rc_rope_args& n, uint32_t newest);

// Hook for implementation families compiled elsewhere (SIMD targets).
void add_simd_implementations(std::vector<Implementation>& out);

}  // namespace ropecheck
