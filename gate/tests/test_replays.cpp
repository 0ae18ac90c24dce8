// Every reproduce command works (docs/gate.md, "replay"): kernels of tests/kernels/mutants/ that fail each kind of
// row -- the matrix, special values, the v2: rows, property rows (one whose failing execution comes after
// declined ones, one that shrinks), sequence, repeat, large, random -- and the faults (crash, out-of-bounds
// write, input modified, in-place aliasing) are gated with a report directory; then every replay file the gate
// wrote is replayed, and every `replay:` command line the verdict printed is run exactly as printed. Each must
// give the gate's verdict for its case: FAIL, with the same finding (a property: the same failing execution's
// message; a call: the same message) and the same cause (the fault, or the diagnosis's cause).
//
// The gates count cases: their budget and call timeout are far beyond what any run needs on a loaded machine.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "gate/case_json.hpp"
#include "support.hpp"

namespace fs = std::filesystem;
using ropecheck::test::mutant;
using ropecheck::test::slurp;
using ropecheck::test::tmpdir;

namespace {

// `sh -c CMD > LOG 2>&1`; the exit status (-1 if signalled). No time limit: the test counts cases (ctest's
// TIMEOUT is the only cap).
int run(const std::string& cmd, const std::string& log) {
  const int st = std::system((cmd + " > " + log + " 2>&1").c_str());
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

const std::string kCli = ROPECHECK_CLI;
// Budgets no run reaches: the verdicts must not depend on the machine's load.
const std::string kUnreachable = " --budget-seconds 3600 --call-timeout 120 --quiet";

struct Gated {
  std::string stem;  // tests/kernels/mutants/<stem>.c
  std::string args;  // what the gate is asked for (dtypes, layouts, cases)
};

// The kernels and their runs. mut_position_off_by_one fails nearly every row (its property failures shrink);
// mut_nan_flushed only special values (gated under a flat --tolerance, which its replays carry);
// mut_attn_factor_twice and mut_yarn_ramp_reversed the v2: rows and the v2 properties; mut_sign_few_shapes
// declines most generated cases, so its property failures lie past --property-cases; the faults' kernels crash,
// write past the output, modify the input, or alias in place.
const std::vector<Gated>& gated() {
  static const std::vector<Gated> g = {
      {"mut_position_off_by_one", "--dtype f32 --cases 100 --property-cases 5"},
      {"mut_nan_flushed", "--dtype f16 --layout half-split --cases 50 --property-cases 5 --tolerance 4"},
      {"mut_attn_factor_twice", "--dtype f32 --layout interleaved --cases 20 --property-cases 3"},
      {"mut_yarn_ramp_reversed", "--dtype bf16 --layout half-split --cases 20 --property-cases 3"},
      {"mut_sign_few_shapes", "--dtype f32 --layout interleaved --cases 50 --property-cases 3"},
      {"mut_crash", "--dtype bf16 --layout interleaved --cases 50 --property-cases 3"},
      {"mut_oob_write", "--dtype f32 --layout half-split --cases 30 --property-cases 3"},
      {"mut_input_modified", "--dtype f16 --layout interleaved --cases 30 --property-cases 3"},
      {"mut_inplace_alias", "--dtype f32 --layout interleaved --cases 30 --property-cases 3"},
  };
  return g;
}

// The replay's own output: without the "recorded: ..." line, which echoes the file.
std::string own_output(const std::string& log) {
  std::istringstream in(log);
  std::string line, out;
  while (std::getline(in, line))
    if (line.rfind("recorded: ", 0) != 0) out += line + "\n";
  return out;
}

// What a replay must say for the gate's cause: a fault's name ("crash", "out-of-bounds write", ...), or the
// diagnosis's cause ("diagnosis: position m+1"). Empty when the record holds none.
std::string expected_cause(const ropecheck::gate::CaseRecord& rec) {
  const std::string& d = rec.diagnosis;
  if (d.rfind("diagnosis: ", 0) == 0) return d.substr(0, std::min(d.find(" ("), d.find(';')));
  const size_t colon = d.find(':');
  return colon == std::string::npos ? d : d.substr(0, colon);
}

}  // namespace

TEST(Replay, EveryReplayFileAndEveryPrintedReplayCommandReproducesTheGatesVerdict) {
  const std::string d = tmpdir("replays");
  std::set<std::string> rows;          // row kinds with a replay file that reproduced
  std::set<std::string> faults;        // faults reproduced
  bool declined_before = false, shrunk = false, in_place = false, flat = false;
  size_t files = 0, commands = 0;
  for (const Gated& g : gated()) {
    SCOPED_TRACE(g.stem);
    const std::string dir = d + "/" + g.stem;
    const std::string kernel = "--kernel " + mutant(g.stem);
    const std::string gate_log = d + "/" + g.stem + ".gate.log";
    ASSERT_EQ(run(kCli + " gate --verbose " + kernel + " " + g.args + kUnreachable + " --report-dir " + dir, gate_log), 1)
        << slurp(gate_log);
    const std::string verdict = slurp(gate_log);
    EXPECT_EQ(verdict.find("the budget"), std::string::npos) << "a gate that counts cases reached its budget:\n"
                                                             << verdict;
    // Every replay file the gate wrote.
    std::vector<std::string> paths;
    for (const auto& e : fs::directory_iterator(dir))
      if (e.path().extension() == ".json" && e.path().filename() != "report.json") paths.push_back(e.path().string());
    std::sort(paths.begin(), paths.end());
    ASSERT_FALSE(paths.empty()) << verdict;
    for (const std::string& p : paths) {
      SCOPED_TRACE(p);
      ropecheck::gate::CaseRecord rec;
      ASSERT_NO_THROW(rec = ropecheck::gate::read_record(p));
      const std::string log = p + ".replay.log";
      const int rc = run(kCli + " replay " + p + " " + kernel + " --call-timeout 120", log);
      const std::string out = slurp(log), own = own_output(out);
      ++files;
      ASSERT_EQ(rc, 1) << "the gate failed this case; its replay must fail too:\n" << out;
      EXPECT_NE(own.find("verdict: FAIL\n"), std::string::npos) << out;
      if (!rec.property.empty()) {
        // The same failing execution: the property's message as the gate recorded it.
        const std::string message = rec.failure.substr(0, rec.failure.find("\n  reproduce: "));
        EXPECT_NE(own.find(message), std::string::npos) << "recorded:\n" << message << "\nreplayed:\n" << out;
        declined_before |= rec.property_case >= rec.property_cases;
        shrunk |= !rec.property_shrink.empty();
      } else {
        // The same finding (its fault's message, or the judgement), and for the row's smallest failing case --
        // the one its diagnosis and its printed replay command are about -- the same cause. (A row's other
        // files carry the row's diagnosis: a row may hold a crash and, in another case, a changed guard byte.)
        EXPECT_NE(own.find(rec.failure), std::string::npos) << "recorded:\n" << rec.failure << "\nreplayed:\n" << out;
        if (p.size() > 14 && p.compare(p.size() - 14, 14, ".smallest.json") == 0) {
          const std::string cause = expected_cause(rec);
          EXPECT_FALSE(cause.empty()) << "no cause recorded";
          EXPECT_NE(own.find(cause), std::string::npos) << "cause '" << cause << "' not reproduced:\n" << out;
          if (rec.diagnosis.rfind("diagnosis: ", 0) != 0) faults.insert(cause);
        }
      }
      in_place |= rec.in_place;
      flat |= rec.tolerance > 0;
      const std::string& check = rec.check;
      rows.insert(check.rfind("matrix ", 0) == 0     ? "matrix"
                  : check.rfind("v2: ", 0) == 0      ? "v2"
                  : check.rfind("property: ", 0) == 0 ? "property"
                                                      : check);
    }
    // Every `replay:` command line the verdict printed, exactly as printed.
    std::istringstream in(verdict);
    std::string line;
    size_t printed = 0;
    while (std::getline(in, line)) {
      const std::string prefix = "  replay: ropecheck replay ";
      if (line.rfind(prefix, 0) != 0) continue;
      ++printed;
      ++commands;
      const std::string log = dir + ".command." + std::to_string(printed) + ".log";
      const std::string cmd = kCli + line.substr(std::string("  replay: ropecheck").size());
      EXPECT_EQ(run(cmd, log), 1) << line << "\n" << slurp(log);
      EXPECT_NE(own_output(slurp(log)).find("verdict: FAIL\n"), std::string::npos) << line << "\n" << slurp(log);
    }
    EXPECT_GT(printed, 0u) << verdict;
  }
  for (const char* r : {"matrix", "special values", "v2", "property", "sequence", "repeat", "large", "random"})
    EXPECT_TRUE(rows.count(r)) << "no replay file of a '" << r << "' row";
  for (const char* f : {"crash", "out-of-bounds write", "input modified", "in-place aliasing"})
    EXPECT_TRUE(faults.count(f)) << "no replay of a '" << f << "' fault";
  EXPECT_TRUE(declined_before) << "no property replay whose failing execution lies past --property-cases";
  EXPECT_TRUE(shrunk) << "no property replay with a shrink path";
  EXPECT_TRUE(in_place) << "no in-place replay";
  EXPECT_TRUE(flat) << "no replay under a flat --tolerance";
  std::printf("replays: %zu replay files and %zu printed replay commands, each reproduced the gate's verdict\n",
              files, commands);
}
