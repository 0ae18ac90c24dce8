// The built-in kernels' in-kernel frequency tables (ABI v2 rc_freq_rule): each Hugging Face rule of
// include/ropecheck/kernel_abi.h evaluated in long double (64-bit significand), the way a careful
// kernel builds its own table. Formulas as docs/variants.md (HF modeling_rope_utils.py); every step is a
// long double operation (powl, logl), so theta carries a few 2^-64 relative error -- the same order as
// the powl table of plain RoPE, far inside the kernels' contracts. Kernels know nothing of ropecheck's
// exact evaluation (reference/frequency_rules.cpp); this is an independent implementation.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "ropecheck/kernel_abi.h"

namespace ropecheck {

inline bool rule_arguments_ok(const rc_rope_args* a) {
  const rc_freq_rule* r = a->freq_rule;
  const uint32_t R = a->rotary_dim;
  auto pos = [](double v) { return std::isfinite(v) && v > 0; };
  if (a->inv_freq || !pos(a->base)) return false;
  switch (r->kind) {
    case RC_FREQ_DEFAULT: return true;
    case RC_FREQ_LINEAR: return pos(r->factor);
    case RC_FREQ_DYNAMIC: return pos(r->factor) && r->max_position_embeddings > 0 && R > 2;
    case RC_FREQ_NTK: return pos(r->factor) && R > 2;
    case RC_FREQ_YARN:
      return pos(r->factor) && r->original_max_position_embeddings > 0 && a->base != 1 && std::isfinite(r->beta_fast) &&
             std::isfinite(r->beta_slow) && r->beta_fast >= 0 && r->beta_slow >= 0;
    case RC_FREQ_LONGROPE:
      if (!r->short_factor || !r->long_factor || r->original_max_position_embeddings == 0) return false;
      for (uint32_t i = 0; i < R / 2; ++i)
        if (!pos(r->short_factor[i]) || !pos(r->long_factor[i])) return false;
      return true;
    case RC_FREQ_LLAMA3:
      return pos(r->factor) && r->original_max_position_embeddings > 0 && pos(r->low_freq_factor) &&
             pos(r->high_freq_factor) && r->high_freq_factor >= r->low_freq_factor;
  }
  return false;  // an unknown kind: the kernel declines
}

// theta_i of the rule, i < R/2. Call only when rule_arguments_ok.
inline std::vector<long double> rule_theta_table(const rc_rope_args* a) {
  const rc_freq_rule* r = a->freq_rule;
  const uint32_t R = a->rotary_dim, np = R / 2;
  const long double pi = 3.141592653589793238462643383279502884L;
  auto plain = [&](long double base, uint32_t i) {
    return i == 0 ? 1.0L : powl(base, -(long double)(2 * i) / (long double)R);
  };
  std::vector<long double> th(np);
  long double base = a->base;
  if (r->kind == RC_FREQ_DYNAMIC) {
    const long double L = (long double)r->max_position_embeddings;
    const long double s = r->seq_len > r->max_position_embeddings ? (long double)r->seq_len : L;
    const long double f = r->factor;
    base = base * powl(f * s / L - (f - 1), (long double)R / (long double)(R - 2));
  } else if (r->kind == RC_FREQ_NTK) {
    base = base * powl((long double)r->factor, (long double)R / (long double)(R - 2));
  }
  long double lo = 0, hi = 0;
  if (r->kind == RC_FREQ_YARN) {
    const long double L = (long double)r->original_max_position_embeddings;
    auto corr = [&](long double n) { return (long double)R * logl(L / (2 * pi * n)) / (2 * logl(base)); };
    lo = corr(r->beta_fast == 0 ? 32 : r->beta_fast);
    hi = corr(r->beta_slow == 0 ? 1 : r->beta_slow);
    if (r->truncate) {
      lo = floorl(lo);
      hi = ceill(hi);
    }
    if (lo < 0) lo = 0;
    if (hi > R - 1) hi = R - 1;
    if (lo == hi) hi += 0.001L;
  }
  const bool long_factors = r->seq_len > r->original_max_position_embeddings;
  for (uint32_t i = 0; i < np; ++i) {
    const long double t0 = plain(base, i);
    switch (r->kind) {
      case RC_FREQ_LINEAR: th[i] = t0 / r->factor; break;
      case RC_FREQ_YARN: {
        long double ramp = ((long double)i - lo) / (hi - lo);
        ramp = ramp < 0 ? 0 : ramp > 1 ? 1 : ramp;
        th[i] = t0 * (1 - ramp) + t0 / r->factor * ramp;
        break;
      }
      case RC_FREQ_LONGROPE: th[i] = t0 / (long_factors ? r->long_factor[i] : r->short_factor[i]); break;
      case RC_FREQ_LLAMA3: {
        const long double L = (long double)r->original_max_position_embeddings;
        const long double wavelen = 2 * pi / t0;
        if (wavelen < L / r->high_freq_factor) {
          th[i] = t0;
        } else if (wavelen > L / r->low_freq_factor) {
          th[i] = t0 / r->factor;
        } else {
          const long double smooth = (L / wavelen - r->low_freq_factor) / (r->high_freq_factor - r->low_freq_factor);
          th[i] = (1 - smooth) * t0 / r->factor + smooth * t0;
        }
        break;
      }
      default: th[i] = t0; break;  // default, dynamic, ntk (base already scaled)
    }
  }
  return th;
}

}  // namespace ropecheck
