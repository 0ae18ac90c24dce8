// The gate's verdict as text: the table, the error decomposition by position, JUnit XML.
#include "gate/gate.hpp"

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

}  // namespace

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

std::string format_verdict(const GateResult& g) {
  std::string o;
  o += fmt::format("ropecheck gate: kernel {} ({} calls, {} accepted, {:.1f} s)\n", g.kernel, g.calls, g.accepted,
                   g.seconds);
  if (!g.contract.empty()) o += fmt::format("contract: {}\n", g.contract);
  if (!g.abi.empty()) o += fmt::format("abi: {}\n", g.abi);
  if (!g.model.empty()) o += g.model;
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
    if (r.smallest)
      o += fmt::format("  smallest failing case: {}{}\n", r.smallest->c.summary(), r.smallest->in_place ? " in-place" : "");
    o += r.smallest_message + "\n";
    if (!r.smallest_file.empty()) o += fmt::format("  replay: ropecheck replay {} {}\n", r.smallest_file, g.kernel_arg);
  }
  if (!g.sandbox.empty()) o += "\n" + g.sandbox + "\n";
  if (!g.kernel_output.empty()) o += g.kernel_output;
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
  o += fmt::format("  <properties><property name=\"contract\" value=\"{}\"/><property name=\"bounds\" "
                   "value=\"{}\"/><property name=\"verdict\" value=\"{}\"/></properties>\n",
                   xml_escape(g.contract), xml_escape(g.bounds), xml_escape(g.verdict_reason));
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
