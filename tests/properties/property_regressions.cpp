// Regression tests: shrunk, deterministic reproducers of corner cases the
// properties reach only rarely, pinned for every registered implementation so
// a kernel that regresses on them fails here on every run, not only when the
// random search happens to hit them again.
#include <cstring>

#include "properties/judge.hpp"
#include "properties/property_support.hpp"
#include "reference/reference.hpp"

namespace ropecheck::props {
namespace {

class Regressions : public KernelTest {};

uint32_t bits_of_value(Dtype d, float v) { return double_to_bits_exact(d, v); }

RopeCase small_case(Dtype d, Layout l, uint32_t head_dim, uint32_t rotary_dim, std::vector<int64_t> positions,
                    const std::vector<uint32_t>& bits) {
  RopeCase c;
  c.dtype = d;
  c.layout = l;
  c.head_dim = head_dim;
  c.rotary_dim = rotary_dim;
  c.n_heads = 1;
  c.positions = std::move(positions);
  c.input.assign(c.n_bytes(), 0);
  for (size_t k = 0; k < bits.size() && k < c.n_elements(); ++k) store_bits(d, c.input.data(), k, bits[k]);
  return c;
}

// Signed zeros at position 0: a kernel that multiplies by cos 0 = 1 and
// sin 0 = 0 instead of copying turns (-0, -0) into (+0, -0).
TEST_P(Regressions, SignedZerosAtPositionZeroKeepTheirSigns) {
  const Dtype d = dtype();
  const uint32_t pz = 0, nz = d == Dtype::f32 ? 0x80000000u : 0x8000u;
  const RopeCase c = small_case(d, layout(), 8, 8, {0}, {nz, nz, nz, pz, pz, nz, pz, pz});
  for (int pass = 0; pass < 2; ++pass) {
    Bytes out;
    ASSERT_EQ(pass ? run_kernel_in_place(impl(), c, out) : run_kernel(impl(), c, out), RC_OK);
    for (size_t k = 0; k < c.n_elements(); ++k)
      EXPECT_EQ(load_bits(d, out.data(), k), load_bits(d, c.input.data(), k))
          << "element " << k << (pass ? " (in place)" : "") << ": " << c.summary();
  }
}

// Signalling NaN and odd payloads in pass-through dims are copied, not
// converted (a widen/narrow round trip would quiet them).
TEST_P(Regressions, SignallingNaNPassesThroughUnchanged) {
  const Dtype d = dtype();
  const uint32_t snan = d == Dtype::f32 ? 0x7f800001u : d == Dtype::f16 ? 0x7c01u : 0x7f81u;
  const uint32_t neg_snan = d == Dtype::f32 ? 0xffa00005u : d == Dtype::f16 ? 0xfd05u : 0xff85u;
  const uint32_t subnormal = 1;
  const RopeCase c = small_case(d, layout(), 6, 2, {12345}, {bits_of_value(d, 1.0f), bits_of_value(d, -2.0f), snan,
                                                                neg_snan, subnormal, bits_of_value(d, 3.0f)});
  for (int pass = 0; pass < 2; ++pass) {
    Bytes out;
    ASSERT_EQ(pass ? run_kernel_in_place(impl(), c, out) : run_kernel(impl(), c, out), RC_OK);
    for (uint32_t k = 2; k < 6; ++k)
      EXPECT_EQ(load_bits(d, out.data(), k), load_bits(d, c.input.data(), k))
          << "pass-through dim " << k << (pass ? " (in place)" : "") << ": " << c.summary();
  }
}

// The largest position (2^31) with rotary_dim 2 (theta_0 = 1: the angle is
// the position itself) and a position that f32 cannot hold (2^24 + 1): the
// kernel is within its bound under its own angle model.
TEST_P(Regressions, LargestPositionsWithinBound) {
  const Dtype d = dtype();
  for (int64_t m : {int64_t(1) << 31, (int64_t(1) << 24) + 1, (int64_t(1) << 31) - 1}) {
    for (uint32_t rotary : {2u, 128u}) {
      std::vector<uint32_t> bits(rotary);
      for (uint32_t k = 0; k < rotary; ++k) bits[k] = bits_of_value(d, float(k % 7) - 3.25f);
      RopeCase c = small_case(d, layout(), rotary, rotary, {m}, bits);
      c.base = 500000.0;
      Bytes out;
      ASSERT_EQ(run_kernel(impl(), c, out), RC_OK);
      const ReferenceOutput ref = reference_rope(c, ReferenceOptions{promise_of(impl()).angle_model});
      const Judgement j = judge_output(c, ref, out.data(), promise_of(impl()).bound(c));
      EXPECT_TRUE(j.ok()) << j.report();
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Registry, Regressions, testing::ValuesIn(kernel_params()), param_name);

}  // namespace
}  // namespace ropecheck::props

namespace ropecheck::props {
namespace {

class RegressionLayouts : public KernelTest {};

// Found by InterleavedEqualsPermutedHalfSplit on the SIMD f16 kernels (shrunk
// counterexample, 2026-11-21): half-split gave NaN (0xffff) for pair 6 where
// interleaved gave -0x1.a8p+1, from finite inputs (2^-14, 2^-14) at position 8.
// Both layouts are also judged against the reference.
TEST_P(RegressionLayouts, F16TableAtPosition8) {
  const Dtype d = dtype();
  const std::vector<double> table = {
      0x1p+0, 0x1.b25a001781193p-1, 0x1.707aa3f9e1202p-1, 0x1.3898ba9e8d2c3p-1, 0x1.093069178d379p-1,
      0x1.c1f14d4738c4bp-2, 0x1.7db4a2009c6e3p-2, 0x1.43d136248490fp-2, 0x1.12b542ba56564p-2, 0x1.d217def294b1ep-3,
      0x1.8b682a4336476p-3, 0x1.4f70cd348db43p-3, 0x1.1c9194d504805p-3, 0x1.e2d2d999951acp-4, 0x1.999999999999ap-4,
      0x1.5b7b334600e1p-4, 0x1.26c8832e4db35p-4, 0x1.f42790fdaead4p-5, 0x1.a84d74f27b8bfp-5, 0x1.67f43dd293d08p-5,
      0x1.315d4e66e38b5p-5, 0x1.030dc4ea03a72p-5, 0x1.b7886ac3bd56dp-6, 0x1.74dfe58edd5b3p-6, 0x1.3c53550291d2dp-6,
      0x1.0c5a3dc3a4901p-6, 0x1.c74f548807339p-7, 0x1.824247ae10e24p-7, 0x1.47ae147ae147bp-7, 0x1.15fc2904cd80ap-7,
      0x1.d7a7384a15ebcp-8, 0x1.901fa731588a6p-8, 0x1.53712a5b9609cp-8, 0x1.1ff697dba973ap-8, 0x1.e8954a3e38df2p-9,
      0x1.9e7c6e43390b7p-9, 0x1.5fa0556964454p-9, 0x1.2a4cb7a57de29p-9, 0x1.fa1eee6a82eaap-10, 0x1.ad5d2f9f6db39p-10,
      0x1.f18f4f74ef3e5p-12, 0x1.3501d2f1a71b9p-10, 0x1.0624dd2f1a9fcp-10, 0x1.bcc6a807af343p-11, 0x1.7952936e77efdp-11,
      0x1.4019528de06ebp-11, 0x1.0f8dbb7c7807dp-11, 0x1.ccbdbfc5dbec3p-12, 0x1.86ddd4fe93e5bp-12, 0x1.4b96be9c2da2cp-12,
      0x1.194d11211d043p-12, 0x1.dd478c3bfc9dbp-13, 0x1.94e58b8868bbbp-13, 0x1.577dbfb2be294p-13, 0x1.2365f8a8fa5e7p-13,
      0x1.ee695182a4f8ep-14};
  // f16 bits of the shrunk input; other dtypes get the same values.
  const std::vector<uint32_t> f16_bits = {
      0x36c4, 0x36c4, 0x6000, 0x0400, 0x36c4, 0x0400, 0x36c4, 0x3800, 0x36c4, 0x0400, 0x6000, 0xac00, 0x0400, 0x0400,
      0x0400, 0x0000, 0x6000, 0x7bff, 0xac00, 0x0000, 0x36c4, 0xac00, 0x0001, 0x0400, 0x0400, 0x36c4, 0x36c4, 0x6000,
      0x6000, 0x36c4, 0x6000, 0x36c4, 0x36c4, 0xc000, 0x0000, 0x0000, 0x0000, 0xac00, 0x0400, 0x36c4, 0x36c4, 0x36c4,
      0x0000, 0xac00, 0x0001, 0x0000, 0x0000, 0x36c4, 0xc000, 0x36c4, 0xac00, 0x0001, 0x0001, 0x36c4, 0x36c4, 0x36c4,
      0x36c4, 0x0000, 0xac00, 0x6000, 0x36c4, 0x36c4, 0x0400, 0x36c4, 0x0000, 0xac00, 0x0400, 0x6000, 0x36c4, 0x3800,
      0xac00, 0x36c4, 0x36c4, 0xac00, 0x0400, 0xac00, 0x36c4, 0x0400, 0x36c4, 0x8000, 0xac00, 0x36c4, 0x0001, 0x6000,
      0x36c4, 0x36c4, 0x36c4, 0x0400, 0x36c4, 0x7bff, 0xac00, 0x6000, 0x36c4, 0x0001, 0x0400, 0x0000, 0xac00, 0x36c4,
      0x36c4, 0x36c4, 0xac00, 0x6000, 0xac00, 0x36c4, 0x36c4, 0x36c4, 0x6000, 0xac00, 0x36c4, 0x6000, 0xac00, 0x7bff};
  RopeCase ci;
  ci.dtype = d;
  ci.layout = Layout::interleaved;
  ci.head_dim = ci.rotary_dim = 112;
  ci.positions = {8};
  ci.inv_freq = table;
  ci.input.assign(ci.n_bytes(), 0);
  for (size_t k = 0; k < f16_bits.size(); ++k) store_f32(d, ci.input.data(), k, f16_bits_to_f32(uint16_t(f16_bits[k])));
  RopeCase ch = ci;
  ch.layout = Layout::half_split;
  const uint32_t half = ci.rotary_dim / 2;
  for (uint32_t i = 0; i < half; ++i) {
    store_bits(d, ch.input.data(), i, load_bits(d, ci.input.data(), 2 * i));
    store_bits(d, ch.input.data(), i + half, load_bits(d, ci.input.data(), 2 * i + 1));
  }
  Bytes oi, oh;
  ASSERT_EQ(run_kernel(impl(), ci, oi), RC_OK);
  ASSERT_EQ(run_kernel(impl(), ch, oh), RC_OK);
  for (const RopeCase* c : {&ci, &ch}) {
    const Judgement j = judge_output(*c, reference_rope(*c, ReferenceOptions{promise_of(impl()).angle_model}),
                                     (c == &ci ? oi : oh).data(), promise_of(impl()).bound(*c));
    EXPECT_TRUE(j.ok()) << j.report();
  }
  if (impl().bit_exact_layouts)
    for (uint32_t i = 0; i < half; ++i) {
      EXPECT_EQ(load_bits(d, oi.data(), 2 * i), load_bits(d, oh.data(), i)) << "pair " << i;
      EXPECT_EQ(load_bits(d, oi.data(), 2 * i + 1), load_bits(d, oh.data(), i + half)) << "pair " << i;
    }
}

INSTANTIATE_TEST_SUITE_P(Registry, RegressionLayouts, testing::ValuesIn(kernel_dtype_params()), param_name_no_layout);

}  // namespace
}  // namespace ropecheck::props
