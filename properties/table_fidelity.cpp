#include "properties/table_fidelity.hpp"

#include <fmt/format.h>

#include <cmath>
#include <stdexcept>
#include <vector>

#include "reference/reference.hpp"

namespace ropecheck {

TableJudgement judge_table(const RopeCase& angles, const CosSinTable& t, const KernelErrorModel& m) {
  if (angles.table) throw std::invalid_argument("judge_table: the angles' case has a table of its own");
  const uint32_t np = angles.rotary_dim / 2;
  if (t.cos.size() != t.rows * np || (t.is_angle() ? !t.sin.empty() : t.sin.size() != t.rows * np))
    throw std::invalid_argument("judge_table: the table is not " + std::to_string(t.rows) + " rows of " +
                                std::to_string(np) + " pairs");
  TableJudgement j;
  j.dtype = t.dtype;
  j.kind = t.kind;
  // Exact values once per entry (the hypotheses below reuse them): af cos, af sin, the angle, the allowance.
  // Exact values for positions -2 .. rows + 1 (the row-shift hypotheses below), at index (position + 2) np + i.
  const size_t n_exact = (t.rows + 4) * np;
  std::vector<double> ec(n_exact), es(n_exact), ea(n_exact), allow(t.rows * np);
  for (size_t r = 0; r < t.rows + 4; ++r)
    for (uint32_t i = 0; i < np; ++i) {
      const size_t k = r * np + i;
      const int64_t pos = int64_t(r) - 2;
      exact_cos_sin(angles, i, pos, ec[k], es[k]);
      ea[k] = pos == 0 ? 0.0 : exact_angle(angles, i, pos);
    }
  // An angle table's values are f32 by definition (kernel_abi.h): its own rounding, half an ulp of f32 at the
  // angle, comes on top of the angle clause.
  for (size_t k = 0; k < t.rows * np; ++k) {
    const double phi = std::fabs(ea[k + 2 * np]);
    allow[k] = t.is_angle() ? angle_allowance(m, angles, uint32_t(k % np), phi) + (phi > 0 ? 0.5 * ulp32(phi) : 0.0)
                            : table_entry_allowance(m, angles, uint32_t(k % np), phi);
  }
  // The error of entry k under a hypothesis about the table (h: 0 as given; others transform the given values
  // or take the exact values of another row), relative to its allowance. An allowance of 0 (an exact angle
  // of 0 under angles=exact) takes any error as infinite, none as 0.
  auto ratio = [&](size_t k, double gc, double gs, size_t ek) {  // ek: an index into the exact values
    const double err = t.is_angle() ? std::fabs(gc - ea[ek]) : std::hypot(gc - ec[ek], gs - es[ek]);
    if (err == 0) return 0.0;
    return allow[k] > 0 ? err / allow[k] : INFINITY;
  };
  for (size_t k = 0; k < t.rows * np; ++k) {
    ++j.entries;
    const double gc = t.cos[k], gs = t.is_angle() ? 0.0 : t.sin[k];
    const double q = ratio(k, gc, gs, k + 2 * np);
    if (q > 1) ++j.failures;
    if (q > j.worst_ratio || j.entries == 1) {
      j.worst_ratio = q;
      j.worst_row = k / np;
      j.worst_pair = uint32_t(k % np);
      j.given[0] = gc;
      j.given[1] = gs;
      j.exact[0] = t.is_angle() ? ea[k + 2 * np] : ec[k + 2 * np];
      j.exact[1] = t.is_angle() ? 0.0 : es[k + 2 * np];
    }
  }
  if (j.ok()) return j;
  // The cause: the first hypothesis under which every failing entry fits its allowance (twice, for the
  // transformation's own rounding).
  struct Hypothesis {
    std::string text;
    bool fits = true;
  };
  const double af = angles.attention_factor;
  auto fits = [&](auto&& transformed) {
    for (size_t k = 0; k < t.rows * np; ++k) {
      const double gc = t.cos[k], gs = t.is_angle() ? 0.0 : t.sin[k];
      if (ratio(k, gc, gs, k + 2 * np) <= 1) continue;
      if (!transformed(k, gc, gs)) return false;
    }
    return true;
  };
  auto as = [&](size_t k, double c, double s, size_t ek) { return ratio(k, c, s, ek) <= 2; };
  auto same_row = [&](size_t k) { return k + 2 * np; };
  if (!t.is_angle()) {
    if (fits([&](size_t k, double c, double s) { return as(k, c, -s, same_row(k)); }))
      j.cause = "sin negated: every failing entry is (af cos, -af sin) of its angle";
    else if (fits([&](size_t k, double c, double s) { return as(k, s, c, same_row(k)); }))
      j.cause = "cos and sin swapped";
    else if (af != 1.0 && fits([&](size_t k, double c, double s) { return as(k, c * af, s * af, same_row(k)); }))
      j.cause = fmt::format("the attention factor ({}) is missing from the values", af);
    else if (af != 1.0 && fits([&](size_t k, double c, double s) { return as(k, c / af, s / af, same_row(k)); }))
      j.cause = fmt::format("the attention factor ({}) is applied twice", af);
  } else if (fits([&](size_t k, double c, double) { return as(k, -c, 0, same_row(k)); })) {
    j.cause = "angles negated";
  }
  for (int shift : {1, -1, 2, -2}) {
    if (!j.cause.empty()) break;
    if (fits([&](size_t k, double c, double s) {
          return as(k, c, s, size_t(long(k / np) + shift + 2) * np + k % np);
        }))
      j.cause = fmt::format("row r holds the values of position r{:+d}", shift);
  }
  if (j.cause.empty() && !t.is_angle())
    for (Dtype narrow : {Dtype::f16, Dtype::bf16}) {
      if (format_of(narrow).precision >= format_of(m.cos_sin).precision) continue;
      bool all = true;
      for (size_t k = 0; k < t.rows * np && all; ++k) all = is_value_of(narrow, t.cos[k]) && is_value_of(narrow, t.sin[k]);
      if (!all) continue;
      KernelErrorModel wide = m;
      wide.cos_sin = narrow;
      bool within = true;
      for (size_t k = 0; k < t.rows * np && within; ++k)
        within = std::hypot(t.cos[k] - ec[same_row(k)], t.sin[k] - es[same_row(k)]) <=
                 table_entry_allowance(wide, angles, uint32_t(k % np), std::fabs(ea[same_row(k)]));
      if (within) {
        j.cause = fmt::format("the values are rounded to {} (within what cos-sin={} allows), coarser than the "
                              "contract's cos-sin={} promises (FlashAttention #823)",
                              to_string(narrow), to_string(narrow), to_string(m.cos_sin));
        break;
      }
    }
  if (j.cause.empty())
    j.cause = fmt::format("{} of {} entries beyond what the contract's angle and cos-sin clauses allow", j.failures,
                          j.entries);
  return j;
}

std::string TableJudgement::report() const {
  if (ok())
    return fmt::format("table fidelity: PASS ({} entries, worst at {:.3g} of its allowance)", entries, worst_ratio);
  std::string s = fmt::format("table fidelity: FAIL: {} ({} of {} entries fail)\n", cause, failures, entries);
  if (kind == TableKind::angle)
    s += fmt::format("  worst: row {} pair {}: angle given {} ({}), exact {}; {:.3g}x its allowance", worst_row,
                     worst_pair, given[0], hexfloat(given[0]), exact[0], worst_ratio);
  else
    s += fmt::format("  worst: row {} pair {}: (cos, sin) given ({}, {}) = ({}, {}) {}, exact ({:.17g}, {:.17g}); {:.3g}x "
                     "its allowance",
                     worst_row, worst_pair, given[0], given[1], hexfloat(given[0]), hexfloat(given[1]),
                     to_string(dtype), exact[0], exact[1], worst_ratio);
  return s;
}

}  // namespace ropecheck
