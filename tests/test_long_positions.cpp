// Positions far past 2^31 (docs/gate.md, "Positions"; docs/error-model.md, "The pair's length", "Positions
// beyond 2^31"): the judge's length rule, and the built-in kernels against the exact reference out there.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "core/rope_case.hpp"
#include "impls/registry.hpp"
#include "properties/contract.hpp"
#include "properties/error_model.hpp"
#include "properties/judge.hpp"
#include "properties/promise.hpp"
#include "reference/reference.hpp"

using namespace ropecheck;

namespace {

RopeCase long_case(Dtype d, Layout l, std::vector<int64_t> positions, double base = 10000.0, uint32_t hd = 64,
                   uint32_t rd = 64, uint32_t seed = 1) {
  RopeCase c;
  c.dtype = d;
  c.layout = l;
  c.head_dim = hd;
  c.rotary_dim = rd;
  c.n_heads = 2;
  c.base = base;
  c.positions = std::move(positions);
  c.input.assign(c.n_bytes(), 0);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-4, 4);
  for (size_t k = 0; k < c.n_elements(); ++k) store_f32(d, c.input.data(), k, u(rng));
  return c;
}

// Each rotated pair of c's exact output turned by `turn(pair)` radians and scaled by `scale`, stored in c's
// dtype: what a kernel with that angle error and that length error gives.
Bytes turned(const RopeCase& c, const ReferenceOutput& ref, double (*turn)(uint32_t), double scale) {
  Bytes out = c.input;
  for (size_t t = 0; t < c.n_tokens(); ++t)
    for (size_t h = 0; h < c.n_heads; ++h)
      for (uint32_t i = 0; i < c.rotary_dim / 2; ++i) {
        const auto [d0, d1] = pair_elements(c, i);
        const size_t k0 = head_offset(c, t, h) + d0, k1 = head_offset(c, t, h) + d1;
        const double a = turn(i), e0 = ref.exact[k0], e1 = ref.exact[k1];
        store_f32(c.dtype, out.data(), k0, float(scale * (e0 * std::cos(a) - e1 * std::sin(a))));
        store_f32(c.dtype, out.data(), k1, float(scale * (e0 * std::sin(a) + e1 * std::cos(a))));
      }
  return out;
}

}  // namespace

// Under angles=f32, at positions past 2^31 the fast pairs' direction is free (K ulps of f32 at |phi| >= pi), but
// not their length: a pipeline that turns them anywhere passes, one that also lengthens them by 8 u fails, by
// the length rule (before it, the radial and total allowances of 2N let it through).
TEST(LongPositions, UnderAnglesF32TheLengthIsStillJudged) {
  const Contract f32 = *parse_contract("angles=f32", nullptr);
  const Criteria cr = Criteria::of(loaded_kernel_error_model(AngleModel::exact), f32);
  const RopeCase c = long_case(Dtype::f32, Layout::half_split, {(int64_t(1) << 31) + 1, (int64_t(1) << 40) + 3}, 10000.0,
                               64, 64);
  const ReferenceOutput ref = reference_rope(c);
  // Pair 0 and the next fast ones (|phi| >= 2^22 at these positions: K * ulp32 >= pi) turned by 2 rad; the slow
  // pairs (theta_i < 2^-12 from pair 12 on) keep their angle.
  auto turn = [](uint32_t i) { return i < 8 ? 2.0 : 0.0; };
  const Bytes ok = turned(c, ref, turn, 1.0);
  EXPECT_TRUE(judge_output(c, ref, ok.data(), cr).ok()) << judge_output(c, ref, ok.data(), cr).report();
  const Bytes longer = turned(c, ref, turn, 1.0 + 8 * 0x1p-24);
  const Judgement j = judge_output(c, ref, longer.data(), cr);
  EXPECT_FALSE(j.ok());
  EXPECT_NE(j.report().find("the pair's length is off by"), std::string::npos) << j.report();
  // The default contract judges the direction there too: the turn alone fails.
  const Criteria exact = Criteria::of(loaded_kernel_error_model(AngleModel::exact), Contract{});
  EXPECT_FALSE(judge_output(c, ref, ok.data(), exact).ok());
}

// The built-in kernels compute the angle in double-double below 2^32 and long double beyond: far past 2^31 every
// pair is within their own error model's allowance (2^-63 (3 + ln base) |phi| for the angle), in and out of the
// SIMD targets, up to 2^62.
TEST(LongPositions, BuiltinsStayWithinTheirModelFarPast2To31) {
  const std::vector<int64_t> positions = {
      (int64_t(1) << 31) - 1, int64_t(1) << 31,       (int64_t(1) << 32) + 1, (int64_t(1) << 33) + 3,
      (int64_t(1) << 40) - 1, (int64_t(1) << 40) + 7, (int64_t(1) << 48) + 5, (int64_t(1) << 53) + 1,
      (int64_t(1) << 62) - 1};
  size_t judged = 0;
  for (const std::string name : {"scalar", "simd", "conventional-fp32"}) {
    const Implementation* impl = find_implementation(name);
    ASSERT_TRUE(impl) << name;
    const KernelPromise p = promise_of(*impl);
    const Criteria cr = Criteria::of(p.error_model, p.contract);
    for (Dtype d : kAllDtypes)
      for (Layout l : kAllLayouts)
        for (const auto& [base, hd, rd] : {std::tuple{10000.0, 64u, 64u}, {500000.0, 96u, 64u}, {1e6, 128u, 128u}}) {
          const RopeCase c = long_case(d, l, positions, base, hd, rd, uint32_t(judged));
          Bytes out;
          ASSERT_EQ(run_kernel(*impl, c, out), RC_OK) << name << " " << c.summary();
          ReferenceOptions ro;
          ro.angle_model = p.angle_model;
          const ReferenceOutput ref = reference_rope(c, ro);
          const Judgement j = judge_output(c, ref, out.data(), cr);
          EXPECT_TRUE(j.ok()) << name << " " << c.summary() << "\n" << j.report();
          ++judged;
        }
  }
  EXPECT_EQ(judged, 3u * 3 * 2 * 3);
}
