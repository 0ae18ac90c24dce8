// Accuracy against the exact reference, special values, and the harness's
// proof of power.
//
//  - accuracy: every pair's error against reference_rope(case, impl's angle
//    model) is within impl.bound(case) (judge_output);
//  - special values: NaN and +-Inf inputs are judged by judge_output's
//    documented rules (the reference gives the exact special results);
//  - proof of power: `conventional-fp32` passes under its fp32 angle model and
//    the same accuracy check FAILS under the exact model at large positions --
//    deterministically at positions ~2^24, and as a RapidCheck property that
//    must find a counterexample. If the harness lost its power (reference,
//    judge, bound or generators going blind), these tests fail.
#include <bit>
#include <cmath>
#include <numbers>

#include "properties/generators.hpp"
#include "properties/judge.hpp"
#include "properties/property_support.hpp"
#include "reference/reference.hpp"

namespace ropecheck::props {

class Accuracy : public KernelTest {};

Judgement judge_under(const Implementation& im, AngleModel model, const RopeCase& c, const Bytes& out) {
  const ReferenceOutput ref = reference_rope(c, ReferenceOptions{model});
  JudgeOptions jo;
  jo.keep_values = false;
  return judge_output(c, ref, out.data(), promise_of(im).bound(c), jo);
}


TEST_P(Accuracy, WithinBoundOfReference) { check_property(property_WithinBoundOfReference(handle(), dtype(), layout())); }


TEST_P(Accuracy, SpecialValuesFollowTheRules) { check_property(property_SpecialValuesFollowTheRules(handle(), dtype(), layout())); }

INSTANTIATE_TEST_SUITE_P(Registry, Accuracy, testing::ValuesIn(kernel_params()), param_name);

// ---- proof of power ----------------------------------------------------------

const Implementation& conventional() {
  const Implementation* p = find_implementation("conventional-fp32");
  if (!p) throw std::logic_error("the registry lost conventional-fp32");
  return *p;
}

// Deterministic normal draws (splitmix64 + Box-Muller).
double normal_draw(uint64_t& state) {
  auto next = [&] {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  };
  const double u1 = (double(next() >> 11) + 0.5) * 0x1p-53, u2 = double(next() >> 11) * 0x1p-53;
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

RopeCase large_position_case(Dtype d, Layout l) {
  RopeCase c;
  c.dtype = d;
  c.layout = l;
  c.head_dim = 64;
  c.rotary_dim = 64;
  c.n_heads = 2;
  c.positions = {(int64_t(1) << 24) + 1, (int64_t(1) << 24) + 3, 3 * (int64_t(1) << 23) + 5};
  c.base = 10000.0;
  c.input.assign(c.n_bytes(), 0);
  uint64_t state = 42;
  for (size_t k = 0; k < c.n_elements(); ++k) store_f32(d, c.input.data(), k, float(normal_draw(state)));
  return c;
}

TEST(ProofOfPower, ConventionalFp32FailsExactModelAtPositionsNear2To24) {
  const Implementation& conv = conventional();
  const Implementation* scalar = find_implementation("scalar");
  ASSERT_NE(scalar, nullptr);
  for (Dtype d : kAllDtypes) {
    for (Layout l : kAllLayouts) {
      if (!conv.supports(d) || !conv.supports(l)) continue;
      SCOPED_TRACE(std::string(to_string(d)) + " " + std::string(to_string(l)));
      const RopeCase c = large_position_case(d, l);
      Bytes out;
      ASSERT_EQ(run_kernel(conv, c, out), RC_OK);
      // Its own model: within its bound.
      const Judgement own = judge_under(conv, AngleModel::fp32, c, out);
      EXPECT_TRUE(own.ok()) << own.report();
      // The exact model: the f32 angle (f32(2^24 + 1) = 2^24, and f32(m * inv_freq)
      // rounds by up to 1 rad at m ~ 2^24) is far outside the bound.
      const Judgement exact = judge_under(conv, AngleModel::exact, c, out);
      EXPECT_FALSE(exact.ok()) << "the accuracy check lost its power: conventional-fp32 passed under the exact "
                                  "model at positions ~2^24\n"
                               << exact.report();
      ASSERT_FALSE(exact.findings.empty());
      EXPECT_EQ(exact.findings.front().check, "accuracy");
      EXPECT_GT(exact.stats.max, 100.0 * exact.bound) << exact.report();
      // Every finding prints the case, the input bits, got, exact and the error in u.
      const std::string rep = exact.report();
      for (const char* part : {"case:", "input:", "got:", "exact:", "pair error", "(position "})
        EXPECT_NE(rep.find(part), std::string::npos) << "report lacks '" << part << "':\n" << rep;
      // Control: the accurate scalar kernel passes the exact model on the same case.
      if (scalar->supports(d) && scalar->supports(l)) {
        Bytes sout;
        ASSERT_EQ(run_kernel(*scalar, c, sout), RC_OK);
        const Judgement sj = judge_under(*scalar, AngleModel::exact, c, sout);
        EXPECT_TRUE(sj.ok()) << sj.report();
      }
    }
  }
}

// The accuracy property of conventional-fp32 at positions >= 2^20, judged
// under `model`: small cases so that shrinking is quick.
auto large_position_accuracy(AngleModel model, Dtype d) {
  return [model, d] {
    const Implementation& conv = conventional();
    gen::CaseShape s;
    s.max_rotary = 8;
    s.max_head = 12;
    s.max_heads = 2;
    s.max_tokens = 2;
    RopeCase c = *gen::case_shape(d, Layout::interleaved, s);
    for (int64_t& m : c.positions) m = (int64_t(1) << 20) + m % ((int64_t(1) << 31) - (int64_t(1) << 20));
    c.input = *gen::elements(d, gen::Values::safe, c.n_elements());
    ImplementationHandle h(conv);
    const Bytes out = run_or_discard(h, c);
    const Judgement j = judge_under(conv, model, c, out);
    if (!j.ok()) RC_FAIL("accuracy under the " + std::string(to_string(model)) + " angle model: " + j.report());
  };
}

TEST(ProofOfPower, PropertyFindsConventionalFp32DriftUnderExactModel) {
  rc::detail::TestParams params = rc::detail::configuration().testParams;
  params.maxSuccess = 100;
  const std::string id = current_test_id() + "/exact";
  const auto result = run_property_quiet(id, large_position_accuracy(AngleModel::exact, Dtype::f32), params);
  ASSERT_TRUE(result.is<rc::detail::FailureResult>())
      << "the accuracy property did not find conventional-fp32's drift under the exact model at positions >= 2^20 "
         "in 100 cases: the harness lost its power";
  const std::string text = failure_text(result, id);
  // The failure carries what a user needs: the finding and the reproduce string.
  for (const char* part : {"accuracy under the exact angle model", "case:", "exact:", "RC_PARAMS=\"", "reproduce="})
    EXPECT_NE(text.find(part), std::string::npos) << "failure text lacks '" << part << "':\n" << text;
}

TEST(ProofOfPower, PropertyPassesConventionalFp32UnderItsOwnModel) {
  for (Dtype d : kAllDtypes) {
    if (!conventional().supports(d) || !conventional().supports(Layout::interleaved)) continue;
    SCOPED_TRACE(std::string(to_string(d)));
    const std::string id = current_test_id() + "/" + std::string(to_string(d));
    const auto result = run_property(id, large_position_accuracy(AngleModel::fp32, d));
    EXPECT_TRUE(result.is<rc::detail::SuccessResult>()) << failure_text(result, id);
  }
}

}  // namespace ropecheck::props
