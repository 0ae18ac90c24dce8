// The Highway RoPE kernels: one entry point per compiled target, plus the
// dynamically dispatched one, and hooks that expose each target's storage
// conversions to the tests.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "ropecheck/kernel_abi.h"

namespace ropecheck::simd {

// Store n_pairs pairs (y0[k], y1[k]) as dtype through the kernel's own store
// path: interleaved (out[2k], out[2k+1]) or half-split (out[k], out[n_pairs+k]).
// n_pairs must be a multiple of 16.
using StoreHook = void (*)(uint32_t dtype, uint32_t layout, const float* y0, const float* y1, void* out,
                           size_t n_pairs);
// The inverse: load n_pairs pairs of dtype through the kernel's load path.
using LoadHook = void (*)(uint32_t dtype, uint32_t layout, const void* in, float* x0, float* x1, size_t n_pairs);

// This target's cos/sin row of token `token` (TrigRow; c and s hold
// rotary_dim/2 + kRowPad floats).
using RowHook = void (*)(const rc_rope_args* a, uint64_t token, float* c, float* s);

struct SimdTarget {
  int64_t target = 0;   // the Highway target bit (HWY_AVX2, ...)
  std::string name;     // "simd-avx2": "simd-" + lower-case hwy::TargetName
  rc_rope_apply_fn fn = nullptr;
  StoreHook store = nullptr;
  LoadHook load = nullptr;
  RowHook row = nullptr;
};

// Every compiled target that this CPU supports, best first.
const std::vector<SimdTarget>& supported_targets();

// Every compiled target (supported or not), best first.
std::vector<SimdTarget> compiled_targets();

// The name of the target HWY_DYNAMIC_DISPATCH picks on this CPU.
std::string dispatched_target_name();

// f32 calls whose output is at least this many bytes store it with non-temporal stores (out of place, aligned;
// docs/simd.md): by default the smaller of the reported last-level cache and 32 MiB. Setting it (tests run the
// streaming path on small cases) returns the previous value; the values stored are the same either way.
size_t stream_threshold();
size_t set_stream_threshold(size_t bytes);
// Calls that stored with non-temporal stores so far, every target.
uint64_t streamed_calls();
void note_streamed_call();

}  // namespace ropecheck::simd

// The dynamically dispatched kernel (`simd`).
extern "C" int ropecheck_simd_rope(const rc_rope_args* a);
