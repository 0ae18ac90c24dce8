#include "gate/gate_report.hpp"

#include <ostream>

#include <fmt/format.h>

namespace ropecheck::gate {

report::Report make_gate_report(const GateResult& g, const std::string& kind, nlohmann::json parameters) {
  report::Report r;
  r.kind = kind;
  r.environment = report::current_environment();
  parameters["kernel"] = g.kernel;
  parameters["contract"] = g.contract;
  if (parameters.contains("seed") && parameters["seed"].is_number_unsigned()) r.seed = parameters["seed"].get<uint64_t>();
  r.parameters = std::move(parameters);
  r.histogram_edges = report::default_histogram_edges();
  for (const CheckRow& row : g.rows) {
    report::Check c;
    c.name = "gate/" + row.name;
    c.source = "gate";
    c.status = row.failed_check ? "fail" : row.ran ? "pass" : "skip";
    if (row.failed_check) {
      c.cause_id = row_cause_id(row);
      c.detail = row.diagnosis.empty() ? row.smallest_message : row.diagnosis + "\n" + row.smallest_message;
      if (row.smallest) c.detail += "\nsmallest failing case: " + row.smallest->c.summary();
    } else if (row.ran) {
      c.detail = fmt::format("{}: {} case(s), {} declined; worst {:.4g} u of {:.4g} u", row.what, row.cases,
                             row.declined, row.worst_error, row.worst_bound);
    } else {
      c.detail = row.note;
    }
    r.checks.push_back(std::move(c));
  }
  // One series per dtype x layout: every judged call's finite pairs there (the property rows judge with their
  // own predicates and are not in it), each with its accuracy check: it fails when a judged call of that dtype
  // x layout failed, naming the first (the rows name every failure).
  for (const auto& [key, cb] : g.by_combo) {
    const auto [d, l] = key;
    report::Series s;
    s.kernel = g.kernel;
    s.angle_model = g.angle_model;
    s.dtype = std::string(to_string(d));
    s.layout = std::string(to_string(l));
    s.contract = g.contract;
    if (auto it = g.dtype_bound.find(d); it != g.dtype_bound.end()) s.bound = it->second;
    ErrorStats all;
    for (const auto& [b, st] : cb.by_bucket) {
      all.merge(st);
      s.buckets.push_back(report::bucket_stats(b, st, nullptr, d));
    }
    s.all = report::bucket_stats(-1, all, nullptr, d);
    s.violations = cb.failed;
    s.histogram = report::histogram(all.values, r.histogram_edges);
    report::Check c;
    c.name = "accuracy/" + s.kernel + "/" + s.angle_model + "/" + s.dtype + "/" + s.layout;
    c.source = "gate";
    c.status = cb.failed ? "fail" : "pass";
    c.detail = cb.failed ? fmt::format("{} of {} judged call(s) outside the contract; the first: {}", cb.failed,
                                       cb.calls, cb.first_failure)
                         : fmt::format("{} judged call(s), every pair within the contract", cb.calls);
    r.checks.push_back(std::move(c));
    r.series.push_back(std::move(s));
  }
  return r;
}

int write_and_compare(const report::Report& rep, const std::string& dir, const std::string& baseline,
                      const report::Slack& slack, std::ostream& out) {
  std::optional<report::Report> base;
  if (!baseline.empty()) base = report::load_report(baseline);
  if (!dir.empty()) report::write_report_dir(rep, dir);
  if (!base) return 0;
  const report::CompareResult res = report::compare_reports(*base, rep, slack);
  out << "\nBaseline compare against " << baseline << " (" << report::describe(slack) << ")\n\n" << res.table();
  return res.failed() ? 1 : 0;
}

}  // namespace ropecheck::gate
