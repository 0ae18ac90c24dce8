#include "gate/case_set.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <stdexcept>
#include <tuple>

#include "core/tensor_call.hpp"
#include "gate/isolation.hpp"
#include "gate/npy.hpp"
#include "impls/plugin_loader.hpp"
#include "properties/diagnosis.hpp"
#include "properties/engine.hpp"
#include "properties/table_fidelity.hpp"

namespace ropecheck::gate {

using nlohmann::json;
namespace fs = std::filesystem;

namespace {

std::string descr_of(Dtype d) { return d == Dtype::f32 ? "<f4" : d == Dtype::f16 ? "<f2" : "<u2"; }

// The criteria of a loaded kernel's case under a contract (or a flat tolerance).
Criteria external_criteria(const RopeCase& c, AngleModel model, const Contract& contract,
                           const std::map<Dtype, double>& tol) {
  if (auto it = tol.find(c.dtype); it != tol.end()) return Criteria::flat_bound(it->second, contract.identity_bits);
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

// Version 3: a run id, declines, in-place cases and the gate's property cases (docs/gate.md).
// Version 4: the property engine's cases ("property": {id, layout, case, call}; export.seed, .max_position and
// .property_cases say how the engine made them).
// Cases may carry ABI v2 fields (rotary_offset, n_pos_axes, pair_axis, attention_factor, freq_rule) and negative
// positions: an additive part of version 4 since the ABI v2 release (whose programs read them and decline such
// cases), written only when the program asks for them (--supports, or a model that has them), so a program
// written against version 4 before ABI v2 never receives one. The export's features, supports, model_case and
// long_max_position are additive fields of `export`. No change before ABI v3 needed a new version: a program
// written against the previous release checks `version` in 1..4 and must keep reading every export it did not opt
// out of (every export without an ABI v3 feature in --supports).
constexpr int kManifestVersion = 4;
// Version 5: cases that carry an ABI v3 field (direction, a table, the tensor form), with the files a program
// needs to make the call as a v3 kernel is made (the tables, the tensors' buffers with their shapes and strides,
// k, the positions as int32/int64 tensors, seq_offsets, cu_seqlens) and, with `--tables program`, tables the
// program builds itself. Written only when --supports names an ABI v3 feature and a case uses one: a reader of
// versions 1..4 refuses the manifest instead of misreading such a case (it would compute a v3 call as a v1 one).
constexpr int kManifestVersionV3 = 5;

// The features an export's cases may use: its --supports; else every ABI v1 feature and, for a model's export,
// the model's (asking for the model is asking for its cases).
FeatureSet export_features(const ExportOptions& opt) {
  if (opt.supports) return *opt.supports;
  FeatureSet s = FeatureSet::of_abi_version(1);
  if (opt.model)
    for (Feature f : model_features(*opt.model).list()) s.add(f);
  return s;
}

// A fresh run id from the OS's entropy source (not the seed: two exports with the same parameters are two runs,
// and outputs of the first must not pass for the second's).
std::string new_run_id() {
  std::random_device rd;
  const uint64_t v = (uint64_t(rd()) << 32) ^ uint64_t(rd());
  return fmt::format("{:016x}", v);
}

bool is_run_id(const std::string& s) {
  return s.size() == 16 &&
         std::all_of(s.begin(), s.end(), [](char ch) { return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f'); });
}

std::string output_name(const std::string& id, const std::string& run) { return id + "." + run + ".out.npy"; }
std::string declined_name(const std::string& id, const std::string& run) { return id + "." + run + ".declined"; }

struct ExportItem {
  RopeCase c;
  std::string check;
  bool in_place = false;
  // A property's call: which property, the layout it was run for, its execution and the call's place in it.
  std::string property;
  Layout property_layout = Layout::interleaved;
  uint64_t property_case = 0, property_call = 0;
};

// Records a property execution's calls and answers each with the correctly rounded reference output (which
// every property accepts), so the execution runs through and its calls become the exported cases.
// A call using a feature outside the export's is not made (answered as declined, as the gate answers a call
// outside --supports): the property discards or skips it, and `check` plays it back the same way.
class RecordingHandle : public props::KernelHandle {
 public:
  RecordingHandle(AngleModel model, const Contract& contract, const std::map<Dtype, double>& tol, FeatureSet allowed)
      : model_(model), contract_(contract), tol_(tol), allowed_(allowed) {}
  const std::string& name() const override { return name_; }
  props::RunResult run(const RopeCase& c, const props::RunRequest& r) override {
    props::RunResult res;
    if (!allowed_.contains(features_of(c, r.in_place))) {
      ++left_out;
      res.status = props::RunResult::Status::declined;
      return res;
    }
    calls.push_back({c, r.in_place});
    res.out = reference_rope(c, ReferenceOptions{model_}).rounded;
    if (c.tensor && c.tensor->k_heads) res.k_out = reference_rope(c.k_case(), ReferenceOptions{model_}).rounded;
    return res;
  }
  Criteria criteria(const RopeCase& c) const override { return external_criteria(c, model_, contract_, tol_); }
  AngleModel angle_model() const override { return model_; }
  bool honours_out_fill() const override { return false; }
  void begin_execution(uint64_t, bool) override { calls.clear(); }
  std::vector<std::pair<RopeCase, bool>> calls;
  size_t left_out = 0;  // calls not made: a feature outside the export's

 private:
  std::string name_ = "the exact reference (cases export)";
  AngleModel model_;
  const Contract& contract_;
  const std::map<Dtype, double>& tol_;
  FeatureSet allowed_;
};

// The (dtype, layout) combinations a property runs on among those exported: every one, or for a property
// that compares layouts, each dtype exported in both (layout argument: interleaved).
std::vector<std::pair<Dtype, Layout>> property_combos(const props::PropertyDef& p, const std::vector<Dtype>& dtypes,
                                                      const std::vector<Layout>& layouts) {
  std::vector<std::pair<Dtype, Layout>> v;
  const bool both = std::count(layouts.begin(), layouts.end(), Layout::interleaved) &&
                    std::count(layouts.begin(), layouts.end(), Layout::half_split);
  for (Dtype d : dtypes) {
    if (p.both_layouts) {
      if (both) v.push_back({d, Layout::interleaved});
      continue;
    }
    for (Layout l : layouts) v.push_back({d, l});
  }
  return v;
}

// The gate's rows, in the gate's order: the matrix (every case, in place or not as the gate calls it), special
// values, the ABI v2 feature rows, the properties (the engine's exportable ones) and random cases. Rows that need a process the
// program's kernel runs in (sequence, repeat, large, fp environment) are the gate's alone.
// Only cases whose features are all the export's (export_features) are kept; *left_out counts the others.
std::vector<ExportItem> export_items(const ExportOptions& opt, size_t* left_out) {
  const FeatureSet allowed = export_features(opt);
  std::vector<ExportItem> items;
  for (Dtype d : opt.dtypes)
    for (Layout l : opt.layouts) {
      std::vector<bool> ip;
      const auto sys = systematic_cases(d, l, opt.max_position, opt.seed, &ip, opt.model ? &*opt.model : nullptr);
      for (size_t k = 0; k < sys.size(); ++k)
        items.push_back({sys[k], fmt::format("matrix {} {}", to_string(d), to_string(l)), ip[k], {}});
    }
  for (Dtype d : opt.dtypes)
    for (Layout l : opt.layouts) {
      const auto sv = special_value_cases(d, l, opt.seed, opt.max_position, opt.model ? &*opt.model : nullptr);
      for (size_t k = 0; k < sv.size(); ++k) items.push_back({sv[k], "special values", k % 2 == 1, {}});
    }
  // Positions far past the other rows' (the gate's long positions row): judged call by call.
  for (Dtype d : opt.dtypes)
    for (Layout l : opt.layouts)
      for (const auto& [c, in_place] :
           long_position_cases(d, l, opt.long_max_position, opt.seed, opt.model ? &*opt.model : nullptr))
        items.push_back({c, "long positions", in_place, {}});
  // ABI v2 feature rows (a program that builds v1 calls only declines them: `check` counts that as declined).
  for (Dtype d : opt.model ? std::vector<Dtype>{} : opt.dtypes)  // a model's export: its configuration only
    for (Layout l : opt.layouts)
      for (const V2Case& v : v2_feature_cases(d, l, opt.max_position, opt.seed))
        items.push_back({v.c, "v2: " + v.feature, v.in_place, {}});
  // ABI v3 feature rows, the gate's (gate.hpp, v3_feature_cases): only for an export whose features name an ABI v3
  // feature (--supports), so an export without one writes what it wrote before (its manifest byte for byte).
  const bool v3_export = !allowed.minus(FeatureSet::of_abi_version(2)).empty();
  if (v3_export)
    for (Dtype d : opt.model ? std::vector<Dtype>{} : opt.dtypes)
      for (Layout l : opt.layouts)
        for (const V2Case& v : v3_feature_cases(d, l, opt.max_position, opt.seed))
          if (!v.gate_only) items.push_back({v.c, "v3: " + v.feature, v.in_place, {}});
  // The suite's properties (properties/engine.hpp), those whose calls an external program can make (no input
  // taken from an output, no prefilled output buffer): each execution's calls, in order, as the engine makes
  // them for the gate (the same seed, the same cases); `check` runs the property again over the outputs.
  RecordingHandle rec(opt.angle_model, opt.contract, opt.tolerance, allowed);
  const props::Scope scope{opt.max_position};
  for (const props::PropertyDef& p : props::property_set()) {
    if (!p.exportable || (p.exact_angles && opt.angle_model != AngleModel::exact)) continue;
    // (the v3 properties, whose calls are all ABI v3, only where the v3 rows are: an export without a v3
    // feature writes what it wrote before)
    if (p.probe && !v3_export) continue;
    for (const auto& [d, l] : property_combos(p, opt.dtypes, opt.layouts))
      for (uint64_t i = 0; i < opt.property_cases; ++i) {
        const auto r = props::replay_execution(p, rec, d, l, scope, opt.seed, i, {}, opt.property_cases);
        if (r.type == rc::detail::CaseResult::Type::Discard) continue;  // the generator's own discard
        if (r.type == rc::detail::CaseResult::Type::Failure)
          throw std::logic_error("property " + std::string(p.id) + " failed on the exact reference's outputs: " +
                                 r.description);
        for (size_t k = 0; k < rec.calls.size(); ++k)
          items.push_back({rec.calls[k].first, p.row, rec.calls[k].second, p.id, l, i, k});
      }
  }
  // Random cases: the gate's draws (its seed, its combination order, gate.hpp random_case), so a program that
  // accepts every dtype x layout gets the gate's random cases.
  std::vector<std::pair<Dtype, Layout>> combos;
  for (Dtype d : opt.dtypes)
    for (Layout l : opt.layouts) combos.push_back({d, l});
  Mt19937_64 rng(opt.seed ^ 0xabcdef12345ull);  // (std::mt19937_64's sequence, as the gate's)
  for (size_t k = 0; k < opt.random_cases && !combos.empty(); ++k) {
    const auto [d, l] = combos[rng() % combos.size()];
    const RopeCase c = random_case(d, l, opt.max_position, rng, opt.model ? &*opt.model : nullptr);
    const bool in_place = rng() % 2 == 1;
    items.push_back({c, "random", in_place, {}});
  }
  // The cases of the export's features only (the property calls are filtered as they are made, above).
  const size_t before = items.size();
  std::erase_if(items, [&](const ExportItem& it) {
    return it.property.empty() && !allowed.contains(features_of(it.c, it.in_place));
  });
  *left_out = before - items.size() + rec.left_out;
  return items;
}

// Files in dir that an external program wrote for another export: "ID.RUN.out.npy" or "ID.RUN.declined" with
// another run id, or "ID.out.npy" / "ID.declined" (no run id: the version-2 protocol), by case id.
std::map<std::string, std::vector<std::string>> other_exports_files(const std::string& dir, const std::string& run) {
  std::map<std::string, std::vector<std::string>> found;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    std::string stem;
    for (const char* suffix : {".out.npy", ".declined"})
      if (name.size() > std::strlen(suffix) && name.compare(name.size() - std::strlen(suffix), std::string::npos, suffix) == 0)
        stem = name.substr(0, name.size() - std::strlen(suffix));
    if (stem.empty()) continue;
    const size_t dot = stem.find('.');
    const std::string id = stem.substr(0, dot);
    std::string other = dot == std::string::npos ? "" : stem.substr(dot + 1);
    other = other.substr(0, other.find('.'));  // (version 5: "ID.RUN.k.out.npy")
    if (other != run) found[id].push_back(name);
  }
  for (auto& [id, names] : found) std::sort(names.begin(), names.end());
  return found;
}

// "a run id 0123..." of a stale file's name, or "no run id".
std::string run_of(const std::string& name) {
  const size_t a = name.find('.'), b = a == std::string::npos ? a : name.find('.', a + 1);
  const std::string r = b == std::string::npos ? "" : name.substr(a + 1, b - a - 1);
  return is_run_id(r) ? "run " + r : "no run id: the version-2 protocol";
}

// ---- Version 5: the files of an ABI v3 case (docs/gate.md, "ABI v3 cases") ----

std::string index_descr(size_t elem) { return elem == 4 ? "<i4" : "<i8"; }

// What fills the gaps of a strided buffer the export writes: a quiet NaN of the dtype (a kernel that reads a gap
// as an element computes NaN there).
uint32_t gap_bits(Dtype d) { return d == Dtype::f32 ? 0x7fc00000u : d == Dtype::f16 ? 0x7e00u : 0x7fc0u; }

// The names of a v3 case's files: those the export writes (no run id) and those the program writes (the run id).
std::string k_input_name(const std::string& id) { return id + ".k.in.npy"; }
std::string k_output_name(const std::string& id, const std::string& run) { return id + "." + run + ".k.out.npy"; }
std::string table_file_name(const std::string& id, int n, const std::string& run) {
  return id + (run.empty() ? "" : "." + run) + (n == 0 ? ".table.npy" : ".table2.npy");
}

bool two_table_tensors(TableKind k) { return k == TableKind::cos_sin_2 || k == TableKind::cos_sin_full; }
// Columns of a table of kind k: R/2 (cos-sin-2) or R.
uint32_t table_width(TableKind k, uint32_t rotary_dim) { return k == TableKind::cos_sin_2 ? rotary_dim / 2 : rotary_dim; }

json layout_json(const TensorLayout& l, const std::string& file) {
  json t;
  t["file"] = file;
  t["shape"] = std::vector<int64_t>(l.shape, l.shape + l.ndim);
  t["strides"] = std::vector<int64_t>(l.strides, l.strides + l.ndim);
  t["offset"] = 0;
  t["span"] = l.span;
  return t;
}

// A laid-out tensor as the flat buffer the export writes: `values` ([T][H][D] compact) at their strided places,
// the gaps NaN.
NpyArray laid_out(const RopeCase& c, const TensorLayout& l, const Bytes& values) {
  NpyArray a;
  a.descr = descr_of(c.dtype);
  a.shape = {l.span};
  a.data.assign(size_t(l.span) * dtype_size(c.dtype), 0);
  for (uint64_t e = 0; e < l.span; ++e) store_bits(c.dtype, a.data.data(), e, gap_bits(c.dtype));
  scatter_heads(c, l, a.data.data(), values.data(), 0);
  return a;
}

NpyArray index_array(size_t elem, std::vector<uint64_t> shape, const std::vector<int64_t>& v) {
  NpyArray a;
  a.descr = index_descr(elem);
  a.shape = std::move(shape);
  a.data.assign(v.size() * elem, 0);
  for (size_t i = 0; i < v.size(); ++i) store_index(a.data.data(), i, elem, v[i]);
  return a;
}

// The ABI shape of the positions tensor (kernel_abi.h, pos): {T} / {B, S}, or the axes first.
std::vector<uint64_t> pos_shape(const RopeCase& c) {
  const TensorCall& tc = *c.tensor;
  const uint64_t T = c.n_tokens(), B = tc.batch, A = c.n_pos_axes;
  const bool first = tc.axes_first || c.n_pos_axes > 1;
  if (tc.rank == 4) return first ? std::vector<uint64_t>{A, B, T / B} : std::vector<uint64_t>{B, T / B};
  return first ? std::vector<uint64_t>{A, T} : std::vector<uint64_t>{T};
}

// Whether a case's table is the program's to build (`--tables program`): a case judged alone (a property's calls
// keep the tables the property made: it compares calls with each other).
bool program_table(const ExportItem& it, bool program_tables) {
  return program_tables && it.c.table && it.property.empty();
}

// A tensor-form case's "tensors": each tensor's file, shape, strides (elements) and offset, as the program makes
// the call (torch.as_strided(buffer, shape, strides, offset)); the index tensors' files, dtypes and shapes. With
// `dir`, the export's files are written there (q's buffer, "input", is written by the caller).
json tensors_json(const RopeCase& c, const std::string& id, const std::string& run, bool in_place,
                  const std::string& dir) {
  const TensorCall& tc = *c.tensor;
  auto put = [&](const std::string& name, const NpyArray& a) {
    if (!dir.empty()) npy_write((fs::path(dir) / name).string(), a);
  };
  json ts;
  const std::string out = output_name(id, run);
  ts["q"] = layout_json(c.tensor_layout(0), id + ".in.npy");
  ts["q_out"] = layout_json(c.tensor_layout(in_place ? 0 : 1), out);
  if (tc.k_heads) {
    if (!dir.empty()) put(k_input_name(id), laid_out(c.k_case(), c.tensor_layout(2), tc.k_input));
    ts["k"] = layout_json(c.tensor_layout(2), k_input_name(id));
    ts["k_out"] = layout_json(c.tensor_layout(in_place ? 2 : 3), k_output_name(id, run));
  }
  auto index = [&](const char* field, size_t elem, std::vector<uint64_t> shape, const std::vector<int64_t>& v) {
    const std::string name = id + "." + field + ".npy";
    if (!dir.empty()) put(name, index_array(elem, shape, v));
    json j;
    j["file"] = name;
    j["dtype"] = elem == 4 ? "int32" : "int64";
    j["shape"] = shape;
    ts[field] = j;
  };
  if (tc.pos != PositionForm::implicit) index("pos", tensor_index_elem(c, true), pos_shape(c), c.positions);
  if (!tc.seq_offsets.empty()) index("seq_offsets", tensor_index_elem(c, false), {tc.seq_offsets.size()}, tc.seq_offsets);
  if (!tc.cu_seqlens.empty()) index("cu_seqlens", tensor_index_elem(c, false), {tc.cu_seqlens.size()}, tc.cu_seqlens);
  return ts;
}

// Writes a v3 case's files and returns its manifest fields (direction, table, tensors).
json write_v3_case(const std::string& dir, const std::string& id, const std::string& run, const ExportItem& it,
                   bool program_tables) {
  const RopeCase& c = it.c;
  json e;
  auto put = [&](const std::string& name, const NpyArray& a) { npy_write((fs::path(dir) / name).string(), a); };
  e["direction"] = std::string(to_string(c.direction));
  if (c.table) {
    const CosSinTable& t = *c.table;
    const bool program = program_table(it, program_tables);
    json tj;
    tj["table_kind"] = std::string(to_string(t.kind));
    tj["dtype"] = std::string(to_string(t.dtype));
    tj["rows"] = t.rows;
    tj["columns"] = table_width(t.kind, c.rotary_dim);
    tj["source"] = program ? "program" : "export";
    if (!program) (void)c.args(nullptr, nullptr, 0);  // lays the table out as the ABI does (abi_table_bytes)
    for (int n = 0; n < (two_table_tensors(t.kind) ? 2 : 1); ++n) {
      const std::string name = table_file_name(id, n, program ? run : "");
      tj[n == 0 ? "table" : "table2"] = name;
      if (program) continue;
      NpyArray a;
      a.descr = descr_of(t.dtype);
      a.shape = {uint64_t(c.abi_table_shape[n][0]), uint64_t(c.abi_table_shape[n][1])};
      a.data = c.abi_table_bytes[n];
      put(name, a);
    }
    e["table"] = tj;
  }
  if (c.tensor) e["tensors"] = tensors_json(c, id, run, it.in_place, dir);
  return e;
}

}  // namespace

ExportedSet export_case_set(const std::string& dir, const ExportOptions& opt) {
  if (opt.random_cases > kMaxExportRandomCases)
    throw std::runtime_error(fmt::format("--random-cases {} is more than the {} allowed", opt.random_cases,
                                         kMaxExportRandomCases));
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw std::runtime_error("cannot create " + dir + ": " + ec.message());
  ExportedSet out;
  const std::vector<ExportItem> items = export_items(opt, &out.left_out);
  out.cases = items.size();
  out.run_id = new_run_id();
  out.version = kManifestVersion;
  for (const ExportItem& it : items) {
    for (Feature f : features_of(it.c, it.in_place).list()) out.features.add(f);
    if (it.c.uses_v3()) out.version = kManifestVersionV3;
  }
  if (opt.program_tables && std::none_of(items.begin(), items.end(), [](const ExportItem& it) {
        return program_table(it, true);
      }))
    throw std::runtime_error("--tables program: the export has no case with a table (name a table kind in --supports: "
                             "table-cos-sin-2, table-cos-sin-cat, table-cos-sin-full, table-angle)");
  json m;
  m["format"] = "ropecheck-case-set";
  m["version"] = out.version;
  m["run_id"] = out.run_id;
  {
    json e;
    json dts = json::array(), lts = json::array();
    for (Dtype d : opt.dtypes) dts.push_back(std::string(to_string(d)));
    for (Layout l : opt.layouts) lts.push_back(std::string(to_string(l)));
    e["dtypes"] = dts;
    e["layouts"] = lts;
    e["max_position"] = opt.max_position;
    e["angle_model"] = std::string(to_string(opt.angle_model));
    e["contract"] = opt.contract.spec();
    e["seed"] = opt.seed;
    e["random_cases"] = opt.random_cases;
    e["property_cases"] = opt.property_cases;
    e["long_max_position"] = opt.long_max_position;
    if (!opt.long_positions_bound.empty()) e["long_positions_bound"] = opt.long_positions_bound;
    // The features the cases may use (a property's call outside them was not made: `check` plays it back as
    // declined), and what the program said it implements (`check` requires each that has cases).
    e["features"] = export_features(opt).names();
    if (opt.supports) e["supports"] = opt.supports->names();
    if (opt.program_tables) e["tables"] = "program";
    if (opt.model) {
      e["model_case"] = case_params_to_json(*opt.model);
      e["model"] = opt.model_name;
      e["model_config"] = opt.model_description;
      e["model_note"] = "the matrix, special-value and random cases take the model's configuration; the property "
                        "rows' cases are the generic ones (the property generators cannot take a model)";
    }
    m["export"] = e;
  }
  m["angle_model"] = std::string(to_string(opt.angle_model));
  m["contract"] = opt.contract.spec();
  if (!opt.tolerance.empty()) {
    json t = json::object();
    for (const auto& [d, v] : opt.tolerance) t[std::string(to_string(d))] = double_to_text(v);
    m["tolerance"] = t;
    m["export"]["tolerance"] = t;
  }
  m["note"] = "for each case read `input` ([n_tokens][n_heads][head_dim], C order; '<f4' f32, '<f2' f16, '<u2' bf16 "
              "bit patterns) and write `output`, of the same shape and type, computed in place (into the input's "
              "buffer) when `in_place` is true; or, to decline a case (as a kernel returns RC_UNSUPPORTED), write the "
              "file `declined` (empty) instead: one of the two, never both. Both names hold `run_id`: outputs left by "
              "an earlier export of the directory never count. Then run `ropecheck cases check --dir DIR`";
  if (out.version == kManifestVersionV3)
    m["note"] = m["note"].get<std::string>() +
                ". Version 5: a case with \"direction\", \"table\" or \"tensors\" is an ABI v3 call (kernel_abi.h): "
                "\"direction\" forward or inverse; \"table\" its cos/sin or angle table(s), .npy [rows][columns] in "
                "their dtype, files \"table\" and \"table2\" (\"source\": \"program\": the program builds them, "
                "row r for position r from the case's angle fields, and writes them under those names); \"tensors\": "
                "q, q_out, k, k_out as flat buffers (the input's and the outputs' files) viewed as "
                "torch.as_strided(buffer, shape, strides, offset), and pos, seq_offsets, cu_seqlens as int32/int64 .npy "
                "(no pos: implicit positions). docs/gate.md, \"ABI v3 cases\"";
  json cases = json::array();
  for (size_t k = 0; k < items.size(); ++k) {
    const RopeCase& c = items[k].c;
    const std::string id = fmt::format("{:04}", k);
    NpyArray a;
    a.descr = descr_of(c.dtype);
    a.shape = {c.n_tokens(), c.n_heads, c.head_dim};
    a.data = c.input;
    if (c.tensor) a = laid_out(c, c.tensor_layout(0), c.input);  // version 5: q's buffer (tensors.q)
    npy_write((fs::path(dir) / (id + ".in.npy")).string(), a);
    json e;
    e["id"] = id;
    e["check"] = items[k].check;
    e["in_place"] = items[k].in_place;
    e["input"] = id + ".in.npy";
    e["output"] = output_name(id, out.run_id);
    e["declined"] = declined_name(id, out.run_id);
    if (!items[k].property.empty()) {
      json p;
      p["id"] = items[k].property;
      p["layout"] = std::string(to_string(items[k].property_layout));
      p["case"] = items[k].property_case;
      p["call"] = items[k].property_call;
      e["property"] = p;
    }
    const double b = external_criteria(c, opt.angle_model, opt.contract, opt.tolerance).case_bound(c);
    e["bound"] = double_to_text(b);
    e["bound_decimal"] = b;
    e["case"] = case_params_to_json(c);
    if (c.uses_v3()) {
      e.update(write_v3_case(dir, id, out.run_id, items[k], opt.program_tables));
      // A table the program builds is not in the case: the program builds it from the case's angle fields.
      if (program_table(items[k], opt.program_tables)) e["case"].erase("table");
    }
    cases.push_back(e);
  }
  m["cases"] = cases;
  write_regular_file((fs::path(dir) / "manifest.json").string(), m.dump(1) + "\n");
  return out;
}

namespace {

// One manifest entry as read: the case's parameters (its input is read later, one case at a time).
struct Entry {
  std::string id, check, input, output, declined;
  bool in_place = false;
  RopeCase c;
  // Version 4: a property's call (empty property: a case judged alone).
  std::string property;
  Layout property_layout = Layout::interleaved;
  uint64_t property_case = 0, property_call = 0;
  // Version 5: k's input and output files (the tensor form with k), and the table the program builds (its kind
  // and files; none: the case's table, if any, is the export's).
  std::string k_input, k_output;
  std::optional<TableKind> program_table;
  uint64_t table_rows = 0;  // the rows the program builds (positions 0..rows-1)
  std::string table_files[2];
};

// A property call's files, read: the case with its input, and the output or the decline.
struct Kept {
  RopeCase c;
  bool in_place = false, declined = false;
  Bytes out;
  std::string id;
  Bytes k_out;
};

std::optional<TableKind> table_kind_named(const std::string& s) {
  for (TableKind k : {TableKind::cos_sin_2, TableKind::cos_sin_cat, TableKind::cos_sin_full, TableKind::angle})
    if (to_string(k) == s) return k;
  return std::nullopt;
}

// A version-5 entry's ABI v3 fields against its case (throws std::runtime_error): "direction" the case's,
// "tensors" exactly what the export writes for the case (the program reads the tensors by them: an edited shape
// or stride would have its output misread), "table" the case's table ("source": "export") or the one the program
// builds ("source": "program": the case has none; the files carry the run id).
void read_v3_entry(const json& e, Entry& en, const std::string& run) {
  const RopeCase& c = en.c;
  const bool program = e.contains("table") && e["table"].is_object() && e["table"].value("source", "") == "program";
  if (!c.uses_v3() && !program) {
    for (const char* f : {"direction", "table", "tensors"})
      if (e.contains(f)) throw std::runtime_error(fmt::format("'{}' in a case without an ABI v3 field", f));
    return;
  }
  if (!e.contains("direction") || !e["direction"].is_string() || e["direction"] != to_string(c.direction))
    throw std::runtime_error(fmt::format("'direction' must be \"{}\" (the case's)", to_string(c.direction)));
  if (c.tensor) {
    const json want = tensors_json(c, en.id, run, en.in_place, "");
    if (!e.contains("tensors") || e["tensors"] != want)
      throw std::runtime_error("'tensors' must be the case's tensors as the export wrote them: " + want.dump());
    if (c.tensor->k_heads) {
      en.k_input = want["k"]["file"].get<std::string>();
      en.k_output = want["k_out"]["file"].get<std::string>();
    }
  } else if (e.contains("tensors")) {
    throw std::runtime_error("'tensors' in a case not in the tensor form");
  }
  if (!e.contains("table")) {
    if (c.table) throw std::runtime_error("a case with a table has 'table'");
    return;
  }
  const json& t = e["table"];
  const auto kind = t.contains("table_kind") && t["table_kind"].is_string()
                        ? table_kind_named(t["table_kind"].get<std::string>())
                        : std::nullopt;
  if (!kind) throw std::runtime_error("'table.table_kind' must be cos-sin-2, cos-sin-cat, cos-sin-full or angle");
  if (!program) {
    if (!c.table || c.table->kind != *kind || t.value("source", "") != "export")
      throw std::runtime_error("'table' must be the case's table (\"source\": \"export\"), or \"source\": \"program\"");
    return;
  }
  if (c.table) throw std::runtime_error("a table the program builds is not in the case");
  if (!c.tensor && !(c.n_pos_axes == 1 && c.pair_axis.empty()))
    throw std::runtime_error("a table has one row per position: one position axis only");
  en.program_table = *kind;
  if (!t.contains("rows") || !t["rows"].is_number_unsigned() || t["rows"].get<uint64_t>() == 0 ||
      t["rows"].get<uint64_t>() > (uint64_t(1) << 20))
    throw std::runtime_error("'table.rows' must be a positive integer (at most 2^20)");
  en.table_rows = t["rows"].get<uint64_t>();
  for (int n = 0; n < (two_table_tensors(*kind) ? 2 : 1); ++n) {
    const char* f = n == 0 ? "table" : "table2";
    en.table_files[n] = table_file_name(en.id, n, run);
    if (!t.contains(f) || t[f] != en.table_files[n])
      throw std::runtime_error(fmt::format("'table.{}' must be {} (the id and the run id)", f, en.table_files[n]));
  }
}

// The table a program built (`--tables program`), read from its files: their dtype (f32, f16 or bf16; an angle
// table f32), shape [rows][columns] of the kind, the values per (row, pair) (a full-width kind's two copies of a
// pair equal). The attention factor is in a cos/sin table's values. Throws std::runtime_error naming the file.
CosSinTable read_program_table(const std::string& dir, const Entry& en, const RopeCase& c) {
  const TableKind kind = *en.program_table;
  const uint32_t np = c.rotary_dim / 2, width = table_width(kind, c.rotary_dim);
  CosSinTable t;
  t.kind = kind;
  NpyArray a[2];
  for (int n = 0; n < (two_table_tensors(kind) ? 2 : 1); ++n) {
    const std::string path = (fs::path(dir) / en.table_files[n]).string();
    a[n] = npy_read(
        path,
        [&](const NpyArray& h) {
          const bool ok_type = kind == TableKind::angle ? h.descr == "<f4"
                                                        : h.descr == "<f4" || h.descr == "<f2" || h.descr == "<u2";
          if (!ok_type)
            throw std::runtime_error(fmt::format("{}: element type '{}': a {} table is {}", path, h.descr,
                                                 to_string(kind), kind == TableKind::angle ? "'<f4'" : "'<f4', '<f2' or '<u2'"));
          if (h.shape != std::vector<uint64_t>{en.table_rows, width})
            throw std::runtime_error(fmt::format("{}: shape ({}), the case's {} table is ({}, {}) (table.rows, "
                                                 "table.columns)",
                                                 path, fmt::join(h.shape, ", "), to_string(kind), en.table_rows, width));
          if (n == 1 && (h.descr != a[0].descr || h.shape != a[0].shape))
            throw std::runtime_error(fmt::format("{}: its type and shape must be {}'s", path, en.table_files[0]));
        },
        kMaxCaseFileBytes);
  }
  t.dtype = a[0].descr == "<f4" ? Dtype::f32 : a[0].descr == "<f2" ? Dtype::f16 : Dtype::bf16;
  t.rows = size_t(a[0].shape[0]);
  t.cos.resize(t.rows * np);
  if (kind != TableKind::angle) t.sin.resize(t.rows * np);
  auto at = [&](int n, size_t r, uint32_t col) { return double(load_f32(t.dtype, a[n].data.data(), r * width + col)); };
  for (size_t r = 0; r < t.rows; ++r)
    for (uint32_t i = 0; i < np; ++i) {
      const auto [d0, d1] = pair_dims(c.layout, c.rotary_dim, i);
      double cv = 0, sv = 0;
      switch (kind) {
        case TableKind::cos_sin_2: cv = at(0, r, i); sv = at(1, r, i); break;
        case TableKind::cos_sin_cat: cv = at(0, r, i); sv = at(0, r, np + i); break;
        case TableKind::cos_sin_full:
        case TableKind::angle:
          cv = at(0, r, d0);
          if (kind == TableKind::cos_sin_full) sv = at(1, r, d0);
          for (int n = 0; n < (kind == TableKind::angle ? 1 : 2); ++n)
            if (std::memcmp(a[n].data.data() + (r * width + d0) * dtype_size(t.dtype),
                            a[n].data.data() + (r * width + d1) * dtype_size(t.dtype), dtype_size(t.dtype)) != 0)
              throw std::runtime_error(fmt::format(
                  "{}: row {} pair {}: its two columns ({} and {}) differ (a full-width table holds each pair's value "
                  "at both of its elements)",
                  en.table_files[n], r, i, d0, d1));
          break;
      }
      t.cos[r * np + i] = cv;
      if (kind != TableKind::angle) t.sin[r * np + i] = sv;
    }
  return t;
}

// Plays a property execution's exported calls back: each call the property makes must be the next exported
// one (the same parameters, input and in-place flag: the engine made them from the same seed), and gets the
// external program's output, or its decline.
class PlaybackHandle : public props::KernelHandle {
 public:
  // features: the export's (export.features): a call outside them was not made by the export and is answered as
  // declined here too, without taking an exported call.
  PlaybackHandle(std::vector<const Kept*> calls, AngleModel model, const Contract& contract,
                 const std::map<Dtype, double>& tol, std::optional<FeatureSet> features)
      : calls_(std::move(calls)), model_(model), contract_(contract), tol_(tol), features_(features) {}
  const std::string& name() const override { return name_; }
  props::RunResult run(const RopeCase& c, const props::RunRequest& r) override {
    props::RunResult res;
    if (features_ && !features_->contains(features_of(c, r.in_place))) {
      res.status = props::RunResult::Status::declined;
      return res;
    }
    // The property's retry of a call the program declined, in place (properties/suite_tensor.cpp, run_taken: a
    // kernel that takes in-place calls only): the export made the call once, as the reference took it; the retry
    // was never exported, so it is declined too, taking no exported call.
    if (next_ > 0 && calls_[next_ - 1]->declined && r.in_place != calls_[next_ - 1]->in_place &&
        calls_[next_ - 1]->c.input == c.input &&
        case_params_to_json(calls_[next_ - 1]->c) == case_params_to_json(c)) {
      res.status = props::RunResult::Status::declined;
      return res;
    }
    if (next_ >= calls_.size()) {
      if (mismatch.empty()) mismatch = fmt::format("the property makes more than the {} exported call(s)", calls_.size());
      res.status = props::RunResult::Status::declined;
      return res;
    }
    const Kept& k = *calls_[next_++];
    if (case_params_to_json(k.c) != case_params_to_json(c) || k.c.input != c.input || k.in_place != r.in_place) {
      if (mismatch.empty())
        mismatch = fmt::format("case {} is not the call the property makes (its parameters, input or in-place flag "
                               "differ: exported by another ropecheck version, or edited)",
                               k.id);
      res.status = props::RunResult::Status::declined;
      return res;
    }
    if (k.declined) {
      res.status = props::RunResult::Status::declined;
      return res;
    }
    res.out = k.out;
    res.k_out = k.k_out;
    return res;
  }
  Criteria criteria(const RopeCase& c) const override { return external_criteria(c, model_, contract_, tol_); }
  AngleModel angle_model() const override { return model_; }
  bool honours_out_fill() const override { return false; }
  size_t used() const { return next_; }
  std::string mismatch;

 private:
  std::string name_ = "external outputs";
  std::vector<const Kept*> calls_;
  size_t next_ = 0;
  AngleModel model_;
  const Contract& contract_;
  const std::map<Dtype, double>& tol_;
  std::optional<FeatureSet> features_;
};

// A list of feature names in the manifest (export.features, export.supports).
FeatureSet features_from_json(const json& j, const std::string& field) {
  if (!j.is_array()) throw std::runtime_error("field '" + field + "' must be an array of feature names");
  FeatureSet s;
  for (const json& x : j) {
    const auto f = x.is_string() ? parse_feature(x.get<std::string>()) : std::nullopt;
    if (!f) throw std::runtime_error("field '" + field + "': " + x.dump() + " is not a feature (docs/gate.md, \"Features\")");
    s.add(*f);
  }
  return s;
}

}  // namespace

GateResult check_case_set(const std::string& dir, const std::optional<Contract>& contract_override,
                          const std::map<Dtype, double>& tolerance_override, const FeatureSet& require) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::string mpath = (fs::path(dir) / "manifest.json").string();
  const std::string mtext = read_bounded_file(mpath, kMaxManifestBytes, "manifest");
  json m = parse_json_bounded(mtext, kMaxManifestValues, mpath);
  auto fail = [&](const std::string& why) { throw std::runtime_error(mpath + ": " + why); };
  if (!m.is_object() || !m.contains("format") || m["format"] != "ropecheck-case-set")
    fail("not a ropecheck case-set manifest (format field)");
  if (!m.contains("version") || !m["version"].is_number_integer() || m["version"] < 1 ||
      m["version"] > kManifestVersionV3)
    fail(fmt::format("unsupported version (1 to {})", kManifestVersionV3));
  const int version = m["version"].get<int>();
  std::string run;
  if (version >= 3) {
    if (!m.contains("run_id") || !m["run_id"].is_string() || !is_run_id(m["run_id"].get<std::string>()))
      fail("field 'run_id' must be 16 hex digits (version 3: `cases export` stamps one)");
    run = m["run_id"].get<std::string>();
  }
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
  res.command = "ropecheck cases check";
  res.kernel = "external outputs in " + dir + (run.empty() ? "" : " (export run " + run + ")");
  res.contract = contract.spec();
  if (!tolerance.empty()) res.contract += " (overridden by a flat --tolerance)";
  std::map<Dtype, BiasSums> bias;
  auto row = [&](const std::string& name) -> CheckRow& {
    for (auto& r : res.rows)
      if (r.name == name) return r;
    res.rows.push_back({});
    res.rows.back().name = name;
    res.rows.back().what = row_what(name, contract);
    return res.rows.back();
  };
  // Every missing or malformed entry, input or output, listed together (exit 2); once there is one, the
  // remaining cases' files are still checked but no longer judged.
  std::vector<std::string> problems;
  // The entries first: the layouts pairs are checked against each other before any file is read.
  std::vector<Entry> entries(m["cases"].size());
  std::map<std::string, size_t> by_id;
  for (size_t k = 0; k < m["cases"].size(); ++k) {
    const json& e = m["cases"][k];
    Entry& en = entries[k];
    try {
      if (!e.is_object()) throw std::runtime_error("not an object");
      case_params_from_json(e.at("case"), en.c);
      if (en.c.tensor)  // (a case set's buffers are files: dense)
        for (int which = 0; which < 4; ++which)
          if (en.c.tensor_layout(which).span > (uint64_t(1) << 26))
            throw std::runtime_error("its tensors' strides spread them over more than 2^26 elements, more than a case "
                                     "set's files hold");
      if (!e.at("input").is_string() || !e.at("output").is_string()) throw std::runtime_error("input/output must be file names");
      en.input = e["input"].get<std::string>();
      en.output = e["output"].get<std::string>();
      if (!safe_name(en.input) || !safe_name(en.output))
        throw std::runtime_error("input/output must be plain file names in the directory");
      en.check = e.contains("check") && e["check"].is_string() ? e["check"].get<std::string>() : "cases";
      en.id = e.contains("id") && e["id"].is_string() ? e["id"].get<std::string>() : std::to_string(k);
      if (version >= 3) {
        if (!e.contains("id") || !e["id"].is_string() || !safe_name(en.id) || en.id.find('.') != std::string::npos)
          throw std::runtime_error("'id' must be a plain name without dots");
        if (!by_id.emplace(en.id, k).second) throw std::runtime_error("id " + en.id + " is used twice");
        if (!e.contains("in_place") || !e["in_place"].is_boolean()) throw std::runtime_error("'in_place' must be true or false");
        en.in_place = e["in_place"].get<bool>();
        if (!e.contains("declined") || !e["declined"].is_string()) throw std::runtime_error("'declined' must be a file name");
        en.declined = e["declined"].get<std::string>();
        // The run id in both names is what keeps another export's outputs from being judged for this one.
        if (en.output != output_name(en.id, run) || en.declined != declined_name(en.id, run))
          throw std::runtime_error(fmt::format("output/declined must be {} and {} (the id and the run id)",
                                               output_name(en.id, run), declined_name(en.id, run)));
      }
      if (version >= 5) read_v3_entry(e, en, run);
      if (version >= 4 && e.contains("property")) {
        const json& p = e["property"];
        const props::PropertyDef* def =
            p.is_object() && p.contains("id") && p["id"].is_string() ? props::find_property(p["id"].get<std::string>())
                                                                      : nullptr;
        if (!def || !def->exportable) throw std::runtime_error("'property.id' must name an exportable property");
        if (en.check != def->row) throw std::runtime_error(fmt::format("a case of property {} is in row '{}'", def->id, def->row));
        en.property = def->id;
        const auto l = p.contains("layout") && p["layout"].is_string() ? parse_layout(p["layout"].get<std::string>())
                                                                        : std::nullopt;
        if (!l) throw std::runtime_error("'property.layout' must be interleaved or half-split");
        en.property_layout = *l;
        for (const char* f : {"case", "call"})
          if (!p.contains(f) || !p[f].is_number_unsigned() || p[f].get<uint64_t>() > (uint64_t(1) << 40))
            throw std::runtime_error(fmt::format("'property.{}' must be a non-negative integer", f));
        en.property_case = p["case"].get<uint64_t>();
        en.property_call = p["call"].get<uint64_t>();
      } else if (version >= 4 && en.check.rfind("property: ", 0) == 0) {
        throw std::runtime_error("a case of row '" + en.check + "' names its property");
      }
    } catch (const std::exception& ex) {
      problems.push_back(fmt::format("{}: cases[{}]: {}", mpath, k, ex.what()));
      en.check.clear();  // not judged
    }
  }
  m["cases"] = json();  // read into entries: the document's largest part is not needed any more
  // What the export says of its cases: the features they may use (property calls outside them were not made),
  // what the program implements (each such feature with cases must have an accepted one), the model's case
  // template (a model's export must have an accepted case in its configuration; an export without the template,
  // from an earlier release, has its model's cases in the rows that take the model: every one but the
  // properties').
  std::optional<FeatureSet> export_features, supports;
  std::optional<RopeCase> model_case;
  bool model_by_rows = false;
  if (m.contains("export") && m["export"].is_object()) {
    const json& ex = m["export"];
    try {
      if (ex.contains("features")) export_features = features_from_json(ex["features"], "export.features");
      if (ex.contains("supports")) supports = features_from_json(ex["supports"], "export.supports");
      if (ex.contains("model_case")) {
        RopeCase t;
        case_params_from_json(ex["model_case"], t);
        model_case = std::move(t);
        res.model_name = ex.contains("model") && ex["model"].is_string() ? ex["model"].get<std::string>() : "model";
      } else if (ex.contains("model") && ex["model"].is_string()) {
        model_by_rows = true;
        res.model_name = ex["model"].get<std::string>();
      }
    } catch (const std::exception& e) {
      problems.push_back(mpath + ": " + e.what());
    }
  }
  // One call (a case with its output or decline marker) in the coverage.
  auto cover = [&](const RopeCase& c, bool in_place, bool declined, bool property) {
    res.coverage.add(c, in_place, !declined, model_case ? &*model_case : nullptr);
    if (model_by_rows && !property) {
      ++res.coverage.model_sent;
      res.coverage.model_accepted += !declined;
    }
  };
  // How the engine made the property cases (version 4): read before any file.
  uint64_t property_seed = 0, property_cases = 0;
  int64_t max_position = int64_t(1) << 24;
  const bool has_properties =
      std::any_of(entries.begin(), entries.end(), [](const Entry& en) { return !en.property.empty(); });
  if (has_properties) {
    const json* ex = m.contains("export") && m["export"].is_object() ? &m["export"] : nullptr;
    auto num = [&](const char* f) -> uint64_t {
      if (!ex || !ex->contains(f) || !(*ex)[f].is_number_unsigned())
        fail(fmt::format("field 'export.{}' must be a non-negative integer (the property cases need it)", f));
      return (*ex)[f].get<uint64_t>();
    };
    property_seed = num("seed");
    property_cases = num("property_cases");
    max_position = int64_t(std::min<uint64_t>(num("max_position"), uint64_t(1) << 62));
    if (property_cases == 0 || property_cases > kMaxPropertyCases || max_position < 1)
      fail("fields 'export.property_cases' and 'export.max_position' must be positive");
  }
  // Outputs written for another export, by case id: looked for only when an output is missing.
  std::optional<std::map<std::string, std::vector<std::string>>> stale;
  size_t stale_named = 0;
  std::map<size_t, Kept> kept;  // the property calls' files, by entry
  std::vector<Dtype> dtypes_seen;
  for (size_t k = 0; k < entries.size(); ++k) {
    const Entry& en = entries[k];
    if (en.check.empty()) continue;
    RopeCase c = en.c;
    const std::string where = fmt::format("cases[{}]", k);
    const std::string ip = (fs::path(dir) / en.input).string(), op = (fs::path(dir) / en.output).string();
    // Each file: a regular file; its header checked against the case and its size against its header before
    // any data is read (a huge or sparse file costs nothing); at most kMaxCaseFileBytes of data.
    auto read_checked = [&](const std::string& path) -> std::optional<NpyArray> {
      try {
        return npy_read(path, [&](const NpyArray& h) { check_array(h, c, path); }, kMaxCaseFileBytes);
      } catch (const std::exception& ex) {
        problems.push_back(ex.what());
        return std::nullopt;
      }
    };
    // Version 5, the tensor form: q's (and k's) buffers, flat, each element at its place under the tensor's
    // strides (entry "tensors"): read, then gathered into the case's compact [T][H][D].
    auto read_buffer = [&](const std::string& name, const RopeCase& of, const TensorLayout& l) -> std::optional<Bytes> {
      const std::string path = (fs::path(dir) / name).string();
      try {
        const NpyArray a = npy_read(
            path,
            [&](const NpyArray& h) {
              if (h.descr != descr_of(of.dtype))
                throw std::runtime_error(fmt::format("{}: element type '{}', the case's dtype {} needs '{}'", path,
                                                     h.descr, to_string(of.dtype), descr_of(of.dtype)));
              if (h.shape != std::vector<uint64_t>{l.span})
                throw std::runtime_error(fmt::format("{}: shape ({}), the case's tensor needs ({},): its buffer, {} "
                                                     "elements (\"tensors\": shape, strides)",
                                                     path, fmt::join(h.shape, ", "), l.span, l.span));
            },
            kMaxCaseFileBytes);
        return gather_heads(of, l, a.data.data());
      } catch (const std::exception& ex) {
        problems.push_back(ex.what());
        return std::nullopt;
      }
    };
    // (A tensor-form case in a manifest before version 5 -- none was ever exported -- is read as it was: compact.)
    const bool v3_files = version >= 5 && c.tensor;
    const bool v3_judge = version >= 5 && c.uses_v3();
    std::optional<NpyArray> in;
    if (v3_files) {
      if (auto q = read_buffer(en.input, c, c.tensor_layout(0))) in = NpyArray{descr_of(c.dtype), {}, std::move(*q)};
      if (in && c.tensor->k_heads) {
        if (auto kin = read_buffer(en.k_input, c.k_case(), c.tensor_layout(2))) c.tensor->k_input = std::move(*kin);
        else in.reset();
      }
    } else {
      in = read_checked(ip);
    }
    if (in) {
      c.input = in->data;
      if (std::string why = c.validate_for_kernel(); !why.empty())
        problems.push_back(mpath + ": " + where + ": malformed case: " + why);
    }
    // An output, or (version 3) a decline marker instead: exactly one of them.
    std::error_code ec;
    const fs::file_status ost = fs::symlink_status(op, ec);
    bool declined = false;
    if (!en.declined.empty()) {
      const std::string dp = (fs::path(dir) / en.declined).string();
      const fs::file_status dst = fs::symlink_status(dp, ec);
      if (fs::exists(dst) && fs::exists(ost)) {
        problems.push_back(fmt::format("{}: both {} and {}: a case has an output or a decline marker, never both (a "
                                       "program run again over the directory removes the one it does not write)",
                                       (fs::path(dir) / en.id).string(), en.output, en.declined));
        continue;
      }
      if (fs::exists(dst)) {
        if (!fs::is_regular_file(dst)) {
          problems.push_back(dp + ": " + (fs::is_symlink(dst) ? "a symbolic link" : fs::is_fifo(dst) ? "a FIFO"
                                                                  : fs::is_directory(dst) ? "a directory"
                                                                                          : "not a regular file") +
                             ", not a regular file (refused)");
          continue;
        }
        declined = true;
      }
    }
    if (!declined && !fs::exists(ost)) {
      std::string msg = op + ": missing (the external program writes one output per case";
      msg += en.declined.empty() ? ")" : ", or " + en.declined + " to decline it)";
      if (!stale) stale = other_exports_files(dir, run);
      if (auto it = stale->find(en.id); it != stale->end()) {
        msg += "; another export's, not judged:";
        for (const std::string& s : it->second) msg += " " + s + " (" + run_of(s) + ")";
        stale_named += it->second.size();
      }
      problems.push_back(msg);
      continue;
    }
    std::optional<NpyArray> out_file;
    Bytes k_out;
    if (!declined && v3_files) {
      if (auto q = read_buffer(en.output, c, c.tensor_layout(en.in_place ? 0 : 1)))
        out_file = NpyArray{descr_of(c.dtype), {}, std::move(*q)};
      if (out_file && c.tensor->k_heads) {
        if (auto ko = read_buffer(en.k_output, c.k_case(), c.tensor_layout(en.in_place ? 2 : 3))) k_out = std::move(*ko);
        else out_file.reset();
      }
    } else if (!declined) {
      out_file = read_checked(op);
    }
    // The table the program built (`--tables program`): the case's, from here on; the case as exported (its angle
    // fields, no table) is what the table is judged against (the table fidelity row).
    std::optional<RopeCase> table_angles;
    if (!declined && out_file && en.program_table) {
      try {
        table_angles = c;
        c.table = read_program_table(dir, en, c);
        if (c.table->kind != TableKind::angle) c.attention_factor = 1.0;  // (in the values: kernel_abi.h)
        if (std::string why = c.validate(); !why.empty())
          throw std::runtime_error(fmt::format("{}: the program's table: {}", (fs::path(dir) / en.table_files[0]).string(), why));
      } catch (const std::exception& ex) {
        problems.push_back(ex.what());
        continue;
      }
    }
    // A property's call is judged by its property, below, with the other calls of its execution.
    if (!en.property.empty()) {
      if (in && (declined || out_file))
        kept[k] = Kept{c, en.in_place, declined, declined ? Bytes{} : out_file->data, en.id, std::move(k_out)};
      continue;
    }
    if (!problems.empty()) continue;
    CheckRow& r = row(en.check);
    ++res.calls;
    cover(c, en.in_place, declined, false);
    if (declined) {
      ++r.declined;
      continue;
    }
    const NpyArray& out = *out_file;
    const Criteria cr = external_criteria(c, model, contract, tolerance);
    ReferenceOptions ro;
    ro.angle_model = model;
    const ReferenceOutput ref = reference_rope(c, ro);
    JudgeOptions jo;
    jo.max_findings = 4;
    jo.keep_values = false;
    // An ABI v3 case is judged as the gate judges the call (judge_call: q, and k as a case of its own).
    CallResult call;
    call.out = out.data;
    call.k_out = k_out;
    const CaseVerdict v3 = v3_judge ? judge_call(c, en.in_place, model, cr, call, &ref) : CaseVerdict{};
    const Judgement j = v3_judge ? v3.judgement : judge_output(c, ref, out.data.data(), cr, jo);
    const bool case_ok = v3_judge ? v3.pass : j.ok();
    if (std::find(dtypes_seen.begin(), dtypes_seen.end(), c.dtype) == dtypes_seen.end()) dtypes_seen.push_back(c.dtype);
    ++r.cases;
    r.ran = true;
    ++res.accepted;
    res.add(r, c, j, bias);
    if (!case_ok) {
      CaseRecord rec;
      rec.c = c;
      rec.in_place = en.in_place;
      rec.angle_model = model;
      rec.bound = cr.case_bound(c);
      rec.check = en.check;
      rec.failure = "case " + en.id + " (" + en.output + "):\n" + (v3_judge ? v3.message : j.report(2));
      rec.contract = contract;
      rec.tolerance = cr.flat;
      ++r.failed;
      ++r.faults["accuracy"];
      r.failed_check = true;
      if (!r.smallest || c.n_elements() < r.smallest->c.n_elements()) {
        rec.diagnosis = v3_judge ? diagnose_call(c, model, cr, v3, call)
                                    : diagnose(c, out.data.data(), ref, cr, model).text();
        r.diagnosis = rec.diagnosis;
        r.smallest_message = rec.failure;
        r.smallest = std::move(rec);
      }
    }
    // The table the program built, judged itself against the exact angles of the case under the contract's
    // angle and cos-sin clauses (properties/table_fidelity.hpp): the row above judged the program's arithmetic on
    // it, this one the table.
    if (table_angles) {
      CheckRow& f = row("table fidelity");
      f.what = "the tables the program built (--tables program), each entry against the exact angles under the "
               "contract's angle and cos-sin clauses (the kernel's arithmetic on them: its v3 row)";
      const TableJudgement tj = judge_table(*table_angles, *c.table, KernelErrorModel::for_contract(contract));
      ++f.cases;
      f.ran = true;
      if (!tj.ok()) {
        CaseRecord rec;
        rec.c = c;
        rec.in_place = en.in_place;
        rec.angle_model = model;
        rec.check = f.name;
        rec.contract = contract;
        rec.failure = "case " + en.id + " (" + en.table_files[0] + "):\n" + tj.report();
        rec.diagnosis = "the table: " + tj.cause;
        ++f.failed;
        ++f.faults["table"];
        f.failed_check = true;
        if (!f.smallest || c.n_elements() < f.smallest->c.n_elements()) {
          f.diagnosis = rec.diagnosis;
          f.smallest_message = rec.failure;
          f.smallest = std::move(rec);
        }
      }
    }
  }
  // The properties: each exported execution run again by the engine over the program's outputs.
  struct Group {
    const props::PropertyDef* def;
    Dtype d;
    Layout l;
    uint64_t index;
    std::vector<const Kept*> calls;
  };
  std::map<std::tuple<std::string, int, int, uint64_t>, Group> groups;
  if (problems.empty()) {
    std::map<std::tuple<std::string, int, int, uint64_t>, std::vector<std::pair<uint64_t, size_t>>> order;
    for (size_t k = 0; k < entries.size(); ++k) {
      const Entry& en = entries[k];
      if (en.property.empty()) continue;
      order[{en.property, int(en.c.dtype), int(en.property_layout), en.property_case}].push_back({en.property_call, k});
    }
    for (auto& [key, calls] : order) {
      std::sort(calls.begin(), calls.end());
      Group g{props::find_property(std::get<0>(key)), Dtype(std::get<1>(key)), Layout(std::get<2>(key)),
              std::get<3>(key), {}};
      for (size_t j = 0; j < calls.size(); ++j) {
        if (calls[j].first != j)
          problems.push_back(fmt::format("{}: property {} case {}: calls numbered {} where {} is due", mpath,
                                         g.def->id, g.index, calls[j].first, j));
        g.calls.push_back(&kept[calls[j].second]);
      }
      groups.emplace(key, std::move(g));
    }
  }
  // The property rows in the gate's order; with a version-4 export, every property of the suite has its row:
  // those an external program cannot serve say why (the gate runs them on a loadable build).
  for (const props::PropertyDef& p : props::property_set()) {
    if (std::any_of(groups.begin(), groups.end(), [&](const auto& kv) { return kv.second.def == &p; })) {
      row(p.row);
    } else if (version >= 4 && p.exportable && export_features) {
      row(p.row).note = "not exported: its executions' calls use features outside the export's (export.features: " +
                        export_features->text() + ")";
    } else if (version >= 4 && !p.exportable) {
      row(p.row).note = std::string("not exported: ") +
                        (std::string_view(p.id) == "composition"
                             ? "its second call's input is the first call's output (one export cannot hold it)"
                             : "it reads the input buffer after the call, which an external program does not show") +
                        "; the gate runs it on a loadable build";
    }
  }
  std::vector<std::pair<std::string, CaseRecord>> property_failures;  // by row name (rows may move)
  for (auto& [key, g] : groups) {
    if (!problems.empty()) break;
    CheckRow& r = row(g.def->row);
    if (g.def->exact_angles && model != AngleModel::exact) {
      r.note = "skipped: the fp32 angle model's angles are not shift-invariant";
      continue;
    }
    PlaybackHandle h(g.calls, model, contract, tolerance, export_features);
    const auto result = props::replay_execution(*g.def, h, g.d, g.l, props::Scope{max_position}, property_seed,
                                                g.index, {}, property_cases);
    // A passing execution makes every exported call; a failing or discarded one may stop early.
    if (h.mismatch.empty() && result.type == rc::detail::CaseResult::Type::Success && h.used() != g.calls.size())
      h.mismatch = fmt::format("the property made {} of the {} exported call(s)", h.used(), g.calls.size());
    if (!h.mismatch.empty()) {
      problems.push_back(fmt::format("{}: property {} ({} {}) case {}: {}", mpath, g.def->id, to_string(g.d),
                                     to_string(g.l), g.index, h.mismatch));
      continue;
    }
    // Calls and accepted calls: every exported call and those with an output (as the matrix rows count).
    res.calls += g.calls.size();
    for (const Kept* k : g.calls) cover(k->c, k->in_place, k->declined, true);
    res.accepted += std::count_if(g.calls.begin(), g.calls.end(), [](const Kept* k) { return !k->declined; });
    if (std::find(dtypes_seen.begin(), dtypes_seen.end(), g.d) == dtypes_seen.end()) dtypes_seen.push_back(g.d);
    if (result.type == rc::detail::CaseResult::Type::Discard) {
      ++r.declined;
      continue;
    }
    ++r.cases;
    r.ran = true;
    if (result.type != rc::detail::CaseResult::Type::Failure) continue;
    CaseRecord rec;
    rec.c = g.calls.front()->c;
    rec.in_place = g.calls.front()->in_place;
    rec.angle_model = model;
    rec.check = r.name;
    rec.contract = contract;
    const Criteria cr0 = external_criteria(rec.c, model, contract, tolerance);
    rec.bound = cr0.case_bound(rec.c);
    rec.tolerance = cr0.flat;
    std::string ids;
    for (const Kept* k : g.calls) ids += (ids.empty() ? "" : ", ") + k->id;
    rec.failure = fmt::format("cases {} (property {}, {} {}, case {}):\n{}", ids, g.def->id, to_string(g.d),
                              to_string(g.l), g.index, result.description);
    rec.property = g.def->id;
    rec.property_layout = g.l;
    rec.property_seed = property_seed;
    rec.property_case = g.index;
    rec.property_cases = property_cases;
    rec.property_max_position = max_position;
    // The cause: the first call that fails alone against the reference, diagnosed.
    rec.diagnosis = fmt::format("property {} violated (each of its {} call(s) alone is within its allowance)",
                                g.def->id, g.calls.size());
    for (const Kept* k : g.calls) {
      if (k->declined) continue;
      const Criteria cr = external_criteria(k->c, model, contract, tolerance);
      const ReferenceOutput ref = reference_rope(k->c, ReferenceOptions{model});
      if (judge_output(k->c, ref, k->out.data(), cr).ok()) continue;
      rec.diagnosis = diagnose(k->c, k->out.data(), ref, cr, model).text();
      break;
    }
    property_failures.push_back({r.name, std::move(rec)});
  }
  if (!problems.empty()) {
    std::string msg = fmt::format("{} problem(s) with the case set in {} (nothing judged):", problems.size(), dir);
    if (stale_named)
      msg += fmt::format("\n  {} file(s) named below were written for another export of {}, not for this manifest's "
                         "(run {}, exported with {}): an earlier export's outputs are never judged; run the external "
                         "program on this export",
                         stale_named, dir, run.empty() ? "-" : run, m.contains("export") ? m["export"].dump() : "-");
    for (const auto& s : problems) msg += "\n  " + s;
    throw std::runtime_error(msg);
  }
  for (auto& [name, rec] : property_failures) {
    CheckRow& r = row(name);
    ++r.failed;
    ++r.faults["property"];
    r.failed_check = true;
    if (!r.smallest || rec.c.n_elements() < r.smallest->c.n_elements()) {
      r.diagnosis = rec.diagnosis;
      r.smallest_message = rec.failure;
      r.smallest = std::move(rec);
    }
  }
  if (version <= 3)
    for (auto& r : res.rows)
      if (r.name.rfind("property: ", 0) == 0 && r.note.empty())
        r.note = "a version-3 export: its property cases are judged one by one; export again for the properties";
  for (auto& r : res.rows)
    if (!r.ran && r.declined && r.note.empty()) r.note = "every case declined (decline markers)";
  // Coverage, as the gate's: a check that judged nothing is not a pass; a row all declined is not a failure as
  // long as something was accepted.
  // The requirements (docs/gate.md, "Coverage"): `check --require`, the export's --supports, a model's
  // configuration.
  if (res.accepted == 0 || !require.empty() || supports || model_case || model_by_rows)
    row("coverage");  // in its place in the table, before the bias rows
  judge_coverage(res, supports, require, model_case || model_by_rows,
                 fmt::format("the external program declined every case ({} decline markers): a check that judged "
                             "nothing is not a pass",
                             res.calls),
                 "coverage: every case declined");
  // A coverage row met without requirements given is not shown (as before there were any).
  std::erase_if(res.rows, [](const CheckRow& r) { return r.name == "coverage" && !r.ran && !r.failed_check; });
  for (const auto& [d, b] : bias) {
    RopeCase probe;
    probe.dtype = d;
    if (b.n) res.rows.push_back(bias_row(d, b, external_criteria(probe, model, contract, tolerance).model));
  }
  {
    // (quoted at the export's largest position, as the gate quotes its own)
    res.bounds = describe_bounds(loaded_kernel_error_model(model), contract, dtypes_seen, max_position);
  }
  res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  res.pass = res.accepted > 0;
  for (const auto& r : res.rows) res.pass &= !r.failed_check;
  // (each distinct diagnosis once, as many as fit on the verdict line: fit_verdict_reason)
  std::vector<std::string> parts = {res.pass ? "every check passed under the contract" : "at least one check failed"};
  if (!res.pass)
    for (const auto& r : res.rows)
      if (r.failed_check && !r.diagnosis.empty() &&
          std::find(res.causes.begin(), res.causes.end(), r.diagnosis) == res.causes.end())
        res.causes.push_back(r.diagnosis);
  parts.insert(parts.end(), res.causes.begin(), res.causes.end());
  res.verdict_reason = fit_verdict_reason(parts, "diagnosis(es), each on its FAILED line");
  return res;
}

}  // namespace ropecheck::gate
