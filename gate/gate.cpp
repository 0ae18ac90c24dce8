#include "gate/gate.hpp"

#include <fstream>
#include <iostream>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <random>
#include <sstream>

#include "gate/isolation.hpp"

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
  cand.push_back(0);
  cand.push_back(std::min<int64_t>(1, max_position));
  cand.push_back(std::min<int64_t>(7, max_position));
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

double case_bound(const Implementation& impl, const RopeCase& c, const std::map<Dtype, double>& tolerance) {
  if (auto it = tolerance.find(c.dtype); it != tolerance.end()) return it->second;
  return impl.bound(c);
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
      c.positions = position_mix(rng, max_position, hd >= 128 ? 5 : 8);
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

std::vector<RopeCase> special_value_cases(Dtype d, Layout l, uint64_t seed) {
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
    c.positions = {0, 3, 77777, 1, 1000};
    c.input.assign(c.n_bytes(), 0);
    for (size_t k = 0; k < c.n_elements(); ++k) {
      const float v = (rng() % 2) ? specials[rng() % std::size(specials)] : random_value(rng, d);
      store_f32(d, c.input.data(), k, v);
    }
    out.push_back(std::move(c));
  }
  return out;
}

CaseVerdict judge_call(const RopeCase& c, bool in_place, AngleModel model, double bound, const CallResult& r,
                       const ReferenceOutput* ref_in) {
  CaseVerdict v;
  if (r.status == CallStatus::declined) return v;
  v.accepted = true;
  auto failed = [&](std::string m) {
    v.pass = false;
    v.message += m + "\n";
  };
  if (r.status != CallStatus::ok) {
    failed("the kernel " + describe(r));
    return v;
  }
  const Dtype d = c.dtype;
  if (r.guard_before_bytes)
    failed(fmt::format("memory: {} guard byte(s) before the {} buffer were overwritten (a write before its start)",
                       r.guard_before_bytes, in_place ? "in-place" : "output"));
  if (r.guard_after_bytes)
    failed(fmt::format("memory: {} guard byte(s) after the {} buffer were overwritten (a write past its end)",
                       r.guard_after_bytes, in_place ? "in-place" : "output"));
  if (r.input_guard_bytes)
    failed(fmt::format("memory: {} guard byte(s) around the input buffer were overwritten", r.input_guard_bytes));
  if (r.input_changed) {
    const size_t k = r.first_input_changed;
    failed(fmt::format("memory: an out-of-place call changed {} input element(s); first {}: was {}",
                       r.input_changed, elem_site(c, k), describe_element(d, load_bits(d, c.input.data(), k))));
  }
  if (r.unwritten) {
    failed(fmt::format("memory: {} output element(s) were never written (still the poison {}); first {}",
                       r.unwritten, describe_element(d, poison_bits(d)), elem_site(c, r.first_unwritten)));
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
  jo.keep_values = true;
  v.judgement = judge_output(c, *ref, r.out.data(), bound, jo);
  v.worst_error = v.judgement.stats.max;
  if (!v.judgement.ok()) failed(v.judgement.report(2));
  if (!v.message.empty() && v.message.back() == '\n') v.message.pop_back();
  return v;
}

CheckRow bias_row(Dtype d, uint64_t count, double sum_radial, double sum_e2, const KernelErrorModel& em) {
  CheckRow r;
  r.name = fmt::format("bias {}", to_string(d));
  r.what = "mean radial error of all finite pairs within 5 sigma/sqrt(n) + 1/8 u (+ f32 intermediate)";
  r.ran = true;
  r.cases = 1;
  const double n = double(std::max<uint64_t>(count, 1));
  const double bias = sum_radial / n;
  const double sigma = std::sqrt(sum_e2 / n);  // radial^2 <= e^2: an upper bound on the spread
  double model = 0.125;
  if (d != Dtype::f32) model += std::sqrt(2.0) * (em.trig_rel_u32 + 3.0) * 0x1p-24 / unit_roundoff(d);
  const double allowed = 5.0 * sigma / std::sqrt(n) + model;
  r.worst_error = std::fabs(bias);
  r.worst_bound = allowed;
  r.worst_ratio = std::fabs(bias) / allowed;
  r.note = fmt::format("bias {:+.4f} u over {} pairs (sigma <= {:.3f} u), allowed {:.4f} u", bias, count, sigma,
                       allowed);
  if (!(std::fabs(bias) <= allowed)) {
    r.failed_check = true;
    r.failed = 1;
    r.smallest_message = fmt::format(
        "statistical bias: the mean radial error is {:+.4f} u over {} pairs, beyond {:.4f} u; a kernel that rounds "
        "to nearest has mean ~0 (truncation or a biased cos/sin shows here)",
        bias, count, allowed);
  }
  return r;
}

namespace {

struct BiasAcc {
  uint64_t n = 0;
  double sum_radial = 0, sum_e2 = 0;
};

class Gate {
 public:
  Gate(const Implementation& impl, const GateOptions& opt) : impl_(impl), opt_(opt), t0_(Clock::now()) {}

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

  // Call and judge one case, attributing it to a row. Returns the outcome.
  Outcome run_case(CheckRow& r, const RopeCase& c, bool in_place) {
    Outcome o;
    if (aborted_) return o;
    const double bound = case_bound(impl_, c, opt_.tolerance);
    o.call = call_isolated(impl_.fn, c, in_place, opt_.call_timeout_seconds);
    ++res_.calls;
    o.v = judge_call(c, in_place, opt_.angle_model, bound, o.call);
    if (!o.v.accepted) {
      ++r.declined;
      return o;
    }
    ++res_.accepted;
    ++r.cases;
    r.ran = true;
    const auto& st = o.v.judgement.stats;
    if (st.count) {
      BiasAcc& b = bias_[c.dtype];
      b.n += st.count;
      b.sum_radial += st.sum_radial;
      for (float e : st.values) b.sum_e2 += double(e) * double(e);  // radial^2 <= e^2
    }
    if (o.v.worst_error / bound > r.worst_ratio || (r.worst_bound == 0 && o.v.worst_error == 0)) {
      r.worst_ratio = o.v.worst_error / bound;
      r.worst_error = o.v.worst_error;
      r.worst_bound = bound;
    }
    if (!o.v.pass) record_failure(r, c, in_place, bound, o.v.message);
    if (o.call.status == CallStatus::hung && ++hangs_ >= 2) {
      aborted_ = true;
      progress("the kernel hung twice: the remaining cases are not run");
    }
    return o;
  }

  void record_failure(CheckRow& r, const RopeCase& c, bool in_place, double bound, const std::string& msg) {
    ++r.failed;
    r.failed_check = true;
    CaseRecord rec{c, in_place, opt_.angle_model, bound, r.name, msg};
    if (!r.smallest || c.n_elements() < r.smallest->c.n_elements()) {
      r.smallest = rec;
      r.smallest_message = msg;
    }
    if (r.failing.size() < 3) r.failing.push_back(std::move(rec));
  }

  // Try to shrink a row's smallest failing case to one token, then one head.
  void shrink(CheckRow& r);

  void run_matrix();
  void run_specials();
  void run_properties();
  void run_random();
  void finish_bias();
  void save_files();

  const Implementation& impl_;
  const GateOptions& opt_;
  Clock::time_point t0_;
  GateResult res_;
  std::map<Dtype, BiasAcc> bias_;
  bool aborted_ = false;
  int hangs_ = 0;
  std::vector<std::pair<Dtype, Layout>> accepted_combos_;
};


void Gate::shrink(CheckRow& r) {
  if (!r.smallest || aborted_) return;
  CaseRecord best = *r.smallest;
  if (best.failure.find("did not return") != std::string::npos) return;  // a hang costs a timeout per try
  auto try_case = [&](const RopeCase& c) -> bool {
    const double bound = case_bound(impl_, c, opt_.tolerance);
    const CallResult cr = call_isolated(impl_.fn, c, best.in_place, opt_.call_timeout_seconds);
    const CaseVerdict v = judge_call(c, best.in_place, opt_.angle_model, bound, cr);
    if (v.accepted && !v.pass) {
      best = CaseRecord{c, best.in_place, opt_.angle_model, bound, r.name, v.message};
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
  if (best.c.n_tokens() > 1) {
    const RopeCase c = best.c;
    for (size_t t = 0; t < c.n_tokens(); ++t)
      if (try_case(slice(c, t, 1, 0, c.n_heads))) break;
  }
  if (best.c.n_heads > 1) {
    const RopeCase c = best.c;
    for (size_t h = 0; h < c.n_heads; ++h)
      if (try_case(slice(c, 0, c.n_tokens(), h, 1))) break;
  }
  r.smallest = best;
  r.smallest_message = best.failure;
}

void Gate::run_matrix() {
  for (Dtype d : opt_.dtypes)
    for (Layout l : opt_.layouts) {
      if (!impl_.supports(d) || !impl_.supports(l)) continue;
      CheckRow& r = row(fmt::format("matrix {} {}", to_string(d), to_string(l)),
                        "head/rotary dims 2..256 (partial rotary, vector tails), 1-3 heads, shuffled positions "
                        "0..max, base/scale/inv_freq variants, in place and out of place");
      std::vector<bool> ip;
      const auto cases = systematic_cases(d, l, opt_.max_position, opt_.seed, &ip);
      for (size_t k = 0; k < cases.size(); ++k) run_case(r, cases[k], ip[k]);
      if (r.ran) accepted_combos_.push_back({d, l});
      else if (!aborted_) r.note = "every case declined (RC_UNSUPPORTED)";
    }
}

void Gate::run_specials() {
  CheckRow& r = row("special values",
                    "+-0, subnormals, huge, NaN, +-Inf in rotated and pass-through dims (docs/error-model.md rules)");
  for (const auto& [d, l] : accepted_combos_) {
    const auto cases = special_value_cases(d, l, opt_.seed);
    for (size_t k = 0; k < cases.size(); ++k) run_case(r, cases[k], k % 2 == 1);
  }
  if (!r.ran && !aborted_) r.note = "no accepted dtype/layout";
}

void Gate::run_properties() {
  Rng rng(opt_.seed ^ 0x5eedf00dull);
  // Position 0 is the identity, bit for bit, whatever the values.
  {
    CheckRow& r = row("property: position 0", "every position 0: the output is the input, bit for bit");
    for (const auto& [d, l] : accepted_combos_) {
      for (int ip = 0; ip < 2; ++ip) {
        RopeCase c;
        c.dtype = d;
        c.layout = l;
        c.head_dim = 64;
        c.rotary_dim = 48;
        c.n_heads = 2;
        c.positions.assign(4, 0);
        c.base = 500000;
        auto sv = special_value_cases(d, l, opt_.seed + 1);  // reuse its value mix
        c.input.assign(c.n_bytes(), 0);
        for (size_t k = 0; k < c.n_elements(); ++k)
          store_bits(d, c.input.data(), k, load_bits(d, sv[2].input.data(), k % sv[2].n_elements()));
        Outcome o = run_case(r, c, ip == 1);
        if (o.v.accepted && o.call.status == CallStatus::ok && o.call.out != c.input && o.v.pass) {
          size_t k = 0;
          while (load_bits(d, o.call.out.data(), k) == load_bits(d, c.input.data(), k)) ++k;
          record_failure(r, c, ip == 1, case_bound(impl_, c, opt_.tolerance),
                         fmt::format("property: position 0 changed {}: {} -> {}", elem_site(c, k),
                                     describe_element(d, load_bits(d, c.input.data(), k)),
                                     describe_element(d, load_bits(d, o.call.out.data(), k))));
        }
      }
    }
    if (!r.ran && !aborted_) r.note = "no accepted dtype/layout";
  }
  // Layout equivalence: interleaved(x) and half-split(P x) agree within both bounds.
  {
    CheckRow& r = row("property: layouts",
                      "interleaved(x) = P^-1 half-split(P x) within twice the bound, per pair");
    for (Dtype d : opt_.dtypes) {
      const bool both = std::count(accepted_combos_.begin(), accepted_combos_.end(), std::pair{d, Layout::interleaved}) &&
                        std::count(accepted_combos_.begin(), accepted_combos_.end(), std::pair{d, Layout::half_split});
      if (!both) continue;
      const std::pair<uint32_t, uint32_t> dims[] = {{64, 64}, {20, 12}, {128, 96}};
      for (const auto& [hd, rd] : dims) {
        RopeCase ci;
        ci.dtype = d;
        ci.layout = Layout::interleaved;
        ci.head_dim = hd;
        ci.rotary_dim = rd;
        ci.n_heads = 2;
        ci.positions = position_mix(rng, opt_.max_position, 6);
        ci.base = 10000;
        fill_random(ci, rng);
        RopeCase ch = ci;
        ch.layout = Layout::half_split;
        const uint32_t np = rd / 2;
        for (size_t t = 0; t < ci.n_tokens(); ++t)
          for (size_t h = 0; h < ci.n_heads; ++h) {
            const size_t b = head_offset(ci, t, h);
            for (uint32_t i = 0; i < np; ++i) {
              const auto [a0, a1] = pair_dims(Layout::interleaved, rd, i);
              const auto [b0, b1] = pair_dims(Layout::half_split, rd, i);
              store_bits(d, ch.input.data(), b + b0, load_bits(d, ci.input.data(), b + a0));
              store_bits(d, ch.input.data(), b + b1, load_bits(d, ci.input.data(), b + a1));
            }
          }
        Outcome oi = run_case(r, ci, false);
        Outcome oh = run_case(r, ch, false);
        if (!(oi.v.accepted && oh.v.accepted && oi.v.pass && oh.v.pass)) continue;
        const double bi = case_bound(impl_, ci, opt_.tolerance), bh = case_bound(impl_, ch, opt_.tolerance);
        const Format f = format_of(d);
        for (size_t t = 0; t < ci.n_tokens(); ++t)
          for (size_t h = 0; h < ci.n_heads; ++h) {
            const size_t b = head_offset(ci, t, h);
            for (uint32_t i = 0; i < np; ++i) {
              const auto [a0, a1] = pair_dims(Layout::interleaved, rd, i);
              const auto [b0, b1] = pair_dims(Layout::half_split, rd, i);
              const double x0 = load_f32(d, ci.input.data(), b + a0), x1 = load_f32(d, ci.input.data(), b + a1);
              const double dd = std::hypot(load_f32(d, oi.call.out.data(), b + a0) - load_f32(d, oh.call.out.data(), b + b0),
                                           load_f32(d, oi.call.out.data(), b + a1) - load_f32(d, oh.call.out.data(), b + b1));
              const double tol = (bi + bh) * f.unit_roundoff() * std::max(std::hypot(x0, x1), f.min_normal());
              if (!(dd <= tol)) {
                record_failure(r, ci, false, bi,
                               fmt::format("property: interleaved and half-split outputs of token {} head {} pair {} "
                                           "differ by {:.4g} u (allowed {:.4g} u)",
                                           t, h, i, dd / (f.unit_roundoff() * std::max(std::hypot(x0, x1), f.min_normal())),
                                           bi + bh));
                t = ci.n_tokens();
                h = ci.n_heads;
                break;
              }
            }
          }
      }
    }
    if (!r.ran && !aborted_) r.note = "no dtype with both layouts accepted";
  }
  // Relative position: <R_m q, R_n k> = <R_{m+s} q, R_{n+s} k>.
  {
    CheckRow& r = row("property: relative",
                      "<R(m)q, R(n)k> = <R(m+s)q, R(n+s)k> within the bound's propagation (exact angle model)");
    if (opt_.angle_model != AngleModel::exact) {
      r.note = "skipped: the fp32 angle model's angles are not shift-invariant";
    } else {
      const int64_t M = opt_.max_position;
      for (const auto& combo : accepted_combos_) {
        const Dtype d = combo.first;  // named copies: a lambda below uses them (clang-14 cannot capture bindings)
        const Layout l = combo.second;
        RopeCase c;
        c.dtype = d;
        c.layout = l;
        c.head_dim = 64;
        c.rotary_dim = 64;
        c.n_heads = 1;
        c.base = 10000;
        // (m, n, s) triples within [0, M].
        const int64_t trip[][3] = {{5, 2, 1000 % (M + 1)}, {M / 2 + 3, M / 2 - 5 > 0 ? M / 2 - 5 : 0, M / 4},
                                   {0, M / 2, M / 2}, {17, 4, M - 17}};
        std::vector<int64_t> pos;
        for (const auto& t : trip) {
          const int64_t m = std::clamp<int64_t>(t[0], 0, M), n = std::clamp<int64_t>(t[1], 0, M);
          const int64_t s = std::clamp<int64_t>(t[2], 0, M - std::max(m, n));
          pos.insert(pos.end(), {m, n, m + s, n + s});
        }
        c.positions = pos;
        RopeCase tmp = c;
        tmp.positions.resize(2);
        fill_random(tmp, rng);  // q and k
        c.input.assign(c.n_bytes(), 0);
        const size_t hb = c.head_dim * dtype_size(d);
        for (size_t t = 0; t < c.n_tokens(); ++t) std::memcpy(c.input.data() + t * hb, tmp.input.data() + (t % 2) * hb, hb);
        Outcome o = run_case(r, c, false);
        if (!(o.v.accepted && o.v.pass)) continue;
        const Format f = format_of(d);
        const double B = case_bound(impl_, c, opt_.tolerance), u = f.unit_roundoff();
        auto norms = [&](size_t t, double& plain, double& eff) {
          plain = eff = 0;
          for (uint32_t i = 0; i < c.rotary_dim / 2; ++i) {
            const auto [a0, a1] = pair_dims(l, c.rotary_dim, i);
            const double x0 = load_f32(d, c.input.data(), t * c.head_dim + a0),
                         x1 = load_f32(d, c.input.data(), t * c.head_dim + a1);
            plain += x0 * x0 + x1 * x1;
            eff += std::max(x0 * x0 + x1 * x1, f.min_normal() * f.min_normal());
          }
          plain = std::sqrt(plain);
          eff = std::sqrt(eff);
        };
        double q, qe, k, ke;
        norms(0, q, qe);
        norms(1, k, ke);
        const double one = B * u * (qe * k + q * ke) + B * B * u * u * qe * ke;
        const double tol = 2 * one + 0x1p-45 * q * k;
        auto dot = [&](size_t a, size_t b) {
          double s = 0;
          for (uint32_t e = 0; e < c.rotary_dim; ++e)
            s += double(load_f32(d, o.call.out.data(), a * c.head_dim + e)) *
                 double(load_f32(d, o.call.out.data(), b * c.head_dim + e));
          return s;
        };
        for (size_t g = 0; g < std::size(trip); ++g) {
          const double d1 = dot(4 * g, 4 * g + 1), d2 = dot(4 * g + 2, 4 * g + 3);
          if (!(std::fabs(d1 - d2) <= tol)) {
            record_failure(r, c, false, B,
                           fmt::format("property: <R({})q, R({})k> = {:.9g} but <R({})q, R({})k> = {:.9g}; "
                                       "|difference| {:.4g} > allowed {:.4g} (|q| {:.4g}, |k| {:.4g})",
                                       c.positions[4 * g], c.positions[4 * g + 1], d1, c.positions[4 * g + 2],
                                       c.positions[4 * g + 3], d2, std::fabs(d1 - d2), tol, q, k));
            break;
          }
        }
      }
      if (!r.ran && !aborted_) r.note = "no accepted dtype/layout";
    }
  }
}

void Gate::run_random() {
  CheckRow& r = row("random", "random dims, heads, tokens, positions, base, scale, tables, in place, until the budget");
  if (accepted_combos_.empty()) {
    r.note = "no accepted dtype/layout";
    return;
  }
  Rng rng(opt_.seed ^ 0xabcdef12345ull);
  const double stop_at = opt_.budget_seconds * 0.85;
  uint64_t n = 0;
  while (!aborted_ && seconds_since(t0_) < stop_at) {
    const auto [d, l] = accepted_combos_[rng() % accepted_combos_.size()];
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
      const double lg = std::uniform_real_distribution<double>(0, std::log2(double(opt_.max_position) + 1))(rng);
      c.positions.push_back(std::min<int64_t>(opt_.max_position, int64_t(std::exp2(lg)) - 1));
    }
    c.base = std::exp(std::uniform_real_distribution<double>(std::log(2.0), std::log(2e6))(rng));
    if (rng() % 4 == 0) c.position_scale = std::ldexp(1.0, int(rng() % 7) - 4);
    if (rng() % 5 == 0) c.inv_freq = rope_table(rng, c.rotary_dim, c.base);
    fill_random(c, rng);
    run_case(r, c, rng() % 2 == 1);
    ++n;
  }
  if (n == 0 && !aborted_) r.note = "no time left in the budget";
}

void Gate::finish_bias() {
  for (Dtype d : opt_.dtypes) {
    auto it = bias_.find(d);
    if (it == bias_.end() || it->second.n == 0) continue;
    res_.rows.push_back(bias_row(d, it->second.n, it->second.sum_radial, it->second.sum_e2, impl_.error_model));
  }
}

void Gate::save_files() {
  if (opt_.report_dir.empty()) return;
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
  res_.kernel = impl_.name;
  res_.kernel_arg = opt_.kernel_arg;
  progress("kernel " + impl_.name + ": systematic matrix");
  run_matrix();
  if (accepted_combos_.empty()) {
    CheckRow& r = row("coverage", "the kernel accepts at least one dtype x layout asked for");
    r.failed_check = true;
    r.failed = 1;
    r.smallest_message = aborted_ ? "the kernel hung: nothing could be checked"
                                  : "the kernel declined every case of every dtype x layout asked for: a gate that "
                                    "checked nothing is not a pass";
  } else {
    progress("special values");
    run_specials();
    progress("properties");
    run_properties();
    progress("random cases until the budget");
    run_random();
  }
  finish_bias();
  for (auto& r : res_.rows)
    if (r.failed_check && r.smallest) shrink(r);
  save_files();
  if (aborted_)
    for (auto& r : res_.rows)
      if (!r.ran && r.note.empty()) r.note = "not run: the kernel hung twice";
  res_.seconds = seconds_since(t0_);
  res_.pass = res_.accepted > 0;
  for (const auto& r : res_.rows) res_.pass &= !r.failed_check;
  if (aborted_) res_.pass = false;
  res_.verdict_reason = res_.pass ? "every check passed" : "at least one check failed";
  return res_;
}

}  // namespace

GateResult run_gate(const Implementation& impl, const GateOptions& opt) { return Gate(impl, opt).run(); }

std::string format_verdict(const GateResult& g) {
  std::string o;
  o += fmt::format("ropecheck gate: kernel {} ({} calls, {} accepted, {:.1f} s)\n\n", g.kernel, g.calls, g.accepted,
                   g.seconds);
  o += "| check | cases | declined | worst error (u) | bound (u) | result | smallest failing case |\n";
  o += "|---|---:|---:|---:|---:|---|---|\n";
  for (const auto& r : g.rows) {
    const std::string result = r.failed_check ? fmt::format("FAIL ({})", r.failed)
                               : r.ran        ? std::string("pass")
                                              : std::string("not run");
    std::string smallest = "-";
    if (r.smallest)
      smallest = fmt::format("{}{}{}", r.smallest->c.summary(), r.smallest->in_place ? " in-place" : "",
                             r.smallest_file.empty() ? "" : " -> " + r.smallest_file);
    o += fmt::format("| {} | {} | {} | {} | {} | {} | {} |\n", r.name, r.cases, r.declined,
                     r.ran ? fmt::format("{:.4g}", r.worst_error) : "-",
                     r.ran ? fmt::format("{:.4g}", r.worst_bound) : "-", result, smallest);
  }
  o += "\n";
  for (const auto& r : g.rows)
    if (!r.note.empty()) o += fmt::format("note: {}: {}\n", r.name, r.note);
  for (const auto& r : g.rows) {
    if (!r.failed_check) continue;
    o += fmt::format("\nFAILED {}: {}\n", r.name, r.what);
    o += r.smallest_message + "\n";
    if (!r.smallest_file.empty()) o += fmt::format("  replay: ropecheck replay {} {}\n", r.smallest_file, g.kernel_arg);
  }
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
  for (const auto& r : g.rows) {
    o += fmt::format("  <testcase classname=\"ropecheck.gate.{}\" name=\"{}\">\n", xml_escape(g.kernel),
                     xml_escape(r.name));
    if (r.failed_check) {
      std::string body = r.smallest_message;
      if (r.smallest) body += "\ncase: " + r.smallest->c.summary();
      if (!r.smallest_file.empty()) body += "\nreplay: ropecheck replay " + r.smallest_file + " " + g.kernel_arg;
      o += fmt::format("    <failure message=\"{} failing case(s)\">{}</failure>\n", r.failed, xml_escape(body));
    } else if (!r.ran) {
      o += fmt::format("    <skipped message=\"{}\"/>\n", xml_escape(r.note));
    }
    o += fmt::format("    <system-out>{}</system-out>\n",
                     xml_escape(fmt::format("{}: cases {}, declined {}, worst {:.4g} u, bound {:.4g} u. {}", r.what,
                                            r.cases, r.declined, r.worst_error, r.worst_bound, r.note)));
    o += "  </testcase>\n";
  }
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
