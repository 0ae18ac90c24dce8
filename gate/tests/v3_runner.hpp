// An external program on the case-set protocol, version 5 (docs/gate.md, "ABI v3 cases"), written in C++
// for the tests: it reads each case as a Python/PyTorch program would -- the scalar fields from "case", q (and
// k) as flat buffers viewed through "tensors" (shape, strides, offset: torch.as_strided), the positions,
// seq_offsets and cu_seqlens tensors, the tables from their .npy files (or builds them itself, `--tables
// program`) -- makes the ABI v3 call of the scalar kernel on exactly that, and writes the outputs (the q_out and
// k_out buffers, flat) or the decline marker. Nothing is taken from the case's JSON that the program is meant to
// read from a file (k's values, the table's values, the tensors' layouts): a file the export writes wrongly
// fails the check.
//
// Planted bugs (Bugs): a table row indexed by the token instead of the position; k viewed with q's strides; a
// table the program builds in bf16 from angles rounded to f16, or from a wrong base, or with sin negated.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/rope_case.hpp"
#include "core/tensor_call.hpp"
#include "gate/case_json.hpp"
#include "gate/npy.hpp"
#include "impls/registry.hpp"

namespace ropecheck::test {

struct Bugs {
  bool row_by_token = false;     // a given table's row read at the token's index, not its position
  bool k_strides_from_q = false;  // k (and k_out) viewed with q's strides
  // A table the program builds (`--tables program`): its dtype, and how its angles go wrong.
  Dtype table_dtype = Dtype::f32;
  bool angles_f16 = false;       // each angle rounded to f16 before cos and sin
  double base_factor = 1.0;      // the base used: the case's times this
  bool sin_negated = false;
  bool decline_k = false;  // declines every call with k (RC_UNSUPPORTED), as a kernel without a k path would
};

namespace v3run {

inline std::string descr_of(Dtype d) { return d == Dtype::f32 ? "<f4" : d == Dtype::f16 ? "<f2" : "<u2"; }
inline Dtype dtype_of_descr(const std::string& s) {
  return s == "<f4" ? Dtype::f32 : s == "<f2" ? Dtype::f16 : Dtype::bf16;
}

// A tensor of the call over a buffer, as torch.as_strided(buffer, shape, strides, offset) views it.
struct View {
  std::vector<int64_t> shape, strides;
};

inline rc_tensor tensor_over(unsigned char* data, rc_dl_dtype dt, View& v, int64_t offset_elems, size_t elem) {
  rc_tensor t{};
  t.data = data;
  t.device = {RC_DL_CPU, 0};
  t.ndim = int32_t(v.shape.size());
  t.dtype = dt;
  t.shape = v.shape.data();
  t.strides = v.strides.empty() ? nullptr : v.strides.data();
  t.byte_offset = uint64_t(offset_elems) * elem;
  return t;
}

// The program's own table for rows 0..rows-1 (row r: position r) of a kind, from the case's angle fields
// (base, position_scale, rotary_dim; attention factor in the cos/sin values), laid out as the ABI lays it out.
inline std::vector<gate::NpyArray> build_table(const RopeCase& c, TableKind kind, size_t rows, const Bugs& b) {
  const uint32_t R = c.rotary_dim, np = R / 2, width = kind == TableKind::cos_sin_2 ? np : R;
  const Dtype td = kind == TableKind::angle ? Dtype::f32 : b.table_dtype;
  const bool two = kind == TableKind::cos_sin_2 || kind == TableKind::cos_sin_full;
  std::vector<gate::NpyArray> t(two ? 2 : 1);
  for (auto& a : t) {
    a.descr = descr_of(td);
    a.shape = {rows, width};
    a.data.assign(rows * width * dtype_size(td), 0);
  }
  const double af = kind == TableKind::angle ? 1.0 : c.attention_factor;
  for (size_t r = 0; r < rows; ++r)
    for (uint32_t i = 0; i < np; ++i) {
      const double theta = std::pow(c.base * b.base_factor, -2.0 * i / R);
      double phi = double(r) * c.position_scale * theta;
      if (b.angles_f16) phi = double(f16_bits_to_f32(f32_to_f16_bits(float(phi))));
      const double cv = af * std::cos(phi), sv = (b.sin_negated ? -af : af) * std::sin(phi);
      const auto [d0, d1] = pair_dims(c.layout, R, i);
      auto put = [&](int n, uint32_t col, double v) { store_f32(td, t[n].data.data(), r * width + col, float(v)); };
      switch (kind) {
        case TableKind::cos_sin_2: put(0, i, cv); put(1, i, sv); break;
        case TableKind::cos_sin_cat: put(0, i, cv); put(0, np + i, sv); break;
        case TableKind::cos_sin_full: put(0, d0, cv); put(0, d1, cv); put(1, d0, sv); put(1, d1, sv); break;
        case TableKind::angle: put(0, d0, phi); put(0, d1, phi); break;
      }
    }
  return t;
}

inline std::optional<TableKind> kind_named(const std::string& s) {
  for (TableKind k : {TableKind::cos_sin_2, TableKind::cos_sin_cat, TableKind::cos_sin_full, TableKind::angle})
    if (to_string(k) == s) return k;
  return std::nullopt;
}

}  // namespace v3run

// Runs every case of an exported directory (any version) with the scalar kernel, as described above.
inline void write_outputs_v3(const std::string& dir, const Bugs& bugs = {}) {
  namespace fs = std::filesystem;
  using namespace v3run;
  std::ifstream mf(dir + "/manifest.json");
  const nlohmann::json m = nlohmann::json::parse(mf);
  for (const auto& e : m["cases"]) {
    const std::string id = e["id"].get<std::string>();
    RopeCase c;
    gate::case_params_from_json(e["case"], c);
    // The program's own reading of the call: the case's scalar fields; everything of ABI v3 from the files.
    c.table.reset();
    c.tensor.reset();
    const bool in_place = e.value("in_place", false);
    const size_t es = dtype_size(c.dtype);
    gate::NpyArray q = gate::npy_read(dir + "/" + e["input"].get<std::string>());
    gate::NpyArray q_out = q, k, k_out;
    if (!in_place) q_out.data.assign(q.data.size(), 0);
    rc_rope_args a = c.args(q.data.data(), in_place ? q.data.data() : q_out.data.data(), 3);
    a.direction = e.value("direction", "forward") == "inverse" ? RC_INVERSE : RC_FORWARD;
    // Positions as the kernel will read them (row_by_token: the token's index).
    std::vector<int64_t> positions = c.positions;
    // The table: the export's files, or the program's own.
    std::vector<gate::NpyArray> tables;
    std::vector<std::vector<int64_t>> table_shapes;
    bool has_table = false;
    if (e.contains("table")) {
      const auto& t = e["table"];
      const TableKind kind = *kind_named(t["table_kind"].get<std::string>());
      a.table_kind = uint32_t(kind);
      a.base = 10000.0;
      a.position_scale = 1.0;
      a.inv_freq = nullptr;
      a.freq_rule = nullptr;
      if (t["source"] == "program") {
        tables = build_table(c, kind, t["rows"].get<size_t>(), bugs);
        for (size_t n = 0; n < tables.size(); ++n)
          gate::npy_write(dir + "/" + t[n == 0 ? "table" : "table2"].get<std::string>(), tables[n]);
      } else {
        tables.push_back(gate::npy_read(dir + "/" + t["table"].get<std::string>()));
        if (t.contains("table2")) tables.push_back(gate::npy_read(dir + "/" + t["table2"].get<std::string>()));
      }
      if (kind != TableKind::angle) a.attention_factor = 1.0;
      for (size_t n = 0; n < tables.size(); ++n) table_shapes.push_back({int64_t(tables[n].shape[0]), int64_t(tables[n].shape[1])});
      for (size_t n = 0; n < tables.size(); ++n) {
        rc_tensor& tt = n == 0 ? a.table : a.table2;
        tt.data = tables[n].data.data();
        tt.device = {RC_DL_CPU, 0};
        tt.ndim = 2;
        tt.dtype = dl_dtype_of(dtype_of_descr(tables[n].descr));
        tt.shape = table_shapes[n].data();
      }
      has_table = true;
    }
    if (has_table && bugs.row_by_token && c.n_pos_axes == 1)
      for (size_t t = 0; t < positions.size(); ++t) positions[t] = int64_t(t);
    a.positions = positions.data();
    // The tensor form.
    View vq, vqo, vk, vko, vpos, vso, vcu;
    gate::NpyArray pos, so, cu;
    if (e.contains("tensors")) {
      const auto& ts = e["tensors"];
      auto view = [&](const nlohmann::json& j) { return View{j["shape"].get<std::vector<int64_t>>(), j["strides"].get<std::vector<int64_t>>()}; };
      vq = view(ts["q"]);
      vqo = view(ts["q_out"]);
      a.in = nullptr;
      a.out = nullptr;
      a.positions = nullptr;
      a.n_tokens = 0;
      a.n_heads = 0;
      const rc_dl_dtype dt = dl_dtype_of(c.dtype);
      a.q = tensor_over(q.data.data(), dt, vq, ts["q"]["offset"].get<int64_t>(), es);
      if (!in_place) {
        q_out.data.assign(ts["q_out"]["span"].get<size_t>() * es, 0);
        q_out.shape = {ts["q_out"]["span"].get<uint64_t>()};
      }
      a.q_out = in_place ? a.q : tensor_over(q_out.data.data(), dt, vqo, ts["q_out"]["offset"].get<int64_t>(), es);
      if (ts.contains("k")) {
        k = gate::npy_read(dir + "/" + ts["k"]["file"].get<std::string>());
        vk = view(ts["k"]);
        vko = view(ts["k_out"]);
        k_out = k;
        if (!in_place) {
          k_out.data.assign(ts["k_out"]["span"].get<size_t>() * es, 0);
          k_out.shape = {ts["k_out"]["span"].get<uint64_t>()};
        }
        if (bugs.k_strides_from_q) {
          vk.strides = vq.strides;
          vko.strides = vqo.strides;
          // (the buffers made large enough for the wrong view: the bug reads and writes the wrong elements, not
          // past the allocation; the files written are the buffers' first span elements, as the export sized them)
          auto span = [](const View& v) {
            int64_t last = 0;
            for (size_t k = 0; k < v.shape.size(); ++k) last += (v.shape[k] - 1) * v.strides[k];
            return size_t(last + 1);
          };
          k.data.resize(std::max(k.data.size(), span(vk) * es));
          k_out.data.resize(std::max(k_out.data.size(), span(vko) * es));
        }
        a.k = tensor_over(k.data.data(), dt, vk, 0, es);
        a.k_out = in_place ? a.k : tensor_over(k_out.data.data(), dt, vko, 0, es);
      }
      auto index = [&](const char* f, gate::NpyArray& arr, View& v) -> rc_tensor {
        if (!ts.contains(f)) return rc_tensor{};
        arr = gate::npy_read(dir + "/" + ts[f]["file"].get<std::string>());
        v.shape.assign(arr.shape.begin(), arr.shape.end());
        const rc_dl_dtype idt{uint8_t(RC_DL_INT), uint8_t(arr.descr == "<i4" ? 32 : 64), 1};
        return tensor_over(arr.data.data(), idt, v, 0, arr.descr == "<i4" ? 4 : 8);
      };
      a.pos = index("pos", pos, vpos);
      if (has_table && bugs.row_by_token && a.pos.data) {
        const size_t el = pos.descr == "<i4" ? 4 : 8;
        const size_t n = pos.data.size() / el;
        for (size_t t = 0; t < n; ++t) store_index(pos.data.data(), t, el, int64_t(t % c.n_tokens()));
      }
      a.seq_offsets = index("seq_offsets", so, vso);
      a.cu_seqlens = index("cu_seqlens", cu, vcu);
    }
    const int rc = bugs.decline_k && a.k.data ? int(RC_UNSUPPORTED) : ropecheck_scalar_rope(&a);
    const std::string out_path = dir + "/" + e["output"].get<std::string>();
    const std::string declined = dir + "/" + e["declined"].get<std::string>();
    if (rc == RC_UNSUPPORTED) {
      fs::remove(out_path);
      std::ofstream{declined};
      continue;
    }
    ASSERT_EQ(rc, RC_OK) << id;
    fs::remove(declined);
    gate::npy_write(out_path, in_place ? q : q_out);
    if (e.contains("tensors") && e["tensors"].contains("k_out")) {
      gate::NpyArray ko = in_place ? k : k_out;
      ko.data.resize(size_t(ko.shape[0]) * es);
      gate::npy_write(dir + "/" + e["tensors"]["k_out"]["file"].get<std::string>(), ko);
    }
  }
}

}  // namespace ropecheck::test
