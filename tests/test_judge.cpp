// The judge's worst pair per position bucket (JudgeOptions::keep_worst_pairs,
// what the sweep's reports show): on the correctly rounded output with one
// pair planted far off, the planted pair is its bucket's worst, with its site
// and bits; ties keep the first pair; a bucket without a finite pair has no
// entry; and nothing is recorded unless asked. And the one shape of every failure text (FailureText).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "core/rope_case.hpp"
#include "properties/contract.hpp"
#include "properties/error_model.hpp"
#include "properties/failure.hpp"
#include "properties/judge.hpp"
#include "properties/predicates.hpp"
#include "reference/reference.hpp"

using namespace ropecheck;

namespace {

// Tokens at positions 0 (bucket 0), 5 and 6 (bucket 3), 100 (bucket 7) and
// 1000 (bucket 10); every input of the token at 1000 is +Inf, so bucket 10
// has pairs but none of them finite.
RopeCase planted_case(Dtype d, Layout l) {
  RopeCase c;
  c.dtype = d;
  c.layout = l;
  c.head_dim = 10;
  c.rotary_dim = 8;  // 4 pairs and 2 pass-through dims per head
  c.n_heads = 2;
  c.positions = {0, 5, 6, 100, 1000};
  c.input.resize(c.n_bytes());
  for (size_t k = 0; k < c.n_elements(); ++k)
    store_f32(d, c.input.data(), k, float(int(k % 7) - 3) * 0.75f + 0.125f);
  for (size_t h = 0; h < c.n_heads; ++h)
    for (uint32_t k = 0; k < c.head_dim; ++k)
      store_f32(d, c.input.data(), head_offset(c, 4, h) + k, std::numeric_limits<float>::infinity());
  return c;
}

TEST(JudgeWorstPair, IsThePlantedPairWithItsSiteAndBits) {
  for (Dtype d : kAllDtypes) {
    for (Layout l : kAllLayouts) {
      SCOPED_TRACE(std::string(to_string(d)) + " " + std::string(to_string(l)));
      const RopeCase c = planted_case(d, l);
      ASSERT_EQ(c.validate(), "");
      const ReferenceOutput ref = reference_rope(c);
      // Token 2 (position 6, bucket 3), head 1, pair 2: the first element moves by 1,
      // far beyond the rounding error (< 1 u) of every other pair.
      const size_t token = 2, head = 1;
      const uint32_t pair = 2;
      const auto [d0, d1] = pair_dims(l, c.rotary_dim, pair);
      const size_t k0 = head_offset(c, token, head) + d0, k1 = head_offset(c, token, head) + d1;
      Bytes got = ref.rounded;
      store_f32(d, got.data(), k0, load_f32(d, got.data(), k0) + 1.0f);
      ASSERT_NE(load_bits(d, got.data(), k0), load_bits(d, ref.rounded.data(), k0));

      JudgeOptions jo;
      jo.keep_worst_pairs = true;
      const Judgement j = judge_output(c, ref, got.data(), 1e9, jo);
      EXPECT_TRUE(j.ok()) << j.report();  // the huge bound: only the worst pairs are under test here

      // One entry per bucket with a finite pair, the same buckets as the statistics.
      ASSERT_EQ(j.worst_by_bucket.size(), 3u);
      EXPECT_EQ(j.by_bucket.size(), 3u);
      EXPECT_EQ(j.worst_by_bucket.count(10), 0u) << "bucket 10 has no finite pair";
      EXPECT_EQ(j.by_bucket.count(10), 0u);
      for (const auto& [b, w] : j.worst_by_bucket) {
        ASSERT_TRUE(w.valid()) << "bucket " << b;
        EXPECT_EQ(w.e, j.by_bucket.at(b).max) << "bucket " << b;
        EXPECT_EQ(position_bucket(w.position), b);
        EXPECT_EQ(w.position, c.positions[w.token]);
      }

      ASSERT_EQ(j.worst_by_bucket.count(3), 1u);
      const WorstPair& w = j.worst_by_bucket.at(3);
      EXPECT_EQ(w.token, token);
      EXPECT_EQ(w.head, head);
      EXPECT_EQ(w.pair, pair);
      EXPECT_EQ(w.dim0, d0);
      EXPECT_EQ(w.dim1, d1);
      EXPECT_EQ(w.position, 6);
      const size_t ks[2] = {k0, k1};
      for (int k = 0; k < 2; ++k) {
        EXPECT_EQ(w.in_bits[k], load_bits(d, c.input.data(), ks[k]));
        EXPECT_EQ(w.got_bits[k], load_bits(d, got.data(), ks[k]));
        EXPECT_EQ(w.rounded_bits[k], load_bits(d, ref.rounded.data(), ks[k]));
        EXPECT_EQ(w.exact[k], ref.exact[ks[k]]);
      }
      const PairError pe = pair_error(d, load_f32(d, c.input.data(), k0), load_f32(d, c.input.data(), k1),
                                      load_f32(d, got.data(), k0), load_f32(d, got.data(), k1), ref.exact[k0],
                                      ref.exact[k1]);
      EXPECT_EQ(w.e, pe.e);
      EXPECT_EQ(w.radial, pe.radial);
      EXPECT_EQ(w.tangential, pe.tangential);
      EXPECT_GT(w.e, 10.0);
      EXPECT_EQ(w.e, j.stats.max);

      // Position 0 is the identity: every pair's error is 0, and the tie keeps the first pair.
      const WorstPair& w0 = j.worst_by_bucket.at(0);
      EXPECT_EQ(w0.e, 0.0);
      EXPECT_EQ(w0.token, 0u);
      EXPECT_EQ(w0.head, 0u);
      EXPECT_EQ(w0.pair, 0u);
      // The planted pair is not in bucket 7, whose worst stays within rounding.
      EXPECT_LT(j.worst_by_bucket.at(7).e, 2.0);

      // Not asked: nothing recorded, the rest of the judgement unchanged.
      const Judgement plain = judge_output(c, ref, got.data(), 1e9);
      EXPECT_TRUE(plain.worst_by_bucket.empty());
      EXPECT_EQ(plain.pairs, j.pairs);
      EXPECT_EQ(plain.stats.max, j.stats.max);
      EXPECT_EQ(plain.stats.count, j.stats.count);
    }
  }
}

}  // namespace

// Overflow in the formula's own products (docs/error-model.md, "Special values"): with an attention factor above
// 1, x·(af·sin φ) can pass the largest finite number of the arithmetic type while the exact output does not.
// A kernel computing in that type (HF eager, FlashAttention's torch path under arith=bf16; found gating a
// FlashAttention-style Python kernel) overflows there by design: an infinity is within the contract. Where no
// product passes it (the attention factor 1), an infinity for a finite exact output still fails.
TEST(JudgeOverflow, AProductBeyondTheArithmeticRangeMayOverflowAndNothingElse) {
  std::string err;
  const Contract bf16 = *parse_contract("cos-sin=bf16,arith=bf16", &err);
  const Criteria cr = Criteria::of(KernelErrorModel::for_contract(bf16), bf16);
  for (double af : {2.0, 1.0}) {
    SCOPED_TRACE("attention factor " + std::to_string(af));
    RopeCase c;
    c.dtype = Dtype::bf16;
    c.layout = Layout::half_split;
    c.head_dim = c.rotary_dim = 2;
    c.positions = {2};  // phi = 2: sin 0.909, cos -0.416
    c.attention_factor = af;
    c.input.resize(c.n_bytes());
    // As the gate found it (there pair 12 of a 128-wide head): inputs near the top of bf16's range; element 0's
    // exact value af(x0 cos - x1 sin) is finite, x1·af·sin is not (af 2).
    store_bits(Dtype::bf16, c.input.data(), 0, 0x7f16);  // 1.99e38
    store_bits(Dtype::bf16, c.input.data(), 1, 0xff1b);  // -2.06e38
    ASSERT_EQ(c.validate(), "");
    const ReferenceOutput ref = reference_rope(c);
    ASSERT_TRUE(std::isfinite(ref.exact[0])) << ref.exact[0];
    const double x1 = load_f32(Dtype::bf16, c.input.data(), 1);
    const double sin_part = std::fabs(x1) * af * std::fabs(std::sin(ref.angle[0]));
    EXPECT_EQ(sin_part > format_of(Dtype::bf16).max_finite(), af == 2.0) << sin_part;
    Bytes got = ref.rounded;
    store_f32(Dtype::bf16, got.data(), 0, -std::numeric_limits<float>::infinity());
    const Judgement j = judge_output(c, ref, got.data(), cr);
    if (af == 2.0)
      EXPECT_TRUE(j.ok()) << j.report();
    else
      EXPECT_NE(j.report().find("the kernel's output is not finite"), std::string::npos) << j.report();
  }
}

// One failure text for every property and check (properties/failure.hpp): the headline with both sides, the
// difference and the tolerance with how it is made, then indented lines -- the case, where, each element as
// bits (hexfloat = decimal).
TEST(FailureText, OneShapeHeadlineThenIndentedCaseAndElements) {
  RopeCase c;
  c.dtype = Dtype::bf16;
  c.head_dim = 2;
  c.rotary_dim = 2;
  c.positions = {5};
  c.input.resize(c.n_bytes());
  store_f32(c.dtype, c.input.data(), 0, 1.0f);
  store_f32(c.dtype, c.input.data(), 1, -0.5f);
  const std::string t = FailureText("norm of pair 0 not preserved")
                            .sides("||Rx||", 1.25, "||x||", 1.0, 0.0078125)
                            .because("B u max(||x||, min_normal)")
                            .in(c)
                            .line("token 0 (position 5), head 0")
                            .elements("x", c, c.input.data(), {0, 1})
                            .note("a note after the headline is a line of its own")
                            .str();
  EXPECT_EQ(t, "norm of pair 0 not preserved: ||Rx|| = 1.25, ||x|| = 1, |difference| 0.25 > tolerance 0.0078125 = "
               "B u max(||x||, min_normal)\n"
               "  case: " + c.summary() + "\n"
               "  token 0 (position 5), head 0\n"
               "  x: 0x3f80 (0x1p+0 = 1), 0xbf00 (-0x1p-1 = -0.5)\n"
               "  a note after the headline is a line of its own");
  EXPECT_EQ(FailureText("composition broken for pair 2").distance("||a - b||", 3e-7, 1e-7).str(),
            "composition broken for pair 2: ||a - b|| = 3e-07 > tolerance 1e-07");
  // Detail already formatted (a judgement's report) keeps its lines, without a trailing newline.
  EXPECT_EQ(FailureText("accuracy").detail("a\n  b\n").str(), "accuracy\na\n  b");
}

// ---- layouts_violation (bit-exact layouts): the relaid outputs compared bit for bit first, pair by pair only
// on a difference (its message). Outputs here are the reference's own, in each layout.

namespace {

struct LayoutPair {
  RopeCase ci, ch;
  Bytes oi, oh;
};

LayoutPair correctly_rounded_in_both_layouts(Dtype d) {
  RopeCase ci = planted_case(d, Layout::interleaved);
  ci.positions = {0, 5, 6, 100, 1000};
  for (size_t k = 0; k < ci.n_elements(); ++k)  // finite everywhere
    store_f32(d, ci.input.data(), k, float(int(k % 11) - 5) * 0.375f + 0.0625f);
  const RopeCase ch = props::half_split_twin(ci);
  return {ci, ch, reference_rope(ci).rounded, reference_rope(ch).rounded};
}

// Element (token t, head h, dim k) of a buffer of case c.
size_t at(const RopeCase& c, size_t t, size_t h, uint32_t k) { return head_offset(c, t, h) + k; }

}  // namespace

TEST(LayoutsViolation, CorrectlyRoundedOutputsAgreeBitForBitInEveryDtype) {
  for (Dtype d : {Dtype::f32, Dtype::f16, Dtype::bf16}) {
    const LayoutPair p = correctly_rounded_in_both_layouts(d);
    for (bool identity_bits : {true, false})
      EXPECT_EQ(props::layouts_violation(p.ci, p.oi, 0, p.ch, p.oh, 0, true, identity_bits), "") << to_string(d);
  }
}

TEST(LayoutsViolation, OneBitOfOneRotatedElementIsFoundWithItsPair) {
  for (Dtype d : {Dtype::f32, Dtype::bf16}) {
    LayoutPair p = correctly_rounded_in_both_layouts(d);
    // Pair 2's second element, token 3 (position 100), head 1: dim 2 + 4 in the half-split layout.
    const size_t k = at(p.ch, 3, 1, 6);
    store_bits(d, p.oh.data(), k, load_bits(d, p.oh.data(), k) ^ 1u);
    const std::string why = props::layouts_violation(p.ci, p.oi, 0, p.ch, p.oh, 0, true, true);
    EXPECT_NE(why.find("layouts disagree (bit for bit) on pair 2 of token 3 (position 100), head 1"),
              std::string::npos) << why;
  }
}

TEST(LayoutsViolation, SignedZerosDifferUnderIdentityBitsOnly) {
  LayoutPair p = correctly_rounded_in_both_layouts(Dtype::f32);
  // Pair 0 of token 0 (position 0: the identity), head 0: +0 in one layout, -0 in the other.
  store_f32(Dtype::f32, p.oi.data(), at(p.ci, 0, 0, 0), 0.0f);
  store_f32(Dtype::f32, p.oh.data(), at(p.ch, 0, 0, 0), -0.0f);
  EXPECT_NE(props::layouts_violation(p.ci, p.oi, 0, p.ch, p.oh, 0, true, true).find("bit for bit) on pair 0 of token 0"),
            std::string::npos);
  EXPECT_EQ(props::layouts_violation(p.ci, p.oi, 0, p.ch, p.oh, 0, true, false), "");
}

TEST(LayoutsViolation, APassThroughElementIsFound) {
  LayoutPair p = correctly_rounded_in_both_layouts(Dtype::f16);
  const size_t k = at(p.ch, 4, 0, 9);  // the last pass-through dim, token 4, head 0
  store_bits(Dtype::f16, p.oh.data(), k, load_bits(Dtype::f16, p.oh.data(), k) ^ 0x8000u);
  const std::string why = props::layouts_violation(p.ci, p.oi, 0, p.ch, p.oh, 0, true, true);
  EXPECT_NE(why.find("layouts disagree on pass-through dim 9"), std::string::npos) << why;
}
