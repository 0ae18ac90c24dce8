// `cases export` / `cases check` against the gate's rows: the property cases (position 0, layouts, relative)
// exported and judged, in-place cases run in place, declined cases counted per row with the coverage rule.
// The outputs are written by kernels (the planted bugs of tests/kernels/mutants) as an external program would
// (support.hpp: write_outputs); hostile directories, missing and stale outputs: test_inputs.cpp.
#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "impls/plugin_loader.hpp"
#include "properties/engine.hpp"
#include "support.hpp"

using namespace ropecheck;
namespace fs = std::filesystem;

namespace {

using test::mutant;
using test::run_cli;
using test::slurp;

Implementation load(const std::string& stem) {
  PluginLoad pl = load_kernel_plugin(mutant(stem));
  if (!pl.impl) throw std::runtime_error(pl.error);
  return *pl.impl;
}

// The scalar kernel, declining bf16 as a kernel without a bf16 path would.
extern "C" int scalar_declining_bf16(const rc_rope_args* a) {
  if (a->dtype == RC_BF16) return RC_UNSUPPORTED;
  return ropecheck_scalar_rope(a);
}

using test::row_cells;

// Export D/set with ARGS, write its outputs with kernel k, check it; the check's exit status and log.
int export_write_check(const std::string& d, const std::string& args, const Implementation& k, std::string& log) {
  const std::string set = d + "/set";
  EXPECT_EQ(run_cli("cases export --dir " + set + " " + args, d + "/export.log"), 0) << slurp(d + "/export.log");
  test::write_outputs(set, k);
  const int rc = run_cli("cases check --dir " + set, d + "/check.log");
  log = slurp(d + "/check.log");
  return rc;
}

}  // namespace

// The export holds the gate's property cases and its in-place cases; check judges them in the gate's rows.
TEST(CaseSetParity, PropertyAndInPlaceCasesAreExportedAndJudgedInTheGatesRows) {
  const std::string d = test::tmpdir("caseset-rows");
  std::string log;
  EXPECT_EQ(export_write_check(d, "--dtype f32 --random-cases 6", *find_implementation("scalar"), log), 0) << log;
  const auto m = test::read_manifest(d + "/set");
  EXPECT_EQ(m["version"], 4);
  size_t in_place = 0;
  std::map<std::string, size_t> property_calls;
  for (const auto& e : m["cases"]) {
    in_place += e["in_place"].get<bool>();
    if (e.contains("property")) {
      // Each property call names its property, in the property's row.
      const props::PropertyDef* p = props::find_property(e["property"]["id"].get<std::string>());
      ASSERT_NE(p, nullptr) << e.dump();
      EXPECT_EQ(e["check"], p->row);
      EXPECT_TRUE(p->exportable);
      ++property_calls[p->id];
    } else {
      EXPECT_EQ(e["check"].get<std::string>().rfind("property: ", 0), std::string::npos) << e.dump();
    }
  }
  EXPECT_GT(in_place, 32u);  // half the matrix (2 x 16) and more
  // Two calls per layouts execution (interleaved and its half-split twin), 8 executions; composition and
  // input-untouched are not exported (an input taken from an output; an input an external program cannot show).
  EXPECT_EQ(property_calls["layouts"], 16u);
  EXPECT_EQ(property_calls.count("composition"), 0u);
  EXPECT_EQ(property_calls.count("input-untouched"), 0u);
  // Rows, cases, declined, result: f32 in two layouts gives 2 x 8 executions of each property (layouts: 8),
  // and 32 matrix cases per layout.
  const std::vector<std::pair<std::string, std::string>> rows = {
      {"matrix f32 interleaved", "32"}, {"matrix f32 half-split", "32"}, {"special values", "6"},
      {"property: position 0", "16"},   {"property: orthogonality", "16"}, {"property: norm", "16"},
      {"property: layouts", "8"},       {"property: relative", "16"},      {"property: in place", "16"},
      {"property: accuracy", "16"},     {"random", "6"}};
  for (const auto& [name, cases] : rows) {
    const auto cells = row_cells(log, name);
    ASSERT_GE(cells.size(), 9u) << name << "\n" << log;
    EXPECT_EQ(cells[1], cases) << name;
    EXPECT_EQ(cells[2], "0") << name;
    EXPECT_EQ(cells[7], "pass") << name;
  }
  EXPECT_EQ(row_cells(log, "bias f32").at(7), "pass") << log;
  EXPECT_TRUE(row_cells(log, "coverage").empty()) << log;
  // Every property of the suite has its row; those not exported say why.
  for (const props::PropertyDef& p : props::property_set()) {
    const auto cells = row_cells(log, p.row);
    ASSERT_GE(cells.size(), 9u) << p.row << "\n" << log;
    if (!p.exportable) {
      EXPECT_EQ(cells[7], "not run") << p.row;
      EXPECT_NE(log.find(std::string("note: ") + p.row + ": not exported: "), std::string::npos) << log;
    }
  }
}

// Half-split paired as interleaved: the interleaved rows pass, the half-split twins fail the layouts row, as in
// the gate.
TEST(CaseSetParity, LayoutPairingBugFailsThePropertyLayoutsRow) {
  const std::string d = test::tmpdir("caseset-layouts");
  std::string log;
  EXPECT_EQ(export_write_check(d, "--dtype f32 --random-cases 0", load("mut_layout_pairing"), log), 1) << log;
  EXPECT_EQ(row_cells(log, "matrix f32 interleaved").at(7), "pass") << log;
  EXPECT_EQ(row_cells(log, "property: position 0").at(7), "pass") << log;  // angle 0: any pairing is right
  const auto layouts = row_cells(log, "property: layouts");
  ASSERT_GE(layouts.size(), 9u) << log;
  EXPECT_EQ(layouts[1], "8");
  EXPECT_EQ(layouts[7].rfind("FAIL", 0), 0u) << log;
  EXPECT_NE(layouts[8].find("other layout"), std::string::npos) << log;  // the half-split call, diagnosed
  EXPECT_NE(log.find("FAILED property: layouts"), std::string::npos) << log;
  EXPECT_NE(log.find("verdict: FAIL"), std::string::npos) << log;
}

// The in-place cases run in place: a kernel that re-reads its input after writing the output passes every
// out-of-place case and fails in-place ones, named as such.
TEST(CaseSetParity, InPlaceCasesAreRunInPlace) {
  const std::string d = test::tmpdir("caseset-inplace");
  std::string log;
  EXPECT_EQ(export_write_check(d, "--dtype f32 --layout interleaved --random-cases 0", load("mut_inplace_alias"), log), 1)
      << log;
  const auto matrix = row_cells(log, "matrix f32 interleaved");
  ASSERT_GE(matrix.size(), 9u) << log;
  EXPECT_EQ(matrix[7].rfind("FAIL", 0), 0u) << log;
  EXPECT_NE(log.find("smallest failing case: "), std::string::npos) << log;
  // Every failing case row's smallest case is an in-place one (a property's shows its first call, out of place).
  std::istringstream in(log);
  size_t smallest = 0;
  bool property_row = false;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("FAILED ", 0) == 0) property_row = line.rfind("FAILED property: ", 0) == 0;
    if (line.find("smallest failing case: ") != std::string::npos && !property_row) {
      ++smallest;
      EXPECT_NE(line.find(" in-place"), std::string::npos) << line;
    }
  }
  EXPECT_GT(smallest, 0u);
  EXPECT_EQ(row_cells(log, "property: in place").at(7).rfind("FAIL", 0), 0u) << log;
  // The same cases with the in-place flags cleared pass: the flag, not the data, made them fail. (The property
  // calls go: their in-place calls are the property's, which the alias fails.)
  auto m = test::read_manifest(d + "/set");
  nlohmann::json kept = nlohmann::json::array();
  for (auto& e : m["cases"])
    if (!e.contains("property")) kept.push_back(e);
  m["cases"] = kept;
  for (auto& e : m["cases"]) e["in_place"] = false;
  std::ofstream(d + "/set/manifest.json") << m.dump(1);
  test::write_outputs(d + "/set", load("mut_inplace_alias"));
  EXPECT_EQ(run_cli("cases check --dir " + d + "/set", d + "/oop.log"), 0) << slurp(d + "/oop.log");
}

// Declined cases are counted per row; a row of declined cases is reported, not failed, when something was
// accepted; the layouts pairs with a declined side are not judged as pairs, and the row says so.
TEST(CaseSetParity, DeclinedCasesAreCountedPerRow) {
  const std::string d = test::tmpdir("caseset-declines");
  Implementation k = *find_implementation("scalar");
  k.name = "scalar declining bf16";
  k.fn = scalar_declining_bf16;
  std::string log;
  EXPECT_EQ(export_write_check(d, "--dtype f32,bf16 --random-cases 8", k, log), 0) << log;
  for (const char* l : {"interleaved", "half-split"}) {
    const auto bf = row_cells(log, std::string("matrix bf16 ") + l);
    ASSERT_GE(bf.size(), 9u) << log;
    EXPECT_EQ(bf[1], "0");
    EXPECT_EQ(bf[2], "32");
    EXPECT_EQ(bf[7], "not run");
    EXPECT_NE(log.find(std::string("note: matrix bf16 ") + l + ": every case declined"), std::string::npos) << log;
    EXPECT_EQ(row_cells(log, std::string("matrix f32 ") + l).at(2), "0") << log;
  }
  // A property execution with a declined call is declined (discarded), as in the gate.
  const auto pos0 = row_cells(log, "property: position 0");
  EXPECT_EQ(pos0.at(1), "16");
  EXPECT_EQ(pos0.at(2), "16");
  const auto layouts = row_cells(log, "property: layouts");
  EXPECT_EQ(layouts.at(1), "8");
  EXPECT_EQ(layouts.at(2), "8");
  EXPECT_EQ(layouts.at(7), "pass");
  EXPECT_TRUE(row_cells(log, "coverage").empty()) << log;
  EXPECT_TRUE(row_cells(log, "bias bf16").empty()) << log;
  // The header counts every case as a call and the accepted ones apart.
  const auto m = test::read_manifest(d + "/set");
  size_t bf16 = 0;
  for (const auto& e : m["cases"]) bf16 += e["case"]["dtype"] == "bf16";
  EXPECT_NE(log.find(std::to_string(m["cases"].size()) + " calls, " + std::to_string(m["cases"].size() - bf16) +
                     " accepted"),
            std::string::npos)
      << log;
}

// Everything declined: the coverage row fails, as in the gate (a check that judged nothing is not a pass).
TEST(CaseSetParity, EverythingDeclinedFailsCoverage) {
  const std::string d = test::tmpdir("caseset-coverage");
  std::string log;
  EXPECT_EQ(export_write_check(d, "--dtype f16 --random-cases 3", load("mut_declines_all"), log), 1) << log;
  const auto cov = row_cells(log, "coverage");
  ASSERT_GE(cov.size(), 9u) << log;
  EXPECT_EQ(cov[7].rfind("FAIL", 0), 0u) << log;
  EXPECT_NE(log.find("declined every case"), std::string::npos) << log;
  EXPECT_NE(log.find("verdict: FAIL"), std::string::npos) << log;
}

// A property's exported calls must be the calls the property makes (the engine makes them again from the
// export's seed): a changed case, a call number out of place or a call of a property that cannot be exported
// is a malformed case set (exit 2), never judged.
TEST(CaseSetParity, PropertyCasesMustBeThePropertysCalls) {
  const std::string d = test::tmpdir("caseset-shapes");
  std::string log;
  ASSERT_EQ(export_write_check(d, "--dtype f32 --random-cases 0", *find_implementation("scalar"), log), 0) << log;
  const std::string set = d + "/set";
  const nlohmann::json orig = test::read_manifest(set);
  auto edited = [&](auto edit, const std::string& name) {
    nlohmann::json m = orig;
    std::string id;
    for (auto& e : m["cases"])
      if (e.contains("property") && id.empty() && edit(e)) id = e["id"];
    EXPECT_FALSE(id.empty()) << name;
    std::ofstream(set + "/manifest.json") << m.dump(1);
    const int rc = run_cli("cases check --dir " + set, d + "/" + name + ".log");
    return std::make_pair(rc, slurp(d + "/" + name + ".log"));
  };
  // The half-split call of a layouts execution with another base.
  auto [rc1, l1] = edited(
      [](nlohmann::json& e) {
        if (e["property"]["id"] != "layouts" || e["case"]["layout"] != "half-split") return false;
        e["case"]["base"] = "0x1.388p+14";
        return true;
      },
      "base");
  EXPECT_EQ(rc1, 2) << l1;
  EXPECT_NE(l1.find("is not the call the property makes"), std::string::npos) << l1;
  // A relative-invariance call with a position moved.
  auto [rc2, l2] = edited(
      [](nlohmann::json& e) {
        if (e["property"]["id"] != "relative") return false;
        e["case"]["positions"][0] = e["case"]["positions"][0].get<int64_t>() + 1;
        return true;
      },
      "position");
  EXPECT_EQ(rc2, 2) << l2;
  EXPECT_NE(l2.find("property relative (f32 "), std::string::npos) << l2;
  // Call numbers out of place.
  auto [rc3, l3] = edited(
      [](nlohmann::json& e) {
        if (e["property"]["id"] != "layouts") return false;
        e["property"]["call"] = 5;
        return true;
      },
      "call");
  EXPECT_EQ(rc3, 2) << l3;
  EXPECT_NE(l3.find("calls numbered"), std::string::npos) << l3;
  // A property that is not exported (its input is an output).
  auto [rc4, l4] = edited(
      [](nlohmann::json& e) {
        e["property"]["id"] = "composition";
        return true;
      },
      "composition");
  EXPECT_EQ(rc4, 2) << l4;
  EXPECT_NE(l4.find("must name an exportable property"), std::string::npos) << l4;
}

namespace {

// `cases check` writes its report and compares it with a baseline like the gate: the same outputs pass their
// own baseline, a less accurate kernel's outputs (within the contract) fail it.
TEST(CaseSetReport, CheckWritesItsReportAndALessAccurateKernelFailsTheBaseline) {
  const std::string d = test::tmpdir("case-set-report");
  const std::string set = d + "/set";
  ASSERT_EQ(run_cli("cases export --dir " + set + " --dtype f32 --random-cases 40", d + "/export.log"), 0)
      << slurp(d + "/export.log");
  test::write_outputs(set, load("ok_double"));
  ASSERT_EQ(run_cli("cases check --dir " + set + " --report-dir " + d + "/base", d + "/1.log"), 0) << slurp(d + "/1.log");
  ASSERT_TRUE(fs::exists(d + "/base/report.json"));
  EXPECT_NE(slurp(d + "/base/report.json").find("\"cases-check\""), std::string::npos);
  EXPECT_EQ(run_cli("cases check --dir " + set + " --baseline " + d + "/base/report.json", d + "/2.log"), 0)
      << slurp(d + "/2.log");
  test::write_outputs(set, load("ok_fast_f32"));
  EXPECT_EQ(run_cli("cases check --dir " + set, d + "/3.log"), 0) << "within the default contract: " << slurp(d + "/3.log");
  EXPECT_EQ(run_cli("cases check --dir " + set + " --baseline " + d + "/base/report.json", d + "/4.log"), 1);
  EXPECT_NE(slurp(d + "/4.log").find("regression"), std::string::npos) << slurp(d + "/4.log");
}

}  // namespace
