// The property engine's driver (properties/engine.hpp): executions are a pure function of the seed, a failure
// is shrunk by RapidCheck and reproduced by (seed, case, shrink path), and every property of the set catches a
// kernel that breaks it through the same definitions the suite runs.
#include <cmath>
#include <cstring>
#include <set>

#include "properties/generators.hpp"
#include "properties/rc_random.hpp"
#include "properties/property_support.hpp"

namespace ropecheck::props {
namespace {

// Stretches pair 0's second output (by 1.25 interleaved, 1.5 half-split: not a rotation, and the layouts
// disagree) only when rotary_dim >= 8: a bug shrinking must keep.
int wrong_pair0(const rc_rope_args* a) {
  if (int rc = ropecheck_scalar_rope(a); rc != RC_OK) return rc;
  if (a->rotary_dim < 8) return RC_OK;
  const Dtype d = Dtype(a->dtype);
  for (uint64_t t = 0; t < a->n_tokens; ++t)
    for (uint32_t h = 0; h < a->n_heads; ++h) {
      const size_t b = (size_t(t) * a->n_heads + h) * a->head_dim;
      const auto [d0, d1] = pair_dims(Layout(a->layout), a->rotary_dim, 0);
      const float y1 = load_f32(d, a->out, b + d1);
      store_f32(d, a->out, b + d1, y1 * (a->layout == RC_HALF_SPLIT ? 1.5f : 1.25f));
    }
  return RC_OK;
}

Implementation broken() {
  return {"wrong-pair0", "test", &wrong_pair0, {Dtype::f32, Dtype::f16, Dtype::bf16},
          {Layout::interleaved, Layout::half_split}, true, ""};
}

TEST(Engine, ExecutionsAreAFunctionOfTheSeed) {
  const Implementation k = broken();
  ImplementationHandle h(k, *builtin_promise("scalar"));
  const PropertyDef& p = *find_property("norm");
  DriverOptions o;
  o.seed = 42;
  o.cases = 30;
  const PropertyOutcome a = run_property(p, h, Dtype::f32, Layout::interleaved, Scope{}, o);
  const PropertyOutcome b = run_property(p, h, Dtype::f32, Layout::interleaved, Scope{}, o);
  ASSERT_TRUE(a.failed) << "the norm property did not catch a stretched pair 0";
  EXPECT_EQ(a.index, b.index);
  EXPECT_EQ(a.shrink_path, b.shrink_path);
  EXPECT_EQ(a.message, b.message);
  o.seed = 43;
  const PropertyOutcome c = run_property(p, h, Dtype::f32, Layout::interleaved, Scope{}, o);
  EXPECT_TRUE(c.failed);
}

TEST(Engine, AShrunkFailureIsReproducedByItsSeedCaseAndPath) {
  const Implementation k = broken();
  ImplementationHandle h(k, *builtin_promise("scalar"));
  for (const char* id : {"accuracy", "inner-products", "relative", "layouts"}) {
    SCOPED_TRACE(id);
    const PropertyDef& p = *find_property(id);
    DriverOptions o;
    o.seed = 7;
    o.cases = 40;
    const PropertyOutcome out = run_property(p, h, Dtype::f32, Layout::interleaved, Scope{}, o);
    ASSERT_TRUE(out.failed);
    EXPECT_FALSE(out.shrink_path.empty()) << "nothing was shrunk";
    // The same execution again: the same failure, the same message.
    const auto r = replay_execution(p, h, Dtype::f32, Layout::interleaved, Scope{}, o.seed, out.index,
                                    out.shrink_path, o.cases);
    EXPECT_EQ(r.type, rc::detail::CaseResult::Type::Failure);
    EXPECT_EQ(r.description, out.message);
    // A correct kernel passes that very execution.
    ImplementationHandle ok(*find_implementation("scalar"));
    const auto r2 = replay_execution(p, ok, Dtype::f32, Layout::interleaved, Scope{}, o.seed, out.index,
                                     out.shrink_path, o.cases);
    EXPECT_EQ(r2.type, rc::detail::CaseResult::Type::Success) << r2.description;
    EXPECT_NE(out.reproduce(p, Dtype::f32, Layout::interleaved, o.seed).find("seed 7, case "), std::string::npos);
  }
}

TEST(Engine, ShrinkingReachesASmallCase) {
  // The stretch needs rotary_dim >= 8 and one token: shrinking gets there from much larger cases.
  const Implementation k = broken();
  ImplementationHandle h(k, *builtin_promise("scalar"));
  DriverOptions o;
  o.seed = 3;
  o.cases = 50;
  o.max_shrink_tries = 2000;
  const PropertyOutcome out = run_property(*find_property("norm"), h, Dtype::f32, Layout::half_split, Scope{}, o);
  ASSERT_TRUE(out.failed);
  EXPECT_FALSE(out.shrink_capped);
  EXPECT_GE(out.shrink_path.size(), 2u) << "the first failing case was already the smallest: nothing was shrunk";
  // The message names the smallest case: at most 2 tokens, rotary_dim 8 (the smallest that shows the bug).
  EXPECT_NE(out.message.find("rotary_dim=8 "), std::string::npos) << out.message;
}

TEST(Engine, ShrinkPathsRoundTripAndBadOnesAreRefused) {
  EXPECT_EQ(parse_shrink_path(""), std::vector<size_t>{});
  EXPECT_EQ(parse_shrink_path("3.0.12"), (std::vector<size_t>{3, 0, 12}));
  EXPECT_EQ(shrink_path_text({3, 0, 12}), "3.0.12");
  for (const char* bad : {".", "1..2", "a", "1.-2", "1.2.", "99999999999"})
    EXPECT_THROW(parse_shrink_path(bad), std::invalid_argument) << bad;
}

TEST(Engine, TheSetHasEveryPropertyOnceWithItsRow) {
  std::set<std::string> ids, rows;
  for (const PropertyDef& p : property_set()) {
    EXPECT_TRUE(ids.insert(p.id).second) << p.id;
    EXPECT_TRUE(rows.insert(p.row).second) << p.row;
    EXPECT_EQ(std::string(p.row).rfind("property: ", 0), 0u) << p.row;
    EXPECT_EQ(find_property(p.id), &p);
  }
  // 12 v1 properties, the 6 ABI v2 variant properties, the ABI v3 inverse and adjoint (suite_variants.cpp) and
  // the six v3 call shapes, same call twice included (suite_tensor.cpp)
  EXPECT_EQ(ids.size(), 26u);
  EXPECT_EQ(find_property("nonsense"), nullptr);
  // Not exportable: composition (an input is an output) and input-untouched (needs the input buffer).
  EXPECT_FALSE(find_property("composition")->exportable);
  EXPECT_FALSE(find_property("input-untouched")->exportable);
  // nor the inverse (its second call's input is the first's output); the other v3 properties are (manifest
  // version 5, when the export names a v3 feature). Each of them is first asked its plainest calls
  // (PropertyDef::probe), which are v3 calls; the table kinds' cases carry tables (run on a kernel that takes
  // tables only).
  EXPECT_FALSE(find_property("inverse")->exportable);
  for (const char* id : {"inverse", "adjoint", "strides", "q-and-k", "sequences", "int32-positions", "same-call-twice"}) {
    const PropertyDef* p = find_property(id);
    ASSERT_NE(p, nullptr) << id;
    EXPECT_EQ(p->exportable, std::string_view(id) != "inverse") << id;
    ASSERT_NE(p->probe, nullptr) << id;
    for (const RopeCase& c : p->probe(Dtype::bf16, Layout::half_split)) {
      EXPECT_EQ(c.validate(), "") << id;
      EXPECT_EQ(c.min_abi_version(), 3u) << id;
    }
  }
  EXPECT_TRUE(find_property("table-kinds")->gives_tables);
  EXPECT_FALSE(find_property("table-kinds")->exportable);
  // Those that look at an out-of-place call's buffers: not run on a kernel that takes in-place calls only.
  EXPECT_TRUE(find_property("input-untouched")->out_of_place);
  EXPECT_TRUE(find_property("in-place")->out_of_place);
}

// gen::elements computes its values without RapidCheck's combinators; they must be exactly the values the
// combinators draw (elements_by_combinators) from the same Random at any size, for every dtype and value
// class, and its shrinks must be the combinators' own (replay files name shrink paths through them).
TEST(Engine, ElementsAreTheCombinatorsValuesAndShrinks) {
  uint64_t compared = 0, specials = 0;
  for (uint64_t seed = 0; seed < 400; ++seed)
    for (Dtype d : kAllDtypes)
      for (gen::Values v : {gen::Values::safe, gen::Values::finite, gen::Values::specials}) {
        const size_t n = size_t(seed % 7 == 0 ? 0 : (seed * 37) % 300);
        const int size = int((seed * 13) % 120);
        const rc::Random r(seed * 0x9e3779b97f4a7c15ull + uint64_t(d) * 3 + uint64_t(v));
        const rc::Shrinkable<Bytes> fast = gen::elements(d, v, n)(r, size);
        const rc::Shrinkable<Bytes> slow = gen::elements_by_combinators(d, v, n)(r, size);
        const Bytes fv = fast.value();
        ASSERT_EQ(fv, slow.value()) << "seed " << seed << " " << to_string(d) << " n " << n;
        for (size_t k = 0; k < n; ++k) specials += std::isnan(load_f32(d, fv.data(), k)) || std::isinf(load_f32(d, fv.data(), k));
        compared += n;
        if (seed % 50 == 0 && n > 0) {  // the first shrinks, one level down
          auto a = fast.shrinks(), b = slow.shrinks();
          for (int k = 0; k < 8; ++k) {
            const auto sa = a.next(), sb = b.next();
            ASSERT_EQ(bool(sa), bool(sb));
            if (!sa) break;
            ASSERT_EQ(sa->value(), sb->value()) << "shrink " << k << " of seed " << seed;
          }
        }
      }
  EXPECT_GT(compared, 300000u);
  EXPECT_GT(specials, 1000u);  // the special-value draws were compared too
}

// gen::RandomState splits as rc::Random does (its state read back through RapidCheck's serialisation equals
// the copy's, past the 64 appended bits at which the key is re-encrypted, on either side of each split), and
// first_draws gives what rc::Random::next() gives first, in batches of every length (the vector groups of 8
// and the rest).
TEST(Engine, RandomStateSplitsAndDrawsAsRapidCheck) {
  uint64_t draws = 0;
  for (uint64_t seed = 0; seed < 64; ++seed) {
    rc::Random r(seed * 0x9e3779b97f4a7c15ull + 1);
    gen::RandomState s = gen::RandomState::of(r);
    std::vector<rc::Random> kept;
    std::vector<gen::RandomState> kept_s;
    uint64_t path = seed * 0x2545f4914f6cdd1dull + 7;
    for (int step = 0; step < 300; ++step) {
      path = path * 6364136223846793005ull + 1442695040888963407ull;
      rc::Random right = r.split();
      gen::RandomState right_s = s.split();
      if ((path >> 33) % 3 == 0) {  // go on with the right one
        r = right;
        s = right_s;
      } else {
        kept.push_back(right);
        kept_s.push_back(right_s);
      }
      const gen::RandomState back = gen::RandomState::of(r);
      ASSERT_EQ(0, std::memcmp(back.key, s.key, sizeof s.key)) << "seed " << seed << " step " << step;
      ASSERT_EQ(back.bits, s.bits) << "seed " << seed << " step " << step;
      ASSERT_EQ(back.bitsi, s.bitsi) << "seed " << seed << " step " << step;
    }
    const size_t n = kept.size() - seed % 13;  // every length mod 8
    std::vector<uint64_t> got(n);
    gen::first_draws(kept_s.data(), n, got.data());
    for (size_t i = 0; i < n; ++i, ++draws) ASSERT_EQ(got[i], rc::Random(kept[i]).next()) << "seed " << seed << " i " << i;
  }
  EXPECT_GT(draws, 10000u);
  // A state something was drawn from is refused, not drawn from wrongly.
  rc::Random r(5);
  (void)r.next();
  const gen::RandomState drawn = gen::RandomState::of(r);
  uint64_t out;
  EXPECT_THROW(gen::first_draws(&drawn, 1, &out), std::logic_error);
}

}  // namespace
}  // namespace ropecheck::props
