// Tests of what the gate's commands accept from outside: option values (integers out of range, budgets and
// timeouts), the deterministic number of random cases and the budget as a cap, `cases check` against hostile
// directories (FIFOs, symlinks, sparse files, missing outputs), bounded replay files, and `report compare` on
// many checks.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "gate/case_json.hpp"
#include "gate/case_set.hpp"
#include "gate/npy.hpp"
#include "impls/plugin_loader.hpp"
#include "reports/report.hpp"
#include "support.hpp"

using namespace ropecheck;
namespace fs = std::filesystem;

namespace {

using test::mutant;
using test::run_cli;
using test::slurp;

// A case's output file as the manifest names it (NNNN.RUN.out.npy).
std::string out(const std::string& set, const std::string& id) { return test::case_file(set, id); }

std::string tmpdir(const std::string& name) { return test::tmpdir("inputs-" + name); }

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// CPU seconds of this process's reaped descendants (run_cli's shell, `timeout`, the gate and its kernel
// hosts): what a gate run costs, which a busy machine does not change (its wall time it does).
double children_cpu_seconds() {
  rusage ru{};
  getrusage(RUSAGE_CHILDREN, &ru);
  return double(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) + double(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
}

void write_outputs(const std::string& dir) { test::write_outputs(dir, *find_implementation("scalar")); }

std::string small_case_set(const std::string& name) {
  const std::string d = tmpdir(name);
  const std::string set = d + "/set";
  EXPECT_EQ(run_cli("cases export --dir " + set + " --dtype f32 --layout interleaved --random-cases 2", d + "/export.log"),
            0)
      << slurp(d + "/export.log");
  write_outputs(set);
  EXPECT_EQ(run_cli("cases check --dir " + set, d + "/ok.log"), 0) << slurp(d + "/ok.log");
  return d;
}

// The verdict without its wall time ("..., 12.3 s)"): the rest is a function of the seed.
std::string without_seconds(const std::string& s) {
  return std::regex_replace(s, std::regex(R"(, [0-9.]+ s\))"), ", - s)");
}

}  // namespace

TEST(InputsCli, IntegersOutOfRangeAreUsageErrors) {
  const std::string d = tmpdir("ints");
  const std::string gate = "gate --impl scalar --quiet --report-dir " + d + "/r ";
  const std::vector<std::pair<std::string, std::string>> bad = {
      {gate + "--seed -1", "--seed"},
      {gate + "--seed 1e30", "--seed"},
      {gate + "--seed 18446744073709551616", "--seed"},
      {gate + "--seed 12abc", "--seed"},
      {gate + "--max-position -5", "--max-position"},
      {gate + "--max-position 0", "--max-position"},
      {gate + "--max-position 99999999999999999999", "--max-position"},
      {gate + "--cases 0", "--cases"},
      {gate + "--cases -3", "--cases"},
      {"cases export --dir " + d + "/x --random-cases -1", "--random-cases"},
      {"cases export --dir " + d + "/x --random-cases 100001", "--random-cases"},
      {"cases export --dir " + d + "/x --seed -1", "--seed"},
      {"cases export --dir " + d + "/x --max-position -5", "--max-position"},
      {"sweep --heads 0", "--heads"},
      {"sweep --seed -1", "--seed"},
      {"sweep --max-log2-position 63", "--max-log2-position"},
      {"report headline --seed -1 --out " + d + "/h.svg", "--seed"},
      {"reference --head-dim -2 --values 1,2", "--head-dim"},
      {"reference --head-dim 2 --position 9223372036854775808 --values 1,2", "--position"},
      {"contract default --rotary-dim -2", "--rotary-dim"},
  };
  int k = 0;
  for (const auto& [args, opt] : bad) {
    const std::string log = d + "/" + std::to_string(k++) + ".log";
    EXPECT_EQ(run_cli(args, log), 2) << args << "\n" << slurp(log);
    EXPECT_NE(slurp(log).find(opt), std::string::npos) << args << "\n" << slurp(log);
  }
  EXPECT_FALSE(fs::exists(d + "/x/manifest.json"));
  // In range: accepted.
  EXPECT_EQ(run_cli("reference --head-dim 2 --position -7 --values 1,2", d + "/ok1.log"), 0) << slurp(d + "/ok1.log");
  EXPECT_EQ(run_cli("cases export --dir " + d + "/y --dtype f32 --layout interleaved --random-cases 0 --seed "
                    "18446744073709551615",
                    d + "/ok2.log"),
            0)
      << slurp(d + "/ok2.log");
}

TEST(InputsCli, NonFiniteOrNonPositiveBudgetsAndTimeoutsAreUsageErrors) {
  const std::string d = tmpdir("budgets");
  int k = 0;
  for (const char* v : {"inf", "nan", "0", "-1", "-inf", "1e300", "x"}) {
    for (const std::string opt : {"--budget-seconds", "--call-timeout"}) {
      const std::string log = d + "/" + std::to_string(k++) + ".log";
      EXPECT_EQ(run_cli("gate --impl scalar --quiet " + opt + " " + v, log), 2) << opt << " " << v << slurp(log);
      EXPECT_NE(slurp(log).find(opt), std::string::npos) << slurp(log);
    }
    const std::string log = d + "/" + std::to_string(k++) + ".log";
    EXPECT_EQ(run_cli("replay " + d + "/none.json --impl scalar --call-timeout " + v, log), 2) << v;
    EXPECT_NE(slurp(log).find("--call-timeout"), std::string::npos) << slurp(log);
  }
}

// Every floating-point option is finite and in its range (one parser, cli::add_number_option).
TEST(InputsCli, NonFiniteOrOutOfRangeNumbersAreUsageErrors) {
  const std::string d = tmpdir("numbers");
  int k = 0;
  const std::pair<const char*, const char*> cases[] = {
      {"sweep --base", "inf"},          {"sweep --base", "nan"},       {"sweep --base", "0"},
      {"sweep --slack-rel", "-1"},      {"sweep --bias-sigmas", "inf"}, {"report compare --baseline a --current b --slack-abs", "nan"},
      {"report compare --baseline a --current b --bias-slack", "-0.5"}, {"contract default --base", "1"},
      {"reference --head-dim 2 --values 1,2 --base", "inf"}, {"reference --head-dim 2 --values 1,2 --position-scale", "nan"}};
  for (const auto& [cmd, v] : cases) {
    const std::string log = d + "/" + std::to_string(k++) + ".log";
    EXPECT_EQ(run_cli(std::string(cmd) + " " + v, log), 2) << cmd << " " << v << slurp(log);
    EXPECT_NE(slurp(log).find("finite number"), std::string::npos) << slurp(log);
  }
}

// `report compare` reads regular files of bounded size: a FIFO does not hang it, a huge sparse file is
// refused before it is read.
TEST(ReportCompare, FifoAndHugeReportsAreRefusedBeforeReading) {
  const std::string d = tmpdir("compare-inputs");
  ASSERT_EQ(mkfifo((d + "/fifo.json").c_str(), 0600), 0);
  EXPECT_EQ(run_cli("report compare --baseline " + d + "/fifo.json --current " + d + "/fifo.json", d + "/f.log"), 2);
  EXPECT_NE(slurp(d + "/f.log").find("not a regular file"), std::string::npos) << slurp(d + "/f.log");
  { std::ofstream(d + "/huge.json") << "{"; }
  ASSERT_EQ(truncate((d + "/huge.json").c_str(), off_t(report::kMaxReportBytes) + 1), 0);
  EXPECT_EQ(run_cli("report compare --baseline " + d + "/huge.json --current " + d + "/huge.json", d + "/h.log",
                    "ulimit -v 524288;"),
            2);
  EXPECT_NE(slurp(d + "/h.log").find("larger than"), std::string::npos) << slurp(d + "/h.log");
}

// One seed, one report: the number of random cases follows from --cases, not the clock.
TEST(GateBudget, SameSeedGivesTheSameCasesAndVerdict) {
  const std::string d = tmpdir("determinism");
  std::string verdict[2];
  for (int k = 0; k < 2; ++k) {
    const std::string log = d + "/" + std::to_string(k) + ".log";
    ASSERT_EQ(run_cli("gate --kernel " + mutant("ok_fast_f32") + " --dtype f32,bf16 --cases 300 --seed 7 "
                      "--budget-seconds 600 --quiet --report-dir " + d + "/r",
                      log),
              0)
        << slurp(log);
    verdict[k] = without_seconds(slurp(log));
  }
  EXPECT_EQ(verdict[0], verdict[1]);
  EXPECT_NE(verdict[0].find("| random | 300 |"), std::string::npos) << verdict[0];
  EXPECT_EQ(verdict[0].find("budget"), std::string::npos) << verdict[0];
}

// The budget caps the random phase and says how many of the N ran; the verdict stands. The budget counts CPU
// time (and blocked calls, none here), so the run's CPU time -- not its wall time, which a busy machine
// stretches -- stays within it plus the last call and the verdict's bookkeeping.
TEST(GateBudget, BudgetCutsTheRandomPhaseAndSaysHowManyRan) {
  const std::string d = tmpdir("cap");
  const double cpu0 = children_cpu_seconds();
  const int rc = run_cli("gate --kernel " + mutant("ok_fast_f32") + " --dtype f32 --layout interleaved "
                         "--cases 10000000 --budget-seconds 6 --quiet --report-dir " + d + "/r",
                         d + "/out.log");
  const double cpu = children_cpu_seconds() - cpu0;
  const std::string out = slurp(d + "/out.log");
  EXPECT_EQ(rc, 0) << out;
  EXPECT_TRUE(std::regex_search(out, std::regex(R"([0-9]+ of 10000000 random cases ran)"))) << out;
  EXPECT_NE(out.find("the budget (6 s) cut"), std::string::npos) << out;
  EXPECT_GT(cpu, 6 * 0.85) << out;  // the random phase ran to 85 % of the budget
  EXPECT_LT(cpu, 6 + 3) << out;
}

// A budget too small for the systematic part: what did not run is said, and that is not a pass.
TEST(GateBudget, BudgetReachedInTheSystematicPartIsNotAPass) {
  const std::string d = tmpdir("tiny");
  const double cpu0 = children_cpu_seconds();
  const int rc = run_cli("gate --kernel " + mutant("ok_fast_f32") + " --budget-seconds 0.05 --quiet --report-dir " + d +
                             "/r",
                         d + "/out.log");
  const std::string out = slurp(d + "/out.log");
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find("call(s) not made"), std::string::npos) << out;
  EXPECT_NE(out.find("the budget (0.05 s)"), std::string::npos) << out;
  EXPECT_LT(children_cpu_seconds() - cpu0, 3) << out;
  // The verdict line stays short however many rows were cut: their count, the first and the last (each row's
  // note has its own), not one entry per row.
  const size_t v = out.find("\nverdict: ");
  ASSERT_NE(v, std::string::npos) << out;
  const std::string line = out.substr(v + 1, out.find('\n', v + 1) - v - 1);
  EXPECT_LE(line.size(), 200u) << line;
  // The verdict line says it, and where what did not run is listed: the line above, whole.
  EXPECT_NE(line.find("was reached before the systematic checks finished"), std::string::npos) << line;
  const std::string above = out.substr(0, v);
  const std::string before = above.substr(above.rfind('\n') + 1);
  const std::regex cut(R"([0-9]+ rows, [0-9]+ call\(s\) not made: .+ \.\. .+, each row's note says how many)");
  EXPECT_TRUE(line.find("(not run: ") != std::string::npos ? std::regex_search(line, cut)
                                                           : before.find("did not reach: ") != std::string::npos &&
                                                                 std::regex_search(before, cut))
      << before << "\n" << line;
}

TEST(CaseSetInputs, FifoOutputIsRefusedWithoutHanging) {
  const std::string d = small_case_set("fifo");
  const std::string set = d + "/set";
  fs::remove(out(set, "0000"));
  ASSERT_EQ(mkfifo(out(set, "0000").c_str(), 0644), 0);
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(run_cli("cases check --dir " + set, d + "/c.log"), 2) << slurp(d + "/c.log");  // 124: timed out
  EXPECT_LT(seconds_since(t0), 60);
  EXPECT_NE(slurp(d + "/c.log").find(out(set, "0000") + ": a FIFO"), std::string::npos) << slurp(d + "/c.log");
}

TEST(CaseSetInputs, SymlinkOutputOrInputIsRefused) {
  const std::string d = small_case_set("symlink");
  const std::string set = d + "/set";
  // A valid .npy outside the directory, reached through a symlink: refused all the same.
  fs::copy_file(out(set, "0001"), d + "/outside.npy");
  fs::remove(out(set, "0001"));
  fs::create_symlink(d + "/outside.npy", out(set, "0001"));
  fs::remove(set + "/0002.in.npy");
  fs::create_symlink("/etc/passwd", set + "/0002.in.npy");
  EXPECT_EQ(run_cli("cases check --dir " + set, d + "/c.log"), 2);
  const std::string log = slurp(d + "/c.log");
  EXPECT_NE(log.find(out(set, "0001") + ": a symbolic link"), std::string::npos) << log;
  EXPECT_NE(log.find("0002.in.npy: a symbolic link"), std::string::npos) << log;
  EXPECT_NE(log.find("2 problem(s)"), std::string::npos) << log;
}

// A 1 GiB sparse output: its header is read, its size checked against the header, nothing else.
TEST(CaseSetInputs, SparseHugeNpyFailsFastInSmallMemory) {
  const std::string d = small_case_set("sparse");
  const std::string set = d + "/set";
  const std::string p = out(set, "0000");
  // A valid header for the case's shape, then a hole up to 1 GiB.
  gate::NpyArray a = gate::npy_read(p);
  a.data.clear();
  const std::string hdr = gate::npy_encode(a);
  {
    std::ofstream f(p, std::ios::binary | std::ios::trunc);
    f.write(hdr.data(), long(hdr.size()));
  }
  ASSERT_EQ(truncate(p.c_str(), off_t(1) << 30), 0);
  // And one that is all hole (no header at all).
  ASSERT_EQ(truncate(out(set, "0001").c_str(), 0), 0);
  ASSERT_EQ(truncate(out(set, "0001").c_str(), off_t(1) << 30), 0);
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(run_cli("cases check --dir " + set, d + "/c.log", "ulimit -v 524288;"), 2) << slurp(d + "/c.log");
  EXPECT_LT(seconds_since(t0), 30);
  const std::string log = slurp(d + "/c.log");
  EXPECT_NE(log.find(out(set, "0000") + ": not a valid .npy file for ropecheck: data holds 1073741"), std::string::npos)
      << log;
  EXPECT_NE(log.find(out(set, "0001") + ": not a valid .npy file for ropecheck: missing the"), std::string::npos) << log;
}

TEST(CaseSetInputs, EveryMissingOrMalformedOutputIsListed) {
  const std::string d = small_case_set("missing");
  const std::string set = d + "/set";
  for (const char* id : {"0000", "0003", "0005"}) fs::remove(out(set, id));
  std::ofstream(out(set, "0004")) << "not an npy";
  {  // wrong shape
    gate::NpyArray a = gate::npy_read(out(set, "0006"));
    a.shape = {a.shape[0] * a.shape[1] * a.shape[2]};
    gate::npy_write(out(set, "0006"), a);
  }
  // An output and a decline marker for one case: which one counts is not for check to guess.
  std::ofstream(test::case_file(set, "0007", "declined"));
  // A decline marker that is a symbolic link is refused like any file that is not a regular one.
  fs::remove(out(set, "0008"));
  fs::create_symlink("/etc/passwd", test::case_file(set, "0008", "declined"));
  // A declined case (its output removed) is not a problem.
  fs::remove(out(set, "0009"));
  std::ofstream(test::case_file(set, "0009", "declined"));
  EXPECT_EQ(run_cli("cases check --dir " + set, d + "/c.log"), 2);
  const std::string log = slurp(d + "/c.log");
  EXPECT_NE(log.find("7 problem(s)"), std::string::npos) << log;
  for (const char* id : {"0000", "0003", "0005"})
    EXPECT_NE(log.find(out(set, id) + ": missing"), std::string::npos) << id << "\n" << log;
  EXPECT_NE(log.find(out(set, "0004") + ": not a valid .npy"), std::string::npos) << log;
  EXPECT_NE(log.find(out(set, "0006") + ": shape"), std::string::npos) << log;
  EXPECT_NE(log.find(set + "/0007: both"), std::string::npos) << log;
  EXPECT_NE(log.find(test::case_file(set, "0008", "declined") + ": a symbolic link"), std::string::npos) << log;
  EXPECT_EQ(log.find("/0009."), std::string::npos) << log;
}

// Outputs left in the directory by an earlier export (other parameters) are never judged for a new one: every
// case of the new export without its own output is listed with the other export's files beside it, by name.
TEST(CaseSetInputs, OutputsOfAnEarlierExportAreRejectedByName) {
  const std::string d = small_case_set("stale");
  const std::string set = d + "/set";
  const std::string old_run = test::read_manifest(set)["run_id"];
  const std::string old_output = fs::path(out(set, "0000")).filename().string();
  ASSERT_NE(old_output.find(old_run), std::string::npos) << old_output;
  // The version-2 name, as a program that ignores the manifest's names writes it.
  fs::copy_file(out(set, "0001"), set + "/0001.out.npy");
  ASSERT_EQ(run_cli("cases export --dir " + set + " --dtype f32 --layout half-split --seed 9 --random-cases 1",
                    d + "/export2.log"),
            0)
      << slurp(d + "/export2.log");
  const auto m = test::read_manifest(set);
  const std::string run = m["run_id"];
  EXPECT_NE(run, old_run);
  EXPECT_EQ(m["export"]["seed"], 9);
  EXPECT_EQ(m["export"]["layouts"], nlohmann::json::array({"half-split"}));
  EXPECT_EQ(run_cli("cases check --dir " + set, d + "/c.log"), 2);
  const std::string log = slurp(d + "/c.log");
  EXPECT_NE(log.find("nothing judged"), std::string::npos) << log;
  EXPECT_NE(log.find("written for another export of " + set + ", not for this manifest's (run " + run),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("\"seed\":9"), std::string::npos) << log;  // the export's parameters
  EXPECT_NE(log.find(out(set, "0000") + ": missing"), std::string::npos) << log;
  EXPECT_NE(log.find(old_output + " (run " + old_run + ")"), std::string::npos) << log;
  EXPECT_NE(log.find("0001.out.npy (no run id"), std::string::npos) << log;
  EXPECT_EQ(log.find("verdict"), std::string::npos) << log;
  // Once the program has run on this export, the earlier export's files are ignored.
  write_outputs(set);
  EXPECT_EQ(run_cli("cases check --dir " + set, d + "/ok2.log"), 0) << slurp(d + "/ok2.log");
}

// A version-3 manifest's output and decline names carry its run id: an entry naming another file is malformed,
// so an output of another export cannot be judged through an edited manifest.
TEST(CaseSetInputs, OutputNamesWithoutTheRunIdAreMalformed) {
  const std::string d = small_case_set("names");
  const std::string set = d + "/set";
  auto m = test::read_manifest(set);
  m["cases"][2]["output"] = "0002.out.npy";
  m["cases"][3]["in_place"] = "yes";
  std::ofstream(set + "/manifest.json") << m.dump(1);
  EXPECT_EQ(run_cli("cases check --dir " + set, d + "/c.log"), 2);
  const std::string log = slurp(d + "/c.log");
  EXPECT_NE(log.find("2 problem(s)"), std::string::npos) << log;
  EXPECT_NE(log.find("cases[2]: output/declined must be 0002." + m["run_id"].get<std::string>() + ".out.npy"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("cases[3]: 'in_place' must be true or false"), std::string::npos) << log;
}

TEST(CaseSetInputs, OversizedManifestIsRefusedBeforeReading) {
  const std::string d = small_case_set("manifest");
  const std::string set = d + "/set";
  ASSERT_EQ(truncate((set + "/manifest.json").c_str(), off_t(gate::kMaxManifestBytes) + 1), 0);
  EXPECT_EQ(run_cli("cases check --dir " + set, d + "/c.log", "ulimit -v 524288;"), 2);
  EXPECT_NE(slurp(d + "/c.log").find("larger than"), std::string::npos) << slurp(d + "/c.log");
}

// The export writes regular files only: a FIFO named like an input does not hang it, a symlink is not followed.
TEST(CaseSetInputs, ExportRefusesFifoAndSymlinkTargets) {
  const std::string d = tmpdir("export");
  fs::create_directories(d + "/set");
  ASSERT_EQ(mkfifo((d + "/set/0000.in.npy").c_str(), 0644), 0);
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(run_cli("cases export --dir " + d + "/set --random-cases 0", d + "/e1.log"), 2) << slurp(d + "/e1.log");
  EXPECT_LT(seconds_since(t0), 60);
  EXPECT_NE(slurp(d + "/e1.log").find("0000.in.npy: a FIFO"), std::string::npos) << slurp(d + "/e1.log");
  fs::remove(d + "/set/0000.in.npy");
  std::ofstream(d + "/victim") << "keep";
  fs::create_symlink(d + "/victim", d + "/set/0000.in.npy");
  EXPECT_EQ(run_cli("cases export --dir " + d + "/set --random-cases 0", d + "/e2.log"), 2) << slurp(d + "/e2.log");
  EXPECT_NE(slurp(d + "/e2.log").find("a symbolic link"), std::string::npos) << slurp(d + "/e2.log");
  EXPECT_EQ(slurp(d + "/victim"), "keep");
}

TEST(ReplayInputs, OversizedReplayFileIsRefusedBeforeReading) {
  const std::string d = tmpdir("replay");
  const std::string p = d + "/big.json";
  std::ofstream(p) << "{\"input_bits\": [";
  ASSERT_EQ(truncate(p.c_str(), off_t(128) << 20), 0);
  EXPECT_EQ(run_cli("replay " + p + " --impl scalar", d + "/r.log", "ulimit -v 524288;"), 2);
  EXPECT_NE(slurp(d + "/r.log").find("larger than the 16 MiB allowed"), std::string::npos) << slurp(d + "/r.log");
  // Under the size cap but holding millions of tiny values: refused by the SAX count before a document is built.
  {
    std::string many = "{\"format\": \"ropecheck-case\", \"input_bits\": [0";
    for (size_t k = 0; k < (size_t(3) << 20); ++k) many += ",0";
    std::ofstream(d + "/many.json") << many << "]}";
  }
  EXPECT_EQ(run_cli("replay " + d + "/many.json --impl scalar", d + "/m.log", "ulimit -v 524288;"), 2);
  EXPECT_NE(slurp(d + "/m.log").find("JSON values"), std::string::npos) << slurp(d + "/m.log");
  ASSERT_EQ(mkfifo((d + "/fifo.json").c_str(), 0644), 0);
  EXPECT_EQ(run_cli("replay " + d + "/fifo.json --impl scalar", d + "/f.log"), 2);
  EXPECT_NE(slurp(d + "/f.log").find("a FIFO"), std::string::npos) << slurp(d + "/f.log");
}

// Correctness on many checks (the compare indexes by name; a linear find per check was quadratic:
// minutes at 100k). Timing belongs in bench/; the limit here is only a generous guard.
TEST(ReportCompare, HundredThousandChecks) {
  const size_t n = 100000;
  auto make = [&](bool current) {
    report::Report r;
    r.histogram_edges = report::default_histogram_edges();
    for (size_t k = 0; k < n; ++k) {
      report::Check c;
      c.name = "gate/check-" + std::to_string(current ? n - 1 - k : k);  // another order
      c.source = "gate";
      c.status = "pass";
      r.checks.push_back(c);
    }
    if (current) {
      r.checks[10].status = "fail";  // check n-11 newly fails
      r.checks[10].detail = "broke";
      r.checks[20].name = "gate/new-check";  // check n-21 gone, a new one
    }
    return r;
  };
  const std::string d = tmpdir("compare");
  report::write_text_file(d + "/base.json", report::to_json(make(false)).dump());
  report::write_text_file(d + "/cur.json", report::to_json(make(true)).dump());
  const auto t0 = std::chrono::steady_clock::now();
  const report::CompareResult res =
      report::compare_reports(report::load_report(d + "/base.json"), report::load_report(d + "/cur.json"), {});
  EXPECT_LT(seconds_since(t0), 60);
  EXPECT_TRUE(res.failed());
  EXPECT_EQ(res.checks_compared, n - 1);
  size_t failing = 0;
  bool newly = false, gone = false, added = false;
  for (const auto& diff : res.diffs) {
    failing += diff.failing;
    newly |= diff.failing && diff.kind == "check" && diff.what == "gate/check-" + std::to_string(n - 11);
    gone |= diff.failing && diff.kind == "coverage" && diff.what == "gate/check-" + std::to_string(n - 21);
    added |= !diff.failing && diff.kind == "new" && diff.what == "gate/new-check";
  }
  EXPECT_EQ(failing, 2u);
  EXPECT_TRUE(newly && gone && added);
}
