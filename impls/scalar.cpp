// The portable scalar kernels.
//
// `scalar`: theta_i and m*scale in long double (64-bit significand), their
// product in double-double, cos/sin once per (token, pair) by the row of
// impls/trig_row.hpp and reused across heads, rounded to f32; the rotation in f32 (f16/bf16 widened exactly) with
// round-to-nearest-even stores. An angle of exactly 0 copies the pair.
//
// `conventional-fp32`: the pipeline of PyTorch-based models, for measuring
// its drift: inv_freq = 1/f32(base^(f32(2i)/f32(d))), angle = f32(f32(m)*inv),
// cosf/sinf. Judged under the fp32 angle model.
#include <cfloat>
#include <cmath>
#include <algorithm>
#include <cstring>
#include <vector>

#include "impls/given_table.hpp"
#include "impls/registry.hpp"
#include "impls/scalar_rotate.hpp"
#include "impls/tensor_form.hpp"
#include "impls/trig_row.hpp"

static_assert(LDBL_MANT_DIG >= 64, "the scalar kernel's angle accuracy needs an 80-bit long double");

namespace ropecheck {

// Rotate every head of one token with a row of cos/sin.
void rotate_token_scalar(const rc_rope_args* a, uint64_t t, const CosSin* row) {
  const Dtype d = Dtype(a->dtype);
  const Layout l = Layout(a->layout);
  const uint32_t npairs = a->rotary_dim / 2;
  const uint32_t o = a->abi_version >= 2 ? a->rotary_offset : 0;
  const size_t es = dtype_size(d);
  for (uint32_t h = 0; h < a->n_heads; ++h) {
    const size_t base = (size_t(t) * a->n_heads + h) * a->head_dim;
    for (uint32_t i = 0; i < npairs; ++i) {
      const auto [d0, d1] = pair_dims(l, a->rotary_dim, i);
      const size_t k0 = base + o + d0, k1 = base + o + d1;
      if (row[i].identity) {
        if (a->out != a->in) {
          store_bits(d, a->out, k0, load_bits(d, a->in, k0));
          store_bits(d, a->out, k1, load_bits(d, a->in, k1));
        }
        continue;
      }
      const float x0 = load_f32(d, a->in, k0), x1 = load_f32(d, a->in, k1);
      const float c = row[i].c, s = row[i].s;
      float y0 = x0 * c - x1 * s;
      float y1 = x0 * s + x1 * c;
      // An attention factor > 1 (ABI v2) is folded into c and s: a product can overflow f32 where the exact
      // output does not. Then the pair is recomputed with exact (double) products, rounded once more: within
      // the f32 arithmetic's allowance. |c|, |s| <= 1 (every v1 call) never takes this path.
      if ((!std::isfinite(y0) || !std::isfinite(y1)) && (std::fabs(c) > 1.0f || std::fabs(s) > 1.0f) &&
          std::isfinite(x0) && std::isfinite(x1)) {
        y0 = float(double(x0) * c - double(x1) * s);
        y1 = float(double(x0) * s + double(x1) * c);
      }
      store_f32(d, a->out, k0, y0);
      store_f32(d, a->out, k1, y1);
    }
    if (a->out != a->in && o > 0)
      std::memcpy(static_cast<char*>(a->out) + base * es, static_cast<const char*>(a->in) + base * es, o * es);
    if (a->out != a->in && o + a->rotary_dim < a->head_dim) {
      const size_t end = o + a->rotary_dim;
      std::memcpy(static_cast<char*>(a->out) + (base + end) * es, static_cast<const char*>(a->in) + (base + end) * es,
                  (a->head_dim - end) * es);
    }
  }
}


extern "C" int ropecheck_scalar_rope(const rc_rope_args* call) {
  rc_rope_args n;  // the call with v1-style zeros read as neutral (impls/registry.hpp)
  if (int rc = normalize_kernel_args(call, n, 4); rc != RC_OK) return rc;
  if (n.abi_version >= 3 && n.q.data) return apply_tensor_form(n, &ropecheck_scalar_rope);
  const rc_rope_args* a = &n;
  const uint32_t npairs = a->rotary_dim / 2;
  const bool v2 = a->abi_version >= 2, v3 = a->abi_version >= 3;
  const uint32_t axes = v2 ? a->n_pos_axes : 1;
  const double af = v2 ? a->attention_factor : 1.0;
  const bool inverse = v3 && a->direction == RC_INVERSE;
  const uint32_t kind = v3 ? a->table_kind : uint32_t(RC_TABLE_NONE);
  GivenTable g;
  if (kind != RC_TABLE_NONE)
    if (int rc = given_table_of(a, af, g); rc != RC_OK) return rc;
  const ThetaTable* theta = kind == RC_TABLE_NONE ? &theta_table_cached(a) : nullptr;  // SIMD kernels' table
  std::vector<CosSin> row(npairs);
  TokenAngle m[4];
  for (uint64_t t = 0; t < a->n_tokens; ++t) {
    if (!theta) {
      given_row(a, g, t, af, inverse, row.data());
      rotate_token_scalar(a, t, row.data());
      continue;
    }
    for (uint32_t ax = 0; ax < axes; ++ax) m[ax] = token_angle(a, *theta, t, ax);
    for (uint32_t i = 0; i < npairs; ++i) {
      const uint32_t ax = v2 && a->pair_axis ? a->pair_axis[i] : 0;
      float c, s;
      cos_sin_pair(m[ax], *theta, i, c, s, af);
      row[i] = {c, inverse ? -s : s, af == 1.0 && angle_is_zero(m[ax], *theta, i)};
    }
    rotate_token_scalar(a, t, row.data());
  }
  return RC_OK;
}

extern "C" int ropecheck_conventional_fp32_rope(const rc_rope_args* call) {
  rc_rope_args n;
  if (int rc = normalize_kernel_args(call, n, 4); rc != RC_OK) return rc;
  const rc_rope_args* a = &n;
  // Of ABI v2 it implements negative positions only: a rotated slice at an offset, position axes, an attention
  // factor or a frequency rule is declined (it would otherwise be ignored). Of v3 nothing: the inverse, a table
  // or the tensor form is declined (a v3 call with every v3 field neutral, as a caller that zero-initialises the
  // struct and writes the header's ROPECHECK_ABI_VERSION sends, is the v1 call it always was).
  if (a->abi_version >= 2 && (a->rotary_offset != 0 || a->n_pos_axes != 1 || a->pair_axis ||
                              a->attention_factor != 1.0 || a->freq_rule))
    return RC_UNSUPPORTED;
  if (a->abi_version >= 3 && (a->direction != RC_FORWARD || a->table_kind != RC_TABLE_NONE || a->q.data))
    return RC_UNSUPPORTED;
  const uint32_t npairs = a->rotary_dim / 2;
  std::vector<float> inv(npairs);
  for (uint32_t i = 0; i < npairs; ++i) {
    if (a->inv_freq) {
      inv[i] = float(a->inv_freq[i]);
    } else {
      const float e = float(2 * i) / float(a->rotary_dim);
      const float p = float(std::pow(double(float(a->base)), double(e)));  // torch's f32 pow
      inv[i] = 1.0f / p;
    }
  }
  std::vector<CosSin> row(npairs);
  for (uint64_t t = 0; t < a->n_tokens; ++t) {
    float mf = float(a->positions[t]);
    if (a->position_scale != 1.0) mf = mf * float(a->position_scale);
    for (uint32_t i = 0; i < npairs; ++i) {
      const float angle = mf * inv[i];
      row[i] = {cosf(angle), sinf(angle), angle == 0};
    }
    rotate_token_scalar(a, t, row.data());
  }
  return RC_OK;
}

}  // namespace ropecheck
