// What the gate holds one call to: the checks of a call (status, memory, FP environment, the reference), its
// criteria and diagnosis, a row's bookkeeping, the bias check, and what each row checks (in words).
#include "gate/gate.hpp"
#include "reference/reference.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <sstream>
#include <unordered_map>
#include <csignal>

#include "gate/isolation.hpp"
#include "properties/diagnosis.hpp"
#include "properties/engine.hpp"

namespace ropecheck::gate {

namespace {

std::string elem_site(const RopeCase& c, size_t k) {
  const size_t per_token = size_t(c.n_heads) * c.head_dim;
  return fmt::format("element {} (token {}, head {}, dim {})", k, k / per_token, (k % per_token) / c.head_dim,
                     k % c.head_dim);
}

}  // namespace

std::string parse_tolerance(const std::string& s, std::map<Dtype, double>& out) {
  auto parse_num = [](const std::string& t, double& v) {
    char* end = nullptr;
    v = std::strtod(t.c_str(), &end);
    return !t.empty() && end == t.c_str() + t.size() && std::isfinite(v) && v > 0;
  };
  double v;
  if (s.find('=') == std::string::npos) {
    if (!parse_num(s, v)) return "--tolerance: not a positive number: '" + s + "'";
    for (Dtype d : kAllDtypes) out[d] = v;
    return "";
  }
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    const auto eq = item.find('=');
    if (eq == std::string::npos) return "--tolerance: expected DTYPE=U, got '" + item + "'";
    const auto d = parse_dtype(item.substr(0, eq));
    if (!d) return "--tolerance: unknown dtype '" + item.substr(0, eq) + "'";
    if (!parse_num(item.substr(eq + 1), v)) return "--tolerance: not a positive number in '" + item + "'";
    out[*d] = v;
  }
  return "";
}

void CheckRow::add(const Judgement& j) {
  max_angle_ulps = std::max(max_angle_ulps, j.stats.max_resolved_angle_ulps);
  if (j.stats.count && (worst_bound == 0 || j.worst_ratio > worst_ratio)) {
    worst_ratio = j.worst_ratio;
    worst_error = j.worst_pe.e;
    worst_bound = j.worst_allowance.total;
    worst_radial = j.worst_pe.radial;
    worst_tangential = j.worst_pe.tangential;
    allowed_radial = j.worst_allowance.radial;
    allowed_tangential = j.worst_allowance.tangential;
  }
}

void GateResult::add(CheckRow& r, const RopeCase& c, const Judgement& j, std::map<Dtype, BiasSums>& bias) {
  r.add(j);
  bias[c.dtype].merge(j.bias);
  Combo& cb = by_combo[{c.dtype, c.layout}];
  ++cb.calls;
  for (const auto& [b, st] : j.by_bucket) {
    by_bucket[c.dtype][b].merge(st);
    cb.by_bucket[b].merge(st);
  }
  if (!j.ok() && cb.failed++ == 0) {
    const std::string rep = j.report(1);
    cb.first_failure = r.name + ": " + c.summary() + ": " + rep.substr(0, rep.find('\n'));
  }
}

Criteria case_criteria(const KernelErrorModel& em, const RopeCase& c, const Contract& contract,
                       const std::map<Dtype, double>& tolerance) {
  if (auto it = tolerance.find(c.dtype); it != tolerance.end())
    return Criteria::flat_bound(it->second, contract.identity_bits);
  return Criteria::of(em, contract);
}

std::string describe_bounds(const KernelErrorModel& em, const Contract& contract, const std::vector<Dtype>& dtypes,
                            int64_t max_position) {
  std::string o;
  for (Dtype d : dtypes) {
    RopeCase c;
    c.dtype = d;
    c.head_dim = c.rotary_dim = 128;
    c.positions = {1};
    const Criteria cr = Criteria::of(em, contract);
    // Pair 0 (theta = 1) of a unit-norm pair at position 1 and at the largest position.
    const PairAllowance a1 = cr.allowance(c, 0, 1.0, 1.0);
    const PairAllowance am = cr.allowance(c, 0, 1.0, double(max_position));
    o += fmt::format("  {}: at angle 1 rad radial <= {:.4g} u, tangential <= {:.4g} u; at angle {} rad radial <= {:.4g} "
                     "u, tangential <= {:.4g} u\n",
                     to_string(d), a1.radial, a1.tangential, max_position, am.radial, am.tangential);
  }
  return o;
}

std::string row_what(const std::string& name, const Contract& contract) {
  if (name.rfind("matrix ", 0) == 0)
    return "head/rotary dims 2..256 (partial rotary, vector tails), 1-3 heads, shuffled positions 0, 1, 2, 3, 7 .. "
           "max, base/scale/inv_freq variants, in place and out of place";
  if (name == "special values")
    return "+-0, subnormals, huge, NaN, +-Inf in rotated and pass-through dims (docs/error-model.md rules)";
  if (name == "property: position 0")
    return contract.identity_bits ? "every position 0: the output is the input, bit for bit"
                                  : "every position 0: the output has the input's values (+-0 alike; NaN beside a "
                                    "non-finite partner)";
  for (const props::PropertyDef& p : props::property_set())
    if (name == p.row) return p.what;
  if (name == "v2: rotary offset")
    return "ABI v2: a rotated slice inside the head (DeepSeek MLA's offset 128; a middle slice), pass-through on both "
           "sides";
  if (name == "v2: position axes")
    return "ABI v2: 3 position axes with Qwen2-VL's sectioned and Qwen3-VL's interleaved pair maps, a 2-axis vision "
           "grid with negative positions";
  if (name == "v2: attention factor") return "ABI v2: cos and sin times an attention factor (YaRN's, 2^-1/2)";
  if (name == "v2: frequency rules")
    return "ABI v2: theta from the rule descriptor (linear, ntk, dynamic, yarn x4 and x32, llama3, longrope short and "
           "long), judged against the rule's exact table";
  if (name == "v2: combined") return "ABI v2: yarn x40 with its attention factor on a slice at offset 128 (DeepSeek-V3)";
  if (name == "v3: inverse")
    return "ABI v3: the inverse rotation (backward), with an attention factor it keeps, partial rotary, in place";
  if (name == "v3: tables")
    return "ABI v3: cos/sin given by the caller, each table kind (two [P][R/2], one [P][R], two full-width, f32 "
           "angles) in f32 and the data's type, rows in the opposite order to the positions; judged against the "
           "table as given";
  if (name == "v3: strides")
    return "ABI v3: the tensor form with heads and tokens apart in q and q_out (gaps that must stay untouched), in "
           "place and out of place, int64 and int32 positions";
  if (name == "v3: q and k")
    return "ABI v3: q and k in one call with their own head counts (GQA 4:1, 8:2, 4:2), k's tokens or heads apart, "
           "compact, in place, int32 positions";
  if (name == "v3: sequences")
    return "ABI v3: varlen cu_seqlens (a length-1 and an empty sequence), implicit positions with per-sequence "
           "offsets, rank 4 batches";
  if (name == "v3: int32 positions") return "ABI v3: int32 positions, cu_seqlens and seq_offsets";
  if (name == "v4: per-token tables")
    return "ABI v4: cos/sin or angles with a row per token, gathered at its position (RC_ROWS_BY_TOKEN: Hugging Face, "
           "Liger), each kind in f32 and the data's type; q and k, {B, S} batches sharing rows or not, varlen, the "
           "inverse; judged against the table as given";
  if (name == "random") return "random cases: dims, heads, tokens, positions, base, scale, tables, in place";
  if (name == "long positions")
    return "positions past the other rows': f32-inexact ones below 2^31, then beyond int32 (2^31, 2^32 + 1, ... up "
           "to 2^40 by default): positions rounded to f32 or truncated to 32 bits";
  if (name == "coverage")
    return "the kernel accepts calls: something; each --require feature; each --supports feature the run made calls "
           "of; with a model, a call in its configuration";
  return "cases";
}

CaseVerdict check_call(const RopeCase& c, bool in_place, const CallResult& r) {
  CaseVerdict v;
  // A declined call is not judged, but the memory checks hold for it too (it must not have written).
  const bool memory_fault = !r.memory.empty() || r.guard_before_bytes || r.guard_after_bytes || r.input_guard_bytes ||
                            r.input_changed || !r.fp_change.empty();
  if (r.status == CallStatus::declined && !memory_fault) return v;
  v.accepted = true;
  auto failed = [&](std::string m, const char* fault) {
    v.pass = false;
    v.message += m + "\n";
    if (fault && v.fault.empty()) v.fault = fault;
  };
  if (r.status != CallStatus::ok && r.status != CallStatus::declined)
    failed("the kernel " + describe(r), r.status == CallStatus::hung                              ? "hang"
                                        : r.status == CallStatus::crashed && r.signal == SIGSYS ? "forbidden system call"
                                        : r.status == CallStatus::crashed && !r.wrapped_offset.empty()
                                            ? "element offsets computed in 32 bits"
                                        : r.status == CallStatus::crashed && !r.misread_fault.empty()
                                            ? r.misread_fault.c_str()
                                        : r.status == CallStatus::crashed ? "crash"
                                        : !r.raised.empty()                                     ? "exception"
                                                                                                : "error code");
  for (const MemoryFinding& m : r.memory) failed(m.message, m.fault.c_str());
  if (!r.fp_change.empty()) failed(r.fp_change + " (and left it so: the whole process computes differently after)", "fp environment");
  const Dtype d = c.dtype;
  if (r.guard_before_bytes)
    failed(fmt::format("memory: {} guard byte(s) before the {} buffer were overwritten (a write before its start)",
                       r.guard_before_bytes, in_place ? "in-place" : "output"),
           "out-of-bounds write");
  if (r.guard_after_bytes)
    failed(fmt::format("memory: {} guard byte(s) after the {} buffer were overwritten (a write past its end)",
                       r.guard_after_bytes, in_place ? "in-place" : "output"),
           "out-of-bounds write");
  if (r.input_guard_bytes)
    failed(fmt::format("memory: {} guard byte(s) around the input buffer were overwritten", r.input_guard_bytes),
           "out-of-bounds write");
  if (r.input_changed) {
    const size_t k = r.first_input_changed;
    failed(fmt::format("memory: an out-of-place call changed {} input element(s); first {}: was {}",
                       r.input_changed, elem_site(c, k), describe_element(d, load_bits(d, c.input.data(), k))),
           "input modified");
  }
  if (r.status != CallStatus::ok) {
    if (!v.message.empty() && v.message.back() == '\n') v.message.pop_back();
    return v;
  }
  if (r.unwritten) {
    failed(fmt::format("memory: {} output element(s) were never written (still the poison {}); first {}",
                       r.unwritten, describe_element(d, poison_bits(d)), elem_site(c, r.first_unwritten)),
           "unwritten output");
  }
  if (!v.message.empty() && v.message.back() == '\n') v.message.pop_back();
  return v;
}

CaseVerdict judge_call(const RopeCase& c, bool in_place, AngleModel model, const Criteria& cr, const CallResult& r,
                       const ReferenceOutput* ref_in) {
  CaseVerdict v = check_call(c, in_place, r);
  if (!v.accepted || r.status != CallStatus::ok) return v;
  if (!v.message.empty()) v.message += "\n";
  auto failed = [&](std::string m, const char* fault) {
    v.pass = false;
    v.message += m + "\n";
    if (fault && v.fault.empty()) v.fault = fault;
  };
  ReferenceOutput local;
  const ReferenceOutput* ref = ref_in;
  if (!ref) {
    ReferenceOptions ro;
    ro.angle_model = model;
    local = reference_rope(c, ro);
    ref = &local;
  }
  JudgeOptions jo;
  jo.max_findings = 4;
  jo.keep_values = true;  // percentiles and the histogram of the run's report
  v.judgement = judge_output(c, *ref, r.out.data(), cr, jo);
  v.judged = true;
  if (!v.judgement.ok()) failed(v.judgement.report(2), nullptr);
  if (c.tensor && c.tensor->k_heads) {
    // The tensor form's k: a case of its own (the same parameters and positions), judged as q is; its pairs
    // count with q's, its findings are said as k's.
    ReferenceOptions ro;
    ro.angle_model = model;
    const RopeCase kc = c.k_case();
    const Judgement kj = judge_output(kc, reference_rope(kc, ro), r.k_out.data(), cr, jo);
    if (!kj.ok()) failed("k: " + kj.report(2), nullptr);
    v.has_k = true;
    v.k_judgement.violated = kj.violated;
    v.k_judgement.passthrough_violations = kj.passthrough_violations;
    Judgement& j = v.judgement;
    j.pairs += kj.pairs;
    j.violations += kj.violations;
    j.stats.merge(kj.stats);
    for (const auto& [b, st] : kj.by_bucket) j.by_bucket[b].merge(st);
    j.bias.merge(kj.bias);
    if (kj.worst_ratio > j.worst_ratio) {
      j.worst_ratio = kj.worst_ratio;
      j.worst_pe = kj.worst_pe;
      j.worst_allowance = kj.worst_allowance;
    }
  }
  v.worst_error = v.judgement.stats.max;
  if (!v.pass) v.angles = ref->angle;
  if (!v.message.empty() && v.message.back() == '\n') v.message.pop_back();
  return v;
}

namespace {

// Stride hypotheses for a tensor-form call (properties/diagnosis.hpp, HeadMap): where a kernel that takes strides
// wrong reads and writes each head. For k: k laid out with q's strides (Liger #342, a ggml k view made with q's
// nb), and k's heads q's head stride apart; for q or k: every tensor taken as compact (strides ignored: vLLM
// #12777, MLX #1340). Each wrong in reading and writing, in reading only (the output's strides right, as a
// kernel that views its input wrong), in writing only; the output's own layout or, in place, the input's. None
// that reads and writes exactly the true heads.
std::vector<HeadMap> stride_hypotheses(const RopeCase& c, bool for_k) {
  std::vector<HeadMap> maps;
  if (!c.tensor) return maps;
  const TensorCall& tc = *c.tensor;
  const uint64_t T = c.n_tokens(), H = for_k ? tc.k_heads : c.n_heads;
  const int in = for_k ? 2 : 0, out = for_k ? 3 : 1;
  const uint64_t D = c.head_dim;
  auto index_of = [&](int which, uint64_t per) {  // element offset in tensor `which` -> compact head (per = 1) or
    std::unordered_map<uint64_t, size_t> m;           // compact element (per = head_dim)
    const TensorLayout L = c.tensor_layout(which);
    for (uint64_t t = 0; t < T; ++t)
      for (uint64_t h = 0; h < H; ++h)
        for (uint64_t j = 0; j < per; ++j) m.emplace(L.head(t, h) + j, size_t((t * H + h) * per + j));
    return m;
  };
  const auto in_elements = index_of(in, D), out_elements = index_of(out, D);
  auto find = [](const std::unordered_map<uint64_t, size_t>& m, uint64_t off) {
    const auto it = m.find(off);
    return it == m.end() ? SIZE_MAX : it->second;
  };
  const TensorLayout Lin = c.tensor_layout(in), Lout = c.tensor_layout(out);
  // wrong_in(t, h), wrong_out(t, h, in_place): the element offsets the hypothesis's kernel uses in the input's and
  // the output's buffer.
  auto add = [&](Cause cause, const std::string& what, auto wrong_in, auto wrong_out) {
    for (int which : {0, 1, 2})  // wrong in both, in reading only, in writing only
      for (bool in_place : {false, true}) {
        HeadMap m{cause, what + (which == 1 ? " (reading; written where it belongs)" : which == 2 ? " (writing; read "
                                                                                                    "where it belongs)"
                                                                                                  : ""),
                  {}, {}};
        bool other = false;
        for (uint64_t t = 0; t < T; ++t)
          for (uint64_t h = 0; h < H; ++h) {
            const uint64_t r = which == 2 ? Lin.head(t, h) : wrong_in(t, h);
            const uint64_t w = which == 1 ? (in_place ? Lin : Lout).head(t, h) : wrong_out(t, h, in_place);
            for (uint64_t j = 0; j < D; ++j) {
              m.read.push_back(find(in_elements, r + j));
              m.write.push_back(find(in_place ? in_elements : out_elements, w + j));
              other |= m.read.back() != (t * H + h) * D + j || m.write.back() != (t * H + h) * D + j;
            }
          }
        bool dup = false;
        for (const HeadMap& e : maps) dup |= e.read == m.read && e.write == m.write;
        if (other && !dup) maps.push_back(std::move(m));
      }
  };
  const TensorLayout Lq = c.tensor_layout(0), Lqo = c.tensor_layout(1);
  if (for_k) {
    add(Cause::k_laid_out_with_q_strides, "k's heads read and written at q's element offsets",
        [&](uint64_t t, uint64_t h) { return Lq.head(t, h); },
        [&](uint64_t t, uint64_t h, bool ip) { return (ip ? Lq : Lqo).head(t, h); });
    const int hd = Lq.ndim - 2;  // the heads' dimension
    add(Cause::k_head_stride_from_q,
        fmt::format("k's heads {} elements apart (q's head stride), not {}", Lq.strides[hd], Lin.strides[hd]),
        [&](uint64_t t, uint64_t h) { return Lin.head(t, 0) + h * uint64_t(Lq.strides[hd]); },
        [&](uint64_t t, uint64_t h, bool ip) {
          return (ip ? Lin : Lout).head(t, 0) + h * uint64_t((ip ? Lq : Lqo).strides[hd]);
        });
  }
  add(Cause::strides_ignored, "every tensor taken as compact [tokens][heads][head_dim]",
      [&](uint64_t t, uint64_t h) { return (t * H + h) * D; },
      [&](uint64_t t, uint64_t h, bool) { return (t * H + h) * D; });
  return maps;
}

}  // namespace

std::string diagnose_call(const RopeCase& c, AngleModel model, const Criteria& cr, const CaseVerdict& v,
                          const CallResult& r, std::string* suggestion) {
  if (suggestion) suggestion->clear();
  if (!v.fault.empty()) {
    if (v.fault == "crash" || v.fault == "hang" || v.fault == "error code" || v.fault == "exception" ||
        v.fault == "forbidden system call" || v.fault == "element offsets computed in 32 bits" ||
        v.fault == "positions truncated to 32 bits" || v.fault == "per-token table indexed by position" ||
        v.fault == "table row indexed by token")
      return v.fault + ": the kernel " + describe(r);
    return v.fault;
  }
  if (!v.judged || v.judgement.ok()) return "";
  ReferenceOptions ro;
  ro.angle_model = model;
  const ReferenceOutput ref = reference_rope(c, ro);
  if (c.tensor && c.tensor->k_heads && judge_output(c, ref, r.out.data(), cr).ok()) {
    // q is within its allowances: the failure is k's (judge_call), diagnosed as a case of its own.
    const RopeCase kc = c.k_case();
    const Diagnosis dg = diagnose(kc, r.k_out.data(), reference_rope(kc, ro), cr, model, stride_hypotheses(c, true));
    if (suggestion) *suggestion = dg.contract;
    return "k: " + dg.text();
  }
  const Diagnosis dg = diagnose(c, r.out.data(), ref, cr, model, stride_hypotheses(c, false));
  if (suggestion) *suggestion = dg.contract;
  return dg.text();
}

std::string in_place_aliasing(const RopeCase& c, AngleModel model, const Criteria& cr, const CallResult& out_of_place) {
  const CaseVerdict vo = judge_call(c, false, model, cr, out_of_place);
  if (!vo.accepted || !vo.pass) return "";
  return "in-place aliasing: the same case passes out of place (the kernel reads what it already wrote when out == "
         "in)";
}

CheckRow bias_row(Dtype d, const BiasSums& b, const KernelErrorModel& em) {
  CheckRow r;
  r.name = fmt::format("bias {}", to_string(d));
  r.what = "radial bias: mean radial error of the judged pairs within 5 SE + 1/8 u + the contract's systematic share";
  r.ran = true;
  r.cases = 1;
  const double n = double(std::max<uint64_t>(b.n, 1));
  const double g = double(b.clusters);
  double model = 0.125 + b.sum_systematic / n;
  const double ua = unit_roundoff(em.arith), ud = unit_roundoff(d);
  if (ud > ua) model += std::sqrt(2.0) * (em.trig_rel_u32 + 3.0) * ua / ud;  // the wider intermediate, fully biased
  // The mean and its cluster-robust standard error (pairs sharing cos/sin are one cluster), centred at the mean.
  struct Stat {
    double bias, se, allowed;
  };
  auto stat = [&](const BiasSums::Moments& m) {
    const double bias = m.sum_r / n;
    double var = (m.sum_s2 - 2 * bias * m.sum_ns + bias * bias * b.sum_n2) / (n * n);
    if (g > 1) var *= g / (g - 1);
    const double se = std::sqrt(std::max(var, 0.0));
    return Stat{bias, se, 5.0 * se + model};
  };
  // The hypotheses about the kernel's cos/sin: as measured (f32), less an f16 cache's share, less a bf16
  // cache's. The contract allows the caches no coarser than its cos-sin clause (f16 within bf16's allowance).
  const Stat st[3] = {stat(b.by_cache[0]), stat(b.by_cache[1]), stat(b.by_cache[2])};
  auto allowed_by_contract = [&](int k) {
    return k == 0 || em.cos_sin == Dtype::bf16 || (k == 1 && em.cos_sin == Dtype::f16);
  };
  auto ratio = [&](int k) { return std::fabs(st[k].bias) / st[k].allowed; };
  int best = 0;
  for (int k = 1; k < 3; ++k)
    if (allowed_by_contract(k) && ratio(k) < ratio(best)) best = k;
  const Stat& s = st[best];
  const char* names[3] = {"as measured", "less an f16 cache's share", "less a bf16 cache's share"};
  r.worst_error = std::fabs(s.bias);
  r.worst_bound = s.allowed;
  r.worst_ratio = ratio(best);
  // The caches' shares only where the contract allows a cache (issue 23: an f32 kernel's note listed shares of
  // -73 u and -539 u, which read like findings).
  const bool cache_allowed = allowed_by_contract(1) || allowed_by_contract(2);
  r.note = cache_allowed
               ? fmt::format("radial bias {:+.4f} u over {} pairs in {} clusters (SE {:.4f} u), allowed {:.4f} u ({}; "
                             "as measured {:+.4f} u, less an f16 / bf16 cache's share {:+.4f} / {:+.4f} u)",
                             s.bias, b.n, b.clusters, s.se, s.allowed, names[best], st[0].bias, st[1].bias, st[2].bias)
               : fmt::format("radial bias {:+.4f} u over {} pairs in {} clusters (SE {:.4f} u), allowed {:.4f} u", s.bias,
                             b.n, b.clusters, s.se, s.allowed);
  if (b.clusters < 30) {
    r.ran = false;
    r.note = fmt::format("not judged: {} clusters of pairs, fewer than the 30 the normal approximation needs ({})",
                         b.clusters, r.note);
    return r;
  }
  if (!(std::fabs(s.bias) <= s.allowed)) {
    r.failed_check = true;
    r.failed = 1;
    r.diagnosis = "radial bias";
    // A cache the contract does not allow that explains the mean: name its clause.
    for (int k : {1, 2})
      if (!allowed_by_contract(k) && ratio(k) <= 1.0) {
        r.diagnosis = fmt::format(
            "radial bias of a {} cos/sin cache (mean {:+.4f} u less its share, within {:.4f} u): would pass with "
            "cos-sin={}",
            k == 1 ? "f16" : "bf16", st[k].bias, st[k].allowed, k == 1 ? "f16" : "bf16");
        break;
      }
    // (A negative radial component is an output short of the exact rotation along its direction: a shorter output,
    // or one rotated by another angle, whose error's radial part is -|y|(1 - cos(delta)) -- not always shorter.)
    r.smallest_message = fmt::format(
        "radial bias: the mean radial error is {:+.4f} u over {} pairs ({} clusters), beyond {:.4f} u (5 SE + 1/8 u + "
        "the contract's systematic share); the outputs fall systematically {} the exact rotation along its direction "
        "({})",
        s.bias, b.n, b.clusters, s.allowed, s.bias < 0 ? "short of" : "beyond",
        s.bias < 0 ? "shorter outputs, or outputs rotated by another angle" : "longer outputs");
  }
  return r;
}

// The kinds of cos/sin table a kernel took in the negotiation, in the ABI's order: by position, then per token (v4).
namespace {
struct TakenKind {
  TableKind kind;
  bool by_token;
};
std::vector<TakenKind> taken_kinds(const AbiVersions& abi) {
  std::vector<TakenKind> kinds;
  for (bool by_token : {false, true})
    for (TableKind k : {TableKind::cos_sin_2, TableKind::cos_sin_cat, TableKind::cos_sin_full, TableKind::angle})
      if (by_token ? abi.takes_token_table(k) : abi.takes_table(k)) kinds.push_back({k, by_token});
  return kinds;
}

// The dtype of the table of kind k for a call of dtype d: the call's (vLLM, ONNX Runtime) when the kernel took
// that, unless it took f32 tables too and the contract says cos and sin are f32; otherwise f32.
Dtype table_dtype(const AbiVersions& abi, const TakenKind& k, Dtype d, const Contract& contract) {
  const uint8_t* dtypes = k.by_token ? abi.token_table_dtypes : abi.table_dtypes;
  const bool* in_call = k.by_token ? abi.token_table_in_call_dtype : abi.table_in_call_dtype;
  const bool f32_taken = dtypes[size_t(k.kind)] >> unsigned(Dtype::f32) & 1u;
  return d != Dtype::f32 && in_call[size_t(k.kind)] && !(f32_taken && contract.cos_sin == Dtype::f32) ? d
                                                                                                      : Dtype::f32;
}

// The case with a table of kind k the harness builds (SendWays): nullopt (*why) when a table cannot express it.
std::optional<RopeCase> with_table_of(const RopeCase& c, const AbiVersions& abi, const Contract& contract,
                                      AngleModel model, const TakenKind& k, GivenRows rows, std::string& why) {
  const Dtype td = table_dtype(abi, k, c.dtype, contract);
  const TablePipeline p = table_pipeline(contract, model);
  std::optional<RopeCase> t;
  try {
    t = with_given_table(c, k.kind, td, p, &why, k.by_token ? GivenRows::by_token : rows);
  } catch (const std::exception& e) {  // (an angle field the table builder cannot evaluate: the case says why)
    why = e.what();
  }
  if (!t) why = "a table cannot express this case (" + why + ")";
  return t;
}
}  // namespace

SendWays::SendWays(const RopeCase& asked, const AbiVersions& abi, const Contract& contract, AngleModel model,
                   uint64_t turn, GivenRows rows)
    : asked_(asked), abi_(abi), contract_(contract), model_(model), turn_(turn), rows_(rows) {
  if (abi.tables_only && !asked.table) n_tables_ = std::max<size_t>(1, taken_kinds(abi).size());
  // The forms: as it is where the kernel takes the flat form (or has no v3 forms of its own), then each tensor form
  // it took.
  if (abi.forms.empty() || abi.takes_flat_form()) forms_.push_back(std::nullopt);
  for (const TensorForm& f : abi.tensor_forms()) forms_.push_back(f);
  if (forms_.empty()) forms_.push_back(std::nullopt);
  n_forms_ = forms_.size();
  tables_.resize(n_tables_);
  ways_.resize(size());
}

const RopeCase* SendWays::base(size_t t) {
  if (!(abi_.tables_only && !asked_.table)) return &asked_;
  auto& slot = tables_[t];
  if (!slot) {
    const std::vector<TakenKind> kinds = taken_kinds(abi_);
    std::string w;
    slot.emplace(kinds.empty() ? std::nullopt
                               : with_table_of(asked_, abi_, contract_, model_, kinds[(turn_ + t) % kinds.size()],
                                               rows_, w));
    if (!*slot && why_.empty()) why_ = "the kernel takes tables only and " + w;
  }
  return *slot ? &**slot : nullptr;
}

const RopeCase* SendWays::way(size_t i) {
  if (i >= size()) return nullptr;
  const size_t t = i / n_forms_, f = i % n_forms_;
  const RopeCase* b = base(t);
  if (!b) return nullptr;
  if (!forms_[f]) return b;  // as it is (a table case keeps the form it was built in)
  auto& slot = ways_[i];
  if (!slot) {
    std::string w;
    slot.emplace(in_tensor_form(*b, *forms_[f], &w));
    if (!*slot && why_.empty())
      why_ = std::string(abi_.tensor_form_only ? "the kernel takes the tensor form only and " : "") + w;
  }
  return *slot ? &**slot : nullptr;
}

CallResult call_in_ways(SendWays& ways, const std::function<CallResult(const RopeCase&)>& call, size_t first,
                        const RopeCase** sent, size_t* way) {
  // The accepted call, else the first made (declined in every way, the case counts as its first way made: the
  // features of the ways tried after it are not what it was refused for).
  std::optional<CallResult> made, unsent;
  const RopeCase* made_case = nullptr;
  size_t made_way = 0;
  const size_t n = ways.size();
  for (size_t k = 0; k < n; ++k) {
    const size_t i = (first + k) % n;
    const RopeCase* c = ways.way(i);
    if (!c) continue;
    CallResult r = call(*c);
    if (!r.not_sent.empty()) {
      if (!unsent) unsent = std::move(r);
      continue;
    }
    const bool declined = r.status == CallStatus::declined;
    if (!declined || !made) {
      made = std::move(r);
      made_case = c;
      made_way = i;
    }
    if (!declined) break;
  }
  if (sent) *sent = made_case;
  if (way) *way = made_way;
  if (made) return std::move(*made);
  if (unsent) return std::move(*unsent);
  CallResult r;
  r.status = CallStatus::declined;
  r.rc = RC_UNSUPPORTED;
  r.not_sent = ways.not_sent().empty() ? "no form of the call the kernel takes expresses this case" : ways.not_sent();
  return r;
}

TablePipeline table_pipeline(const Contract& contract, AngleModel model) {
  // The conventional pipeline is what angles=f32 with its derived K describes; under an explicit K (which may be
  // below that pipeline's) the tables are correctly rounded, which every K >= 1/2 allows.
  return (contract.angles == Contract::Angles::f32 && contract.angle_ulps == 0) || model != AngleModel::exact
             ? TablePipeline::conventional_f32
             : TablePipeline::correctly_rounded;
}

Contract table_call_contract(const AbiVersions& abi, Dtype d, const Contract& contract) {
  Contract out = contract;
  for (const TakenKind& k : taken_kinds(abi)) {
    if (k.kind == TableKind::angle) {
      // f32 angles, the kernel's own cos and sin of them (its cos-sin clause). A correctly rounded angle is within
      // half an ulp of f32 at |phi| of the exact one (docs/error-model.md, "Caller-given tables"): the angle clause
      // allows at least that (K = 1/2, second-order terms aside); the conventional pipeline's angles (angles=f32
      // with its derived K) are what that clause already allows.
      if (table_pipeline(contract, AngleModel::exact) == TablePipeline::correctly_rounded) {
        constexpr double kHalfUlp = 0.5 * (1 + 0x1p-20);
        out.angles = Contract::Angles::f32;
        out.angle_ulps = std::max(contract.angles == Contract::Angles::f32 ? contract.angle_ulps : 0.0, kHalfUlp);
      }
      continue;
    }
    const Dtype td = table_dtype(abi, k, d, contract);
    if (format_of(td).unit_roundoff() > format_of(out.cos_sin).unit_roundoff()) out.cos_sin = td;
  }
  return out;
}

uint64_t case_turn(const RopeCase& c) {
  uint64_t h = 0xcbf29ce484222325ull;
  auto mix = [&h](const void* p, size_t n) {
    for (size_t k = 0; k < n; ++k) h = (h ^ static_cast<const unsigned char*>(p)[k]) * 0x100000001b3ull;
  };
  const uint32_t dims[4] = {uint32_t(c.dtype), c.head_dim, c.rotary_dim, c.n_heads};
  mix(dims, sizeof dims);
  mix(c.positions.data(), c.positions.size() * sizeof(int64_t));
  mix(c.input.data(), c.input.size());
  return h;
}

bool sent_form(const RopeCase& asked, const AbiVersions& abi, const Contract& contract, AngleModel model,
               uint64_t turn, std::optional<RopeCase>& form, std::string& not_sent) {
  form.reset();
  SendWays ways(asked, abi, contract, model, turn);
  for (size_t i = 0; i < ways.size(); ++i)
    if (const RopeCase* c = ways.way(i)) {
      if (c != &asked) form = *c;
      return true;
    }
  not_sent = ways.not_sent();
  return false;
}

CallResult property_call(const RopeCase& asked, bool in_place, const AbiVersions& abi, const Contract& contract,
                         AngleModel model, const std::function<CallResult(const RopeCase&, bool)>& call,
                         std::optional<RopeCase>* sent, bool* sent_in_place) {
  const bool ip = in_place || abi.in_place_only;  // (its in-place output is what an out-of-place call's would be)
  if (sent_in_place) *sent_in_place = ip;
  SendWays ways(asked, abi, contract, model, case_turn(asked));
  const RopeCase* made = nullptr;
  CallResult r = call_in_ways(ways, [&](const RopeCase& c) { return call(c, ip); }, 0, &made);
  if (sent) {
    sent->reset();
    if (made) *sent = *made;
  }
  return r;
}

Contract property_contract(const RopeCase& asked, const AbiVersions& abi, const Contract& contract) {
  return abi.tables_only && !asked.table ? table_call_contract(abi, asked.dtype, contract) : contract;
}

}  // namespace ropecheck::gate
