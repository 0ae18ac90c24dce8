// A RoPE case: every parameter of one kernel call plus its input values.
// Cases flow through the harness: case -> kernel -> judged against the
// reference -> finding -> report.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/dtype.hpp"
#include "ropecheck/kernel_abi.h"

namespace ropecheck {

// Raw storage of n elements of a dtype.
using Bytes = std::vector<unsigned char>;

struct RopeCase {
  Dtype dtype = Dtype::f32;
  Layout layout = Layout::interleaved;
  uint32_t head_dim = 0;
  uint32_t rotary_dim = 0;
  uint32_t n_heads = 1;
  std::vector<int64_t> positions;  // one per token
  double base = 10000.0;
  double position_scale = 1.0;
  std::vector<double> inv_freq;  // empty, or rotary_dim/2 frequencies replacing theta_i
  Bytes input;                   // [n_tokens][n_heads][head_dim] of dtype

  size_t n_tokens() const { return positions.size(); }
  size_t n_elements() const { return n_tokens() * n_heads * head_dim; }
  size_t n_bytes() const { return n_elements() * dtype_size(dtype); }
  size_t n_pairs_per_head() const { return rotary_dim / 2; }

  // Empty when the case is well formed for the reference; otherwise why not.
  // Kernels additionally require positions >= 0 (see validate_for_kernel).
  std::string validate() const;
  std::string validate_for_kernel() const;

  // The ABI call for this case, reading `in` and writing `out`.
  rc_rope_args args(const void* in, void* out) const;

  // One line: dtype, layout, dims, heads, tokens, base, scale, table.
  std::string summary() const;
};

// The element offsets (within a head) of pair i for a layout.
inline std::pair<uint32_t, uint32_t> pair_dims(Layout l, uint32_t rotary_dim, uint32_t i) {
  if (l == Layout::interleaved) return {2 * i, 2 * i + 1};
  return {i, i + rotary_dim / 2};
}

// Element offset (within the whole buffer) of the first element of a head.
inline size_t head_offset(const RopeCase& c, size_t token, size_t head) {
  return (token * c.n_heads + head) * c.head_dim;
}

// Build a case from an ABI call (copies the input).
RopeCase case_from_args(const rc_rope_args& a);

// C99 hex float of a double ("%a").
std::string hexfloat(double v);

}  // namespace ropecheck
