// Where a failing case's violations are (properties/localisation.hpp): the pairs, heads, tokens, the tensor and the
// angle a fingerprint names, from a judgement's violation map alone; and the judge fills that map.
#include <gtest/gtest.h>

#include <cmath>

#include "properties/judge.hpp"
#include "properties/localisation.hpp"
#include "reference/reference.hpp"

namespace ropecheck {
namespace {

RopeCase shape(uint32_t head_dim, uint32_t heads, size_t tokens) {
  RopeCase c;
  c.dtype = Dtype::f32;
  c.head_dim = c.rotary_dim = head_dim;
  c.n_heads = heads;
  for (size_t t = 0; t < tokens; ++t) c.positions.push_back(int64_t(t));
  c.input.assign(c.n_bytes(), 0);
  return c;
}

Judgement marked(const RopeCase& c, bool (*bad)(size_t t, size_t h, uint32_t i)) {
  Judgement j;
  const uint32_t np = c.rotary_dim / 2;
  j.violated.assign(c.n_tokens() * c.n_heads * np, 0);
  for (size_t t = 0; t < c.n_tokens(); ++t)
    for (size_t h = 0; h < c.n_heads; ++h)
      for (uint32_t i = 0; i < np; ++i) j.violated[(t * c.n_heads + h) * np + i] = bad(t, h, i);
  return j;
}

TEST(Localisation, NamesAVectorTailHeadsAndTokens) {
  const RopeCase c = shape(60, 8, 3);  // 30 pairs: 24..29 after the last full vector of 8
  const Localisation tail = localise(c, marked(c, [](size_t, size_t, uint32_t i) { return i >= 24; }), nullptr, {});
  EXPECT_EQ(tail.tail_width, 8u);
  EXPECT_EQ(tail.text(), "pairs 24-29 of 30 only (the tail after the last full vector of 8 pairs); every head; "
                         "every token");
  const Localisation heads =
      localise(c, marked(c, [](size_t, size_t h, uint32_t) { return h > 0; }), nullptr, {});
  EXPECT_EQ(heads.text(), "every pair; heads 1-7 of 8 (head 0 right); every token");
  const Localisation all = localise(c, marked(c, [](size_t, size_t, uint32_t) { return true; }), nullptr, {});
  EXPECT_EQ(all.text(), "every pair, head and token");
  EXPECT_EQ(localise(c, Judgement{}, nullptr, {}).text(), "");
}

TEST(Localisation, NamesTheAngleFromWhichItFails) {
  RopeCase c = shape(4, 1, 4);  // 2 pairs
  c.positions = {0, 100, 1 << 20, 1 << 24};
  std::vector<double> angles;
  for (int64_t m : c.positions)
    for (uint32_t i = 0; i < 2; ++i) angles.push_back(double(m) * std::pow(10000.0, -double(i)));
  // Failing where |angle| >= 2^20 only.
  Judgement j = marked(c, [](size_t t, size_t, uint32_t i) { return t >= 2 && i == 0; });
  const Localisation L = localise(c, j, nullptr, angles);
  EXPECT_EQ(L.from_angle, double(1 << 20));
  EXPECT_NE(L.text().find("from |angle| 1.05e+06 (2^20.0) on, every pair below it right"), std::string::npos)
      << L.text();
}

// The judge marks the pairs it fails: one pair of one head changed in a correctly rounded output.
TEST(Localisation, TheJudgeMarksTheViolatingPairs) {
  RopeCase c = shape(8, 2, 2);
  c.positions = {3, 5};
  for (size_t k = 0; k < c.n_elements(); ++k) store_f32(c.dtype, c.input.data(), k, float(1 + k % 5));
  const ReferenceOutput ref = reference_rope(c, {});
  Bytes got = ref.rounded;
  const size_t e = head_offset(c, 1, 1) + 2;  // token 1, head 1, element 2: pair 1 in the interleaved layout
  store_f32(c.dtype, got.data(), e, load_f32(c.dtype, got.data(), e) + 0.5f);
  const Judgement j = judge_output(c, ref, got.data(), Criteria::flat_bound(1.0));
  ASSERT_EQ(j.violations, 1u);
  const Localisation L = localise(c, j, nullptr, {});
  EXPECT_EQ(L.text(), "pair 1 of 4; head 1 of 2 (head 0 right); token 1 of 2 (token 0 right)");
}

}  // namespace
}  // namespace ropecheck
