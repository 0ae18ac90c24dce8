#include "properties/engine.hpp"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <stdexcept>

#include <fmt/format.h>

#include "properties/suite.hpp"
#include "reference/reference.hpp"

namespace ropecheck::props {

// ---- handles ---------------------------------------------------------------------------------------------

ImplementationHandle::ImplementationHandle(const Implementation& impl, std::optional<KernelPromise> promise)
    : impl_(impl), promise_(promise ? std::move(*promise) : promise_of(impl)) {}

RunResult ImplementationHandle::run(const RopeCase& c, const RunRequest& r) {
  RunResult res;
  if (!impl_.fn) {
    res.status = RunResult::Status::failed;
    res.failure = impl_.name + " has no entry point in this process";
    res.fault = "error code";
    return res;
  }
  Bytes in = c.input;
  if (r.in_place) {
    res.out = c.input;
  } else {
    res.out.assign(c.n_bytes(), static_cast<unsigned char>(r.out_fill < 0 ? 0 : r.out_fill));
  }
  const rc_rope_args a = r.in_place ? c.args(res.out.data(), res.out.data()) : c.args(in.data(), res.out.data());
  const int rc = impl_.fn(&a);
  if (rc == RC_UNSUPPORTED) {
    res.status = RunResult::Status::declined;
    return res;
  }
  if (rc != RC_OK) {
    res.status = RunResult::Status::failed;
    res.failure = impl_.name + " returned " + std::to_string(rc) + " on a well-formed case: " + c.summary();
    res.fault = "error code";
    return res;
  }
  if (!r.in_place) res.input_after = std::move(in);
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
      {"position-zero", "property: position 0", "position 0 is the identity, out of place and in place (bit for bit)",
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
       "dims [rotary_dim, head_dim) copied bit for bit (NaN payloads, subnormals), out of place and in place",
       &property_PassThroughDimsBitExact, false, false, true},
      {"input-untouched", "property: input untouched", "an out-of-place call leaves its input unchanged",
       &property_InputUntouchedOutOfPlace, false, false, false},
      {"in-place", "property: in place",
       "in place equals out of place bit for bit (the output buffer prefilled with NaN bytes)",
       &property_InPlaceEqualsOutOfPlace, false, false, true},
      {"accuracy", "property: accuracy", "every pair within its allowance of the exact reference (generated cases)",
       &property_WithinBoundOfReference, false, false, true},
      {"special-values", "property: special values",
       "NaN and +-Inf inputs follow the documented rules, out of place and in place",
       &property_SpecialValuesFollowTheRules, false, false, true},
  };
  return v;
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

std::string shrink_path_text(const std::vector<size_t>& path) {
  std::string s;
  for (size_t k : path) s += (s.empty() ? "" : ".") + std::to_string(k);
  return s;
}

std::vector<size_t> parse_shrink_path(const std::string& s) {
  std::vector<size_t> v;
  if (s.empty()) return v;
  size_t pos = 0;
  while (pos <= s.size()) {
    const size_t dot = s.find('.', pos);
    const std::string part = s.substr(pos, dot == std::string::npos ? std::string::npos : dot - pos);
    if (part.empty() || part.size() > 9 || part.find_first_not_of("0123456789") != std::string::npos)
      throw std::invalid_argument("a shrink path is numbers separated by dots (\"3.0.12\"), not '" + s + "'");
    v.push_back(std::stoul(part));
    if (dot == std::string::npos) break;
    pos = dot + 1;
  }
  return v;
}

// ---- what the properties share ---------------------------------------------------------------------------

Bytes run_or_discard(KernelHandle& k, const RopeCase& c, const RunRequest& r) {
  RunResult res = k.run(c, r);
  if (res.status == RunResult::Status::declined) RC_DISCARD("the kernel declines this configuration");
  if (res.status == RunResult::Status::failed)
    RC_FAIL((r.in_place ? "in-place call: " : "") + res.failure + "\n  case: " + c.summary());
  return std::move(res.out);
}

std::optional<Bytes> run_if_accepted(KernelHandle& k, const RopeCase& c, const RunRequest& r) {
  RunResult res = k.run(c, r);
  if (res.status == RunResult::Status::declined) return std::nullopt;
  if (res.status == RunResult::Status::failed)
    RC_FAIL((r.in_place ? "in-place call: " : "") + res.failure + "\n  case: " + c.summary());
  return std::move(res.out);
}

double pair_norm(double a, double b) { return std::sqrt(a * a + b * b); }

double pair_error_allowance(const RopeCase& c, double bound, double n) {
  const Format f = format_of(c.dtype);
  return bound * f.unit_roundoff() * std::max(n, f.min_normal());
}

double model_deviation(AngleModel model, const RopeCase& c, uint32_t pair, int64_t m) {
  if (model == AngleModel::exact) return 0.0;
  const double exact = exact_angle(c, pair, m);  // rounded to double: error <= |angle| 2^-53
  double mod = exact;
  switch (model) {
    case AngleModel::exact: break;
    case AngleModel::fp32: mod = fp32_model_angle(c, pair, m); break;
  }
  const double d = std::fabs(mod - exact) + (std::fabs(mod) + std::fabs(exact)) * 0x1p-52;
  return std::min(d, 2.0);
}

std::string bits_text(const RopeCase& c, const void* buf, size_t k) {
  char b[64];
  const uint32_t bits = load_bits(c.dtype, buf, k);
  std::snprintf(b, sizeof b, c.dtype == Dtype::f32 ? "0x%08" PRIx32 " (%a)" : "0x%04" PRIx32 " (%a)", bits,
                bits_to_double(c.dtype, bits));
  return b;
}

std::string element_where(const RopeCase& c, size_t k) {
  const size_t per_token = size_t(c.n_heads) * c.head_dim;
  const size_t t = k / per_token, h = (k % per_token) / c.head_dim, dim = k % c.head_dim;
  std::ostringstream o;
  o << "token " << t << " (position " << (t < c.positions.size() ? c.positions[t] : 0) << "), head " << h << ", dim "
    << dim << (dim >= c.rotary_dim ? " (pass-through)" : "");
  return o.str();
}

namespace {
bool is_nan_bits(Dtype d, uint32_t b) {
  switch (d) {
    case Dtype::f32: return (b & 0x7f800000u) == 0x7f800000u && (b & 0x007fffffu);
    case Dtype::f16: return (b & 0x7c00u) == 0x7c00u && (b & 0x03ffu);
    case Dtype::bf16: return (b & 0x7f80u) == 0x7f80u && (b & 0x007fu);
  }
  return false;
}
// Two outputs agree: the same bits, or both NaN (a NaN's payload is not part of the contract of a result).
bool same_output(Dtype d, uint32_t a, uint32_t b) { return a == b || (is_nan_bits(d, a) && is_nan_bits(d, b)); }
}  // namespace

size_t first_difference(const RopeCase& c, const void* a, const void* b) {
  for (size_t k = 0; k < c.n_elements(); ++k)
    if (load_bits(c.dtype, a, k) != load_bits(c.dtype, b, k)) return k;
  return SIZE_MAX;
}

// ---- predicates ------------------------------------------------------------------------------------------

std::vector<size_t> relayout(const RopeCase& c, Layout from, Layout to) {
  std::vector<uint32_t> dim_map(c.head_dim);
  for (uint32_t k = 0; k < c.head_dim; ++k) dim_map[k] = k;  // pass-through dims stay
  for (uint32_t i = 0; i < c.rotary_dim / 2; ++i) {
    const auto [a0, a1] = pair_dims(from, c.rotary_dim, i);
    const auto [b0, b1] = pair_dims(to, c.rotary_dim, i);
    dim_map[a0] = b0;
    dim_map[a1] = b1;
  }
  std::vector<size_t> v(c.n_elements());
  for (size_t k = 0; k < v.size(); ++k) v[k] = k - k % c.head_dim + dim_map[k % c.head_dim];
  return v;
}

RopeCase half_split_twin(const RopeCase& ci) {
  RopeCase ch = ci;
  ch.layout = Layout::half_split;
  const std::vector<size_t> perm = relayout(ci, Layout::interleaved, Layout::half_split);
  for (size_t k = 0; k < ci.n_elements(); ++k) store_bits(ci.dtype, ch.input.data(), perm[k], load_bits(ci.dtype, ci.input.data(), k));
  return ch;
}

std::string layouts_violation(const RopeCase& ci, const Bytes& oi, double bi, const RopeCase& ch, const Bytes& oh,
                              double bh, bool bit_exact) {
  const Dtype d = ci.dtype;
  const std::vector<size_t> perm = relayout(ci, ci.layout, ch.layout);
  for (size_t t = 0; t < ci.n_tokens(); ++t)
    for (size_t h = 0; h < ci.n_heads; ++h) {
      const size_t b = head_offset(ci, t, h);
      for (uint32_t i = 0; i < ci.rotary_dim / 2; ++i) {
        const auto [a0, a1] = pair_dims(ci.layout, ci.rotary_dim, i);
        const size_t ki[2] = {b + a0, b + a1}, kh[2] = {perm[b + a0], perm[b + a1]};
        bool ok;
        std::string rule;
        if (bit_exact) {
          ok = same_output(d, load_bits(d, oi.data(), ki[0]), load_bits(d, oh.data(), kh[0])) &&
               same_output(d, load_bits(d, oi.data(), ki[1]), load_bits(d, oh.data(), kh[1]));
          rule = "bit for bit";
        } else {
          const double nx = pair_norm(value(ci, ci.input.data(), ki[0]), value(ci, ci.input.data(), ki[1]));
          const double dist = pair_norm(value(ci, oi.data(), ki[0]) - value(ch, oh.data(), kh[0]),
                                        value(ci, oi.data(), ki[1]) - value(ch, oh.data(), kh[1]));
          const double tol = pair_error_allowance(ci, bi, nx) + pair_error_allowance(ch, bh, nx);
          ok = dist <= tol * (1 + 0x1p-50);
          const double unit = pair_error_allowance(ci, 1, nx);
          rule = fmt::format("they differ by {:.4g} u, allowed {:.4g} u = both allowances", dist / unit, bi + bh);
        }
        if (!ok)
          return fmt::format(
              "layouts disagree ({}) on pair {} of token {} (position {}), head {}:\n  input: {}, {}\n  {}: {}, {}\n"
              "  {}:  {}, {}\n  case: {}",
              rule, i, t, ci.positions[t], h, bits_text(ci, ci.input.data(), ki[0]),
              bits_text(ci, ci.input.data(), ki[1]), to_string(ci.layout), bits_text(ci, oi.data(), ki[0]),
              bits_text(ci, oi.data(), ki[1]), to_string(ch.layout), bits_text(ch, oh.data(), kh[0]),
              bits_text(ch, oh.data(), kh[1]), ci.summary());
      }
      for (uint32_t k = ci.rotary_dim; k < ci.head_dim; ++k)
        if (!same_output(d, load_bits(d, oi.data(), b + k), load_bits(d, oh.data(), b + k)))
          return fmt::format("layouts disagree on pass-through dim {} at {}: {} vs {}\n  case: {}", k,
                             element_where(ci, b + k), bits_text(ci, oi.data(), b + k), bits_text(ch, oh.data(), b + k),
                             ci.summary());
    }
  return "";
}

std::string in_place_violation(const RopeCase& c, const Bytes& out_of_place, const Bytes& in_place) {
  for (size_t k = 0; k < c.n_elements(); ++k) {
    if (same_output(c.dtype, load_bits(c.dtype, out_of_place.data(), k), load_bits(c.dtype, in_place.data(), k)))
      continue;
    return "in-place result differs from out-of-place at " + element_where(c, k) + ": input " +
           bits_text(c, c.input.data(), k) + ", out of place " + bits_text(c, out_of_place.data(), k) + ", in place " +
           bits_text(c, in_place.data(), k) + "\n  case: " + c.summary();
  }
  return "";
}

std::string input_touched(const RopeCase& c, const Bytes& before, const Bytes& after) {
  const size_t k = first_difference(c, before.data(), after.data());
  if (k == SIZE_MAX) return "";
  return "the kernel wrote to its input (out != in) at " + element_where(c, k) + ": was " +
         bits_text(c, before.data(), k) + ", now " + bits_text(c, after.data(), k) + "\n  case: " + c.summary();
}

}  // namespace ropecheck::props
