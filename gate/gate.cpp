#include "gate/gate.hpp"

#include <csignal>

#include <fstream>
#include <iostream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <random>
#include <sstream>

#include "gate/isolation.hpp"
#include "properties/diagnosis.hpp"

namespace ropecheck::gate {

namespace {

using Clock = std::chrono::steady_clock;
using Rng = std::mt19937_64;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// A finite value of moderate magnitude, exactly representable in d.
float random_value(Rng& rng, Dtype d) {
  std::uniform_real_distribution<double> mant(1.0, 2.0);
  std::uniform_int_distribution<int> ex(-6, 6);
  const double v = std::ldexp(mant(rng), ex(rng)) * ((rng() & 1) ? -1.0 : 1.0);
  Bytes b(4);
  store_f32(d, b.data(), 0, float(v));
  return load_f32(d, b.data(), 0);
}

void fill_random(RopeCase& c, Rng& rng) {
  c.input.assign(c.n_bytes(), 0);
  for (size_t k = 0; k < c.n_elements(); ++k) store_f32(c.dtype, c.input.data(), k, random_value(rng, c.dtype));
}

// Positions: 0, small, near powers of two, near max, in a shuffled order.
std::vector<int64_t> position_mix(Rng& rng, int64_t max_position, size_t n) {
  std::vector<int64_t> cand;
  const int top = max_position > 1 ? 63 - __builtin_clzll(uint64_t(max_position)) : 0;
  // Small positions keep every contract tight (a sign flip, a layout swap, an off-by-one position fail there
  // under the loosest one); the largest show angle drift.
  cand.push_back(0);
  for (int64_t p : {1, 2, 3, 7}) cand.push_back(std::min<int64_t>(p, max_position));
  cand.push_back(max_position);
  cand.push_back(std::max<int64_t>(0, max_position - 1));
  while (cand.size() < n) {
    const int k = top >= 1 ? int(rng() % uint64_t(top)) + 1 : 0;
    const int64_t p2 = int64_t(1) << k;
    const int64_t delta = int64_t(rng() % 3) - 1;
    cand.push_back(std::clamp<int64_t>(p2 + delta, 0, max_position));
    if (cand.size() < n) cand.push_back(int64_t(rng() % uint64_t(max_position + 1)));
  }
  cand.resize(n);
  std::shuffle(cand.begin(), cand.end(), rng);
  return cand;
}

std::vector<double> rope_table(Rng& rng, uint32_t rotary_dim, double base) {
  // A llama-3-style scaled table: low frequencies divided by a factor.
  std::vector<double> t(rotary_dim / 2);
  const double factor = double(2 + rng() % 7);
  for (uint32_t i = 0; i < t.size(); ++i) {
    const double th = std::pow(base, -2.0 * i / rotary_dim);
    t[i] = i >= t.size() / 2 ? th / factor : th;
  }
  return t;
}

const std::pair<uint32_t, uint32_t> kDims[] = {
    {2, 2},    {6, 6},    {20, 20},  {64, 64},  {72, 72},   {80, 80},   {96, 96},  {128, 128},
    {256, 256}, {6, 2},   {20, 8},   {64, 32},  {80, 64},   {128, 64},  {96, 40},  {256, 128},
};

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

void GateResult::add(CheckRow& r, Dtype d, const Judgement& j, std::map<Dtype, BiasSums>& bias) {
  r.add(j);
  bias[d].merge(j.bias);
  for (const auto& [b, st] : j.by_bucket) by_bucket[d][b].merge(st);
}

Criteria case_criteria(const Implementation& impl, const RopeCase& c, const Contract& contract,
                       const std::map<Dtype, double>& tolerance) {
  if (auto it = tolerance.find(c.dtype); it != tolerance.end()) return Criteria::flat_bound(it->second);
  return Criteria::of(impl.error_model, contract);
}

std::string describe_bounds(const Implementation& impl, const Contract& contract, const std::vector<Dtype>& dtypes,
                            int64_t max_position) {
  std::string o;
  for (Dtype d : dtypes) {
    RopeCase c;
    c.dtype = d;
    c.head_dim = c.rotary_dim = 128;
    c.positions = {1};
    const Criteria cr = Criteria::of(impl.error_model, contract);
    // Pair 0 (theta = 1) of a unit-norm pair at position 1 and at the largest position.
    const PairAllowance a1 = cr.allowance(c, 0, 1.0, 1.0);
    const PairAllowance am = cr.allowance(c, 0, 1.0, double(max_position));
    o += fmt::format("  {}: at angle 1 rad radial <= {:.4g} u, tangential <= {:.4g} u; at angle {} rad radial <= {:.4g} "
                     "u, tangential <= {:.4g} u\n",
                     to_string(d), a1.radial, a1.tangential, max_position, am.radial, am.tangential);
  }
  return o;
}

std::vector<RopeCase> systematic_cases(Dtype d, Layout l, int64_t max_position, uint64_t seed,
                                       std::vector<bool>* in_place) {
  Rng rng(seed * 0x9e3779b97f4a7c15ull + uint64_t(d) * 16 + uint64_t(l));
  std::vector<RopeCase> out;
  const double bases[] = {10000.0, 500000.0, 100.0, 1000000.0};
  const double scales[] = {1.0, 0.25, 1.0, 4.0, 1.0 / 32};
  size_t k = 0;
  for (const auto& [hd, rd] : kDims) {
    for (int ip = 0; ip < 2; ++ip, ++k) {
      RopeCase c;
      c.dtype = d;
      c.layout = l;
      c.head_dim = hd;
      c.rotary_dim = rd;
      c.n_heads = uint32_t(1 + k % 3);
      c.positions = position_mix(rng, max_position, hd >= 128 ? 6 : 8);
      c.base = bases[k % 4];
      c.position_scale = scales[(k / 2) % 5];
      if (k % 5 == 3) c.inv_freq = rope_table(rng, rd, c.base);
      fill_random(c, rng);
      out.push_back(std::move(c));
      if (in_place) in_place->push_back(ip == 1);
    }
  }
  return out;
}

std::vector<RopeCase> special_value_cases(Dtype d, Layout l, uint64_t seed, int64_t max_position) {
  Rng rng(seed * 31 + 7 + uint64_t(d) * 2 + uint64_t(l));
  const Format f = format_of(d);
  const float inf = std::numeric_limits<float>::infinity();
  const float specials[] = {0.0f,
                            -0.0f,
                            float(std::ldexp(1.0, f.emin - f.precision + 1)),   // smallest subnormal
                            -float(std::ldexp(1.0, f.emin - 1)),                // a subnormal
                            float(f.max_finite()),                              // huge
                            -float(f.max_finite() / 2),
                            std::numeric_limits<float>::quiet_NaN(),
                            inf,
                            -inf,
                            float(std::ldexp(1.0, f.emin))};                    // smallest normal
  std::vector<RopeCase> out;
  const std::pair<uint32_t, uint32_t> dims[] = {{8, 6}, {8, 8}, {20, 20}};
  for (const auto& [hd, rd] : dims) {
    RopeCase c;
    c.dtype = d;
    c.layout = l;
    c.head_dim = hd;
    c.rotary_dim = rd;
    c.n_heads = 2;
    for (int64_t p : {0, 3, 77777, 1, 1000}) c.positions.push_back(std::min(p, max_position));
    c.input.assign(c.n_bytes(), 0);
    for (size_t k = 0; k < c.n_elements(); ++k) {
      const float v = (rng() % 2) ? specials[rng() % std::size(specials)] : random_value(rng, d);
      store_f32(d, c.input.data(), k, v);
    }
    out.push_back(std::move(c));
  }
  return out;
}

RopeCase half_split_twin(const RopeCase& ci) {
  RopeCase ch = ci;
  ch.layout = Layout::half_split;
  const Dtype d = ci.dtype;
  const uint32_t np = ci.rotary_dim / 2;
  for (size_t t = 0; t < ci.n_tokens(); ++t)
    for (size_t h = 0; h < ci.n_heads; ++h) {
      const size_t b = head_offset(ci, t, h);
      for (uint32_t i = 0; i < np; ++i) {
        const auto [a0, a1] = pair_dims(Layout::interleaved, ci.rotary_dim, i);
        const auto [b0, b1] = pair_dims(Layout::half_split, ci.rotary_dim, i);
        store_bits(d, ch.input.data(), b + b0, load_bits(d, ci.input.data(), b + a0));
        store_bits(d, ch.input.data(), b + b1, load_bits(d, ci.input.data(), b + a1));
      }
    }
  return ch;
}

std::string layouts_violation(const RopeCase& ci, const Bytes& out_i, const Criteria& cri, const RopeCase& ch,
                              const Bytes& out_h, const Criteria& crh) {
  const Dtype d = ci.dtype;
  const Format f = format_of(d);
  const double bi = cri.case_bound(ci), bh = crh.case_bound(ch);
  for (size_t t = 0; t < ci.n_tokens(); ++t)
    for (size_t h = 0; h < ci.n_heads; ++h) {
      const size_t b = head_offset(ci, t, h);
      for (uint32_t i = 0; i < ci.rotary_dim / 2; ++i) {
        const auto [a0, a1] = pair_dims(Layout::interleaved, ci.rotary_dim, i);
        const auto [b0, b1] = pair_dims(Layout::half_split, ci.rotary_dim, i);
        const double x0 = load_f32(d, ci.input.data(), b + a0), x1 = load_f32(d, ci.input.data(), b + a1);
        const double unit = f.unit_roundoff() * std::max(std::hypot(x0, x1), f.min_normal());
        const double dd = std::hypot(load_f32(d, out_i.data(), b + a0) - load_f32(d, out_h.data(), b + b0),
                                     load_f32(d, out_i.data(), b + a1) - load_f32(d, out_h.data(), b + b1));
        if (!(dd <= (bi + bh) * unit))
          return fmt::format("property: interleaved and half-split outputs of token {} head {} pair {} differ by "
                             "{:.4g} u (allowed {:.4g} u)",
                             t, h, i, dd / unit, bi + bh);
      }
    }
  return "";
}

RopeCase position_zero_case(Dtype d, Layout l, uint64_t seed, int64_t max_position) {
  RopeCase c;
  c.dtype = d;
  c.layout = l;
  c.head_dim = 64;
  c.rotary_dim = 48;
  c.n_heads = 2;
  c.positions.assign(4, 0);
  c.base = 500000;
  const auto sv = special_value_cases(d, l, seed + 1, max_position);  // its value mix
  c.input.assign(c.n_bytes(), 0);
  for (size_t k = 0; k < c.n_elements(); ++k)
    store_bits(d, c.input.data(), k, load_bits(d, sv[2].input.data(), k % sv[2].n_elements()));
  return c;
}

std::vector<RopeCase> layouts_cases(Dtype d, int64_t max_position, std::mt19937_64& rng) {
  std::vector<RopeCase> out;
  const std::pair<uint32_t, uint32_t> dims[] = {{64, 64}, {20, 12}, {128, 96}};
  for (const auto& [hd, rd] : dims) {
    RopeCase ci;
    ci.dtype = d;
    ci.layout = Layout::interleaved;
    ci.head_dim = hd;
    ci.rotary_dim = rd;
    ci.n_heads = 2;
    ci.positions = position_mix(rng, max_position, 6);
    ci.base = 10000;
    fill_random(ci, rng);
    out.push_back(std::move(ci));
  }
  return out;
}

RopeCase random_case(Dtype d, Layout l, int64_t max_position, std::mt19937_64& rng) {
  RopeCase c;
  c.dtype = d;
  c.layout = l;
  c.head_dim = uint32_t(2 + rng() % 255);
  c.rotary_dim = 2 * uint32_t(1 + rng() % (c.head_dim / 2));
  if (rng() % 2) c.rotary_dim = c.head_dim - c.head_dim % 2;
  c.n_heads = uint32_t(1 + rng() % 4);
  const size_t nt = 1 + rng() % 6;
  for (size_t t = 0; t < nt; ++t) {
    // log-uniform positions in [0, max]
    const double lg = std::uniform_real_distribution<double>(0, std::log2(double(max_position) + 1))(rng);
    c.positions.push_back(std::min<int64_t>(max_position, int64_t(std::exp2(lg)) - 1));
  }
  // Half the time a base models ship (kernels with a fixed base would otherwise accept almost no random
  // case: llama2.c's, docs/real-kernels.md), else log-uniform in [2, 2e6].
  const double common_bases[] = {10000.0, 500000.0, 1000000.0, 100000.0};
  c.base = rng() % 2 ? common_bases[rng() % std::size(common_bases)]
                     : std::exp(std::uniform_real_distribution<double>(std::log(2.0), std::log(2e6))(rng));
  if (rng() % 4 == 0) c.position_scale = std::ldexp(1.0, int(rng() % 7) - 4);
  if (rng() % 5 == 0) c.inv_freq = rope_table(rng, c.rotary_dim, c.base);
  fill_random(c, rng);
  return c;
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
  if (name == "property: layouts") return "interleaved(x) = P^-1 half-split(P x) within the sum of both bounds, per pair";
  if (name == "property: relative")
    return "<R(m)q, R(n)k> = <R(m+s)q, R(n+s)k> within the bound's propagation (exact angle model)";
  if (name == "random") return "random cases: dims, heads, tokens, positions, base, scale, tables, in place";
  if (name == "coverage") return "the kernel accepts at least one case of a dtype x layout asked for";
  return "cases";
}

RopeCase relative_case(Dtype d, Layout l, int64_t max_position, std::mt19937_64& rng) {
  RopeCase c;
  c.dtype = d;
  c.layout = l;
  c.head_dim = 64;
  c.rotary_dim = 64;
  c.n_heads = 1;
  c.base = 10000;
  const int64_t M = max_position;
  // (m, n, s) triples within [0, M]; tokens (m, n, m+s, n+s) per triple, q and k alternating.
  const int64_t trip[][3] = {{5, 2, 1000 % (M + 1)}, {M / 2 + 3, M / 2 - 5 > 0 ? M / 2 - 5 : 0, M / 4},
                             {0, M / 2, M / 2}, {17, 4, M - 17}};
  for (const auto& t : trip) {
    const int64_t m = std::clamp<int64_t>(t[0], 0, M), n = std::clamp<int64_t>(t[1], 0, M);
    const int64_t sh = std::clamp<int64_t>(t[2], 0, M - std::max(m, n));
    c.positions.insert(c.positions.end(), {m, n, m + sh, n + sh});
  }
  RopeCase qk = c;
  qk.positions.resize(2);
  fill_random(qk, rng);
  c.input.assign(c.n_bytes(), 0);
  const size_t hb = c.head_dim * dtype_size(d);
  for (size_t t = 0; t < c.n_tokens(); ++t) std::memcpy(c.input.data() + t * hb, qk.input.data() + (t % 2) * hb, hb);
  return c;
}

std::string relative_violation(const RopeCase& c, const Bytes& out, const Criteria& cr) {
  if (c.n_heads != 1 || c.n_tokens() % 4 != 0 || c.n_tokens() == 0) return "";
  const Dtype d = c.dtype;
  const Format f = format_of(d);
  const double B = cr.case_bound(c), u = f.unit_roundoff();
  auto norms = [&](size_t t, double& plain, double& eff) {
    plain = eff = 0;
    for (uint32_t i = 0; i < c.rotary_dim / 2; ++i) {
      const auto [a0, a1] = pair_dims(c.layout, c.rotary_dim, i);
      const double x0 = load_f32(d, c.input.data(), t * c.head_dim + a0),
                   x1 = load_f32(d, c.input.data(), t * c.head_dim + a1);
      plain += x0 * x0 + x1 * x1;
      eff += std::max(x0 * x0 + x1 * x1, f.min_normal() * f.min_normal());
    }
    plain = std::sqrt(plain);
    eff = std::sqrt(eff);
  };
  auto dot = [&](size_t a, size_t b) {
    double s = 0;
    for (uint32_t e = 0; e < c.rotary_dim; ++e)
      s += double(load_f32(d, out.data(), a * c.head_dim + e)) * double(load_f32(d, out.data(), b * c.head_dim + e));
    return s;
  };
  for (size_t g = 0; g < c.n_tokens() / 4; ++g) {
    double q, qe, k, ke;
    norms(4 * g, q, qe);
    norms(4 * g + 1, k, ke);
    const double one = B * u * (qe * k + q * ke) + B * B * u * u * qe * ke;
    const double tol = 2 * one + 0x1p-45 * q * k;
    const double d1 = dot(4 * g, 4 * g + 1), d2 = dot(4 * g + 2, 4 * g + 3);
    if (!(std::fabs(d1 - d2) <= tol))
      return fmt::format("property: <R({})q, R({})k> = {:.9g} but <R({})q, R({})k> = {:.9g}; |difference| {:.4g} > "
                         "allowed {:.4g} (|q| {:.4g}, |k| {:.4g})",
                         c.positions[4 * g], c.positions[4 * g + 1], d1, c.positions[4 * g + 2],
                         c.positions[4 * g + 3], d2, std::fabs(d1 - d2), tol, q, k);
  }
  return "";
}

CaseVerdict judge_call(const RopeCase& c, bool in_place, AngleModel model, const Criteria& cr, const CallResult& r,
                       const ReferenceOutput* ref_in) {
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
                                        : r.status == CallStatus::crashed                       ? "crash"
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
  v.worst_error = v.judgement.stats.max;
  if (!v.judgement.ok()) failed(v.judgement.report(2), nullptr);
  if (!v.message.empty() && v.message.back() == '\n') v.message.pop_back();
  return v;
}

std::string diagnose_call(const RopeCase& c, AngleModel model, const Criteria& cr, const CaseVerdict& v,
                          const CallResult& r) {
  if (!v.fault.empty()) {
    if (v.fault == "crash" || v.fault == "hang" || v.fault == "error code" || v.fault == "forbidden system call")
      return v.fault + ": the kernel " + describe(r);
    return v.fault;
  }
  if (!v.judged || v.judgement.ok()) return "";
  ReferenceOptions ro;
  ro.angle_model = model;
  const ReferenceOutput ref = reference_rope(c, ro);
  return diagnose(c, r.out.data(), ref, cr, model).text();
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
  r.note = fmt::format("radial bias {:+.4f} u over {} pairs in {} clusters (SE {:.4f} u), allowed {:.4f} u ({}; "
                       "as measured {:+.4f} u, less an f16 / bf16 cache's share {:+.4f} / {:+.4f} u)",
                       s.bias, b.n, b.clusters, s.se, s.allowed, names[best], st[0].bias, st[1].bias, st[2].bias);
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
    r.smallest_message = fmt::format(
        "radial bias: the mean radial error is {:+.4f} u over {} pairs ({} clusters), beyond {:.4f} u (5 SE + 1/8 u + "
        "the contract's systematic share); outputs are systematically {} than the exact rotation",
        s.bias, b.n, b.clusters, s.allowed, s.bias < 0 ? "shorter" : "longer");
  }
  return r;
}

namespace {

HostOptions host_options(const GateOptions& opt) {
  HostOptions h;
  h.load_timeout_seconds = std::max(2.0, opt.call_timeout_seconds);
  // CPU time of one host process: generous (threads count), but a kernel that spins after returning ends.
  h.cpu_seconds = 4 * opt.budget_seconds + 60;
  return h;
}

class Gate {
 public:
  Gate(const Implementation& impl, const GateOptions& opt)
      : impl_(impl),
        opt_(opt),
        t0_(Clock::now()),
        host_(KernelSource{impl.library, impl.fn}, host_options(opt)) {}

  GateResult run();

 private:
  struct Outcome {
    CaseVerdict v;
    CallResult call;
  };

  CheckRow& row(const std::string& name, const std::string& what) {
    for (auto& r : res_.rows)
      if (r.name == name) return r;
    res_.rows.push_back({});
    res_.rows.back().name = name;
    res_.rows.back().what = what;
    return res_.rows.back();
  }

  void progress(const std::string& s) {
    if (!opt_.quiet) std::fprintf(stderr, "[gate %6.1fs] %s\n", seconds_since(t0_), s.c_str());
  }

  // The budget caps the whole run: once reached, no further kernel call starts (a call already running
  // ends within its --call-timeout).
  bool over_budget() {
    if (!budget_reached_ && seconds_since(t0_) >= opt_.budget_seconds) {
      budget_reached_ = true;
      progress(fmt::format("the budget ({:g} s) was reached: the remaining calls are not made", opt_.budget_seconds));
    }
    return budget_reached_;
  }

  // One call in the kernel host. A host that cannot be started again after a crash makes the call a crash.
  CallResult call(const RopeCase& c, bool in_place) {
    try {
      return host_.call(c, in_place, opt_.call_timeout_seconds);
    } catch (const LoadError& e) {
      CallResult r;
      r.status = CallStatus::crashed;
      r.host_error = e.what();
      return r;
    }
  }

  // The case alone in a fresh host process (the row's own host keeps its state).
  CallResult call_isolated_like(const RopeCase& c, bool in_place = false) {
    try {
      KernelHost fresh(KernelSource{impl_.library, impl_.fn}, host_options(opt_));
      return fresh.call(c, in_place, opt_.call_timeout_seconds);
    } catch (const LoadError& e) {
      CallResult r;
      r.status = CallStatus::crashed;
      r.host_error = e.what();
      return r;
    }
  }

  Criteria criteria(const RopeCase& c) const { return case_criteria(impl_, c, opt_.contract, opt_.tolerance); }
  Criteria criteria_for_dtype(Dtype d) const {
    RopeCase c;
    c.dtype = d;
    return criteria(c);
  }

  CaseRecord record(const CheckRow& r, const RopeCase& c, bool in_place, const Criteria& cr,
                    const std::string& msg) const {
    CaseRecord rec;
    rec.c = c;
    rec.in_place = in_place;
    rec.angle_model = opt_.angle_model;
    rec.bound = cr.case_bound(c);
    rec.check = r.name;
    rec.failure = msg;
    rec.contract = opt_.contract;
    rec.tolerance = cr.flat;
    return rec;
  }

  // Call and judge one case, attributing it to a row. Returns the outcome.
  // in_bias: the call's pairs join the radial bias check (docs/gate.md). The repeat row's 300 copies of one
  // case are not independent clusters, and the large row's prefill would outweigh every other row's pairs:
  // both stay out of it (their pairs are in the error decomposition all the same).
  Outcome run_case(CheckRow& r, const RopeCase& c, bool in_place, bool in_bias = true) {
    Outcome o;
    if (aborted_) return o;
    if (over_budget()) {
      ++not_run_[r.name];
      return o;
    }
    const Criteria cr = criteria(c);
    o.call = call(c, in_place);
    ++res_.calls;
    o.v = judge_call(c, in_place, opt_.angle_model, cr, o.call);
    if (!o.v.accepted) {
      ++r.declined;
      return o;
    }
    ++res_.accepted;
    ++r.cases;
    r.ran = true;
    if (o.v.judged) {
      std::map<Dtype, BiasSums> unused;
      res_.add(r, c.dtype, o.v.judgement, in_bias ? bias_ : unused);
    }
    if (!o.v.pass) record_failure(r, record(r, c, in_place, cr, o.v.message), o.v.fault);
    if (o.call.status == CallStatus::hung && ++hangs_ >= 2) {
      aborted_ = true;
      progress("the kernel hung twice: the remaining cases are not run");
    }
    return o;
  }

  void record_failure(CheckRow& r, CaseRecord rec, const std::string& fault = "") {
    ++r.failed;
    r.failed_check = true;
    ++r.faults[fault.empty() ? "accuracy" : fault];
    // A fault (crash, hang, memory) is shown whatever else the row found: its case is the row's smallest
    // until a smaller case with a fault replaces it.
    const bool has_fault = !fault.empty();
    const bool smallest_has_fault = r.smallest && !r.smallest_fault.empty();
    if (!r.smallest || (has_fault && !smallest_has_fault) ||
        (has_fault == smallest_has_fault && rec.c.n_elements() < r.smallest->c.n_elements())) {
      r.smallest = rec;
      r.smallest_message = rec.failure;
      r.smallest_fault = fault;
    }
    if (r.failing.size() < 3) r.failing.push_back(std::move(rec));
  }

  // Try to shrink a row's smallest failing case to one token, then one head.
  void shrink(CheckRow& r);
  // Name what the kernel most likely computes on the row's smallest failing case.
  void diagnose_row(CheckRow& r);

  void run_matrix();
  void run_specials();
  void run_properties();
  void run_sequences();
  void run_repeat();
  void run_large();
  void run_random();
  void finish_sandbox();
  void finish_bias();
  void save_files();

  const Implementation& impl_;
  const GateOptions& opt_;
  Clock::time_point t0_;
  GateResult res_;
  std::map<Dtype, BiasSums> bias_;
  bool aborted_ = false;
  bool budget_reached_ = false;
  std::map<std::string, uint64_t> not_run_;  // per row: calls the budget cut
  std::vector<std::string> budget_cuts_;     // what the budget cut besides calls (random phase, shrinking, ...)
  int hangs_ = 0;
  std::vector<std::pair<Dtype, Layout>> accepted_combos_;
  KernelHost host_;
};


void Gate::shrink(CheckRow& r) {
  if (!r.smallest || aborted_ || !r.smallest->property.empty()) return;  // a property is not one call
  CaseRecord best = *r.smallest;
  if (r.smallest_fault == "hang") return;  // a hang costs a timeout per try
  bool cut = false;
  auto try_case = [&](const RopeCase& c) -> bool {
    if (over_budget()) {
      cut = true;
      return false;
    }
    const Criteria cr = criteria(c);
    const CallResult res = call(c, best.in_place);
    const CaseVerdict v = judge_call(c, best.in_place, opt_.angle_model, cr, res);
    // Keep the kind of failure: a crash shrinks to a smaller crash, not to an accuracy failure.
    if (v.accepted && !v.pass && v.fault == r.smallest_fault) {
      best = record(r, c, best.in_place, cr, v.message);
      return true;
    }
    return false;
  };
  auto slice = [](const RopeCase& c, size_t t0, size_t nt, size_t h0, size_t nh) {
    RopeCase s = c;
    s.positions.assign(c.positions.begin() + long(t0), c.positions.begin() + long(t0 + nt));
    s.n_heads = uint32_t(nh);
    s.input.assign(s.n_bytes(), 0);
    const size_t es = dtype_size(c.dtype);
    for (size_t t = 0; t < nt; ++t)
      for (size_t h = 0; h < nh; ++h)
        std::memcpy(s.input.data() + ((t * nh + h) * c.head_dim) * es,
                    c.input.data() + (((t0 + t) * c.n_heads + h0 + h) * c.head_dim) * es, c.head_dim * es);
    return s;
  };
  // Many tokens (the large row): halve while a half still fails, then at most 16 single tokens, spread.
  while (best.c.n_tokens() > 8) {
    const RopeCase c = best.c;
    const size_t half = c.n_tokens() / 2;
    if (!try_case(slice(c, 0, half, 0, c.n_heads)) && !try_case(slice(c, half, c.n_tokens() - half, 0, c.n_heads)))
      break;
  }
  if (best.c.n_tokens() > 1) {
    const RopeCase c = best.c;
    const size_t n = c.n_tokens(), tries = std::min<size_t>(n, 16);
    for (size_t k = 0; k < tries; ++k)
      if (try_case(slice(c, k * n / tries, 1, 0, c.n_heads))) break;
  }
  if (best.c.n_heads > 1) {
    const RopeCase c = best.c;
    for (size_t h = 0; h < c.n_heads; ++h)
      if (try_case(slice(c, 0, c.n_tokens(), h, 1))) break;
  }
  r.smallest = best;
  r.smallest_message = best.failure;
  if (cut) budget_cuts_.push_back("shrinking the smallest failing case of '" + r.name + "' (not fully shrunk)");
}

void Gate::diagnose_row(CheckRow& r) {
  if (!r.smallest) return;
  if (!r.diagnosis.empty()) {  // the row diagnosed its own failure (sequence, repeat)
    r.smallest->diagnosis = r.diagnosis;
    for (CaseRecord& f : r.failing) f.diagnosis = r.diagnosis;
    return;
  }
  if (aborted_ && r.smallest_fault.empty()) return;  // no more calls after two hangs
  // The most evidence: the largest failing case the row kept (before shrinking), else the smallest.
  // (At most 1 << 16 elements: the diagnosis measures every pair against each candidate explanation.)
  const CaseRecord* richest = &*r.smallest;
  for (const CaseRecord& f : r.failing)
    if (f.property.empty() && f.c.n_elements() > richest->c.n_elements() && f.c.n_elements() <= (size_t(1) << 16))
      richest = &f;
  const CaseRecord& rec = *richest;
  if (!rec.property.empty()) {
    r.diagnosis = "property " + rec.property + " violated (each call alone is within its allowance)";
  } else if (r.smallest_fault == "hang") {
    r.diagnosis = "hang: the kernel did not return within the timeout";
  } else if (!r.smallest_fault.empty()) {
    r.diagnosis = r.smallest_fault + ": " + r.smallest->failure.substr(0, r.smallest->failure.find('\n'));
  } else if (over_budget()) {
    r.diagnosis = "not diagnosed: the budget was reached";
    budget_cuts_.push_back("the diagnosis of '" + r.name + "'");
  } else {
    // Rerun the smallest case once to look at its output (the rows keep no outputs).
    const Criteria cr = criteria(rec.c);
    const CallResult res = call(rec.c, rec.in_place);
    const CaseVerdict v = judge_call(rec.c, rec.in_place, opt_.angle_model, cr, res);
    // The same case in a fresh process: a kernel that fails only after other calls keeps state across them.
    const CallResult alone = call_isolated_like(rec.c, rec.in_place);
    const CaseVerdict va = judge_call(rec.c, rec.in_place, opt_.angle_model, cr, alone);
    const bool fails_alone = va.accepted && !va.pass;
    if (v.accepted && !v.pass && !fails_alone && va.accepted)
      r.diagnosis = "state across calls: the case fails in the long-running host process and passes in a fresh one "
                    "(a call counter, or a cache kept across calls)";
    else if (v.accepted && !v.pass)
      r.diagnosis = diagnose_call(rec.c, opt_.angle_model, cr, v, res);
    else if (fails_alone)
      r.diagnosis = diagnose_call(rec.c, opt_.angle_model, cr, va, alone);
    else
      r.diagnosis = "not reproduced on a rerun, alone or after other calls: the output depends on the calls before "
                    "it (a stale cache or counter) or is not deterministic";
    if (rec.in_place && v.accepted && !v.pass) {
      // In place only? The same call out of place.
      const CallResult oop = call(rec.c, false);
      const CaseVerdict vo = judge_call(rec.c, false, opt_.angle_model, cr, oop);
      if (vo.accepted && vo.pass)
        r.diagnosis = "in-place aliasing: the same case passes out of place (the kernel reads what it already "
                      "wrote when out == in)";
    }
  }
  r.smallest->diagnosis = r.diagnosis;
  for (CaseRecord& f : r.failing) f.diagnosis = r.diagnosis;
}

void Gate::run_matrix() {
  for (Dtype d : opt_.dtypes)
    for (Layout l : opt_.layouts) {
      if (!impl_.supports(d) || !impl_.supports(l)) continue;
      const std::string name = fmt::format("matrix {} {}", to_string(d), to_string(l));
      CheckRow& r = row(name, row_what(name, opt_.contract));
      std::vector<bool> ip;
      const auto cases = systematic_cases(d, l, opt_.max_position, opt_.seed, &ip);
      for (size_t k = 0; k < cases.size(); ++k) run_case(r, cases[k], ip[k]);
      if (r.ran) accepted_combos_.push_back({d, l});
      else if (budget_reached_ && r.declined == 0) r.note = "not run: the budget was reached";
      else if (!aborted_) r.note = "every case declined (RC_UNSUPPORTED)";
    }
}

void Gate::run_specials() {
  CheckRow& r = row("special values", row_what("special values", opt_.contract));
  for (const auto& [d, l] : accepted_combos_) {
    const auto cases = special_value_cases(d, l, opt_.seed, opt_.max_position);
    for (size_t k = 0; k < cases.size(); ++k) run_case(r, cases[k], k % 2 == 1);
  }
  if (!r.ran && !aborted_) r.note = budget_reached_ ? "not run: the budget was reached" : "no accepted dtype/layout";
}

void Gate::run_properties() {
  Rng rng(opt_.seed ^ 0x5eedf00dull);
  // Position 0 is the identity: the judge holds every angle-0 pair to the contract's identity clause.
  {
    CheckRow& r = row("property: position 0", row_what("property: position 0", opt_.contract));
    for (const auto& [d, l] : accepted_combos_) {
      for (int ip = 0; ip < 2; ++ip) {
        const RopeCase c = position_zero_case(d, l, opt_.seed, opt_.max_position);
        run_case(r, c, ip == 1);
      }
    }
    if (!r.ran && !aborted_) r.note = budget_reached_ ? "not run: the budget was reached" : "no accepted dtype/layout";
  }
  // Layout equivalence: interleaved(x) and half-split(P x) agree within both bounds.
  {
    CheckRow& r = row("property: layouts", row_what("property: layouts", opt_.contract));
    Rng lrng(opt_.seed ^ 0x1a7005ull);
    for (Dtype d : opt_.dtypes) {
      const bool both = std::count(accepted_combos_.begin(), accepted_combos_.end(), std::pair{d, Layout::interleaved}) &&
                        std::count(accepted_combos_.begin(), accepted_combos_.end(), std::pair{d, Layout::half_split});
      if (!both) continue;
      for (const RopeCase& ci : layouts_cases(d, opt_.max_position, lrng)) {
        const RopeCase ch = half_split_twin(ci);
        Outcome oi = run_case(r, ci, false);
        Outcome oh = run_case(r, ch, false);
        if (!(oi.v.accepted && oh.v.accepted && oi.v.pass && oh.v.pass)) continue;
        const std::string why =
            layouts_violation(ci, oi.call.out, criteria(ci), ch, oh.call.out, criteria(ch));
        if (!why.empty()) {
          CaseRecord rec = record(r, ci, false, criteria(ci), why);
          rec.property = "layouts";
          record_failure(r, std::move(rec));
        }
      }
    }
    if (!r.ran && !aborted_)
      r.note = budget_reached_ ? "not run: the budget was reached" : "no dtype with both layouts accepted";
  }
  // Relative position: <R_m q, R_n k> = <R_{m+s} q, R_{n+s} k>.
  {
    CheckRow& r = row("property: relative", row_what("property: relative", opt_.contract));
    if (opt_.angle_model != AngleModel::exact) {
      r.note = "skipped: the fp32 angle model's angles are not shift-invariant";
    } else {
      for (const auto& combo : accepted_combos_) {
        const RopeCase c = relative_case(combo.first, combo.second, opt_.max_position, rng);
        Outcome o = run_case(r, c, false);
        if (!(o.v.accepted && o.v.pass)) continue;
        const std::string why = relative_violation(c, o.call.out, criteria(c));
        if (!why.empty()) {
          CaseRecord rec = record(r, c, false, criteria(c), why);
          rec.property = "relative";
          record_failure(r, std::move(rec));
        }
      }
      if (!r.ran && !aborted_) r.note = budget_reached_ ? "not run: the budget was reached" : "no accepted dtype/layout";
    }
  }
}

// Calls in one process with one parameter changing between them, each judged: a cache keyed on some of the
// parameters (base but not rotary_dim, ...) serves a stale table after a change.
void Gate::run_sequences() {
  CheckRow& r = row("sequence",
                    "calls in one process, one parameter changing between calls (base, rotary_dim, head_dim, "
                    "scale, table, dtype, layout) and back: stale caches");
  if (accepted_combos_.empty()) return;
  Rng rng(opt_.seed ^ 0x5e9e0cull);
  const auto [d0, l0] = accepted_combos_[0];
  RopeCase base;
  base.dtype = d0;
  base.layout = l0;
  base.head_dim = 64;
  base.rotary_dim = 64;
  base.n_heads = 2;
  base.base = 10000;
  std::vector<RopeCase> variants;
  auto variant = [&](auto change) {
    RopeCase v = base;
    change(v);
    variants.push_back(v);
  };
  variant([](RopeCase& v) { v.base = 500000; });
  variant([](RopeCase& v) { v.rotary_dim = 32; });
  variant([](RopeCase& v) { v.head_dim = v.rotary_dim = 128; });
  variant([](RopeCase& v) { v.head_dim = 96; });
  variant([](RopeCase& v) { v.position_scale = 0.25; });
  variant([&](RopeCase& v) { v.inv_freq = rope_table(rng, v.rotary_dim, v.base); });
  for (const auto& [d, l] : accepted_combos_)
    if (d != d0 || l != l0) variant([&, d = d, l = l](RopeCase& v) {
      v.dtype = d;
      v.layout = l;
    });
  // base, v1, base, v2, ..., base, vn, then vn .. v1 back to back.
  std::vector<const RopeCase*> order;
  for (const RopeCase& v : variants) {
    order.push_back(&base);
    order.push_back(&v);
  }
  for (auto it = variants.rbegin(); it != variants.rend(); ++it) order.push_back(&*it);
  order.push_back(&base);
  const RopeCase* prev = nullptr;
  for (const RopeCase* shape : order) {
    RopeCase c = *shape;
    c.positions = position_mix(rng, opt_.max_position, 4);
    fill_random(c, rng);
    const uint64_t failed_before = r.failed;
    const Outcome o = run_case(r, c, false);
    if (r.failed > failed_before && prev && o.v.fault.empty() && r.diagnosis.empty() && !over_budget()) {
      // Does it fail alone? A case that passes in a fresh process failed because of the calls before it.
      const CallResult alone = call_isolated_like(c);
      const CaseVerdict va = judge_call(c, false, opt_.angle_model, criteria(c), alone);
      if (va.accepted && va.pass)
        r.diagnosis = fmt::format("stale state across calls: {} fails right after {} in the same process and passes "
                                  "in a fresh one (a cache keyed on some of the parameters?)",
                                  c.summary(), prev->summary());
    }
    prev = shape;
  }
  if (!r.ran && !aborted_) r.note = budget_reached_ ? "not run: the budget was reached" : "no accepted dtype/layout";
}

// The same case many times in one process: every output judged and bit-identical to the first (a call
// counter, a cache filled on the first call, uninitialised memory).
void Gate::run_repeat() {
  constexpr int kRepeats = 300;
  CheckRow& r = row("repeat", fmt::format("the same case {} times in one process: every output within the contract "
                                          "and bit-identical to the first",
                                          kRepeats));
  if (accepted_combos_.empty()) return;
  Rng rng(opt_.seed ^ 0x3e9ea7ull);
  RopeCase c;
  std::tie(c.dtype, c.layout) = accepted_combos_[0];
  c.head_dim = 80;
  c.rotary_dim = 64;
  c.n_heads = 2;
  c.base = 10000;
  c.positions = position_mix(rng, opt_.max_position, 3);
  fill_random(c, rng);
  const Criteria cr = criteria(c);
  ReferenceOptions ro;
  ro.angle_model = opt_.angle_model;
  const ReferenceOutput ref = reference_rope(c, ro);
  Bytes first;
  uint64_t start = 0;
  for (int k = 0; k < kRepeats && !aborted_; ++k) {
    if (over_budget()) {
      ++not_run_[r.name];
      break;
    }
    const CallResult res = call(c, false);
    ++res_.calls;
    const CaseVerdict v = judge_call(c, false, opt_.angle_model, cr, res, &ref);
    if (!v.accepted) {
      ++r.declined;
      continue;
    }
    ++res_.accepted;
    ++r.cases;
    r.ran = true;
    if (v.judged) {
      std::map<Dtype, BiasSums> unused;  // not independent clusters: out of the bias check (run_case)
      res_.add(r, c.dtype, v.judgement, unused);
    }
    std::string msg = v.message;
    if (v.pass && res.status == CallStatus::ok) {
      if (first.empty() || res.host_start != start) {
        first = res.out;  // a new process (after a crash) starts a new comparison
        start = res.host_start;
      } else if (res.out != first) {
        size_t e = 0;
        while (e < c.n_elements() && load_bits(c.dtype, res.out.data(), e) == load_bits(c.dtype, first.data(), e)) ++e;
        msg = fmt::format("repeat: call {} of the same case in one process gave a different output than the first "
                          "(element {}: {} then {}); a kernel's output must not depend on the calls before it",
                          k + 1, e, describe_element(c.dtype, load_bits(c.dtype, first.data(), e)),
                          describe_element(c.dtype, load_bits(c.dtype, res.out.data(), e)));
      }
    }
    if (!msg.empty()) {
      if (r.failed == 0 && v.fault.empty() && k > 0)
        r.diagnosis = fmt::format("state across calls: call {} of the same case {}", k + 1,
                                  v.pass ? "differs from the first" : "fails, the first ones passed");
      record_failure(r, record(r, c, false, cr, msg), v.fault);
      if (r.failed >= 3) break;  // enough evidence; keep the budget for the rest
    }
  }
}

// Shapes of real prefill and MLA models, one per dtype: thousands of tokens x heads, head_dim up to 576,
// so tiled or threaded paths run.
void Gate::run_large() {
  CheckRow& r = row("large", "prefill-sized cases: 128 tokens x 16 heads (head_dim 128), 128 tokens x 16 heads "
                             "(head_dim 576, rotary 64 as in MLA models), 32 tokens x 8 heads (head_dim 576, all "
                             "rotated)");
  Rng rng(opt_.seed ^ 0x1a7e5ull);
  struct Shape {
    uint32_t tokens, heads, head_dim, rotary_dim;
  };
  // Many heads per token keep the exact reference's cost (one cos/sin per distinct position and pair) low.
  const Shape shapes[] = {{128, 16, 128, 128}, {128, 16, 576, 64}, {32, 8, 576, 576}};
  // Each shape once, the accepted dtype x layout combinations taking turns (with all six accepted: f32
  // interleaved, f16 half-split, bf16 interleaved).
  for (size_t k = 0; k < std::size(shapes) && !accepted_combos_.empty(); ++k) {
    const auto [d, l] = accepted_combos_[(2 * k + k % 2) % accepted_combos_.size()];
    {
      const Shape& sh = shapes[k];
      RopeCase c;
      c.dtype = d;
      c.layout = l;
      c.head_dim = sh.head_dim;
      c.rotary_dim = sh.rotary_dim;
      c.n_heads = sh.heads;
      c.base = k % 2 ? 10000 : 1000000;
      // A prefill: consecutive positions from a random start.
      const int64_t span = int64_t(sh.tokens);
      const int64_t start = opt_.max_position > span ? int64_t(rng() % uint64_t(opt_.max_position - span + 1)) : 0;
      for (int64_t t = 0; t < span; ++t) c.positions.push_back(std::min(opt_.max_position, start + t));
      fill_random(c, rng);
      run_case(r, c, k % 2 == 1, /*in_bias=*/false);
    }
  }
  if (!r.ran && !aborted_) r.note = budget_reached_ ? "not run: the budget was reached" : "no accepted dtype/layout";
}

// The host's FP environment after loading, its isolation, and what the kernel printed.
void Gate::finish_sandbox() {
  CheckRow& r = row("fp environment", "loading the library and each call leave the process's FP environment "
                                      "(rounding, flush-to-zero, exception masks) as they found it");
  r.ran = true;
  r.cases = 1;
  if (!host_.load_fp_change().empty()) {
    r.failed_check = true;
    r.failed = 1;
    ++r.faults["fp environment"];
    r.diagnosis = "fp environment: " + host_.load_fp_change() + " (crtfastmath.o from -ffast-math at link time?)";
    r.smallest_message = host_.load_fp_change() +
                         "; every program that loads the library would compute differently (the calls here ran in "
                         "the environment the host had before loading)";
  }
  uint64_t changed = 0;
  for (const auto& row : res_.rows) {
    auto it = row.faults.find("fp environment");
    if (it != row.faults.end() && &row != &r) changed += it->second;
  }
  if (changed) r.note = fmt::format("{} call(s) changed the FP environment (see their rows)", changed);
  res_.sandbox = host_.sandbox_summary();
  res_.kernel_output = host_.captured_output();
}

void Gate::run_random() {
  CheckRow& r = row("random", fmt::format("{} {}", opt_.random_cases, row_what("random", opt_.contract)));
  if (accepted_combos_.empty()) {
    r.note = "no accepted dtype/layout";
    return;
  }
  // The cases follow from the seed alone; the budget only caps how many of them run (the random phase
  // stops at 85 % of it, leaving the rest for shrinking and diagnosis).
  Rng rng(opt_.seed ^ 0xabcdef12345ull);
  const double stop_at = opt_.budget_seconds * 0.85;
  uint64_t n = 0;
  for (uint64_t k = 0; k < opt_.random_cases && !aborted_ && !budget_reached_; ++k) {
    if (seconds_since(t0_) >= stop_at) {
      progress(fmt::format("85 % of the budget ({:g} s) used: the random phase stops", opt_.budget_seconds));
      break;
    }
    const auto [d, l] = accepted_combos_[rng() % accepted_combos_.size()];
    const RopeCase c = random_case(d, l, opt_.max_position, rng);
    run_case(r, c, rng() % 2 == 1);
    ++n;
  }
  if (n < opt_.random_cases && !aborted_) {
    const std::string what = fmt::format("{} of {} random cases ran", n, opt_.random_cases);
    r.note = what + " (the random phase stops at 85 % of the budget)";
    budget_cuts_.push_back("random: " + what);
  }
}

void Gate::finish_bias() {
  for (Dtype d : opt_.dtypes) {
    auto it = bias_.find(d);
    if (it == bias_.end() || it->second.n == 0) continue;
    res_.rows.push_back(bias_row(d, it->second, criteria_for_dtype(d).model));
  }
}

void Gate::save_files() {
  if (opt_.report_dir.empty()) return;
  // The kernel's whole stdout/stderr (the verdict quotes the first lines).
  for (const std::string& p : host_.save_captured_output(opt_.report_dir))
    res_.kernel_output += "  (all of it: " + p + ")\n";
  bool any = false;
  for (auto& r : res_.rows) any |= r.smallest.has_value();
  if (!any) return;
  std::error_code ec;
  std::filesystem::create_directories(opt_.report_dir, ec);
  if (ec) {
    std::fprintf(stderr, "warning: cannot create %s: %s\n", opt_.report_dir.c_str(), ec.message().c_str());
    return;
  }
  auto slug = [](std::string s) {
    for (char& ch : s)
      if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '-';
    return s;
  };
  for (auto& r : res_.rows) {
    if (!r.smallest) continue;
    try {
      const std::string p = (std::filesystem::path(opt_.report_dir) / (slug(r.name) + ".smallest.json")).string();
      write_record(p, *r.smallest);
      r.smallest_file = p;
      for (size_t k = 0; k < r.failing.size(); ++k)
        write_record((std::filesystem::path(opt_.report_dir) / fmt::format("{}.{}.json", slug(r.name), k)).string(),
                     r.failing[k]);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "warning: %s\n", e.what());
    }
  }
}

GateResult Gate::run() {
  host_.start();  // a load error (LoadError) ends the run before anything is judged
  res_.kernel = impl_.name;
  res_.kernel_arg = opt_.kernel_arg;
  res_.contract = opt_.contract.spec();
  res_.bounds = describe_bounds(impl_, opt_.contract, opt_.dtypes, opt_.max_position);
  res_.angle_model = std::string(to_string(opt_.angle_model));
  for (Dtype d : opt_.dtypes) {
    RopeCase c;
    c.dtype = d;
    c.head_dim = c.rotary_dim = 128;
    c.positions = {1};
    res_.dtype_bound[d] = criteria(c).case_bound(c);
  }
  if (!opt_.tolerance.empty()) {
    std::string t;
    for (const auto& [d, v] : opt_.tolerance) t += fmt::format("{}{}={:g}", t.empty() ? "" : ",", to_string(d), v);
    res_.contract += " (overridden by --tolerance " + t + ": every pair's e within that flat bound)";
  }
  progress("kernel " + impl_.name + ": systematic matrix");
  run_matrix();
  if (accepted_combos_.empty()) {
    CheckRow& r = row("coverage", row_what("coverage", opt_.contract));
    r.failed_check = true;
    r.failed = 1;
    r.smallest_message = aborted_          ? "the kernel hung: nothing could be checked"
                         : budget_reached_ ? "the budget was reached before the kernel accepted a case"
                                           : "the kernel declined every case of every dtype x layout asked for: a gate that "
                                    "checked nothing is not a pass";
  } else {
    progress("special values");
    run_specials();
    progress("properties");
    run_properties();
    progress("sequences of calls in one process");
    run_sequences();
    run_repeat();
    progress("large shapes");
    run_large();
    progress(fmt::format("{} random cases", opt_.random_cases));
    run_random();
  }
  finish_sandbox();
  finish_bias();
  for (auto& r : res_.rows)
    if (r.failed_check && r.smallest) {
      shrink(r);
      diagnose_row(r);
    }
  save_files();
  // What the budget cut: calls of the systematic rows (a FAIL: a gate that did not run its systematic part
  // has not checked the kernel), then the random phase, shrinking and diagnosis (said, not failed).
  bool systematic_cut = false;
  for (auto& r : res_.rows)
    if (auto it = not_run_.find(r.name); it != not_run_.end() && r.name != "random") {
      systematic_cut = true;
      res_.budget_cuts.push_back(fmt::format("{}: {} call(s) not made", r.name, it->second));
      r.note = r.ran ? fmt::format("{} call(s) not made: the budget was reached", it->second)
                     : "not run: the budget was reached";
    }
  if (budget_reached_ && accepted_combos_.empty() && !aborted_) systematic_cut = true;
  for (const auto& c : budget_cuts_) res_.budget_cuts.push_back(c);
  if (aborted_)
    for (auto& r : res_.rows)
      if (!r.ran && r.note.empty()) r.note = "not run: the kernel hung twice";
  res_.seconds = seconds_since(t0_);
  res_.pass = res_.accepted > 0;
  for (const auto& r : res_.rows) res_.pass &= !r.failed_check;
  if (aborted_) res_.pass = false;
  if (systematic_cut) res_.pass = false;
  if (res_.pass) {
    res_.verdict_reason = "every check passed under the contract";
    if (!res_.budget_cuts.empty())
      res_.verdict_reason += fmt::format("; the budget ({:g} s) cut: {}", opt_.budget_seconds,
                                         fmt::join(res_.budget_cuts, "; "));
  } else if (systematic_cut && std::none_of(res_.rows.begin(), res_.rows.end(),
                                            [](const CheckRow& r) { return r.failed_check; })) {
    res_.verdict_reason = fmt::format("the budget ({:g} s) was reached before the systematic checks finished "
                                      "(not run: {}); a gate that did not run them is not a pass: raise "
                                      "--budget-seconds",
                                      opt_.budget_seconds, fmt::join(res_.budget_cuts, "; "));
  } else {
    // Name the causes: each distinct diagnosis (or fault) with the first row that shows it.
    std::vector<std::string> causes;
    for (const auto& r : res_.rows) {
      if (!r.failed_check) continue;
      std::string cause = !r.smallest_fault.empty() ? r.smallest_fault : r.diagnosis.empty() ? r.name : r.diagnosis;
      if (const size_t cut = cause.find(" ("); cut != std::string::npos) cause.resize(cut);
      if (cause.rfind("diagnosis: ", 0) == 0) cause = cause.substr(11);
      if (std::find(causes.begin(), causes.end(), cause) == causes.end()) causes.push_back(cause);
    }
    res_.verdict_reason = "failed: ";
    for (size_t k = 0; k < causes.size(); ++k) res_.verdict_reason += (k ? "; " : "") + causes[k];
    if (!res_.budget_cuts.empty())
      res_.verdict_reason += fmt::format("; the budget ({:g} s) cut: {}", opt_.budget_seconds,
                                         fmt::join(res_.budget_cuts, "; "));
  }
  return res_;
}

}  // namespace

GateResult run_gate(const Implementation& impl, const GateOptions& opt) { return Gate(impl, opt).run(); }

namespace {

std::string result_text(const CheckRow& r) {
  if (!r.failed_check) return r.ran ? "pass" : "not run";
  std::string kinds;
  // Faults first: a crash is a crash whatever else the row found.
  for (const auto& [kind, n] : r.faults)
    if (kind != "accuracy") kinds += fmt::format("{}{} {}", kinds.empty() ? "" : ", ", kind, n);
  if (auto it = r.faults.find("accuracy"); it != r.faults.end())
    kinds += fmt::format("{}accuracy {}", kinds.empty() ? "" : ", ", it->second);
  return kinds.empty() ? fmt::format("FAIL ({})", r.failed) : fmt::format("FAIL ({}: {})", r.failed, kinds);
}

std::string num(double v) { return fmt::format("{:.4g}", v); }

}  // namespace

std::string format_error_table(const std::map<Dtype, std::map<int, ErrorStats>>& by_bucket) {
  std::string o;
  for (const auto& [d, buckets] : by_bucket) {
    o += fmt::format("\nerror by position ({}; every accepted call's finite pairs; u = 2^-{}):\n\n", to_string(d),
                     format_of(d).precision);
    o += "| position | pairs | max e (u) | max abs radial (u) | max abs tangential (u) | mean radial (u) | max angle "
         "error (rad) | (f32 ulps of angle, resolved pairs) |\n";
    o += "|---|---:|---:|---:|---:|---:|---:|---:|\n";
    for (const auto& [b, st] : buckets)
      o += fmt::format("| {} | {} | {} | {} | {} | {:+.3g} | {} | {} |\n", bucket_label(b), st.count, num(st.max),
                       num(st.max_radial), num(st.max_tangential), st.bias(),
                       st.angle_count ? num(st.max_angle) : "-",
                       st.resolved_angle_count ? num(st.max_resolved_angle_ulps) : "-");
  }
  return o;
}

std::string format_verdict(const GateResult& g) {
  std::string o;
  o += fmt::format("ropecheck gate: kernel {} ({} calls, {} accepted, {:.1f} s)\n", g.kernel, g.calls, g.accepted,
                   g.seconds);
  if (!g.contract.empty()) o += fmt::format("contract: {}\n", g.contract);
  if (!g.bounds.empty()) o += "derived allowances (pair 0, unit norm):\n" + g.bounds;
  o += "\n| check | cases | declined | worst e (u) | radial (allowed) | tangential (allowed) | max angle error (f32 "
       "ulps) | result | diagnosis |\n";
  o += "|---|---:|---:|---:|---:|---:|---:|---|---|\n";
  for (const auto& r : g.rows) {
    const bool pairwise = r.ran && r.allowed_radial > 0;
    o += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} | {} |\n", r.name, r.cases, r.declined,
                     r.ran ? fmt::format("{} / {}", num(r.worst_error), num(r.worst_bound)) : "-",
                     pairwise ? fmt::format("{:+.4g} ({})", r.worst_radial, num(r.allowed_radial)) : "-",
                     pairwise ? fmt::format("{:+.4g} ({})", r.worst_tangential, num(r.allowed_tangential)) : "-",
                     pairwise && r.max_angle_ulps > 0 ? num(r.max_angle_ulps) : "-", result_text(r),
                     r.diagnosis.empty() ? "-" : r.diagnosis);
  }
  o += "\n";
  for (const auto& r : g.rows)
    if (!r.note.empty()) o += fmt::format("note: {}: {}\n", r.name, r.note);
  o += format_error_table(g.by_bucket);
  for (const auto& r : g.rows) {
    if (!r.failed_check) continue;
    o += fmt::format("\nFAILED {}: {}\n", r.name, r.what);
    if (!r.diagnosis.empty()) o += "  " + r.diagnosis + "\n";
    if (r.smallest)
      o += fmt::format("  smallest failing case: {}{}\n", r.smallest->c.summary(), r.smallest->in_place ? " in-place" : "");
    o += r.smallest_message + "\n";
    if (!r.smallest_file.empty()) o += fmt::format("  replay: ropecheck replay {} {}\n", r.smallest_file, g.kernel_arg);
  }
  if (!g.sandbox.empty()) o += "\n" + g.sandbox + "\n";
  if (!g.kernel_output.empty()) o += g.kernel_output;
  o += fmt::format("\nverdict: {} ({})\n", g.pass ? "PASS" : "FAIL", g.verdict_reason);
  return o;
}

static std::string xml_escape(const std::string& s) {
  std::string o;
  for (char ch : s) {
    switch (ch) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      default:
        if (static_cast<unsigned char>(ch) < 0x20 && ch != '\n' && ch != '\t') o += ' ';
        else o += ch;
    }
  }
  return o;
}

std::string junit_xml(const GateResult& g) {
  size_t failures = 0, skipped = 0;
  for (const auto& r : g.rows) {
    failures += r.failed_check;
    skipped += !r.ran && !r.failed_check;
  }
  std::string o = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  o += fmt::format("<testsuites><testsuite name=\"ropecheck gate {}\" tests=\"{}\" failures=\"{}\" skipped=\"{}\" "
                   "time=\"{:.3f}\">\n",
                   xml_escape(g.kernel), g.rows.size(), failures, skipped, g.seconds);
  o += fmt::format("  <properties><property name=\"contract\" value=\"{}\"/><property name=\"bounds\" "
                   "value=\"{}\"/><property name=\"verdict\" value=\"{}\"/></properties>\n",
                   xml_escape(g.contract), xml_escape(g.bounds), xml_escape(g.verdict_reason));
  for (const auto& r : g.rows) {
    o += fmt::format("  <testcase classname=\"ropecheck.gate.{}\" name=\"{}\">\n", xml_escape(g.kernel),
                     xml_escape(r.name));
    if (r.failed_check) {
      std::string body = r.diagnosis.empty() ? "" : r.diagnosis + "\n";
      body += r.smallest_message;
      if (r.smallest) body += "\ncase: " + r.smallest->c.summary();
      if (!r.smallest_file.empty()) body += "\nreplay: ropecheck replay " + r.smallest_file + " " + g.kernel_arg;
      body += "\ncontract: " + g.contract;
      std::string msg = result_text(r);
      if (!r.diagnosis.empty()) msg += " - " + r.diagnosis;
      o += fmt::format("    <failure message=\"{}\" type=\"{}\">{}</failure>\n", xml_escape(msg),
                       xml_escape(r.smallest_fault.empty() ? "accuracy" : r.smallest_fault), xml_escape(body));
    } else if (!r.ran) {
      o += fmt::format("    <skipped message=\"{}\"/>\n", xml_escape(r.note));
    }
    o += fmt::format("    <system-out>{}</system-out>\n",
                     xml_escape(fmt::format("{}: cases {}, declined {}, worst {:.4g} u (allowed {:.4g} u; radial "
                                            "{:+.4g} of {:.4g}, tangential {:+.4g} of {:.4g}). contract: {}. {}",
                                            r.what, r.cases, r.declined, r.worst_error, r.worst_bound,
                                            r.worst_radial, r.allowed_radial, r.worst_tangential,
                                            r.allowed_tangential, g.contract, r.note)));
    o += "  </testcase>\n";
  }
  // The kernel host's line and what the kernel printed (quoted), for the CI log.
  if (!g.sandbox.empty() || !g.kernel_output.empty())
    o += fmt::format("  <system-out>{}</system-out>\n", xml_escape(g.sandbox + "\n" + g.kernel_output));
  o += "</testsuite></testsuites>\n";
  return o;
}

int emit_verdict(const GateResult& r, const std::string& junit_path) {
  std::cout << format_verdict(r);
  if (!junit_path.empty()) {
    std::ofstream f(junit_path);
    f << junit_xml(r);
    if (!f) {
      std::cerr << "error: cannot write " << junit_path << "\n";
      return 2;
    }
  }
  return r.pass ? 0 : 1;
}

}  // namespace ropecheck::gate
