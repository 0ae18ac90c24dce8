// The fuzzers' differential check (fuzz/differential.cpp) keeps a memo within a case: an output the judge passed,
// with the reference and criteria it was judged under. An implementation takes an earlier one's judgement only for
// the same bytes; these tests plant kernels that agree with the one before them everywhere but in one element of
// one layout, and check each is still caught, named, for the check it fails: the judge's (its own output differs)
// or the layout check's (its own output is the earlier one's, bit for bit; its twin in the other layout is not).
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "fuzz/differential.hpp"
#include "properties/promise.hpp"

using namespace ropecheck;

namespace {

// Kernels made from the scalar one. base<1> moves element 0 (pair 0, rotated) by one ulp in both layouts: still
// within the bound and layout-consistent (element 0 is pair 0's first coordinate in each layout), and not the
// correctly rounded output wherever the scalar kernel's is (the check skips the memo for that one). liar<B> is
// base<B> with bit 20 of element 0 (2^-3 of it) flipped in one layout only: the other layout (the layout check's
// twin), or the case's own (what the judge sees).
template <int B>
int base(const rc_rope_args* a) {
  const int rc = ropecheck_scalar_rope(a);
  if (rc == 0 && B == 1) static_cast<uint32_t*>(a->out)[0] ^= 1u;
  return rc;
}
template <int B, uint32_t Layout>
int liar(const rc_rope_args* a) {
  const int rc = base<B>(a);
  if (rc == 0 && a->layout == Layout) static_cast<uint32_t*>(a->out)[0] ^= 1u << 20;
  return rc;
}

Implementation impl(const std::string& name, rc_rope_apply_fn fn) {
  Implementation i;
  i.name = name;
  i.fn = fn;
  i.dtypes = {Dtype::f32};
  i.layouts = {Layout::interleaved, Layout::half_split};
  i.bit_exact_layouts = true;
  return i;
}

fuzz::FuzzCase f32_case() {
  fuzz::FuzzCase fc;
  RopeCase& c = fc.rope;
  c.dtype = Dtype::f32;
  c.layout = Layout::interleaved;
  c.head_dim = 8;
  c.rotary_dim = 8;
  c.n_heads = 2;
  c.positions = {1, 7, 1000};
  c.input.resize(c.n_bytes());
  for (size_t k = 0; k < c.n_elements(); ++k) store_f32(c.dtype, c.input.data(), k, 0.75f + 0.125f * float(k % 5));
  return fc;
}

std::string check(const std::vector<const Implementation*>& order) {
  std::vector<fuzz::JudgedKernel> v;
  const KernelPromise scalar_promise = promise_of(*find_implementation("scalar"));
  for (const Implementation* i : order) v.push_back({i, scalar_promise});
  return fuzz::check_implementations(f32_case(), v);
}

}  // namespace

TEST(FuzzDifferential, TheBaseKernelsPassAloneAndTwice) {
  const Implementation b0 = impl("base0", base<0>), b1 = impl("base1", base<1>);
  EXPECT_EQ(check({&b0}), "");
  EXPECT_EQ(check({&b1}), "");
  EXPECT_EQ(check({&b0, &b0}), "");
  EXPECT_EQ(check({&b1, &b1}), "");
}

// Its output in the case's layout is the base kernel's bit for bit (the judge's memo answers for it); its twin
// in the other layout is off: the layout check must still run for it. Under both bases (at least one of them is
// not correctly rounded: the memo is consulted only for such outputs).
TEST(FuzzDifferential, ALayoutMismatchAfterAConsistentTwinIsCaught) {
  const Implementation b0 = impl("base0", base<0>), b1 = impl("base1", base<1>);
  const Implementation l0 = impl("liar", liar<0, RC_HALF_SPLIT>), l1 = impl("liar", liar<1, RC_HALF_SPLIT>);
  for (const auto& [b, l] : {std::pair{&b0, &l0}, std::pair{&b1, &l1}}) {
    const std::string r = check({b, l});
    EXPECT_NE(r.find("implementation 'liar' is not layout-consistent"), std::string::npos) << b->name << ":\n" << r;
    // Alone, the same verdict: the memo changes nothing but the work.
    const std::string alone = check({l});
    EXPECT_NE(alone.find("implementation 'liar' is not layout-consistent"), std::string::npos) << alone;
  }
}

// Its output differs from the base kernel's in element 0 (bit 20: far beyond any bound): the judge's memo holds
// the base output only, so this one is judged, and fails.
TEST(FuzzDifferential, AnOutputOffAfterAPassedOneIsJudged) {
  const Implementation b0 = impl("base0", base<0>), b1 = impl("base1", base<1>);
  const Implementation l0 = impl("liar", liar<0, RC_INTERLEAVED>), l1 = impl("liar", liar<1, RC_INTERLEAVED>);
  for (const auto& [b, l] : {std::pair{&b0, &l0}, std::pair{&b1, &l1}}) {
    const std::string r = check({b, l});
    EXPECT_NE(r.find("implementation 'liar' violates the reference"), std::string::npos) << b->name << ":\n" << r;
  }
}
