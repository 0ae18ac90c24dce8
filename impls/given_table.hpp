// A caller-given cos/sin or angle table (ABI v3 draft, table_kind; docs/abi-v3/README.md) as the built-in
// kernels read it: written once, used by the scalar kernel and every SIMD target, so their rows are the same
// numbers and their outputs the same bits.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "core/dtype.hpp"
#include "core/rope_case.hpp"
#include "impls/scalar_rotate.hpp"
#include "ropecheck/kernel_abi.h"

namespace ropecheck {


struct GivenTable {
  const char* base[2] = {nullptr, nullptr};  // the first element of table and table2
  Dtype dtype[2] = {Dtype::f32, Dtype::f32};
  int64_t row_stride[2] = {0, 0};  // in elements
  int64_t rows = 0;
  bool by_token = false;  // v4 (RC_ROWS_BY_TOKEN): row t is token t's
};

inline bool table_dtype_of(const rc_dl_dtype& t, Dtype& d) {
  if (t.lanes != 1) return false;
  if (t.code == RC_DL_FLOAT && t.bits == 32) d = Dtype::f32;
  else if (t.code == RC_DL_FLOAT && t.bits == 16) d = Dtype::f16;
  else if (t.code == RC_DL_BFLOAT && t.bits == 16) d = Dtype::bf16;
  else return false;
  return true;
}

// The legacy-form call's table (a normalised v3 call with table_kind set, `af` its attention factor): RC_OK
// with its layout in g, or what the kernel returns before writing anything: RC_UNSUPPORTED for a cos/sin
// table with an attention factor other than 1 (the factor belongs in the table's values), 2 for a malformed
// table or a position that is not a row of it.
inline int given_table_of(const rc_rope_args* a, double af, GivenTable& g) {
  const uint32_t k = a->table_kind;
  if (k != RC_TABLE_ANGLE && af != 1.0) return RC_UNSUPPORTED;
  const bool two = k == RC_TABLE_COS_SIN_2 || k == RC_TABLE_COS_SIN_FULL;
  const int64_t width = k == RC_TABLE_COS_SIN_2 ? a->rotary_dim / 2 : a->rotary_dim;
  for (int n = 0; n < (two ? 2 : 1); ++n) {
    const rc_tensor& t = n == 0 ? a->table : a->table2;
    if (!t.data || t.ndim != 2 || !t.shape || t.shape[0] < 1 || t.shape[1] != width) return 2;
    if (t.device.device_type != RC_DL_CPU || !table_dtype_of(t.dtype, g.dtype[n])) return 2;
    if (k == RC_TABLE_ANGLE && g.dtype[n] != Dtype::f32) return 2;
    if (t.strides && t.strides[1] != 1) return RC_UNSUPPORTED;  // (the draft promises a column stride of 1)
    g.row_stride[n] = t.strides ? t.strides[0] : width;
    g.base[n] = static_cast<const char*>(t.data) + t.byte_offset;
    g.rows = n == 0 ? t.shape[0] : std::min(g.rows, t.shape[0]);
  }
  g.by_token = a->abi_version >= 4 && a->table_rows == RC_ROWS_BY_TOKEN;
  if (g.by_token) return g.rows == int64_t(a->n_tokens) && a->n_pos_axes == 1 ? RC_OK : 2;  // a row per token
  const uint64_t axes = a->n_pos_axes;
  for (uint64_t i = 0; i < axes * a->n_tokens; ++i)  // every position a row, before any write
    if (a->positions[i] < 0 || a->positions[i] >= g.rows) return 2;
  return RC_OK;
}

inline float given_value(const GivenTable& g, int n, int64_t row, int64_t col) {
  return load_f32(g.dtype[n], g.base[n], size_t(row * g.row_stride[n] + col));
}

// Token t's row from the table: each pair's cos and sin as the table gives them (an angle table's f32 angle:
// af*cos and af*sin of it in double, rounded to f32), sin negated for the inverse; identity (the pair's bits
// copied) where cos is exactly 1 and sin 0, or an angle is 0 with af 1. Returns whether some pair is identity.
inline bool given_row(const rc_rope_args* a, const GivenTable& g, uint64_t t, double af, bool inverse, CosSin* row) {
  const uint32_t np = a->rotary_dim / 2, kind = a->table_kind;
  bool any = false;
  for (uint32_t i = 0; i < np; ++i) {
    const uint32_t ax = a->pair_axis ? a->pair_axis[i] : 0;
    const int64_t r = g.by_token ? int64_t(t) : a->positions[ax * a->n_tokens + t];
    const int64_t e = pair_dims(Layout(a->layout), a->rotary_dim, i).first;  // the pair's first element
    float c, s;
    bool identity;
    if (kind == RC_TABLE_ANGLE) {
      const double ang = given_value(g, 0, r, e);
      c = float(af * std::cos(ang));
      s = float(af * std::sin(ang));
      identity = ang == 0 && af == 1.0;
    } else {
      c = given_value(g, 0, r, kind == RC_TABLE_COS_SIN_FULL ? e : i);  // full width: at the pair's element
      s = kind == RC_TABLE_COS_SIN_CAT ? given_value(g, 0, r, np + i)
                                       : given_value(g, 1, r, kind == RC_TABLE_COS_SIN_FULL ? e : i);
      identity = c == 1.0f && s == 0.0f;
    }
    row[i] = {c, inverse ? -s : s, identity};
    any = any || identity;
  }
  return any;
}


}  // namespace ropecheck
