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

namespace ropecheck::gate {

using nlohmann::json;
namespace fs = std::filesystem;

namespace {

std::string descr_of(Dtype d) { return d == Dtype::f32 ? "<f4" : d == Dtype::f16 ? "<f2" : "<u2"; }

// A bound like the gate's for a loaded kernel.
double export_bound(const RopeCase& c, AngleModel model, const std::map<Dtype, double>& tol) {
  if (auto it = tol.find(c.dtype); it != tol.end()) return it->second;
  return error_bound(loaded_kernel_error_model(model), c);
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
      for (auto& c : special_value_cases(d, l, opt.seed)) items.push_back({c, "special values"});
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
  m["version"] = 1;
  m["angle_model"] = std::string(to_string(opt.angle_model));
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
    const double b = export_bound(c, opt.angle_model, opt.tolerance);
    e["bound"] = double_to_text(b);
    e["bound_decimal"] = b;
    e["case"] = case_params_to_json(c);
    cases.push_back(e);
  }
  m["cases"] = cases;
  std::ofstream f(fs::path(dir) / "manifest.json");
  f << m.dump(1) << "\n";
  if (!f) throw std::runtime_error("cannot write " + (fs::path(dir) / "manifest.json").string());
  return items.size();
}

GateResult check_case_set(const std::string& dir, const std::map<Dtype, double>& tolerance) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::string mpath = (fs::path(dir) / "manifest.json").string();
  std::ifstream f(mpath);
  if (!f) throw std::runtime_error("cannot read " + mpath);
  json m;
  try {
    m = json::parse(f);
  } catch (const json::exception& e) {
    throw std::runtime_error(mpath + ": not valid JSON: " + e.what());
  }
  auto fail = [&](const std::string& why) { throw std::runtime_error(mpath + ": " + why); };
  if (!m.is_object() || !m.contains("format") || m["format"] != "ropecheck-case-set")
    fail("not a ropecheck case-set manifest (format field)");
  if (!m.contains("version") || m["version"] != 1) fail("unsupported version");
  if (!m.contains("angle_model") || !m["angle_model"].is_string() ||
      !parse_angle_model(m["angle_model"].get<std::string>()))
    fail("field 'angle_model' must be exact or fp32");
  const AngleModel model = *parse_angle_model(m["angle_model"].get<std::string>());
  if (!m.contains("cases") || !m["cases"].is_array() || m["cases"].empty()) fail("field 'cases' must be a non-empty array");
  GateResult res;
  res.kernel = "external outputs in " + dir;
  struct Acc {
    uint64_t n = 0;
    double sr = 0, se2 = 0;
  };
  std::map<Dtype, Acc> bias;
  auto row = [&](const std::string& name) -> CheckRow& {
    for (auto& r : res.rows)
      if (r.name == name) return r;
    res.rows.push_back({});
    res.rows.back().name = name;
    res.rows.back().what = name == "random" ? "random cases" : name == "special values" ? "special values"
                                                                                       : "systematic matrix";
    return res.rows.back();
  };
  for (size_t k = 0; k < m["cases"].size(); ++k) {
    const json& e = m["cases"][k];
    const std::string where = fmt::format("cases[{}]", k);
    RopeCase c;
    std::string in_name, out_name, check;
    double bound;
    try {
      if (!e.is_object()) throw std::runtime_error("not an object");
      case_params_from_json(e.at("case"), c);
      if (!e.at("input").is_string() || !e.at("output").is_string()) throw std::runtime_error("input/output must be file names");
      in_name = e["input"].get<std::string>();
      out_name = e["output"].get<std::string>();
      if (!safe_name(in_name) || !safe_name(out_name))
        throw std::runtime_error("input/output must be plain file names in the directory");
      check = e.contains("check") && e["check"].is_string() ? e["check"].get<std::string>() : "cases";
      bound = double_from_json(e.at("bound"), "bound");
      if (!(bound > 0) || !std::isfinite(bound)) throw std::runtime_error("bound must be positive");
    } catch (const std::exception& ex) {
      fail(where + ": " + ex.what());
    }
    if (auto it = tolerance.find(c.dtype); it != tolerance.end()) bound = it->second;
    const std::string ip = (fs::path(dir) / in_name).string(), op = (fs::path(dir) / out_name).string();
    const NpyArray in = npy_read(ip);
    check_array(in, c, ip);
    c.input = in.data;
    if (std::string why = c.validate_for_kernel(); !why.empty()) fail(where + ": malformed case: " + why);
    if (!fs::exists(op)) throw std::runtime_error(op + ": missing (the external program writes one output per case)");
    const NpyArray out = npy_read(op);
    check_array(out, c, op);
    ReferenceOptions ro;
    ro.angle_model = model;
    const ReferenceOutput ref = reference_rope(c, ro);
    JudgeOptions jo;
    jo.max_findings = 4;
    const Judgement j = judge_output(c, ref, out.data.data(), bound, jo);
    CheckRow& r = row(check);
    ++r.cases;
    r.ran = true;
    ++res.calls;
    ++res.accepted;
    if (j.stats.max / bound >= r.worst_ratio) {
      r.worst_ratio = j.stats.max / bound;
      r.worst_error = j.stats.max;
      r.worst_bound = bound;
    }
    Acc& b = bias[c.dtype];
    b.n += j.stats.count;
    b.sr += j.stats.sum_radial;
    for (float v : j.stats.values) b.se2 += double(v) * v;
    if (!j.ok()) {
      ++r.failed;
      r.failed_check = true;
      const std::string msg = "case " + (e.contains("id") ? e["id"].dump() : std::to_string(k)) + " (" + out_name + "):\n" + j.report(2);
      if (!r.smallest || c.n_elements() < r.smallest->c.n_elements()) {
        r.smallest = CaseRecord{c, false, model, bound, check, msg};
        r.smallest_message = msg;
      }
    }
  }
  for (const auto& [d, b] : bias)
    if (b.n) res.rows.push_back(bias_row(d, b.n, b.sr, b.se2, loaded_kernel_error_model(model)));
  res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  res.pass = res.accepted > 0;
  for (const auto& r : res.rows) res.pass &= !r.failed_check;
  res.verdict_reason = res.pass ? "every check passed" : "at least one check failed";
  return res;
}

}  // namespace ropecheck::gate
