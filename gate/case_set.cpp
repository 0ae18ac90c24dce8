#include "gate/case_set.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <stdexcept>

#include "gate/npy.hpp"
#include "impls/plugin_loader.hpp"
#include "properties/diagnosis.hpp"

namespace ropecheck::gate {

using nlohmann::json;
namespace fs = std::filesystem;

namespace {

std::string descr_of(Dtype d) { return d == Dtype::f32 ? "<f4" : d == Dtype::f16 ? "<f2" : "<u2"; }

// The criteria of a loaded kernel's case under a contract (or a flat tolerance).
Criteria external_criteria(const RopeCase& c, AngleModel model, const Contract& contract,
                           const std::map<Dtype, double>& tol) {
  if (auto it = tol.find(c.dtype); it != tol.end()) return Criteria::flat_bound(it->second);
  return Criteria::of(loaded_kernel_error_model(model), contract);
}

bool safe_name(const std::string& s) {
  if (s.empty() || s.size() > 200 || s == "." || s == "..") return false;
  for (char ch : s)
    if (!(std::isalnum(static_cast<unsigned char>(ch)) || ch == '.' || ch == '-' || ch == '_')) return false;
  return true;
}

void check_array(const NpyArray& a, const RopeCase& c, const std::string& path) {
  if (a.descr != descr_of(c.dtype))
    throw std::runtime_error(fmt::format("{}: element type '{}', the case's dtype {} needs '{}'", path, a.descr,
                                         to_string(c.dtype), descr_of(c.dtype)));
  const std::vector<uint64_t> want{c.n_tokens(), c.n_heads, c.head_dim};
  if (a.shape != want)
    throw std::runtime_error(fmt::format("{}: shape ({}), the case needs ({}, {}, {})", path,
                                         fmt::join(a.shape, ", "), want[0], want[1], want[2]));
}

}  // namespace

size_t export_case_set(const std::string& dir, const ExportOptions& opt) {
  if (opt.random_cases > kMaxExportRandomCases)
    throw std::runtime_error(fmt::format("--random-cases {} is more than the {} allowed", opt.random_cases,
                                         kMaxExportRandomCases));
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw std::runtime_error("cannot create " + dir + ": " + ec.message());
  struct Item {
    RopeCase c;
    std::string check;
  };
  std::vector<Item> items;
  for (Dtype d : opt.dtypes)
    for (Layout l : opt.layouts) {
      const auto sys = systematic_cases(d, l, opt.max_position, opt.seed, nullptr);
      for (size_t k = 0; k < sys.size(); k += 2)  // in place or not is the external program's business
        items.push_back({sys[k], fmt::format("matrix {} {}", to_string(d), to_string(l))});
      for (auto& c : special_value_cases(d, l, opt.seed, opt.max_position)) items.push_back({c, "special values"});
    }
  std::mt19937_64 rng(opt.seed ^ 0x77);
  for (size_t k = 0; k < opt.random_cases && !opt.dtypes.empty() && !opt.layouts.empty(); ++k) {
    RopeCase c;
    c.dtype = opt.dtypes[rng() % opt.dtypes.size()];
    c.layout = opt.layouts[rng() % opt.layouts.size()];
    c.head_dim = uint32_t(2 + rng() % 255);
    c.rotary_dim = 2 * uint32_t(1 + rng() % (c.head_dim / 2));
    c.n_heads = uint32_t(1 + rng() % 4);
    const size_t nt = 1 + rng() % 6;
    for (size_t t = 0; t < nt; ++t) {
      const double lg = std::uniform_real_distribution<double>(0, std::log2(double(opt.max_position) + 1))(rng);
      c.positions.push_back(std::min<int64_t>(opt.max_position, int64_t(std::exp2(lg)) - 1));
    }
    c.base = std::exp(std::uniform_real_distribution<double>(std::log(2.0), std::log(2e6))(rng));
    c.input.assign(c.n_bytes(), 0);
    for (size_t e = 0; e < c.n_elements(); ++e)
      store_f32(c.dtype, c.input.data(), e,
                float(std::ldexp(std::uniform_real_distribution<double>(-2, 2)(rng), int(rng() % 9) - 4)));
    items.push_back({c, "random"});
  }
  json m;
  m["format"] = "ropecheck-case-set";
  m["version"] = 2;
  m["angle_model"] = std::string(to_string(opt.angle_model));
  m["contract"] = opt.contract.spec();
  if (!opt.tolerance.empty()) {
    json t = json::object();
    for (const auto& [d, v] : opt.tolerance) t[std::string(to_string(d))] = double_to_text(v);
    m["tolerance"] = t;
  }
  m["note"] = "inputs NNNN.in.npy [n_tokens][n_heads][head_dim] ('<u2' = bf16 bit patterns); write NNNN.out.npy "
              "of the same shape and type, then run `ropecheck cases check --dir DIR`";
  json cases = json::array();
  for (size_t k = 0; k < items.size(); ++k) {
    const RopeCase& c = items[k].c;
    const std::string id = fmt::format("{:04}", k);
    NpyArray a;
    a.descr = descr_of(c.dtype);
    a.shape = {c.n_tokens(), c.n_heads, c.head_dim};
    a.data = c.input;
    npy_write((fs::path(dir) / (id + ".in.npy")).string(), a);
    json e;
    e["id"] = id;
    e["check"] = items[k].check;
    e["input"] = id + ".in.npy";
    e["output"] = id + ".out.npy";
    const double b = external_criteria(c, opt.angle_model, opt.contract, opt.tolerance).case_bound(c);
    e["bound"] = double_to_text(b);
    e["bound_decimal"] = b;
    e["case"] = case_params_to_json(c);
    cases.push_back(e);
  }
  m["cases"] = cases;
  write_regular_file((fs::path(dir) / "manifest.json").string(), m.dump(1) + "\n");
  return items.size();
}

GateResult check_case_set(const std::string& dir, const std::optional<Contract>& contract_override,
                          const std::map<Dtype, double>& tolerance_override) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::string mpath = (fs::path(dir) / "manifest.json").string();
  const std::string mtext = read_bounded_file(mpath, kMaxManifestBytes, "manifest");
  json m = parse_json_bounded(mtext, kMaxManifestValues, mpath);
  auto fail = [&](const std::string& why) { throw std::runtime_error(mpath + ": " + why); };
  if (!m.is_object() || !m.contains("format") || m["format"] != "ropecheck-case-set")
    fail("not a ropecheck case-set manifest (format field)");
  if (!m.contains("version") || (m["version"] != 1 && m["version"] != 2)) fail("unsupported version");
  if (!m.contains("angle_model") || !m["angle_model"].is_string() ||
      !parse_angle_model(m["angle_model"].get<std::string>()))
    fail("field 'angle_model' must be exact or fp32");
  const AngleModel model = *parse_angle_model(m["angle_model"].get<std::string>());
  if (!m.contains("cases") || !m["cases"].is_array() || m["cases"].empty()) fail("field 'cases' must be a non-empty array");
  // The contract and tolerance: check's own options, else the manifest's (version 1: the default contract).
  Contract contract;
  if (contract_override) {
    contract = *contract_override;
  } else if (m.contains("contract")) {
    std::string err;
    const auto c = m["contract"].is_string() ? parse_contract(m["contract"].get<std::string>(), &err) : std::nullopt;
    if (!c) fail("field 'contract': " + (err.empty() ? std::string("must be a contract SPEC string") : err));
    contract = *c;
  }
  std::map<Dtype, double> tolerance = tolerance_override;
  if (tolerance.empty() && m.contains("tolerance")) {
    if (!m["tolerance"].is_object()) fail("field 'tolerance' must be an object {\"f32\": U, ...}");
    for (const auto& [k, v] : m["tolerance"].items()) {
      const auto d = parse_dtype(k);
      double t = 0;
      try {
        t = double_from_json(v, "tolerance");
      } catch (const std::exception& e) {
        fail(e.what());
      }
      if (!d || !(t > 0) || !std::isfinite(t)) fail("field 'tolerance': expected dtype names with positive numbers");
      tolerance[*d] = t;
    }
  }
  GateResult res;
  res.kernel = "external outputs in " + dir;
  res.contract = contract.spec();
  if (!tolerance.empty()) res.contract += " (overridden by a flat --tolerance)";
  std::map<Dtype, BiasSums> bias;
  auto row = [&](const std::string& name) -> CheckRow& {
    for (auto& r : res.rows)
      if (r.name == name) return r;
    res.rows.push_back({});
    res.rows.back().name = name;
    res.rows.back().what = name == "random" ? "random cases" : name == "special values" ? "special values"
                                                                                       : "systematic matrix";
    return res.rows.back();
  };
  std::vector<Dtype> dtypes_seen;
  // Every missing or malformed entry, input or output, listed together (exit 2); once there is one, the
  // remaining cases' files are still checked but no longer judged.
  std::vector<std::string> problems;
  for (size_t k = 0; k < m["cases"].size(); ++k) {
    const json& e = m["cases"][k];
    const std::string where = fmt::format("cases[{}]", k);
    RopeCase c;
    std::string in_name, out_name, check;
    try {
      if (!e.is_object()) throw std::runtime_error("not an object");
      case_params_from_json(e.at("case"), c);
      if (!e.at("input").is_string() || !e.at("output").is_string()) throw std::runtime_error("input/output must be file names");
      in_name = e["input"].get<std::string>();
      out_name = e["output"].get<std::string>();
      if (!safe_name(in_name) || !safe_name(out_name))
        throw std::runtime_error("input/output must be plain file names in the directory");
      check = e.contains("check") && e["check"].is_string() ? e["check"].get<std::string>() : "cases";
    } catch (const std::exception& ex) {
      problems.push_back(mpath + ": " + where + ": " + ex.what());
      continue;
    }
    const std::string ip = (fs::path(dir) / in_name).string(), op = (fs::path(dir) / out_name).string();
    // Each file: a regular file; its header checked against the case and its size against its header before
    // any data is read (a huge or sparse file costs nothing); at most kMaxCaseFileBytes of data.
    auto read_checked = [&](const std::string& path, bool is_output) -> std::optional<NpyArray> {
      try {
        return npy_read(path, [&](const NpyArray& h) { check_array(h, c, path); }, kMaxCaseFileBytes);
      } catch (const std::exception& ex) {
        std::string msg = ex.what();
        if (is_output && msg == path + ": missing") msg += " (the external program writes one output per case)";
        problems.push_back(msg);
        return std::nullopt;
      }
    };
    const std::optional<NpyArray> in = read_checked(ip, false);
    if (in) {
      c.input = in->data;
      if (std::string why = c.validate_for_kernel(); !why.empty())
        problems.push_back(mpath + ": " + where + ": malformed case: " + why);
    }
    const std::optional<NpyArray> out_file = read_checked(op, true);
    if (!problems.empty()) continue;
    const NpyArray& out = *out_file;
    const Criteria cr = external_criteria(c, model, contract, tolerance);
    ReferenceOptions ro;
    ro.angle_model = model;
    const ReferenceOutput ref = reference_rope(c, ro);
    JudgeOptions jo;
    jo.max_findings = 4;
    jo.keep_values = false;
    const Judgement j = judge_output(c, ref, out.data.data(), cr, jo);
    if (std::find(dtypes_seen.begin(), dtypes_seen.end(), c.dtype) == dtypes_seen.end()) dtypes_seen.push_back(c.dtype);
    CheckRow& r = row(check);
    ++r.cases;
    r.ran = true;
    ++res.calls;
    ++res.accepted;
    res.add(r, c.dtype, j, bias);
    if (!j.ok()) {
      ++r.failed;
      ++r.faults["accuracy"];
      r.failed_check = true;
      const std::string msg = "case " + (e.contains("id") ? e["id"].dump() : std::to_string(k)) + " (" + out_name + "):\n" + j.report(2);
      if (!r.smallest || c.n_elements() < r.smallest->c.n_elements()) {
        CaseRecord rec;
        rec.c = c;
        rec.angle_model = model;
        rec.bound = cr.case_bound(c);
        rec.check = check;
        rec.failure = msg;
        rec.contract = contract;
        rec.tolerance = cr.flat;
        rec.diagnosis = diagnose(c, out.data.data(), ref, cr, model).text();
        r.diagnosis = rec.diagnosis;
        r.smallest = rec;
        r.smallest_message = msg;
      }
    }
  }
  if (!problems.empty()) {
    std::string msg = fmt::format("{} problem(s) with the case set in {} (nothing judged):", problems.size(), dir);
    for (const auto& s : problems) msg += "\n  " + s;
    throw std::runtime_error(msg);
  }
  for (const auto& [d, b] : bias) {
    RopeCase probe;
    probe.dtype = d;
    if (b.n) res.rows.push_back(bias_row(d, b, external_criteria(probe, model, contract, tolerance).model));
  }
  {
    Implementation probe;
    probe.error_model = loaded_kernel_error_model(model);
    res.bounds = describe_bounds(probe, contract, dtypes_seen, int64_t(1) << 24);
  }
  res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  res.pass = res.accepted > 0;
  for (const auto& r : res.rows) res.pass &= !r.failed_check;
  res.verdict_reason = res.pass ? "every check passed under the contract" : "at least one check failed";
  if (!res.pass)
    for (const auto& r : res.rows)
      if (r.failed_check && !r.diagnosis.empty()) res.verdict_reason += "; " + r.diagnosis;
  return res;
}

}  // namespace ropecheck::gate
