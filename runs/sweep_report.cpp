#include "runs/sweep_report.hpp"

#include <fmt/format.h>

#include <string>

#include "runs/findings.hpp"

namespace ropecheck::report {

using nlohmann::json;

Report make_sweep_report(const SweepOptions& o, const std::vector<SweepRow>& rows) {
  Report r;
  r.kind = "sweep";
  r.environment = current_environment();
  r.seed = o.seed;
  json impls = json::array();
  for (const auto& n : o.impls) impls.push_back(n);
  json dtypes = json::array(), layouts = json::array();
  for (Dtype d : o.dtypes) dtypes.push_back(std::string(to_string(d)));
  for (Layout l : o.layouts) layouts.push_back(std::string(to_string(l)));
  r.parameters = {{"impls", impls},
                  {"contract", o.contract ? o.contract->spec() : std::string("each kernel's own")},
                  {"seed", o.seed},
                  {"max_log2_position", o.max_log2_position},
                  {"bucket_step", o.bucket_step},
                  {"tokens_per_bucket", o.tokens_per_bucket},
                  {"n_heads", o.n_heads},
                  {"head_dim", o.head_dim},
                  {"rotary_dim", o.rotary_dim},
                  {"base", o.base},
                  {"also_exact_model", o.also_exact_model},
                  {"dtypes", dtypes},
                  {"layouts", layouts},
                  {"input_distribution", "normal(0, 1), rounded to the dtype"}};
  r.histogram_edges = default_histogram_edges();
  for (const auto& row : rows) {
    Series s;
    s.kernel = row.impl;
    s.angle_model = std::string(to_string(row.model));
    s.dtype = std::string(to_string(row.dtype));
    s.layout = std::string(to_string(row.layout));
    s.bound = row.bound;
    s.judged_under_own_model = row.own_model;
    s.contract = row.contract.spec();
    s.worst_ratio = row.worst_ratio;
    s.violations = row.violations;
    s.first_finding = row.first_finding;
    const WorstPair* overall = nullptr;
    for (const auto& [b, w] : row.worst_by_bucket)
      if (w.valid() && (!overall || w.e > overall->e)) overall = &w;
    s.all = bucket_stats(-1, row.all, overall, row.dtype);
    for (const auto& [b, st] : row.by_bucket) {
      auto it = row.worst_by_bucket.find(b);
      s.buckets.push_back(bucket_stats(b, st, it == row.worst_by_bucket.end() ? nullptr : &it->second, row.dtype));
    }
    s.histogram = histogram(row.all.values, r.histogram_edges);
    if (row.expected_to_pass) {
      Check c;
      c.name = "accuracy/" + s.kernel + "/" + s.angle_model + "/" + s.dtype + "/" + s.layout;
      c.status = s.violations == 0 ? "pass" : "fail";
      const std::string contract = row.contract.short_spec();
      c.detail = s.violations == 0
                     ? fmt::format("{} pairs within their allowances under contract {} (the closest at {:.3g} of its "
                                   "allowance); max {:.3g} u, flat bound {:.3g} u",
                                   s.all.count, contract, row.worst_ratio, s.all.max, s.bound)
                     : fmt::format("{} violation(s) under contract {} (the worst pair at {:.3g} of its allowance); "
                                   "max {:.3g} u, flat bound {:.3g} u",
                                   s.violations, contract, row.worst_ratio, s.all.max, s.bound);
      r.checks.push_back(c);
    }
    r.series.push_back(std::move(s));
  }
  return r;
}

SweepOptions headline_options(uint64_t seed, uint32_t tokens_per_bucket) {
  SweepOptions o;
  o.impls = {"scalar", "conventional-fp32"};
  o.seed = seed;
  o.max_log2_position = 23;  // the last bucket is [2^23, 2^24)
  o.bucket_step = 1;
  o.tokens_per_bucket = tokens_per_bucket;
  o.n_heads = 4;
  o.head_dim = 128;
  o.rotary_dim = 128;
  o.also_exact_model = true;
  o.layouts = {Layout::interleaved};
  return o;
}


}  // namespace ropecheck::report
