// RoPE kernels written once with Google Highway (1.0.3) and compiled for every
// attainable x86 target (AVX3_DL, AVX3, AVX2, SSE4, SSSE3, SCALAR); see
// docs/simd.md.
//
// Per token: the cos/sin row is computed once (exactly as the `scalar` kernel:
// long double theta and angle, accurate_cos_sin from impls/trig_row.hpp,
// rounded to f32) and reused across
// heads. SIMD does the loads, the f32 rotation y0 = x0*c - x1*s,
// y1 = x0*s + x1*c (the same f32 operations as `scalar`, no FMA), and the
// stores. f16/bf16 loads and round-to-nearest-even stores are done with our
// own integer arithmetic: Highway 1.0.3's DemoteTo f32->bf16 truncates, and
// its f32->f16 DemoteTo on SSSE3/SSE4 truncates and does not give Inf/NaN.
// The only Highway conversions used are integer ones (PromoteTo u16->u32,
// DemoteTo i32->u16 on values in [0, 65535], ConvertTo i32->f32 on values
// below 2^10), which are exact; tests/test_simd.cpp checks every target's
// loads and stores against core/dtype.hpp.
//
// The results are bit-identical to `scalar` (same trig row, same f32
// operations in the same order, same rounding of stores).

// Compile every attainable target (including SCALAR, and AVX3_DL), so each
// can be registered and tested by name.
#ifndef HWY_COMPILE_ALL_ATTAINABLE
#define HWY_COMPILE_ALL_ATTAINABLE
#endif
#ifndef HWY_WANT_AVX3_DL
#define HWY_WANT_AVX3_DL
#endif

#include <cstring>
#include <vector>

#include "impls/registry.hpp"
#include "impls/simd/simd_common.hpp"
#include "impls/simd/simd_kernels.hpp"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "impls/simd/simd_kernels.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

HWY_BEFORE_NAMESPACE();
namespace ropecheck::simd {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
using DU = hn::RebindToUnsigned<DF>;
using DI = hn::RebindToSigned<DF>;
using DU16 = hn::Rebind<uint16_t, DF>;  // as many u16 lanes as f32 lanes
using VF = hn::Vec<DF>;
using VU = hn::Vec<DU>;

// ---- storage conversions (u32 lanes hold one 16-bit pattern each) ----------

// f16 bits (low 16 of each lane) -> f32, exactly; NaN keeps its bits.
HWY_INLINE VF F16ToF32(VU h) {
  const DF df;
  const DU du;
  const DI di;
  const VU sign = hn::ShiftLeft<16>(hn::And(h, hn::Set(du, 0x8000u)));
  const VU em = hn::And(h, hn::Set(du, 0x7fffu));
  const VU normal = hn::Add(hn::ShiftLeft<13>(em), hn::Set(du, 0x38000000u));  // exponent + 112
  const VU infnan = hn::Or(hn::ShiftLeft<13>(em), hn::Set(du, 0x7f800000u));
  // Subnormal or zero: man * 2^-24, exact in f32 (man < 2^10).
  const VU sub = hn::BitCast(du, hn::Mul(hn::ConvertTo(df, hn::BitCast(di, em)), hn::Set(df, 0x1p-24f)));
  const auto is_sub = hn::RebindMask(du, hn::Lt(hn::BitCast(di, em), hn::Set(di, 0x400)));
  const auto is_infnan = hn::RebindMask(du, hn::Gt(hn::BitCast(di, em), hn::Set(di, 0x7bff)));
  VU r = hn::IfThenElse(is_sub, sub, normal);
  r = hn::IfThenElse(is_infnan, infnan, r);
  return hn::BitCast(df, hn::Or(r, sign));
}

// f32 -> f16 bits in the low 16 bits of each lane: round to nearest even,
// overflow to Inf, IEEE subnormals, NaN quieted with sign and top payload
// kept (the algorithm of core/dtype.hpp f32_to_f16_bits, lane-wise).
HWY_INLINE VU F32ToF16(VF v) {
  const DF df;
  const DU du;
  const DI di;
  const VU u = hn::BitCast(du, v);
  const VU sign = hn::And(hn::ShiftRight<16>(u), hn::Set(du, 0x8000u));
  const VU x = hn::And(u, hn::Set(du, 0x7fffffffu));
  const auto xi = hn::BitCast(di, x);  // x <= 0x7fffffff: signed compares are exact
  // |v| >= 65536, Inf or NaN.
  const VU nan16 = hn::Or(hn::Set(du, 0x7e00u), hn::And(hn::ShiftRight<13>(x), hn::Set(du, 0x3ffu)));
  const auto is_nan = hn::RebindMask(du, hn::Gt(xi, hn::Set(di, 0x7f800000)));
  const VU big = hn::IfThenElse(is_nan, nan16, hn::Set(du, 0x7c00u));
  // Subnormal or zero result: the f32 addition of 0.5 rounds at the f16 quantum.
  const VU small = hn::Sub(hn::BitCast(du, hn::Add(hn::BitCast(df, x), hn::Set(df, 0.5f))), hn::Set(du, 0x3f000000u));
  // Normal: rebias (-112 << 23, mod 2^32), add 0xfff + the lsb, shift.
  const VU odd = hn::And(hn::ShiftRight<13>(x), hn::Set(du, 1u));
  const VU normal = hn::ShiftRight<13>(hn::Add(hn::Add(x, hn::Set(du, 0xC8000FFFu)), odd));
  const auto is_big = hn::RebindMask(du, hn::Gt(xi, hn::Set(di, 0x477fffff)));
  const auto is_small = hn::RebindMask(du, hn::Lt(xi, hn::Set(di, 0x38800000)));
  VU o = hn::IfThenElse(is_small, small, normal);
  o = hn::IfThenElse(is_big, big, o);
  return hn::Or(o, sign);
}

// f32 -> bf16 bits: round to nearest even, NaN quieted (core/dtype.hpp).
HWY_INLINE VU F32ToBF16(VF v) {
  const DU du;
  const DI di;
  const VU u = hn::BitCast(du, v);
  const auto is_nan =
      hn::RebindMask(du, hn::Gt(hn::BitCast(di, hn::And(u, hn::Set(du, 0x7fffffffu))), hn::Set(di, 0x7f800000)));
  const VU hi = hn::ShiftRight<16>(u);
  const VU nan16 = hn::Or(hi, hn::Set(du, 0x0040u));
  const VU rounded = hn::ShiftRight<16>(hn::Add(hn::Add(u, hn::Set(du, 0x7fffu)), hn::And(hi, hn::Set(du, 1u))));
  return hn::IfThenElse(is_nan, nan16, rounded);
}

// ---- typed I/O: storage <-> f32 vectors -----------------------------------

enum Storage { kF32 = 0, kF16 = 1, kBF16 = 2 };

template <int S>
struct Io;

template <>
struct Io<kF32> {
  using T = float;
  static HWY_INLINE VF Load(const T* p) { return hn::LoadU(DF(), p); }
  static HWY_INLINE void Store(VF v, T* p) { hn::StoreU(v, DF(), p); }
  static HWY_INLINE void LoadPairs(const T* p, VF& x0, VF& x1) { hn::LoadInterleaved2(DF(), p, x0, x1); }
  static HWY_INLINE void StorePairs(VF y0, VF y1, T* p) { hn::StoreInterleaved2(y0, y1, DF(), p); }
};

template <int S>
struct Io16 {
  using T = uint16_t;
  static HWY_INLINE VF ToF32(VU h) {
    if constexpr (S == kBF16) {
      return hn::BitCast(DF(), hn::ShiftLeft<16>(h));
    } else {
      return F16ToF32(h);
    }
  }
  static HWY_INLINE VU FromF32(VF v) {
    if constexpr (S == kBF16) {
      return F32ToBF16(v);
    } else {
      return F32ToF16(v);
    }
  }
  // N consecutive elements, widened to u32 lanes.
  static HWY_INLINE VF Load(const T* p) { return ToF32(hn::PromoteTo(DU(), hn::LoadU(DU16(), p))); }
  // Narrowed with an i32 -> u16 saturating demote; every value is in [0, 65535].
  static HWY_INLINE void Store(VF v, T* p) {
    hn::StoreU(hn::DemoteTo(DU16(), hn::BitCast(DI(), FromF32(v))), DU16(), p);
  }
  // N pairs: each u32 lane holds one pair, x0 in the low half (little endian).
  static HWY_INLINE void LoadPairs(const T* p, VF& x0, VF& x1) {
    const VU w = hn::LoadU(DU(), reinterpret_cast<const uint32_t*>(p));
    x0 = ToF32(hn::And(w, hn::Set(DU(), 0xffffu)));
    x1 = ToF32(hn::ShiftRight<16>(w));
  }
  static HWY_INLINE void StorePairs(VF y0, VF y1, T* p) {
    const VU w = hn::Or(FromF32(y0), hn::ShiftLeft<16>(FromF32(y1)));
    hn::StoreU(w, DU(), reinterpret_cast<uint32_t*>(p));
  }
};
template <>
struct Io<kF16> : Io16<kF16> {};
template <>
struct Io<kBF16> : Io16<kBF16> {};

// ---- the rotation -----------------------------------------------------------

// The same f32 operations, in the same order, as `scalar`.
HWY_INLINE void Rotate(VF x0, VF x1, VF c, VF s, VF& y0, VF& y1) {
  y0 = hn::Sub(hn::Mul(x0, c), hn::Mul(x1, s));
  y1 = hn::Add(hn::Mul(x0, s), hn::Mul(x1, c));
}

// How many of the r tail elements (or pairs) the tail copies back.
HWY_INLINE size_t TailKeep(size_t r) {
#ifdef ROPECHECK_PLANT_SIMD_TAIL_BUG
  // Planted bug (fuzzing target): the last partial vector writes one pair
  // fewer than it holds, so the last pair is never written.
  return r - 1;
#else
  return r;
#endif
}

// Half-split head: pair i is (i, i + half).
template <int S>
HWY_INLINE void HeadHalfSplit(const typename Io<S>::T* in, typename Io<S>::T* out, size_t half, const float* c,
                              const float* s) {
  using T = typename Io<S>::T;
  const DF df;
  const size_t N = hn::Lanes(df);
  size_t i = 0;
  VF y0, y1;
  for (; i + N <= half; i += N) {
    Rotate(Io<S>::Load(in + i), Io<S>::Load(in + half + i), hn::LoadU(df, c + i), hn::LoadU(df, s + i), y0, y1);
    Io<S>::Store(y0, out + i);
    Io<S>::Store(y1, out + half + i);
  }
  if (i < half) {  // the last partial vector, through a zero-padded buffer
    const size_t r = half - i;
    HWY_ALIGN T b0[kRowPad] = {}, b1[kRowPad] = {};
    std::memcpy(b0, in + i, r * sizeof(T));
    std::memcpy(b1, in + half + i, r * sizeof(T));
    Rotate(Io<S>::Load(b0), Io<S>::Load(b1), hn::LoadU(df, c + i), hn::LoadU(df, s + i), y0, y1);
    Io<S>::Store(y0, b0);
    Io<S>::Store(y1, b1);
    const size_t keep = TailKeep(r);
    std::memcpy(out + i, b0, keep * sizeof(T));
    std::memcpy(out + half + i, b1, keep * sizeof(T));
  }
}

// Interleaved head: pair i is (2i, 2i + 1).
template <int S>
HWY_INLINE void HeadInterleaved(const typename Io<S>::T* in, typename Io<S>::T* out, size_t npairs, const float* c,
                                const float* s) {
  using T = typename Io<S>::T;
  const DF df;
  const size_t N = hn::Lanes(df);
  size_t i = 0;
  VF x0, x1, y0, y1;
  for (; i + N <= npairs; i += N) {
    Io<S>::LoadPairs(in + 2 * i, x0, x1);
    Rotate(x0, x1, hn::LoadU(df, c + i), hn::LoadU(df, s + i), y0, y1);
    Io<S>::StorePairs(y0, y1, out + 2 * i);
  }
  if (i < npairs) {
    const size_t r = npairs - i;
    HWY_ALIGN T b[2 * kRowPad] = {};
    std::memcpy(b, in + 2 * i, 2 * r * sizeof(T));
    Io<S>::LoadPairs(b, x0, x1);
    Rotate(x0, x1, hn::LoadU(df, c + i), hn::LoadU(df, s + i), y0, y1);
    Io<S>::StorePairs(y0, y1, b);
    std::memcpy(out + 2 * i, b, 2 * TailKeep(r) * sizeof(T));
  }
}

template <int S, bool kInterleaved>
void Kernel(const rc_rope_args* a) {
  using T = typename Io<S>::T;
  const T* in = static_cast<const T*>(a->in);
  T* out = static_cast<T*>(a->out);
  const size_t np = a->rotary_dim / 2;
  const std::vector<long double>& th = thetas_cached(a);
  std::vector<float> c(np + kRowPad, 0.0f), s(np + kRowPad, 0.0f);
  const bool pass_through = a->out != a->in && a->rotary_dim < a->head_dim;
  for (uint64_t t = 0; t < a->n_tokens; ++t) {
    if (trig_row(a, th.data(), t, c.data(), s.data())) {
      rotate_token_scalar(a, th.data(), t, c.data(), s.data());
      continue;
    }
    for (uint32_t h = 0; h < a->n_heads; ++h) {
      const size_t base = (size_t(t) * a->n_heads + h) * a->head_dim;
      if constexpr (kInterleaved) {
        HeadInterleaved<S>(in + base, out + base, np, c.data(), s.data());
      } else {
        HeadHalfSplit<S>(in + base, out + base, np, c.data(), s.data());
      }
      if (pass_through)
        std::memcpy(out + base + a->rotary_dim, in + base + a->rotary_dim,
                    (a->head_dim - a->rotary_dim) * sizeof(T));
    }
  }
}

int Apply(const rc_rope_args* a) {
  if (int rc = check_kernel_args(a); rc != RC_OK) return rc;
  const bool il = a->layout == RC_INTERLEAVED;
  switch (a->dtype) {
    case RC_F32: il ? Kernel<kF32, true>(a) : Kernel<kF32, false>(a); break;
    case RC_F16: il ? Kernel<kF16, true>(a) : Kernel<kF16, false>(a); break;
    case RC_BF16: il ? Kernel<kBF16, true>(a) : Kernel<kBF16, false>(a); break;
    default: return 2;
  }
  return RC_OK;
}

// ---- test hooks: this target's load and store paths ------------------------

template <int S>
void StoreN(uint32_t layout, const float* y0, const float* y1, void* out, size_t n) {
  using T = typename Io<S>::T;
  T* o = static_cast<T*>(out);
  const DF df;
  const size_t N = hn::Lanes(df);
  for (size_t i = 0; i < n; i += N) {
    if (layout == RC_INTERLEAVED) {
      Io<S>::StorePairs(hn::LoadU(df, y0 + i), hn::LoadU(df, y1 + i), o + 2 * i);
    } else {
      Io<S>::Store(hn::LoadU(df, y0 + i), o + i);
      Io<S>::Store(hn::LoadU(df, y1 + i), o + n + i);
    }
  }
}

template <int S>
void LoadN(uint32_t layout, const void* in, float* x0, float* x1, size_t n) {
  using T = typename Io<S>::T;
  const T* p = static_cast<const T*>(in);
  const DF df;
  const size_t N = hn::Lanes(df);
  VF v0, v1;
  for (size_t i = 0; i < n; i += N) {
    if (layout == RC_INTERLEAVED) {
      Io<S>::LoadPairs(p + 2 * i, v0, v1);
    } else {
      v0 = Io<S>::Load(p + i);
      v1 = Io<S>::Load(p + n + i);
    }
    hn::StoreU(v0, df, x0 + i);
    hn::StoreU(v1, df, x1 + i);
  }
}

void StoreHookImpl(uint32_t dtype, uint32_t layout, const float* y0, const float* y1, void* out, size_t n) {
  switch (dtype) {
    case RC_F32: StoreN<kF32>(layout, y0, y1, out, n); break;
    case RC_F16: StoreN<kF16>(layout, y0, y1, out, n); break;
    case RC_BF16: StoreN<kBF16>(layout, y0, y1, out, n); break;
    default: break;
  }
}

void LoadHookImpl(uint32_t dtype, uint32_t layout, const void* in, float* x0, float* x1, size_t n) {
  switch (dtype) {
    case RC_F32: LoadN<kF32>(layout, in, x0, x1, n); break;
    case RC_F16: LoadN<kF16>(layout, in, x0, x1, n); break;
    case RC_BF16: LoadN<kBF16>(layout, in, x0, x1, n); break;
    default: break;
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace ropecheck::simd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include <algorithm>
#include <cctype>

namespace ropecheck::simd {

HWY_EXPORT(Apply);

void rotate_token_scalar(const rc_rope_args* a, const long double* th, uint64_t t, const float* c,
                         const float* s) {
  const uint32_t np = a->rotary_dim / 2;
  const long double ms = (long double)a->positions[t] * (long double)a->position_scale;
  std::vector<CosSin> row(np);
  for (uint32_t i = 0; i < np; ++i) row[i] = {c[i], s[i], ms * th[i] == 0};
  ropecheck::rotate_token_scalar(a, t, row.data());
}

static std::string target_label(int64_t target) {
  std::string n = hwy::TargetName(target);
  std::transform(n.begin(), n.end(), n.begin(), [](unsigned char ch) { return char(std::tolower(ch)); });
  return "simd-" + n;
}

std::vector<SimdTarget> compiled_targets() {
  std::vector<SimdTarget> v;
  // One entry per compiled target, calling that target's functions directly
  // (no global dispatch state is touched). Best target first.
#define RC_SIMD_TARGET(BIT, NS) v.push_back({BIT, target_label(BIT), &NS::Apply, &NS::StoreHookImpl, &NS::LoadHookImpl})
#if HWY_TARGETS & HWY_AVX3_DL
  RC_SIMD_TARGET(HWY_AVX3_DL, N_AVX3_DL);
#endif
#if HWY_TARGETS & HWY_AVX3
  RC_SIMD_TARGET(HWY_AVX3, N_AVX3);
#endif
#if HWY_TARGETS & HWY_AVX2
  RC_SIMD_TARGET(HWY_AVX2, N_AVX2);
#endif
#if HWY_TARGETS & HWY_SSE4
  RC_SIMD_TARGET(HWY_SSE4, N_SSE4);
#endif
#if HWY_TARGETS & HWY_SSSE3
  RC_SIMD_TARGET(HWY_SSSE3, N_SSSE3);
#endif
#if HWY_TARGETS & HWY_EMU128
  RC_SIMD_TARGET(HWY_EMU128, N_EMU128);
#endif
#if HWY_TARGETS & HWY_SCALAR
  RC_SIMD_TARGET(HWY_SCALAR, N_SCALAR);
#endif
#undef RC_SIMD_TARGET
  return v;
}

const std::vector<SimdTarget>& supported_targets() {
  static const std::vector<SimdTarget> v = [] {
    std::vector<SimdTarget> r;
    const int64_t supported = hwy::SupportedTargets();
    for (auto& t : compiled_targets())
      if (supported & t.target) r.push_back(t);
    return r;
  }();
  return v;
}

std::string dispatched_target_name() {
  const int64_t supported = hwy::SupportedTargets() & HWY_TARGETS;
  // The best supported compiled target: the lowest bit (Highway orders bits by preference).
  return target_label(supported & -supported);
}

static int dispatch_apply(const rc_rope_args* a) { return HWY_DYNAMIC_DISPATCH(Apply)(a); }

}  // namespace ropecheck::simd

extern "C" int ropecheck_simd_rope(const rc_rope_args* a) { return ropecheck::simd::dispatch_apply(a); }
#endif  // HWY_ONCE
