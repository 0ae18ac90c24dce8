#include "reports/report.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "properties/contract.hpp"
#include "properties/error_model.hpp"

namespace ropecheck::report {

using nlohmann::json;

// ---- model ---------------------------------------------------------------------

const Series* Report::find(const std::string& key) const {
  for (const auto& s : series)
    if (s.key() == key) return &s;
  return nullptr;
}

const Check* Report::find_check(const std::string& name) const {
  for (const auto& c : checks)
    if (c.name == name) return &c;
  return nullptr;
}

const Check* Report::check_of(const Series& s) const {
  return find_check("accuracy/" + s.kernel + "/" + s.angle_model + "/" + s.dtype + "/" + s.layout);
}

bool Report::all_checks_pass() const {
  for (const auto& c : checks)
    if (c.status == "fail") return false;
  return true;
}

std::optional<std::string> simd_target_of(const std::string& kernel) {
  const std::string prefix = "simd-";
  if (kernel.size() <= prefix.size() || kernel.compare(0, prefix.size(), prefix) != 0) return std::nullopt;
  std::string t = kernel.substr(prefix.size());
  std::transform(t.begin(), t.end(), t.begin(), [](unsigned char c) { return char(std::toupper(c)); });
  return t;
}

bool lists_target(const std::vector<std::string>& targets, const std::string& target) {
  auto upper = [](std::string x) {
    std::transform(x.begin(), x.end(), x.begin(), [](unsigned char c) { return char(std::toupper(c)); });
    return x;
  };
  const std::string want = upper(target);
  return std::any_of(targets.begin(), targets.end(), [&](const std::string& t) { return upper(t) == want; });
}

std::vector<double> default_histogram_edges() {
  std::vector<double> e{0.0};
  for (int k = -12; k <= 30; ++k) e.push_back(std::ldexp(1.0, k));
  return e;
}

// ---- JSON ----------------------------------------------------------------------------

namespace {

json num(double v) {
  if (std::isfinite(v)) return v;
  return std::isnan(v) ? "nan" : v > 0 ? "inf" : "-inf";
}

[[noreturn]] void bad(const std::string& where, const std::string& why) {
  throw ReportError("malformed report: " + where + ": " + why);
}

const json& field(const json& o, const char* name, const std::string& where) {
  if (!o.is_object()) bad(where, "expected an object");
  auto it = o.find(name);
  if (it == o.end()) bad(where, std::string("missing field '") + name + "'");
  return *it;
}

double num_value(const json& v, const std::string& where) {
  if (v.is_number()) return v.get<double>();
  if (v.is_string()) {
    const auto s = v.get<std::string>();
    if (s == "inf") return INFINITY;
    if (s == "-inf") return -INFINITY;
    if (s == "nan") return NAN;
  }
  bad(where, "expected a number");
}

double get_num(const json& o, const char* name, const std::string& where) {
  return num_value(field(o, name, where), where + "." + name);
}

template <class T>
T get_int(const json& o, const char* name, const std::string& where) {
  const json& v = field(o, name, where);
  if (!v.is_number_integer()) bad(where + "." + name, "expected an integer");
  if constexpr (std::is_unsigned_v<T>) {
    if (v.is_number_unsigned()) return v.get<T>();
    if (v.get<int64_t>() < 0) bad(where + "." + name, "expected a non-negative integer");
  }
  return v.get<T>();
}

std::string get_str(const json& o, const char* name, const std::string& where) {
  const json& v = field(o, name, where);
  if (!v.is_string()) bad(where + "." + name, "expected a string");
  return v.get<std::string>();
}

bool get_bool(const json& o, const char* name, const std::string& where) {
  const json& v = field(o, name, where);
  if (!v.is_boolean()) bad(where + "." + name, "expected true or false");
  return v.get<bool>();
}

const json& get_array(const json& o, const char* name, const std::string& where) {
  const json& v = field(o, name, where);
  if (!v.is_array()) bad(where + "." + name, "expected an array");
  return v;
}

std::vector<std::string> get_strings(const json& o, const char* name, const std::string& where) {
  std::vector<std::string> out;
  for (const auto& v : get_array(o, name, where)) {
    if (!v.is_string()) bad(where + "." + name, "expected strings");
    out.push_back(v.get<std::string>());
  }
  return out;
}

json worst_json(const WorstCase& w) {
  return {{"error", num(w.error)},
          {"radial", num(w.radial)},
          {"tangential", num(w.tangential)},
          {"position", w.position},
          {"token", w.token},
          {"head", w.head},
          {"pair", w.pair},
          {"dims", {w.dim0, w.dim1}},
          {"input_bits", {w.input[0], w.input[1]}},
          {"got_bits", {w.got[0], w.got[1]}},
          {"rounded_bits", {w.rounded[0], w.rounded[1]}},
          {"exact", {w.exact[0], w.exact[1]}}};
}

WorstCase worst_from(const json& j, const std::string& where) {
  WorstCase w;
  w.error = get_num(j, "error", where);
  w.radial = get_num(j, "radial", where);
  w.tangential = get_num(j, "tangential", where);
  w.position = get_int<int64_t>(j, "position", where);
  w.token = get_int<uint64_t>(j, "token", where);
  w.head = get_int<uint64_t>(j, "head", where);
  w.pair = get_int<uint32_t>(j, "pair", where);
  const json& dims = get_array(j, "dims", where);
  if (dims.size() != 2 || !dims[0].is_number_unsigned() || !dims[1].is_number_unsigned())
    bad(where + ".dims", "expected two dims");
  w.dim0 = dims[0].get<uint32_t>();
  w.dim1 = dims[1].get<uint32_t>();
  auto two = [&](const char* name, std::string* out) {
    const auto v = get_strings(j, name, where);
    if (v.size() != 2) bad(where + "." + name, "expected two strings");
    out[0] = v[0];
    out[1] = v[1];
  };
  two("input_bits", w.input);
  two("got_bits", w.got);
  two("rounded_bits", w.rounded);
  two("exact", w.exact);
  return w;
}

json bucket_json(const BucketStats& b) {
  json j = {{"bucket", b.bucket},        {"label", b.label}, {"count", b.count},
            {"max", num(b.max)},         {"p99", num(b.p99)}, {"mean", num(b.mean)},
            {"bias", num(b.bias)},       {"tangential_bias", num(b.tangential_bias)}};
  if (b.rms) j["rms"] = num(*b.rms);  // absent in reports written before it was recorded
  if (const auto& d = b.decomposition) {  // absent in reports written before it was recorded
    j["max_radial"] = num(d->max_radial);
    j["max_tangential"] = num(d->max_tangential);
    j["angle_count"] = d->angle_count;
    j["max_angle_rad"] = num(d->max_angle_rad);
    j["mean_angle_rad"] = num(d->mean_angle_rad);
    j["max_angle_ulps"] = num(d->max_angle_ulps);
    j["resolved_angle_count"] = d->resolved_angle_count;
    j["max_resolved_angle_ulps"] = num(d->max_resolved_angle_ulps);
  }
  j["worst"] = b.worst ? worst_json(*b.worst) : json(nullptr);
  return j;
}

BucketStats bucket_from(const json& j, const std::string& where) {
  BucketStats b;
  b.bucket = get_int<int>(j, "bucket", where);
  b.label = get_str(j, "label", where);
  b.count = get_int<uint64_t>(j, "count", where);
  b.max = get_num(j, "max", where);
  b.p99 = get_num(j, "p99", where);
  b.mean = get_num(j, "mean", where);
  b.bias = get_num(j, "bias", where);
  b.tangential_bias = get_num(j, "tangential_bias", where);
  if (j.contains("rms")) {  // optional: older reports do not have it
    const double rms = get_num(j, "rms", where);
    if (rms < 0) bad(where + ".rms", "expected a non-negative number");
    b.rms = rms;
  }
  // Optional, all together: older reports have none of them.
  if (j.contains("max_radial")) {
    Decomposition d;
    auto nonneg = [&](const char* name) {
      const double v = get_num(j, name, where);
      if (v < 0) bad(where + "." + name, "expected a non-negative number");
      return v;
    };
    d.max_radial = nonneg("max_radial");
    d.max_tangential = nonneg("max_tangential");
    d.angle_count = get_int<uint64_t>(j, "angle_count", where);
    d.max_angle_rad = nonneg("max_angle_rad");
    d.mean_angle_rad = get_num(j, "mean_angle_rad", where);
    d.max_angle_ulps = nonneg("max_angle_ulps");
    d.resolved_angle_count = get_int<uint64_t>(j, "resolved_angle_count", where);
    d.max_resolved_angle_ulps = nonneg("max_resolved_angle_ulps");
    if (d.angle_count > b.count) bad(where + ".angle_count", "exceeds the bucket's count");
    if (d.resolved_angle_count > d.angle_count) bad(where + ".resolved_angle_count", "exceeds angle_count");
    b.decomposition = d;
  } else {
    for (const char* k : {"max_tangential", "angle_count", "max_angle_rad", "mean_angle_rad", "max_angle_ulps",
                          "resolved_angle_count", "max_resolved_angle_ulps"})
      if (j.contains(k)) bad(where, std::string("has '") + k + "' but no 'max_radial' (the decomposition comes whole)");
  }
  const json& w = field(j, "worst", where);
  if (!w.is_null()) b.worst = worst_from(w, where + ".worst");
  return b;
}

}  // namespace

json to_json(const Report& r) {
  json j;
  j["schema"] = kSchemaName;
  j["schema_version"] = r.schema_version;
  j["kind"] = r.kind;
  const Environment& e = r.environment;
  j["environment"] = {{"tool_version", e.tool_version}, {"compiler", e.compiler},
                      {"build_type", e.build_type},     {"cpu_model", e.cpu_model},
                      {"simd_targets", e.simd_targets}, {"implementations", e.implementations}};
  if (e.simd_compiled_targets) j["environment"]["simd_compiled_targets"] = *e.simd_compiled_targets;
  j["seed"] = r.seed;
  j["parameters"] = r.parameters;
  j["error_unit"] = "u of the output dtype (pair error ||y - yhat|| / (max(||x||, min_normal) * u))";
  json edges = json::array();
  for (double v : r.histogram_edges) edges.push_back(num(v));
  j["histogram_edges"] = edges;
  json checks = json::array();
  for (const auto& c : r.checks) {
    checks.push_back({{"name", c.name}, {"source", c.source}, {"status", c.status}, {"detail", c.detail}});
    if (!c.cause_id.empty()) checks.back()["cause_id"] = c.cause_id;  // (added key: absent before)
  }
  j["checks"] = checks;
  json series = json::array();
  for (const auto& s : r.series) {
    json b = json::array();
    for (const auto& x : s.buckets) b.push_back(bucket_json(x));
    json x = {{"kernel", s.kernel},
              {"angle_model", s.angle_model},
              {"dtype", s.dtype},
              {"layout", s.layout},
              {"bound", num(s.bound)},
              {"judged_under_own_model", s.judged_under_own_model}};
    if (s.contract) x["contract"] = *s.contract;  // absent in reports written before contracts
    if (s.worst_ratio) x["worst_ratio"] = num(*s.worst_ratio);
    x["violations"] = s.violations;
    x["first_finding"] = s.first_finding;
    x["all"] = bucket_json(s.all);
    x["buckets"] = b;
    x["histogram"] = s.histogram;
    series.push_back(std::move(x));
  }
  j["series"] = series;
  return j;
}

Report from_json(const json& j) {
  if (!j.is_object()) throw ReportError("not a ropecheck report: the top level is not a JSON object");
  auto schema = j.find("schema");
  if (schema == j.end() || !schema->is_string() || schema->get<std::string>() != kSchemaName)
    throw ReportError(std::string("not a ropecheck report: field \"schema\" is not \"") + kSchemaName + "\"");
  auto ver = j.find("schema_version");
  if (ver == j.end() || !ver->is_number_integer())
    throw ReportError("not a ropecheck report: no integer \"schema_version\"");
  if (ver->get<int64_t>() != kSchemaVersion)
    throw ReportError(fmt::format("report schema version {} is not supported (this ropecheck reads version {}); "
                                  "regenerate the report (scripts/update-baseline.sh for the baseline)",
                                  ver->get<int64_t>(), kSchemaVersion));
  Report r;
  r.schema_version = kSchemaVersion;
  r.kind = get_str(j, "kind", "report");
  const json& e = field(j, "environment", "report");
  r.environment.tool_version = get_str(e, "tool_version", "environment");
  r.environment.compiler = get_str(e, "compiler", "environment");
  r.environment.build_type = get_str(e, "build_type", "environment");
  r.environment.cpu_model = get_str(e, "cpu_model", "environment");
  r.environment.simd_targets = get_strings(e, "simd_targets", "environment");
  if (e.contains("simd_compiled_targets"))  // optional: older reports do not have it
    r.environment.simd_compiled_targets = get_strings(e, "simd_compiled_targets", "environment");
  r.environment.implementations = get_strings(e, "implementations", "environment");
  r.seed = get_int<uint64_t>(j, "seed", "report");
  r.parameters = field(j, "parameters", "report");
  if (!r.parameters.is_object()) bad("parameters", "expected an object");
  for (const auto& v : get_array(j, "histogram_edges", "report"))
    r.histogram_edges.push_back(num_value(v, "histogram_edges[]"));
  std::set<std::string> check_names, series_keys;  // duplicates, in O(n log n)
  for (const auto& c : get_array(j, "checks", "report")) {
    Check k;
    k.name = get_str(c, "name", "checks[]");
    const std::string where = "check '" + k.name + "'";
    k.source = get_str(c, "source", where);
    k.status = get_str(c, "status", where);
    if (k.status != "pass" && k.status != "fail" && k.status != "skip")
      bad(where + ".status", "expected pass, fail or skip, got '" + k.status + "'");
    k.detail = get_str(c, "detail", where);
    if (c.contains("cause_id") && c["cause_id"].is_string()) k.cause_id = c["cause_id"].get<std::string>();
    if (!check_names.insert(k.name).second) bad(where, "appears twice");
    r.checks.push_back(std::move(k));
  }
  for (const auto& s : get_array(j, "series", "report")) {
    Series x;
    x.kernel = get_str(s, "kernel", "series[]");
    x.angle_model = get_str(s, "angle_model", "series[]");
    x.dtype = get_str(s, "dtype", "series[]");
    x.layout = get_str(s, "layout", "series[]");
    const std::string where = "series '" + x.key() + "'";
    x.bound = get_num(s, "bound", where);
    x.judged_under_own_model = get_bool(s, "judged_under_own_model", where);
    if (s.contains("contract")) {  // optional: older reports do not have it
      std::string err;
      x.contract = get_str(s, "contract", where);
      if (!parse_contract(*x.contract, &err)) bad(where + ".contract", err);
    }
    if (s.contains("worst_ratio")) {
      const double v = get_num(s, "worst_ratio", where);
      if (v < 0) bad(where + ".worst_ratio", "expected a non-negative number");
      x.worst_ratio = v;
    }
    x.violations = get_int<uint64_t>(s, "violations", where);
    x.first_finding = get_str(s, "first_finding", where);
    x.all = bucket_from(field(s, "all", where), where + ".all");
    std::set<int> bucket_ids;
    for (const auto& b : get_array(s, "buckets", where)) {
      x.buckets.push_back(bucket_from(b, where + ".buckets[]"));
      if (!bucket_ids.insert(x.buckets.back().bucket).second)
        bad(where + ".buckets", "bucket " + std::to_string(x.buckets.back().bucket) + " appears twice");
    }
    for (const auto& h : get_array(s, "histogram", where)) {
      if (!h.is_number_unsigned()) bad(where + ".histogram", "expected counts");
      x.histogram.push_back(h.get<uint64_t>());
    }
    if (x.histogram.size() != r.histogram_edges.size())
      bad(where + ".histogram", "has " + std::to_string(x.histogram.size()) + " bins, histogram_edges has " +
                                    std::to_string(r.histogram_edges.size()));
    if (!series_keys.insert(x.key()).second) bad(where, "appears twice");
    r.series.push_back(std::move(x));
  }
  return r;
}

Report load_report(const std::string& path) {
  // A regular file of bounded size: a FIFO would block, a huge file would be read whole.
  std::error_code ec;
  const auto st = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(st)) throw ReportError("cannot open report '" + path + "'");
  if (!std::filesystem::is_regular_file(st)) throw ReportError("report '" + path + "' is not a regular file");
  if (std::filesystem::file_size(path, ec) > kMaxReportBytes)
    throw ReportError("report '" + path + "' is larger than " + std::to_string(kMaxReportBytes >> 20) + " MiB");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ReportError("cannot open report '" + path + "'");
  std::stringstream ss;
  ss << in.rdbuf();
  json j;
  try {
    j = json::parse(ss.str());
  } catch (const json::parse_error& e) {
    throw ReportError("'" + path + "' is not valid JSON: " + e.what());
  }
  try {
    return from_json(j);
  } catch (const ReportError& e) {
    throw ReportError("'" + path + "': " + e.what());
  } catch (const json::exception& e) {  // e.g. a number out of range
    throw ReportError("'" + path + "': malformed report: " + e.what());
  }
}

void write_text_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw ReportError("cannot write '" + path + "'");
  out << text;
  out.close();
  if (!out) throw ReportError("error writing '" + path + "'");
}

void write_report_dir(const Report& r, const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw ReportError("cannot create directory '" + dir + "': " + ec.message());
  const std::filesystem::path d(dir);
  write_text_file((d / "report.json").string(), to_json(r).dump(1) + "\n");
  write_text_file((d / "report.md").string(), render_markdown(r));
  write_text_file((d / "report.html").string(), render_html(r));
}

// ---- the verdict and the summary ------------------------------------------------------

std::string Verdict::headline() const {
  if (checks == 0) return "NO CHECKS: nothing in this report was judged";
  if (!pass()) return fmt::format("FAIL: {} of {} checks fail", failing.size(), checks);
  return fmt::format("PASS: {} of {} checks pass{}", passing, checks,
                     skipped ? fmt::format(", {} skipped", skipped) : std::string());
}

Verdict verdict_of(const Report& r) {
  Verdict v;
  v.checks = r.checks.size();
  for (const Check& c : r.checks) {
    if (c.status == "fail") v.failing.push_back(&c);
    v.passing += c.status == "pass";
    v.skipped += c.status == "skip";
  }
  return v;
}

std::vector<SeriesSummary> summarize(const Report& r) {
  std::vector<SeriesSummary> out;
  for (const Series& s : r.series) {
    SeriesSummary m;
    m.series = &s;
    m.check = r.check_of(s);
    m.verdict = !m.check ? "not a check" : m.check->status == "fail" ? "FAIL" : m.check->status;
    for (const BucketStats& b : s.buckets)
      if (!m.worst_bucket || !(b.max <= m.worst_bucket->max)) m.worst_bucket = &b;  // a NaN max is the worst
    m.where = !m.worst_bucket ? "-"
              : m.worst_bucket->worst
                  ? fmt::format("{} (position {})", m.worst_bucket->label, m.worst_bucket->worst->position)
                  : m.worst_bucket->label;
    if (m.check && m.check->status == "fail") m.detail = m.check->detail;
    else if (!m.check && s.violations)  // e.g. the sweep's fp32 pipeline under exact angles: its drift, shown
      m.detail = fmt::format("{} violation(s); informational: the series is not a check of this report (its "
                             "checks decide the verdict)",
                             s.violations);
    if (m.check && m.check->status == "fail") m.finding = s.first_finding;
    out.push_back(std::move(m));
  }
  return out;
}

namespace {

// A value in words: "a, b" for a list, "k: v; k: v" for an object, a list or object inside another in
// parentheses so that its commas and semicolons stay its own.
std::string json_text(const json& v, bool nested = false) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_null()) return "-";
  if (v.is_array() || v.is_object()) {
    if (v.empty()) return "(none)";
    std::string o;
    for (auto it = v.begin(); it != v.end(); ++it) {
      if (it != v.begin()) o += v.is_array() ? ", " : "; ";
      if (v.is_object()) o += it.key() + ": ";
      o += json_text(*it, true);
    }
    return nested ? "(" + o + ")" : o;
  }
  return v.dump();  // numbers and booleans read as they are written
}

}  // namespace

std::string parameter_text(const Report& r, const std::string& key) {
  if (!r.parameters.is_object() || !r.parameters.contains(key)) return "-";
  const json& v = r.parameters.at(key);
  // The sweep's lists: empty is every one (runs/sweep.hpp, SweepOptions); say which, from the series.
  const std::pair<const char*, std::string Series::*> every[] = {
      {"impls", &Series::kernel}, {"dtypes", &Series::dtype}, {"layouts", &Series::layout}};
  if (r.kind == "sweep" && v.is_array() && v.empty())
    for (const auto& [name, field] : every)
      if (key == name) {
        std::vector<std::string> seen;
        for (const Series& s : r.series)
          if (std::find(seen.begin(), seen.end(), s.*field) == seen.end()) seen.push_back(s.*field);
        return seen.empty() ? "every one" : fmt::format("every one ({})", fmt::join(seen, ", "));
      }
  return json_text(v);
}

std::vector<std::pair<std::string, std::string>> run_facts(const Report& r) {
  const Environment& e = r.environment;
  auto list = [](const std::vector<std::string>& v) { return v.empty() ? "none" : fmt::format("{}", fmt::join(v, ", ")); };
  std::vector<std::pair<std::string, std::string>> f = {
      {"schema version", std::to_string(r.schema_version)},
      {"ropecheck", e.tool_version + " (" + e.build_type + ")"},
      {"compiler", e.compiler},
      {"CPU", e.cpu_model},
      {"SIMD targets (this CPU)", list(e.simd_targets)},
      {"SIMD targets (compiled)", e.simd_compiled_targets ? list(*e.simd_compiled_targets) : "not recorded"},
      {"implementations", list(e.implementations)},
      {"seed", std::to_string(r.seed)}};
  if (r.parameters.is_object())
    for (auto it = r.parameters.begin(); it != r.parameters.end(); ++it)
      if (it.key() != "seed") f.emplace_back(it.key(), parameter_text(r, it.key()));
  return f;
}

// ---- markdown ----------------------------------------------------------------------

namespace {

std::string md_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '|') o += "\\|";
    else if (c == '\n') o += ' ';
    else o += c;
  }
  return o;
}

}  // namespace

std::string short_contract(const std::string& spec) {
  std::string err;
  const auto c = parse_contract(spec, &err);
  return c ? c->short_spec() : spec;
}

std::string render_markdown(const Report& r) {
  // For people: the verdict and a line per series first, then the tables, then every check and statistic,
  // and the run's parameters last (report.html has the same order).
  std::string o = "# ropecheck " + r.kind + " report\n\n";
  const Verdict v = verdict_of(r);
  o += "**" + v.headline() + "**\n\n";
  // Each by name with the first line of its detail (a gate's diagnosis); the whole detail is under Checks.
  for (const Check* c : v.failing)
    o += fmt::format("* `{}`: {}\n", c->name, md_escape(c->detail.substr(0, c->detail.find('\n'))));
  if (!v.failing.empty()) o += "\n";

  o += "## Summary\n\nErrors are pair errors in u of the output dtype (u = 2^-24 f32, 2^-11 f16, 2^-8 bf16): "
       "e = ||y - yhat|| / (max(||x||, min_normal) u). The verdict is per pair (each within the allowance its "
       "kernel's error model and contract derive); the bound is the flat bound of those criteria, and "
       "worst/allowance how close the worst pair came to its own allowance.\n\n"
       "| kernel | angle model | dtype | layout | verdict | max (u) | bound (u) | worst/allowance | worst at | contract "
       "| detail |\n|---|---|---|---|---|---:|---:|---:|---|---|---|\n";
  const std::vector<SeriesSummary> summary = summarize(r);
  for (const SeriesSummary& m : summary) {
    const Series& s = *m.series;
    o += fmt::format("| {} | {} | {} | {} | {} | {:.3g} | {:.3g} | {} | {} | {} | {} |\n", s.kernel, s.angle_model,
                     s.dtype, s.layout, m.verdict == "FAIL" ? "**FAIL**" : m.verdict, s.all.max, s.bound,
                     s.worst_ratio ? fmt::format("{:.3g}", *s.worst_ratio) : "-", m.where,
                     s.contract ? short_contract(*s.contract) : "-", md_escape(m.detail));
  }
  for (const SeriesSummary& m : summary)
    if (!m.finding.empty()) o += fmt::format("\n{} fails; its first finding:\n\n```\n{}\n```\n", m.series->key(),
                                             m.finding.substr(0, m.finding.find_last_not_of('\n') + 1));

  // One table per dtype x layout: rows are buckets, columns kernels/models.
  std::vector<std::pair<std::string, std::string>> groups;
  for (const auto& s : r.series)
    if (std::find(groups.begin(), groups.end(), std::make_pair(s.dtype, s.layout)) == groups.end())
      groups.emplace_back(s.dtype, s.layout);
  for (const auto& [dt, lay] : groups) {
    std::vector<const Series*> cols;
    std::set<int> buckets;
    for (const auto& s : r.series)
      if (s.dtype == dt && s.layout == lay) {
        cols.push_back(&s);
        for (const auto& b : s.buckets) buckets.insert(b.bucket);
      }
    // One table: the header of the series' columns, a row per bucket and one for all of them.
    auto table = [&](const auto& cell) {
      std::string t = "| position |";
      for (const Series* s : cols) t += fmt::format(" {} ({}){} |", s->kernel, s->angle_model, r.check_of(*s) ? "" : " †");
      t += "\n|---|";
      for (size_t i = 0; i < cols.size(); ++i) t += "---|";
      t += "\n";
      for (int b : buckets) {
        t += "| " + bucket_label(b) + " |";
        for (const Series* s : cols) {
          const BucketStats* found = nullptr;
          for (const auto& x : s->buckets)
            if (x.bucket == b) found = &x;
          t += found ? " " + cell(*found) + " |" : " - |";
        }
        t += "\n";
      }
      t += "| **all** |";
      for (const Series* s : cols) t += " " + cell(s->all) + " |";
      return t + "\n";
    };
    o += fmt::format("\n## {} {}\n\n", dt, lay);
    o += table([](const BucketStats& b) { return fmt::format("Max = {:.3g}u (Mean = {:.3g}u)", b.max, b.mean); });

    // The same buckets: the error's components and the kernel's angle error.
    o += fmt::format("\n### {} {}: components and angle error\n\nR, T: max |radial|, max |tangential| component "
                     "(u); angle: max |angle error| (rad) and, where rounding cannot mask it, in f32 ulps of |phi| "
                     "(-: no such pair).\n\n",
                     dt, lay);
    o += table([](const BucketStats& b) {
      if (!b.decomposition) return std::string("- (not recorded)");
      const Decomposition& d = *b.decomposition;
      return fmt::format("R = {:.3g}u, T = {:.3g}u, angle = {:.3g} rad ({})", d.max_radial, d.max_tangential,
                         d.max_angle_rad,
                         d.resolved_angle_count ? fmt::format("{:.3g} ulp", d.max_resolved_angle_ulps) : "- ulp");
    });
  }
  if (std::any_of(r.series.begin(), r.series.end(), [&](const Series& s) { return !r.check_of(s); }))
    o += "\n† not a check: judged under a model other than the kernel's own without a contract for it (shows the "
         "drift of its angles).\n";

  o += "\n## Checks\n\n| check | source | status | detail |\n|---|---|---|---|\n";
  for (const auto& c : r.checks)
    o += fmt::format("| {} | {} | {} | {} |\n", md_escape(c.name), c.source, c.status == "fail" ? "**FAIL**" : c.status,
                     md_escape(c.detail));
  if (r.checks.empty()) o += "| (none) | | | |\n";

  o += "\n## Statistics\n\n| kernel | angle model | dtype | layout | contract | pairs | max | p99 | mean | max radial | "
       "max tangential | bias (radial) | bias (tangential) | max angle (rad) | mean angle (rad) | max angle (f32 ulps, "
       "resolved) | bound | worst/allowance | violations |\n"
       "|---|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const auto& s : r.series) {
    const auto& d = s.all.decomposition;
    auto opt = [](bool have, double v, const char* f = "{:.3g}") {
      return have ? fmt::format(fmt::runtime(f), v) : std::string("-");
    };
    o += fmt::format(
        "| {} | {} | {} | {} | {} | {} | {:.3g} | {:.3g} | {:.3g} | {} | {} | {:+.2e} | {:+.2e} | {} | {} | {} | {:.3g} "
        "| {} | {} |\n",
        s.kernel, s.angle_model, s.dtype, s.layout, s.contract ? short_contract(*s.contract) : "-", s.all.count,
        s.all.max, s.all.p99, s.all.mean, opt(d.has_value(), d ? d->max_radial : 0),
        opt(d.has_value(), d ? d->max_tangential : 0), s.all.bias, s.all.tangential_bias,
        opt(d.has_value(), d ? d->max_angle_rad : 0), opt(d.has_value(), d ? d->mean_angle_rad : 0, "{:+.2e}"),
        opt(d && d->resolved_angle_count, d ? d->max_resolved_angle_ulps : 0), s.bound,
        opt(s.worst_ratio.has_value(), s.worst_ratio.value_or(0)), s.violations);
  }

  o += "\n## Worst cases\n\n| kernel | angle model | dtype | layout | error (u) | position | token/head/pair | "
       "input bits | got bits | correctly rounded bits |\n|---|---|---|---|---:|---:|---|---|---|---|\n";
  for (const auto& s : r.series) {
    if (!s.all.worst) continue;
    const WorstCase& w = *s.all.worst;
    o += fmt::format("| {} | {} | {} | {} | {:.4g} | {} | {}/{}/{} | {} {} | {} {} | {} {} |\n", s.kernel,
                     s.angle_model, s.dtype, s.layout, w.error, w.position, w.token, w.head, w.pair, w.input[0],
                     w.input[1], w.got[0], w.got[1], w.rounded[0], w.rounded[1]);
  }

  o += "\n## Run\n\n| | |\n|---|---|\n";
  for (const auto& [k, v] : run_facts(r)) o += fmt::format("| {} | {} |\n", md_escape(k), md_escape(v));
  return o;
}

// ---- compare -----------------------------------------------------------------------

double Slack::bias_allowance(double spread_base, uint64_t n_base, double spread_cur, uint64_t n_cur) const {
  if (n_base == 0 || n_cur == 0) return INFINITY;  // no pairs: no mean to compare
  // The standard deviation of (mean_cur - mean_base) for independent samples;
  // the same inputs on both sides (one seed) only make it smaller.
  const double sd = std::sqrt(spread_base * spread_base / double(n_base) + spread_cur * spread_cur / double(n_cur));
  return bias_sigmas * sd + bias_absolute;
}

std::string describe(const Slack& s) {
  return fmt::format("a bucket's max and mean error may grow to baseline * (1 + {:g}) + {:g} u; its bias (mean "
                     "radial error) may move by {:g} * sqrt(rms_b^2/n_b + rms_c^2/n_c) + {:g} u",
                     s.relative, s.absolute, s.bias_sigmas, s.bias_absolute);
}

bool CompareResult::failed() const {
  for (const auto& d : diffs)
    if (d.failing) return true;
  return false;
}

std::string CompareResult::table() const {
  std::vector<std::array<std::string, 8>> rows;
  rows.push_back({"status", "kind", "series / check", "bucket", "metric", "baseline", "current", "limit"});
  for (const auto& d : diffs)
    rows.push_back({d.failing ? "FAIL" : "note", d.kind, d.what, d.bucket, d.metric, d.baseline, d.current, d.limit});
  std::array<size_t, 8> w{};
  for (const auto& r : rows)
    for (size_t i = 0; i < 8; ++i) w[i] = std::max(w[i], r[i].size());
  std::string o;
  size_t fails = 0, regress = 0, bias = 0, cover = 0, checks = 0;
  for (const auto& d : diffs)
    if (d.failing) {
      ++fails;
      if (d.kind == "regression") {
        ++regress;
        if (d.metric == "bias") ++bias;
      } else if (d.kind == "coverage") {
        ++cover;
      } else if (d.kind == "check") {
        ++checks;
      }
    }
  if (!diffs.empty()) {
    for (size_t k = 0; k < rows.size(); ++k) {
      o += "|";
      for (size_t i = 0; i < 8; ++i) o += " " + rows[k][i] + std::string(w[i] - rows[k][i].size(), ' ') + " |";
      o += "\n";
      if (k == 0) {
        o += "|";
        for (size_t i = 0; i < 8; ++i) o += std::string(w[i] + 2, '-') + "|";
        o += "\n";
      }
    }
  }
  if (bias_fallback_baseline || bias_fallback_current) {
    const char* who = bias_fallback_baseline && bias_fallback_current ? "baseline and current reports have"
                      : bias_fallback_baseline                        ? "baseline report has"
                                                                      : "current report has";
    o += fmt::format("note: the {} no per-bucket rms (written before ropecheck recorded it): the bias of {} "
                     "bucket(s) was compared with its spread bounded by the bucket's max instead (marked [max]; a "
                     "wider allowance); regenerate the report (scripts/update-baseline.sh for the baseline) for the "
                     "sharper test\n",
                     who, std::max(bias_fallback_baseline, bias_fallback_current));
  }
  if (decomposition_missing_baseline || decomposition_missing_current) {
    const char* who = decomposition_missing_baseline && decomposition_missing_current ? "baseline and current reports have"
                      : decomposition_missing_baseline                                ? "baseline report has"
                                                                                      : "current report has";
    o += fmt::format("note: the {} no error decomposition (max radial/tangential, angle error; written before "
                     "ropecheck recorded it): {} bucket(s) compared without it (it never fails a compare)\n",
                     who, std::max(decomposition_missing_baseline, decomposition_missing_current));
  }
  std::string not_here;
  if (series_not_run_here || checks_not_run_here) {
    o += fmt::format("note: {} series and {} check(s) of the baseline were not run here: this CPU lacks their SIMD "
                     "target(s) {} (informational, not a coverage loss; a CPU with the target compares them)\n",
                     series_not_run_here, checks_not_run_here, fmt::join(targets_not_here, ", "));
    not_here = fmt::format("; {} series and {} check(s) not run here", series_not_run_here, checks_not_run_here);
  }
  if (fails)
    o += fmt::format("compare: FAIL: {} regression(s) ({} of them bias), {} coverage loss(es), {} check(s) newly "
                     "failing ({} series, {} buckets, {} checks compared{})\n",
                     regress, bias, cover, checks, series_compared, buckets_compared, checks_compared, not_here);
  else
    o += fmt::format("compare: OK: no bucket's max or mean error grew beyond the slack, no bias moved beyond its "
                     "allowance, no check newly fails, coverage kept ({} series, {} buckets, {} checks compared{})\n",
                     series_compared, buckets_compared, checks_compared, not_here);
  return o;
}

CompareResult compare_reports(const Report& base, const Report& cur, const Slack& slack) {
  CompareResult res;
  auto add = [&](bool failing, std::string kind, std::string what, std::string bucket, std::string metric,
                 std::string b, std::string c, std::string limit = "") {
    res.diffs.push_back({failing, std::move(kind), std::move(what), std::move(bucket), std::move(metric),
                         std::move(b), std::move(c), std::move(limit)});
  };
  auto g = [](double v) { return fmt::format("{:.4g}", v); };
  auto same = [](double a, double b) { return a == b || (std::isnan(a) && std::isnan(b)); };

  // Parameters that differ: informational (their effect shows as coverage or error changes).
  if (base.parameters.is_object() && cur.parameters.is_object()) {
    std::set<std::string> keys;
    for (auto it = base.parameters.begin(); it != base.parameters.end(); ++it) keys.insert(it.key());
    for (auto it = cur.parameters.begin(); it != cur.parameters.end(); ++it) keys.insert(it.key());
    for (const auto& k : keys) {
      const std::string b = base.parameters.contains(k) ? base.parameters[k].dump() : "(absent)";
      const std::string c = cur.parameters.contains(k) ? cur.parameters[k].dump() : "(absent)";
      if (b != c) add(false, "parameter", k, "", "value", b, c);
    }
  }

  // Indexes by name (O(n log n) in the number of series, buckets and checks; a linear find per item was
  // quadratic).
  std::map<std::string, const Series*> cur_series, base_series;
  for (const auto& s : cur.series) cur_series.emplace(s.key(), &s);
  for (const auto& s : base.series) base_series.emplace(s.key(), &s);
  std::map<std::string, const Check*> cur_checks, base_checks;
  for (const auto& c : cur.checks) cur_checks.emplace(c.name, &c);
  for (const auto& c : base.checks) base_checks.emplace(c.name, &c);

  // A baseline series of a SIMD target this CPU lacks cannot be run here: a note, not a coverage loss, and
  // so is its check. Missing for any other reason (another kernel; a target this CPU runs; a target this
  // build does not compile) it is a coverage loss, and the row says which target was there.
  const Environment& here = cur.environment;
  std::map<std::string, std::string> checks_not_here;  // check name -> why
  std::set<std::string> targets_not_here;
  auto absent = [&](const Series& bs) {
    const auto target = simd_target_of(bs.kernel);
    if (!target) {
      add(true, "coverage", bs.key(), "", "series", "present", "gone");
    } else if (lists_target(here.simd_targets, *target)) {
      add(true, "coverage", bs.key(), "", "series", "present", "gone (this CPU runs the target " + *target + ")");
    } else if (here.simd_compiled_targets && !lists_target(*here.simd_compiled_targets, *target)) {
      add(true, "coverage", bs.key(), "", "series", "present",
          "gone (this build does not compile the target " + *target + ")");
    } else {
      const std::string why = "not run here (this CPU lacks the target " + *target + ")";
      add(false, "not-run-here", bs.key(), "", "series", "present", why);
      ++res.series_not_run_here;
      targets_not_here.insert(*target);
      if (const Check* c = base.check_of(bs)) checks_not_here.emplace(c->name, why);
    }
  };

  for (const auto& bs : base.series) {
    const auto cs_it = cur_series.find(bs.key());
    const Series* cs = cs_it == cur_series.end() ? nullptr : cs_it->second;
    if (!cs) {
      absent(bs);
      continue;
    }
    ++res.series_compared;
    if (!same(cs->bound, bs.bound)) add(false, "bound", bs.key(), "", "bound", g(bs.bound), g(cs->bound));
    if (bs.contract && cs->contract && *bs.contract != *cs->contract)
      add(false, "contract", bs.key(), "", "contract", *bs.contract, *cs->contract);
    std::map<int, const BucketStats*> cur_buckets;
    std::set<int> base_buckets;
    for (const auto& x : cs->buckets) cur_buckets[x.bucket] = &x;  // the last of a repeated id, as before
    for (const auto& x : bs.buckets) base_buckets.insert(x.bucket);
    for (const auto& bb : bs.buckets) {
      const auto cb_it = cur_buckets.find(bb.bucket);
      const BucketStats* cb = cb_it == cur_buckets.end() ? nullptr : cb_it->second;
      if (!cb) {
        add(true, "coverage", bs.key(), bb.label, "bucket", "present", "gone");
        continue;
      }
      ++res.buckets_compared;
      if (cb->count < bb.count)
        add(true, "coverage", bs.key(), bb.label, "count", std::to_string(bb.count), std::to_string(cb->count),
            ">= " + std::to_string(bb.count));
      const std::pair<const char*, std::pair<double, double>> metrics[] = {{"max", {bb.max, cb->max}},
                                                                          {"mean", {bb.mean, cb->mean}}};
      for (const auto& [name, v] : metrics) {
        const double lim = slack.limit(v.first);
        if (same(v.first, v.second)) continue;
        if (!(v.second <= lim))  // a NaN that was not NaN fails too
          add(true, "regression", bs.key(), bb.label, name, g(v.first), g(v.second), "<= " + g(lim));
        else if (v.second * (1.0 + slack.relative) + slack.absolute < v.first)
          add(false, "improved", bs.key(), bb.label, name, g(v.first), g(v.second));
      }
      // Bias: the two means may differ by their combined sampling noise (5
      // sigma) plus a systematic allowance; sigma from the rms, or from the
      // max (|radial| <= e <= max) when a report has none.
      if (bb.count > 0 && cb->count > 0) {
        res.bias_fallback_baseline += !bb.rms;
        res.bias_fallback_current += !cb->rms;
        if (!same(bb.bias, cb->bias)) {
          const double sb = bb.rms ? *bb.rms : bb.max, sc = cb->rms ? *cb->rms : cb->max;
          const double allowed = slack.bias_allowance(sb, bb.count, sc, cb->count);
          const double moved = cb->bias - bb.bias;
          auto side = [](double bias, uint64_t n, double spread, bool from_max) {
            return fmt::format("{:+.4f} (n {}, rms {:.3g}{})", bias, n, spread, from_max ? " [max]" : "");
          };
          if (!(std::fabs(moved) <= allowed)) {  // NaN fails
            // Moved beyond the allowance toward zero: less biased, a note (time to update the baseline).
            const bool less_biased = std::fabs(cb->bias) < std::fabs(bb.bias);
            add(!less_biased, less_biased ? "improved" : "regression", bs.key(), bb.label, "bias",
                side(bb.bias, bb.count, sb, !bb.rms), side(cb->bias, cb->count, sc, !cb->rms),
                fmt::format("+-{:.4f} (moved {:+.4f})", allowed, moved));
          }
        }
      }
      // The components and the angle error: notes only, never a failure. |radial|, |tangential| <= e and the
      // angle error is the tangential component in radians (times u), so whatever grows there beyond the
      // slack in a way that matters grows the max above too (docs/reports.md, "No rule for the components").
      res.decomposition_missing_baseline += !bb.decomposition;
      res.decomposition_missing_current += !cb->decomposition;
      if (bb.decomposition && cb->decomposition) {
        const Decomposition &db = *bb.decomposition, &dc = *cb->decomposition;
        const bool angles = db.resolved_angle_count > 0 && dc.resolved_angle_count > 0;
        const std::pair<const char*, std::pair<double, double>> info[] = {
            {"max_radial", {db.max_radial, dc.max_radial}},
            {"max_tangential", {db.max_tangential, dc.max_tangential}},
            {"max_angle_rad", {db.max_angle_rad, dc.max_angle_rad}},
            {"max_resolved_angle_ulps",
             {angles ? db.max_resolved_angle_ulps : 0.0, angles ? dc.max_resolved_angle_ulps : 0.0}}};
        for (const auto& [name, v] : info) {
          if (same(v.first, v.second)) continue;
          const double lim = slack.limit(v.first);
          if (!(v.second <= lim))
            add(false, "info", bs.key(), bb.label, name, g(v.first), g(v.second), "<= " + g(lim) + " (informational)");
          else if (v.second * (1.0 + slack.relative) + slack.absolute < v.first)
            add(false, "info", bs.key(), bb.label, name, g(v.first), g(v.second), "(informational: smaller)");
        }
      }
    }
    for (const auto& cb : cs->buckets)
      if (!base_buckets.count(cb.bucket)) add(false, "new", bs.key(), cb.label, "bucket", "absent", "present");
  }
  for (const auto& cs : cur.series)
    if (!base_series.count(cs.key())) add(false, "new", cs.key(), "", "series", "absent", "present");

  for (const auto& bc : base.checks) {
    const auto cc_it = cur_checks.find(bc.name);
    const Check* cc = cc_it == cur_checks.end() ? nullptr : cc_it->second;
    if (!cc) {
      const auto why = checks_not_here.find(bc.name);
      if (why == checks_not_here.end()) {
        add(true, "coverage", bc.name, "", "check", bc.status, "gone");
      } else {
        add(false, "not-run-here", bc.name, "", "check", bc.status, why->second);
        ++res.checks_not_run_here;
      }
      continue;
    }
    ++res.checks_compared;
    if (bc.status == "pass" && cc->status != "pass")
      add(true, "check", bc.name, "", "status", bc.status, cc->status + ": " + cc->detail);
    else if (bc.status != cc->status)
      add(false, "check", bc.name, "", "status", bc.status, cc->status);
  }
  for (const auto& cc : cur.checks)
    if (!base_checks.count(cc.name))
      add(cc.status == "fail", cc.status == "fail" ? "check" : "new", cc.name, "", "status", "absent",
          cc.status == "fail" ? "fail: " + cc.detail : cc.status);
  res.targets_not_here.assign(targets_not_here.begin(), targets_not_here.end());
  // Failures first, then notes, each in the order found.
  std::stable_sort(res.diffs.begin(), res.diffs.end(),
                   [](const Difference& a, const Difference& b) { return a.failing > b.failing; });
  return res;
}

}  // namespace ropecheck::report
