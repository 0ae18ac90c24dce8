// The tensor form of an ABI v3 (draft) call, for the built-in kernels: written once, shared by the scalar
// kernel and every SIMD target (docs/abi-v3/README.md).
//
// A tensor-form call (q.data non-NULL) describes q and k by DLPack tensors with any strides, q and k with
// their own head counts, explicit int32/int64 positions or implicit ones (row index plus an offset per
// sequence), and varlen batches (cu_seqlens). Every head vector of it is contiguous (element stride 1) and is
// rotated by the same map as a legacy call's head vector at the same position(s). So a built-in kernel
// computes a tensor-form call as a sequence of legacy calls to its own entry point: one per token of q and
// of k, all of the token's heads in one call when they lie head_dim apart in the input and the output, one
// per head otherwise. Each head's output is then bit for bit what the legacy form gives it.
//
// Before anything is written, the whole call is checked: the tensors' shapes, dtypes and strides, the
// positions (their int64 value, and a row of the table for each), and the kernel's answer to a legacy call
// of no tokens with every other field of the call (its features: direction, table, frequency rule, ...).
// A call that is malformed returns 2, one with a feature the kernel declines RC_UNSUPPORTED; neither writes.
#pragma once

#include <cstdint>
#include <vector>

#include "ropecheck/kernel_abi.h"

namespace ropecheck {


// `n`: a normalised v3 call in the tensor form (impls/registry.hpp, normalize_kernel_args). `legacy`: the
// kernel's entry point, which computes legacy-form v3 calls. Returns RC_OK, RC_UNSUPPORTED or 2.
int apply_tensor_form(const rc_rope_args& n, rc_rope_apply_fn legacy);

// The positions a well-formed tensor-form call gives each token of q (and of k: the same ones), axis-major as
// the legacy form's (positions[axis * T' + t] over the T' = B*S or T tokens in row-major order). Returns
// RC_OK, or 2 when the call's tensors are malformed or a position does not fit in int64 (implicit ones).
int tensor_form_positions(const rc_rope_args& n, std::vector<int64_t>& positions);


}  // namespace ropecheck
