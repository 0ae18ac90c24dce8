// The gate's verdict as text: the table, the error decomposition by position, JUnit XML.
#include "gate/gate.hpp"
#include "properties/causes.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <sstream>
#include <fstream>
#include <iostream>

namespace ropecheck::gate {

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

// A position, with its size as a power of two when it is large ("1099511627776 (2^40)", "2147483649 (2^31.0)").
std::string position_text(int64_t m) {
  const double a = std::fabs(double(m));
  if (a < 1 << 20) return std::to_string(m);
  const uint64_t u = m < 0 ? uint64_t(-(m + 1)) + 1 : uint64_t(m);
  if ((u & (u - 1)) == 0) return fmt::format("{} ({}2^{})", m, m < 0 ? "-" : "", 63 - __builtin_clzll(u));
  return fmt::format("{} ({}2^{:.1f})", m, m < 0 ? "-" : "", std::log2(a));
}

// "12 of 12 calls" / "0 of 12 calls (every one declined)" / "no call made".
std::string tally_text(const FeatureTally& t) {
  if (t.sent == 0) return "no call made";
  if (t.accepted == 0) return fmt::format("0 of {} call(s) accepted (every one declined)", t.sent);
  return fmt::format("{} of {} call(s) accepted", t.accepted, t.sent);
}

}  // namespace

std::string coverage_line(const GateResult& g) {
  const Coverage& cv = g.coverage;
  std::string o = fmt::format("coverage: {} of {} calls accepted", cv.accepted, cv.sent);
  if (cv.sent > 0) {
    // Rounded down: 100 % only when every call was accepted, 0 % only when none was.
    const double pct = std::floor(100.0 * double(cv.accepted) / double(cv.sent));
    o += cv.accepted > 0 && pct == 0 ? std::string(" (< 1 %)") : fmt::format(" ({:.0f} %)", pct);
    if (2 * cv.accepted < cv.sent) o += ": most were declined (RC_UNSUPPORTED), and are not checked";
  }
  if (cv.any_position)
    o += fmt::format("; positions {} .. {}", position_text(cv.min_position), position_text(cv.max_position));
  if (g.position_limit >= 0)
    o += fmt::format(" (the kernel took position {} and declined {}, {} probe calls: the rows kept within 0 .. {}, the long "
                     "positions row's calls beyond it declined)",
                     position_text(g.position_limit), position_text(g.position_limit + 1), g.position_probes,
                     position_text(g.position_limit));
  if (!g.rotary_slice.empty())
    o += fmt::format("; every case's rotated slice {} ({})", g.rotary_slice, g.rotary_slice_found);
  if (!g.model_name.empty())
    o += fmt::format("; model {}: {} of {} calls in its configuration accepted", g.model_name, cv.model_accepted,
                     cv.model_sent);
  std::vector<std::string> per;
  for (const FeatureInfo& f : all_features()) {
    const FeatureTally& t = cv.of(f.feature);
    const bool named = g.require.has(f.feature) || (g.supports && g.supports->has(f.feature));
    if (t.sent == 0 && !named) continue;
    if (t.sent == 0) per.push_back(fmt::format("{} none", f.name));
    else if (t.accepted == t.sent) per.push_back(fmt::format("{} {}", f.name, t.accepted));
    else per.push_back(fmt::format("{} {} of {}", f.name, t.accepted, t.sent));
  }
  if (!per.empty()) o += fmt::format("; accepted calls per feature: {}", fmt::join(per, ", "));
  std::map<std::string, std::pair<uint64_t, uint64_t>> not_sent;  // why -> calls, property executions
  for (const auto& r : g.rows)
    for (const auto& [why, n] : r.not_sent)
      (r.name.rfind("property: ", 0) == 0 ? not_sent[why].second : not_sent[why].first) += n;
  for (const auto& [why, n] : not_sent)
    o += fmt::format("; not made ({}): {} call(s){}", why, n.first,
                     n.second ? fmt::format(", {} property execution(s)", n.second) : "");
  return o;
}

bool judge_coverage(GateResult& g, const std::optional<FeatureSet>& supports, const FeatureSet& require,
                    bool model_required, const std::string& nothing_accepted_why,
                    const std::string& nothing_accepted_diagnosis) {
  g.supports = supports;
  g.require = require;
  const Coverage& cv = g.coverage;
  std::vector<std::string> unmet;
  size_t met = 0;
  if (g.accepted == 0) unmet.push_back(nothing_accepted_why);
  std::vector<std::string> short_unmet;
  for (Feature f : require.list()) {
    if (cv.of(f).accepted > 0) {
      ++met;
      continue;
    }
    unmet.push_back(fmt::format("--require {}: {}", to_string(f), tally_text(cv.of(f))));
    short_unmet.push_back(std::string(to_string(f)));
  }
  if (supports)
    for (Feature f : supports->list()) {
      if (require.has(f) || cv.of(f).sent == 0) continue;  // a feature the run made no call of is not asked for
      if (cv.of(f).accepted > 0) {
        ++met;
        continue;
      }
      unmet.push_back(fmt::format("{} is in --supports, but {}: a kernel that implements it accepts its calls",
                                  to_string(f), tally_text(cv.of(f))));
      short_unmet.push_back(std::string(to_string(f)));
    }
  if (model_required) {
    if (cv.model_accepted > 0) {
      ++met;
    } else {
      unmet.push_back(fmt::format("the model's configuration{}: {} -- a run with a model checks that model, and "
                                  "nothing of it was checked",
                                  g.model_name.empty() ? "" : " (" + g.model_name + ")",
                                  tally_text({cv.model_sent, cv.model_accepted})));
      short_unmet.push_back("the model's configuration");
    }
  }
  // Positions up to the largest were asked for (--max-position, a model's context), and the kernel declines some.
  if (g.position_limit >= 0 && !g.positions_required_by.empty()) {
    unmet.push_back(fmt::format("positions 0 .. {} ({}): the kernel took position {} and declined {} ({} probe calls)",
                                position_text(g.positions_asked), g.positions_required_by,
                                position_text(g.position_limit), position_text(g.position_limit + 1),
                                g.position_probes));
    short_unmet.push_back(fmt::format("positions {} .. {} (position {} declined)", position_text(g.position_limit + 1),
                                      position_text(g.positions_asked), position_text(g.position_limit + 1)));
  }
  if (unmet.empty() && require.empty() && !supports) return true;
  CheckRow* r = nullptr;
  for (auto& x : g.rows)
    if (x.name == "coverage") r = &x;
  if (!r) {
    g.rows.push_back({});
    r = &g.rows.back();
    r->name = "coverage";
  }
  if (r->what.empty())
    r->what = "the kernel accepts calls: something; each --require feature; each --supports feature the run made calls "
              "of; with a model, a call in its configuration";
  if (unmet.empty()) {
    r->ran = true;
    r->cases = met;
    r->note = fmt::format("every requirement met ({}{}{})", require.empty() ? "" : "--require " + require.text(),
                          !require.empty() && supports ? "; " : "", supports ? "--supports " + supports->text() : "");
    return true;
  }
  r->failed_check = true;
  r->failed = unmet.size();
  r->smallest_message.clear();
  for (const std::string& u : unmet) r->smallest_message += (r->smallest_message.empty() ? "" : "\n") + u;
  if (g.accepted == 0) r->diagnosis = nothing_accepted_diagnosis;
  else r->diagnosis = fmt::format("coverage: no accepted call of {}", fmt::join(short_unmet, ", "));
  return false;
}

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

std::string fit_verdict_reason(const std::vector<std::string>& parts, const std::string& more_what,
                               const std::string& keep) {
  const size_t room = kVerdictLineMax - std::string_view("verdict: FAIL ()").size();
  const std::string tail = keep.empty() ? "" : "; " + keep;
  auto with = [&](size_t m) {  // the first m parts, the count of the rest, the kept part
    std::string o;
    for (size_t k = 0; k < m; ++k) o += (k ? "; " : "") + parts[k];
    if (m < parts.size()) o += fmt::format("{}{} more {}", m ? "; " : "", parts.size() - m, more_what);
    return o + tail;
  };
  for (size_t m = parts.size(); m >= 1; --m)
    if (const std::string o = with(m); fits_verdict_line(o)) return o;
  // Not even the first part whole: cut it at a word.
  std::string first = parts.empty() ? "" : parts.front();
  const std::string after =
      (parts.size() > 1 ? fmt::format("; {} more {}", parts.size() - 1, more_what) : std::string()) + tail;
  const size_t budget = room > after.size() + 4 ? room - after.size() - 4 : 0;
  if (first.size() > budget) {
    size_t cut = first.rfind(' ', budget);
    first.resize(cut == std::string::npos || cut == 0 ? budget : cut);
    first += " ...";
  }
  return first + after;
}

namespace {
// The first lines of either verdict: what ran, its coverage, the contract, the ABI and the model.
std::string verdict_head(const GateResult& g) {
  std::string o;
  o += fmt::format("{}: {}{} ({} calls, {} accepted, {:.1f} s)\n", g.command,
                   g.command == "ropecheck gate" ? "kernel " : "", g.kernel, g.calls, g.accepted, g.seconds);
  o += coverage_line(g) + "\n";
  if (!g.contract.empty()) o += fmt::format("contract: {}\n", g.contract);
  if (!g.abi.empty()) o += fmt::format("abi: {}\n", g.abi);
  if (!g.padding.empty()) o += g.padding + "\n";
  if (!g.model.empty()) o += g.model;
  return o;
}
}  // namespace

// The brief verdict (docs/gate.md, "Output"): what ran and what was covered, the contract, the worst margin, the
// rows not run by name, one line per failing row with its cause, one reproduce line, the kernel host's line and
// the verdict. Every table stays in the report and behind --verbose (format_verdict).
std::string format_brief_verdict(const GateResult& g, const std::string& details) {
  std::string o;
  o += verdict_head(g);
  // The worst margin: the row whose worst pair came nearest its allowance (or went furthest past it).
  const CheckRow* worst = nullptr;
  for (const auto& r : g.rows)
    if (r.ran && r.worst_bound > 0 && (!worst || r.worst_error / r.worst_bound > worst->worst_error / worst->worst_bound))
      worst = &r;
  if (worst)
    o += fmt::format("worst margin: {:.4g} of the allowance ({}: {:.5g} u of {:.5g} u)\n",
                     worst->worst_error / worst->worst_bound, worst->name, worst->worst_error, worst->worst_bound);
  std::vector<std::string> not_run;
  for (const auto& r : g.rows)
    if (!r.ran && !r.failed_check) not_run.push_back(r.name);
  if (!not_run.empty())
    o += fmt::format("not run: {} row(s): {}\n", not_run.size(), fmt::join(not_run, ", "));
  const CheckRow* first_replay = nullptr;
  for (const auto& r : g.rows) {
    if (!r.failed_check) continue;
    std::string why = r.diagnosis;
    if (why.empty()) why = r.smallest_message.substr(0, r.smallest_message.find('\n'));
    while (!why.empty() && (why.front() == ' ')) why.erase(0, 1);
    o += fmt::format("FAILED {}: {}{}{}\n", r.name, result_text(r), why.empty() ? "" : " - " + why,
                     r.where.empty() ? "" : "; where: " + r.where);
    if (!first_replay && !r.smallest_file.empty()) first_replay = &r;
  }
  if (first_replay)
    o += fmt::format("replay ({}): ropecheck replay {} {}\n", first_replay->name, first_replay->smallest_file,
                     g.kernel_arg);
  if (!g.sandbox.empty()) o += g.sandbox + "\n";
  if (!g.kernel_output.empty()) o += g.kernel_output;
  if (!g.refusal.empty()) o += "refusal: " + g.refusal + "\n";
  if (!g.budget_line.empty()) o += g.budget_line + "\n";
  o += fmt::format("verdict: {} ({})\n", g.pass ? "PASS" : "FAIL", g.verdict_reason);
  if (!details.empty()) o += details + "\n";
  return o;
}

std::string format_verdict(const GateResult& g) {
  std::string o;
  o += verdict_head(g);
  if (!g.bounds.empty()) o += "derived allowances (pair 0, unit norm):\n" + g.bounds;
  o += "\n| check | cases | declined | worst e (u) | radial (allowed) | tangential (allowed) | max angle error (f32 "
       "ulps) | result | diagnosis |\n";
  o += "|---|---:|---:|---:|---:|---:|---:|---|---|\n";
  for (const auto& r : g.rows) {
    const bool pairwise = r.ran && r.allowed_radial > 0;
    o += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} | {} |\n", r.name, r.cases, r.declined,
                     r.ran && r.worst_bound > 0 ? fmt::format("{} / {}", num(r.worst_error), num(r.worst_bound)) : "-",
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
    if (!r.where.empty()) o += "  where: " + r.where + "\n";
    if (r.smallest)
      o += fmt::format("  smallest failing case: {}{}\n", r.smallest->c.summary(), r.smallest->in_place ? " in-place" : "");
    o += r.smallest_message + "\n";
    if (!r.smallest_file.empty()) o += fmt::format("  replay: ropecheck replay {} {}\n", r.smallest_file, g.kernel_arg);
  }
  if (!g.sandbox.empty()) o += "\n" + g.sandbox + "\n";
  if (!g.kernel_output.empty()) o += g.kernel_output;
  o += "\n";
  if (!g.refusal.empty()) o += "refusal: " + g.refusal + "\n";
  if (!g.budget_line.empty()) o += g.budget_line + "\n";
  o += fmt::format("verdict: {} ({})\n", g.pass ? "PASS" : "FAIL", g.verdict_reason);
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
                   "value=\"{}\"/><property name=\"verdict\" value=\"{}\"/><property name=\"coverage\" "
                   "value=\"{}\"/></properties>\n",
                   xml_escape(g.contract), xml_escape(g.bounds), xml_escape(g.verdict_reason),
                   xml_escape(coverage_line(g)));
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

nlohmann::json verdict_json(const GateResult& g) {
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& r : g.rows) {
    nlohmann::json j = {{"name", r.name},
                        {"what", r.what},
                        {"result", r.failed_check ? "fail" : r.ran ? "pass" : "not run"},
                        {"cases", r.cases},
                        {"declined", r.declined},
                        {"failed", r.failed},
                        {"worst_error", r.worst_error},
                        {"worst_bound", r.worst_bound},
                        {"worst_radial", r.worst_radial},
                        {"allowed_radial", r.allowed_radial},
                        {"worst_tangential", r.worst_tangential},
                        {"allowed_tangential", r.allowed_tangential},
                        {"max_angle_ulps", r.max_angle_ulps},
                        {"diagnosis", r.diagnosis},
                        {"note", r.note},
                        {"message", r.smallest_message},
                        {"fault", r.smallest_fault},
                        {"replay_file", r.smallest_file},
                        {"faults", r.faults},
                        {"not_sent", r.not_sent},
                        {"cause_id", row_cause_id(r)},
                        {"suggestion", r.suggestion},
                        {"where", r.where}};
    j["smallest_case"] = r.smallest ? r.smallest->c.summary() + (r.smallest->in_place ? " in-place" : "") : "";
    rows.push_back(std::move(j));
  }
  return {{"kernel", g.kernel},
          {"pass", g.pass},
          {"verdict", g.verdict_reason},
          {"cause", g.cause},
          {"cause_id", g.cause_id},
          {"causes", g.causes},
          {"position_limit", g.position_limit},
          {"rotary_slice", g.rotary_slice},
          {"coverage", coverage_line(g)},
          {"contract", g.contract},
          {"abi", g.abi},
          {"sandbox", g.sandbox},
          {"padding", g.padding},
          {"calls", g.calls},
          {"accepted", g.accepted},
          {"budget_cuts", g.budget_cuts},
          {"rows", std::move(rows)}};
}

std::string row_cause_id(const CheckRow& r) {
  if (!r.failed_check) return "";
  return std::string(cause_id(!r.smallest_fault.empty() ? r.smallest_fault : r.diagnosis.empty() ? r.name : r.diagnosis));
}

int emit_verdict(const GateResult& r, const std::string& junit_path, bool verbose, const std::string& details) {
  std::cout << (verbose ? format_verdict(r) : format_brief_verdict(r, details));
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
