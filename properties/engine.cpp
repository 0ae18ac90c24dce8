#include "properties/engine.hpp"

#include "core/tensor_call.hpp"

#include "core/abi_versions.hpp"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <stdexcept>

#include <fmt/format.h>

#include "properties/failure.hpp"
#include "properties/suite.hpp"
#include "reference/reference.hpp"

namespace ropecheck::props {

// ---- handles ---------------------------------------------------------------------------------------------

ImplementationHandle::ImplementationHandle(const Implementation& impl, std::optional<KernelPromise> promise)
    : impl_(impl), promise_(promise ? std::move(*promise) : promise_of(impl)) {}

namespace {
// The kernel's return code into res: RC_UNSUPPORTED declined, another than RC_OK a failure; true for RC_OK.
bool returned_ok(const Implementation& impl_, int rc, const RopeCase& c, RunResult& res) {
  if (rc == RC_UNSUPPORTED) {
    res.status = RunResult::Status::declined;
    return false;
  }
  if (rc != RC_OK) {
    res.status = RunResult::Status::failed;
    res.failure = impl_.name + " returned " + std::to_string(rc) + " on a well-formed case: " + c.summary();
    res.fault = "error code";
    return false;
  }
  return true;
}
}  // namespace

RunResult ImplementationHandle::run(const RopeCase& c, const RunRequest& r) {
  RunResult res;
  if (!impl_.fn) {
    res.status = RunResult::Status::failed;
    res.failure = impl_.name + " has no entry point in this process";
    res.fault = "error code";
    return res;
  }
  Bytes in;  // out of place: the kernel's own copy of the input, compared afterwards (input_after)
  if (r.in_place) {
    res.out = c.input;
  } else {
    in = c.input;
    res.out.assign(c.n_bytes(), static_cast<unsigned char>(r.out_fill < 0 ? 0 : r.out_fill));
  }
  // At the version the kernel speaks (core/abi_versions.hpp); a case no version it speaks expresses is
  // declined on its behalf, never made.
  const uint32_t v = abi_versions_of(impl_.fn).version_for(c.min_abi_version());
  if (v == 0) {
    res.status = RunResult::Status::declined;
    return res;
  }
  if (c.tensor && v >= 3) return run_tensor_form(c, r, v);
  const rc_rope_args a =
      r.in_place ? c.args(res.out.data(), res.out.data(), v) : c.args(in.data(), res.out.data(), v);
  if (!returned_ok(impl_, impl_.fn(&a), c, res)) return res;
  if (!r.in_place) res.input_after = std::move(in);
  return res;
}

// A tensor-form call in this process: each buffer laid out as the case says (core/tensor_call.hpp), the strides'
// gaps holding a pattern that must survive the call, the inputs compared afterwards.
RunResult ImplementationHandle::run_tensor_form(const RopeCase& c, const RunRequest& r, uint32_t v) {
  RunResult res;
  constexpr unsigned char kGap = 0xA5;
  constexpr uint32_t kPoison = 0xFFFFFFFFu;  // a NaN of every dtype (f16/bf16: its low 16 bits)
  const TensorSizes sz = tensor_sizes(c, r.in_place);
  // Each activation buffer is followed by twice as many bytes as the largest of them, holding the gap pattern
  // too: a kernel that strides past a tensor's end (k taken with q's strides) writes there, not into the heap.
  const size_t tail = 2 * std::max({sz.q, sz.q_out, sz.k, sz.k_out}) + 256;
  auto buffer = [&](size_t n) { return Bytes(n ? n + tail : 0, kGap); };
  Bytes q = buffer(sz.q), q_out = buffer(sz.q_out), k = buffer(sz.k), k_out = buffer(sz.k_out), pos(sz.pos),
        offsets(sz.seq_offsets), cu(sz.cu_seqlens), table0, table1;
  std::vector<int64_t> shapes(kTensorShapeSlots);
  rc_rope_args a = c.args(nullptr, nullptr, v);  // (lays a table out for its kind: abi_table_bytes)
  table0.resize(c.abi_table_bytes[0].size());
  table1.resize(c.abi_table_bytes[1].size());
  TensorBuffers b;
  b.q = q.data();
  b.q_out = r.in_place ? b.q : q_out.data();
  b.k = sz.k ? k.data() : nullptr;
  b.k_out = r.in_place ? b.k : sz.k_out ? k_out.data() : nullptr;
  b.pos = sz.pos ? pos.data() : nullptr;
  b.seq_offsets = sz.seq_offsets ? offsets.data() : nullptr;
  b.cu_seqlens = sz.cu_seqlens ? cu.data() : nullptr;
  b.table[0] = table0.empty() ? nullptr : table0.data();
  b.table[1] = table1.empty() ? nullptr : table1.data();
  b.shapes = shapes.data();
  fill_tensor_buffers(c, r.in_place, b, kPoison);
  point_v3_args(c, r.in_place, b, a);
  if (!returned_ok(impl_, impl_.fn(&a), c, res)) return res;
  const int q_out_which = r.in_place ? 0 : 1, k_out_which = r.in_place ? 2 : 3;
  size_t gaps = gap_bytes_changed(c, c.tensor_layout(0), b.q, kGap);
  if (!r.in_place) gaps += gap_bytes_changed(c, c.tensor_layout(1), b.q_out, kGap);
  res.out = gather_heads(c, c.tensor_layout(q_out_which), b.q_out);
  if (c.tensor->k_heads) {
    const RopeCase kc = c.k_case();
    gaps += gap_bytes_changed(kc, c.tensor_layout(2), b.k, kGap);
    if (!r.in_place) gaps += gap_bytes_changed(kc, c.tensor_layout(3), b.k_out, kGap);
    res.k_out = gather_heads(kc, c.tensor_layout(k_out_which), b.k_out);
  }
  for (const auto& [buf, n] : {std::pair{&q, sz.q}, std::pair{&q_out, sz.q_out}, std::pair{&k, sz.k}, std::pair{&k_out, sz.k_out}})
    if (n) gaps += size_t(std::count_if(buf->begin() + long(n), buf->end(), [](unsigned char x) { return x != kGap; }));
  if (gaps) {
    res.status = RunResult::Status::failed;
    res.failure = impl_.name + " wrote " + std::to_string(gaps) + " byte(s) between the elements of its tensors (the "
                  "strides' gaps) or past their ends: " + c.summary();
    res.fault = "out-of-bounds write";
    return res;
  }
  if (!r.in_place) {
    res.input_after = gather_heads(c, c.tensor_layout(0), b.q);
    if (c.tensor->k_heads && gather_heads(c.k_case(), c.tensor_layout(2), b.k) != c.tensor->k_input) {
      res.status = RunResult::Status::failed;
      res.failure = impl_.name + " wrote into its input k out of place: " + c.summary();
      res.fault = "input modified";
      return res;
    }
  }
  return res;
}

Criteria ImplementationHandle::criteria(const RopeCase& c) const {
  Criteria cr = Criteria::flat_bound(promise_.bound(c));
  cr.identity_bits = promise_.contract.identity_bits;
  return cr;
}

// ---- the set ---------------------------------------------------------------------------------------------

const std::vector<PropertyDef>& property_set() {
  static const std::vector<PropertyDef> v = {
      {"position-zero", "property: position 0",
       "position 0 is the identity (the identity clause: values, or bits), out of place and in place",
       &property_PositionZeroIsIdentity, false, false, true},
      {"orthogonality", "property: orthogonality",
       "the kernel's matrix at one position (columns: scaled basis vectors) has M^T M = I within its allowances",
       &property_OrthogonalityBasisMatrix, false, false, true},
      {"inner-products", "property: inner products",
       "<R_m x, R_m y> = <x, y> per pair and per head, within the allowances", &property_InnerProductsPreserved,
       false, false, true},
      {"norm", "property: norm", "||R_m x|| = ||x|| per pair and per head, within the allowances",
       &property_NormPreserved, false, false, true},
      {"relative", "property: relative", "<R_m q, R_n k> = <R_(m+t) q, R_(n+t) k> (exact angles)",
       &property_RelativeInvariance, false, true, true},
      {"composition", "property: composition", "R_a(R_b x) = R_(a+b) x (exact angles)", &property_Composition, false,
       true, false},
      {"layouts", "property: layouts", "interleaved(x) = P^-1 half-split(P x) within both allowances",
       &property_InterleavedEqualsPermutedHalfSplit, true, false, true},
      {"pass-through", "property: pass-through",
       "dims [rotary_dim, head_dim) keep the input under the identity clause (values: +-0 alike, any NaN for a NaN; "
       "bits: NaN payloads, subnormals), out of place and in place",
       &property_PassThroughDimsKept, false, false, true},
      {"input-untouched", "property: input untouched", "an out-of-place call leaves its input unchanged",
       &property_InputUntouchedOutOfPlace, false, false, false, false, false, nullptr, true},
      {"in-place", "property: in place",
       "in place gives the out-of-place output (the identity clause: the same values, or bits; the output buffer "
       "prefilled with NaN bytes)",
       &property_InPlaceEqualsOutOfPlace, false, false, true, false, false, nullptr, true},
      {"accuracy", "property: accuracy", "every pair within its allowance of the exact reference (generated cases)",
       &property_WithinBoundOfReference, false, false, true},
      {"special-values", "property: special values",
       "NaN and +-Inf inputs follow the documented rules, out of place and in place",
       &property_SpecialValuesFollowTheRules, false, false, true},
      // ABI v2 variants (suite_variants.cpp): a kernel that declines v2 discards these (a note, not a failure).
      {"attention-factor", "property: attention factor",
       "||out pair|| = s ||in pair|| for attention factor s (v2 cases), within the allowances",
       &property_AttentionFactorScalesNorms, false, false, true, true},
      {"relative-axes", "property: relative per axis",
       "one position axis moved by t for q and k keeps every pair's <q_i, k_i>; pairs on other axes do not move "
       "(exact angles)",
       &property_RelativeInvariancePerAxis, false, true, true, true},
      {"linear-rule", "property: linear rule",
       "rule linear(f) = no rule at position_scale 1/f, within both allowances and the rounding of 1/f (exact angles)",
       &property_LinearRuleEqualsScaledPositions, false, true, true, true},
      {"ntk-rule", "property: ntk rule",
       "rule ntk(alpha) = no rule with base' = base alpha^(R/(R-2)), within both allowances and the rounding of "
       "base' (exact angles)",
       &property_NtkRuleEqualsScaledBase, false, true, true, true},
      {"offset-slice", "property: offset slice",
       "elements outside [o, o+R) keep the input (the identity clause); the slice = the sub-head case's output "
       "within both allowances",
       &property_OffsetSliceEqualsSubHead, false, false, true, true},
      {"variant-accuracy", "property: variant accuracy",
       "one v2 case under every frequency rule, each pair within its allowance of the exact reference",
       &property_VariantsWithinBoundOfReference, false, false, true, true},
      // ABI v3 (suite_variants.cpp): sent only to a kernel that speaks v3 (the others' rows: not run, with the
      // reason); a kernel that declines the inverse discards. Exported (case sets, manifest version 5) when the
      // export names a v3 feature, except the inverse (its second call's input is the first call's output).
      {"inverse", "property: inverse",
       "inverse(forward(x)) = s^2 x per pair (the backward rotation keeps the attention factor s), within both "
       "calls' allowances",
       &property_InverseUndoesForward, false, false, false, true, false, &inverse_probe_cases},
      {"adjoint", "property: adjoint",
       "<forward(x), y> = <x, inverse(y)> per pair, x and y independent (the inverse is the forward's transpose, as "
       "a backward pass must be), within both calls' allowances",
       &property_InverseIsForwardTransposed, false, false, true, true, false, &inverse_probe_cases},
      // ABI v3 call shapes (suite_tensor.cpp): each freedom of the tensor form gives the plain call's heads.
      {"strides", "property: strides",
       "q, q_out, k, k_out with padded strides (packed qkv included) = the same call with compact tensors (bit for "
       "bit when the kernel promises it, else each within its allowances)",
       &property_StridesEqualCompact, false, false, true, true, false, &tensor_probe_cases},
      {"q-and-k", "property: q and k",
       "q and k in one call, each with its own head count = a call for q and one for k", &property_QAndKEqualTwoCalls,
       false, false, true, true, false, &q_and_k_probe_cases},
      {"sequences", "property: sequences",
       "varlen (cu_seqlens) and batched calls with implicit positions = one explicit-position call per sequence",
       &property_SequencesEqualOneCallEach, false, false, true, true, false, &sequences_probe_cases},
      {"int32-positions", "property: int32 positions",
       "positions, cu_seqlens and seq_offsets as int32 = the same as int64", &property_Int32EqualsInt64, false, false,
       true, true, false, &int32_probe_cases},
      {"table-kinds", "property: table kinds",
       "cos and sin given as two [P][R/2], one [P][R] or two full-width tables of equal values agree",
       &property_TableKindsAgree, false, false, false, true, true},
      {"same-call-twice", "property: same call twice",
       "the same tensor-form call (up to 32 tokens, with k and padded strides) made twice gives the same output "
       "(the identity clause): no race between threads, nothing carried over from an earlier call",
       &property_SameCallTwiceSameOutput, false, false, true, true, false, &tensor_probe_cases},
  };
  return v;
}

RopeCase v2_probe_case(Dtype d, Layout l) {
  RopeCase c;
  c.dtype = d;
  c.layout = l;
  c.head_dim = c.rotary_dim = 8;
  c.positions = {3};
  c.attention_factor = 0.5;
  c.input.assign(c.n_bytes(), 0);
  return c;
}

const PropertyDef* find_property(std::string_view id) {
  for (const PropertyDef& p : property_set())
    if (id == p.id) return &p;
  return nullptr;
}

// ---- the driver ------------------------------------------------------------------------------------------

namespace {

uint64_t fnv1a(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (char ch : s) h = (h ^ static_cast<unsigned char>(ch)) * 0x100000001b3ull;
  return h;
}

// Execution i's random source and size: a pure function of (seed, property, dtype, layout, i). Sizes grow
// from 0 to RapidCheck's nominal 100 over the run, as rc::check's do.
rc::Random execution_random(const PropertyDef& p, Dtype d, Layout l, uint64_t seed, uint64_t index) {
  return rc::Random(rc::Random::Key{seed, fnv1a(p.id), uint64_t(d) * 4 + uint64_t(l), index});
}
int execution_size(uint64_t index, uint64_t cases) {
  if (cases <= 1) return rc::kNominalSize;
  return int(std::min<uint64_t>(rc::kNominalSize, index * rc::kNominalSize / (cases - 1)));
}

using CaseDescription = rc::detail::CaseDescription;
using CaseResult = rc::detail::CaseResult;

// RapidCheck prefixes a failure with where it was raised ("suite_memory.cpp:108:\nRC_FAIL(why)\n\n"): the
// user reads the property's own message.
std::string without_location(const std::string& d) {
  const size_t nl = d.find('\n');
  if (nl == std::string::npos || nl == 0 || d[nl - 1] != ':' || d.compare(nl + 1, 3, "RC_") != 0) return d;
  const size_t blank = d.find("\n\n", nl);
  return blank == std::string::npos ? d : d.substr(blank + 2);
}

CaseDescription execute(KernelHandle& k, const rc::Shrinkable<CaseDescription>& s) {
  CaseDescription d = s.value();
  d.result.description = without_location(d.result.description);
  k.end_execution(d.result);
  return d;
}

}  // namespace

std::string PropertyOutcome::reproduce(const PropertyDef& p, Dtype d, Layout l, uint64_t seed) const {
  return fmt::format("property {}, {} {}, seed {}, case {}{}", p.id, to_string(d), to_string(l), seed, index,
                     shrink_path.empty() ? "" : ", shrink " + shrink_path_text(shrink_path));
}

PropertyOutcome run_property(const PropertyDef& p, KernelHandle& k, Dtype d, Layout l, const Scope& s,
                             const DriverOptions& o) {
  PropertyOutcome out;
  const rc::detail::Property prop = rc::detail::toProperty(p.make(k, d, l, s));
  const uint64_t limit = o.cases * (1 + o.max_discard_ratio);
  for (uint64_t i = 0; i < limit && out.passed < o.cases; ++i) {
    if (o.stop && o.stop()) {
      out.stopped = true;
      return out;
    }
    k.begin_execution(i, false);
    rc::Shrinkable<CaseDescription> cur = prop(execution_random(p, d, l, o.seed, i), execution_size(i, o.cases));
    CaseDescription desc = execute(k, cur);
    ++out.executions;
    if (desc.result.type == CaseResult::Type::Success) {
      ++out.passed;
      continue;
    }
    if (desc.result.type == CaseResult::Type::Discard) {
      ++out.discarded;
      continue;
    }
    out.failed = true;
    out.index = i;
    out.message = desc.result.description;
    if (!o.shrink) return out;
    if (o.shrink_this && !o.shrink_this()) {
      out.shrink_skipped = true;
      return out;
    }
    // RapidCheck's shrinking: take the first smaller candidate that still fails, until none does.
    for (bool progressed = true; progressed;) {
      progressed = false;
      rc::Seq<rc::Shrinkable<CaseDescription>> shrinks = cur.shrinks();
      size_t j = 0;
      while (auto cand = shrinks.next()) {
        if (out.shrinks_tried >= o.max_shrink_tries) {
          out.shrink_capped = true;
          return out;
        }
        if (o.stop && o.stop()) {
          out.shrink_cut = true;
          return out;
        }
        ++out.shrinks_tried;
        k.begin_execution(i, true);
        const CaseDescription cd = execute(k, *cand);
        if (cd.result.type == CaseResult::Type::Failure) {
          cur = *cand;
          out.message = cd.result.description;
          out.shrink_path.push_back(j);
          progressed = true;
          break;
        }
        ++j;
      }
    }
    return out;
  }
  return out;
}

rc::detail::CaseResult replay_execution(const PropertyDef& p, KernelHandle& k, Dtype d, Layout l, const Scope& s,
                                        uint64_t seed, uint64_t index, const std::vector<size_t>& shrink_path,
                                        uint64_t cases) {
  const rc::detail::Property prop = rc::detail::toProperty(p.make(k, d, l, s));
  rc::Shrinkable<CaseDescription> cur = prop(execution_random(p, d, l, seed, index), execution_size(index, cases));
  for (size_t step : shrink_path) {
    rc::Seq<rc::Shrinkable<CaseDescription>> shrinks = cur.shrinks();
    std::optional<rc::Shrinkable<CaseDescription>> next;
    for (size_t j = 0; j <= step; ++j) {
      auto cand = shrinks.next();
      if (!cand) throw std::invalid_argument("the shrink path does not exist for this case (another ropecheck version?)");
      if (j == step) next = *cand;
    }
    cur = *next;
  }
  k.begin_execution(index, !shrink_path.empty());
  return execute(k, cur).result;
}

// ---- what the properties share ---------------------------------------------------------------------------

Bytes run_or_discard(KernelHandle& k, const RopeCase& c, const RunRequest& r) {
  RunResult res = k.run(c, r);
  if (res.status == RunResult::Status::declined) RC_DISCARD("the kernel declines this configuration");
  if (res.status == RunResult::Status::failed)
    RC_FAIL(FailureText((r.in_place ? "in-place call: " : "") + res.failure).in(c).str());
  return std::move(res.out);
}

std::optional<Bytes> run_if_accepted(KernelHandle& k, const RopeCase& c, const RunRequest& r) {
  RunResult res = k.run(c, r);
  if (res.status == RunResult::Status::declined) return std::nullopt;
  if (res.status == RunResult::Status::failed)
    RC_FAIL(FailureText((r.in_place ? "in-place call: " : "") + res.failure).in(c).str());
  return std::move(res.out);
}

}  // namespace ropecheck::props
