// The built-in kernels' cos/sin row (impls/trig_row.hpp):
//  - every SIMD target's vectorised row (TrigRow) is bit-identical to the
//    scalar cos_sin_row, on the double-double path, on lanes and rows that fall
//    back to the long double path, and around the fallback thresholds;
//  - the row is accurate: each f32 value is within half an f32 ulp of the exact
//    cos/sin (MPFR, 256 bits) of the long double angle factors' exact product,
//    plus 2^-50 absolute (the error docs/error-model.md enters for the row).
#include <gtest/gtest.h>

#include <bit>
#include <boost/multiprecision/mpfr.hpp>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "core/rope_case.hpp"
#include "impls/simd/simd_common.hpp"
#include "impls/simd/simd_kernels.hpp"
#include "impls/trig_row.hpp"

using namespace ropecheck;
using Big = boost::multiprecision::number<boost::multiprecision::mpfr_float_backend<256>>;

namespace {

struct RowCase {
  uint32_t rotary_dim = 128;
  double base = 10000.0;
  double scale = 1.0;
  std::vector<double> table;  // empty: base^(-2i/d)
  std::vector<int64_t> positions;

  rc_rope_args args() const {
    rc_rope_args a{};
    a.abi_version = 1;
    a.dtype = RC_F32;
    a.layout = RC_INTERLEAVED;
    a.n_tokens = positions.size();
    a.n_heads = 1;
    a.head_dim = rotary_dim;
    a.rotary_dim = rotary_dim;
    a.positions = positions.data();
    a.base = base;
    a.inv_freq = table.empty() ? nullptr : table.data();
    a.position_scale = scale;
    return a;
  }
};

int64_t random_position(std::mt19937_64& rng) {
  switch (rng() % 8) {
    case 0: return int64_t(rng() % 4096);
    case 1: return int64_t(rng() % (uint64_t(1) << 31));
    case 2: return -int64_t(rng() % (uint64_t(1) << 31));
    case 3: return int64_t(rng() % (uint64_t(1) << 40));  // many lanes beyond 2^30: the fallback
    case 4: return int64_t(rng() >> 1);                   // up to 2^63
    case 5: return 0;
    case 6: return (int64_t(1) << (rng() % 31)) + int64_t(rng() % 3) - 1;  // powers of two and neighbours
    default: return int64_t(rng() % 1000000);
  }
}

RowCase random_row_case(std::mt19937_64& rng) {
  RowCase c;
  const uint32_t dims[] = {2, 4, 6, 10, 20, 34, 64, 72, 80, 120, 128, 130, 256};
  c.rotary_dim = dims[rng() % std::size(dims)];
  const double bases[] = {10000.0, 500000.0, 1e6, 2.0, 1.5, 1e9};
  c.base = bases[rng() % std::size(bases)];
  const double scales[] = {1.0, 1.0, 0.25, 1.0 / 3.0, 8.0, 1e-3, 1e-300, 1e300, 0.0};
  c.scale = scales[rng() % std::size(scales)];
  if (rng() % 4 == 0) {
    // A frequency table, sometimes with entries out of the double-double
    // range (the whole call falls back) or zero.
    for (uint32_t i = 0; i < c.rotary_dim / 2; ++i) {
      double v = std::ldexp(double(rng() % 1000000 + 1) / 1e6, -int(rng() % 40));
      switch (rng() % 40) {
        case 0: v = 0.0; break;
        case 1: v = 1e-200; break;
        case 2: v = 1e200; break;
        case 3: v = 4.9e-324; break;
        default: break;
      }
      c.table.push_back(v);
    }
  }
  const size_t n = 1 + rng() % 6;
  for (size_t t = 0; t < n; ++t) c.positions.push_back(random_position(rng));
  return c;
}

std::string describe(const RowCase& c, size_t t, size_t i) {
  char b[256];
  std::snprintf(b, sizeof b, "rotary_dim %u base %a scale %a table %s position %lld pair %zu", c.rotary_dim,
                c.base, c.scale, c.table.empty() ? "no" : "yes", (long long)c.positions[t], i);
  return b;
}

TEST(TrigRow, EveryTargetIsBitIdenticalToTheScalarRow) {
  std::mt19937_64 rng(20261122);
  size_t rows = 0, fallback_lanes = 0, simple_rows = 0, general_rows = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    const RowCase rc = random_row_case(rng);
    const rc_rope_args a = rc.args();
    const ThetaTable th = make_theta_table(&a);
    const size_t np = rc.rotary_dim / 2;
    std::vector<float> c0(np + simd::kRowPad), s0(np + simd::kRowPad);
    std::vector<float> c1(np + simd::kRowPad), s1(np + simd::kRowPad);
    for (size_t t = 0; t < rc.positions.size(); ++t) {
      const TokenAngle m = token_angle(&a, th, t);
      simple_rows += m.fast && m.simple;
      general_rows += m.fast && !m.simple;
      cos_sin_row(m, th, np, c0.data(), s0.data());
      for (size_t i = 0; i < np; ++i)
        fallback_lanes += !m.fast || !(std::fabs(m.hi * th.hi[i]) < trig_dd::kFastLimit);
      ++rows;
      for (const auto& target : simd::supported_targets()) {
        target.row(&a, t, c1.data(), s1.data());
        for (size_t i = 0; i < np; ++i) {
          if (std::bit_cast<uint32_t>(c0[i]) == std::bit_cast<uint32_t>(c1[i]) &&
              std::bit_cast<uint32_t>(s0[i]) == std::bit_cast<uint32_t>(s1[i]))
            continue;
          FAIL() << target.name << ": " << describe(rc, t, i) << ": cos " << std::hexfloat << c1[i] << " sin "
                 << s1[i] << ", scalar row " << c0[i] << " " << s0[i];
        }
      }
    }
  }
  // The cases reach every path: long double lanes, and double-double rows
  // with an exact double m (the shorter product) or not.
  EXPECT_GT(fallback_lanes, 1000u);
  EXPECT_GT(simple_rows, 1000u);
  EXPECT_GT(general_rows, 1000u);
  EXPECT_GT(rows, 5000u);
}

// |got - exact| <= half an f32 ulp of exact + 2^-50 + extra.
bool within(float got, const Big& exact, double extra, double* excess) {
  const double e = exact.convert_to<double>();
  // The f32 ulp at |exact| (2^-149 below the normal range); ilogb of the
  // double, not of float(e), which can underflow to 0 (ilogb(0) is INT_MIN).
  const double ulp = e == 0 ? 0x1p-149 : std::ldexp(1.0, std::max(std::ilogb(e), -126) - 23);
  const Big err = abs(Big(got) - exact);
  const double allowed = 0.5 * ulp + 0x1p-50 + extra;
  *excess = err.convert_to<double>() / ulp;  // in f32 ulps
  return err <= Big(allowed);
}

TEST(TrigRow, IsWithinHalfAnUlpPlus2ToMinus50OfTheExactCosSin) {
  std::mt19937_64 rng(7);
  size_t checked = 0, off_by_rounding = 0, fallback = 0;
  double worst = 0, worst_ld = 0;
  size_t off_ld = 0;
  for (int iter = 0; iter < 400; ++iter) {
    RowCase rc = random_row_case(rng);
    if (!std::isfinite(rc.scale * 1e10)) rc.scale = 1.0;
    const rc_rope_args a = rc.args();
    const ThetaTable th = make_theta_table(&a);
    const size_t np = rc.rotary_dim / 2;
    std::vector<float> c(np + simd::kRowPad), s(np + simd::kRowPad);
    for (size_t t = 0; t < rc.positions.size(); ++t) {
      const TokenAngle m = token_angle(&a, th, t);
      cos_sin_row(m, th, np, c.data(), s.data());
      for (size_t i = 0; i < np; ++i) {
        const Big angle = Big(m.m) * Big(th.th[i]);  // exact: 64 x 64 bits
        if (abs(angle) > Big(0x1p45)) continue;
        // The long double path (|p| >= 2^30 or out of range) rounds the
        // product to 64 bits first: the error model's 2^-64 |angle|, and
        // sincosl's own error (an ulp of long double).
        const bool dd = m.fast && std::fabs(m.hi * th.hi[i]) < trig_dd::kFastLimit;
        const double extra = dd ? 0.0 : std::ldexp(abs(angle).convert_to<double>(), -63);
        fallback += !dd;
        const Big ec = cos(angle), es = sin(angle);
        double xc = 0, xs = 0;
        const bool ok = within(c[i], ec, extra, &xc) && within(s[i], es, extra, &xs);
        (dd ? worst : worst_ld) = std::max({dd ? worst : worst_ld, xc, xs});
        if (!ok)
          FAIL() << describe(rc, t, i) << ": angle " << angle.str(25) << " cos " << std::hexfloat << c[i] << " sin "
                 << s[i] << " exact " << ec.str(20) << " " << es.str(20);
        const bool cr = float(ec.convert_to<double>()) == c[i] && float(es.convert_to<double>()) == s[i];
        (dd ? off_by_rounding : off_ld) += !cr;
        ++checked;
      }
    }
  }
  std::printf(
      "checked %zu pairs: double-double path %zu (%zu not the correctly rounded f32, max error %.4f f32 ulp), "
      "long double path %zu (%zu, max %.4f ulp)\n",
      checked, checked - fallback, off_by_rounding, worst, fallback, off_ld, worst_ld);
  EXPECT_GT(checked, 20000u);
  EXPECT_GT(fallback, 500u);
}

// ABI v2: each target's row (the row hook gives the row the kernel rotates with) for several position
// axes merged by a pair_axis map, times an attention factor, is bit-identical to `scalar`'s
// cos_sin_pair(m[pair_axis[i]], theta, i, af).
TEST(TrigRow, V2RowsWithAxesAndAttentionFactorAreBitIdentical) {
  std::mt19937_64 rng(20260101);
  const double factors[] = {1.0, 1.2079441541679836, 0.7, 3.0, 0x1.fffffffffffffp-1};
  size_t rows = 0, fallback_lanes = 0;
  for (int iter = 0; iter < 1500; ++iter) {
    const RowCase rc = random_row_case(rng);
    const uint32_t axes = 1 + uint32_t(rng() % 3);
    const size_t n = rc.positions.size(), np = rc.rotary_dim / 2;
    std::vector<int64_t> pos;
    for (uint32_t ax = 0; ax < axes; ++ax)
      for (size_t t = 0; t < n; ++t) pos.push_back(ax == 0 ? rc.positions[t] : random_position(rng));
    std::vector<uint8_t> map;
    if (rng() % 4) {
      for (size_t i = 0; i < np; ++i) map.push_back(uint8_t(rng() % axes));
    }
    rc_rope_args a = rc.args();
    a.abi_version = 2;
    a.positions = pos.data();
    a.n_pos_axes = axes;
    a.pair_axis = map.empty() ? nullptr : map.data();
    a.attention_factor = factors[rng() % std::size(factors)];
    const ThetaTable th = make_theta_table(&a);
    std::vector<float> c1(np + simd::kRowPad), s1(np + simd::kRowPad);
    for (size_t t = 0; t < n; ++t) {
      TokenAngle m[4];
      for (uint32_t ax = 0; ax < axes; ++ax) m[ax] = token_angle(&a, th, t, ax);
      ++rows;
      for (const auto& target : simd::supported_targets()) {
        target.row(&a, t, c1.data(), s1.data());
        for (size_t i = 0; i < np; ++i) {
          const TokenAngle& mi = m[map.empty() ? 0 : map[i]];
          float c0, s0;
          cos_sin_pair(mi, th, i, c0, s0, a.attention_factor);
          fallback_lanes += !mi.fast || !(std::fabs(mi.hi * th.hi[i]) < trig_dd::kFastLimit);
          if (std::bit_cast<uint32_t>(c0) == std::bit_cast<uint32_t>(c1[i]) &&
              std::bit_cast<uint32_t>(s0) == std::bit_cast<uint32_t>(s1[i]))
            continue;
          FAIL() << target.name << ": " << describe(rc, t, i) << " axes " << axes << " af "
                 << a.attention_factor << ": cos " << std::hexfloat << c1[i] << " sin " << s1[i]
                 << ", scalar " << c0 << " " << s0;
        }
      }
    }
  }
  EXPECT_GT(rows, 3000u);
  EXPECT_GT(fallback_lanes, 1000u);
}

// With an attention factor af the row is af*cos, af*sin rounded once to f32: within half an f32 ulp of
// the exact af*cos(angle) + af*2^-50 (the polynomial's error, scaled) + af*2^-53 (the double product).
TEST(TrigRow, WithAttentionFactorIsWithinHalfAnUlpOfTheExactScaledCosSin) {
  std::mt19937_64 rng(71);
  const double factors[] = {1.2079441541679836, 0.7, 3.0};
  size_t checked = 0, off_by_rounding = 0, off_ld = 0, fallback = 0;
  for (int iter = 0; iter < 200; ++iter) {
    RowCase rc = random_row_case(rng);
    if (!std::isfinite(rc.scale * 1e10)) rc.scale = 1.0;
    const double af = factors[iter % std::size(factors)];
    const rc_rope_args a = rc.args();
    const ThetaTable th = make_theta_table(&a);
    const size_t np = rc.rotary_dim / 2;
    for (size_t t = 0; t < rc.positions.size(); ++t) {
      const TokenAngle m = token_angle(&a, th, t);
      for (size_t i = 0; i < np; ++i) {
        const Big angle = Big(m.m) * Big(th.th[i]);
        if (abs(angle) > Big(0x1p45)) continue;
        float c, s;
        cos_sin_pair(m, th, i, c, s, af);
        const bool dd = m.fast && std::fabs(m.hi * th.hi[i]) < trig_dd::kFastLimit;
        const double extra = std::max(af - 1, 0.0) * 0x1p-50 + af * 0x1p-53 +
                             (dd ? 0.0 : af * std::ldexp(abs(angle).convert_to<double>(), -63));
        const Big ec = Big(af) * cos(angle), es = Big(af) * sin(angle);
        double xc = 0, xs = 0;
        if (!(within(c, ec, extra, &xc) && within(s, es, extra, &xs)))
          FAIL() << describe(rc, t, i) << " af " << af << ": angle " << angle.str(25) << " cos " << std::hexfloat
                 << c << " sin " << s << " exact " << ec.str(20) << " " << es.str(20);
        (dd ? off_by_rounding : off_ld) += !(float(ec.convert_to<double>()) == c && float(es.convert_to<double>()) == s);
        ++checked;
        fallback += !dd;
      }
    }
  }
  std::printf(
      "checked %zu pairs with an attention factor: double-double path %zu (%zu not the correctly rounded f32), "
      "long double path %zu (%zu)\n",
      checked, checked - fallback, off_by_rounding, fallback, off_ld);
  EXPECT_GT(checked, 10000u);
}

}  // namespace
