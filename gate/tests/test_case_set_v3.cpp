// `cases export/check` with ABI v3 cases (manifest version 5, docs/gate.md "ABI v3 cases"): the gate's v3
// rows exported only on opt-in (--supports naming a v3 feature), run by a program that reads the tables, strided
// buffers, k and positions from the files (v3_runner.hpp), and judged as the gate judges them; planted bugs fail
// their rows with their causes; tables the program builds (`--tables program`) judged twice: the program's
// arithmetic on its table (the v3 row) and the table itself (the table fidelity row).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/features.hpp"
#include "support.hpp"
#include "v3_runner.hpp"

using namespace ropecheck;
namespace fs = std::filesystem;

namespace {

using test::run_cli;
using test::slurp;

// Every feature name: a program that implements everything (each v3 row's cases are all exported).
std::string all_features() {
  std::string s;
  for (const auto& f : ropecheck::all_features()) s += (s.empty() ? "" : ",") + std::string(f.name);
  return s;
}

using test::row_cells;

const std::vector<std::string> kV3Rows = {"v3: inverse", "v3: tables", "v3: strides", "v3: q and k", "v3: sequences",
                                          "v3: int32 positions"};
const char* const kV3Properties[] = {"property: adjoint", "property: strides", "property: q and k",
                                     "property: sequences", "property: int32 positions", "property: same call twice"};

// Exports D/set (f32 and bf16, both layouts, every feature, few property and random cases) with `extra`.
void export_v3(const std::string& d, const std::string& extra = "") {
  ASSERT_EQ(run_cli("cases export --dir " + d + "/set --dtype f32,bf16 --random-cases 2 --property-cases 2 --supports " +
                        all_features() + " " + extra,
                    d + "/export.log"),
            0)
      << slurp(d + "/export.log");
}

int check(const std::string& d, std::string& log, const std::string& extra = "") {
  const int rc = run_cli("cases check --dir " + d + "/set " + extra, d + "/check.log");
  log = slurp(d + "/check.log");
  return rc;
}

}  // namespace

// The default export, and an export whose --supports names no v3 feature, write version 4 and no v3 field: what
// a program written against version 4 reads is unchanged.
TEST(CaseSetV3, WithoutAV3FeatureTheExportIsVersion4) {
  const std::string d = test::tmpdir("casesetv3-v4");
  for (const std::string args : {"", "--supports f32,bf16,interleaved,half-split,in-place,attention-factor"}) {
    ASSERT_EQ(run_cli("cases export --dir " + d + "/set --random-cases 2 " + args, d + "/export.log"), 0)
        << slurp(d + "/export.log");
    const auto m = test::read_manifest(d + "/set");
    EXPECT_EQ(m["version"], 4) << args;
    for (const auto& e : m["cases"]) {
      for (const char* f : {"direction", "table", "tensors"}) EXPECT_FALSE(e.contains(f)) << args << " " << e["id"];
      EXPECT_NE(e["check"].get<std::string>().rfind("v3: ", 0), 0u) << args;
    }
    fs::remove_all(d + "/set");
  }
}

// The gate's v3 rows exported (version 5), run by a program from the files, judged as the gate judges them:
// every v3 row passes with its cases, k's outputs read, and --require takes the v3 features.
TEST(CaseSetV3, V3CasesRunFromTheFilesPassInTheGatesRows) {
  const std::string d = test::tmpdir("casesetv3-pass");
  export_v3(d);
  const auto m = test::read_manifest(d + "/set");
  EXPECT_EQ(m["version"], 5);
  std::map<std::string, size_t> per_row;
  size_t strided = 0, with_k = 0, implicit = 0, int32 = 0, inverse = 0, kinds[5] = {};
  for (const auto& e : m["cases"]) {
    const std::string row = e["check"];
    if (row.rfind("v3: ", 0) == 0) ++per_row[row];
    if (e.contains("table")) ++kinds[int(*test::v3run::kind_named(e["table"]["table_kind"].get<std::string>()))];
    if (e.value("direction", "forward") == "inverse") ++inverse;
    if (!e.contains("tensors")) continue;
    const auto& ts = e["tensors"];
    // q's buffer is its span; its strides wider than compact where the case pads them.
    const gate::NpyArray q = gate::npy_read(d + "/set/" + e["input"].get<std::string>());
    ASSERT_EQ(q.shape, std::vector<uint64_t>{ts["q"]["span"].get<uint64_t>()}) << e["id"];
    const auto shape = ts["q"]["shape"].get<std::vector<int64_t>>();
    const auto strides = ts["q"]["strides"].get<std::vector<int64_t>>();
    int64_t compact = 1;
    bool padded = false;
    for (size_t k = shape.size(); k-- > 0;) {
      padded |= strides[k] != compact;
      compact *= shape[k];
    }
    strided += padded;
    with_k += ts.contains("k");
    implicit += !ts.contains("pos");
    int32 += ts.contains("pos") && ts["pos"]["dtype"] == "int32";
  }
  for (const std::string& r : kV3Rows) EXPECT_GT(per_row[r], 0u) << r;
  EXPECT_GT(strided, 0u);
  EXPECT_GT(with_k, 0u);
  EXPECT_GT(implicit, 0u);
  EXPECT_GT(int32, 0u);
  EXPECT_GT(inverse, 0u);
  for (int k = 1; k <= 4; ++k) EXPECT_GT(kinds[k], 0u) << "table kind " << k;
  test::write_outputs_v3(d + "/set");
  std::string log;
  EXPECT_EQ(check(d, log, "--require inverse,table-cos-sin-2,table-cos-sin-cat,table-cos-sin-full,table-angle,"
                          "tensor-form,strides,q-and-k,batched,varlen,implicit-positions,int32-positions"),
            0)
      << log;
  for (const std::string& r : kV3Rows) {
    const auto cells = row_cells(log, r);
    ASSERT_GE(cells.size(), 9u) << r << "\n" << log;
    EXPECT_EQ(cells[1], std::to_string(per_row[r])) << r;
    EXPECT_EQ(cells[2], "0") << r;
    EXPECT_EQ(cells[7], "pass") << r;
  }
  EXPECT_TRUE(row_cells(log, "table fidelity").empty()) << log;  // the export's tables: no row of their own
  // The v3 properties too (all but the inverse, whose second input is the first's output), each execution's calls
  // from the files.
  for (const char* r : kV3Properties) {
    const auto cells = row_cells(log, r);
    ASSERT_GE(cells.size(), 9u) << r << "\n" << log;
    EXPECT_NE(cells[1], "0") << r;
    EXPECT_EQ(cells[7], "pass") << r;
  }
}

// A kernel that reads a given table's row at the token's index: the tables row fails, named.
TEST(CaseSetV3, TableRowIndexedByTokenFailsTheTablesRow) {
  const std::string d = test::tmpdir("casesetv3-row");
  export_v3(d);
  test::Bugs b;
  b.row_by_token = true;
  test::write_outputs_v3(d + "/set", b);
  std::string log;
  EXPECT_EQ(check(d, log), 1) << log;
  const auto cells = row_cells(log, "v3: tables");
  ASSERT_GE(cells.size(), 9u) << log;
  EXPECT_EQ(cells[7].rfind("FAIL", 0), 0u) << log;
  EXPECT_NE(log.find("table row indexed by token"), std::string::npos) << log;
  for (const char* r : {"v3: inverse", "v3: strides", "v3: q and k"}) EXPECT_EQ(row_cells(log, r).at(7), "pass") << r;
}

// A kernel that views k with q's strides: the q-and-k row fails, the cause k's.
TEST(CaseSetV3, KViewedWithQsStridesFailsTheQAndKRow) {
  const std::string d = test::tmpdir("casesetv3-kstrides");
  export_v3(d);
  test::Bugs b;
  b.k_strides_from_q = true;
  test::write_outputs_v3(d + "/set", b);
  std::string log;
  EXPECT_EQ(check(d, log), 1) << log;
  const auto cells = row_cells(log, "v3: q and k");
  ASSERT_GE(cells.size(), 9u) << log;
  EXPECT_EQ(cells[7].rfind("FAIL", 0), 0u) << log;
  // (the stride hypotheses: k's heads read and written at q's offsets, those past k's end left as they were)
  EXPECT_EQ(cells[8].rfind("k: diagnosis: k laid out with q's strides (every pair within", 0), 0u) << cells[8];
  for (const char* r : {"v3: inverse", "v3: tables", "v3: strides"}) EXPECT_EQ(row_cells(log, r).at(7), "pass") << r;
  // and the exported properties that give k a stride of its own see it
  for (const char* r : {"property: strides", "property: q and k"})
    EXPECT_EQ(row_cells(log, r).at(7).rfind("FAIL", 0), 0u) << r << "\n" << log;
  EXPECT_EQ(row_cells(log, "property: sequences").at(7), "pass") << log;
}

// Tables the program builds: its arithmetic judged on its table (the tables row), the table judged against the
// exact angles (the table fidelity row). A correct f32 table passes both; a bf16 table passes both under a
// contract that allows cos-sin=bf16; a bf16 table from f16 angles, from a wrong base, or with sin negated fails
// the table fidelity row only.
TEST(CaseSetV3, ProgramTablesAreJudgedApartFromTheArithmetic) {
  const std::string d = test::tmpdir("casesetv3-program");
  export_v3(d, "--tables program");
  const auto m = test::read_manifest(d + "/set");
  EXPECT_EQ(m["export"]["tables"], "program");
  size_t program = 0;
  for (const auto& e : m["cases"]) {
    if (!e.contains("table")) continue;
    if (e["table"]["source"] != "program") continue;
    ++program;
    EXPECT_FALSE(e["case"].contains("table")) << e["id"];  // built from the case's angle fields
    EXPECT_FALSE(fs::exists(d + "/set/" + e["table"]["table"].get<std::string>()));
  }
  EXPECT_GT(program, 0u);
  struct Run {
    const char* what;
    test::Bugs bugs;
    const char* contract;
    bool table_ok;
    const char* cause;
  };
  test::Bugs f32, bf16, f16_angles, wrong_base, sin_neg;
  bf16.table_dtype = f16_angles.table_dtype = wrong_base.table_dtype = sin_neg.table_dtype = Dtype::bf16;
  f16_angles.angles_f16 = true;
  wrong_base.base_factor = 0.5;
  sin_neg.sin_negated = true;
  const std::vector<Run> runs = {
      {"f32 table", f32, "", true, ""},
      {"bf16 table, cos-sin=bf16", bf16, "--contract cos-sin=bf16", true, ""},
      {"bf16 table from f16 angles", f16_angles, "--contract cos-sin=bf16", false, "entries beyond"},
      {"bf16 table, base halved", wrong_base, "--contract cos-sin=bf16", false, "entries beyond"},
      {"bf16 table, sin negated", sin_neg, "--contract cos-sin=bf16", false, "sin negated"},
      {"bf16 table, default contract", bf16, "", false, "rounded to bf16"},
  };
  for (const Run& r : runs) {
    SCOPED_TRACE(r.what);
    test::write_outputs_v3(d + "/set", r.bugs);
    std::string log;
    EXPECT_EQ(check(d, log, r.contract), r.table_ok ? 0 : 1) << log;
    const auto fid = row_cells(log, "table fidelity");
    ASSERT_GE(fid.size(), 9u) << log;
    EXPECT_EQ(fid[1], std::to_string(program));
    EXPECT_EQ(fid[7].rfind(r.table_ok ? "pass" : "FAIL", 0), 0u) << log;
    if (!r.table_ok) {
      EXPECT_EQ(fid[8].rfind("the table: ", 0), 0u) << fid[8];
      EXPECT_NE(fid[8].find(r.cause), std::string::npos) << fid[8];
    }
    // The program's arithmetic on its own table is right whatever the table holds.
    EXPECT_EQ(row_cells(log, "v3: tables").at(7), "pass") << log;
  }
}

// A program that builds no table when it should: the check names the missing file (exit 2); --tables program
// without a table feature is refused at export.
TEST(CaseSetV3, ProgramTablesMissingOrNotExportable) {
  const std::string d = test::tmpdir("casesetv3-program-bad");
  export_v3(d, "--tables program");
  test::write_outputs_v3(d + "/set");
  const auto m = test::read_manifest(d + "/set");
  std::string removed;
  for (const auto& e : m["cases"])
    if (e.contains("table") && e["table"]["source"] == "program") {
      removed = e["table"]["table"].get<std::string>();
      break;
    }
  ASSERT_FALSE(removed.empty());
  fs::remove(d + "/set/" + removed);
  std::string log;
  EXPECT_EQ(check(d, log), 2) << log;
  EXPECT_NE(log.find(removed), std::string::npos) << log;
  EXPECT_EQ(run_cli("cases export --dir " + d + "/set2 --tables program --supports f32,interleaved,tensor-form",
                    d + "/export2.log"),
            2);
  EXPECT_NE(slurp(d + "/export2.log").find("--tables program"), std::string::npos) << slurp(d + "/export2.log");
}

// A program that declines every call with k: the q-and-k row is all declined, and the coverage row fails for the
// feature the export's --supports named (as `--require q-and-k` would).
TEST(CaseSetV3, DecliningEveryQAndKCaseFailsCoverage) {
  const std::string d = test::tmpdir("casesetv3-decline-k");
  export_v3(d);
  test::Bugs b;
  b.decline_k = true;
  test::write_outputs_v3(d + "/set", b);
  std::string log;
  EXPECT_EQ(check(d, log), 1) << log;
  const auto qk = row_cells(log, "v3: q and k");
  ASSERT_GE(qk.size(), 9u) << log;
  EXPECT_EQ(qk[1], "0");
  EXPECT_NE(qk[2], "0");
  const auto cov = row_cells(log, "coverage");
  ASSERT_GE(cov.size(), 9u) << log;
  EXPECT_EQ(cov[7].rfind("FAIL", 0), 0u) << log;
  EXPECT_NE(log.find("q-and-k"), std::string::npos) << log;
  EXPECT_EQ(row_cells(log, "v3: strides").at(7), "pass") << log;
  // A declined call of a property: its in-place retry (a kernel that takes in place only) was never exported and
  // is declined too; the execution is declined, not an error (it was: "case N is not the call the property makes").
  const auto pqk = row_cells(log, "property: q and k");
  ASSERT_GE(pqk.size(), 9u) << log;
  EXPECT_NE(pqk[2], "0") << log;
  EXPECT_EQ(pqk[7].rfind("FAIL", 0), std::string::npos) << log;
}

// What check refuses in a version-5 set (exit 2, named): an edited stride, an output that is not its tensor's
// buffer, a missing k output, a full-width table whose two copies of a pair differ.
TEST(CaseSetV3, MalformedV3FilesAreNamed) {
  const std::string d = test::tmpdir("casesetv3-malformed");
  export_v3(d, "--tables program");
  test::write_outputs_v3(d + "/set");
  std::string log;
  ASSERT_EQ(check(d, log), 0) << log;
  const std::string mpath = d + "/set/manifest.json";
  const std::string original = slurp(mpath);
  auto m = nlohmann::json::parse(original);
  auto first = [&](auto&& pred) -> nlohmann::json& {
    for (auto& e : m["cases"])
      if (pred(e)) return e;
    throw std::runtime_error("no such case");
  };
  auto strided = [](const nlohmann::json& e) { return e.contains("tensors") && e["tensors"].contains("k"); };
  // An edited stride: refused, never a misread output.
  {
    auto& e = first(strided);
    e["tensors"]["k"]["strides"][0] = e["tensors"]["k"]["strides"][0].get<int64_t>() + 1;
    std::ofstream(mpath) << m.dump(1);
    EXPECT_EQ(check(d, log), 2) << log;
    EXPECT_NE(log.find("'tensors' must be the case's tensors"), std::string::npos) << log;
    std::ofstream(mpath) << original;
    m = nlohmann::json::parse(original);
  }
  // The q output written compact ([T][H][D]) instead of as q_out's buffer.
  {
    auto& e = first([](const nlohmann::json& e) {
      if (!e.contains("tensors")) return false;
      const auto sh = e["tensors"]["q_out"]["shape"].get<std::vector<int64_t>>();
      int64_t n = 1;
      for (int64_t x : sh) n *= x;
      return e["tensors"]["q_out"]["span"].get<int64_t>() != n;
    });
    const std::string out = d + "/set/" + e["output"].get<std::string>();
    const std::string saved = slurp(out);
    gate::NpyArray a = gate::npy_read(out);
    const auto sh = e["tensors"]["q_out"]["shape"].get<std::vector<int64_t>>();
    a.shape.assign(sh.begin(), sh.end());
    uint64_t n = 1;
    for (uint64_t x : a.shape) n *= x;
    a.data.resize(n * (a.descr == "<f4" ? 4 : 2));
    gate::npy_write(out, a);
    EXPECT_EQ(check(d, log), 2) << log;
    EXPECT_NE(log.find(e["output"].get<std::string>() + ": shape"), std::string::npos) << log;
    std::ofstream(out, std::ios::binary) << saved;
  }
  // k's output missing.
  {
    const std::string ko = first(strided)["tensors"]["k_out"]["file"].get<std::string>();
    const std::string saved = slurp(d + "/set/" + ko);
    fs::remove(d + "/set/" + ko);
    EXPECT_EQ(check(d, log), 2) << log;
    EXPECT_NE(log.find(ko), std::string::npos) << log;
    std::ofstream(d + "/set/" + ko, std::ios::binary) << saved;
  }
  // A full-width table whose two copies of a pair differ.
  {
    auto& e = first([](const nlohmann::json& e) {
      return e.contains("table") && e["table"]["table_kind"] == "cos-sin-full" && e["table"]["source"] == "program";
    });
    const std::string tp = d + "/set/" + e["table"]["table"].get<std::string>();
    gate::NpyArray t = gate::npy_read(tp);
    store_f32(t.descr == "<f4" ? Dtype::f32 : Dtype::bf16, t.data.data(), 0, 0.5f);
    gate::npy_write(tp, t);
    EXPECT_EQ(check(d, log), 2) << log;
    EXPECT_NE(log.find("differ"), std::string::npos) << log;
  }
}
