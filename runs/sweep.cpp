#include "runs/sweep.hpp"

#include "properties/promise.hpp"

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
  if (o.model) apply_case_template(*o.model, c);
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


Contract default_contract(const Implementation& impl) { return promise_of(impl).contract; }

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
        if (rc == RC_UNSUPPORTED && o.model) {
          if (o.declined)
            o.declined->push_back(fmt::format("{} {} {}", impl->name, to_string(d), to_string(l)));
          continue;
        }
        const KernelPromise promise = promise_of(*impl);
        std::set<AngleModel> models = {promise.angle_model};
        if (o.also_exact_model) models.insert(AngleModel::exact);
        const Contract contract = o.contract ? *o.contract : default_contract(*impl);
        const Criteria criteria = Criteria::of(promise.error_model, contract);
        for (AngleModel m : models) {
          if (!refs.count(m)) refs[m] = reference_rope(c, {m});
          SweepRow row;
          row.impl = impl->name;
          row.model = m;
          row.dtype = d;
          row.layout = l;
          row.contract = contract;
          row.bound = criteria.case_bound(c);
          row.own_model = m == promise.angle_model;
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
          default:
            out += st.resolved_angle_count ? fmt::format(" {:.3g} |", st.max_resolved_angle_ulps) : " - |";
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
        r.all.resolved_angle_count ? fmt::format("{:.3g}", r.all.max_resolved_angle_ulps) : std::string("-"), r.bound,
        r.worst_ratio, verdict);
  }
  return out;
}

std::string format_sweep_summary(const std::vector<SweepRow>& rows) {
  struct Cell {
    double max = 0, worst_ratio = 0;
    uint64_t violations = 0, pairs = 0;
    bool check = true, seen = false;
  };
  std::vector<std::pair<std::string, std::string>> order;  // (kernel, angle model), first seen first
  std::map<std::pair<std::string, std::string>, std::map<Dtype, Cell>> cells;
  std::set<Dtype> dtypes;
  for (const auto& r : rows) {
    const std::pair<std::string, std::string> key{r.impl, std::string(to_string(r.model))};
    if (!cells.count(key)) order.push_back(key);
    Cell& c = cells[key][r.dtype];
    dtypes.insert(r.dtype);
    c.seen = true;
    c.max = std::max(c.max, r.all.max);
    c.worst_ratio = std::max(c.worst_ratio, r.worst_ratio);
    c.violations += r.violations;
    c.pairs += r.all.count;
    c.check = c.check && r.expected_to_pass;
  }
  std::string out = "| kernel | angle model |";
  for (Dtype d : dtypes) out += fmt::format(" {}: max e (u), verdict |", to_string(d));
  out += "\n|---|---|";
  for (size_t k = 0; k < dtypes.size(); ++k) out += "---|";
  out += "\n";
  for (const auto& key : order) {
    out += fmt::format("| {} | {} |", key.first, key.second);
    for (Dtype d : dtypes) {
      const auto it = cells[key].find(d);
      if (it == cells[key].end()) {
        out += " - |";
        continue;
      }
      const Cell& c = it->second;
      const std::string verdict = !c.check           ? "n/a (another angle model)"
                                  : c.violations == 0 ? "pass"
                                                      : fmt::format("FAIL ({} violations)", c.violations);
      out += fmt::format(" {:.3g}, {} |", c.max, verdict);
    }
    out += "\n";
  }
  return out;
}

}  // namespace ropecheck
