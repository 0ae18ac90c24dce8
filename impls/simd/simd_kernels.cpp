// RoPE kernels written once with Google Highway (1.0.3) and compiled for every
// attainable x86 target (AVX3_DL, AVX3, AVX2, SSE4, SSSE3, SCALAR); see
// docs/simd.md.
//
// Per token: the cos/sin row is computed once (TrigRow: the double-double row
// of impls/trig_row.hpp, the same double operations in the same order as
// `scalar`'s cos_sin_pair, vectorised over pairs) and reused across heads.
// ABI v2 (read only when abi_version >= 2): the row is multiplied by the
// attention factor before its rounding to f32, as cos_sin_pair does; with
// several position axes, each axis used by some pair gets its own row and
// pair i takes axis pair_axis[i]'s value (TokenRow); the theta table comes
// from the frequency rule when there is one (make_theta_table); the rotated
// slice of each head starts at rotary_offset, and the elements before and
// after it are copied when out != in. A pair whose angle is exactly 0 (or a
// table's cos 1, sin 0) with attention factor 1 keeps its bits as `scalar`
// does: a token of such pairs only is copied; otherwise f32 heads blend the
// input back into them and 16-bit tokens go through the scalar rotation
// (with another factor `scalar` rotates every pair, and so does the vector
// path). f32 tables are read in place (docs/simd.md, item 9).
// SIMD does the loads, the f32 rotation y0 = x0*c - x1*s,
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
// operations in the same order, same rounding of stores): no FMA anywhere
// (the build disables contraction and only Mul/Add/Sub are used).

// Compile every attainable target (including SCALAR, and AVX3_DL), so each
// can be registered and tested by name.
#ifndef HWY_COMPILE_ALL_ATTAINABLE
#define HWY_COMPILE_ALL_ATTAINABLE
#endif
#ifndef HWY_WANT_AVX3_DL
#define HWY_WANT_AVX3_DL
#endif

#include <unistd.h>
#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#endif

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "impls/given_table.hpp"
#include "impls/registry.hpp"
#include "impls/tensor_form.hpp"
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

// kBF16Insn: bf16 stored with AVX512-BF16's vcvtneps2bf16 (AVX3_DL only, when
// the CPU has it; Apply decides at run time). The instruction rounds to
// nearest even and quiets NaN exactly as core/dtype.hpp, but flushes denormal
// inputs to zero, so a vector holding one (fpclass) takes the integer path.
enum Storage { kF32 = 0, kF16 = 1, kBF16 = 2, kBF16Insn = 3 };

// f16 through F16C (vcvtph2ps is exact; Highway's DemoteTo is vcvtps2ph with
// the round-to-nearest-even immediate) on AVX2 and above; SSSE3/SSE4 and
// SCALAR use the integer conversions above (Highway's emulation truncates).
#undef RC_HAVE_F16C
#undef RC_HAVE_BF16_INSN
#if HWY_TARGET <= HWY_AVX2
#define RC_HAVE_F16C 1
#else
#define RC_HAVE_F16C 0
#endif
#if HWY_TARGET == HWY_AVX3_DL
#define RC_HAVE_BF16_INSN 1
#else
#define RC_HAVE_BF16_INSN 0
#endif

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
    if constexpr (S == kF16) {
      return F16ToF32(h);
    } else {
      return hn::BitCast(DF(), hn::ShiftLeft<16>(h));
    }
  }
  static HWY_INLINE VU FromF32(VF v) {
    if constexpr (S == kF16) {
      return F32ToF16(v);
    } else {
      return F32ToBF16(v);
    }
  }
  // N consecutive elements as f32.
  static HWY_INLINE VF Load(const T* p) {
#if RC_HAVE_F16C
    if constexpr (S == kF16) {
      const hn::Rebind<hwy::float16_t, DF> dh;
      return hn::PromoteTo(DF(), hn::LoadU(dh, reinterpret_cast<const hwy::float16_t*>(p)));
    }
#endif
    return ToF32(hn::PromoteTo(DU(), hn::LoadU(DU16(), p)));
  }
  // The integer path narrows with an i32 -> u16 saturating demote; every
  // value is in [0, 65535].
  static HWY_INLINE void Store(VF v, T* p) {
#if RC_HAVE_F16C
    if constexpr (S == kF16) {
      const hn::Rebind<hwy::float16_t, DF> dh;
      hn::StoreU(hn::DemoteTo(dh, v), dh, reinterpret_cast<hwy::float16_t*>(p));
      return;
    }
#endif
#if RC_HAVE_BF16_INSN
    if constexpr (S == kBF16Insn) {
      if (HWY_LIKELY(_mm512_fpclass_ps_mask(v.raw, 0x20) == 0)) {  // no denormal lane
        __m256i r;
        asm("vcvtneps2bf16 %1, %0" : "=v"(r) : "v"(v.raw));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), r);
        return;
      }
    }
#endif
    hn::StoreU(hn::DemoteTo(DU16(), hn::BitCast(DI(), FromF32(v))), DU16(), p);
  }
  // N pairs: each u32 lane holds one pair, x0 in the low half (little endian).
  // Used by the SCALAR target, whose single lane cannot swap neighbours.
  static HWY_INLINE void LoadPairs(const T* p, VF& x0, VF& x1) {
    const VU w = hn::LoadU(DU(), reinterpret_cast<const uint32_t*>(p));
    if constexpr (S == kF16) {
      x0 = ToF32(hn::And(w, hn::Set(DU(), 0xffffu)));
      x1 = ToF32(hn::ShiftRight<16>(w));
    } else {  // bf16: the f32 bits are the pattern shifted up, in place for x1
      x0 = hn::BitCast(DF(), hn::ShiftLeft<16>(w));
      x1 = hn::BitCast(DF(), hn::And(w, hn::Set(DU(), 0xffff0000u)));
    }
  }
  static HWY_INLINE void StorePairs(VF y0, VF y1, T* p) {
#if RC_HAVE_BF16_INSN
    if constexpr (S == kBF16Insn) {
      if (HWY_LIKELY(_kortestz_mask16_u8(_mm512_fpclass_ps_mask(y0.raw, 0x20), _mm512_fpclass_ps_mask(y1.raw, 0x20)))) {
        __m512i r;  // y0 rounded in the low 16 words, y1 in the high 16
        asm("vcvtne2ps2bf16 %2, %1, %0" : "=v"(r) : "v"(y1.raw), "v"(y0.raw));
        const __m512i pairs = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7,
                                               22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
        _mm512_storeu_si512(p, _mm512_permutexvar_epi16(pairs, r));
        return;
      }
    }
#endif
    const VU w = hn::Or(FromF32(y0), hn::ShiftLeft<16>(FromF32(y1)));
    hn::StoreU(w, DU(), reinterpret_cast<uint32_t*>(p));
  }
};
template <>
struct Io<kF16> : Io16<kF16> {};
template <>
struct Io<kBF16> : Io16<kBF16> {};
template <>
struct Io<kBF16Insn> : Io16<kBF16Insn> {};

// Interleaved heads: as pairs (x0, x1 deinterleaved by the load, Rotate) or
// as elements in place (RotateInPlace). Pairs where deinterleaving is free:
// 16-bit storage converted with integer operations or vcvtne2ps2bf16 (a u32
// lane holds a pair), and SCALAR (one lane cannot swap neighbours). Elements
// for f32 (LoadInterleaved2 costs permutes) and F16C's f16 conversions.
template <int S>
constexpr bool kPairs = HWY_TARGET == HWY_SCALAR || S == kBF16 || S == kBF16Insn || (S == kF16 && !RC_HAVE_F16C);

// Whether this CPU runs vcvtneps2bf16 (AVX3_DL builds only).
HWY_INLINE bool UseBF16Insn() {
#if RC_HAVE_BF16_INSN
  static const bool has = __builtin_cpu_supports("avx512bf16");
  return has;
#else
  return false;
#endif
}

// ---- the cos/sin row ---------------------------------------------------------

using DD = hn::ScalableTag<double>;
using DU64 = hn::RebindToUnsigned<DD>;
using DFD = hn::Rebind<float, DD>;  // as many f32 lanes as f64 lanes

// cos_sin_row of impls/trig_row.hpp lane-wise: the same double operations in
// the same order (Mul/Add/Sub only), the attention factor af multiplying the
// double cos/sin after the quadrant's sign as in trig_poly::by_quadrant
// (float(-sn * af); af = 1 is exact, so a v1 row is unchanged), the same
// rounding to f32 (DemoteTo is cvtpd2ps, round to nearest even). Lanes
// outside the double-double path (|p| >= 2^32) are redone by cos_sin_pair, as
// are whole rows whose m or table is out of range. c and s hold np + kRowPad
// floats.
// cc, ss (when not null): the row per element for RotateInPlace,
// cc = (c0, c0, c1, c1, ...), ss = (-s0, s0, -s1, s1, ...).
HWY_INLINE void DupRow(const float* c, const float* s, float* cc, float* ss, size_t from, size_t to) {
  if (!cc) return;
  for (size_t j = from; j < to; ++j) {
    cc[2 * j] = cc[2 * j + 1] = c[j];
    ss[2 * j] = -s[j];
    ss[2 * j + 1] = s[j];
  }
}

// kScale: af != 1 (with af == 1 the products are skipped: x * 1 is x, so the row is the same).
template <bool kScale>
HWY_NOINLINE void TrigRowT(const TokenAngle& m, const ThetaTable& t, size_t np, double af, float* c, float* s,
                           float* cc, float* ss) {
  if (!m.fast) {
    cos_sin_row(m, t, np, c, s, af);
    DupRow(c, s, cc, ss, 0, np);
    return;
  }
#if HWY_TARGET != HWY_SCALAR
  const hn::Rebind<uint32_t, DD> du32;
  const hn::Repartition<float, DU64> df2;  // 2 f32 per f64 lane
#endif
  using namespace trig_dd;
  const DD dd;
  const DU64 du;
  const DFD df;
  const size_t N = hn::Lanes(dd);
  const auto mhi = hn::Set(dd, m.hi), mlo = hn::Set(dd, m.lo), mhs = hn::Set(dd, m.hs), mls = hn::Set(dd, m.ls);
  const auto shift = hn::Set(dd, kShift);
  const auto afv = hn::Set(dd, af);
  for (size_t i = 0; i < np; i += N) {
    const auto thi = hn::LoadU(dd, t.hi.data() + i), tlo = hn::LoadU(dd, t.lo.data() + i);
    const auto ths = hn::LoadU(dd, t.hs.data() + i), tls = hn::LoadU(dd, t.ls.data() + i);
    const auto p = hn::Mul(mhi, thi);
    hn::Vec<DD> alo;
    if (m.simple) {
      const auto e = hn::Add(hn::Sub(hn::Mul(mhs, ths), p), hn::Mul(mhs, tls));
      alo = hn::Add(e, hn::Mul(mhi, tlo));
    } else {
      const auto e = hn::Add(hn::Add(hn::Add(hn::Sub(hn::Mul(mhs, ths), p), hn::Mul(mhs, tls)), hn::Mul(mls, ths)),
                             hn::Mul(mls, tls));
      alo = hn::Add(e, hn::Add(hn::Mul(mhi, tlo), hn::Mul(mlo, thi)));
    }
    const auto shifted = hn::Add(hn::Mul(p, hn::Set(dd, kTwoOverPi)), shift);
    const auto k = hn::Sub(shifted, shift);
    const auto r0 = hn::Sub(p, hn::Mul(k, hn::Set(dd, kP1)));
    const auto b = hn::Mul(k, hn::Set(dd, -kP2));
    const auto r1 = hn::Add(r0, b);
    const auto bb = hn::Sub(r1, r0);
    const auto e1 = hn::Add(hn::Sub(r0, hn::Sub(r1, bb)), hn::Sub(b, bb));
    const auto r = hn::Add(r1, hn::Add(e1, hn::Sub(alo, hn::Mul(k, hn::Set(dd, kP3)))));
    // trig_poly::sin_cos
    const auto z = hn::Mul(r, r);
    auto sp = hn::Set(dd, trig_poly::kSin[0]);
    for (size_t j = 1; j < std::size(trig_poly::kSin); ++j) sp = hn::Add(hn::Mul(sp, z), hn::Set(dd, trig_poly::kSin[j]));
    const auto sn = hn::Add(r, hn::Mul(hn::Mul(r, z), sp));
    auto cp = hn::Set(dd, trig_poly::kCos[0]);
    for (size_t j = 1; j < std::size(trig_poly::kCos); ++j) cp = hn::Add(hn::Mul(cp, z), hn::Set(dd, trig_poly::kCos[j]));
    const auto cs = hn::Add(hn::Set(dd, 1.0), hn::Mul(z, hn::Add(hn::Set(dd, -0.5), hn::Mul(z, cp))));
    // trig_poly::by_quadrant, q = k mod 4 from the shifted value's low bits
    const auto q = hn::And(hn::BitCast(du, shifted), hn::Set(du, 3));
    const auto odd = hn::RebindMask(dd, hn::TestBit(q, hn::Set(du, 1)));
    const auto neg_c = hn::RebindMask(dd, hn::TestBit(hn::Add(q, hn::Set(du, 1)), hn::Set(du, 2)));
    const auto neg_s = hn::RebindMask(dd, hn::TestBit(q, hn::Set(du, 2)));
    const auto cv = hn::IfThenElse(odd, sn, cs);
    const auto sv = hn::IfThenElse(odd, cs, sn);
    auto cq = hn::IfThenElse(neg_c, hn::Neg(cv), cv);
    auto sq = hn::IfThenElse(neg_s, hn::Neg(sv), sv);
    if constexpr (kScale) {
      cq = hn::Mul(cq, afv);
      sq = hn::Mul(sq, afv);
    }
    const auto cf = hn::DemoteTo(df, cq);
    const auto sf = hn::DemoteTo(df, sq);
    hn::StoreU(cf, df, c + i);
    hn::StoreU(sf, df, s + i);
#if HWY_TARGET != HWY_SCALAR
    if (cc) {  // each f32 widened to a u64 lane and doubled: (c, c) and (-s, s)
      const auto cu = hn::PromoteTo(du, hn::BitCast(du32, cf));
      const auto su = hn::PromoteTo(du, hn::BitCast(du32, sf));
      hn::StoreU(hn::BitCast(df2, hn::Or(cu, hn::ShiftLeft<32>(cu))), df2, cc + 2 * i);
      hn::StoreU(hn::BitCast(df2, hn::Or(hn::Xor(su, hn::Set(du, 0x80000000ull)), hn::ShiftLeft<32>(su))), df2,
                 ss + 2 * i);
    }
#endif
    if (HWY_UNLIKELY(!hn::AllTrue(dd, hn::Lt(hn::Abs(p), hn::Set(dd, kFastLimit))))) {
      const size_t end = std::min(i + N, np);
      for (size_t j = i; j < end; ++j) cos_sin_pair(m, t, j, c[j], s[j], af);
      DupRow(c, s, cc, ss, i, end);
    }
  }
}

HWY_INLINE void TrigRow(const TokenAngle& m, const ThetaTable& t, size_t np, double af, float* c, float* s,
                        float* cc = nullptr, float* ss = nullptr) {
  af == 1.0 ? TrigRowT<false>(m, t, np, af, c, s, cc, ss) : TrigRowT<true>(m, t, np, af, c, s, cc, ss);
}

// ---- the rotation -----------------------------------------------------------

// The same f32 operations, in the same order, as `scalar`.
HWY_INLINE void Rotate(VF x0, VF x1, VF c, VF s, VF& y0, VF& y1) {
  y0 = hn::Sub(hn::Mul(x0, c), hn::Mul(x1, s));
  y1 = hn::Add(hn::Mul(x0, s), hn::Mul(x1, c));
}

// Interleaved pairs rotated where they lie: with cc = (c0, c0, c1, c1, ...)
// and ss = (-s0, s0, -s1, s1, ...), y = x*cc + swap(x)*ss gives
// y[2i] = x0*c + x1*(-s) = x0*c - x1*s and y[2i+1] = x1*c + x0*s, the same
// products and sums as Rotate (negation and the order of an addition's
// operands do not change an IEEE result).
#if HWY_TARGET != HWY_SCALAR
HWY_INLINE VF RotateInPlace(VF x, VF cc, VF ss) {
  return hn::Add(hn::Mul(x, cc), hn::Mul(hn::Shuffle2301(x), ss));
}
#endif

// How many of the r tail pairs the tail copies back.
HWY_INLINE size_t TailKeep(size_t r) {
#ifdef ROPECHECK_PLANT_SIMD_TAIL_BUG
  // Planted bug (fuzzing target): the last partial vector writes one pair
  // fewer than it holds, so the last pair is never written.
  return r - 1;
#else
  return r;
#endif
}

// Software prefetch of the input 1 KiB ahead, once per vector of loads, for f16 and bf16 storage. The
// loop's own instructions (the conversions) fill the out-of-order window before enough loads are in flight to
// stream from L3 or memory; prefetches retire at once. Measured at the prefill shape (best of 5): bf16
// 6.2 -> 4.6 ms, f16 interleaved 5.9 -> 4.4 ms; 4 KiB ahead gained less. Not for f32, whose loop is a few
// instructions per vector and which the hardware prefetcher streams alone: there the prefetch cost time,
// measured against ONNX Runtime's MLAS kernel paired in one process, alternating call by call (median
// t_MLAS / t_rc at the prefill shape, AVX-512 EPYC): the f32 loop with it 0.88-0.91, the same loop without
// 0.98-1.04 (issue 24, reports/mlas-outside.md).
// Prefetching never faults, so addresses past the end are harmless.
inline constexpr size_t kPrefetchBytes = 1024;
template <int S>
HWY_INLINE void PF(const void* p) {
  if constexpr (S != kF32) __builtin_prefetch(static_cast<const char*>(p) + kPrefetchBytes);
}

// One token's cos/sin row: c, s per pair (half-split, and interleaved heads
// rotated as pairs), cc, ss per element (interleaved heads rotated in place),
// ceo, seo per block of 2N pairs, the N even-indexed then the N odd-indexed
// (half-split heads of 16-bit pairs, HalfSplitBlocks).
struct Row {
  std::vector<float> c, s;      // np + kRowPad
  std::vector<float> cc, ss;    // 2 * (np + kRowPad)
  std::vector<float> ceo, seo;  // np + kRowPad
  std::vector<float> ac, as;    // 4 * (np + kRowPad): each position axis's row, when pairs use several
  std::vector<uint32_t> id;     // np + kRowPad: all ones where the pair is the identity (its bits copied)
  std::vector<uint32_t> idd;    // 2 * (np + kRowPad): id per element (interleaved heads rotated in place)
};

// What the heads of one token read: the row's arrays, or c and s pointing into a caller's f32 table (which
// holds exactly np values: then a head reads no lane past np, see Kernel).
struct RowView {
  const float* c;
  const float* s;
  const float *cc, *ss, *ceo, *seo;
  const uint32_t *id, *idd;
};

// The identity mask of N lanes (f32 heads only: a blend keeps the input's bits, -0 and NaN payloads included;
// 16-bit heads would round-trip them through f32, so their identity rows go to the scalar rotation).
HWY_INLINE hn::Mask<DF> IdMask(const uint32_t* p) { return hn::MaskFromVec(hn::BitCast(DF(), hn::LoadU(DU(), p))); }

// Half-split 16-bit heads whose loads deinterleave for free (kPairs): 2N
// consecutive elements of each half are loaded as N u32 lanes, even elements
// (pairs i, i+2, ...) in one vector and odd in the other, rotated with the
// matching even/odd rows and stored back through StorePairs: no widening
// loads and, with vcvtne2ps2bf16, one conversion per 2N elements.
template <int S>
constexpr bool kHalfBlocks = kPairs<S> && S != kF32;

HWY_INLINE void EvenOddRows(Row& row, const float* c, const float* s, size_t np, size_t N) {
  for (size_t b = 0; b + 2 * N <= np; b += 2 * N)
    for (size_t k = 0; k < N; ++k) {
      row.ceo[b + k] = c[b + 2 * k];
      row.ceo[b + N + k] = c[b + 2 * k + 1];
      row.seo[b + k] = s[b + 2 * k];
      row.seo[b + N + k] = s[b + 2 * k + 1];
    }
}

// Half-split head: pair i is (i, i + half).
// kId (f32 only): pairs whose row.id is set keep x's bits.
template <int S, bool kId>
HWY_INLINE void HeadHalfSplit(const typename Io<S>::T* in, typename Io<S>::T* out, size_t half, const RowView& row) {
  using T = typename Io<S>::T;
  static_assert(!kId || S == kF32);
  const DF df;
  const size_t N = hn::Lanes(df);
  const float* c = row.c;
  const float* s = row.s;
  size_t i = 0;
  VF y0, y1;
  if constexpr (kHalfBlocks<S>) {
    VF x0e, x0o, x1e, x1o, y0o, y1o;
    for (; i + 2 * N <= half; i += 2 * N) {
      PF<S>(in + i);
      PF<S>(in + half + i);
      Io<S>::LoadPairs(in + i, x0e, x0o);
      Io<S>::LoadPairs(in + half + i, x1e, x1o);
      Rotate(x0e, x1e, hn::LoadU(df, row.ceo + i), hn::LoadU(df, row.seo + i), y0, y1);
      Rotate(x0o, x1o, hn::LoadU(df, row.ceo + i + N), hn::LoadU(df, row.seo + i + N), y0o, y1o);
      Io<S>::StorePairs(y0, y0o, out + i);
      Io<S>::StorePairs(y1, y1o, out + half + i);
    }
  }
  for (; i + N <= half; i += N) {
    PF<S>(in + i);
    PF<S>(in + half + i);
    const VF x0 = Io<S>::Load(in + i), x1 = Io<S>::Load(in + half + i);
    Rotate(x0, x1, hn::LoadU(df, c + i), hn::LoadU(df, s + i), y0, y1);
    if constexpr (kId) {
      const auto m = IdMask(row.id + i);
      y0 = hn::IfThenElse(m, x0, y0);
      y1 = hn::IfThenElse(m, x1, y1);
    }
    Io<S>::Store(y0, out + i);
    Io<S>::Store(y1, out + half + i);
  }
  if (i < half) {  // the last partial vector, through a zero-padded buffer
    const size_t r = half - i;
    HWY_ALIGN T b0[kRowPad] = {}, b1[kRowPad] = {};
    std::memcpy(b0, in + i, r * sizeof(T));
    std::memcpy(b1, in + half + i, r * sizeof(T));
    const VF x0 = Io<S>::Load(b0), x1 = Io<S>::Load(b1);
    Rotate(x0, x1, hn::LoadU(df, c + i), hn::LoadU(df, s + i), y0, y1);
    if constexpr (kId) {
      const auto m = IdMask(row.id + i);
      y0 = hn::IfThenElse(m, x0, y0);
      y1 = hn::IfThenElse(m, x1, y1);
    }
    Io<S>::Store(y0, b0);
    Io<S>::Store(y1, b1);
    const size_t keep = TailKeep(r);
    std::memcpy(out + i, b0, keep * sizeof(T));
    std::memcpy(out + half + i, b1, keep * sizeof(T));
  }
}

// Interleaved head: pair i is (2i, 2i + 1).
template <int S, bool kId>
HWY_INLINE void HeadInterleaved(const typename Io<S>::T* in, typename Io<S>::T* out, size_t npairs, const RowView& row) {
  using T = typename Io<S>::T;
  static_assert(!kId || S == kF32);
  const DF df;
  const size_t N = hn::Lanes(df);
  if constexpr (kPairs<S>) {
    const float* c = row.c;
    const float* s = row.s;
    size_t i = 0;
    VF x0, x1, y0, y1;
    for (; i + N <= npairs; i += N) {
      PF<S>(in + 2 * i);
      Io<S>::LoadPairs(in + 2 * i, x0, x1);
      Rotate(x0, x1, hn::LoadU(df, c + i), hn::LoadU(df, s + i), y0, y1);
      if constexpr (kId) {
        const auto m = IdMask(row.id + i);
        y0 = hn::IfThenElse(m, x0, y0);
        y1 = hn::IfThenElse(m, x1, y1);
      }
      Io<S>::StorePairs(y0, y1, out + 2 * i);
    }
    if (i < npairs) {
      const size_t r = npairs - i;
      HWY_ALIGN T b[2 * kRowPad] = {};
      std::memcpy(b, in + 2 * i, 2 * r * sizeof(T));
      Io<S>::LoadPairs(b, x0, x1);
      Rotate(x0, x1, hn::LoadU(df, c + i), hn::LoadU(df, s + i), y0, y1);
      if constexpr (kId) {
        const auto m = IdMask(row.id + i);
        y0 = hn::IfThenElse(m, x0, y0);
        y1 = hn::IfThenElse(m, x1, y1);
      }
      Io<S>::StorePairs(y0, y1, b);
      std::memcpy(out + 2 * i, b, 2 * TailKeep(r) * sizeof(T));
    }
  } else {
#if HWY_TARGET != HWY_SCALAR
    const float* cc = row.cc;
    const float* ss = row.ss;
    const size_t n = 2 * npairs;  // elements; N is even
    size_t i = 0;
    for (; i + N <= n; i += N, PF<S>(in + i)) {
      const VF x = Io<S>::Load(in + i);
      VF y = RotateInPlace(x, hn::LoadU(df, cc + i), hn::LoadU(df, ss + i));
      if constexpr (kId) y = hn::IfThenElse(IdMask(row.idd + i), x, y);
      Io<S>::Store(y, out + i);
    }
    if (i < n) {  // r < N <= kRowPad elements: whole pairs
      const size_t r = n - i;
      HWY_ALIGN T b[kRowPad] = {};
      std::memcpy(b, in + i, r * sizeof(T));
      const VF x = Io<S>::Load(b);
      VF y = RotateInPlace(x, hn::LoadU(df, cc + i), hn::LoadU(df, ss + i));
      if constexpr (kId) y = hn::IfThenElse(IdMask(row.idd + i), x, y);
      Io<S>::Store(y, b);
      std::memcpy(out + i, b, 2 * TailKeep(r / 2) * sizeof(T));
    }
#endif
  }
}

// The call's v2 parameters, neutral for a v1 call (whose struct ends at
// `out`: nothing past it is read).
struct CallV2 {
  uint32_t offset = 0;                 // rotary_offset
  double af = 1.0;                     // attention_factor
  const uint8_t* pair_axis = nullptr;  // NULL: every pair on axis 0
  int single = 0;                      // the only axis the pairs use, or -1 when they use several
  uint32_t used = 1;                   // bit k: some pair uses axis k
};

HWY_INLINE CallV2 GetCallV2(const rc_rope_args* a) {
  CallV2 v;
  if (a->abi_version < 2) return v;
  v.offset = a->rotary_offset;
  v.af = a->attention_factor;
  if (a->pair_axis) {
    v.pair_axis = a->pair_axis;
    v.used = 0;
    for (uint32_t i = 0; i < a->rotary_dim / 2; ++i) v.used |= 1u << a->pair_axis[i];
    v.single = (v.used & (v.used - 1)) ? -1 : __builtin_ctz(v.used);
  }
  return v;
}

// One token's cos/sin row (times the attention factor) in c, s and, when not
// null, cc, ss (np + kRowPad floats each, twice that for cc, ss): with one
// axis used, that axis's TrigRow; with several, each used axis's TrigRow in
// row.ac, row.as, merged per pair by pair_axis. m[k] is axis k's angle factor
// (for the axes used). Returns whether some pair's angle may be exactly 0
// with af == 1: `scalar` copies such a pair's bits (with af != 1 it rotates
// every pair, as the row here does).
HWY_INLINE bool TokenRow(const rc_rope_args* a, const ThetaTable& th, const CallV2& v, uint64_t t, size_t np,
                         float* c, float* s, float* cc, float* ss, Row& row, TokenAngle* m) {
  if (v.single >= 0) {
    const uint32_t ax = uint32_t(v.single);
    m[ax] = token_angle(a, th, t, ax);
    TrigRow(m[ax], th, np, v.af, c, s, cc, ss);
    return v.af == 1.0 && m[ax].identity;
  }
  const size_t stride = np + kRowPad;
  if (row.ac.size() < 4 * stride) {
    row.ac.assign(4 * stride, 0.0f);
    row.as.assign(4 * stride, 0.0f);
  }
  bool identity = false;
  for (uint32_t ax = 0; ax < 4; ++ax) {
    if (!(v.used >> ax & 1)) continue;
    m[ax] = token_angle(a, th, t, ax);
    TrigRow(m[ax], th, np, v.af, row.ac.data() + ax * stride, row.as.data() + ax * stride);
    identity = identity || m[ax].identity;
  }
  for (size_t i = 0; i < np; ++i) {
    const size_t k = v.pair_axis[i] * stride + i;
    c[i] = row.ac[k];
    s[i] = row.as[k];
  }
  DupRow(c, s, cc, ss, 0, np);
  return v.af == 1.0 && identity;
}

// ABI v2: an attention factor > 1 is folded into the row (|c| or |s| may exceed 1), so a product can overflow
// f32 where the exact output is finite. As the scalar kernel (impls/scalar.cpp, rotate_token_scalar), such a
// pair is recomputed with double products and rounded once more; f16 data cannot overflow an f32 product.
// x is the head's rotated slice as it was before the call (kept aside for an in-place call).
template <class T>
void FixOverflowedPairs(const rc_rope_args* a, const T* x, T* y, size_t np, const float* c, const float* s) {
  const Dtype d = Dtype(a->dtype);
  if (d == Dtype::f16) return;
  for (size_t i = 0; i < np; ++i) {
    if (!(std::fabs(c[i]) > 1.0f || std::fabs(s[i]) > 1.0f)) continue;
    const auto [d0, d1] = pair_dims(Layout(a->layout), a->rotary_dim, uint32_t(i));
    if (std::isfinite(load_f32(d, y, d0)) && std::isfinite(load_f32(d, y, d1))) continue;
    const float x0 = load_f32(d, x, d0), x1 = load_f32(d, x, d1);
    if (!std::isfinite(x0) || !std::isfinite(x1)) continue;
    store_f32(d, y, d0, float(double(x0) * c[i] - double(x1) * s[i]));
    store_f32(d, y, d1, float(double(x0) * s[i] + double(x1) * c[i]));
  }
}

// The v3 draft's fields of a legacy-form call: the direction, and the caller-given table (null: none).
struct CallV3 {
  bool inverse = false;
  const GivenTable* table = nullptr;
};

// cc, ss of a row (DupRow) with vector code: each f32 widened to a u64 lane and doubled, as TrigRowT does.
// Reads c and s only below np.
HWY_INLINE void DupRowVec(const float* c, const float* s, float* cc, float* ss, size_t np) {
  size_t i = 0;
#if HWY_TARGET != HWY_SCALAR
  const DD dd;
  const DU64 du;
  const hn::Rebind<uint32_t, DD> du32;
  const hn::Repartition<float, DU64> df2;
  const size_t Nd = hn::Lanes(dd);
  for (; i + Nd <= np; i += Nd) {
    const auto cu = hn::PromoteTo(du, hn::LoadU(du32, reinterpret_cast<const uint32_t*>(c + i)));
    const auto su = hn::PromoteTo(du, hn::LoadU(du32, reinterpret_cast<const uint32_t*>(s + i)));
    hn::StoreU(hn::BitCast(df2, hn::Or(cu, hn::ShiftLeft<32>(cu))), df2, cc + 2 * i);
    hn::StoreU(hn::BitCast(df2, hn::Or(hn::Xor(su, hn::Set(du, 0x80000000ull)), hn::ShiftLeft<32>(su))), df2,
               ss + 2 * i);
  }
#endif
  DupRow(c, s, cc, ss, i, np);
}

// A caller's row, once with vector code: whether some pair is the identity (cos exactly 1 and sin 0, as
// given_row decides) and whether some value is beyond 1 or NaN (the overflow fix's test, as the scalar loop
// `!(|c| <= 1) || !(|s| <= 1)` had it), and whether every pair is the identity. Reads c and s only below np.
HWY_INLINE void ScanRow(const float* c, const float* s, size_t np, bool& ident, bool& all, bool& beyond) {
  const DF df;
  const size_t N = hn::Lanes(df);
  const VF one = hn::Set(df, 1.0f), zero = hn::Zero(df);
  VF id = zero, nid = zero, bad = zero;
  size_t i = 0;
  for (; i + N <= np; i += N) {
    const VF cv = hn::LoadU(df, c + i), sv = hn::LoadU(df, s + i);
    const VF m = hn::VecFromMask(df, hn::And(hn::Eq(cv, one), hn::Eq(sv, zero)));
    id = hn::Or(id, m);
    nid = hn::Or(nid, hn::Not(m));
    bad = hn::Or(bad, hn::VecFromMask(df, hn::Not(hn::And(hn::Le(hn::Abs(cv), one), hn::Le(hn::Abs(sv), one)))));
  }
  ident = !hn::AllFalse(df, hn::MaskFromVec(id));
  all = hn::AllFalse(df, hn::MaskFromVec(nid));
  beyond = !hn::AllFalse(df, hn::MaskFromVec(bad));
  for (; i < np; ++i) {
    const bool p = c[i] == 1.0f && s[i] == 0.0f;
    ident = ident || p;
    all = all && p;
    beyond = beyond || !(std::fabs(c[i]) <= 1.0f) || !(std::fabs(s[i]) <= 1.0f);
  }
}

// A token whose every pair is the identity (position 0 on its only axis, a table's row of cos 1, sin 0) is
// its input, bit for bit, pass-through dims included: copied when out != in, untouched in place.
template <class T>
HWY_INLINE void CopyToken(const T* in, T* out, size_t elems) {
  if (in != out) std::memcpy(out, in, elems * sizeof(T));
}

// The identity masks of a row (rare: a position at 0, a zero frequency, a table's cos 1 / sin 0 entries).
template <class F>
HWY_INLINE void IdRows(Row& row, size_t np, F&& is_identity) {
  for (size_t i = 0; i < np; ++i) row.id[i] = row.idd[2 * i] = row.idd[2 * i + 1] = is_identity(i) ? ~0u : 0u;
}

// Whether a table's rows are read in place: f32 cos and sin, pair i's at column i of each row (cos_sin_2; cat;
// full in the half-split layout, where pair i's first element is i), one position axis, forward.
HWY_INLINE bool TableReadInPlace(const rc_rope_args* a, const GivenTable& g, bool inverse, const CallV2& v) {
  const uint32_t k = a->table_kind;
  if (inverse || v.single != 0 || g.dtype[0] != Dtype::f32) return false;
  if (k == RC_TABLE_COS_SIN_CAT) return true;
  if (k == RC_TABLE_COS_SIN_2 || (k == RC_TABLE_COS_SIN_FULL && a->layout == RC_HALF_SPLIT)) return g.dtype[1] == Dtype::f32;
  return false;
}

// f32 heads whose rotated slice is K whole vectors (rotary_dim 128 on AVX-512: K = 8 elements' vectors
// interleaved, 4 pairs' vectors half-split): the token's row stays in 2K registers for all its heads instead
// of being loaded again per head. The same operations as HeadInterleaved / HeadHalfSplit.
#if HWY_TARGET != HWY_SCALAR
template <bool kStream>
HWY_INLINE void StoreF(VF v, float* p) {
  if constexpr (kStream) {
    hn::Stream(v, DF(), p);
  } else {
    hn::StoreU(v, DF(), p);
  }
}

template <size_t K, bool kInterleaved, bool kStream = false>
HWY_INLINE void HeadsRowInRegisters(const float* in, float* out, uint32_t nh, size_t hd, const RowView& row) {
  const DF df;
  const size_t N = hn::Lanes(df);
  const float* rc = kInterleaved ? row.cc : row.c;
  const float* rs = kInterleaved ? row.ss : row.s;
  VF c[K], s[K];
  for (size_t k = 0; k < K; ++k) {
    c[k] = hn::LoadU(df, rc + k * N);
    s[k] = hn::LoadU(df, rs + k * N);
  }
  // (Unrolled: a rolled loop over k reads c[k] and s[k] from the stack, two loads more per vector.)
  for (uint32_t h = 0; h < nh; ++h, in += hd, out += hd) {
    if constexpr (kInterleaved) {
#pragma GCC unroll 8
      for (size_t k = 0; k < K; ++k) {
        StoreF<kStream>(RotateInPlace(hn::LoadU(df, in + k * N), c[k], s[k]), out + k * N);
      }
    } else {
      const size_t half = K * N;
#pragma GCC unroll 8
      for (size_t k = 0; k < K; ++k) {
        VF y0, y1;
        Rotate(hn::LoadU(df, in + k * N), hn::LoadU(df, in + half + k * N), c[k], s[k], y0, y1);
        StoreF<kStream>(y0, out + k * N);
        StoreF<kStream>(y1, out + half + k * N);
      }
    }
  }
}
#endif

// Whether an f32 call's output goes out with non-temporal (streaming) stores: out of place, the output at least
// stream_threshold() bytes (beyond the cache: a plain store first reads each line it writes, a streaming one does
// not; measured: docs/simd.md), and every head's start aligned for a full vector store (the output 64-byte aligned,
// head_dim a multiple of 16 floats). Only the heads of HeadsRowInRegisters stream; tokens that take another path
// store as usual, and the call ends with a store fence.
HWY_INLINE bool StreamOut(const rc_rope_args* a, size_t token_bytes) {
  if (a->out == a->in || reinterpret_cast<uintptr_t>(a->out) % 64 != 0 || (size_t(a->head_dim) * sizeof(float)) % 64 != 0)
    return false;
  return a->n_tokens * token_bytes >= stream_threshold();
}

// Every head of one token. The common call (no fix, no pass-through copies) is a plain loop over the heads.
// Whether it stored with streaming stores (`stream`, where the heads keep their row in registers).
template <int S, bool kInterleaved, bool kId>
HWY_INLINE bool TokenHeads(const rc_rope_args* a, const typename Io<S>::T* in, typename Io<S>::T* out, size_t np,
                           size_t o, size_t end, const RowView& row, bool fix, bool copy_head, bool copy_tail,
                           std::vector<typename Io<S>::T>& saved, [[maybe_unused]] bool stream = false) {
  using T = typename Io<S>::T;
  const size_t hd = a->head_dim;
  const uint32_t nh = a->n_heads;
  if (!fix && !copy_head && !copy_tail) {
#if HWY_TARGET != HWY_SCALAR
    if constexpr (S == kF32 && !kId) {
      const size_t N = hn::Lanes(DF());
      const size_t rn = kInterleaved ? 2 * np : np;  // elements of the row the heads read
      if (stream) {
        if (rn == 8 * N && kInterleaved) return HeadsRowInRegisters<8, true, true>(in + o, out + o, nh, hd, row), true;
        if (rn == 4 * N) return HeadsRowInRegisters<4, kInterleaved, true>(in + o, out + o, nh, hd, row), true;
      }
      if (rn == 8 * N && kInterleaved) return HeadsRowInRegisters<8, true>(in + o, out + o, nh, hd, row), false;
      if (rn == 4 * N) return HeadsRowInRegisters<4, kInterleaved>(in + o, out + o, nh, hd, row), false;
    }
#endif
    for (uint32_t h = 0; h < nh; ++h, in += hd, out += hd) {
      if constexpr (kInterleaved) {
        HeadInterleaved<S, kId>(in + o, out + o, np, row);
      } else {
        HeadHalfSplit<S, kId>(in + o, out + o, np, row);
      }
    }
    return false;
  }
  const bool in_place = a->in == a->out;
  for (uint32_t h = 0; h < nh; ++h, in += hd, out += hd) {
    if (fix && in_place) saved.assign(in + o, in + o + a->rotary_dim);
    if constexpr (kInterleaved) {
      HeadInterleaved<S, kId>(in + o, out + o, np, row);
    } else {
      HeadHalfSplit<S, kId>(in + o, out + o, np, row);
    }
    if (fix) FixOverflowedPairs(a, in_place ? saved.data() : in + o, out + o, np, row.c, row.s);
    if (copy_head) std::memcpy(out, in, o * sizeof(T));
    if (copy_tail) std::memcpy(out + end, in + end, (hd - end) * sizeof(T));
  }
  return false;
}

template <int S, bool kInterleaved>
void Kernel(const rc_rope_args* a, const CallV3& v3) {
  using T = typename Io<S>::T;
  const T* in = static_cast<const T*>(a->in);
  T* out = static_cast<T*>(a->out);
  const size_t np = a->rotary_dim / 2;
  const ThetaTable* th = v3.table ? nullptr : &theta_table_cached(a);  // a table call needs no theta
  const CallV2 v = GetCallV2(a);
  constexpr bool kDup = kInterleaved && !kPairs<S>;  // RotateInPlace's rows
  // Reused across calls (a decode call is a few hundred ns; four allocations
  // were a visible part of it). Padding lanes are written by TrigRow only
  // with values that are never stored. (One access to the thread_local: its
  // guard is not paid per token and head.)
  thread_local Row tl_row;
  Row& row = tl_row;
  if (row.c.size() < np + kRowPad) {
    row.c.assign(np + kRowPad, 0.0f);
    row.s.assign(np + kRowPad, 0.0f);
    row.cc.assign(2 * (np + kRowPad), 0.0f);
    row.ss.assign(2 * (np + kRowPad), 0.0f);
    row.ceo.assign(np + kRowPad, 0.0f);
    row.seo.assign(np + kRowPad, 0.0f);
    row.id.assign(np + kRowPad, 0u);
    row.idd.assign(2 * (np + kRowPad), 0u);
    row.ac.clear();
    row.as.clear();
  }
  constexpr bool kEvenOdd = !kInterleaved && kHalfBlocks<S>;
  const size_t N = hn::Lanes(DF());
  // Pass-through elements: [0, o) and [o + R, head_dim), copied when out != in.
  const size_t o = v.offset, end = v.offset + a->rotary_dim;
  const bool copy_head = a->out != a->in && o > 0;
  const bool copy_tail = a->out != a->in && end < a->head_dim;
  const size_t token_elems = size_t(a->n_heads) * a->head_dim;
  TokenAngle m[4];
  thread_local std::vector<CosSin> tl_given;  // a table's row, as the scalar kernel takes it (impls/given_table.hpp)
  thread_local std::vector<T> tl_saved;       // an in-place head's rotated slice, for the overflow fix
  std::vector<CosSin>& given = tl_given;
  if (v3.table) given.resize(np);
  // f32 rows read where the caller's table holds them. A head reads c and s below np only when np is a
  // multiple of N (no partial vector), or not at all when interleaved heads rotate in place (cc, ss).
  const bool in_table = v3.table && TableReadInPlace(a, *v3.table, v3.inverse, v);
  const bool view_table = in_table && (kDup || np % N == 0);
  RowView view{row.c.data(), row.s.data(), row.cc.data(), row.ss.data(), row.ceo.data(), row.seo.data(),
               row.id.data(), row.idd.data()};
  const bool stream = S == kF32 && StreamOut(a, token_elems * sizeof(T));  // (item 10 of docs/simd.md)
  bool streamed = false;
  // A product can overflow f32 where the exact output is finite: with an attention factor > 1, or a table row's
  // values beyond 1 (a row within [-1, 1] is as a computed one: no fix, and none of its per-head cost).
  for (uint64_t t = 0; t < a->n_tokens; ++t) {
    bool fix = v.af > 1.0;
    bool ident = false;  // some pair is the identity: f32 heads blend it, 16-bit tokens go to the scalar rotation
    if (in_table) {
      const GivenTable& g = *v3.table;
      const int64_t r = a->positions[t];  // one axis
      const float* c = reinterpret_cast<const float*>(g.base[0]) + r * g.row_stride[0];
      const float* s = a->table_kind == RC_TABLE_COS_SIN_CAT ? c + np
                                                               : reinterpret_cast<const float*>(g.base[1]) + r * g.row_stride[1];
      bool beyond, all;
      ScanRow(c, s, np, ident, all, beyond);
      if (all) {
        CopyToken(in + size_t(t) * token_elems, out + size_t(t) * token_elems, token_elems);
        continue;
      }
      if constexpr (S != kF32) {
        if (ident) {  // a pair copied: the scalar kernel's row
          given_row(a, g, t, v.af, v3.inverse, given.data());
          ropecheck::rotate_token_scalar(a, t, given.data());
          continue;
        }
      }
      fix = fix || beyond;
      if (view_table) {
        view.c = c;
        view.s = s;
      } else {  // a partial last vector would read past the row: a padded copy
        std::memcpy(row.c.data(), c, np * sizeof(float));
        std::memcpy(row.s.data(), s, np * sizeof(float));
      }
      if (kDup) DupRowVec(c, s, row.cc.data(), row.ss.data(), np);
      if (ident) IdRows(row, np, [&](size_t i) { return c[i] == 1.0f && s[i] == 0.0f; });
    } else if (v3.table) {
      ident = given_row(a, *v3.table, t, v.af, v3.inverse, given.data());
      if (S != kF32 && ident) {  // a pair copied: the scalar kernel's row
        ropecheck::rotate_token_scalar(a, t, given.data());
        continue;
      }
      for (size_t i = 0; i < np; ++i) {
        row.c[i] = given[i].c;
        row.s[i] = given[i].s;
        fix = fix || !(std::fabs(given[i].c) <= 1.0f) || !(std::fabs(given[i].s) <= 1.0f);
      }
      if (kDup) DupRowVec(row.c.data(), row.s.data(), row.cc.data(), row.ss.data(), np);
      if (ident) IdRows(row, np, [&](size_t i) { return given[i].identity; });
    } else {
      ident = TokenRow(a, *th, v, t, np, row.c.data(), row.s.data(), kDup ? row.cc.data() : nullptr,
                       kDup ? row.ss.data() : nullptr, row, m);
      if (v3.inverse) {  // e^{-j phi}: the same row, sin negated
        for (size_t i = 0; i < np; ++i) row.s[i] = -row.s[i];
        if (kDup) DupRowVec(row.c.data(), row.s.data(), row.cc.data(), row.ss.data(), np);
      }
      // Every pair's angle is 0 (af is 1): m == 0 and every theta finite (in range when th->fast).
      if (ident && v.single >= 0 && m[v.single].m == 0 &&
          (th->fast || std::all_of(th->th.begin(), th->th.begin() + np, [](long double x) { return std::isfinite(x); }))) {
        CopyToken(in + size_t(t) * token_elems, out + size_t(t) * token_elems, token_elems);
        continue;
      }
      if (ident) {
        if constexpr (S != kF32) {
          rotate_token_scalar(a, *th, m, v.pair_axis, t, row.c.data(), row.s.data());
          continue;
        }
        IdRows(row, np, [&](size_t i) { return angle_is_zero(m[v.pair_axis ? v.pair_axis[i] : 0], *th, i); });
      }
    }
    if (kEvenOdd) EvenOddRows(row, view.c, view.s, np, N);
    const T* tin = in + size_t(t) * token_elems;
    T* tout = out + size_t(t) * token_elems;
    if constexpr (S == kF32) {
      if (ident) {
        TokenHeads<S, kInterleaved, true>(a, tin, tout, np, o, end, view, fix, copy_head, copy_tail, tl_saved);
        continue;
      }
    }
    streamed |= TokenHeads<S, kInterleaved, false>(a, tin, tout, np, o, end, view, fix, copy_head, copy_tail, tl_saved,
                                                   stream);
  }
  if (streamed) {
#if HWY_ARCH_X86
    _mm_sfence();  // the streaming stores ordered before the call returns
#endif
    note_streamed_call();
  }
}

template <int S>
void KernelFor(const rc_rope_args* a, const CallV3& v3) {
  a->layout == RC_INTERLEAVED ? Kernel<S, true>(a, v3) : Kernel<S, false>(a, v3);
}

int Apply(const rc_rope_args* call) {
  rc_rope_args n;  // the call with v1-style zeros read as neutral (impls/registry.hpp)
  if (int rc = normalize_kernel_args(call, n, 4); rc != RC_OK) return rc;
  // The v3 draft as the scalar kernel takes it: the tensor form through the legacy form (impls/tensor_form.hpp),
  // the inverse, and a caller-given table of every kind and dtype.
  if (n.abi_version >= 3 && n.q.data) return apply_tensor_form(n, &Apply);
  const rc_rope_args* a = &n;
  CallV3 v3;
  GivenTable g;
  if (a->abi_version >= 3) {
    v3.inverse = a->direction == RC_INVERSE;
    if (a->table_kind != RC_TABLE_NONE) {
      if (int rc = given_table_of(a, a->attention_factor, g); rc != RC_OK) return rc;
      v3.table = &g;
    }
  }
  switch (a->dtype) {
    case RC_F32: KernelFor<kF32>(a, v3); break;
    case RC_F16: KernelFor<kF16>(a, v3); break;
    case RC_BF16: UseBF16Insn() ? KernelFor<kBF16Insn>(a, v3) : KernelFor<kBF16>(a, v3); break;
    default: return 2;
  }
  return RC_OK;
}

// ---- test hooks: this target's load and store paths ------------------------

// The paths the kernels use: interleaved data as elements (pairs on SCALAR),
// half-split as two blocks of n.
template <int S>
void StoreN(uint32_t layout, const float* y0, const float* y1, void* out, size_t n) {
  using T = typename Io<S>::T;
  T* o = static_cast<T*>(out);
  const DF df;
  const size_t N = hn::Lanes(df);
  if (layout == RC_INTERLEAVED && !kPairs<S>) {
    std::vector<float> y(2 * n);
    for (size_t k = 0; k < n; ++k) {
      y[2 * k] = y0[k];
      y[2 * k + 1] = y1[k];
    }
    for (size_t i = 0; i < 2 * n; i += N) Io<S>::Store(hn::LoadU(df, y.data() + i), o + i);
    return;
  }
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
  if (layout == RC_INTERLEAVED && !kPairs<S>) {
    std::vector<float> x(2 * n + N);
    for (size_t i = 0; i < 2 * n; i += N) hn::StoreU(Io<S>::Load(p + i), df, x.data() + i);
    for (size_t k = 0; k < n; ++k) {
      x0[k] = x[2 * k];
      x1[k] = x[2 * k + 1];
    }
    return;
  }
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

// This target's cos/sin row for token `token` of a (c, s: rotary_dim/2 + kRowPad floats): the row the
// kernel rotates with (ABI v2: each pair's axis, times the attention factor).
void RowHookImpl(const rc_rope_args* a, uint64_t token, float* c, float* s) {
  const ThetaTable& th = theta_table_cached(a);
  const CallV2 v = GetCallV2(a);
  if (v.single >= 0) {  // one axis: no per-axis rows
    TrigRow(token_angle(a, th, token, uint32_t(v.single)), th, a->rotary_dim / 2, v.af, c, s);
    return;
  }
  thread_local Row row;  // the per-axis rows
  TokenAngle m[4];
  TokenRow(a, th, v, token, a->rotary_dim / 2, c, s, nullptr, nullptr, row, m);
}

void StoreHookImpl(uint32_t dtype, uint32_t layout, const float* y0, const float* y1, void* out, size_t n) {
  switch (dtype) {
    case RC_F32: StoreN<kF32>(layout, y0, y1, out, n); break;
    case RC_F16: StoreN<kF16>(layout, y0, y1, out, n); break;
    case RC_BF16: UseBF16Insn() ? StoreN<kBF16Insn>(layout, y0, y1, out, n) : StoreN<kBF16>(layout, y0, y1, out, n); break;
    default: break;
  }
}

void LoadHookImpl(uint32_t dtype, uint32_t layout, const void* in, float* x0, float* x1, size_t n) {
  switch (dtype) {
    case RC_F32: LoadN<kF32>(layout, in, x0, x1, n); break;
    case RC_F16: LoadN<kF16>(layout, in, x0, x1, n); break;
    case RC_BF16: UseBF16Insn() ? LoadN<kBF16Insn>(layout, in, x0, x1, n) : LoadN<kBF16>(layout, in, x0, x1, n); break;
    default: break;
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace ropecheck::simd
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include <algorithm>
#include <atomic>
#include <cctype>

namespace ropecheck::simd {

HWY_EXPORT(Apply);

namespace {
// The last-level cache one core fills: the smaller of what the system reports and 32 MiB (an AMD CCD's L3; a
// virtual machine may report its socket's: this project's reports 508 MiB).
size_t default_stream_threshold() {
  const long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
  const size_t cap = size_t(32) << 20;
  return l3 > 0 ? std::min(size_t(l3), cap) : cap;
}
std::atomic<size_t> g_stream_threshold{default_stream_threshold()};
std::atomic<uint64_t> g_streamed_calls{0};
}  // namespace

size_t stream_threshold() { return g_stream_threshold.load(std::memory_order_relaxed); }
size_t set_stream_threshold(size_t bytes) { return g_stream_threshold.exchange(bytes); }
void note_streamed_call() { g_streamed_calls.fetch_add(1, std::memory_order_relaxed); }
uint64_t streamed_calls() { return g_streamed_calls.load(std::memory_order_relaxed); }

void rotate_token_scalar(const rc_rope_args* a, const ThetaTable& th, const TokenAngle* m, const uint8_t* pair_axis,
                         uint64_t t, const float* c, const float* s) {
  const uint32_t np = a->rotary_dim / 2;
  std::vector<CosSin> row(np);
  for (uint32_t i = 0; i < np; ++i) row[i] = {c[i], s[i], angle_is_zero(m[pair_axis ? pair_axis[i] : 0], th, i)};
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
#define RC_SIMD_TARGET(BIT, NS) v.push_back({BIT, target_label(BIT), &NS::Apply, &NS::StoreHookImpl, &NS::LoadHookImpl, &NS::RowHookImpl})
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
