#include "properties/judge.hpp"

#include <algorithm>
#include <functional>
#include <type_traits>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "properties/failure.hpp"

namespace ropecheck {

std::string describe_element(Dtype d, uint32_t bits) {
  char buf[96];
  const double v = bits_to_double(d, bits);
  std::snprintf(buf, sizeof buf, d == Dtype::f32 ? "0x%08" PRIx32 " (%a = %.9g)" : "0x%04" PRIx32 " (%a = %.5g)",
                bits, v, v);
  return buf;
}

namespace {

struct PairSite {
  size_t token, head;
  uint32_t pair;
  size_t k0, k1;
};

// A finding's message: its headline, then the pair's case, site, input, got, the reference rounded and exact
// (FailureText's shape; the trailing newline separates the findings of Judgement::report).
std::string pair_finding(std::string_view headline, const RopeCase& c, const ReferenceOutput& ref, const void* got,
                         const PairSite& s) {
  char exact[128];
  std::snprintf(exact, sizeof exact, "%a, %a (%.17g, %.17g)", ref.exact[s.k0], ref.exact[s.k1], ref.exact[s.k0],
                ref.exact[s.k1]);
  return FailureText(headline)
             .in(c)
             .line("token " + std::to_string(s.token) + " (position " +
                   std::to_string(c.pair_position(s.token, s.pair)) + "), head " + std::to_string(s.head) + ", pair " +
                   std::to_string(s.pair) + " = dims (" + std::to_string(s.k0 - head_offset(c, s.token, s.head)) +
                   ", " + std::to_string(s.k1 - head_offset(c, s.token, s.head)) + ")")
             .elements("input", c, c.input.data(), {s.k0, s.k1})
             .elements("got", c, got, {s.k0, s.k1})
             .elements("rounded", c, ref.rounded.data(), {s.k0, s.k1})
             .line("exact", exact)
             .str() +
         "\n";
}

std::string fmt_element_change(Dtype d, uint32_t dim, uint32_t in, uint32_t got) {
  return " dim " + std::to_string(dim) + " " + describe_element(d, in) + " -> " + describe_element(d, got) + ";";
}

// A new worst pair of its bucket: its site and bits (loaded only here, not for every pair).
void record_worst(WorstPair& w, const RopeCase& c, const ReferenceOutput& ref, const void* got, const PairSite& s,
                  size_t base, const PairError& pe, const double (&exact)[2]) {
  const Dtype d = c.dtype;
  w.e = pe.e;
  w.radial = pe.radial;
  w.tangential = pe.tangential;
  w.position = c.pair_position(s.token, s.pair);
  w.token = s.token;
  w.head = s.head;
  w.pair = s.pair;
  w.dim0 = uint32_t(s.k0 - base);
  w.dim1 = uint32_t(s.k1 - base);
  w.in_bits[0] = load_bits(d, c.input.data(), s.k0);
  w.in_bits[1] = load_bits(d, c.input.data(), s.k1);
  w.got_bits[0] = load_bits(d, got, s.k0);
  w.got_bits[1] = load_bits(d, got, s.k1);
  w.rounded_bits[0] = load_bits(d, ref.rounded.data(), s.k0);
  w.rounded_bits[1] = load_bits(d, ref.rounded.data(), s.k1);
  w.exact[0] = exact[0];
  w.exact[1] = exact[1];
}

}  // namespace

Criteria Criteria::of(const KernelErrorModel& m, const Contract& c) {
  Criteria cr;
  cr.model = m;
  cr.model.angle_f32 = c.angles == Contract::Angles::f32;
  cr.model.angle_f32_ulps = c.angle_ulps;
  cr.model.cos_sin = c.cos_sin;
  cr.model.arith = c.arith;
  cr.model.flush_denormals = c.flush_denormals;
  cr.model.truncating_stores = c.truncating_stores;
  cr.identity_bits = c.identity_bits;
  return cr;
}

Criteria Criteria::flat_bound(double bound, bool identity_bits) {
  Criteria cr;
  cr.flat = bound;
  cr.identity_bits = identity_bits;
  return cr;
}

PairAllowance Criteria::allowance(const RopeCase& c, uint32_t pair, double norm, double abs_phi,
                                  const PairHint& hint) const {
  if (flat > 0) return {flat, flat, flat, 0, flat};
  return pair_allowance(model, c, pair, norm, abs_phi, hint);
}

double Criteria::case_bound(const RopeCase& c) const { return flat > 0 ? flat : error_bound(model, c); }

void BiasSums::merge(const BiasSums& o) {
  n += o.n;
  clusters += o.clusters;
  for (int k = 0; k < 3; ++k) {
    by_cache[k].sum_r += o.by_cache[k].sum_r;
    by_cache[k].sum_s2 += o.by_cache[k].sum_s2;
    by_cache[k].sum_ns += o.by_cache[k].sum_ns;
  }
  sum_n2 += o.sum_n2;
  sum_systematic += o.sum_systematic;
}

namespace {

bool is_subnormal(const Format& f, double v) { return v != 0 && std::fabs(v) < f.min_normal(); }

}  // namespace

bool keeps_input(const Criteria& cr, Dtype d, uint32_t in, uint32_t got) {
  if (in == got) return true;
  if (cr.identity_bits) return false;
  const double x = bits_to_double(d, in), y = bits_to_double(d, got);
  if (y == x || (std::isnan(x) && std::isnan(y))) return true;  // +-0 alike; any NaN for a NaN
  const Format f = format_of(d), fa = format_of(cr.model.arith);
  if (cr.model.flush_denormals && is_subnormal(f, x) && y == 0) return true;
  return fa.unit_roundoff() > f.unit_roundoff() &&
         std::fabs(y - x) <= fa.unit_roundoff() * std::max(std::fabs(x), fa.min_normal());
}

bool same_output(Dtype d, uint32_t a, uint32_t b, bool identity_bits) {
  const double x = bits_to_double(d, a), y = bits_to_double(d, b);
  if (std::isnan(x) && std::isnan(y)) return true;
  return identity_bits ? a == b : x == y;
}

namespace {

double round_to(Dtype t, double v) {
  unsigned char b[4];
  store_f32(t, b, 0, float(v));
  return load_f32(t, b, 0);
}

// The radial factor Re[(c~ + i s~) e^{-i phi}] = c~ cos phi + s~ sin phi of cos and sin rounded to nearest in
// a cache type: a correct cache makes every pair's radial component (factor - 1) * norm (0 for f32). It is
// systematic, not noise: at small angles cos rounds up to 1 while sin keeps its value, so slow pairs grow
// by ~phi^2/2; and the cache's angle error shortens every pair to second order.
// A correct pipeline whose cos and sin (times the attention factor af, ABI v2) are rounded to t: the factor
// by which it lengthens a pair at angle phi. For f32 without an attention factor the rounding is noise (1);
// with one it is not: near angle 0 every pair carries f32(af)'s rounding, the same for all of them.
// c, s: cos and sin of the pair's |angle| (computed once for the three cache types).
double cache_radial_factor(Dtype t, double c, double s, double af = 1.0) {
  if (t == Dtype::f32 && af == 1.0) return 1.0;
  return (round_to(t, af * c) * c + round_to(t, af * s) * s) / af;
}

}  // namespace

Judgement judge_output(const RopeCase& c, const ReferenceOutput& ref, const void* got, double bound,
                       const JudgeOptions& opt) {
  return judge_output(c, ref, got, Criteria::flat_bound(bound), opt);
}

Judgement judge_output(const RopeCase& c, const ReferenceOutput& ref, const void* got, const Criteria& cr,
                       const JudgeOptions& opt) {
  Judgement j;
  j.bound = cr.case_bound(c);
  j.per_pair = cr.flat <= 0;
  const Dtype d = c.dtype;
  const Format f = format_of(d);
  const double u = f.unit_roundoff();
  // The message is built only for a finding that is kept (formatting every violation of a badly wrong
  // kernel would dominate the judge's time).
  // An accuracy finding's message is written once the judgement is done, for the findings kept then (`later`,
  // beside j.findings): a kernel whose error grows along the case (an angle error, with the position) has a worse
  // finding at nearly every pair, and each replaced the kept one's message, written in vain (measured: 11 % of a
  // failing gate's CPU). `message` then returns what the message is made of, by value.
  std::vector<std::function<std::string()>> later;
  auto add_finding = [&](std::string check, double err, const auto& message) {
    ++j.violations;
    auto keep = [&](Finding& f) {
      if constexpr (std::is_same_v<std::invoke_result_t<decltype(message)>, std::string>) {
        f.message = message();
      } else {
        later.resize(j.findings.size());
        later[size_t(&f - j.findings.data())] = message();
      }
    };
    if (j.findings.size() < opt.max_findings) {
      j.findings.push_back(Finding{std::move(check), err, {}});
      keep(j.findings.back());
    } else if (check == "accuracy") {  // keep the worst accuracy findings
      auto worst = std::min_element(j.findings.begin(), j.findings.end(),
                                    [](const Finding& a, const Finding& b) { return a.error < b.error; });
      if (worst->check == "accuracy" && worst->error < err) {
        *worst = Finding{std::move(check), err, {}};
        keep(*worst);
      }
    }
  };
  const uint32_t npairs = c.rotary_dim / 2;
  // Where the violations are (Judgement::violated), made at the first.
  auto mark = [&](size_t t, size_t h, uint32_t i) {
    if (j.violated.empty()) j.violated.assign(c.n_tokens() * c.n_heads * size_t(npairs), 0);
    j.violated[(t * c.n_heads + h) * npairs + i] = 1;
  };
  const bool have_angles = ref.angle.size() == c.n_tokens() * npairs;
  // Bias clusters of this call: (position, pair) -> (pairs, sum of radial).
  struct Cluster {
    uint64_t n = 0;
    double sum[3] = {0, 0, 0};  // by cache hypothesis (BiasSums::by_cache)
  };
  // Kept in a flat table, slot = pair * ranks + the rank of the token's position on the pair's axis among
  // that axis's distinct positions (a std::map node per pair cost more than judging it); folded below in
  // (position, pair) order, as a map iterates.
  const size_t n_tok = c.n_tokens();
  std::vector<uint32_t> rank(size_t(c.n_pos_axes) * n_tok);  // [axis][token]
  size_t ranks = 1;
  {
    std::vector<int64_t> distinct;
    for (uint32_t ax = 0; ax < c.n_pos_axes; ++ax) {
      distinct.clear();
      for (size_t t = 0; t < n_tok; ++t) distinct.push_back(c.position(t, ax));
      std::sort(distinct.begin(), distinct.end());
      distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
      ranks = std::max(ranks, distinct.size());
      for (size_t t = 0; t < n_tok; ++t)
        rank[ax * n_tok + t] =
            uint32_t(std::lower_bound(distinct.begin(), distinct.end(), c.position(t, ax)) - distinct.begin());
    }
  }
  std::vector<Cluster> clusters;  // sized at the first pair that joins the bias
  std::vector<double> cache_share(3 * npairs);  // per token: each pair's radial factor - 1 of an f32, f16, bf16 cache
  const double systematic_cap = 1.0 / 16;  // pairs whose angle clause allows more radial drift stay out of the bias
  for (size_t t = 0; t < c.n_tokens(); ++t) {
    const int bucket = position_bucket(c.position(t));  // axis 0
    WorstPair* worst = nullptr;  // this bucket's entry, looked up at the token's first finite pair
    ErrorStats* bucket_stats = nullptr;  // likewise (a map lookup per pair cost more than the pair's statistics)
    if (have_angles && cr.flat <= 0 && !c.table)  // a given table: no cache of the kernel's own to suspect
      for (uint32_t i = 0; i < npairs; ++i) {
        const double phi_i = ref.angle[t * npairs + i];
        const double cs = std::cos(phi_i), sn = std::sin(phi_i);
        cache_share[3 * i] = cache_radial_factor(Dtype::f32, cs, sn, c.attention_factor) - 1.0;
        cache_share[3 * i + 1] = cache_radial_factor(Dtype::f16, cs, sn, c.attention_factor) - 1.0;
        cache_share[3 * i + 2] = cache_radial_factor(Dtype::bf16, cs, sn, c.attention_factor) - 1.0;
      }
    for (size_t h = 0; h < c.n_heads; ++h) {
      const size_t base = head_offset(c, t, h);
      for (uint32_t i = 0; i < npairs; ++i) {
        const auto [d0, d1] = pair_elements(c, i);
        const PairSite s{t, h, i, base + d0, base + d1};
        ++j.pairs;
        const double phi = have_angles ? ref.angle[t * npairs + i] : 0.0;
        const double x0 = load_f32(d, c.input.data(), s.k0), x1 = load_f32(d, c.input.data(), s.k1);
        const double y0 = load_f32(d, got, s.k0), y1 = load_f32(d, got, s.k1);
        const double r0 = load_f32(d, ref.rounded.data(), s.k0), r1 = load_f32(d, ref.rounded.data(), s.k1);
        const bool finite_in = std::isfinite(x0) && std::isfinite(x1);
        // Errors are relative to the exact output pair's norm: the input's times the attention factor, or, with
        // a given cos/sin table, times the norm of the pair's (cos, sin) as given.
        const double af = pair_gain(c, t, i);
        const double norm = finite_in ? pair_hypot(x0, x1) * af : 0.0;
        const PairAllowance allow = cr.allowance(
            c, i, norm, phi, finite_in ? pair_hint(f, af * x0, af * x1, ref.exact[s.k0], ref.exact[s.k1]) : PairHint{});
        // The overflow rules take the pair's whole allowance.
        const double overflow_edge = f.max_finite() * (1.0 - allow.total * u);
        const double arith_max = format_of(cr.flat > 0 ? d : cr.model.arith).max_finite();
        const bool sign_free = allow.total * u >= 1.0;  // the output's direction is unconstrained
        const bool zero_angle = af == 1.0 && (have_angles ? phi == 0 : (r0 == x0 && r1 == x1));
        // Special values, one output element at a time.
        bool special_ok = true;
        const double ys[2] = {y0, y1}, rs[2] = {r0, r1}, es[2] = {ref.exact[s.k0], ref.exact[s.k1]};
        const size_t ks[2] = {s.k0, s.k1};
        std::string why;
        for (int k = 0; k < 2; ++k) {
          const double y = ys[k], r = rs[k];
          const bool nan_in = std::isnan(x0) || std::isnan(x1);
          if (std::isnan(r) && !nan_in && !finite_in) {
            // Inf*cos - Inf*sin is NaN or an infinity depending on the signs of cos and sin, which no kernel
            // can know where they are below its own cos/sin error: any non-finite output is accepted.
            if (std::isfinite(y))
              why = "the exact output is NaN (Inf - Inf from an infinite input): the kernel must give NaN or an "
                    "infinity";
          } else if (std::isnan(r)) {
            if (!std::isnan(y)) why = "the exact output is NaN (a NaN input) but the kernel's is not";
          } else if (std::isinf(r)) {
            if (!finite_in) {
              // Inf * cos takes the sign of cos, which no kernel can know when |cos| is below its own
              // cos error: any infinity (or NaN) is accepted; a finite value is not.
              if (std::isfinite(y))
                why = "the exact output is " + std::string(r > 0 ? "+Inf" : "-Inf") +
                      " (an infinite input): the kernel must give an infinity or NaN";
            } else if (std::isnan(y) || (std::isinf(y) && std::signbit(y) != std::signbit(r) && !sign_free)) {
              why = "the exact output overflows to " + std::string(r > 0 ? "+Inf" : "-Inf") +
                    ": the kernel must give it or a finite value within the bound";
            }
          } else if (!finite_in) {
            // An angle of 0 keeps a finite element beside a non-finite one (x*1 - Inf*0 may also give NaN).
            if (!std::isnan(y) && !keeps_input(cr, d, load_bits(d, ref.rounded.data(), ks[k]), load_bits(d, got, ks[k])))
              why = std::string("an angle of 0 keeps this element: the kernel must give its ") +
                    (cr.identity_bits ? "bits (identity=bits)" : "value") + " or NaN";
          } else if (!std::isfinite(y)) {
            const bool near_overflow = std::fabs(es[k]) > overflow_edge;
            // A product of the formula (element 0: x0·c̃ and x1·s̃; element 1: x0·s̃ and x1·c̃, with c̃, s̃ the
            // cos and sin times the attention factor, or the table's values) beyond the largest finite number of
            // the arithmetic type (the contract's arith=): the formula evaluated in that type overflows there
            // whatever the exact output, to an infinity of either sign or, two of them meeting, NaN.
            const double cm = have_angles && !c.table ? af * std::fabs(std::cos(phi)) : af;
            const double sm = have_angles && !c.table ? af * std::fabs(std::sin(phi)) : af;
            const double product = k == 0 ? std::max(std::fabs(x0) * cm, std::fabs(x1) * sm)
                                          : std::max(std::fabs(x0) * sm, std::fabs(x1) * cm);
            const bool product_overflows = product * (1.0 + allow.total * u) > arith_max;
            if (!product_overflows &&
                !(std::isinf(y) && near_overflow && (sign_free || std::signbit(y) == std::signbit(es[k]))))
              why = "finite input and finite exact output, but the kernel's output is not finite";
          }
        }
        if (!why.empty()) {
          special_ok = false;
          mark(t, h, i);
          add_finding(std::isnan(r0) || std::isnan(r1) ? "nan" : finite_in ? "finite" : "non-finite", 0,
                      [&] { return pair_finding("special values: " + why, c, ref, got, s); });
        }
        if (!special_ok || !finite_in) continue;
        if (!std::isfinite(y0) || !std::isfinite(y1) || !std::isfinite(es[0]) || !std::isfinite(es[1]))
          continue;  // accepted overflow, judged above
        if (zero_angle && cr.flat <= 0) {
          // The identity clause (keeps_input): identity=values the input's values, identity=bits its bits.
          std::string bad;
          for (int k = 0; k < 2; ++k) {
            const uint32_t in = load_bits(d, c.input.data(), ks[k]), g = load_bits(d, got, ks[k]);
            if (!keeps_input(cr, d, in, g)) bad += fmt_element_change(d, k == 0 ? d0 : d1, in, g);
          }
          if (!bad.empty()) mark(t, h, i);
          if (!bad.empty())
            add_finding("identity", 0, [&] {
              return pair_finding(std::string("identity: an angle of 0 must give the input's ") +
                                      (cr.identity_bits ? "bits (identity=bits)" : "values (identity=values)") + ":" +
                                      bad,
                                  c, ref, got, s);
            });
        }
        // The rounding noise's share of the angle: the allowance without the angle clause, as an angle.
        const double noise_rad = cr.flat > 0 ? cr.flat * u * std::max(norm, f.min_normal()) / norm
                                             : allow.rounding * u * std::max(norm, f.min_normal()) / norm;
        const PairError pe = pair_error(d, af * x0, af * x1, y0, y1, es[0], es[1], phi, noise_rad);
        if (opt.keep_worst_pairs) {
          if (!worst) worst = &j.worst_by_bucket[bucket];
          if (pe.e > worst->e) record_worst(*worst, c, ref, got, s, base, pe, es);
        }
        j.stats.add(pe, opt.keep_values);
        if (!bucket_stats) bucket_stats = &j.by_bucket[bucket];
        bucket_stats->add(pe, opt.keep_values);
        const bool zero_ok = zero_angle && cr.flat <= 0;  // judged by the identity rule above
        const double ratio = zero_ok ? 0.0
                                     : std::max({pe.e / allow.total, std::fabs(pe.radial) / allow.radial,
                                                 std::fabs(pe.tangential) / allow.tangential});
        if (j.worst_allowance.total == 0 || ratio > j.worst_ratio) {
          j.worst_ratio = ratio;
          j.worst_pe = pe;
          j.worst_allowance = allow;
        }
        // The pair's length (docs/error-model.md, "The pair's length"): an angle error only turns the pair, so
        // whatever the angle clause allows, |y| is within the rounding share E of |yhat|. It binds where the angle
        // clause leaves the direction free (far-out angles under angles=f32), where the radial allowance does not.
        const double length_err =
            (pair_hypot(y0, y1) - pair_hypot(es[0], es[1])) / (std::max(norm, f.min_normal()) * u);
        const double length_allowed = allow.rounding * (1.0 + 0x1p-20) + 0x1p-48 / u;  // + hypot's roundings
        const bool length_ok = zero_ok || cr.flat > 0 || !(std::fabs(length_err) > length_allowed);
        const bool within = zero_ok || (!(ratio > 1.0) && length_ok);
        if (within && allow.radial_angle <= systematic_cap) {
          // Also less what a correct f16 / bf16 cache does to this pair's radial component.
          const double scale = norm / (std::max(norm, f.min_normal()) * u);
          const double rs[3] = {pe.radial - cache_share[3 * i] * scale, pe.radial - cache_share[3 * i + 1] * scale,
                                pe.radial - cache_share[3 * i + 2] * scale};
          if (clusters.empty()) clusters.resize(size_t(npairs) * ranks);
          Cluster& cl = clusters[size_t(i) * ranks + rank[c.axis_of(i) * n_tok + t]];
          ++cl.n;
          ++j.bias.n;
          for (int k = 0; k < 3; ++k) {
            cl.sum[k] += rs[k];
            j.bias.by_cache[k].sum_r += rs[k];
          }
          j.bias.sum_systematic += allow.radial_angle + allow.radial_store;
        }
        if (!within) {
          mark(t, h, i);
          add_finding("accuracy", pe.e, [&] {
            // (by value: written after the loop, for the findings kept; see add_finding)
            return std::function<std::string()>([&c, &ref, got, s, ratio, length_err, length_allowed, pe, allow, phi,
                                                  flat = cr.flat] {
            char head[400];
            if (!(ratio > 1.0)) {
              std::snprintf(head, sizeof head,
                            "accuracy: the pair's length is off by %.4g u (allowed %.4g: the rounding share; an angle "
                            "error turns a pair, it never changes its length); pair error %.4g u (allowed %.4g), "
                            "|angle| %.6g rad",
                            length_err, length_allowed, pe.e, allow.total, phi);
            } else if (flat > 0) {
              std::snprintf(head, sizeof head,
                            "accuracy: pair error %.4g u > bound %.4g u (radial %.3g, tangential %.3g)", pe.e,
                            flat, pe.radial, pe.tangential);
            } else {
              std::snprintf(head, sizeof head,
                            "accuracy: pair error %.4g u (allowed %.4g): radial %.4g u (allowed %.4g), tangential "
                            "%.4g u (allowed %.4g); |angle| %.6g rad, angle error %.3g rad = %.3g f32 ulps of |angle|%s",
                            pe.e, allow.total, pe.radial, allow.radial, pe.tangential, allow.tangential, phi, pe.angle,
                            pe.angle_ulps, pe.within_noise ? " (within the rounding noise's reach)" : "");
            }
            return pair_finding(head, c, ref, got, s);
            });
          });
        }
      }
      // Pass-through dims keep the input under the identity clause (values, or bits under identity=bits).
      for (uint32_t k = 0; k < c.head_dim; ++k) {
        if (is_rotated(c, k)) continue;
        const size_t e = base + k;
        const uint32_t in = load_bits(d, c.input.data(), e), g = load_bits(d, got, e);
        if (!keeps_input(cr, d, in, g)) ++j.passthrough_violations;
        if (!keeps_input(cr, d, in, g))
          add_finding("pass-through", 0, [&] {  // (the text only for a finding that is kept)
            return FailureText("pass-through: dim " + std::to_string(k) + " of token " + std::to_string(t) +
                               " head " + std::to_string(h) + " changed from " + describe_element(d, in) + " to " +
                               describe_element(d, g) +
                               (cr.identity_bits ? " (identity=bits: its bits)" : " (identity=values: its value)"))
                       .in(c)
                       .str() +
                   "\n";
          });
      }
    }
  }
  // The clusters that were used, in (position, pair) order.
  std::vector<std::pair<std::pair<int64_t, uint32_t>, const Cluster*>> used;
  if (!clusters.empty())
    for (uint32_t i = 0; i < npairs; ++i) {
      const uint32_t ax = c.axis_of(i);
      for (size_t t = 0; t < n_tok; ++t) {
        const Cluster& cl = clusters[size_t(i) * ranks + rank[ax * n_tok + t]];
        if (cl.n > 0 && (used.empty() || used.back().second != &cl)) used.push_back({{c.position(t, ax), i}, &cl});
      }
    }
  std::sort(used.begin(), used.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  used.erase(std::unique(used.begin(), used.end(), [](const auto& a, const auto& b) { return a.second == b.second; }),
             used.end());
  for (const auto& [key, clp] : used) {
    const Cluster& cl = *clp;
    ++j.bias.clusters;
    for (int k = 0; k < 3; ++k) {
      j.bias.by_cache[k].sum_s2 += cl.sum[k] * cl.sum[k];
      j.bias.by_cache[k].sum_ns += double(cl.n) * cl.sum[k];
    }
    j.bias.sum_n2 += double(cl.n) * double(cl.n);
  }
  for (size_t k = 0; k < later.size(); ++k)
    if (later[k]) j.findings[k].message = later[k]();
  std::stable_sort(j.findings.begin(), j.findings.end(),
                   [](const Finding& a, const Finding& b) { return a.error > b.error; });
  return j;
}

std::string Judgement::report(size_t max_lines) const {
  std::ostringstream o;
  o << violations << " violation(s) in " << pairs << " pairs; ";
  if (per_pair) o << "per-pair allowances (largest " << bound << " u)";
  else o << "bound " << bound << " u";
  o << "; max error " << stats.max << " u\n";
  for (size_t i = 0; i < findings.size() && i < max_lines; ++i) o << findings[i].message;
  return o.str();
}

}  // namespace ropecheck
