// Properties of the ABI v3 call shapes (include/ropecheck/kernel_abi.h, "the tensor form" and "tables"):
// whatever freedom a call takes, each head comes out as the plainest call of the same head gives it.
//
//  - strides: q, q_out, k, k_out with padded strides (gaps between heads, tokens, sequences; a packed qkv
//    buffer is q's and k's token stride spanning the other heads) = the same call with compact tensors;
//  - q and k: one call rotating q and k, each with its own head count (GQA, MQA) = a call for q and one for k;
//  - sequences: varlen (cu_seqlens, a length-1 and sometimes an empty sequence) and batched (rank 4) calls
//    with implicit positions (row index plus each sequence's offset) = one call per sequence with its
//    positions explicit (a kernel that does not restart the row index per sequence fails here);
//  - int32 positions: positions, cu_seqlens and seq_offsets as int32 = the same as int64;
//  - table kinds: cos and sin given as two [P][R/2] tables, one [P][R] table and two full-width [P][R] tables
//    of the same values (and dtype) agree;
//  - same call twice: the same tensor-form call made twice gives the same output (the identity clause), so a
//    kernel whose threads race (vLLM #52415) or whose output depends on the calls before it fails.
//
// Equal means bit for bit for a kernel that promises it (KernelHandle::bit_exact_shapes: every built-in and
// SIMD target); otherwise each side within its allowances (expect_same_rotation: a real kernel may take another
// vector or tail path for another shape, within its contract). A kernel that declines a form discards the
// execution (the form it cannot take is not its failure); one that takes only in-place calls (FlashInfer) is
// called in place.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <sstream>

#include "properties/failure.hpp"
#include "properties/generators.hpp"
#include "properties/suite.hpp"
#include "reference/reference.hpp"

namespace ropecheck::props {

namespace {

// A small case for the call-shape properties: up to 6 tokens, 4 heads and 768 elements, plain RoPE (tables or
// a position scale as drawn), positions within the scope.
RopeCase small_case(Dtype d, Layout l, const Scope& scope, uint32_t max_tokens = 6) {
  gen::CaseShape sh = scoped(scope);
  sh.max_tokens = max_tokens;
  sh.max_heads = 4;
  sh.max_rotary = 128;
  sh.max_head = 160;
  sh.max_elements = 768;
  return *gen::rope_case(d, l, gen::Values::safe, sh);
}

// c in the tensor form: rank 3, compact, explicit int64 positions, no k.
RopeCase as_tensor(RopeCase c) {
  c.tensor = TensorCall{};
  return c;
}

// k's input drawn for c's tokens (k_heads heads).
void add_k(RopeCase& c, uint32_t k_heads) {
  c.tensor->k_heads = k_heads;
  c.tensor->k_input = *gen::elements(c.dtype, gen::Values::safe, c.n_tokens() * k_heads * c.head_dim);
}

// The call out of place, else in place (a kernel that takes only in-place calls); a declined call discards,
// a failed one fails.
// A failed call fails the property named `what` ("strides: ..."), whatever the fault.
RunResult run_taken(KernelHandle& ker, const RopeCase& c, const char* what) {
  RunResult r = ker.run(c, {});
  if (r.status == RunResult::Status::declined) r = ker.run(c, {true, -1});
  if (r.status == RunResult::Status::declined) RC_DISCARD("the kernel declines this call shape");
  if (r.status == RunResult::Status::failed) RC_FAIL(FailureText(std::string(what) + ": " + r.failure).in(c).str());
  return r;
}


// a = b: bit for bit for a kernel that promises it, else every pair within both calls' allowances.
void expect_equivalent(const KernelHandle& ker, const RopeCase& ca, const Bytes& oa, const RopeCase& cb,
                       const Bytes& ob, const char* what, const std::string& context) {
  if (oa == ob) return;
  if (ker.bit_exact_shapes()) {
    const size_t e = oa.size() == ob.size() ? props::first_difference(ca, oa.data(), ob.data()) : SIZE_MAX;
    if (e == SIZE_MAX)
      RC_FAIL(FailureText(std::string(what) + ": outputs of " + std::to_string(oa.size()) + " and " +
                          std::to_string(ob.size()) + " bytes").line(context).in(ca, "case a").in(cb, "case b").str());
    RC_FAIL(FailureText(std::string(what) + ": not bit-identical (the kernel gives a head the same bits whatever the "
                                            "call's shape) at " + element_where(ca, e))
                .line(context)
                .in(ca, "case a")
                .in(cb, "case b")
                .elements("a", ca, oa.data(), {e})
                .elements("b", cb, ob.data(), {e})
                .str());
  }
  expect_same_rotation(ker, ca, oa, cb, ob, what, [](size_t, uint32_t) { return 0.0; }, context);
}

// The compact case of k alone (its heads as q's).
RopeCase k_alone(const RopeCase& c) {
  RopeCase k = c.k_case();
  k.tensor = TensorCall{};
  k.tensor->rank = c.tensor->rank;
  k.tensor->batch = c.tensor->batch;
  return k;
}

}  // namespace

namespace {
RopeCase tensor_probe(Dtype d, Layout l) {
  RopeCase c = v2_probe_case(d, l);
  c.attention_factor = 1.0;
  c.tensor = TensorCall{};
  return c;
}
}  // namespace

std::vector<RopeCase> inverse_probe_cases(Dtype d, Layout l) {
  RopeCase c = v2_probe_case(d, l);
  c.attention_factor = 1.0;
  c.direction = Direction::inverse;
  return {c};
}

std::vector<RopeCase> tensor_probe_cases(Dtype d, Layout l) { return {tensor_probe(d, l)}; }

std::vector<RopeCase> q_and_k_probe_cases(Dtype d, Layout l) {
  RopeCase both = tensor_probe(d, l);
  both.tensor->k_heads = 1;
  both.tensor->k_input.assign(both.n_bytes(), 0);
  return {both, tensor_probe(d, l)};  // (and each alone: the property's second and third calls)
}

std::vector<RopeCase> sequences_probe_cases(Dtype d, Layout l) {
  RopeCase c = tensor_probe(d, l);
  c.positions = {0, 0};  // two sequences of one token each, implicit positions
  c.input.assign(c.n_bytes(), 0);
  c.tensor->pos = PositionForm::implicit;
  c.tensor->cu_seqlens = {0, 1, 2};
  return {c, tensor_probe(d, l)};  // (and one explicit call per sequence)
}

std::vector<RopeCase> int32_probe_cases(Dtype d, Layout l) {
  RopeCase c = tensor_probe(d, l);
  c.tensor->pos = PositionForm::int32;
  c.tensor->index_int32 = true;
  return {c, tensor_probe(d, l)};  // int32 against int64: a kernel taking one of them only has nothing to compare
}

Property property_StridesEqualCompact(KernelHandle& ker, Dtype d, Layout l, const Scope& scope) {
  return [&ker, d, l, scope] {
    RopeCase compact = as_tensor(small_case(d, l, scope));
    const size_t T = compact.n_tokens();
    if (T % 2 == 0 && *gen::uniform_int(0, 2)) {  // rank 4: two sequences of T/2 tokens
      compact.tensor->rank = 4;
      compact.tensor->batch = 2;
    }
    if (*gen::uniform_int(0, 2)) add_k(compact, uint32_t(*gen::uniform_int(1, 4)));
    RopeCase strided = compact;
    // Each tensor's pads per dimension (heads, tokens, sequences): 0 to 3 elements, sometimes a packed qkv
    // buffer's token stride (the other heads' elements between two tokens).
    for (int which = 0; which < 4; ++which)
      for (int dim = 0; dim < 3; ++dim) strided.tensor->pad[which][dim] = uint32_t(*gen::uniform_int(0, 4));
    if (*gen::uniform_int(0, 3) == 0)
      for (int which = 0; which < 4; ++which)
        strided.tensor->pad[which][1] += (compact.n_heads + compact.tensor->k_heads) * compact.head_dim;
    const RunResult a = run_taken(ker, strided, "strides"), b = run_taken(ker, compact, "strides");
    std::ostringstream ctx;
    ctx << "pads (heads, tokens, sequences) q " << strided.tensor->pad[0][0] << "," << strided.tensor->pad[0][1] << ","
        << strided.tensor->pad[0][2] << "; q_out " << strided.tensor->pad[1][0] << "," << strided.tensor->pad[1][1]
        << "," << strided.tensor->pad[1][2];
    if (compact.tensor->k_heads)
      ctx << "; k " << strided.tensor->pad[2][0] << "," << strided.tensor->pad[2][1] << "," << strided.tensor->pad[2][2]
          << "; k_out " << strided.tensor->pad[3][0] << "," << strided.tensor->pad[3][1] << ","
          << strided.tensor->pad[3][2];
    expect_equivalent(ker, strided, a.out, compact, b.out, "strides: q with padded strides != compact", ctx.str());
    if (compact.tensor->k_heads) {
      const RopeCase kc = k_alone(compact);
      expect_equivalent(ker, kc, a.k_out, kc, b.k_out, "strides: k with padded strides != compact", ctx.str());
    }
  };
}

Property property_QAndKEqualTwoCalls(KernelHandle& ker, Dtype d, Layout l, const Scope& scope) {
  return [&ker, d, l, scope] {
    RopeCase both = as_tensor(small_case(d, l, scope));
    // k's head count: fewer (GQA, MQA), as many, or more than q's.
    add_k(both, uint32_t(*gen::uniform_int(1, 6)));
    RopeCase q = both;
    q.tensor->k_heads = 0;
    q.tensor->k_input.clear();
    const RopeCase k = k_alone(both);
    const RunResult a = run_taken(ker, both, "q and k"), bq = run_taken(ker, q, "q and k"), bk = run_taken(ker, k, "q and k");
    const std::string ctx = "q has " + std::to_string(both.n_heads) + " head(s), k " +
                            std::to_string(both.tensor->k_heads);
    expect_equivalent(ker, q, a.out, q, bq.out, "q and k: q rotated with k != q alone", ctx);
    expect_equivalent(ker, k, a.k_out, k, bk.out, "q and k: k rotated with q != k alone", ctx);
    // The inverse rotation of q and k in one call (a backward kernel's: Liger's, vLLM's `inverse`), where the
    // kernel takes it in this form: the same three calls, direction inverse. No draw: the forward calls above
    // stay those of earlier releases, and a kernel declining the inverse here is left at them.
    RopeCase bi = both, qi = q, ki = k;
    for (RopeCase* c : {&bi, &qi, &ki}) c->direction = Direction::inverse;
    auto run_inverse = [&](const RopeCase& c) -> std::optional<RunResult> {
      RunResult r = ker.run(c, {});
      if (r.status == RunResult::Status::declined) r = ker.run(c, {true, -1});
      if (r.status == RunResult::Status::declined) return std::nullopt;
      if (r.status == RunResult::Status::failed) RC_FAIL(FailureText("q and k (inverse): " + r.failure).in(c).str());
      return r;
    };
    const std::optional<RunResult> ia = run_inverse(bi);
    if (!ia) return;
    const std::optional<RunResult> iq = run_inverse(qi), ik = run_inverse(ki);
    if (iq) expect_equivalent(ker, qi, ia->out, qi, iq->out, "q and k (inverse): q rotated with k != q alone", ctx);
    if (ik) expect_equivalent(ker, ki, ia->k_out, ki, ik->out, "q and k (inverse): k rotated with q != k alone", ctx);
  };
}

Property property_SequencesEqualOneCallEach(KernelHandle& ker, Dtype d, Layout l, const Scope& scope) {
  return [&ker, d, l, scope] {
    RopeCase c = as_tensor(small_case(d, l, scope, 8));
    const size_t T = c.n_tokens();
    TensorCall& tc = *c.tensor;
    std::vector<size_t> starts;  // the sequences' first tokens, then T
    if (T % 2 == 0 && *gen::uniform_int(0, 3) == 0) {  // rank 4: B sequences of T/B tokens
      tc.rank = 4;
      tc.batch = T % 4 == 0 && *gen::uniform_int(0, 2) ? 4 : 2;
      for (size_t b = 0; b <= tc.batch; ++b) starts.push_back(b * (T / tc.batch));
    } else {  // varlen: cut points anywhere, an empty sequence sometimes
      starts = {0};
      for (size_t t = 1; t < T; ++t)
        if (*gen::uniform_int(0, 2)) starts.push_back(t);
      if (*gen::uniform_int(0, 3) == 0) starts.push_back(starts.back());  // an empty sequence
      starts.push_back(T);
      for (size_t s : starts) tc.cu_seqlens.push_back(int64_t(s));
    }
    const size_t nseq = starts.size() - 1;
    // Implicit positions: token s of sequence b at s + offset_b (offsets drawn, or none passed: 0 each).
    const int64_t max_len = int64_t(T);
    const bool offsets = *gen::uniform_int(0, 4) != 0;
    std::vector<int64_t> off(nseq, 0);
    if (offsets)
      for (int64_t& o : off) o = *gen::position(std::max<int64_t>(0, scope.max_position - max_len));
    tc.pos = PositionForm::implicit;
    if (offsets) tc.seq_offsets = off;
    for (size_t b = 0; b < nseq; ++b)
      for (size_t t = starts[b]; t < starts[b + 1]; ++t) c.positions[t] = int64_t(t - starts[b]) + off[b];
    const RunResult a = run_taken(ker, c, "sequences");
    // One explicit call per non-empty sequence, its outputs in token order.
    RopeCase whole = as_tensor(c);  // the same tokens, positions explicit (for the comparison's descriptions)
    whole.tensor->rank = 3;
    Bytes per(c.n_bytes());
    const size_t row = size_t(c.n_heads) * c.head_dim * dtype_size(d);
    for (size_t b = 0; b < nseq; ++b) {
      if (starts[b + 1] == starts[b]) continue;
      RopeCase s = whole;
      s.positions.assign(c.positions.begin() + long(starts[b]), c.positions.begin() + long(starts[b + 1]));
      s.input.assign(c.input.begin() + long(starts[b] * row), c.input.begin() + long(starts[b + 1] * row));
      const RunResult r = run_taken(ker, s, "sequences");
      std::memcpy(per.data() + starts[b] * row, r.out.data(), r.out.size());
    }
    std::ostringstream ctx;
    ctx << (tc.rank == 4 ? "rank 4, " + std::to_string(tc.batch) + " sequences" : "varlen, cu_seqlens");
    if (tc.rank == 3)
      for (int64_t s : tc.cu_seqlens) ctx << ' ' << s;
    ctx << "; implicit positions, seq_offsets";
    if (offsets)
      for (int64_t o : off) ctx << ' ' << o;
    else
      ctx << " none (0 each)";
    expect_equivalent(ker, c, a.out, whole, per, "sequences: the call over all sequences != one call per sequence",
                      ctx.str());
  };
}

Property property_Int32EqualsInt64(KernelHandle& ker, Dtype d, Layout l, const Scope& scope) {
  return [&ker, d, l, scope] {
    Scope s = scope;
    s.max_position = std::min<int64_t>(s.max_position, INT32_MAX);
    RopeCase wide = as_tensor(small_case(d, l, s, 8));
    const size_t T = wide.n_tokens();
    if (T > 1 && *gen::uniform_int(0, 2)) {  // varlen: the index tensors too
      wide.tensor->cu_seqlens = {0, int64_t(*gen::uniform_int(1, int64_t(T))), int64_t(T)};
    }
    // Half the time implicit positions with an offset per sequence (seq_offsets, as int32 on the narrow side),
    // else explicit positions (pos as int32).
    const bool implicit = *gen::uniform_int(0, 2);
    if (implicit) {
      TensorCall& tc = *wide.tensor;
      const std::vector<int64_t> cuts = tc.cu_seqlens.empty() ? std::vector<int64_t>{0, int64_t(T)} : tc.cu_seqlens;
      tc.pos = PositionForm::implicit;
      for (size_t b = 0; b + 1 < cuts.size(); ++b) {
        tc.seq_offsets.push_back(*gen::position(std::max<int64_t>(0, s.max_position - int64_t(T))));
        for (int64_t t = cuts[b]; t < cuts[b + 1]; ++t) wide.positions[size_t(t)] = t - cuts[b] + tc.seq_offsets[b];
      }
    }
    RopeCase narrow = wide;
    if (!implicit) narrow.tensor->pos = PositionForm::int32;
    narrow.tensor->index_int32 = true;
    const RunResult a = run_taken(ker, narrow, "int32 positions"), b = run_taken(ker, wide, "int32 positions");
    expect_equivalent(ker, narrow, a.out, wide, b.out, "int32 positions: int32 indices != int64",
                      "positions, cu_seqlens and seq_offsets as int32 against the same as int64");
  };
}

Property property_TableKindsAgree(KernelHandle& ker, Dtype d, Layout l, const Scope& scope) {
  return [&ker, d, l, scope] {
    const RopeCase c = small_case(d, l, scope);
    const Dtype td = *gen::uniform_int(0, 2) ? d : Dtype::f32;  // a cache of the activations' dtype, or f32
    RopeCase kinds[3];
    const TableKind k[3] = {TableKind::cos_sin_2, TableKind::cos_sin_cat, TableKind::cos_sin_full};
    std::optional<RopeCase> t = with_given_table(c, k[0], td, TablePipeline::correctly_rounded);
    if (!t) RC_DISCARD("a table cannot express this case");
    for (int n = 0; n < 3; ++n) {  // the same values: the cos/sin kinds differ only in how they are passed
      kinds[n] = *t;
      kinds[n].table->kind = k[n];
    }
    // Each kind in the legacy form, else the tensor form (a kernel that takes tables in the tensor form only),
    // out of place, else in place; a kind the kernel declines is left out (most real kernels take one kind).
    auto run = [&](RopeCase& t) -> std::optional<Bytes> {
      for (bool tensor : {false, true}) {
        if (tensor) t.tensor = TensorCall{};
        for (bool in_place : {false, true}) {
          RunResult r = ker.run(t, {in_place, -1});
          if (r.status == RunResult::Status::failed) RC_FAIL(FailureText("table kinds: " + r.failure).in(t).str());
          if (r.status == RunResult::Status::ok) return std::move(r.out);
        }
      }
      return std::nullopt;
    };
    std::optional<Bytes> out[3];
    int first = -1;
    for (int n = 0; n < 3; ++n) {
      out[n] = run(kinds[n]);
      if (!out[n]) continue;
      if (first < 0) {
        first = n;
        continue;
      }
      expect_equivalent(ker, kinds[first], *out[first], kinds[n], *out[n],
                        "table kinds: the same cos and sin given as another table kind give other outputs",
                        std::string(to_string(k[first])) + " against " + std::string(to_string(k[n])) + ", both " +
                            std::string(to_string(td)));
    }
    if (bool(out[0]) + bool(out[1]) + bool(out[2]) < 2)
      RC_DISCARD("the kernel takes fewer than two of the cos/sin table kinds");
  };
}

// Up to 32 tokens and 4096 elements of q, often with k (up to 8 heads) and padded strides: shapes big enough
// for a kernel to split its work (by token, by head, q from k). Both calls get the same form: out of place, else
// in place.
Property property_SameCallTwiceSameOutput(KernelHandle& ker, Dtype d, Layout l, const Scope& scope) {
  return [&ker, d, l, scope] {
    gen::CaseShape sh = scoped(scope);
    sh.max_tokens = 32;
    sh.max_heads = 8;
    sh.max_rotary = 128;
    sh.max_head = 160;
    sh.max_elements = 4096;
    RopeCase c = as_tensor(*gen::rope_case(d, l, gen::Values::safe, sh));
    if (*gen::uniform_int(0, 3)) add_k(c, uint32_t(*gen::uniform_int(1, 9)));
    if (*gen::uniform_int(0, 2))
      for (int which = 0; which < 4; ++which)
        for (int dim = 0; dim < 3; ++dim) c.tensor->pad[which][dim] = uint32_t(*gen::uniform_int(0, 4));
    bool in_place = false;
    RunResult a = ker.run(c, {});
    if (a.status == RunResult::Status::declined) a = ker.run(c, {in_place = true, -1});
    if (a.status == RunResult::Status::declined) RC_DISCARD("the kernel declines this call shape");
    if (a.status == RunResult::Status::failed) RC_FAIL(FailureText("same call twice: " + a.failure).in(c).str());
    const RunResult b = ker.run(c, {in_place, -1});
    if (b.status != RunResult::Status::ok)
      RC_FAIL(FailureText("same call twice: the first call was taken, the second " +
                          (b.status == RunResult::Status::declined ? std::string("declined") : b.failure))
                  .in(c)
                  .str());
    const bool bits = ker.criteria(c).identity_bits;
    const char* form = in_place ? " (in place)" : "";
    if (const size_t e = first_output_difference(c, a.out.data(), b.out.data(), bits); e != SIZE_MAX)
      RC_FAIL(FailureText(std::string("same call twice: q's output differs between two identical calls") + form + " at " +
                          element_where(c, e))
                  .in(c)
                  .elements("first", c, a.out.data(), {e})
                  .elements("then", c, b.out.data(), {e})
                  .str());
    if (c.tensor->k_heads) {
      const RopeCase kc = k_alone(c);
      if (const size_t e = first_output_difference(kc, a.k_out.data(), b.k_out.data(), bits); e != SIZE_MAX)
        RC_FAIL(FailureText(std::string("same call twice: k's output differs between two identical calls") + form +
                            " at " + element_where(kc, e))
                    .in(c)
                    .elements("first", kc, a.k_out.data(), {e})
                    .elements("then", kc, b.k_out.data(), {e})
                    .str());
    }
  };
}

}  // namespace ropecheck::props
