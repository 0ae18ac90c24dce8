// A stand-alone kernel library in the style of a user's kernel, for the
// fuzz_plugin replay test: exports rc_rope_apply and links nothing of
// ropecheck (it uses only the header-only conversions of core/dtype.hpp).
//
// theta_i = pow(base, -2i/d) in double; the angle m*scale*theta_i in long
// double, rounded to double; cos and sin in double, rounded to f32; the
// rotation in f32 with RNE stores. Its error is within the loaded-kernel
// model (impls/plugin_loader.hpp): relative angle error <= 2^-53 (3 + ln base)
// <= 2^-52 (3 + |ln base|), cos/sin within 1 u32 (+2^-52) of those of its angle.
#include <cmath>
#include <cstring>
#include <vector>

#include "core/dtype.hpp"
#include "ropecheck/kernel_abi.h"

using namespace ropecheck;

extern "C" __attribute__((visibility("default"))) int rc_rope_apply(const rc_rope_args* a) {
  if (!a || a->abi_version != ROPECHECK_ABI_VERSION || a->dtype > RC_BF16 || a->layout > RC_HALF_SPLIT) return 2;
  if (a->rotary_dim < 2 || a->rotary_dim % 2 || a->rotary_dim > a->head_dim || a->n_heads == 0) return 2;
  if (!a->inv_freq && !(std::isfinite(a->base) && a->base > 0)) return 2;
  if (!std::isfinite(a->position_scale)) return 2;
  for (uint64_t t = 0; t < a->n_tokens; ++t)
    if (a->positions[t] < 0) return 2;
  const Dtype d = Dtype(a->dtype);
  const uint32_t half = a->rotary_dim / 2;
  std::vector<double> theta(half);
  for (uint32_t i = 0; i < half; ++i)
    theta[i] = a->inv_freq ? a->inv_freq[i] : std::pow(a->base, -double(2 * i) / double(a->rotary_dim));
  for (uint64_t t = 0; t < a->n_tokens; ++t) {
    for (uint32_t i = 0; i < half; ++i) {
      const double angle = double((long double)a->positions[t] * (long double)a->position_scale * (long double)theta[i]);
      const float c = float(std::cos(angle)), s = float(std::sin(angle));
      for (uint32_t h = 0; h < a->n_heads; ++h) {
        const size_t base = (size_t(t) * a->n_heads + h) * a->head_dim;
        const size_t k0 = base + (a->layout == RC_INTERLEAVED ? 2 * i : i);
        const size_t k1 = base + (a->layout == RC_INTERLEAVED ? 2 * i + 1 : i + half);
        // The identity only for an exactly zero angle (not one that underflows in double).
        if (a->positions[t] == 0 || a->position_scale == 0 || theta[i] == 0) {
          store_bits(d, a->out, k0, load_bits(d, a->in, k0));
          store_bits(d, a->out, k1, load_bits(d, a->in, k1));
          continue;
        }
        const float x0 = load_f32(d, a->in, k0), x1 = load_f32(d, a->in, k1);
        const float y0 = x0 * c - x1 * s, y1 = x0 * s + x1 * c;
        store_f32(d, a->out, k0, y0);
        store_f32(d, a->out, k1, y1);
      }
    }
    for (uint32_t h = 0; h < a->n_heads; ++h) {
      const size_t base = (size_t(t) * a->n_heads + h) * a->head_dim;
      for (uint32_t k = a->rotary_dim; k < a->head_dim; ++k)
        store_bits(d, a->out, base + k, load_bits(d, a->in, base + k));
    }
  }
  return RC_OK;
}
