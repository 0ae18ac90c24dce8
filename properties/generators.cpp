#include "properties/generators.hpp"

#include "properties/rc_random.hpp"

#include <algorithm>
#include <bit>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <array>
#include <memory>
#include <numbers>
#include <ostream>

namespace ropecheck::gen {

namespace {

// The bit layout of a storage type.
struct Bits {
  int exp_bits, man_bits, bias;
};
constexpr Bits bits_of(Dtype d) {
  switch (d) {
    case Dtype::f32: return {8, 23, 127};
    case Dtype::f16: return {5, 10, 15};
    case Dtype::bf16: return {8, 7, 127};
  }
  return {0, 0, 0};
}

uint32_t make_bits(Dtype d, uint32_t sign, uint32_t biased_exp, uint32_t man) {
  const Bits b = bits_of(d);
  return (sign << (b.exp_bits + b.man_bits)) | (biased_exp << b.man_bits) | (man & ((1u << b.man_bits) - 1));
}

// A double rounded (to nearest even) into d's bits.
uint32_t round_to_bits(Dtype d, double v) {
  const float f = float(v);
  switch (d) {
    case Dtype::f32: return std::bit_cast<uint32_t>(f);
    case Dtype::f16: return f32_to_f16_bits(f);
    case Dtype::bf16: return f32_to_bf16_bits(f);
  }
  return 0;
}

// The largest biased exponent a value class may use.
uint32_t max_biased_exp(Dtype d, Values v) {
  const Bits b = bits_of(d);
  const uint32_t top = (1u << b.exp_bits) - 2;  // the largest finite binade
  return v == Values::safe ? top - 2 : top;     // safe: |x| < 2^(emax-1) <= max_finite/4
}

rc::Gen<uint32_t> sign_bit() { return rc::gen::map(uniform_int(0, 2), [](int64_t s) { return uint32_t(s); }); }

}  // namespace

rc::Gen<int64_t> uniform_int(int64_t lo, int64_t hi) { return rc::gen::resize(100, rc::gen::inRange<int64_t>(lo, hi)); }

rc::Gen<uint32_t> rotary_dim(uint32_t max_rotary) {
  static const std::vector<uint32_t> chosen = {2, 4, 6, 8, 20, 24, 64, 72, 80, 96, 120, 128, 256};
  std::vector<uint32_t> allowed;
  for (uint32_t r : chosen)
    if (r <= max_rotary) allowed.push_back(r);
  return rc::gen::weightedOneOf<uint32_t>(
      {{3, rc::gen::elementOf(allowed)},
       {1, rc::gen::map(uniform_int(1, int64_t(max_rotary / 2) + 1), [](int64_t h) { return uint32_t(2 * h); })}});
}

rc::Gen<uint32_t> head_dim(uint32_t rotary, uint32_t max_head) {
  return rc::gen::weightedOneOf<uint32_t>(
      {{3, rc::gen::just(rotary)},
       {2, rc::gen::map(uniform_int(1, 17), [rotary](int64_t k) { return rotary + uint32_t(k); })},
       {1, rc::gen::just(std::max(rotary, std::min(max_head, 2 * rotary)))}});  // partial rotary
}

rc::Gen<int64_t> position(int64_t max) {
  const int max_log = 63 - std::countl_zero(uint64_t(std::max<int64_t>(max, 1)));
  return rc::gen::weightedOneOf<int64_t>({
      {2, rc::gen::just<int64_t>(0)},
      {4, uniform_int(0, std::min<int64_t>(max, 16) + 1)},
      {5, rc::gen::exec([=] {
         const int k = int(*uniform_int(1, max_log + 1));
         const int64_t delta = *uniform_int(-2, 3);
         return std::clamp<int64_t>((int64_t(1) << k) + delta, 0, max);
       })},
      {4, uniform_int(0, max + 1)},
      {1, rc::gen::just(max)},
  });
}

rc::Gen<double> base() {
  return rc::gen::weightedOneOf<double>({
      {3, rc::gen::elementOf(std::vector<double>{1e4, 5e5, 1e6})},
      {2, rc::gen::map(uniform_int(0, int64_t(1) << 40),
                       [](int64_t k) {
                         // log-uniform in [2, 1e7]
                         const double t = double(k) / 0x1p40;
                         return std::clamp(2.0 * std::exp(t * std::log(5e6)), 2.0, 1e7);
                       })},
  });
}

rc::Gen<double> position_scale() {
  return rc::gen::weightedOneOf<double>({
      {3, rc::gen::elementOf(std::vector<double>{0.5, 0.25, 0.125, 1.0 / 16, 1.0 / 3, 2.0, 4.0})},
      {2, rc::gen::map(uniform_int(0, int64_t(1) << 32),
                       [](int64_t k) { return std::exp2(-6.0 + 8.0 * double(k) / 0x1p32); })},  // [1/64, 4)
  });
}

rc::Gen<std::vector<double>> inv_freq_table(uint32_t rotary, double b) {
  const uint32_t n = rotary / 2;
  return rc::gen::exec([=] {
    std::vector<double> t(n);
    const int kind = int(*uniform_int(0, 3));
    for (uint32_t i = 0; i < n; ++i) {
      if (kind == 0) {  // base^(-2i/d) scaled by a per-entry factor in [1/8, 1] (NTK/YaRN-like tables)
        const double f = std::exp2(-3.0 * double(*uniform_int(0, 1 << 20)) / 0x1p20);
        t[i] = std::pow(b, -2.0 * i / double(rotary)) * f;
      } else {  // random: 2^-e * (1 + fraction), e in [0, 24]
        const double e = double(*uniform_int(0, 25));
        t[i] = std::ldexp(1.0 + double(*uniform_int(0, int64_t(1) << 52)) / 0x1p52, -int(e));
      }
    }
    if (kind == 2 && n > 0) t[size_t(*uniform_int(0, n))] = 0.0;  // a zero frequency: the identity
    return t;
  });
}

rc::Gen<int> scale_exponent(Dtype d) {
  const int lim = d == Dtype::f16 ? 8 : 60;
  return rc::gen::weightedOneOf<int>({
      {6, rc::gen::just(0)},
      {3, rc::gen::map(uniform_int(-4, 5), [](int64_t e) { return int(e); })},
      {2, rc::gen::map(uniform_int(-lim, lim + 1), [](int64_t e) { return int(e); })},
  });
}

namespace {

// What element_bits draws, one function per kind of value: the combinators below and the direct replay
// (elements_value) call the same functions, so their arithmetic cannot differ.
struct ElementKinds {
  Dtype d;
  int scale_exp;
  uint32_t top, man_range, inf_exp;
  std::vector<uint32_t> chosen;

  ElementKinds(Dtype dt, Values v, int s) : d(dt), scale_exp(s) {
    const Bits b = bits_of(d);
    top = max_biased_exp(d, v);
    man_range = 1u << b.man_bits;
    inf_exp = (1u << b.exp_bits) - 1;
    chosen = {
        make_bits(d, 0, 0, 0),                          // +0
        make_bits(d, 1, 0, 0),                          // -0
        round_to_bits(d, 1.0),           round_to_bits(d, -1.0), round_to_bits(d, 0.5), round_to_bits(d, -2.0),
        make_bits(d, 0, 1, 0),                          // smallest normal
        make_bits(d, 1, 0, man_range - 1),              // largest subnormal
        make_bits(d, 0, 0, 1),                          // smallest subnormal
        make_bits(d, 0, top, man_range - 1),            // the largest value allowed
        make_bits(d, 1, top, 0),
    };
  }
  // Normal draw (Box-Muller on two 32-bit integers).
  uint32_t normal(int64_t a, int64_t c) const {
    const double u1 = (double(a) + 0.5) / 0x1p32, u2 = double(c) / 0x1p32;
    const double g = std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
    return round_to_bits(d, std::ldexp(g, scale_exp));
  }
  uint32_t uniform(int64_t k) const { return round_to_bits(d, std::ldexp(double(k), scale_exp - 24)); }
  uint32_t with_exp(uint32_t s, int64_t e, int64_t m) const { return make_bits(d, s, uint32_t(e), uint32_t(m)); }
  uint32_t subnormal(uint32_t s, int64_t m) const { return make_bits(d, s, 0, uint32_t(m)); }
  uint32_t nan(uint32_t s, int64_t m) const { return make_bits(d, s, inf_exp, uint32_t(m)); }
  uint32_t inf(uint32_t s) const { return make_bits(d, s, inf_exp, 0); }
};

// The weights of element_bits' kinds, in the order of its weightedOneOf.
constexpr size_t kFiniteWeights[] = {30, 12, 8, 6, 6, 6, 10};          // normal uniform chosen large tiny subnormal any
constexpr size_t kSpecialWeights[] = {30, 8, 6, 6, 4, 4, 6, 12, 12};  // ... nan inf
constexpr size_t kScaleWeights[] = {6, 3, 2};                          // 0, [-4, 5), [-lim, lim]

}  // namespace

rc::Gen<uint32_t> element_bits(Dtype d, Values v, int scale_exp) {
  const auto k = std::make_shared<const ElementKinds>(d, v, scale_exp);
  auto normal = rc::gen::apply([k](int64_t a, int64_t c) { return k->normal(a, c); }, uniform_int(0, int64_t(1) << 32),
                               uniform_int(0, int64_t(1) << 32));
  auto uniform = rc::gen::map(uniform_int(-(int64_t(1) << 24), int64_t(1) << 24), [k](int64_t x) { return k->uniform(x); });
  auto chosen = rc::gen::elementOf(k->chosen);
  auto with_exp = [k](uint32_t lo, uint32_t hi) {  // biased exponent in [lo, hi], random mantissa and sign
    return rc::gen::apply([k](uint32_t s, int64_t e, int64_t m) { return k->with_exp(s, e, m); }, sign_bit(),
                          uniform_int(lo, int64_t(hi) + 1), uniform_int(0, k->man_range));
  };
  auto large = with_exp(k->top - 6, k->top);
  auto tiny = with_exp(1, 7);
  auto subnormal = rc::gen::apply([k](uint32_t s, int64_t m) { return k->subnormal(s, m); }, sign_bit(),
                                  uniform_int(1, k->man_range));
  auto any_finite = with_exp(0, k->top);
  const size_t* w = kFiniteWeights;
  if (v != Values::specials) {
    return rc::gen::weightedOneOf<uint32_t>({{w[0], normal},
                                             {w[1], uniform},
                                             {w[2], chosen},
                                             {w[3], large},
                                             {w[4], tiny},
                                             {w[5], subnormal},
                                             {w[6], any_finite}});
  }
  auto nan = rc::gen::apply([k](uint32_t s, int64_t m) { return k->nan(s, m); }, sign_bit(),
                            uniform_int(1, k->man_range));  // quiet and signalling payloads
  auto inf = rc::gen::map(sign_bit(), [k](uint32_t s) { return k->inf(s); });
  w = kSpecialWeights;
  return rc::gen::weightedOneOf<uint32_t>({{w[0], normal},
                                           {w[1], uniform},
                                           {w[2], chosen},
                                           {w[3], large},
                                           {w[4], tiny},
                                           {w[5], subnormal},
                                           {w[6], any_finite},
                                           {w[7], nan},
                                           {w[8], inf}});
}

rc::Gen<Bytes> elements_by_combinators(Dtype d, Values v, size_t n) {
  return rc::gen::exec([=] {
    const int s = *scale_exponent(d);
    const auto bits = *rc::gen::container<std::vector<uint32_t>>(n, element_bits(d, v, s));
    Bytes out(n * dtype_size(d));
    for (size_t i = 0; i < n; ++i) store_bits(d, out.data(), i, bits[i]);
    return out;
  });
}

namespace {

// ---- elements() without the combinators -----------------------------------------------------------------
// elements_by_combinators draws each of a case's (up to thousands of) values through a weightedOneOf of
// maps, tuples and inRange: RapidCheck builds a tree of shrinkables for every element and rebuilds it each
// time the value is asked for, which made value generation the largest cost of the gate's property rows.
// The values are a function of (Random, size), and elements_value computes that function directly: the
// same rc::Random splits and draws in the same order as RapidCheck's generators do (08b5058: exec's handler
// splits one Random per `*gen`; container(n, g) one per element; JoinGen splits the inner Random off before
// WeightedElementGen draws `next() % sum` and looks it up by upper_bound in the running sums; TupleGen
// splits one per component; MapGen passes its Random on; ElementOfGen draws `next() % size`; inRange draws
// `next() % range + min`, range = scaleInteger(max - min - 1, size) + 1, at the size 100 uniform_int
// fixes). Shrinking still goes through elements_by_combinators (its shrinks are RapidCheck's own), so a
// replayed shrink path gives the same case. tests: tests/properties/property_engine.cpp compares the two.

uint64_t next_of(const rc::Random& r) { return rc::Random(r).next(); }

int64_t uniform_value(const rc::Random& r, int64_t lo, int64_t hi) {
  const uint64_t range =
      rc::gen::detail::scaleInteger(static_cast<uint64_t>(hi) - static_cast<uint64_t>(lo) - 1, 100) + 1;
  return static_cast<int64_t>((next_of(r) % range) + static_cast<uint64_t>(lo));
}

uint32_t sign_value(const rc::Random& r) { return uint32_t(uniform_value(r, 0, 2)); }

// weightedOneOf: which generator, and the Random it generates with.
template <size_t N>
size_t weighted_pick(const rc::Random& random, const size_t (&weights)[N], rc::Random& inner) {
  rc::Random r1 = random;
  inner = r1.split();
  size_t sum = 0;
  for (size_t w : weights) sum += w;
  const size_t x = size_t(next_of(r1) % sum);
  size_t acc = 0;
  for (size_t i = 0; i < N; ++i)
    if (x < (acc += weights[i])) return i;
  return N;  // not reached: x < sum
}

// TupleGen's Randoms: one split each, in order.
template <size_t N>
std::array<rc::Random, N> tuple_randoms(const rc::Random& random) {
  rc::Random r = random;
  std::array<rc::Random, N> out;
  for (size_t i = 0; i < N; ++i) out[i] = r.split();
  return out;
}

int scale_value(Dtype d, const rc::Random& random) {
  const int lim = d == Dtype::f16 ? 8 : 60;  // scale_exponent's
  rc::Random inner;
  switch (weighted_pick(random, kScaleWeights, inner)) {
    case 0: return 0;
    case 1: return int(uniform_value(inner, -4, 5));
    default: return int(uniform_value(inner, -lim, lim + 1));
  }
}

uint32_t element_value(const ElementKinds& k, bool specials, const rc::Random& random) {
  rc::Random inner;
  const size_t kind = specials ? weighted_pick(random, kSpecialWeights, inner) : weighted_pick(random, kFiniteWeights, inner);
  auto with_exp = [&](uint32_t lo, uint32_t hi) {
    const auto r = tuple_randoms<3>(inner);
    return k.with_exp(sign_value(r[0]), uniform_value(r[1], lo, int64_t(hi) + 1), uniform_value(r[2], 0, k.man_range));
  };
  switch (kind) {
    case 0: {
      const auto r = tuple_randoms<2>(inner);
      return k.normal(uniform_value(r[0], 0, int64_t(1) << 32), uniform_value(r[1], 0, int64_t(1) << 32));
    }
    case 1: return k.uniform(uniform_value(inner, -(int64_t(1) << 24), int64_t(1) << 24));
    case 2: return k.chosen[size_t(next_of(inner) % k.chosen.size())];
    case 3: return with_exp(k.top - 6, k.top);
    case 4: return with_exp(1, 7);
    case 5: {
      const auto r = tuple_randoms<2>(inner);
      return k.subnormal(sign_value(r[0]), uniform_value(r[1], 1, k.man_range));
    }
    case 6: return with_exp(0, k.top);
    case 7: {
      const auto r = tuple_randoms<2>(inner);
      return k.nan(sign_value(r[0]), uniform_value(r[1], 1, k.man_range));
    }
    default: return k.inf(sign_value(inner));
  }
}

// inRange's value from the first draw of its Random (uniform_value without the draw).
int64_t uniform_of(uint64_t draw, int64_t lo, int64_t hi) {
  const uint64_t range =
      rc::gen::detail::scaleInteger(static_cast<uint64_t>(hi) - static_cast<uint64_t>(lo) - 1, 100) + 1;
  return static_cast<int64_t>((draw % range) + static_cast<uint64_t>(lo));
}

// element_value for every element at once: the same Randoms, split in the same order, their first draws
// made in two batches (gen/rc_random.hpp): each element's kind (weightedOneOf's draw), then the draws of
// the kind's components. Every value is element_value's, bit for bit (tests: Engine.ElementsAre...).
void element_values(const ElementKinds& k, bool specials, RandomState r_elements, size_t n, Dtype d,
                    unsigned char* out) {
  const size_t* weights = specials ? kSpecialWeights : kFiniteWeights;
  const size_t n_kinds = specials ? std::size(kSpecialWeights) : std::size(kFiniteWeights);
  size_t sum = 0;
  for (size_t w = 0; w < n_kinds; ++w) sum += weights[w];
  std::vector<RandomState> pick(n), inner(n);
  for (size_t i = 0; i < n; ++i) {
    pick[i] = r_elements.split();  // container: one split per element; weightedOneOf: the inner split first
    inner[i] = pick[i].split();
  }
  std::vector<uint64_t> draws(n);
  first_draws(pick.data(), n, draws.data());
  std::vector<uint8_t> kind(n);
  // The components' Randoms: TupleGen splits one per component off the inner one; a single generator (inRange,
  // elementOf, a mapped sign) draws from the inner one itself.
  std::vector<RandomState> parts;
  std::vector<uint32_t> first_part(n + 1);
  parts.reserve(3 * n);
  for (size_t i = 0; i < n; ++i) {
    const size_t x = size_t(draws[i] % sum);
    size_t acc = 0, kd = 0;
    while (kd < n_kinds && !(x < (acc += weights[kd]))) ++kd;
    kind[i] = uint8_t(kd);
    first_part[i] = uint32_t(parts.size());
    auto tuple = [&](int m) {
      RandomState r = inner[i];
      for (int c = 0; c < m; ++c) parts.push_back(r.split());
    };
    switch (kd) {
      case 0: case 5: case 7: tuple(2); break;
      case 3: case 4: case 6: tuple(3); break;
      default: parts.push_back(inner[i]); break;  // 1 uniform, 2 chosen, 8 inf (a sign)
    }
  }
  first_part[n] = uint32_t(parts.size());
  std::vector<uint64_t> pd(parts.size());
  first_draws(parts.data(), parts.size(), pd.data());
  for (size_t i = 0; i < n; ++i) {
    const uint64_t* r = pd.data() + first_part[i];
    auto with_exp = [&](uint32_t lo, uint32_t hi) {
      return k.with_exp(uint32_t(uniform_of(r[0], 0, 2)), uniform_of(r[1], lo, int64_t(hi) + 1),
                        uniform_of(r[2], 0, k.man_range));
    };
    uint32_t bits;
    switch (kind[i]) {
      case 0: bits = k.normal(uniform_of(r[0], 0, int64_t(1) << 32), uniform_of(r[1], 0, int64_t(1) << 32)); break;
      case 1: bits = k.uniform(uniform_of(r[0], -(int64_t(1) << 24), int64_t(1) << 24)); break;
      case 2: bits = k.chosen[size_t(r[0] % k.chosen.size())]; break;
      case 3: bits = with_exp(k.top - 6, k.top); break;
      case 4: bits = with_exp(1, 7); break;
      case 5: bits = k.subnormal(uint32_t(uniform_of(r[0], 0, 2)), uniform_of(r[1], 1, k.man_range)); break;
      case 6: bits = with_exp(0, k.top); break;
      case 7: bits = k.nan(uint32_t(uniform_of(r[0], 0, 2)), uniform_of(r[1], 1, k.man_range)); break;
      default: bits = k.inf(uint32_t(uniform_of(r[0], 0, 2))); break;
    }
    store_bits(d, out, i, bits);
  }
}

Bytes elements_value(Dtype d, Values v, size_t n, const rc::Random& random) {
  rc::Random handler = random;  // exec: one split per `*gen`
  const rc::Random r_scale = handler.split();
  rc::Random r_elements = handler.split();
  const ElementKinds k(d, v, scale_value(d, r_scale));
  Bytes out(n * dtype_size(d));
  const RandomState re = RandomState::of(r_elements);
  if (re.counter == 0) {  // (always: nothing was drawn from it)
    element_values(k, v == Values::specials, re, n, d, out.data());
    return out;
  }
  for (size_t i = 0; i < n; ++i) store_bits(d, out.data(), i, element_value(k, v == Values::specials, r_elements.split()));
  return out;
}

// The shrinkable of elements(): its value computed directly, its shrinks RapidCheck's.
class ElementsShrinkable {
 public:
  ElementsShrinkable(rc::Gen<Bytes> combinators, const rc::Random& random, int size, Dtype d, Values v, size_t n)
      : combinators_(std::move(combinators)), random_(random), size_(size), d_(d), v_(v), n_(n) {}
  Bytes value() const { return elements_value(d_, v_, n_, random_); }
  rc::Seq<rc::Shrinkable<Bytes>> shrinks() const { return combinators_(random_, size_).shrinks(); }

 private:
  rc::Gen<Bytes> combinators_;
  rc::Random random_;
  int size_;
  Dtype d_;
  Values v_;
  size_t n_;
};

}  // namespace

rc::Gen<Bytes> elements(Dtype d, Values v, size_t n) {
  rc::Gen<Bytes> combinators = elements_by_combinators(d, v, n);
  return rc::Gen<Bytes>([=](const rc::Random& random, int size) {
    return rc::makeShrinkable<ElementsShrinkable>(combinators, random, size, d, v, n);
  });
}

rc::Gen<RopeCase> case_shape(Dtype d, Layout l, const CaseShape& s) {
  return rc::gen::exec([=] {
    const int size = *rc::gen::withSize([](int sz) { return rc::gen::just(sz); });
    RopeCase c;
    c.dtype = d;
    c.layout = l;
    c.rotary_dim = *rotary_dim(s.max_rotary);
    c.head_dim = s.partial ? *head_dim(c.rotary_dim, s.max_head) : c.rotary_dim;
    const int64_t heads_cap = std::min<int64_t>(s.max_heads, 1 + size / 12);
    const int64_t tokens_cap = std::min<int64_t>(s.max_tokens, 1 + size / 25);
    uint32_t heads = uint32_t(*uniform_int(1, heads_cap + 1));
    size_t tokens = size_t(*uniform_int(1, tokens_cap + 1));
    while (heads > 1 && size_t(heads) * tokens * c.head_dim > s.max_elements) --heads;
    while (tokens > 1 && size_t(heads) * tokens * c.head_dim > s.max_elements) --tokens;
    c.n_heads = heads;
    c.positions = *rc::gen::container<std::vector<int64_t>>(tokens, position(s.max_position));
    c.base = *base();
    if (s.frequencies) {
      const int kind = *rc::gen::weightedOneOf<int>(
          {{7, rc::gen::just(0)}, {2, rc::gen::just(1)}, {2, rc::gen::just(2)}});
      if (kind == 1) c.position_scale = *position_scale();
      if (kind == 2) c.inv_freq = *inv_freq_table(c.rotary_dim, c.base);
    }
    c.input.assign(c.n_bytes(), 0);
    return c;
  });
}

rc::Gen<RopeCase> rope_case(Dtype d, Layout l, Values v, const CaseShape& s) {
  return rc::gen::exec([=] {
    RopeCase c = *case_shape(d, l, s);
    c.input = *elements(d, v, c.n_elements());
    return c;
  });
}

// ---- ABI v2 ------------------------------------------------------------------------------------------------

const std::vector<std::optional<FrequencyRuleType>> kV2RuleKinds = {
    std::nullopt,
    FrequencyRuleType::linear,
    FrequencyRuleType::ntk,
    FrequencyRuleType::dynamic,
    FrequencyRuleType::yarn,
    FrequencyRuleType::llama3,
    FrequencyRuleType::longrope,
};

namespace {
// A double in [lo, hi], shrinking towards lo.
rc::Gen<double> uniform_real(double lo, double hi) {
  return rc::gen::map(uniform_int(0, int64_t(1) << 32),
                      [lo, hi](int64_t k) { return lo + (hi - lo) * double(k) / 0x1p32; });
}
}  // namespace

rc::Gen<std::pair<FrequencyRule, uint64_t>> frequency_rule(FrequencyRuleType t, uint32_t rotary) {
  return rc::gen::exec([t, rotary] {
    FrequencyRule r;
    r.type = t;
    uint64_t seq_len = 0;
    switch (t) {
      case FrequencyRuleType::default_: break;
      case FrequencyRuleType::linear:
        r.factor = *rc::gen::weightedOneOf<double>(
            {{2, rc::gen::elementOf(std::vector<double>{2.0, 4.0, 8.0, 3.0})}, {1, uniform_real(1.0, 16.0)}});
        break;
      case FrequencyRuleType::ntk:
        r.factor = *rc::gen::weightedOneOf<double>(
            {{2, rc::gen::elementOf(std::vector<double>{2.0, 4.0, 8.0})}, {1, uniform_real(1.0, 8.0)}});
        break;
      case FrequencyRuleType::dynamic:
        r.factor = *rc::gen::weightedOneOf<double>(
            {{2, rc::gen::elementOf(std::vector<double>{2.0, 4.0})}, {1, uniform_real(1.0, 16.0)}});
        r.max_position_embeddings = uint64_t(1) << *uniform_int(8, 16);
        seq_len = uint64_t(*uniform_int(0, int64_t(r.max_position_embeddings) * 8));
        break;
      case FrequencyRuleType::yarn:
        r.factor = *rc::gen::weightedOneOf<double>(
            {{2, rc::gen::elementOf(std::vector<double>{4.0, 8.0, 16.0, 32.0, 40.0})}, {1, uniform_real(1.0, 64.0)}});
        r.original_max_position_embeddings = uint64_t(1) << *uniform_int(11, 16);
        if (*uniform_int(0, 4) == 0) {
          r.beta_slow = *uniform_real(0.5, 4.0);
          r.beta_fast = r.beta_slow + *uniform_real(0.0, 64.0);
        }
        r.truncate = *uniform_int(0, 4) != 0;
        break;
      case FrequencyRuleType::llama3:
        r.factor = *rc::gen::weightedOneOf<double>({{2, rc::gen::just(8.0)}, {1, uniform_real(1.0, 32.0)}});
        r.original_max_position_embeddings = uint64_t(1) << *uniform_int(11, 16);
        if (*uniform_int(0, 3) == 0) {
          r.low_freq_factor = *uniform_real(0.5, 4.0);
          r.high_freq_factor = r.low_freq_factor + *uniform_real(0.5, 8.0);
        }
        break;
      case FrequencyRuleType::longrope: {
        const uint32_t n = rotary / 2;
        r.original_max_position_embeddings = uint64_t(1) << *uniform_int(11, 14);
        r.max_position_embeddings = r.original_max_position_embeddings * 32;
        r.short_factor = *rc::gen::container<std::vector<double>>(n, uniform_real(1.0, 4.0));
        r.long_factor = *rc::gen::container<std::vector<double>>(n, uniform_real(1.0, 64.0));
        std::sort(r.short_factor.begin(), r.short_factor.end());
        std::sort(r.long_factor.begin(), r.long_factor.end());
        seq_len = *uniform_int(0, 2) ? r.original_max_position_embeddings + 1 + uint64_t(*uniform_int(0, 1 << 16))
                                     : uint64_t(*uniform_int(0, int64_t(r.original_max_position_embeddings) + 1));
        break;
      }
    }
    return std::pair{r, seq_len};
  });
}

rc::Gen<std::vector<uint8_t>> pair_axis_map(uint32_t rotary, uint32_t axes) {
  const uint32_t n = rotary / 2;
  if (axes <= 1) return rc::gen::just(std::vector<uint8_t>{});
  return rc::gen::exec([n, axes] {
    std::vector<uint8_t> m(n, 0);
    const int kind = int(*uniform_int(0, 4));
    if (kind == 0) return std::vector<uint8_t>{};  // every pair on axis 0
    if (kind == 1) {  // Qwen2-VL: mrope_section [16, 24, 24] of 64 pairs, scaled; the last section takes the rest
      const double frac[4] = {16.0 / 64, 24.0 / 64, 24.0 / 64, 0};
      uint32_t i = 0;
      for (uint32_t ax = 0; ax < axes; ++ax) {
        const uint32_t len = ax + 1 == axes ? n - i : std::min(n - i, uint32_t(std::lround(frac[std::min(ax, 2u)] * n)));
        for (uint32_t j = 0; j < len; ++j) m[i++] = uint8_t(ax);
      }
    } else if (kind == 2) {  // Qwen3-VL: interleaved
      for (uint32_t i = 0; i < n; ++i) m[i] = uint8_t(i % axes);
    } else {
      for (uint32_t i = 0; i < n; ++i) m[i] = uint8_t(*uniform_int(0, axes));
    }
    return m;
  });
}

rc::Gen<RopeCase> v2_case(Dtype d, Layout l, Values values, const V2Shape& v, const CaseShape& s) {
  return rc::gen::exec([=] {
    std::optional<FrequencyRuleType> kind;
    if (v.rules) kind = *rc::gen::elementOf(kV2RuleKinds);
    CaseShape sh = s;
    if (kind) sh.frequencies = false;  // a rule excludes a table (and keeps the scale at 1)
    if (kind == FrequencyRuleType::ntk || kind == FrequencyRuleType::dynamic)
      sh.max_rotary = std::max<uint32_t>(sh.max_rotary, 4);
    RopeCase c = *case_shape(d, l, sh);
    if (kind && c.rotary_dim <= 2) {  // ntk and dynamic need R > 2
      c.rotary_dim = 4;
      c.head_dim = std::max<uint32_t>(c.head_dim, 4);
    }
    if (v.offset) {
      c.rotary_offset = uint32_t(*uniform_int(0, 18));
      if (c.rotary_offset + c.rotary_dim > c.head_dim) c.head_dim = c.rotary_offset + c.rotary_dim + uint32_t(*uniform_int(0, 3));
    }
    const size_t tokens = c.n_tokens();
    const uint32_t axes = uint32_t(*uniform_int(v.min_axes, int64_t(v.max_axes) + 1));
    c.n_pos_axes = axes;
    if (axes > 1) {
      std::vector<int64_t> pos = c.positions;  // axis 0 as drawn; the others: small grids, maybe centred on 0
      const int64_t cap = std::min<int64_t>(s.max_position, 1 << 12);
      for (uint32_t ax = 1; ax < axes; ++ax) {
        const auto extra = *rc::gen::container<std::vector<int64_t>>(tokens, position(cap));
        pos.insert(pos.end(), extra.begin(), extra.end());
      }
      if (v.negative) {
        const int64_t centre = *uniform_int(0, cap + 1);  // 0: no negative positions
        for (size_t k = tokens; k < pos.size(); ++k) pos[k] -= centre;
      }
      c.positions = pos;
      c.pair_axis = *pair_axis_map(c.rotary_dim, axes);
    }
    if (v.attention)
      c.attention_factor = *rc::gen::weightedOneOf<double>(
          {{3, rc::gen::elementOf(std::vector<double>{1.0, 0.5, 2.0, 0.75, 1.25, 1.5, 0.70710678118654752})},
           {2, uniform_real(0.5, 2.0)}});
    if (kind) {
      auto [rule, seq] = *frequency_rule(*kind, c.rotary_dim);
      c.freq_rule = rule;
      c.rule_seq_len = seq;
      c.inv_freq.clear();
      c.position_scale = 1.0;
    }
    c.input = *elements(d, values, c.n_elements());
    return c;
  });
}

}  // namespace ropecheck::gen

namespace ropecheck {

void showValue(const RopeCase& c, std::ostream& os) {
  os << c.summary() << "\n  positions:";
  for (int64_t m : c.positions) os << ' ' << m;
  if (!c.inv_freq.empty()) {
    os << "\n  inv_freq:";
    for (double f : c.inv_freq) os << ' ' << hexfloat(f);
  }
  os << "\n  input bits:";
  const size_t n = std::min<size_t>(c.n_elements(), 256);
  char buf[16];
  for (size_t i = 0; i < n; ++i) {
    std::snprintf(buf, sizeof buf, c.dtype == Dtype::f32 ? " %08" PRIx32 : " %04" PRIx32,
                  load_bits(c.dtype, c.input.data(), i));
    if (i % 16 == 0) os << "\n   ";
    os << buf;
  }
  if (n < c.n_elements()) os << "\n    ... (" << c.n_elements() - n << " more)";
}

}  // namespace ropecheck
