#include "reports/sweep.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <set>
#include <stdexcept>
#include <utility>

namespace ropecheck {

namespace {

RopeCase sweep_case(const SweepOptions& o, Dtype d, Layout l, std::mt19937_64& rng) {
  RopeCase c;
  c.dtype = d;
  c.layout = l;
  c.head_dim = o.head_dim;
  c.rotary_dim = o.rotary_dim;
  c.n_heads = o.n_heads;
  c.base = o.base;
  for (int k = 0; k <= o.max_log2_position; k += o.bucket_step) {
    // positions in [2^k, 2^(k+1)), plus 0 once
    const int64_t lo = int64_t(1) << k;
    std::uniform_int_distribution<int64_t> pick(lo, 2 * lo - 1);
    for (uint32_t t = 0; t < o.tokens_per_bucket; ++t) c.positions.push_back(pick(rng));
  }
  c.positions.push_back(0);
  c.input.resize(c.n_bytes());
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (size_t k = 0; k < c.n_elements(); ++k) store_f32(d, c.input.data(), k, normal(rng));
  return c;
}

}  // namespace

std::vector<SweepRow> run_sweep(const SweepOptions& o) {
  std::vector<const Implementation*> impls;
  if (o.impls.empty()) {
    for (const auto& i : implementations()) impls.push_back(&i);
  } else {
    for (const auto& n : o.impls) {
      const Implementation* i = find_implementation(n);
      if (!i) throw std::invalid_argument("unknown implementation '" + n + "'");
      impls.push_back(i);
    }
  }
  return run_sweep(o, impls);
}

void ResolvedAngle::add(double ulps) {
  ++count;
  max_ulps = std::max(max_ulps, ulps);
}

void ResolvedAngle::merge(const ResolvedAngle& o) {
  count += o.count;
  max_ulps = std::max(max_ulps, o.max_ulps);
}

std::map<int, ResolvedAngle> resolved_angle_errors(const RopeCase& c, const ReferenceOutput& ref, const void* got,
                                                   const Criteria& cr) {
  std::map<int, ResolvedAngle> out;
  const Dtype d = c.dtype;
  const Format f = format_of(d);
  const double u = f.unit_roundoff(), mn = f.min_normal();
  const uint32_t npairs = c.rotary_dim / 2;
  if (ref.angle.size() != c.n_tokens() * npairs) return out;
  for (size_t t = 0; t < c.n_tokens(); ++t) {
    ResolvedAngle& bucket = out[position_bucket(c.positions[t])];
    for (uint32_t i = 0; i < npairs; ++i) {
      const double phi = ref.angle[t * npairs + i];
      if (!(phi > 0) || !std::isfinite(phi)) continue;
      const double quantum = ulp32(phi) * kAngleResolution;
      // Rounding the output alone moves a pair by up to about u radians (the
      // tangential allowance is >= 1 u): most small angles end here, cheaply.
      if (quantum < 0.5 * u) continue;
      for (size_t h = 0; h < c.n_heads; ++h) {
        const size_t base = head_offset(c, t, h);
        const auto [d0, d1] = pair_dims(c.layout, c.rotary_dim, i);
        const double x0 = load_f32(d, c.input.data(), base + d0), x1 = load_f32(d, c.input.data(), base + d1);
        const double y0 = load_f32(d, got, base + d0), y1 = load_f32(d, got, base + d1);
        const double e0 = ref.exact[base + d0], e1 = ref.exact[base + d1];
        if (!std::isfinite(x0) || !std::isfinite(x1) || !std::isfinite(y0) || !std::isfinite(y1) ||
            !std::isfinite(e0) || !std::isfinite(e1))
          continue;
        const double norm = std::hypot(x0, x1), en = std::hypot(e0, e1);
        if (!(en > 0)) continue;
        // What rounding can explain, as an angle: the tangential allowance without the angle clause.
        const double noise = cr.allowance(c, i, norm, 0.0).tangential * u * std::max(norm, mn) / en;
        if (!(noise <= quantum)) continue;
        const PairError pe = pair_error(d, x0, x1, y0, y1, e0, e1, phi);
        if (std::isnan(pe.angle_ulps)) continue;
        bucket.add(pe.angle_ulps);
      }
    }
  }
  return out;
}

Contract default_contract(const Implementation& impl) {
  Contract c;
  for (const Implementation& b : implementations())
    if (b.fn == impl.fn) c.identity_bits = true;  // a built-in kernel (or a copy of one's entry point)
  return c;
}

std::vector<SweepRow> run_sweep(const SweepOptions& o, const std::vector<const Implementation*>& impls) {
  std::vector<SweepRow> rows;
  const std::vector<Dtype> dtypes =
      o.dtypes.empty() ? std::vector<Dtype>(std::begin(kAllDtypes), std::end(kAllDtypes)) : o.dtypes;
  const std::vector<Layout> layouts =
      o.layouts.empty() ? std::vector<Layout>(std::begin(kAllLayouts), std::end(kAllLayouts)) : o.layouts;
  size_t blocks_done = 0;
  for (Dtype d : dtypes) {
    for (Layout l : layouts) {
      std::mt19937_64 rng(o.seed * 1000003u + uint64_t(d) * 7 + uint64_t(l));
      const RopeCase c = sweep_case(o, d, l, rng);
      std::map<AngleModel, ReferenceOutput> refs;
      for (const Implementation* impl : impls) {
        if (!impl->supports(d) || !impl->supports(l)) continue;
        Bytes out;
        const int rc = run_kernel(*impl, c, out);
        std::set<AngleModel> models = {impl->angle_model};
        if (o.also_exact_model) models.insert(AngleModel::exact);
        const Contract contract = o.contract ? *o.contract : default_contract(*impl);
        const Criteria criteria = Criteria::of(impl->error_model, contract);
        for (AngleModel m : models) {
          if (!refs.count(m)) refs[m] = reference_rope(c, {m});
          SweepRow row;
          row.impl = impl->name;
          row.model = m;
          row.dtype = d;
          row.layout = l;
          row.contract = contract;
          row.bound = criteria.case_bound(c);
          row.own_model = m == impl->angle_model;
          row.expected_to_pass = row.own_model || (o.contract && m == AngleModel::exact);
          if (rc != RC_OK) {
            row.violations = 1;
            row.first_finding = fmt::format("kernel returned {}", rc);
          } else {
            JudgeOptions jo;
            jo.keep_worst_pairs = true;
            Judgement j = judge_output(c, refs[m], out.data(), criteria, jo);
            row.by_bucket = std::move(j.by_bucket);
            row.all = std::move(j.stats);
            row.violations = j.violations;
            row.worst_ratio = j.worst_ratio;
            if (!j.findings.empty()) row.first_finding = j.findings.front().message;
            row.worst_by_bucket = std::move(j.worst_by_bucket);
            row.resolved_by_bucket = resolved_angle_errors(c, refs[m], out.data(), criteria);
            for (const auto& [b, ra] : row.resolved_by_bucket) row.resolved_all.merge(ra);
          }
          rows.push_back(std::move(row));
        }
      }
      if (o.progress) o.progress(++blocks_done, dtypes.size() * layouts.size());
    }
  }
  return rows;
}

std::string format_sweep_table(const std::vector<SweepRow>& rows) {
  std::set<int> buckets;
  for (const auto& r : rows)
    for (const auto& [b, s] : r.by_bucket) buckets.insert(b);
  std::string out;
  const char* titles[] = {
      "\nMax pair error (u) by position bucket\n\n",
      "\nMean pair error (u) by position bucket\n\n",
      "\nError components by position bucket: max |radial| / max |tangential| (u)\n\n",
      "\nMax angle error by position bucket, in f32 ulps of |phi| (the angle from the exact output to the kernel's; "
      "pairs where rounding can explain at most 1/8 ulp; -: none)\n\n",
  };
  for (int pass = 0; pass < 4; ++pass) {
    out += titles[pass];
    out += "| kernel | angle model | dtype | layout |";
    for (int b : buckets) out += fmt::format(" {} |", bucket_label(b));
    out += "\n|---|---|---|---|";
    for (size_t i = 0; i < buckets.size(); ++i) out += "---:|";
    out += "\n";
    for (const auto& r : rows) {
      out += fmt::format("| {} | {} | {} | {} |", r.impl, to_string(r.model), to_string(r.dtype), to_string(r.layout));
      for (int b : buckets) {
        auto it = r.by_bucket.find(b);
        if (it == r.by_bucket.end()) {
          out += " - |";
          continue;
        }
        const ErrorStats& st = it->second;
        switch (pass) {
          case 0: out += fmt::format(" {:.3g} |", st.max); break;
          case 1: out += fmt::format(" {:.3g} |", st.mean()); break;
          case 2: out += fmt::format(" {:.3g} / {:.3g} |", st.max_radial, st.max_tangential); break;
          default: {
            auto ra = r.resolved_by_bucket.find(b);
            out += ra != r.resolved_by_bucket.end() && ra->second.count ? fmt::format(" {:.3g} |", ra->second.max_ulps)
                                                                          : " - |";
          }
        }
      }
      out += "\n";
    }
  }
  out += "\nSummary (all buckets); verdict: every pair within its allowance under the contract (violations)\n\n";
  out += "| kernel | angle model | dtype | layout | contract | pairs | max | p99 | mean | max radial | max tangential | "
         "bias (radial) | bias (angle) | max angle (rad) | max angle (f32 ulps, resolved) | bound | worst/allowance | "
         "verdict |\n";
  out += "|---|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n";
  for (const auto& r : rows) {
    const char* verdict = r.violations == 0 ? "pass" : r.expected_to_pass ? "FAIL" : "fails (not a check: other model)";
    out += fmt::format(
        "| {} | {} | {} | {} | {} | {} | {:.3g} | {:.3g} | {:.3g} | {:.3g} | {:.3g} | {:+.2e} | {:+.2e} | {:.3g} | {} | "
        "{:.3g} | {:.3g} | {} |\n",
        r.impl, to_string(r.model), to_string(r.dtype), to_string(r.layout), r.contract.short_spec(), r.all.count,
        r.all.max, r.all.percentile(0.99), r.all.mean(), r.all.max_radial, r.all.max_tangential, r.all.bias(),
        r.all.tangential_bias(), r.all.max_angle,
        r.resolved_all.count ? fmt::format("{:.3g}", r.resolved_all.max_ulps) : std::string("-"), r.bound,
        r.worst_ratio, verdict);
  }
  return out;
}

}  // namespace ropecheck
