#include "properties/judge.hpp"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <sstream>

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

std::string site_text(const RopeCase& c, const ReferenceOutput& ref, const void* got, const PairSite& s) {
  const Dtype d = c.dtype;
  std::ostringstream o;
  o << "  case: " << c.summary() << "\n"
    << "  token " << s.token << " (position " << c.positions[s.token] << "), head " << s.head << ", pair " << s.pair
    << " = dims (" << (s.k0 - head_offset(c, s.token, s.head)) << ", " << (s.k1 - head_offset(c, s.token, s.head))
    << ")\n";
  const uint32_t in0 = load_bits(d, c.input.data(), s.k0), in1 = load_bits(d, c.input.data(), s.k1);
  const uint32_t g0 = load_bits(d, got, s.k0), g1 = load_bits(d, got, s.k1);
  const uint32_t r0 = load_bits(d, ref.rounded.data(), s.k0), r1 = load_bits(d, ref.rounded.data(), s.k1);
  o << "  input:   " << describe_element(d, in0) << ", " << describe_element(d, in1) << "\n"
    << "  got:     " << describe_element(d, g0) << ", " << describe_element(d, g1) << "\n"
    << "  rounded: " << describe_element(d, r0) << ", " << describe_element(d, r1) << "\n";
  char buf[128];
  std::snprintf(buf, sizeof buf, "  exact:   %a, %a (%.17g, %.17g)\n", ref.exact[s.k0], ref.exact[s.k1],
                ref.exact[s.k0], ref.exact[s.k1]);
  o << buf;
  return o.str();
}

// A new worst pair of its bucket: its site and bits (loaded only here, not for every pair).
void record_worst(WorstPair& w, const RopeCase& c, const ReferenceOutput& ref, const void* got, const PairSite& s,
                  size_t base, const PairError& pe, const double (&exact)[2]) {
  const Dtype d = c.dtype;
  w.e = pe.e;
  w.radial = pe.radial;
  w.tangential = pe.tangential;
  w.position = c.positions[s.token];
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

Judgement judge_output(const RopeCase& c, const ReferenceOutput& ref, const void* got, double bound,
                       const JudgeOptions& opt) {
  Judgement j;
  j.bound = bound;
  const Dtype d = c.dtype;
  const Format f = format_of(d);
  const double u = f.unit_roundoff();
  const double overflow_edge = f.max_finite() * (1.0 - bound * u);
  // A bound of a whole pair norm or more leaves the direction of the output unconstrained.
  const bool sign_free = bound * u >= 1.0;
  auto add_finding = [&](std::string check, double err, std::string msg) {
    ++j.violations;
    Finding fd{std::move(check), err, std::move(msg)};
    if (j.findings.size() < opt.max_findings) {
      j.findings.push_back(std::move(fd));
    } else if (fd.check == "accuracy") {  // keep the worst accuracy findings
      auto worst = std::min_element(j.findings.begin(), j.findings.end(),
                                    [](const Finding& a, const Finding& b) { return a.error < b.error; });
      if (worst->check == "accuracy" && worst->error < fd.error) *worst = std::move(fd);
    }
  };
  const uint32_t npairs = c.rotary_dim / 2;
  for (size_t t = 0; t < c.n_tokens(); ++t) {
    const int bucket = position_bucket(c.positions[t]);
    WorstPair* worst = nullptr;  // this bucket's entry, looked up at the token's first finite pair
    for (size_t h = 0; h < c.n_heads; ++h) {
      const size_t base = head_offset(c, t, h);
      for (uint32_t i = 0; i < npairs; ++i) {
        const auto [d0, d1] = pair_dims(c.layout, c.rotary_dim, i);
        const PairSite s{t, h, i, base + d0, base + d1};
        ++j.pairs;
        const double x0 = load_f32(d, c.input.data(), s.k0), x1 = load_f32(d, c.input.data(), s.k1);
        const double y0 = load_f32(d, got, s.k0), y1 = load_f32(d, got, s.k1);
        const double r0 = load_f32(d, ref.rounded.data(), s.k0), r1 = load_f32(d, ref.rounded.data(), s.k1);
        const bool finite_in = std::isfinite(x0) && std::isfinite(x1);
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
          } else if (!finite_in) {  // an angle of 0 keeps a finite element beside a non-finite one
            if (!std::isnan(y) && load_bits(d, got, ks[k]) != load_bits(d, ref.rounded.data(), ks[k]))
              why = "an angle of 0 keeps this element: the kernel must give its bits or NaN";
          } else if (!std::isfinite(y)) {
            const bool near_overflow = std::fabs(es[k]) > overflow_edge;
            if (!(std::isinf(y) && near_overflow && (sign_free || std::signbit(y) == std::signbit(es[k]))))
              why = "finite input and finite exact output, but the kernel's output is not finite";
          }
        }
        if (!why.empty()) {
          special_ok = false;
          add_finding(std::isnan(r0) || std::isnan(r1) ? "nan" : finite_in ? "finite" : "non-finite", 0,
                      "special values: " + why + "\n" + site_text(c, ref, got, s));
        }
        if (!special_ok || !finite_in) continue;
        if (!std::isfinite(y0) || !std::isfinite(y1) || !std::isfinite(es[0]) || !std::isfinite(es[1]))
          continue;  // accepted overflow, judged above
        const PairError pe = pair_error(d, x0, x1, y0, y1, es[0], es[1]);
        if (opt.keep_worst_pairs) {
          if (!worst) worst = &j.worst_by_bucket[bucket];
          if (pe.e > worst->e) record_worst(*worst, c, ref, got, s, base, pe, es);
        }
        if (opt.keep_values) {
          j.stats.add(pe);
          j.by_bucket[bucket].add(pe);
        } else {
          ErrorStats* ss[2] = {&j.stats, &j.by_bucket[bucket]};
          for (ErrorStats* st : ss) {
            ++st->count;
            st->max = std::max(st->max, pe.e);
            st->sum += pe.e;
            st->sum_radial += pe.radial;
            st->sum_tangential += pe.tangential;
          }
        }
        if (!(pe.e <= bound)) {
          char head[160];
          std::snprintf(head, sizeof head, "accuracy: pair error %.4g u > bound %.4g u (radial %.3g, tangential %.3g)\n",
                        pe.e, bound, pe.radial, pe.tangential);
          add_finding("accuracy", pe.e, head + site_text(c, ref, got, s));
        }
      }
      // Pass-through dims are bit-exact.
      for (uint32_t k = c.rotary_dim; k < c.head_dim; ++k) {
        const size_t e = base + k;
        const uint32_t in = load_bits(d, c.input.data(), e), g = load_bits(d, got, e);
        if (in != g) {
          std::ostringstream o;
          o << "pass-through: dim " << k << " of token " << t << " head " << h << " changed from "
            << describe_element(d, in) << " to " << describe_element(d, g) << "\n  case: " << c.summary() << "\n";
          add_finding("pass-through", 0, o.str());
        }
      }
    }
  }
  std::stable_sort(j.findings.begin(), j.findings.end(),
                   [](const Finding& a, const Finding& b) { return a.error > b.error; });
  return j;
}

std::string Judgement::report(size_t max_lines) const {
  std::ostringstream o;
  o << violations << " violation(s) in " << pairs << " pairs; bound " << bound << " u; max error " << stats.max
    << " u\n";
  for (size_t i = 0; i < findings.size() && i < max_lines; ++i) o << findings[i].message;
  return o.str();
}

}  // namespace ropecheck
