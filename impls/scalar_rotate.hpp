// The scalar rotation of one token, shared by the `scalar` kernel and the
// SIMD kernels' rows that hold an angle of exactly 0 (same f32 operations,
// so the results are bit-identical).
#pragma once

#include <cstdint>

#include "ropecheck/kernel_abi.h"

namespace ropecheck {

struct CosSin {
  float c, s;
  bool identity;  // the angle is exactly 0: the pair's bits are copied
};

// Rotate every head of token t with a row of rotary_dim/2 cos/sin; copies
// pass-through dims when out != in.
void rotate_token_scalar(const rc_rope_args* a, uint64_t t, const CosSin* row);

}  // namespace ropecheck
