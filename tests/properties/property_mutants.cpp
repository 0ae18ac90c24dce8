// Proof of power for every property: deliberately broken kernels (mutants of
// `scalar`, and `conventional-fp32` claiming exact angles) that each property
// must catch. A property that passes its mutant has gone blind, and this test
// fails. Mutants are not registered; they live only here.
#include <dlfcn.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <regex>
#include <string>
#include <string_view>
#include <vector>

#include "properties/property_support.hpp"

namespace ropecheck::props {
namespace {

uint32_t sign_mask(Dtype d) { return d == Dtype::f32 ? 0x80000000u : 0x8000u; }

// Run scalar on a modified copy of the call; write its result to a->out.
template <typename EditCase>
int scalar_on(const rc_rope_args* a, EditCase edit) {
  if (int rc = check_kernel_args(a, 2); rc != RC_OK) return rc;
  RopeCase c = case_from_args(*a);
  edit(c);
  Bytes out(c.n_bytes());
  const rc_rope_args b = c.args(c.input.data(), out.data());
  if (int rc = ropecheck_scalar_rope(&b); rc != RC_OK) return rc;
  std::memcpy(a->out, out.data(), out.size());
  return RC_OK;
}

template <typename F>
void for_rotary(const RopeCase& c, F f) {  // f(element index, is first of its pair)
  for (size_t t = 0; t < c.n_tokens(); ++t)
    for (size_t h = 0; h < c.n_heads; ++h)
      for (uint32_t i = 0; i < c.rotary_dim / 2; ++i) {
        const auto [d0, d1] = pair_elements(c, i);
        f(head_offset(c, t, h) + d0, true);
        f(head_offset(c, t, h) + d1, false);
      }
}

// Rotates the wrong way: R_{-theta} x = conj(R_theta conj(x)).
int mutant_conjugate(const rc_rope_args* a) {
  if (int rc = check_kernel_args(a, 2); rc != RC_OK) return rc;
  RopeCase c = case_from_args(*a);
  const Dtype d = c.dtype;
  for_rotary(c, [&](size_t k, bool first) {
    if (!first) store_bits(d, c.input.data(), k, load_bits(d, c.input.data(), k) ^ sign_mask(d));
  });
  Bytes out(c.n_bytes());
  const rc_rope_args b = c.args(c.input.data(), out.data());
  if (int rc = ropecheck_scalar_rope(&b); rc != RC_OK) return rc;
  for_rotary(c, [&](size_t k, bool first) {
    if (!first) store_bits(d, out.data(), k, load_bits(d, out.data(), k) ^ sign_mask(d));
  });
  std::memcpy(a->out, out.data(), out.size());
  return RC_OK;
}

// Scales rotated values by 1 + 2^-6 (not a rotation).
int mutant_scaled(const rc_rope_args* a) {
  if (int rc = ropecheck_scalar_rope(a); rc != RC_OK) return rc;
  const RopeCase c = case_from_args(*a);
  const Dtype d = c.dtype;
  for_rotary(c, [&](size_t k, bool) { store_f32(d, a->out, k, load_f32(d, a->out, k) * (1.0f + 0x1p-6f)); });
  return RC_OK;
}

// Off by one position.
int mutant_position_plus_one(const rc_rope_args* a) {
  return scalar_on(a, [](RopeCase& c) {
    for (int64_t& m : c.positions) ++m;
  });
}

// The scalar kernel's output, then `f(d, e)` on every pass-through element index e of it: the pass-through
// mutants below differ only in what they do to one element.
template <class F>
int scalar_then_pass_through(const rc_rope_args* a, F f) {
  if (int rc = ropecheck_scalar_rope(a); rc != RC_OK) return rc;
  const Dtype d = Dtype(a->dtype);
  for (uint64_t t = 0; t < a->n_tokens; ++t)
    for (uint32_t h = 0; h < a->n_heads; ++h)
      for (uint32_t k = a->rotary_dim; k < a->head_dim; ++k) f(d, (size_t(t) * a->n_heads + h) * a->head_dim + k);
  return RC_OK;
}

// The quiet bit of a NaN's significand.
uint32_t quiet_bit(Dtype d) { return d == Dtype::f32 ? 0x00400000u : d == Dtype::f16 ? 0x0200u : 0x0040u; }

// Canonicalises pass-through dims: quiets NaNs, flushes subnormals.
int mutant_pass_through_canonicalised(const rc_rope_args* a) {
  return scalar_then_pass_through(a, [a](Dtype d, size_t e) {
    const float v = load_f32(d, a->out, e);
    uint32_t bits = load_bits(d, a->out, e);
    if (std::isnan(v)) bits |= quiet_bit(d);
    else if (v != 0 && std::fabs(v) < float(format_of(d).min_normal())) bits &= sign_mask(d);
    store_bits(d, a->out, e, bits);
  });
}

// Passes pass-through dims through float arithmetic (0 + x: autograd's zeros + g): quiets NaNs and turns -0 into
// +0 there. Every value is kept (identity=values allows it), not every bit (identity=bits does not).
int mutant_pass_through_by_value(const rc_rope_args* a) {
  return scalar_then_pass_through(a, [a](Dtype d, size_t e) {
    const uint32_t bits = load_bits(d, a->out, e);
    if (std::isnan(load_f32(d, a->out, e))) store_bits(d, a->out, e, bits | quiet_bit(d));
    else if (bits == sign_mask(d)) store_bits(d, a->out, e, 0);  // -0 -> +0
  });
}

// Writes its result into the input too.
int mutant_writes_input(const rc_rope_args* a) {
  if (int rc = ropecheck_scalar_rope(a); rc != RC_OK) return rc;
  if (a->out != a->in) {
    const size_t n = size_t(a->n_tokens) * a->n_heads * a->head_dim * dtype_size(Dtype(a->dtype));
    std::memcpy(const_cast<void*>(a->in), a->out, n);
  }
  return RC_OK;
}

// Pairs half-split dims as if interleaved.
int mutant_mispaired(const rc_rope_args* a) {
  return scalar_on(a, [](RopeCase& c) { c.layout = Layout::interleaved; });
}

// Turns NaN results into +0.
int mutant_nan_to_zero(const rc_rope_args* a) {
  if (int rc = ropecheck_scalar_rope(a); rc != RC_OK) return rc;
  const RopeCase c = case_from_args(*a);
  for (size_t k = 0; k < c.n_elements(); ++k)
    if (std::isnan(load_f32(c.dtype, a->out, k))) store_bits(c.dtype, a->out, k, 0);
  return RC_OK;
}

// Does not copy pass-through dims out of place (leaves what out held).
int mutant_no_pass_through_copy(const rc_rope_args* a) {
  if (int rc = check_kernel_args(a, 2); rc != RC_OK) return rc;
  const size_t n = size_t(a->n_tokens) * a->n_heads * a->head_dim * dtype_size(Dtype(a->dtype));
  const Bytes before(static_cast<const unsigned char*>(a->out), static_cast<const unsigned char*>(a->out) + n);
  if (int rc = ropecheck_scalar_rope(a); rc != RC_OK) return rc;
  const Dtype d = Dtype(a->dtype);
  if (a->out != a->in)
    for (uint64_t t = 0; t < a->n_tokens; ++t)
      for (uint32_t h = 0; h < a->n_heads; ++h)
        for (uint32_t k = a->rotary_dim; k < a->head_dim; ++k) {
          const size_t e = (size_t(t) * a->n_heads + h) * a->head_dim + k;
          store_bits(d, a->out, e, load_bits(d, before.data(), e));
        }
  return RC_OK;
}

// ---- ABI v3 call-shape mutants: the scalar kernel on an edited tensor-form call (scope 6 of the call-shapes
// issue: each a bug class reported in a production kernel). Calls in the legacy form go through unchanged.

bool tensor_call(const rc_rope_args* a) { return a->abi_version >= 3 && a->q.data; }

// Compact strides of a tensor (row-major over its shape).
std::vector<int64_t> compact_strides(const rc_tensor& t) {
  std::vector<int64_t> st(size_t(t.ndim), 1);
  for (int k = t.ndim - 2; k >= 0; --k) st[size_t(k)] = st[size_t(k) + 1] * t.shape[k + 1];
  return st;
}

// Takes every tensor as compact: strides ignored (vLLM #12777, MLX #1340).
int mutant_strides_ignored(const rc_rope_args* a) {
  if (!tensor_call(a)) return ropecheck_scalar_rope(a);
  rc_rope_args b = *a;
  std::vector<int64_t> st[4];
  rc_tensor* ts[4] = {&b.q, &b.q_out, &b.k, &b.k_out};
  for (int n = 0; n < 4; ++n)
    if (ts[n]->data) {
      st[n] = compact_strides(*ts[n]);
      ts[n]->strides = st[n].data();
    }
  return ropecheck_scalar_rope(&b);
}

// k's (and k_out's) strides taken from q's (Liger #342: k's head count and stride from q).
int mutant_k_strides_from_q(const rc_rope_args* a) {
  if (!tensor_call(a) || !a->k.data) return ropecheck_scalar_rope(a);
  rc_rope_args b = *a;
  std::vector<int64_t> qs = a->q.strides ? std::vector<int64_t>(a->q.strides, a->q.strides + a->q.ndim) : compact_strides(a->q);
  b.k.strides = qs.data();
  if (b.k_out.data) b.k_out.strides = qs.data();
  return ropecheck_scalar_rope(&b);
}

// Varlen implicit positions counted from the start of the batch, not of each sequence (MLX #3494, TE #1930).
int mutant_varlen_offset_not_reset(const rc_rope_args* a) {
  if (!tensor_call(a) || a->pos.data || !a->cu_seqlens.data) return ropecheck_scalar_rope(a);
  auto index = [](const rc_tensor& t, int64_t i) {
    const char* p = static_cast<const char*>(t.data) + t.byte_offset;
    if (t.dtype.bits == 32) {
      int32_t v;
      std::memcpy(&v, p + 4 * i, 4);
      return int64_t(v);
    }
    int64_t v;
    std::memcpy(&v, p + 8 * i, 8);
    return v;
  };
  const int64_t T = a->q.shape[0], nseq = a->cu_seqlens.shape[0] - 1;
  std::vector<int64_t> pos(size_t(T), 0), shape = {T};
  for (int64_t b = 0; b < nseq; ++b) {
    const int64_t off = a->seq_offsets.data ? index(a->seq_offsets, b) : 0;
    for (int64_t t = index(a->cu_seqlens, b); t < index(a->cu_seqlens, b + 1); ++t) pos[size_t(t)] = t + off;  // BUG: t
  }
  rc_rope_args b = *a;
  b.pos = rc_tensor{};
  b.pos.data = pos.data();
  b.pos.device = a->q.device;
  b.pos.ndim = 1;
  b.pos.dtype = {uint8_t(RC_DL_INT), 64, 1};
  b.pos.shape = shape.data();
  b.seq_offsets = rc_tensor{};
  b.cu_seqlens = rc_tensor{};
  return ropecheck_scalar_rope(&b);
}

// int32 positions converted through float (exact below 2^24 only; vLLM #52416's family).
int mutant_int32_positions_via_float(const rc_rope_args* a) {
  if (!tensor_call(a) || !a->pos.data || a->pos.dtype.bits != 32) return ropecheck_scalar_rope(a);
  int64_t n = 1;
  for (int k = 0; k < a->pos.ndim; ++k) n *= a->pos.shape[k];
  std::vector<int32_t> pos(static_cast<size_t>(n));
  std::memcpy(pos.data(), static_cast<const char*>(a->pos.data) + a->pos.byte_offset, size_t(n) * 4);
  for (int32_t& m : pos) m = int32_t(float(m));
  rc_rope_args b = *a;
  b.pos.data = pos.data();
  b.pos.byte_offset = 0;
  return ropecheck_scalar_rope(&b);
}

// A [P][R] cos|sin table read with its sin half one column late (sin of pair i from column R/2 + i + 1, the last
// pair's from the next row): an off-by-one in one table kind's indexing.
int mutant_cat_table_sin_shifted(const rc_rope_args* a) {
  if (a->abi_version < 3 || a->table_kind != RC_TABLE_COS_SIN_CAT) return ropecheck_scalar_rope(a);
  const int64_t P = a->table.shape[0], R = a->table.shape[1], half = R / 2;
  const size_t es = a->table.dtype.bits / 8;
  const char* src = static_cast<const char*>(a->table.data) + a->table.byte_offset;
  std::vector<char> t(size_t(P * R) * es);
  std::memcpy(t.data(), src, t.size());
  for (int64_t r = 0; r < P; ++r)
    for (int64_t i = 0; i < half; ++i) {
      const int64_t from = r * R + half + i + 1;  // (the last row's last pair keeps its own)
      if (from < P * R) std::memcpy(t.data() + size_t(r * R + half + i) * es, src + size_t(from) * es, es);
    }
  rc_rope_args b = *a;
  b.table.data = t.data();
  b.table.byte_offset = 0;
  return ropecheck_scalar_rope(&b);
}

// Backward kernels' attention-factor bugs (FlashAttention #569, llama.cpp #3974): the inverse call with the factor
// s replaced by f(s) -- 1 (dropped), s^2 (applied twice), 1/s (divided out: the forward's inverse, not its
// transpose).
template <double (*F)(double)>
int mutant_inverse_factor(const rc_rope_args* a) {
  if (a->abi_version < 3 || a->direction != RC_INVERSE) return ropecheck_scalar_rope(a);
  rc_rope_args b = *a;
  b.attention_factor = F(a->attention_factor == 0 ? 1.0 : a->attention_factor);
  return ropecheck_scalar_rope(&b);
}
double dropped(double) { return 1.0; }
double squared(double s) { return s * s; }
double reciprocal(double s) { return 1.0 / s; }

// An inverse that negates the sine in one of each pair's two outputs only: out0 = c x0 + s x1 as the inverse,
// out1 = s x0 + c x1 as the forward -- the matrix [[c, s], [s, c]], no rotation (a sign lost in a hand-written
// backward). Legacy calls; the tensor form as scalar.
int mutant_inverse_conjugates_one_half(const rc_rope_args* a) {
  if (a->abi_version < 3 || a->direction != RC_INVERSE || tensor_call(a)) return ropecheck_scalar_rope(a);
  const RopeCase c = case_from_args(*a);
  Bytes fwd(c.n_bytes());
  rc_rope_args f = *a;
  f.in = c.input.data();
  f.out = fwd.data();
  f.direction = RC_FORWARD;
  if (int rc = ropecheck_scalar_rope(&f); rc != RC_OK) return rc;
  if (int rc = ropecheck_scalar_rope(a); rc != RC_OK) return rc;
  for_rotary(c, [&](size_t k, bool first) {
    if (!first) store_bits(c.dtype, a->out, k, load_bits(c.dtype, fwd.data(), k));
  });
  return RC_OK;
}

// Every other call flips the last bit of the first element it writes: the output of two threads racing on one
// element (vLLM #52415). Legacy calls as scalar.
int mutant_racy(const rc_rope_args* a) {
  static std::atomic<unsigned> calls{0};
  if (int rc = ropecheck_scalar_rope(a); rc != RC_OK || !tensor_call(a) || calls++ % 2 == 0) return rc;
  const rc_tensor& o = a->q_out.data ? a->q_out : a->q;
  char* p = static_cast<char*>(o.data) + o.byte_offset;
  if (o.dtype.bits == 32) {
    uint32_t v;
    std::memcpy(&v, p, 4);
    v ^= 1;
    std::memcpy(p, &v, 4);
  } else {
    uint16_t v;
    std::memcpy(&v, p, 2);
    v ^= 1;
    std::memcpy(p, &v, 2);
  }
  return RC_OK;
}

// A mutant kernel and the promise it is held to (the scalar kernel's, unless given).
struct Mutant {
  Implementation impl;
  KernelPromise promise;
};
Mutant mutant(std::string name, rc_rope_apply_fn fn, AngleModel model = AngleModel::exact,
              KernelErrorModel em = KernelErrorModel::scalar_long_double()) {
  Mutant m{{std::move(name), "mutant", fn, std::vector<Dtype>(std::begin(kAllDtypes), std::end(kAllDtypes)),
            std::vector<Layout>(std::begin(kAllLayouts), std::end(kAllLayouts)), true, ""},
           {}};
  m.promise.angle_model = model;
  m.promise.error_model = em;
  return m;
}

using Maker = PropertyMaker;
struct Expectation {
  const char* property;
  Maker make;
  Dtype dtype;
  Layout layout;
  const char* finding;  // text the failure must contain, or one of its '|'-separated alternatives
};

// The seed of one expectation: FNV-1a of its id, so each run draws the same cases (a catch that depended on the
// draw failed one CI run in many: "nan to zero" met a NaN only in a pass-through dim, and the finding named
// pass-through, not special values). An RC_PARAMS seed is not used here: detection is tested deterministically.
uint64_t expectation_seed(const std::string& id) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char ch : id) h = (h ^ ch) * 1099511628211ull;
  return h;
}

// Every failure in the one shape (properties/failure.hpp): a headline, the case on an indented line, and every
// element quoted as bits with its hexfloat and decimal value ("0x3f80 (0x1p+0 = 1)").
void expect_failure_shape(const std::string& text, const std::string& what) {
  ASSERT_FALSE(text.empty()) << what;
  EXPECT_NE(text[0], ' ') << what << ": the first line is the headline\n" << text;
  EXPECT_TRUE(text.find("\n  case: ") != std::string::npos || text.find("\n  case a: ") != std::string::npos)
      << what << ": no case line\n" << text;
  static const std::regex element(R"(\b0x[0-9a-f]{4,8} \(([^()]*)\))");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), element); it != std::sregex_iterator(); ++it)
    EXPECT_NE((*it)[1].str().find(" = "), std::string::npos)
        << what << ": element " << it->str() << " without its decimal value\n" << text;
}

void expect_caught(const Mutant& m, const std::vector<Expectation>& props) {
  rc::detail::TestParams params = rc::detail::configuration().testParams;
  params.disableShrinking = true;  // detection is what is tested; shrinking big cases is slow
  for (const Expectation& e : props) {
    const std::string id = current_test_id() + "/" + e.property;
    params.seed = expectation_seed(id);
    ImplementationHandle h(m.impl, m.promise);
    const auto result = run_property_quiet(id, e.make(h, e.dtype, e.layout, Scope{}), params);
    const bool failed = result.is<rc::detail::FailureResult>();
    EXPECT_TRUE(failed)
        << "property " << e.property << " (" << to_string(e.dtype) << " " << to_string(e.layout)
        << ") did not catch the mutant kernel '" << m.impl.name << "' in " << params.maxSuccess
        << " cases: it has lost its power";
    // Caught for the reason the expectation names, not another (an error code, a decline read as a failure).
    if (failed)
      expect_failure_shape(result.get<rc::detail::FailureResult>().description,
                           std::string(e.property) + " on " + m.impl.name);
    if (failed && e.finding) {
      const std::string& text = result.get<rc::detail::FailureResult>().description;
      bool named = false;
      for (size_t b = 0;;) {
        const std::string_view f(e.finding);
        const size_t bar = f.find('|', b);
        named |= text.find(f.substr(b, bar == std::string_view::npos ? std::string_view::npos : bar - b)) !=
                 std::string::npos;
        if (bar == std::string_view::npos) break;
        b = bar + 1;
      }
      EXPECT_TRUE(named)
          << "property " << e.property << " (" << to_string(e.dtype) << " " << to_string(e.layout)
          << ") caught the mutant kernel '" << m.impl.name << "' but not with \"" << e.finding << "\":\n"
          << result.get<rc::detail::FailureResult>().description;
    }
  }
}

constexpr Dtype f32 = Dtype::f32, f16 = Dtype::f16, bf16 = Dtype::bf16;
constexpr Layout il = Layout::interleaved, hs = Layout::half_split;

TEST(MutantsAreCaught, RotatesTheWrongWay) {
  const Mutant m = mutant("conjugate", &mutant_conjugate);
  expect_caught(m, {{"accuracy", &property_WithinBoundOfReference, f32, il, "accuracy: pair error"},
                    {"accuracy", &property_WithinBoundOfReference, bf16, hs, "accuracy: pair error"}});
}

TEST(MutantsAreCaught, ScalesInsteadOfRotating) {
  const Mutant m = mutant("scaled", &mutant_scaled);
  expect_caught(m, {{"orthogonality (basis matrix)", &property_OrthogonalityBasisMatrix, f32, il, "orthogonality: (M^T M)"},
                    {"orthogonality (inner products)", &property_InnerProductsPreserved, f32, hs, "not preserved"},
                    {"norm preservation", &property_NormPreserved, f16, il, "not preserved"},
                    {"accuracy", &property_WithinBoundOfReference, bf16, il, "accuracy: pair error"}});
}

TEST(MutantsAreCaught, OffByOnePosition) {
  const Mutant m = mutant("position+1", &mutant_position_plus_one);
  expect_caught(m, {{"position 0 identity", &property_PositionZeroIsIdentity, f32, il, "position 0 is not the identity"},
                    {"composition", &property_Composition, f32, hs, "composition broken"},
                    {"accuracy", &property_WithinBoundOfReference, f16, il, "accuracy: pair error"}});
}

// Quieting NaNs and flushing subnormals: under identity=bits (what the built-ins declare) both change the
// element; under identity=values a flushed subnormal is still a different number (no denormals=flush).
TEST(MutantsAreCaught, CanonicalisesPassThroughDims) {
  Mutant m = mutant("pass-through canonicalised", &mutant_pass_through_canonicalised);
  expect_caught(m, {{"pass-through", &property_PassThroughDimsKept, f32, il, "pass-through dim changed"},
                    {"pass-through", &property_PassThroughDimsKept, bf16, hs, "pass-through dim changed"}});
  m.promise.contract.identity_bits = true;
  expect_caught(m, {{"pass-through", &property_PassThroughDimsKept, f32, il, "pass-through dim changed"},
                    {"pass-through", &property_PassThroughDimsKept, f16, hs, "pass-through dim changed"}});
}

// The pass-through property is no stricter than the contract: a kernel that keeps every pass-through value but
// not every bit (NaNs quieted, -0 as +0) passes it, and the properties that see pass-through dims, under
// identity=values; under identity=bits the pass-through property catches it.
TEST(MutantsAreCaught, PassThroughByValueOnlyUnderIdentityBits) {
  Mutant m = mutant("pass-through by value", &mutant_pass_through_by_value);
  const PropertyMaker makers[] = {&property_PassThroughDimsKept, &property_SpecialValuesFollowTheRules,
                                  &property_InPlaceEqualsOutOfPlace, &property_PositionZeroIsIdentity};
  for (Dtype d : {f32, f16, bf16})
    for (size_t k = 0; k < std::size(makers); ++k) {
      ImplementationHandle h(m.impl, m.promise);
      const std::string id = current_test_id() + "/" + std::to_string(k);
      const std::string text = failure_text(run_property(id, makers[k](h, d, hs, Scope{})), id);
      EXPECT_TRUE(text.empty()) << to_string(d) << ", property " << k << " under identity=values:\n" << text;
    }
  m.promise.contract.identity_bits = true;
  expect_caught(m, {{"pass-through", &property_PassThroughDimsKept, f32, il, "pass-through dim changed"},
                    {"pass-through", &property_PassThroughDimsKept, f16, hs, "pass-through dim changed"},
                    {"pass-through", &property_PassThroughDimsKept, bf16, il, "pass-through dim changed"}});
}

TEST(MutantsAreCaught, WritesItsInput) {
  const Mutant m = mutant("writes input", &mutant_writes_input);
  expect_caught(m, {{"input untouched", &property_InputUntouchedOutOfPlace, f32, il, "wrote to its input"}});
}

TEST(MutantsAreCaught, MispairsHalfSplit) {
  const Mutant m = mutant("mispaired", &mutant_mispaired);
  expect_caught(m, {{"layout equivalence", &property_InterleavedEqualsPermutedHalfSplit, f32, il, "layouts disagree"},
                    {"accuracy", &property_WithinBoundOfReference, f16, hs, "accuracy: pair error"}});
}

TEST(MutantsAreCaught, TurnsNaNIntoZero) {
  const Mutant m = mutant("nan to zero", &mutant_nan_to_zero);
  // It zeroes every NaN it outputs, pass-through dims included: either finding names it.
  expect_caught(m, {{"special values", &property_SpecialValuesFollowTheRules, f32, il,
                     "special values: |pass-through: "}});
}

TEST(MutantsAreCaught, LeavesOutputPassThroughUnwritten) {
  const Mutant m = mutant("no pass-through copy", &mutant_no_pass_through_copy);
  expect_caught(m, {{"in place = out of place", &property_InPlaceEqualsOutOfPlace, f32, il, "in-place result differs"},
                    {"pass-through", &property_PassThroughDimsKept, f16, hs, "pass-through dim changed"}});
}

TEST(MutantsAreCaught, Fp32AnglesClaimingExactAngles) {
  // conventional-fp32's kernel held to scalar's exact-angle model.
  const Mutant m = mutant("fp32 angles as exact", &ropecheck_conventional_fp32_rope);
  expect_caught(m, {{"relative invariance", &property_RelativeInvariance, f32, il, "relative invariance broken"},
                    {"composition", &property_Composition, f32, il, "composition broken"},
                    {"accuracy", &property_WithinBoundOfReference, f32, hs, "accuracy: pair error"}});
}

// ---- the v2 mutants of tests/kernels/mutants/ (C plugins, loaded here) -------------------------------------------------
// Each plants one classic variant bug in a correct v2 kernel (mutant_common.h, MK_V2) and is correct on v1
// calls: only the v2 properties catch it. ok_v2_double (the same kernel, no bug) must pass them all. They are
// held to a loaded kernel's default promise (exact angles, the default contract), as the gate holds them.

Implementation loaded_mutant(const std::string& stem) {
  const std::string path = std::string(ROPECHECK_MUTANT_DIR) + "/" + stem + ".so";
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) throw std::runtime_error("cannot load " + path + ": " + dlerror());
  auto fn = reinterpret_cast<rc_rope_apply_fn>(dlsym(h, "rc_rope_apply"));
  if (!fn) throw std::runtime_error(path + " exports no rc_rope_apply");
  return {stem, "mutant (tests/kernels/mutants)", fn, std::vector<Dtype>(std::begin(kAllDtypes), std::end(kAllDtypes)),
          std::vector<Layout>(std::begin(kAllLayouts), std::end(kAllLayouts)), false, ""};
}
Mutant v2_mutant(const std::string& stem) { return {loaded_mutant(stem), loaded_promise(AngleModel::exact)}; }

TEST(MutantsAreCaught, AttentionFactorTwice) {
  const Mutant m = v2_mutant("mut_attn_factor_twice");
  expect_caught(m, {{"attention factor", &property_AttentionFactorScalesNorms, f32, il, "attention factor"},
                    {"attention factor", &property_AttentionFactorScalesNorms, bf16, hs, "attention factor"},
                    {"variant accuracy", &property_VariantsWithinBoundOfReference, f16, il, "variant accuracy"}});
}

TEST(MutantsAreCaught, AttentionFactorNever) {
  const Mutant m = v2_mutant("mut_attn_factor_never");
  expect_caught(m, {{"attention factor", &property_AttentionFactorScalesNorms, f32, hs, "attention factor"},
                    {"offset slice", &property_VariantsWithinBoundOfReference, f32, il, "variant accuracy"}});
}

TEST(MutantsAreCaught, MropeSectionMap) {
  const Mutant m = v2_mutant("mut_mrope_section_map");
  expect_caught(m, {{"relative per axis", &property_RelativeInvariancePerAxis, f32, il, "moved when only axis"},
                    {"relative per axis", &property_RelativeInvariancePerAxis, f16, hs, "moved when only axis"},
                    {"variant accuracy", &property_VariantsWithinBoundOfReference, f32, hs, "variant accuracy"}});
}

TEST(MutantsAreCaught, YarnRampReversed) {
  const Mutant m = v2_mutant("mut_yarn_ramp_reversed");
  expect_caught(m, {{"variant accuracy", &property_VariantsWithinBoundOfReference, f32, il, "rule yarn"},
                    {"variant accuracy", &property_VariantsWithinBoundOfReference, bf16, hs, "rule yarn"}});
}

TEST(MutantsAreCaught, Llama3SmoothingFromWavelength) {
  const Mutant m = v2_mutant("mut_llama3_wavelength");
  expect_caught(m, {{"variant accuracy", &property_VariantsWithinBoundOfReference, f32, il, "rule llama3"},
                    {"variant accuracy", &property_VariantsWithinBoundOfReference, f16, hs, "rule llama3"}});
}

// The correct v2 kernel passes every v2 property (and the v1 ones on its v1 calls).
// ABI v3 call shapes: each mutant is caught by the property of its freedom.
TEST(MutantsAreCaught, StridesIgnored) {
  const Mutant m = mutant("strides_ignored", &mutant_strides_ignored);
  // (Its compact indexing writes into the gaps, which the handle sees before the outputs are compared, or
  // gives other outputs: "strides" either way.)
  expect_caught(m, {{"strides", &property_StridesEqualCompact, f32, il, "strides"},
                    {"strides", &property_StridesEqualCompact, bf16, hs, "strides"}});
}

TEST(MutantsAreCaught, KStridesTakenFromQ) {
  const Mutant m = mutant("k_strides_from_q", &mutant_k_strides_from_q);
  expect_caught(m, {{"q and k", &property_QAndKEqualTwoCalls, f32, hs, "q and k:"},
                    {"q and k", &property_QAndKEqualTwoCalls, f16, il, "q and k:"},
                    {"strides", &property_StridesEqualCompact, bf16, il, "strides"}});
}

TEST(MutantsAreCaught, VarlenOffsetNotResetPerSequence) {
  const Mutant m = mutant("varlen_offset_not_reset", &mutant_varlen_offset_not_reset);
  expect_caught(m, {{"sequences", &property_SequencesEqualOneCallEach, f32, il, "sequences:"},
                    {"sequences", &property_SequencesEqualOneCallEach, bf16, hs, "sequences:"}});
}

TEST(MutantsAreCaught, Int32PositionsThroughFloat) {
  const Mutant m = mutant("int32_positions_via_float", &mutant_int32_positions_via_float);
  expect_caught(m, {{"int32 positions", &property_Int32EqualsInt64, f32, il, "int32 positions:"},
                    {"int32 positions", &property_Int32EqualsInt64, f16, hs, "int32 positions:"}});
}

TEST(MutantsAreCaught, CatTableSinOneColumnLate) {
  const Mutant m = mutant("cat_table_sin_shifted", &mutant_cat_table_sin_shifted);
  expect_caught(m, {{"table kinds", &property_TableKindsAgree, f32, il, "table kinds:"},
                    {"table kinds", &property_TableKindsAgree, bf16, hs, "table kinds:"}});
}

// Backward bugs: each caught by both inverse properties, named.
TEST(MutantsAreCaught, InverseDropsTheAttentionFactor) {
  const Mutant m = mutant("inverse_af_dropped", &mutant_inverse_factor<dropped>);
  expect_caught(m, {{"inverse", &property_InverseUndoesForward, f32, il, "inverse: "},
                    {"adjoint", &property_InverseIsForwardTransposed, f32, hs, "adjoint: "},
                    {"adjoint", &property_InverseIsForwardTransposed, bf16, il, "adjoint: "}});
}

TEST(MutantsAreCaught, InverseAppliesTheAttentionFactorTwice) {
  const Mutant m = mutant("inverse_af_twice", &mutant_inverse_factor<squared>);
  expect_caught(m, {{"inverse", &property_InverseUndoesForward, f16, hs, "inverse: "},
                    {"adjoint", &property_InverseIsForwardTransposed, f32, il, "adjoint: "}});
}

// The forward's inverse rather than its transpose: inverse(forward(x)) = x, not s^2 x; and the adjoint fails.
TEST(MutantsAreCaught, InverseDividesTheAttentionFactorOut) {
  const Mutant m = mutant("inverse_af_divided", &mutant_inverse_factor<reciprocal>);
  expect_caught(m, {{"inverse", &property_InverseUndoesForward, f32, hs, "inverse: "},
                    {"adjoint", &property_InverseIsForwardTransposed, f32, il, "adjoint: "},
                    {"adjoint", &property_InverseIsForwardTransposed, f16, hs, "adjoint: "}});
}

TEST(MutantsAreCaught, InverseConjugatesOneHalf) {
  const Mutant m = mutant("inverse_one_half_conjugated", &mutant_inverse_conjugates_one_half);
  expect_caught(m, {{"inverse", &property_InverseUndoesForward, f32, il, "inverse: "},
                    {"adjoint", &property_InverseIsForwardTransposed, f32, hs, "adjoint: "},
                    {"adjoint", &property_InverseIsForwardTransposed, bf16, il, "adjoint: "}});
}

TEST(MutantsAreCaught, RacingThreads) {
  const Mutant m = mutant("racy", &mutant_racy);
  expect_caught(m, {{"same call twice", &property_SameCallTwiceSameOutput, f32, il, "same call twice: q's output"},
                    {"same call twice", &property_SameCallTwiceSameOutput, bf16, hs, "same call twice: q's output"}});
}

TEST(MutantsAreCaught, CorrectV2KernelPasses) {
  const Mutant m = v2_mutant("ok_v2_double");
  const PropertyMaker makers[] = {&property_AttentionFactorScalesNorms,     &property_RelativeInvariancePerAxis,
                                  &property_LinearRuleEqualsScaledPositions, &property_NtkRuleEqualsScaledBase,
                                  &property_OffsetSliceEqualsSubHead,        &property_VariantsWithinBoundOfReference,
                                  &property_WithinBoundOfReference};
  for (Dtype d : {f32, f16, bf16})
    for (Layout l : {il, hs})
      for (size_t k = 0; k < std::size(makers); ++k) {
        ImplementationHandle h(m.impl, m.promise);
        const std::string id = current_test_id() + "/" + std::to_string(k);
        const auto result = run_property(id, makers[k](h, d, l, Scope{}));
        const std::string text = failure_text(result, id);
        EXPECT_TRUE(text.empty()) << "ok_v2_double " << to_string(d) << " " << to_string(l) << ", property " << k
                                  << ":\n" << text;
      }
}

}  // namespace
}  // namespace ropecheck::props
