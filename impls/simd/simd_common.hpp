// Shared (target-independent) parts of the Highway RoPE kernels: the row
// padding and the per-token fallback for rows holding an angle of exactly 0.
// The cos/sin row's tables (ThetaTable, TokenAngle) are in impls/trig_row.hpp.
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

// One token with the scalar arithmetic (same f32 operations as `scalar`),
// copying the bits of pairs whose angle is exactly 0. Used for the rare rows
// that hold such a pair (position 0, scale 0, a zero table entry) when the
// attention factor is 1. m[k]: position axis k's angle factor; pair i's axis
// is pair_axis[i] (NULL: axis 0); c, s: the token's row.
void rotate_token_scalar(const rc_rope_args* a, const ThetaTable& th, const TokenAngle* m, const uint8_t* pair_axis,
                         uint64_t t, const float* c, const float* s);

}  // namespace ropecheck::simd
