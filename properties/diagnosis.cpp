#include "properties/diagnosis.hpp"

#include "reference/frequency_rules.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <optional>
#include <set>
#include <tuple>

namespace ropecheck {

std::string Diagnosis::text() const {
  std::string s = "diagnosis: " + std::string(name());
  if (!detail.empty()) s += " (" + detail + ")";
  if (!contract.empty()) s += "; would pass with --contract " + contract;
  return s;
}

Contract contract_of(const Criteria& cr) {
  Contract k;
  k.angles = cr.model.angle_f32 ? Contract::Angles::f32 : Contract::Angles::exact;
  k.angle_ulps = cr.model.angle_f32 ? cr.model.angle_f32_ulps : 0.0;
  k.cos_sin = cr.model.cos_sin;
  k.arith = cr.model.arith;
  k.flush_denormals = cr.model.flush_denormals;
  k.truncating_stores = cr.model.truncating_stores;
  k.identity_bits = cr.identity_bits;
  return k;
}

namespace {

constexpr double kMaxK = 0x1p20;  // angles=f32:K is searched up to this K

// The largest K an f32 pipeline can need for case c (docs/error-model.md, "The largest K of an f32 pipeline"):
// ggml's repeated multiplication, the worst of the derived pipelines, 1 + i(3 + 2|ln b|/d) for pair i < d/2, and
// a frequency rule's blend, at most 40 f (llama3's f e_w, YaRN's 2f). An angle error beyond it is not f32 drift:
// no angles=f32:K is suggested for it (a bf16 cache at bf16 outputs was "f32 angle drift, K = 15302").
double real_f32_max_k(const RopeCase& c) {
  const double np = c.rotary_dim / 2.0;
  const double lnb = c.inv_freq.empty() && c.base > 0 ? std::fabs(std::log(c.base)) : 0.0;
  double k = 1 + np * (3 + 2 * lnb / std::max(1u, c.rotary_dim));
  if (c.freq_rule && c.freq_rule->type != FrequencyRuleType::default_) k += 40 * std::max(1.0, c.freq_rule->factor.value_or(1.0));
  return std::ceil(k);
}

// ---- the candidates' cos and sin -------------------------------------------

// cos, sin and |angle| of every (position, pair) of a set of positions, from
// one reference evaluation of a one-head case whose pairs are all (1, 0): the
// exact output is (cos phi, sin phi), correctly rounded to double.
struct Rows {
  uint32_t np = 0;
  std::vector<int64_t> pos;  // sorted, unique
  std::vector<double> c, s, phi;
  size_t row(int64_t m) const { return size_t(std::lower_bound(pos.begin(), pos.end(), m) - pos.begin()); }
  bool has(int64_t m) const { return std::binary_search(pos.begin(), pos.end(), m); }
};

Rows probe_rows(const RopeCase& c, std::vector<int64_t> positions, const std::vector<double>& table,
                AngleModel model) {
  std::sort(positions.begin(), positions.end());
  positions.erase(std::unique(positions.begin(), positions.end()), positions.end());
  const double sign = c.direction == Direction::inverse ? -1.0 : 1.0;  // the inverse: R(-phi)
  if (c.table) {
    // A caller-given table: "position" m is row m of the table as given (a row outside it: no values, NaN, so
    // no candidate that reads it fits); |angle| from its cos and sin.
    const CosSinTable& t = *c.table;
    Rows rows;
    rows.np = c.rotary_dim / 2;
    rows.pos = std::move(positions);
    for (int64_t m : rows.pos)
      for (uint32_t i = 0; i < rows.np; ++i) {
        double cv = std::nan(""), sv = std::nan("");
        if (m >= 0 && uint64_t(m) < t.rows && t.kept(size_t(m)) != SIZE_MAX) {
          if (t.is_angle()) {
            cv = c.attention_factor * std::cos(t.cos_at(size_t(m), i, rows.np));
            sv = c.attention_factor * std::sin(t.cos_at(size_t(m), i, rows.np));
          } else {
            cv = t.cos_at(size_t(m), i, rows.np);
            sv = t.sin_at(size_t(m), i, rows.np);
          }
        }
        rows.c.push_back(cv);
        rows.s.push_back(sign * sv);
        rows.phi.push_back(std::fabs(std::atan2(sv, cv)));
      }
    return rows;
  }
  RopeCase p;
  p.dtype = Dtype::f32;
  p.layout = Layout::interleaved;
  p.head_dim = p.rotary_dim = c.rotary_dim;
  p.n_heads = 1;
  p.positions = positions;
  p.base = c.base;
  p.position_scale = c.position_scale;
  p.inv_freq = table;
  if (table.empty()) {  // the case's own theta: its rule, if any
    p.freq_rule = c.freq_rule;
    p.rule_seq_len = c.rule_seq_len;
  }
  p.attention_factor = c.attention_factor;
  p.input.assign(p.n_bytes(), 0);
  for (size_t k = 0; k < p.n_elements(); k += 2) store_f32(Dtype::f32, p.input.data(), k, 1.0f);
  ReferenceOptions o;
  o.angle_model = model;
  const ReferenceOutput r = reference_rope(p, o);
  Rows rows;
  rows.np = c.rotary_dim / 2;
  rows.pos = std::move(positions);
  const size_t n = rows.pos.size() * rows.np;
  rows.c.resize(n);
  rows.s.resize(n);
  rows.phi.resize(n);
  for (size_t k = 0; k < n; ++k) {
    rows.c[k] = r.exact[2 * k];
    rows.s[k] = sign * r.exact[2 * k + 1];
    rows.phi[k] = r.angle[k];
  }
  return rows;
}

// A candidate output: what an explanation computes, exactly (in double), for
// every pair of `layout` (its own pairing), and the |angle| its allowance uses.
struct Candidate {
  Cause cause;
  std::string what;          // for the detail: what the output is measured against
  Layout layout = Layout::interleaved;
  std::vector<double> y;     // [n_elements]; rotary dims only (NaN: not predicted)
  std::vector<double> phi;   // [n_tokens][np]
  // A HeadMap's candidate: elements whose output it does not predict -- nothing written there, or what was
  // written was read from no element (a gap, past the end) -- their pairs, failing or not, are not held against it.
  std::vector<char> unpredicted;  // [n_elements]: 1 nothing written, 2 computed from no element; empty for the others
  std::vector<double> source;     // [n_elements]: the input each predicted element was computed from (its norm is
                                  // the pair's error scale), empty: the case's input
};

struct Trig {
  double c, s, phi;
};

// The rotation of every pair of `layout` by the (cos, sin) that f(token, pair) gives.
template <class F>
Candidate rotation(const RopeCase& c, Cause cause, std::string what, Layout layout, F f) {
  Candidate k{cause, std::move(what), layout, std::vector<double>(c.n_elements(), 0.0),
              std::vector<double>(c.n_tokens() * (c.rotary_dim / 2), 0.0), {}, {}};
  const uint32_t np = c.rotary_dim / 2;
  for (size_t t = 0; t < c.n_tokens(); ++t)
    for (uint32_t i = 0; i < np; ++i) {
      const Trig g = f(t, i);
      k.phi[t * np + i] = g.phi;
      for (size_t h = 0; h < c.n_heads; ++h) {
        const size_t base = head_offset(c, t, h);
        auto [d0, d1] = pair_dims(layout, c.rotary_dim, i);
        d0 += c.rotary_offset;
        d1 += c.rotary_offset;
        const double x0 = load_f32(c.dtype, c.input.data(), base + d0),
                     x1 = load_f32(c.dtype, c.input.data(), base + d1);
        k.y[base + d0] = x0 * g.c - x1 * g.s;
        k.y[base + d1] = x0 * g.s + x1 * g.c;
      }
    }
  return k;
}

// ---- measuring an output against a candidate --------------------------------

struct Ctx {
  const RopeCase& c;
  const void* got;
  const ReferenceOutput& ref;
  const Criteria& cr;
  uint32_t np;
  bool have_angles;
  double ref_phi(size_t t, uint32_t i) const { return have_angles ? ref.angle[t * np + i] : 0.0; }
  bool copies(size_t k0, size_t k1) const {
    return load_bits(c.dtype, got, k0) == load_bits(c.dtype, c.input.data(), k0) &&
           load_bits(c.dtype, got, k1) == load_bits(c.dtype, c.input.data(), k1);
  }
};

double ratio_of(const PairError& pe, const PairAllowance& a) {
  return std::max({pe.e / a.total, std::fabs(pe.radial) / a.radial, std::fabs(pe.tangential) / a.tangential});
}

struct Fit {
  double residual = 0;     // largest e against the candidate (u)
  double worst_ratio = 0;  // largest e / allowance (of e, radial or tangential)
  uint64_t pairs = 0, bad = 0;
  bool fits() const { return pairs > 0 && bad == 0; }
};

// Every finite pair of the candidate's pairing against the candidate, as if it
// were exact. A pair whose exact angle is 0 and which the kernel copied bit for
// bit fits every candidate (kernels special-case an angle of 0 whatever their bug),
// unless the pair has a gain (an attention factor != 1): a copy is then no rotation's
// output, and only a candidate that predicts it fits it.
// early_exit: stop at the first pair beyond its allowance (bad = 1, residual and
// worst_ratio partial).
Fit fit(const Ctx& x, const Candidate& k, bool early_exit) {
  Fit f;
  const RopeCase& c = x.c;
  const Format fmt_d = format_of(c.dtype);
  for (size_t t = 0; t < c.n_tokens(); ++t)
    for (size_t h = 0; h < c.n_heads; ++h) {
      const size_t base = head_offset(c, t, h);
      for (uint32_t i = 0; i < x.np; ++i) {
        auto [d0, d1] = pair_dims(k.layout, c.rotary_dim, i);
        d0 += c.rotary_offset;
        d1 += c.rotary_offset;
        const size_t k0 = base + d0, k1 = base + d1;
        const double x0 = k.source.empty() ? load_f32(c.dtype, c.input.data(), k0) : k.source[k0],
                     x1 = k.source.empty() ? load_f32(c.dtype, c.input.data(), k1) : k.source[k1];
        const double y0 = load_f32(c.dtype, x.got, k0), y1 = load_f32(c.dtype, x.got, k1);
        const double e0 = k.y[k0], e1 = k.y[k1];
        if (!std::isfinite(x0) || !std::isfinite(x1) || !std::isfinite(y0) || !std::isfinite(y1) ||
            !std::isfinite(e0) || !std::isfinite(e1))
          continue;
        ++f.pairs;
        const double af = pair_gain(c, t, i);  // norms relative to the asked-for output, as the judge
        if (x.have_angles && x.ref_phi(t, i) == 0 && x.copies(k0, k1) && af == 1.0) continue;
        const double phi = k.phi[t * x.np + i];
        // A candidate longer than the asked-for output (the attention factor applied twice: af^2 |x|) is what
        // the kernel computed and rounded: its roundings are relative to that length, and so is the allowance.
        const double asked = pair_hypot(x0, x1) * af, longer = asked > 0 ? pair_hypot(e0, e1) / asked : 1.0;
        const double g = af * std::max(1.0, std::isfinite(longer) ? longer : 1.0);
        const PairError pe = pair_error(c.dtype, g * x0, g * x1, y0, y1, e0, e1, 0, 0, false);
        const PairAllowance a =
            x.cr.allowance(c, i, pair_hypot(x0, x1) * g, phi, pair_hint(fmt_d, g * x0, g * x1, e0, e1));
        double r = ratio_of(pe, a);
        // The candidate's length too, as the judge checks the pair's (metric_ok): where the angle clause leaves the
        // direction free, any candidate's direction fits, its length must still.
        if (x.cr.flat <= 0) {
          const double u = fmt_d.unit_roundoff(), cand = pair_hypot(e0, e1);
          const double len = std::fabs(pair_hypot(y0, y1) - cand) / (std::max(cand, fmt_d.min_normal()) * u);
          r = std::max(r, len / (a.rounding * (1.0 + 0x1p-20) + 0x1p-48 / u));
        }
        f.residual = std::max(f.residual, pe.e);
        f.worst_ratio = std::max(f.worst_ratio, r);
        if (r > 1.0) {
          ++f.bad;
          if (early_exit) return f;
        }
      }
    }
  return f;
}

// ---- the output against the reference ----------------------------------------

// One finite pair judged by the error metric (finite input, output and exact value).
struct Rec {
  size_t token, head;
  uint32_t pair;
  size_t k0, k1;
  double x[2], y[2];
  double norm, phi;
  bool zero;  // exact angle 0 (judged by the identity rule, not the metric)
  PairError pe;
  PairHint hint;  // what tightens denormals=flush (properties/error_model.hpp)
};

bool is_subnormal(const Format& f, double v) { return v != 0 && std::fabs(v) < f.min_normal(); }

// The judge's identity rule (properties/judge.cpp, keeps_input) for one pair at angle 0.
bool identity_ok(const Ctx& x, const Criteria& w, const Rec& r) {
  if (w.flat > 0) return true;  // judged by the metric instead
  const Dtype d = x.c.dtype;
  for (size_t k : {r.k0, r.k1})
    if (!keeps_input(w, d, load_bits(d, x.c.input.data(), k), load_bits(d, x.got, k))) return false;
  return true;
}

bool metric_ok(const Ctx& x, const Criteria& w, const Rec& r) {
  const PairAllowance a = w.allowance(x.c, r.pair, r.norm, r.phi, r.hint);
  if (ratio_of(r.pe, a) > 1.0) return false;  // as the judge compares
  if (w.flat > 0) return true;
  // And the pair's length, as the judge checks it (properties/judge.cpp): an angle error only turns a pair, so
  // |y| stays within the rounding share of |yhat| whatever the angle clause allows (far-out angles under
  // angles=f32 leave the direction free, not the length).
  const Format f = format_of(x.c.dtype);
  const double u = f.unit_roundoff();
  const double length_err = (pair_hypot(r.y[0], r.y[1]) - r.norm) / (std::max(r.norm, f.min_normal()) * u);
  return !(std::fabs(length_err) > a.rounding * (1.0 + 0x1p-20) + 0x1p-48 / u);
}

// Would the finite pairs pass under w? (The rules a contract changes: the metric and the identity rule.)
// `hint` is the last pair that failed: tried first.
bool finite_pairs_pass(const Ctx& x, const std::vector<Rec>& recs, const Criteria& w, size_t& hint) {
  auto ok = [&](const Rec& r) {
    return r.zero && w.flat <= 0 ? identity_ok(x, w, r) : metric_ok(x, w, r);
  };
  if (hint < recs.size() && !ok(recs[hint])) return false;
  for (size_t k = 0; k < recs.size(); ++k)
    if (!ok(recs[k])) {
      hint = k;
      return false;
    }
  return true;
}

// "16-19", "2, 5-7"
std::string ranges(const std::vector<uint32_t>& v) {
  std::string s;
  for (size_t a = 0; a < v.size();) {
    size_t b = a;
    while (b + 1 < v.size() && v[b + 1] == v[b] + 1) ++b;
    s += (s.empty() ? "" : ", ") + std::to_string(v[a]) + (b > a ? "-" + std::to_string(v[b]) : "");
    a = b + 1;
  }
  return s;
}

std::string g4(double v) { return fmt::format("{:.4g}", v); }
// A ratio to an allowance: never "1" for one beyond it, nor "0" for one above 0 ("the worst at 1x it" of a failure).
std::string ratio_text(double r) {
  std::string s = g4(r);
  if ((s == "1" && r > 1) || (s == "0" && r > 0)) s = fmt::format("{:.7g}", r);
  return s;
}

// Contract::short_spec() with K written exactly: it formats K with {:g}, six significant digits, so
// angles=f32:1000001 reads back as 1e+06.
std::string exact_short_spec(const Contract& w) {
  std::string s = w.short_spec();
  if (w.angles == Contract::Angles::f32 && w.angle_ulps > 0) {
    const size_t end = s.find(',');
    s = fmt::format("angles=f32:{}", w.angle_ulps) + (end == std::string::npos ? "" : s.substr(end));
  }
  return s;
}

// ---- truncation: each element's rounding direction -------------------------------

// Where an output element lies against its exact value e in the storage format: 0 when e is representable (no
// evidence) or the output is neither neighbour of e, -1 for the neighbour toward zero, +1 for the one away from it.
int rounding_direction(const Format& f, double e, double y) {
  const double a = std::fabs(e);
  if (a == 0 || !std::isfinite(a) || a > f.max_finite()) return 0;
  const int ex = a < f.min_normal() ? f.emin : std::ilogb(a);
  const double ulp = std::ldexp(1.0, ex - (f.precision - 1));
  const double lo = std::floor(a / ulp) * ulp;
  if (lo == a) return 0;
  if (y != 0 && std::signbit(y) != std::signbit(e)) return 0;
  const double ay = std::fabs(y);
  return ay == lo ? -1 : ay == lo + ulp ? +1 : 0;
}

struct Truncation {
  uint32_t from_pair = 0;  // the pairs from this index on in every head are truncated (0: all)
  uint64_t down = 0, up = 0;  // their elements' directions (toward zero, away)
  uint64_t head_down = 0, head_up = 0;  // the pairs before from_pair
};

// A truncating conversion, everywhere or in a tail of each head's pairs (see diagnose, stage 2a): in the
// truncated pairs at least 6 elements toward zero and none away from it (rounding to nearest does that with
// probability 2^-6), or at least 16 toward zero and at most 1 in 64 away (a value within the kernel's own error of
// a representable one may land either way), every failing pair among them with both elements at a
// neighbour of its exact value, and -- for a tail -- the pairs before it rounding both ways (at least one away
// for every three toward zero, at least 8 elements of evidence), the smallest such tail start.
std::optional<Truncation> truncation_signature(const Ctx& x, const std::vector<Rec>& recs) {
  const Format f = format_of(x.c.dtype);
  const uint32_t np = x.np;
  std::vector<uint64_t> down(np, 0), up(np, 0);
  uint32_t first_failing = np;
  for (const Rec& r : recs) {
    if (r.zero) continue;
    const int d0 = rounding_direction(f, x.ref.exact[r.k0], r.y[0]);
    const int d1 = rounding_direction(f, x.ref.exact[r.k1], r.y[1]);
    if (!metric_ok(x, x.cr, r)) {
      // A failing pair must be a truncation of both elements (or hit one exactly).
      const bool exact0 = r.y[0] == x.ref.exact[r.k0], exact1 = r.y[1] == x.ref.exact[r.k1];
      if (!((d0 == -1 || exact0) && (d1 == -1 || exact1))) return std::nullopt;
      first_failing = std::min(first_failing, r.pair);
    }
    for (int dd : {d0, d1}) {
      if (dd < 0) ++down[r.pair];
      if (dd > 0) ++up[r.pair];
    }
  }
  if (first_failing == np) return std::nullopt;
  auto truncated = [](uint64_t dn, uint64_t u) { return u == 0 ? dn >= 6 : dn >= 16 && u * 64 <= dn; };
  auto rounded = [](uint64_t dn, uint64_t u) { return dn + u >= 8 && u * 3 >= dn; };
  Truncation t;
  for (uint32_t i = 0; i < np; ++i) {
    t.down += down[i];
    t.up += up[i];
  }
  if (truncated(t.down, t.up)) return t;
  // A tail: the smallest start up to the first failing pair whose pairs before round both ways.
  uint64_t hd = 0, hu = 0;
  for (uint32_t i0 = 1; i0 <= first_failing; ++i0) {
    hd += down[i0 - 1];
    hu += up[i0 - 1];
    if (rounded(hd, hu) && truncated(t.down - hd, t.up - hu)) {
      Truncation tail{i0, t.down - hd, t.up - hu, hd, hu};
      // Every pair of the tail truncated, not only some: no tail pair index rounds both ways.
      bool each = true;
      for (uint32_t i = i0; i < np; ++i) each &= up[i] * 64 <= std::max<uint64_t>(down[i], 1);
      if (each) return tail;
    }
  }
  return std::nullopt;
}

// ---- narrow caches: the values a cos/sin table of a narrow type holds -------------------------------

// v rounded to format t's precision, to nearest even or toward zero (t's subnormal quantum below its normals;
// no overflow: cos and sin, times an attention factor).
double round_to(const Format& t, double v, bool toward_zero) {
  if (v == 0 || !std::isfinite(v)) return v;
  int e;
  std::frexp(v, &e);  // |v| in [2^(e-1), 2^e)
  const double q = std::ldexp(1.0, std::max(e, t.emin + 1) - t.precision);
  return (toward_zero ? std::trunc(v / q) : std::nearbyint(v / q)) * q;
}

struct CacheEvidence {
  uint64_t support = 0, against = 0;
  // Most pairs that can tell follow the table, few do not (a pair where the table's rounding is lost in the
  // output's own error or an f32 angle's drift tells nothing).
  bool holds() const { return support >= 4 && against * 8 <= support; }
  // Pairs that can tell say it is not the table (nothing read is no evidence against it: an angle's drift may
  // hide every pair's rounding at huge positions).
  bool contradicted() const { return against >= 4 && against * 8 > support; }
};

// Is the output what a kernel computes from a cos/sin table in format t (rounded to nearest, or truncated)?
// Each pair's cos and sin are read from the reference -- the exact output over the input, e / x as complex
// numbers (the attention factor included, as a table holds it) -- and rounded to t; the pair's prediction is
// x times them. A pair supports the table when the output is that prediction and is against it when it is not;
// it is no evidence where an f32 angle's drift (up to `drift_k` f32 ulps of |angle|: real tables are built from
// f32 angles) could move the pair as much as the table's rounding does. At f32 outputs the output is compared
// with the prediction up to the output's rounding (a pair where the table moves it less than that, or than a
// quarter of the output's error, tells nothing); at 16-bit outputs the stored values are compared with the
// prediction's, where those differ from the correctly rounded output's (elsewhere the table does not show).
// Only for outputs finer than t (the caller asks for those).
CacheEvidence cache_evidence(const Ctx& x, const std::vector<Rec>& recs, const Format& t, bool toward_zero,
                             double drift_k) {
  CacheEvidence ev;
  const Dtype d = x.c.dtype;
  const Format fd = format_of(d);
  const double u_d = fd.unit_roundoff();
  for (const Rec& r : recs) {
    if (r.zero || !(r.norm > 0)) continue;
    const double x0 = r.x[0], x1 = r.x[1], n2 = x0 * x0 + x1 * x1;
    if (!(n2 > 0)) continue;
    const double e0 = x.ref.exact[r.k0], e1 = x.ref.exact[r.k1];
    const double c = round_to(t, (e0 * x0 + e1 * x1) / n2, toward_zero),
                 s = round_to(t, (e1 * x0 - e0 * x1) / n2, toward_zero);
    const double p0 = x0 * c - x1 * s, p1 = x0 * s + x1 * c;
    const double effect = pair_hypot(p0 - e0, p1 - e1);
    const double drift = r.norm * drift_k * std::fabs(r.phi) * 0x1p-23;
    if (effect <= 4 * drift) continue;
    if (fd.precision >= 24) {
      const double err = pair_hypot(r.y[0] - e0, r.y[1] - e1), miss = pair_hypot(r.y[0] - p0, r.y[1] - p1);
      const double room = drift + 4 * u_d * r.norm;
      if (effect <= 4 * room || effect < err / 4) continue;
      if (miss <= std::max(err / 4, room)) ++ev.support;
      else ++ev.against;
    } else {
      const double q0 = round_to(fd, p0, false), q1 = round_to(fd, p1, false);
      if (q0 == load_f32(d, x.ref.rounded.data(), r.k0) && q1 == load_f32(d, x.ref.rounded.data(), r.k1)) continue;
      if (r.y[0] == q0 && r.y[1] == q1) ++ev.support;
      else ++ev.against;
    }
  }
  return ev;
}

// ---- precision: widened contracts ---------------------------------------------

// A precision diagnosis' detail lists the other single clauses that accept its case after this, each
// "--contract SPEC", separated by " or " (join_precision reads them).
constexpr std::string_view kAlsoAccepted = "also accepted by";

// Clause keys, in the order tried: 0 denormals=flush, 1 angles=f32:K, 2 cos-sin=f16, 3 arith=f16,
// 4 cos-sin=bf16, 5 arith=bf16.
Cause single_cause(int key) {
  switch (key) {
    case 0: return Cause::subnormals_flushed;
    case 1: return Cause::f32_angle_drift;
    case 2: return Cause::cos_sin_f16;
    case 3: return Cause::arith_f16;
    case 4: return Cause::cos_sin_bf16;
    case 5: return Cause::arith_bf16;
  }
  return Cause::unexplained;
}

}  // namespace

Diagnosis diagnose(const RopeCase& c, const void* got, const ReferenceOutput& ref, const Criteria& cr,
                   AngleModel model, const std::vector<HeadMap>& head_maps) {
  const uint32_t np = c.rotary_dim / 2;
  const Dtype d = c.dtype;
  const Format fmt_d = format_of(d);
  const Ctx x{c, got, ref, cr, np, ref.angle.size() == c.n_tokens() * np};
  const Contract cur = contract_of(cr);
  const std::string cur_spec = cr.flat > 0 ? fmt::format("a flat bound of {} u", g4(cr.flat)) : exact_short_spec(cur);
  // What a pair is held to, as the object of "beyond" / "within": "the default allowance", "the flat bound of 3 u".
  const std::string cur_allowance =
      cr.flat > 0 ? fmt::format("the flat bound of {} u", g4(cr.flat)) : "the " + exact_short_spec(cur) + " allowance";

  // The finite pairs against the reference, and what fails.
  std::vector<Rec> recs;
  recs.reserve(c.n_tokens() * c.n_heads * np);
  uint64_t acc_bad = 0, id_bad = 0;
  uint64_t id_far = 0;  // pairs at angle 0 failing the identity rule and beyond the metric's allowance too
  double ref_residual = 0;
  for (size_t t = 0; t < c.n_tokens(); ++t)
    for (size_t h = 0; h < c.n_heads; ++h) {
      const size_t base = head_offset(c, t, h);
      for (uint32_t i = 0; i < np; ++i) {
        const auto [d0, d1] = pair_elements(c, i);
        Rec r{t, h, i, base + d0, base + d1, {}, {}, 0, x.ref_phi(t, i), false, {}, {}};
        r.x[0] = load_f32(d, c.input.data(), r.k0);
        r.x[1] = load_f32(d, c.input.data(), r.k1);
        r.y[0] = load_f32(d, got, r.k0);
        r.y[1] = load_f32(d, got, r.k1);
        const double e0 = ref.exact[r.k0], e1 = ref.exact[r.k1];
        if (!std::isfinite(r.x[0]) || !std::isfinite(r.x[1]) || !std::isfinite(r.y[0]) || !std::isfinite(r.y[1]) ||
            !std::isfinite(e0) || !std::isfinite(e1))
          continue;
        // As the judge: norms are the exact output's (the input's times the attention factor, or with a given
        // table the norm of its (cos, sin): pair_gain), and an angle of 0 is the identity only with a gain of 1.
        const double af = pair_gain(c, t, i);
        r.norm = pair_hypot(r.x[0], r.x[1]) * af;
        r.zero = af == 1.0 && (x.have_angles ? r.phi == 0
                                             : (load_f32(d, ref.rounded.data(), r.k0) == r.x[0] &&
                                                load_f32(d, ref.rounded.data(), r.k1) == r.x[1]));
        r.pe = pair_error(d, af * r.x[0], af * r.x[1], r.y[0], r.y[1], e0, e1, r.phi);
        r.hint = pair_hint(fmt_d, af * r.x[0], af * r.x[1], e0, e1);
        ref_residual = std::max(ref_residual, r.pe.e);
        if (r.zero && cr.flat <= 0) {
          if (!identity_ok(x, cr, r)) {
            ++id_bad;
            if (!metric_ok(x, cr, r)) ++id_far;
          }
        } else if (!metric_ok(x, cr, r)) {
          ++acc_bad;
        }
        recs.push_back(r);
      }
    }
  // Pass-through dims: which changed (the judge's identity clause), in how many heads, and to what.
  std::set<uint32_t> pt_dims;
  uint64_t pt_bad = 0, pt_heads = 0;
  bool pt_zeroed = true;
  for (size_t t = 0; t < c.n_tokens(); ++t)
    for (size_t h = 0; h < c.n_heads; ++h) {
      bool any = false;
      for (uint32_t k = 0; k < c.head_dim; ++k) {
        if (is_rotated(c, k)) continue;
        const size_t e = head_offset(c, t, h) + k;
        if (keeps_input(cr, d, load_bits(d, c.input.data(), e), load_bits(d, got, e))) continue;
        ++pt_bad;
        any = true;
        pt_dims.insert(k);
        if (load_bits(d, got, e) != 0) pt_zeroed = false;
      }
      pt_heads += any;
    }
  // The special-value findings (NaN and Inf rules, non-finite outputs): the judge's own count, from the output
  // with every finite pair replaced by its correctly rounded value and the pass-through dims restored, so that
  // the judge formats no message for the many pairs this function measures itself.
  Bytes masked(static_cast<const unsigned char*>(got), static_cast<const unsigned char*>(got) + c.n_bytes());
  for (const Rec& r : recs) {
    store_bits(d, masked.data(), r.k0, load_bits(d, ref.rounded.data(), r.k0));
    store_bits(d, masked.data(), r.k1, load_bits(d, ref.rounded.data(), r.k1));
  }
  for (size_t t = 0; t < c.n_tokens(); ++t)
    for (size_t h = 0; h < c.n_heads; ++h)
      for (uint32_t k = 0; k < c.head_dim; ++k) {
          if (is_rotated(c, k)) continue;
        const size_t e = head_offset(c, t, h) + k;
        store_bits(d, masked.data(), e, load_bits(d, c.input.data(), e));
      }
  JudgeOptions jo;
  jo.max_findings = 1;
  jo.keep_values = false;
  auto special_under = [&](const Criteria& w) { return judge_output(c, ref, masked.data(), w, jo).violations; };
  const uint64_t special = special_under(cr);

  Diagnosis dg;
  dg.residual = ref_residual;
  if (acc_bad + id_bad + pt_bad + special == 0) {
    dg.cause = Cause::none;
    dg.detail = fmt::format("the output passes under {}; largest pair error {} u", cur_spec, g4(ref_residual));
    return dg;
  }
  std::string pt_text;
  if (pt_bad) {
    std::vector<uint32_t> v(pt_dims.begin(), pt_dims.end());
    pt_text = fmt::format("dims {} of {} changed in {} of {} heads{}", ranges(v), c.head_dim, pt_heads,
                          c.n_tokens() * c.n_heads, pt_zeroed ? " (set to +0)" : "");
  }
  // What the explanation of the rotated pairs leaves unexplained.
  auto also = [&](bool with_identity) {
    std::string s;
    if (with_identity && id_bad) s += fmt::format("; {} pair(s) at angle 0 also fail the identity rule", id_bad);
    if (pt_bad) s += "; also pass-through " + pt_text;
    if (special) s += fmt::format("; also {} special-value finding(s)", special);
    return s;
  };

  // The candidates' cos and sin rows, built on first use.
  const bool shifts_ok = std::all_of(c.positions.begin(), c.positions.end(),
                                     [](int64_t m) { return m > -(int64_t(1) << 62) && m < (int64_t(1) << 62); });
  bool token_index_differs = false;
  for (size_t t = 0; t < c.n_tokens(); ++t) token_index_differs |= c.position(t) != int64_t(t);
  // A caller-given table: positions are its rows; a shift reads another row (no composition of angles), and the
  // hypotheses about how angles are computed (theta's exponent, positions narrowed) do not apply.
  const bool given = c.table.has_value();
  const bool exact_model = model == AngleModel::exact && !given;
  std::optional<Rows> rows_a;
  auto rows = [&]() -> const Rows& {
    if (!rows_a) {
      std::vector<int64_t> need = c.positions;
      if (shifts_ok) {
        if (exact_model) {
          need.push_back(1);
          need.push_back(2);
        } else {
          for (int64_t m : c.positions)
            for (int64_t k : {1, -1, 2, -2}) need.push_back(m + k);
        }
      }
      if (token_index_differs)
        for (size_t t = 0; t < c.n_tokens(); ++t) need.push_back(int64_t(t));
      rows_a = probe_rows(c, need, c.inv_freq, model);
    }
    return *rows_a;
  };
  auto at = [&](const Rows& r, int64_t m, uint32_t i) {
    const size_t k = r.row(m) * np + i;
    return Trig{r.c[k], r.s[k], r.phi[k]};
  };

  // The rotated pairs fail, or pairs at angle 0 are far from their input (a rotation where there is none,
  // as at position 0 of m+1): look for what the kernel computes. Pairs at angle 0 merely off by the identity
  // rule (-0 -> +0, a rounding) are "identity changed" below.
  if (acc_bad > 0 || id_far > 0) {
    // ---- 1. structural explanations --------------------------------------------
    std::vector<Candidate> cands;
    const Rows& A = rows();
    const Layout other = c.layout == Layout::interleaved ? Layout::half_split : Layout::interleaved;
    auto plain = [&](size_t t, uint32_t i) { return at(A, c.pair_position(t, i), i); };
    const bool inverse = c.direction == Direction::inverse;
    cands.push_back(rotation(c, inverse ? Cause::inverse_computed_as_forward : Cause::angle_negated,
                             inverse ? "R(+phi) x: the direction ignored" : "R(-phi) x", c.layout,
                             [&](size_t t, uint32_t i) {
      Trig g = plain(t, i);
      g.s = -g.s;
      return g;
    }));
    if (np > 1)
      cands.push_back(rotation(c, Cause::other_layout,
                               other == Layout::interleaved ? "pairs (2i, 2i+1) rotated by theta_i"
                                                            : "pairs (i, i + rotary_dim/2) rotated by theta_i",
                               other, plain));
    if (shifts_ok)
      for (int k : {1, -1, 2, -2}) {
        const Cause shift = k == 1    ? Cause::position_plus_1
                            : k == -1 ? Cause::position_minus_1
                            : k == 2  ? Cause::position_plus_2
                                      : Cause::position_minus_2;
        cands.push_back(rotation(c, shift, fmt::format("the rotation at positions m{:+d}", k), c.layout,
                                 [&](size_t t, uint32_t i) {
                                   const int64_t m = c.positions[t];
                                   if (!exact_model) return at(A, m + k, i);
                                   // R(phi_m + phi_k) = R(phi_m) R(phi_k), phi_-k = -phi_k.
                                   const Trig a = at(A, m, i), b = at(A, std::abs(k), i);
                                   const double sb = k < 0 ? -b.s : b.s;
                                   const double sgn_t = c.inv_freq.empty() || c.inv_freq[i] >= 0 ? 1.0 : -1.0;
                                   const double sgn_s = c.position_scale >= 0 ? 1.0 : -1.0;
                                   const double pa = (m < 0 ? -1.0 : 1.0) * sgn_t * sgn_s * a.phi;
                                   const double pb = (k < 0 ? -1.0 : 1.0) * sgn_t * sgn_s * b.phi;
                                   return Trig{a.c * b.c - a.s * sb, a.s * b.c + a.c * sb, std::fabs(pa + pb)};
                                 }));
      }
    if (c.inv_freq.empty() && !given) {
      auto table = [&](double num, uint32_t den) {
        std::vector<double> th(np);
        for (uint32_t i = 0; i < np; ++i)
          th[i] = double(std::pow((long double)c.base, -(long double)num * i / (long double)den));
        return th;
      };
      if (c.rotary_dim < c.head_dim) {
        const Rows B = probe_rows(c, c.positions, table(2, c.head_dim), model);
        cands.push_back(rotation(c, Cause::theta_from_head_dim,
                                 fmt::format("theta_i = base^(-2i/{}) (head_dim)", c.head_dim), c.layout,
                                 [&](size_t t, uint32_t i) { return at(B, c.pair_position(t, i), i); }));
      }
      const Rows C = probe_rows(c, c.positions, table(1, c.rotary_dim), model);
      cands.push_back(rotation(c, Cause::exponent_i_over_d, fmt::format("theta_i = base^(-i/{})", c.rotary_dim), c.layout,
                               [&](size_t t, uint32_t i) { return at(C, c.pair_position(t, i), i); }));
      // A scaling rule (rope_scaling) not applied: theta from base alone, the attention factor as given (it is
      // never the rule's). Kernels that drop the model's rope_scaling compute exactly this.
      if (c.freq_rule && c.freq_rule->type != FrequencyRuleType::default_) {
        const Rows F = probe_rows(c, c.positions, table(2, c.rotary_dim), model);
        cands.push_back(rotation(c, Cause::frequency_rule_ignored,
                                 fmt::format("theta_i = base^(-2i/{}): the {} rule not applied", c.rotary_dim,
                                             to_string(c.freq_rule->type)),
                                 c.layout, [&](size_t t, uint32_t i) { return at(F, c.pair_position(t, i), i); }));
        // The rule's known mistakes (reference/frequency_rules.hpp, RuleMistake), evaluated exactly.
        const std::tuple<FrequencyRuleType, RuleMistake, Cause, const char*> mistakes[] = {
            {FrequencyRuleType::yarn, RuleMistake::yarn_ramp_reversed, Cause::yarn_ramp_reversed,
             "theta0*ramp + theta0/f*(1 - ramp): interpolated where YaRN extrapolates, and back"},
            {FrequencyRuleType::llama3, RuleMistake::llama3_ratio_inverted, Cause::llama3_smoothing_inverted,
             "smooth = (wavelen/L - low)/(high - low): the ratio L/wavelen inverted"}};
        for (const auto& [type, mistake, cause, what] : mistakes) {
          if (c.freq_rule->type != type) continue;
          std::vector<double> th;
          try {
            th = theta_as_double(evaluate_frequency_rule(
                *c.freq_rule, c.rotary_dim, c.base,
                c.rule_seq_len ? std::optional<uint64_t>(c.rule_seq_len) : std::nullopt, kDefaultRuleBits, mistake));
          } catch (const std::exception&) {
            continue;  // (the mistaken table cannot be evaluated: not this cause)
          }
          const Rows M = probe_rows(c, c.positions, th, model);
          cands.push_back(rotation(c, cause, what, c.layout,
                                   [&, M](size_t t, uint32_t i) { return at(M, c.pair_position(t, i), i); }));
        }
      }
    }
    // Positions taken as a narrower type: rounded to f32 (a float position tensor; every position up to 2^24
    // is an f32) or truncated to 32 bits (an int position: 2^31 -> -2^31, 2^32 + 1 -> 1).
    if (!given) {
      auto as_f32 = [](int64_t m) {
        return std::llabs(m) < (int64_t(1) << 62) ? int64_t(static_cast<float>(m)) : m;
      };
      auto as_int32 = [](int64_t m) { return int64_t(int32_t(uint32_t(uint64_t(m)))); };
      // (a bf16 position tensor: position_ids cast with the model's activations; every position up to 256 is one)
      auto as_bf16 = [](int64_t m) {
        return std::llabs(m) < (int64_t(1) << 62) ? int64_t(bf16_bits_to_f32(f32_to_bf16_bits(static_cast<float>(m))))
                                                  : m;
      };
      const std::pair<Cause, int64_t (*)(int64_t)> narrow[] = {{Cause::positions_rounded_to_f32, +as_f32},
                                                                 {Cause::positions_rounded_to_bf16, +as_bf16},
                                                                 {Cause::positions_truncated_to_32_bits, +as_int32}};
      for (const auto& n : narrow) {
        const Cause name = n.first;
        int64_t (*conv)(int64_t) = n.second;  // not a structured binding: clang 14 cannot capture one
        std::vector<int64_t> moved;
        for (int64_t m : c.positions) moved.push_back(conv(m));
        if (moved == c.positions) continue;
        const Rows P = probe_rows(c, moved, c.inv_freq, model);
        cands.push_back(rotation(c, name, "the rotation at the " + std::string(name_of(name)), c.layout,
                                 [&](size_t t, uint32_t i) { return at(P, conv(c.pair_position(t, i)), i); }));
      }
    }
    // The frequencies rounded to bf16 (an inv_freq buffer cast with the model's weights, `model.to(bfloat16)`):
    // theta_i = bf16(base^(-2i/d)), or bf16 of the caller's table; without a frequency rule (a rule's table is
    // its own).
    if (!given && (!c.freq_rule || c.freq_rule->type == FrequencyRuleType::default_)) {
      std::vector<double> th(np), tb(np);
      for (uint32_t i = 0; i < np; ++i) {
        th[i] = c.inv_freq.empty() ? double(std::pow((long double)c.base, -2.0L * i / (long double)c.rotary_dim))
                                   : c.inv_freq[i];
        tb[i] = bf16_bits_to_f32(f32_to_bf16_bits(static_cast<float>(th[i])));
      }
      if (tb != th) {
        const Rows F = probe_rows(c, c.positions, tb, model);
        cands.push_back(rotation(c, Cause::frequencies_rounded_to_bf16, "theta_i rounded to bf16", c.layout,
                                 [&, F](size_t t, uint32_t i) { return at(F, c.pair_position(t, i), i); }));
      }
    }
    // A per-token table (ABI v4) read as a table indexed by position: token t gets row positions[t], the values of
    // the token at that index (where there is one).
    const bool per_token = given && c.table->by_token;
    if (per_token) {
      std::vector<int64_t> read(c.n_tokens(), INT64_MIN);
      bool differs = false;
      for (size_t t = 0; t < c.n_tokens(); ++t) {
        const int64_t m = c.position(t);
        if (m >= 0 && uint64_t(m) < c.n_tokens()) read[t] = c.position(size_t(m));
        differs |= read[t] != c.position(t);
      }
      if (differs)
        cands.push_back(rotation(c, Cause::token_table_indexed_by_position,
                                 "row positions[t] of a table with a row per token, not row t", c.layout,
                                 [&, read](size_t t, uint32_t i) {
                                   if (read[t] == INT64_MIN) return Trig{std::nan(""), std::nan(""), std::nan("")};
                                   return at(A, read[t], i);
                                 }));
    }
    if (token_index_differs && !per_token)
      cands.push_back(rotation(c, given ? Cause::table_row_indexed_by_token : Cause::token_index_as_position,
                               given ? fmt::format("rows 0..{} of the table, not the positions' rows", c.n_tokens() - 1)
                                     : fmt::format("the rotation at positions 0..{}", c.n_tokens() - 1),
                               c.layout, [&](size_t t, uint32_t i) { return at(A, int64_t(t), i); }));
    // Implicit positions of several sequences counted from the start of the batch, not of each sequence (the
    // varlen offset not reset: MLX #3494, TransformerEngine #1930): token t of sequence b at t + seq_offsets[b].
    if (c.tensor && c.tensor->pos == PositionForm::implicit && c.n_pos_axes == 1 &&
        (c.tensor->rank == 4 || c.tensor->cu_seqlens.size() > 2)) {
      const TensorCall& tc = *c.tensor;
      std::vector<int64_t> moved(c.n_tokens());
      for (size_t t = 0, b = 0; t < c.n_tokens(); ++t) {
        if (tc.rank == 4) b = t / (c.n_tokens() / tc.batch);
        else
          while (uint64_t(tc.cu_seqlens[b + 1]) <= t) ++b;
        moved[t] = int64_t(t) + (tc.seq_offsets.empty() ? 0 : tc.seq_offsets[b]);
      }
      if (moved != c.positions) {
        const Rows V = probe_rows(c, moved, c.inv_freq, model);
        cands.push_back(rotation(c, Cause::sequence_start_not_subtracted,
                                 "implicit positions counted from the batch's first token, not each sequence's",
                                 c.layout, [&, moved](size_t t, uint32_t i) { return at(V, moved[t], i); }));
      }
      // The offsets of the sequences after the first read as the first one's (an offset array taken for a
      // scalar: MLX's array offsets with batch > 1), or not read at all.
      if (tc.seq_offsets.size() > 1) {
        const std::pair<Cause, const char*> offsets[] = {
            {Cause::first_sequence_offset_for_every_sequence, "every sequence at seq_offsets[0]"},
            {Cause::sequence_offsets_ignored, "every sequence from position 0"}};
        for (const auto& [cause, what] : offsets) {
          const bool first = cause == offsets[0].first;
          std::vector<int64_t> at_first(c.n_tokens());
          for (size_t t = 0, b = 0; t < c.n_tokens(); ++t) {
            if (tc.rank == 4) b = t / (c.n_tokens() / tc.batch);
            else
              while (uint64_t(tc.cu_seqlens[b + 1]) <= t) ++b;
            const int64_t off = tc.seq_offsets[b];
            at_first[t] = c.positions[t] - off + (first ? tc.seq_offsets[0] : 0);
          }
          if (at_first == c.positions) continue;
          const Rows V = probe_rows(c, at_first, c.inv_freq, model);
          cands.push_back(rotation(c, cause, what, c.layout,
                                   [&, at_first](size_t t, uint32_t i) { return at(V, at_first[t], i); }));
        }
      }
    }
    // (x0 s - x1 c, x0 c + x1 s) = R(pi/2 - phi) x: a rotation whose cos is sin phi and sin is cos phi.
    cands.push_back(rotation(c, Cause::cos_and_sin_swapped, "(x0 sin - x1 cos, x0 cos + x1 sin)", c.layout,
                             [&](size_t t, uint32_t i) {
                               const Trig g = plain(t, i);
                               return Trig{g.s, g.c, g.phi};
                             }));
    // ABI v2: the attention factor applied twice or not at all; every pair on axis 0 (the axis map ignored).
    if (c.attention_factor != 1.0) {
      const double af = c.attention_factor;
      cands.push_back(rotation(c, Cause::attention_factor_applied_twice, fmt::format("cos and sin times {:.17g}^2", af),
                               c.layout, [&](size_t t, uint32_t i) {
                                 const Trig g = plain(t, i);
                                 return Trig{g.c * af, g.s * af, g.phi};
                               }));
      cands.push_back(rotation(c, Cause::attention_factor_not_applied,
                               fmt::format("cos and sin without the factor {:.17g}", af), c.layout,
                               [&](size_t t, uint32_t i) {
                                 const Trig g = plain(t, i);
                                 return Trig{g.c / af, g.s / af, g.phi};
                               }));
    }
    if (c.n_pos_axes > 1 && !c.pair_axis.empty()) {
      cands.push_back(rotation(c, Cause::position_axes_ignored, "every pair rotated by its token's axis-0 position",
                               c.layout, [&](size_t t, uint32_t i) { return at(A, c.position(t, 0), i); }));
      // The map read as contiguous sections in axis order (Qwen2-VL's mrope_section: the first n0 pairs on axis
      // 0, the next n1 on axis 1, ...) where it interleaves the axes (Qwen3-VL's interleaved M-RoPE).
      std::vector<uint8_t> sections = c.pair_axis;
      std::sort(sections.begin(), sections.end());
      if (sections == c.pair_axis) {
        // A sectioned map (Qwen2-VL's mrope_section): the sections given to other axes (their order permuted), or a
        // boundary between two sections one pair off.
        const uint32_t n_axes = c.n_pos_axes;
        std::vector<uint32_t> sizes(n_axes, 0);
        for (uint8_t a : c.pair_axis)
          if (a < n_axes) ++sizes[a];
        std::vector<uint8_t> perm(n_axes);
        for (uint32_t a = 0; a < n_axes; ++a) perm[a] = uint8_t(a);
        while (n_axes <= 4 && std::next_permutation(perm.begin(), perm.end())) {
          std::vector<uint8_t> map(c.pair_axis.size());
          for (size_t i = 0; i < map.size(); ++i) map[i] = perm[c.pair_axis[i]];
          cands.push_back(rotation(c, Cause::mrope_sections_on_other_axes,
                                   fmt::format("the sections [{}] on axes ({})", fmt::join(sizes, ", "),
                                               fmt::join(perm, ", ")),
                                   c.layout, [&, map](size_t t, uint32_t i) { return at(A, c.position(t, map[i]), i); }));
        }
        uint32_t edge = 0;
        for (uint32_t a = 0; a + 1 < n_axes; ++a) {
          edge += sizes[a];
          for (int delta : {-1, +1}) {
            const int64_t moved = int64_t(edge) + delta;
            if (moved < 0 || moved > int64_t(c.pair_axis.size())) continue;
            std::vector<uint8_t> map = c.pair_axis;
            if (delta < 0) map[size_t(moved)] = uint8_t(a + 1);  // the section before ends a pair early
            else map[edge] = uint8_t(a);                       // ... or a pair late
            if (map == c.pair_axis) continue;
            cands.push_back(rotation(c, Cause::mrope_section_boundary_shifted,
                                     fmt::format("the boundary between the sections of axes {} and {} at pair {}, "
                                                 "not {}",
                                                 a, a + 1, moved, edge),
                                     c.layout,
                                     [&, map](size_t t, uint32_t i) { return at(A, c.position(t, map[i]), i); }));
          }
        }
      }
      if (sections != c.pair_axis)
        cands.push_back(rotation(c, Cause::axis_map_read_as_sections,
                                 "each axis's pairs taken as one contiguous section in axis order (Qwen2-VL's "
                                 "mrope_section), not the interleaved map",
                                 c.layout, [&, sections](size_t t, uint32_t i) {
                                   return at(A, c.position(t, sections[i]), i);
                                 }));
    }
    // Stride hypotheses: the kernel's loop over (token, head) reading and writing other elements than its own.
    // (The |angle| of a written pair's allowance is its rotation's, recorded at the written element's token and
    // the rotation's pair index.)
    for (const HeadMap& hm : head_maps) {
      const size_t H = c.n_heads, n = c.n_tokens() * H, D = c.head_dim, N = c.n_elements();
      if (hm.read.size() != n * D || hm.write.size() != n * D) continue;
      Candidate k{hm.cause, hm.what, c.layout, std::vector<double>(N, std::nan("")),
                  std::vector<double>(c.n_tokens() * np, 0.0), std::vector<char>(N, 1), std::vector<double>(N, std::nan(""))};
      for (size_t th = 0; th < n; ++th)
        for (uint32_t i = 0; i < np; ++i) {  // (the last write to an element is what it holds)
          const auto [d0, d1] = pair_elements(c, i);
          const size_t r0 = hm.read[th * D + d0], r1 = hm.read[th * D + d1];
          const size_t w[2] = {hm.write[th * D + d0], hm.write[th * D + d1]};
          const bool known = r0 < N && r1 < N;
          const Trig g = plain(th / H, i);
          const double x0 = known ? load_f32(d, c.input.data(), r0) : 0, x1 = known ? load_f32(d, c.input.data(), r1) : 0;
          const double out[2] = {x0 * g.c - x1 * g.s, x0 * g.s + x1 * g.c}, src[2] = {x0, x1};
          for (int e = 0; e < 2; ++e) {
            if (w[e] >= N) continue;
            k.unpredicted[w[e]] = known ? 0 : 2;
            k.y[w[e]] = known ? out[e] : std::nan("");
            k.source[w[e]] = known ? src[e] : std::nan("");
            k.phi[(w[e] / (H * D)) * np + i] = g.phi;
          }
        }
      cands.push_back(std::move(k));
    }
    // Pairs left unrotated: the pair indices some (token, head) of which fails and equals its input.
    {
      std::vector<char> idx(np, 0);
      for (const Rec& r : recs)
        if (!r.zero && x.copies(r.k0, r.k1) && !metric_ok(x, cr, r)) idx[r.pair] = 1;
      std::vector<uint32_t> which;
      for (uint32_t i = 0; i < np; ++i)
        if (idx[i]) which.push_back(i);
      if (!which.empty()) {
        Candidate k{Cause::pairs_left_unrotated, "", c.layout, ref.exact,
                    x.have_angles ? ref.angle : std::vector<double>(c.n_tokens() * np, 0.0), {}, {}};
        uint64_t moved = 0, kept = 0;  // (token, head)s of those pairs at a non-zero angle: all / copied
        for (size_t t = 0; t < c.n_tokens(); ++t)
          for (size_t h = 0; h < c.n_heads; ++h)
            for (uint32_t i : which) {
              if (x.have_angles && x.ref_phi(t, i) == 0) continue;
              const auto [d0, d1] = pair_elements(c, i);
              const size_t k0 = head_offset(c, t, h) + d0, k1 = head_offset(c, t, h) + d1;
              k.y[k0] = load_f32(d, c.input.data(), k0);
              k.y[k1] = load_f32(d, c.input.data(), k1);
              ++moved;
              kept += x.copies(k0, k1);
            }
        k.what = fmt::format("pairs {} of {} equal to their input {}", ranges(which), np,
                             kept == moved ? std::string("at every rotated position")
                                           : fmt::format("in {} of {} rotated (token, head)s", kept, moved));
        cands.push_back(std::move(k));
      }
    }
    struct Scored {
      const Candidate* k;
      Fit f;
    };
    // A HeadMap's candidate explains a failing pair by predicting it, or by not predicting it (nothing written
    // there, or computed from elements read from no element). It must predict one failing pair at least, or else
    // every failing pair lies where it writes nothing and holds what such an element holds: its input (in place),
    // or the one value the output buffer was filled with.
    auto explains_failures = [&](const Candidate& k) {
      if (k.unpredicted.empty()) return true;
      bool predicted = false, only_unwritten = true;
      std::optional<uint32_t> fill;
      for (const Rec& r : recs) {
        if (r.zero || metric_ok(x, cr, r)) continue;
        if (std::isfinite(k.y[r.k0]) && std::isfinite(k.y[r.k1])) {
          predicted = true;
          continue;
        }
        if (!k.unpredicted[r.k0] && !k.unpredicted[r.k1]) return false;  // (half a pair predicted: excused)
        for (size_t e : {r.k0, r.k1}) {
          if (k.unpredicted[e] != 1) {
            only_unwritten = false;
            continue;
          }
          const uint32_t b = load_bits(d, got, e);
          if (b == load_bits(d, c.input.data(), e)) continue;
          if (!fill) fill = b;
          else if (*fill != b) only_unwritten = false;
        }
      }
      return predicted || only_unwritten;
    };
    // With a caller-given table, a row read by the token's index is the likelier of the readings of another row: it
    // goes before the position shifts (a tie between them -- row 0 of a one-token case is position m-1's row too --
    // is its).
    if (given) {
      const auto by_token = std::find_if(cands.begin(), cands.end(), [](const Candidate& k) {
        return k.cause == Cause::table_row_indexed_by_token || k.cause == Cause::token_table_indexed_by_position;
      });
      if (by_token != cands.end()) {
        const size_t to = std::min<size_t>(cands.size() - 1, np > 1 ? 2 : 1);  // (after angle negated, other layout)
        if (size_t(by_token - cands.begin()) > to)
          std::rotate(cands.begin() + to, by_token, by_token + 1);
      }
    }
    std::vector<Scored> fits;
    for (const Candidate& k : cands) {
      const Fit f = fit(x, k, true);
      if (f.fits() && explains_failures(k)) fits.push_back({&k, f});
    }
    if (!fits.empty()) {
      std::stable_sort(fits.begin(), fits.end(),
                       [](const Scored& a, const Scored& b) { return a.f.residual < b.f.residual; });
      // Explanations that fit equally well (residuals within 0.1 %: the same rotation computed two ways, as
      // "position m-2" and "angle negated" at position 1) go to the first in the candidates' order, which is
      // the order of plausibility; the others are still listed.
      {
        size_t first = 0;
        for (size_t k = 1; k < fits.size(); ++k)
          if (fits[k].f.residual <= fits.front().f.residual * 1.001 + 1e-12 && fits[k].k < fits[first].k) first = k;
        std::rotate(fits.begin(), fits.begin() + first, fits.begin() + first + 1);
      }
      const Scored& best = fits.front();
      dg.cause = best.k->cause;
      dg.residual = best.f.residual;
      std::string others;
      for (size_t k = 1; k < fits.size(); ++k)
        others += (others.empty() ? "" : ", ") + std::string(name_of(fits[k].k->cause)) + " (" +
                  g4(fits[k].f.residual) + " u)";
      dg.detail = fmt::format(
          "every pair within {} against {}: residual {} u, against the exact rotation {} u{}{}",
          cur_allowance, best.k->what, g4(best.f.residual), g4(ref_residual),
          others.empty() ? "" : "; also fits: " + others, also(false));
      return dg;
    }

    // ---- 2a. truncating conversion ---------------------------------------------------
    // The signature of a conversion that truncates (toward zero) rather than rounds: every output element the
    // exact value does not hit is its neighbour toward zero, never the one away from it -- where rounding to
    // nearest picks each about half the time. Read per element, against the exact value, on the pairs the
    // contract's rounding share cannot explain alone. Everywhere: "truncating stores". Only in the pairs from
    // some index on in every head, the others rounded to nearest: a tail loop that converts differently from the
    // vector loop, a bug (no contract is suggested for it). Before the radial bias, which it refines (a tail's
    // bias is diluted by the pairs rounded to nearest).
    if (cr.flat <= 0) {
      if (auto tr = truncation_signature(x, recs)) {
        if (tr->from_pair == 0) {
          dg.cause = Cause::truncating_stores;
          dg.detail = fmt::format(
              "every output the exact value misses is its neighbour toward zero ({} of {} elements), never the one "
              "away from it (rounding to nearest picks each about half the time); {} pair(s) beyond {}, "
              "largest error {} u{}",
              tr->down, tr->down + tr->up, acc_bad, cur_allowance, g4(ref_residual), also(true));
          if (!cur.truncating_stores) {
            Contract w = cur;
            w.truncating_stores = true;
            size_t h = SIZE_MAX;
            if (finite_pairs_pass(x, recs, Criteria::of(cr.model, w), h)) dg.contract = exact_short_spec(w);
          }
        } else {
          dg.cause = Cause::truncating_stores_tail;
          dg.detail = fmt::format(
              "pairs {}..{} of each head's {} (a tail of {}) are truncated: every output of theirs the exact value "
              "misses is its neighbour toward zero ({} of {} elements); pairs 0..{} round to nearest ({} toward "
              "zero, {} away) -- the tail converts unlike the loop before it; {} pair(s) beyond {}, "
              "largest error {} u{}",
              tr->from_pair, np - 1, np, np - tr->from_pair, tr->down, tr->down + tr->up, tr->from_pair - 1,
              tr->head_down, tr->head_up, acc_bad, cur_allowance, g4(ref_residual), also(true));
        }
        return dg;
      }
    }

    // ---- 2b. a truncating cos/sin table ------------------------------------------------
    // A table converted to a narrow type by truncation (keeping bf16's high 16 bits of an f32) is up to one ulp of
    // the type off where a table rounded to nearest is half of one: what cos-sin=bf16 describes is the rounded
    // table, and a case it happens to accept does not make the truncation right. Read where the outputs are finer
    // than the table (a bf16 table at f16 or f32 outputs, an f16 one at f32): the output is x times cos and sin
    // truncated, not rounded (cache_evidence).
    // Before the radial bias, which it causes (truncation shortens (cos, sin)).
    // The angle drift a table's reading allows for (cache_evidence): what an f32 pipeline's angles can need here, or
    // the contract's K where that is larger (also for the cache clauses of stage 3).
    const double table_drift_k =
        std::max(real_f32_max_k(c), cur.angles == Contract::Angles::f32 ? cur.angle_ulps : 0.0);
    if (cr.flat <= 0) {
      for (const Dtype t : {Dtype::bf16, Dtype::f16}) {
        if (format_of(t).precision >= fmt_d.precision) continue;  // the output's rounding is as coarse as the table's
        const CacheEvidence tz = cache_evidence(x, recs, format_of(t), true, table_drift_k);
        if (!tz.holds()) continue;
        const CacheEvidence rn = cache_evidence(x, recs, format_of(t), false, table_drift_k);
        if (rn.holds()) continue;
        dg.cause = Cause::truncating_cos_sin_table;
        dg.detail = fmt::format(
            "the cos/sin the kernel used are those of a {} table made by truncation (toward zero): {} of {} pairs "
            "that can tell are the input times them; rounded to nearest, {} of {}; a bug (a table rounded to "
            "nearest is what cos-sin={} describes); {} pair(s) beyond {}, largest error {} u{}",
            to_string(t), tz.support, tz.support + tz.against, rn.support, rn.support + rn.against, to_string(t),
            acc_bad, cur_allowance, g4(ref_residual), also(true));
        return dg;
      }
    }

    // ---- 2. radial bias ----------------------------------------------------------
    // Not when flushing subnormals alone explains the output: a flushed pair is shortened too (to 0).
    bool flush_explains = false;
    if (cr.flat <= 0 && !cur.flush_denormals) {
      Contract w = cur;
      w.flush_denormals = true;
      size_t h = SIZE_MAX;
      flush_explains = finite_pairs_pass(x, recs, Criteria::of(cr.model, w), h);
    }
    if (!flush_explains) {
      uint64_t n = 0;
      double sum_r = 0;
      bool tangential_ok = true;
      for (const Rec& r : recs) {
        if (r.zero) continue;
        const PairAllowance a = cr.allowance(c, r.pair, r.norm, r.phi, r.hint);
        if (!(std::fabs(r.pe.tangential) <= a.tangential)) {
          tangential_ok = false;
          break;
        }
        ++n;
        sum_r += r.pe.radial;
      }
      if (tangential_ok && n >= 32 && sum_r / double(n) < -0.25) {
        dg.cause = Cause::radial_bias;
        dg.detail = fmt::format(
            "every pair within its tangential allowance, but the mean radial error is {:+.3f} u over {} pairs "
            "(outputs shortened, as by truncating stores); {} pair(s) beyond {}, largest error {} u{}",
            sum_r / double(n), n, acc_bad, cur_allowance, g4(ref_residual), also(true));
        // A kernel that stores by truncation (vLLM's CPU bf16 conversion, docs/real-kernels.md) declares it:
        // suggested only where every finite pair then passes.
        if (cr.flat <= 0 && !cur.truncating_stores) {
          Contract w = cur;
          w.truncating_stores = true;
          size_t h = SIZE_MAX;
          if (finite_pairs_pass(x, recs, Criteria::of(cr.model, w), h)) dg.contract = exact_short_spec(w);
        }
        return dg;
      }
    }

    // ---- 3. precision: the contract widened ---------------------------------------
    bool beyond_real_k = false;  // an angle clause alone would pass it, with a K no f32 pipeline needs
    if (cr.flat <= 0) {
      const double ucur_cs = unit_roundoff(cur.cos_sin), ucur_ar = unit_roundoff(cur.arith);
      const bool angle_open = cur.angles == Contract::Angles::exact || cur.angle_ulps == 0 || cur.angle_ulps < kMaxK;
      std::vector<int> avail;
      if (!cur.flush_denormals) avail.push_back(0);
      if (angle_open) avail.push_back(1);
      // Only clauses that describe a plausible pipeline for this output type (docs/gate.md, "Plausible
      // pipelines"): arithmetic in a 16-bit type T in T's own outputs (the activation dtype), or in wider outputs
      // that are all T's values (T's results upcast: a rotation computed in bf16, then .float()); a kernel does
      // not compute in f16 to store bf16. A cache is the kernel's whatever the call's dtype (one f16 table for
      // every call), so either 16-bit cache is tried at every output type.
      auto outputs_in = [&](Dtype t) {
        if (d == t) return true;
        if (unit_roundoff(t) < unit_roundoff(d)) return false;
        for (const Rec& r : recs)
          if (!r.zero)
            for (const double y : r.y)
              if (!is_value_of(t, y)) return false;
        return true;
      };
      if (unit_roundoff(Dtype::f16) > ucur_cs) avail.push_back(2);
      if (unit_roundoff(Dtype::f16) > ucur_ar && outputs_in(Dtype::f16)) avail.push_back(3);
      if (unit_roundoff(Dtype::bf16) > ucur_cs) avail.push_back(4);
      if (unit_roundoff(Dtype::bf16) > ucur_ar && outputs_in(Dtype::bf16)) avail.push_back(5);
      // Every set of clauses (one cos-sin, one arith at most), smallest first, then in the order tried.
      std::vector<std::vector<int>> sets;
      for (uint32_t mask = 1; mask < (1u << avail.size()); ++mask) {
        std::vector<int> s;
        for (size_t b = 0; b < avail.size(); ++b)
          if (mask & (1u << b)) s.push_back(avail[b]);
        const auto n_cs = std::count_if(s.begin(), s.end(), [](int k) { return k == 2 || k == 4; });
        const auto n_ar = std::count_if(s.begin(), s.end(), [](int k) { return k == 3 || k == 5; });
        if (n_cs <= 1 && n_ar <= 1) sets.push_back(std::move(s));
      }
      size_t hint = SIZE_MAX;
      auto widen = [&](const std::vector<int>& s, double k_ulps) {
        Contract w = cur;
        for (int key : s) {
          if (key == 0) w.flush_denormals = true;
          if (key == 1) {
            w.angles = Contract::Angles::f32;
            w.angle_ulps = k_ulps;
          }
          if (key == 2) w.cos_sin = Dtype::f16;
          if (key == 3) w.arith = Dtype::f16;
          if (key == 4) w.cos_sin = Dtype::bf16;
          if (key == 5) w.arith = Dtype::bf16;
        }
        return w;
      };
      auto passes = [&](const Contract& w) { return finite_pairs_pass(x, recs, Criteria::of(cr.model, w), hint); };
      // The pair with the largest angle error, in f32 ulps of |phi|, among those that fail the contract
      // widened by the set's other clauses: the angle clause is what they need. (Elsewhere the output's own
      // rounding can dominate the angle error of a small |phi|.)
      auto worst_angle = [&](const Criteria& w) {
        const Rec* at_rec = nullptr;
        for (const Rec& r : recs)
          if (!r.zero && !std::isnan(r.pe.angle_ulps) && (!at_rec || r.pe.angle_ulps > at_rec->pe.angle_ulps) &&
              !metric_ok(x, w, r))
            at_rec = &r;
        return at_rec;
      };
      // Evidence each clause needs besides making the case pass: flushing needs an element that is 0 where
      // the input or the exact output is subnormal; angle drift needs the radial components within their
      // allowance without the angle clause (drift is tangential; only its second order is radial, so a
      // huge K must not "explain" an error that is radial too, like a narrow cos/sin cache's).
      // A zero counts only where the exact output is at least the smallest subnormal: below it a truncating
      // store (toward zero) gives 0 too, and below half of it a rounding one (vLLM's truncating bf16 stores
      // were named "subnormals flushed" on two such elements).
      const double denorm_min = Format::pow2(fmt_d.emin - fmt_d.precision + 1);
      auto flushed_at = [&](size_t e) {
        const double xi = load_f32(d, c.input.data(), e), yi = load_f32(d, got, e), ri = load_f32(d, ref.rounded.data(), e);
        return yi == 0 && (is_subnormal(fmt_d, xi) || is_subnormal(fmt_d, ri)) && std::fabs(ref.exact[e]) >= denorm_min;
      };
      bool any_flushed = false;
      for (size_t e = 0; e < c.n_elements() && !any_flushed; ++e) any_flushed = flushed_at(e);
      // A pure rotation keeps the pair's length: |y| - |x| within the rounding's radial allowance (without
      // the angle clause) for every pair.
      auto radial_fits_without_angle = [&](const std::vector<int>& s) {
        std::vector<int> rest;
        for (int key : s)
          if (key != 1) rest.push_back(key);
        const Criteria w = Criteria::of(cr.model, widen(rest, 0));
        const double u = fmt_d.unit_roundoff();
        for (const Rec& r : recs) {
          if (r.zero) continue;
          const double len = (pair_hypot(r.y[0], r.y[1]) - r.norm) / (std::max(r.norm, fmt_d.min_normal()) * u);
          if (!(std::fabs(len) <= w.allowance(c, r.pair, r.norm, r.phi, r.hint).radial)) return false;
        }
        return true;
      };
      // Smallest sets first; among sets of one size, those without the angle clause first: an angle K can
      // always be made large enough to cover a narrow type's error, a cache or arithmetic clause cannot cover
      // an angle error that grows with the position. Except when the output is a rotation (every pair's
      // length within the contract's radial allowance): then the error is all phase, which is what angle
      // drift produces and a narrow cos/sin cache or narrow arithmetic does not (their rounding of cos and
      // sin, or of the products, changes the length as much as the phase); a wide enough cache clause
      // would still accept it, and name the wrong cause.
      const bool rotation_only = radial_fits_without_angle({});
      std::stable_sort(sets.begin(), sets.end(), [&](const std::vector<int>& a, const std::vector<int>& b) {
        const bool aa = std::find(a.begin(), a.end(), 1) != a.end(), ba = std::find(b.begin(), b.end(), 1) != b.end();
        if (a.size() != b.size()) return a.size() < b.size();
        if (aa != ba) return rotation_only ? aa : !aa;
        return a < b;
      });
      // Arithmetic in a type T leaves every rotated output in T's range: 0, or between T's smallest subnormal and
      // its largest finite number (T's results, then stored). An output outside it is evidence against the clause:
      // a bf16 kernel's outputs around 2^-132 are none of f16's, and arith=f16 "accepted" them only because its
      // allowance is vacuous at that scale (truncating bf16 stores were named "arithmetic at f16 precision").
      auto in_range_of = [&](Dtype t) {
        const Format ft = format_of(t);
        const double lo = Format::pow2(ft.emin - ft.precision + 1), hi = ft.max_finite();
        for (const Rec& r : recs) {
          if (r.zero) continue;
          for (const double y : r.y)
            if (y != 0 && (std::fabs(y) < lo || std::fabs(y) > hi)) return false;
        }
        return true;
      };
      const bool f16_range = in_range_of(Dtype::f16), bf16_range = in_range_of(Dtype::bf16);
      const double k_real = real_f32_max_k(c);
      // A narrow cache in an otherwise f32 pipeline, at f32 outputs: its values must not be contradicted by the
      // output (the table's signature, cache_evidence), not only its allowance accept it -- an f32 kernel whose sin/cos are
      // merely inaccurate (a short polynomial) has errors of an f16 cache's size and no f16 anywhere.
      const bool f32_out = fmt_d.precision >= 24;
      const bool f16_table =
          !f32_out || !cache_evidence(x, recs, format_of(Dtype::f16), false, table_drift_k).contradicted();
      const bool bf16_table =
          !f32_out || !cache_evidence(x, recs, format_of(Dtype::bf16), false, table_drift_k).contradicted();
      auto table_ok = [&](const std::vector<int>& s) {
        auto has = [&](int key) { return std::find(s.begin(), s.end(), key) != s.end(); };
        if (has(3) || has(5)) return true;  // narrow arithmetic too: its rounding hides the table's
        return (!has(2) || f16_table) && (!has(4) || bf16_table);
      };
      for (const auto& s : sets) {
        const bool angle = std::find(s.begin(), s.end(), 1) != s.end();
        if (!table_ok(s)) continue;
        if (std::find(s.begin(), s.end(), 0) != s.end() && !any_flushed) continue;
        if (std::find(s.begin(), s.end(), 3) != s.end() && !f16_range) continue;
        if (std::find(s.begin(), s.end(), 5) != s.end() && !bf16_range) continue;
        if (angle && !radial_fits_without_angle(s)) continue;
        double k_ulps = 0;
        const Rec* angle_rec = nullptr;
        if (angle) {
          // The smallest integer K in [lo, 2^20] that passes (the allowance grows with K): bracketed by
          // galloping from the largest angle error seen, then bisected; a failing check stops at its first
          // failing pair, so the cost is in the few passing checks.
          const double lo = cur.angles == Contract::Angles::f32 && cur.angle_ulps > 0
                                ? std::floor(cur.angle_ulps) + 1 : 1;
          const double hi = std::min(kMaxK, k_real);
          if (lo > hi || !passes(widen(s, hi))) {
            if (!beyond_real_k && lo <= kMaxK && s.size() == 1 && passes(widen(s, kMaxK))) beyond_real_k = true;
            continue;
          }
          std::vector<int> rest;
          for (int key : s)
            if (key != 1) rest.push_back(key);
          angle_rec = worst_angle(Criteria::of(cr.model, widen(rest, 0)));
          const double est = std::clamp(angle_rec ? std::ceil(angle_rec->pe.angle_ulps) : lo, lo, hi);
          double a, b;  // a fails (or is lo - 1), b passes
          if (passes(widen(s, est))) {
            b = est;
            for (double dd = 1;; dd *= 2) {
              if (b - dd < lo) { a = lo - 1; break; }
              if (!passes(widen(s, b - dd))) { a = b - dd; break; }
              b -= dd;
            }
          } else {
            a = est;
            for (double dd = 1;; dd *= 2) {
              if (a + dd >= hi) { b = hi; break; }
              if (passes(widen(s, a + dd))) { b = a + dd; break; }
              a += dd;
            }
          }
          while (b - a > 1) {
            const double mid = std::floor((a + b) / 2);
            if (passes(widen(s, mid))) b = mid;
            else a = mid;
          }
          k_ulps = b;
        } else if (!passes(widen(s, 0))) {
          continue;
        }
        const Contract w = widen(s, k_ulps);
        std::string clauses;
        for (int key : s) {
          std::string cl;
          if (key == 0) cl = "denormals=flush";
          if (key == 1) cl = fmt::format("angles=f32:{}", k_ulps);
          if (key == 2 || key == 4) cl = fmt::format("cos-sin={}", to_string(w.cos_sin));
          if (key == 3 || key == 5) cl = fmt::format("arith={}", to_string(w.arith));
          clauses += (clauses.empty() ? "" : ",") + cl;
        }
        dg.clause = clauses;
        dg.cause = s.size() == 1 ? single_cause(s[0]) : Cause::mixed_precision;
        // The evidence.
        std::string ev;
        if (angle) {
          ev = angle_rec ? fmt::format("angle error up to {} f32 ulps of |phi| where it fails, at position {} "
                                       "(pair {}, |phi| {}); smallest K that passes: {}",
                                       g4(angle_rec->pe.angle_ulps), c.pair_position(angle_rec->token, angle_rec->pair), angle_rec->pair,
                                       g4(angle_rec->phi), k_ulps)
                         : fmt::format("smallest K that passes: {}", k_ulps);
        }
        if (std::find(s.begin(), s.end(), 0) != s.end()) {
          uint64_t flushed = 0;
          for (size_t e = 0; e < c.n_elements(); ++e) flushed += flushed_at(e);
          ev += fmt::format("{}{} element(s) are 0 where the input or the exact output is subnormal (the exact output "
                            "at least the smallest subnormal)",
                            ev.empty() ? "" : "; ", flushed);
        }
        {
          // The worst pair against the failed contract and against the widened one.
          const Criteria wc = Criteria::of(cr.model, w);
          double rc = 0, rw = 0;
          for (const Rec& r : recs) {
            if (r.zero) continue;
            rc = std::max(rc, ratio_of(r.pe, cr.allowance(c, r.pair, r.norm, r.phi, r.hint)));
            rw = std::max(rw, ratio_of(r.pe, wc.allowance(c, r.pair, r.norm, r.phi, r.hint)));
          }
          if (acc_bad > 0)
            ev += fmt::format("{}{} pair(s) beyond {}, the worst at {}x it (largest error {} u); at most {}x the "
                              "allowance with {}",
                              ev.empty() ? "" : "; ", acc_bad, cur_allowance, ratio_text(rc), g4(ref_residual),
                              ratio_text(rw), clauses);
          else  // (only pairs at angle 0 off their input: no rotated pair beyond the allowance)
            ev += fmt::format("{}every rotated pair within {}; {} pair(s) at angle 0 far from their input; with {} "
                              "every pair passes",
                              ev.empty() ? "" : "; ", cur_allowance, id_far, clauses);
        }
        if (s.size() > 1) ev = "no single clause suffices; " + ev;
        {
          // The other single clauses that accept the case (with their evidence), angles=f32 aside: on a few pairs
          // just past the allowance several do, and the verdict reads the rows together (join_precision): a row
          // another row's widening also explains is that row's cause, not a second one.
          std::vector<std::string> alts;
          for (int key : avail) {
            if (key == 1 || (s.size() == 1 && s[0] == key)) continue;
            if ((key == 0 && !any_flushed) || (key == 3 && !f16_range) || (key == 5 && !bf16_range)) continue;
            if (!table_ok({key})) continue;
            if (passes(widen({key}, 0))) alts.push_back("--contract " + exact_short_spec(widen({key}, 0)));
          }
          if (!alts.empty()) ev += fmt::format("; {} {}", kAlsoAccepted, fmt::join(alts, " or "));
        }
        for (const auto& p : contract_presets()) {
          std::string err;
          auto pc = parse_contract(p.spec, &err);
          if (!pc || std::string_view(p.name) == "default" || std::string_view(p.name) == "builtin") continue;
          pc->identity_bits = cur.identity_bits;
          size_t h2 = SIZE_MAX;
          if (finite_pairs_pass(x, recs, Criteria::of(cr.model, *pc), h2)) {
            ev += fmt::format("; the {} preset also accepts it", p.name);
            break;
          }
        }
        if (pt_bad == 0 && special_under(Criteria::of(cr.model, w)) == 0) dg.contract = exact_short_spec(w);
        else ev += "; the case still fails under it" + also(false);
        dg.detail = ev;
        return dg;
      }
    }

    // ---- 3b. cos/sin not of unit length ----------------------------------------------
    // A rotation keeps each pair's length; cos and sin that are not a point of the unit circle (a vectorised
    // sin/cos used beyond the range its reduction handles, a polynomial evaluated outside its interval) scale it.
    // Named when a quarter of the failing pairs or more are off in length by far more than any rounding or cache
    // makes (more than 2^-6 relative and 8 times the rounding's share; the others are turned by a wrong angle, as
    // such a routine also gives), and the pairs at smaller angles pass: the routine goes wrong from an angle on, which
    // the detail says (outputs scaled at every angle are another matter, left unexplained).
    {
      uint64_t off = 0;
      double lo = HUGE_VAL, hi = 0, phi_from = HUGE_VAL, phi_ok_max = 0;
      for (const Rec& r : recs) {
        if (r.zero || !(r.norm > 0)) continue;
        const bool ok = metric_ok(x, cr, r);
        const double len = pair_hypot(r.y[0], r.y[1]) / r.norm;
        const double len_u = std::fabs(len - 1) / fmt_d.unit_roundoff();  // (|y| - |x|) in u of |x|
        const double allowed = cr.allowance(c, r.pair, r.norm, r.phi, r.hint).rounding;
        if (!ok && std::fabs(len - 1) > 0x1p-6 && len_u > 8 * allowed) {
          ++off;
          lo = std::min(lo, len);
          hi = std::max(hi, len);
          phi_from = std::min(phi_from, std::fabs(r.phi));
        }
      }
      for (const Rec& r : recs)
        if (!r.zero && metric_ok(x, cr, r) && std::fabs(r.phi) < phi_from) phi_ok_max = std::max(phi_ok_max, std::fabs(r.phi));
      if (off > 0 && double(off) >= 0.25 * double(acc_bad) && phi_ok_max > 0) {
        dg.cause = Cause::cos_sin_not_unit_length;
        dg.detail = fmt::format(
            "{} of {} failing pair(s) changed in length, |y|/|x| from {} to {} where a rotation keeps 1; from |angle| "
            "{} (2^{:.1f}) on, the pairs at smaller angles (up to {}) within the allowance: a sin/cos routine used "
            "outside the range it reduces correctly; largest error {} u{}",
            off, acc_bad, g4(lo), g4(hi), g4(phi_from), std::log2(phi_from), g4(phi_ok_max), g4(ref_residual),
            also(true));
        return dg;
      }
    }

    // ---- 4. unexplained ------------------------------------------------------------
    const Candidate* closest = nullptr;
    Fit closest_fit;
    for (const Candidate& k : cands) {
      const Fit f = fit(x, k, false);
      if (!closest || f.worst_ratio < closest_fit.worst_ratio) {
        closest = &k;
        closest_fit = f;
      }
    }
    dg.cause = Cause::unexplained;
    dg.detail = fmt::format(
        "{} pair(s) beyond {}, largest error {} u against the exact rotation; no explanation fits: "
        "the closest, {}, leaves pairs at {}x their allowance (residual {} u){}; no contract of a plausible "
        "pipeline explains it: a bug{}",
        acc_bad, cur_allowance, g4(ref_residual), closest ? name_of(closest->cause) : std::string_view("-"), ratio_text(closest_fit.worst_ratio),
        g4(closest_fit.residual),
        beyond_real_k ? fmt::format("; not f32 angle drift: only an angle error beyond what an f32 pipeline "
                                         "makes here (K > {}) would explain it", real_f32_max_k(c))
                           : std::string(),
        also(true));
    return dg;
  }

  if (id_bad > 0) {
    // Only pairs at angle 0 fail: what changed.
    uint64_t zero_sign = 0, other = 0;
    for (const Rec& r : recs) {
      if (!r.zero || identity_ok(x, cr, r)) continue;
      const size_t ks[2] = {r.k0, r.k1};
      for (int k = 0; k < 2; ++k) {
        if (load_bits(d, got, ks[k]) == load_bits(d, c.input.data(), ks[k])) continue;
        if (r.x[k] == 0 && r.y[k] == 0) ++zero_sign;
        else ++other;
      }
    }
    // Every element changed a subnormal input made 0: flushing (a subnormal kept at angle 0 is the identity's;
    // no layout, sign or offset hypothesis can say more there, each gives the identity at angle 0).
    uint64_t flushed = 0;
    const Format fo = format_of(d);
    for (const Rec& r : recs) {
      if (!r.zero || identity_ok(x, cr, r)) continue;
      for (int k = 0; k < 2; ++k) {
        const size_t e = k == 0 ? r.k0 : r.k1;
        const double xin = load_f32(d, c.input.data(), e), y = load_f32(d, got, e);
        flushed += load_bits(d, got, e) != load_bits(d, c.input.data(), e) && xin != 0 &&
                   std::fabs(xin) < fo.min_normal() && y == 0;
      }
    }
    if (flushed > 0 && flushed == other && !cr.model.flush_denormals && !cr.identity_bits) {
      dg.cause = Cause::subnormals_flushed;
      dg.residual = 0;
      dg.detail = fmt::format("{} subnormal input element(s) at angle 0 became 0 where the identity keeps them; every "
                              "rotated pair is within its allowance{}",
                              flushed, also(false));
      Contract w = cur;
      w.flush_denormals = true;
      size_t h = SIZE_MAX;
      if (finite_pairs_pass(x, recs, Criteria::of(cr.model, w), h)) dg.contract = exact_short_spec(w);
      return dg;
    }
    dg.cause = Cause::identity_changed;
    dg.residual = 0;
    dg.detail = fmt::format("{} pair(s) at angle 0 fail the identity rule (identity={}): {} signed zero(s) flipped, "
                            "{} other element(s) changed; every rotated pair is within its allowance{}",
                            id_bad, cr.identity_bits ? "bits" : "values", zero_sign, other, also(false));
    return dg;
  }
  if (pt_bad > 0) {
    dg.cause = Cause::pass_through_touched;
    dg.detail = pt_text + "; every rotated pair is within its allowance" +
                (special ? fmt::format("; also {} special-value finding(s)", special) : std::string());
    return dg;
  }

  // Only special values fail. NaN inputs zeroed: every NaN-input pair with a non-NaN output is the rotation
  // of the pair with its NaN replaced by 0.
  {
    const Rows& A = rows();
    uint64_t nan_pairs = 0, fitted = 0;
    double resid = 0;
    for (size_t t = 0; t < c.n_tokens(); ++t)
      for (size_t h = 0; h < c.n_heads; ++h)
        for (uint32_t i = 0; i < np; ++i) {
          const auto [d0, d1] = pair_elements(c, i);
          const size_t k0 = head_offset(c, t, h) + d0, k1 = head_offset(c, t, h) + d1;
          double x0 = load_f32(d, c.input.data(), k0), x1 = load_f32(d, c.input.data(), k1);
          const double y0 = load_f32(d, got, k0), y1 = load_f32(d, got, k1);
          if (!std::isnan(x0) && !std::isnan(x1)) continue;
          if (std::isnan(y0) || std::isnan(y1)) continue;  // a NaN kept (an angle-0 copy keeps its partner)
          ++nan_pairs;
          if (std::isnan(x0)) x0 = 0;
          if (std::isnan(x1)) x1 = 0;
          if (!std::isfinite(x0) || !std::isfinite(x1)) {
            // An infinite partner: the zeroed pair's rotation is non-finite too (or NaN from Inf*0); a finite
            // output would not be explained.
            if (!std::isfinite(y0) || !std::isfinite(y1)) ++fitted;
            continue;
          }
          if (!std::isfinite(y0) || !std::isfinite(y1)) continue;
          const Trig g = at(A, c.pair_position(t, i), i);
          const double e0 = x0 * g.c - x1 * g.s, e1 = x0 * g.s + x1 * g.c;
          const double af = pair_gain(c, t, i);
          const PairError pe = pair_error(d, af * x0, af * x1, y0, y1, e0, e1, g.phi);
          resid = std::max(resid, pe.e);
          if (ratio_of(pe, cr.allowance(c, i, pair_hypot(x0, x1) * af, g.phi, pair_hint(fmt_d, af * x0, af * x1, e0, e1))) <= 1.0)
            ++fitted;
        }
    if (nan_pairs > 0 && fitted == nan_pairs) {
      dg.cause = Cause::nan_inputs_zeroed;
      dg.residual = resid;
      dg.detail = fmt::format("{} pair(s) holding a NaN give a number: each is the rotation of the pair with its "
                              "NaN replaced by 0 (residual {} u); the exact output is NaN",
                              nan_pairs, g4(resid));
      return dg;
    }
  }
  dg.cause = Cause::unexplained;
  dg.detail = fmt::format("only special values fail ({} finding(s): NaN/Inf inputs or a non-finite output); every "
                          "finite pair is within its allowance",
                          special);
  return dg;
}

bool is_precision_cause(Cause cause) {
  for (int key = 0; key <= 5; ++key)
    if (cause == single_cause(key)) return true;
  return cause == Cause::mixed_precision;
}

bool is_precision_cause(std::string_view cause) {
  for (int key = 0; key <= 5; ++key)
    if (cause == name_of(single_cause(key))) return true;
  return cause == name_of(Cause::mixed_precision);
}

double precision_excess(std::string_view text) {
  static constexpr std::string_view kWorst = "the worst at ";
  const size_t r = text.find(kWorst);
  if (r == std::string_view::npos) return 0;
  const std::string num(text.substr(r + kWorst.size(), 32));
  return std::strtod(num.c_str(), nullptr);
}

std::optional<PrecisionJoin> join_precision(const std::vector<std::string>& diagnoses, const Contract& base) {
  static constexpr std::string_view kWould = "; would pass with --contract ";
  // Per clause family (0 denormals, 1 angles, 2 cos-sin, 3 arith): whether a row widened it, and the largest
  // excess (the worst pair's error over the allowance) among the rows that did.
  bool family[4] = {};
  double family_ratio[4] = {};
  auto widened_families = [&base](const Contract& c) {  // the clause families c widens beyond base
    return std::array<bool, 4>{c.flush_denormals && !base.flush_denormals,
                               !(c.angles == base.angles && c.angle_ulps == base.angle_ulps), c.cos_sin != base.cos_sin,
                               c.arith != base.arith};
  };
  std::optional<Contract> joined;
  double primary_ratio = -1;
  int primary = -1;  // the row with the largest excess: its widening is the main cause
  std::vector<Contract> widened;
  std::vector<std::vector<Contract>> accepting;  // per row: its widening and the other single clauses accepting it
  std::vector<double> ratios;
  for (const std::string& text : diagnoses) {
    const size_t at = text.find("diagnosis: ");
    if (at == std::string::npos) return std::nullopt;
    std::string_view cause = std::string_view(text).substr(at + 11);
    cause = cause.substr(0, cause.find(" ("));
    const size_t w = text.rfind(kWould);
    if (!is_precision_cause(cause) || w == std::string::npos) return std::nullopt;
    std::string err;
    const std::optional<Contract> c = parse_contract(std::string_view(text).substr(w + kWould.size()), &err);
    if (!c) return std::nullopt;
    const double ratio = precision_excess(text);
    widened.push_back(*c);
    ratios.push_back(ratio);
    accepting.push_back({*c});
    if (const size_t a = text.find(kAlsoAccepted); a != std::string::npos && a < w) {
      std::string_view rest = std::string_view(text).substr(a + kAlsoAccepted.size());
      rest = rest.substr(0, std::min(rest.find(';'), rest.find(')')));
      static constexpr std::string_view kSpec = " --contract ";
      for (size_t k = rest.find(kSpec); k != std::string_view::npos; k = rest.find(kSpec, k + 1)) {
        std::string_view spec = rest.substr(k + kSpec.size());
        spec = spec.substr(0, spec.find(' '));
        if (const std::optional<Contract> alt = parse_contract(spec, &err)) accepting.back().push_back(*alt);
      }
    }
    if (ratio > primary_ratio) {
      primary_ratio = ratio;
      primary = int(widened.size()) - 1;
    }
  }
  // Whether contract b allows at least what a does, clause by clause (each clause's allowance only grows as it
  // widens).
  auto covers = [](const Contract& b, const Contract& a) {
    if (a.flush_denormals && !b.flush_denormals) return false;
    if (a.angles == Contract::Angles::f32) {
      if (b.angles != Contract::Angles::f32 || (a.angle_ulps == 0) != (b.angle_ulps == 0) ||
          a.angle_ulps > b.angle_ulps)
        return false;
    }
    return unit_roundoff(a.cos_sin) <= unit_roundoff(b.cos_sin) && unit_roundoff(a.arith) <= unit_roundoff(b.arith);
  };
  for (size_t row = 0; row < widened.size(); ++row) {
    // A row the main widening also accepts is the main cause's.
    const bool by_primary = std::any_of(accepting[row].begin(), accepting[row].end(),
                                        [&](const Contract& a) { return covers(widened[size_t(primary)], a); });
    const Contract* c = by_primary ? &widened[size_t(primary)] : &widened[row];
    const double ratio = ratios[row];
    const std::array<bool, 4> f = widened_families(*c);
    for (int k = 0; k < 4; ++k)
      if (f[k]) {
        family[k] = true;
        family_ratio[k] = std::max(family_ratio[k], ratio);
      }
    if (!joined) {
      joined = *c;
      continue;
    }
    if (c->angles == Contract::Angles::f32) {
      if (joined->angles == Contract::Angles::exact) {
        joined->angles = Contract::Angles::f32;
        joined->angle_ulps = c->angle_ulps;
      } else if ((joined->angle_ulps == 0) != (c->angle_ulps == 0)) {
        return std::nullopt;  // a K against the derived default (K 0, per pair): neither is the wider
      } else {
        joined->angle_ulps = std::max(joined->angle_ulps, c->angle_ulps);
      }
    }
    if (unit_roundoff(c->cos_sin) > unit_roundoff(joined->cos_sin)) joined->cos_sin = c->cos_sin;
    if (unit_roundoff(c->arith) > unit_roundoff(joined->arith)) joined->arith = c->arith;
    joined->flush_denormals |= c->flush_denormals;
  }
  if (!joined) return std::nullopt;
  auto words = [&](int k) -> std::string {
    switch (k) {
      case 0: return "subnormals flushed";
      case 1: return "f32 angle drift";
      case 2: return fmt::format("cos/sin at {} precision", to_string(joined->cos_sin));
      default: return fmt::format("arithmetic at {} precision", to_string(joined->arith));
    }
  };
  const Contract& p = widened[size_t(primary)];
  const std::array<bool, 4> in_primary = widened_families(p);
  std::vector<std::string> main, besides;
  double besides_ratio = 0;
  for (int k = 0; k < 4; ++k) {
    if (!family[k]) continue;
    if (in_primary[k]) {
      main.push_back(words(k));
    } else {
      besides.push_back(words(k));
      besides_ratio = std::max(besides_ratio, family_ratio[k]);
    }
  }
  PrecisionJoin j;
  j.causes = fmt::format("{}", fmt::join(main, ", "));
  if (primary_ratio > 0) j.causes += fmt::format(" (up to {}x the allowance)", g4(primary_ratio));
  if (!besides.empty())
    j.causes += fmt::format("; besides, on rows up to {}x it: {}", g4(besides_ratio), fmt::join(besides, ", "));
  j.spec = exact_short_spec(*joined);
  return j;
}

}  // namespace ropecheck
