// Shared (target-independent) parts of the Highway RoPE kernels: the per-token
// cos/sin row, computed exactly as the `scalar` kernel computes it, and the
// per-token fallback for rows holding an angle of exactly 0.
#pragma once

#include <cfloat>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "core/rope_case.hpp"
#include "impls/scalar_rotate.hpp"
#include "impls/trig_row.hpp"
#include "ropecheck/kernel_abi.h"

static_assert(LDBL_MANT_DIG >= 64, "the SIMD kernels' angle accuracy needs an 80-bit long double");

namespace ropecheck::simd {

// Padding after each row so that whole vectors (up to 16 f32 lanes) can be
// loaded past the last pair.
inline constexpr size_t kRowPad = 16;

// theta_i exactly as `scalar`: long double powl, or the table.
inline std::vector<long double> thetas(const rc_rope_args* a) {
  const uint32_t np = a->rotary_dim / 2;
  std::vector<long double> th(np);
  for (uint32_t i = 0; i < np; ++i)
    th[i] = a->inv_freq ? (long double)a->inv_freq[i]
                        : powl((long double)a->base, -(long double)(2 * i) / (long double)a->rotary_dim);
  return th;
}

// The same values, cached per thread for the last (base, rotary_dim) when no
// table is given: 64 powl cost ~25 us, which dominated a decode call.
inline const std::vector<long double>& thetas_cached(const rc_rope_args* a) {
  thread_local double base = 0;
  thread_local uint32_t rotary_dim = 0;
  thread_local std::vector<long double> th;
  thread_local std::vector<long double> table;
  if (a->inv_freq) {
    table = thetas(a);
    return table;
  }
  if (rotary_dim != a->rotary_dim || !(base == a->base) || th.size() != a->rotary_dim / 2) {
    th = thetas(a);
    base = a->base;
    rotary_dim = a->rotary_dim;
  }
  return th;
}

// cos/sin of one token: accurate_cos_sin of the long double angle, the same
// function `scalar` calls (so the rows are bit-identical). Returns true when some pair's angle is
// exactly 0 (that pair must copy its input bits).
inline bool trig_row(const rc_rope_args* a, const long double* th, uint64_t t, float* c, float* s) {
  const uint32_t np = a->rotary_dim / 2;
  const long double ms = (long double)a->positions[t] * (long double)a->position_scale;
  bool any_identity = false;
  for (uint32_t i = 0; i < np; ++i) {
    const long double angle = ms * th[i];
    accurate_cos_sin(angle, c[i], s[i]);
    any_identity |= angle == 0;
  }
  return any_identity;
}

// One token with the scalar arithmetic (same f32 operations as `scalar`),
// copying the bits of pairs whose angle is exactly 0. Used for the rare rows
// that hold such a pair (position 0, scale 0, a zero table entry).
void rotate_token_scalar(const rc_rope_args* a, const long double* th, uint64_t t, const float* c,
                         const float* s);

}  // namespace ropecheck::simd
