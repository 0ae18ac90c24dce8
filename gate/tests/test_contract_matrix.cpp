// The power of contracts (docs/gate.md, "Power"): every kernel of tests/kernels/mutants/
// gated under the default contract, each single clause and the loosest. A planted
// bug fails under every one of them, except where a clause allows exactly that
// behaviour (an f32 angle under angles=f32, a bf16 cache under cos-sin=bf16, ...),
// which passes; a correct kernel passes wherever its declared behaviour is allowed.
// Under the default and the loosest contract each failing kernel's verdict names
// its cause (the diagnosis); so does a kernel that passes under the default under
// each contract that fails it (the one clause it does not keep).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "properties/causes.hpp"
#include "support.hpp"

extern char** environ;

namespace fs = std::filesystem;

namespace {

const std::vector<std::string> kContracts = {
    "default",      "angles=f32", "cos-sin=f16",     "cos-sin=bf16",   "arith=f16",
    "arith=bf16",   "denormals=flush", "identity=bits", "stores=truncate", "loosest"};

struct Expect {
  std::set<std::string> pass;  // contracts under which the kernel passes; it fails under every other one
  std::string cause;           // a failing verdict names this, or one of its '|'-separated alternatives
                               // (under the default and the loosest contract; for a kernel that passes under
                               // the default, under every contract that fails it)
  std::set<std::string> skip;  // contracts not run: no definite expectation, or none to learn (documented at the entry)
};

const std::set<std::string> kAll(kContracts.begin(), kContracts.end());
const std::set<std::string> kAllButIdentityBits = [] {
  std::set<std::string> s = kAll;
  s.erase("identity=bits");
  return s;
}();

// Every contract but the default and the loosest.
const std::set<std::string> kMiddleContracts = [] {
  std::set<std::string> s = kAll;
  s.erase("default");
  s.erase("loosest");
  return s;
}();

// What each kernel must do. A stem missing here fails the test: every kernel needs an expectation.
const std::map<std::string, Expect>& expectations() {
  static const std::map<std::string, Expect> e = {
      {"mut_sign", {{}, "angle negated", {}}},
      {"mut_layout_pairing", {{}, "other layout", {}}},
      {"mut_freq_head_dim", {{}, "theta from head_dim", {}}},
      {"mut_wrong_exponent", {{}, "exponent i/d", {}}},
      {"mut_position_off_by_one", {{}, "position m+1", {}}},
      {"mut_positions_ignored", {{}, "token index as position", {}}},
      {"mut_passthrough_clobbered", {{}, "pass-through touched", {}}},
      {"mut_vector_tail", {{}, "pairs left unrotated", {}}},
      {"mut_cos_sin_swapped", {{}, "cos and sin swapped", {}}},
      {"mut_nan_flushed", {{}, "NaN inputs zeroed", {}}},
      {"mut_inplace_alias", {{}, "in-place aliasing", {}}},
      {"mut_oob_write", {{}, "out-of-bounds write|crash", {}}},  // a crash where the buffer ends at its guard page
      // One element past the last row: a changed guard byte, or a fault where the buffer ends at its guard page.
      {"mut_row_overrun", {{}, "out-of-bounds write|crash", {}}},
      {"mut_crash", {{}, "crash", {}}},
      // A hang is found by the call timeout, before anything is judged: the same under every contract. Checked
      // under the default and the loosest (each run waits out two call timeouts of a spinning kernel: mutant_call_timeout).
      {"mut_hang", {{}, "hang", kMiddleContracts}},
      {"mut_input_modified", {{}, "input modified", {}}},
      {"mut_declines_all", {{}, "coverage", {}}},
      // bf16 stores truncated after f32 arithmetic (vLLM's CPU kernel, docs/real-kernels.md): what
      // stores=truncate allows.
      // Under the loosest contract every pair is within its allowance and only the bias row fails: a radial bias
      // is all it shows there.
      {"mut_truncating_bf16", {{"stores=truncate"}, "truncating stores|radial bias", {}}},
      // bf16 stores truncated in the scalar tail only (the pairs past the last multiple of 8): within what
      // stores=truncate allows, and what arith=bf16 does (its error share at bf16 outputs exceeds one ulp).
      {"mut_truncating_tail", {{"stores=truncate", "arith=bf16", "loosest"}, "truncating stores in a tail loop", {}}},
      // Declines every shape but llama2.c's (base 10000, full rotary, no table or scale), rotates by -angle.
      {"mut_sign_few_shapes", {{}, "angle negated", {}}},
      // Allowed exactly by a clause: pass there, fail elsewhere naming the clause's cause.
      {"mut_fp32_angle", {{"angles=f32", "loosest"}, "f32 angle drift", {}}},
      {"mut_bf16_cache", {{"cos-sin=bf16", "loosest"}, "cos/sin at bf16 precision", {}}},
      // A bf16 cos/sin table made by truncation: up to one bf16 ulp off, twice what cos-sin=bf16 allows a table
      // rounded to nearest; the bias rows fail it where a clause widens the pairs' allowance enough (cos-sin=bf16,
      // arith=bf16, loosest: there only the radial bias shows).
      {"mut_truncated_cache", {{}, "truncating cos/sin table|radial bias", {}}},
      // Positions rounded to f32 are what an f32 pipeline does (angles=f32 allows them); positions truncated to 32
      // bits fail under every contract: the slow pairs' angles stay known far past 2^31 (the long positions row).
      {"mut_position_f32", {{"angles=f32", "loosest"}, "positions rounded to f32", {}}},
      {"mut_position_int32", {{}, "positions truncated to 32 bits", {}}},
      // Positions or frequencies in bf16 (cast with the model): beyond any f32 pipeline's error, every contract.
      {"mut_position_bf16", {{}, "positions rounded to bf16", {}}},
      {"mut_inv_freq_bf16", {{}, "frequencies rounded to bf16", {}}},
      // sin/cos off the unit circle from |angle| 2^23 on (a routine outside its range): every contract.
      {"mut_sincos_range", {{}, "cos/sin not of unit length", {}}},
      // v2 mutants (mutant_common.h, MK_V2): correct on v1 calls, caught by the gate's v2 cases -- the variant
      // property rows (properties/suite_variants.cpp; measured: failed under every contract at --property-cases 1
      // and the default seed), each named (the rules' mistakes: reference/frequency_rules.hpp, RuleMistake).
      {"mut_attn_factor_twice", {{}, "attention factor applied twice", {}}},
      {"mut_attn_factor_never", {{}, "attention factor not applied", {}}},
      {"mut_mrope_section_map", {{}, "axis map read as sections", {}}},
      {"mut_yarn_ramp_reversed", {{}, "YaRN ramp reversed", {}}},
      {"mut_llama3_wavelength", {{}, "llama3 smoothing inverted", {}}},
      // Every rule accepted and not applied (rope_scaling dropped): named.
      {"mut_rule_ignored", {{}, "frequency rule ignored", {}}},
      // Correct kernels: pass wherever their behaviour is allowed.
      {"ok_double", {kAll, "", {}}},
      {"ok_int32_positions", {kAll, "", {}}},  // declines positions beyond int32
      // A 4096-row cache, every other position declined: the rows stay within what it takes (Gate,
      // find_position_limit), whatever the contract; run under the default and the loosest.
      {"ok_bounded_cache", {kAll, "", kMiddleContracts}},
      // One rotated slice (rotary_dim = int(head_dim * 0.25)), every other call declined: found by probing
      // (Gate::find_rotary_slice) and every row's cases in it, whatever the contract; a sign bug in it named.
      {"ok_partial_rotary", {kAll, "", kMiddleContracts}},
      {"mut_partial_sign", {{}, "angle negated", kMiddleContracts}},
      {"ok_v2_double", {kAll, "", {}}},
      {"ok_fast_f32", {kAll, "", {}}},
      {"ok_no_identity_case", {kAllButIdentityBits, "identity changed", {}}},
      // Pass-through dims and angle-0 pairs through float arithmetic (a conversion, x * 1, 0 + x): every value
      // kept, not every bit (quieted signalling NaNs; 0 + x turns -0 into +0). identity=values (the default and
      // every clause but identity=bits) allows it; identity=bits fails it, naming what changed.
      {"ok_pass_float", {kAllButIdentityBits, "pass-through touched", {}}},
      {"ok_pass_mul1", {kAllButIdentityBits, "pass-through touched", {}}},
      {"ok_pass_add0", {kAllButIdentityBits, "pass-through touched|identity changed", {}}},
      {"ok_powf_f32", {{"angles=f32", "loosest"}, "f32 angle drift", {}}},
      // An f16 cache: within cos-sin=f16 and =bf16 (f16 is the finer cache); its systematic radial share is
      // not arithmetic's, so arith=f16/bf16 fail on the radial bias.
      {"ok_f16_cache", {{"cos-sin=f16", "cos-sin=bf16", "loosest"}, "cos/sin at f16 precision", {}}},
      // f32 angles, cos/sin and arithmetic in the activation dtype: only the loosest covers every dtype.
      {"ok_hf_eager", {{"loosest"}, "", {}}},
      {"ok_flush_denormals", {{"denormals=flush", "loosest"}, "subnormals flushed", {}}},
      // theta by repeated f32 multiplication: K up to ~94 measured (docs/real-kernels.md); the derived
      // angles=f32 is not enough, and whether a short run meets a pair beyond the loosest K = 64 depends on
      // the random cases drawn.
      {"ok_ggml_style", {{}, "f32 angle drift", {"angles=f32", "loosest"}}},
  };
  return e;
}

std::string slurp(const std::string& p) {
  std::ifstream f(p);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

std::string verdict_line(const std::string& log) {
  const size_t k = log.rfind("\nverdict: ");
  return k == std::string::npos ? "(no verdict)" : log.substr(k + 1, log.find('\n', k + 1) - k - 1);
}

// Causes the outputs cannot tell apart (each a class: a cell naming another member of its label's class is on
// the diagonal):
//  - a write one element past the buffer changes the guard bytes after it, or faults where the buffer ends against
//    its guard page (the gate lays buffers out both ways): "out-of-bounds write" and "crash";
//  - at f16 and bf16 outputs, the precision causes among themselves, per dtype only: a cache, narrow arithmetic or
//    an f32 angle error just past the allowance shows as a few pairs at 1.0-1.2x it, below what those outputs
//    resolve (8 or 11 bits), and the smallest clause that accepts them is named (a bf16 cache at bf16 outputs:
//    "cos/sin at f16 precision", which is the smaller clause that accepts it). The verdict's cause, read over every
//    row, is not allowed this class;
//  - Hugging Face eager (f32 angles, cos/sin and arithmetic in the activation dtype): f32 angle drift at f32 outputs
//    (its cache and arithmetic are f32 there), mixed precision at f16 and bf16: either names it;
//  - truncation in a tail loop and everywhere: a case with fewer pairs per head than the vector loop takes is all
//    tail (the smallest failing cases are), so a row can show only "truncating stores"; the verdict reads such
//    rows as the tail's (gate.cpp), a dtype's most common row cause may be either.
const std::vector<std::set<std::string>> kSame = {{"out-of-bounds-write", "crash"},
                                                  {"f32-angle-drift", "mixed-precision"},
                                                  {"truncating-stores-tail", "truncating-stores"}};
const std::set<std::string> kPrecision = {"cos-sin-f16", "cos-sin-bf16", "arith-f16", "arith-bf16",
                                          "f32-angle-drift", "mixed-precision", "radial-bias", "subnormals-flushed"};
// At bf16 outputs a bf16 table's rounding direction cannot be read (the outputs are as coarse as the table): a
// truncating table shows there as what it does to the pairs -- shortened (a radial bias, as truncating stores) and
// a bf16 cache's error. At f16 and f32 outputs it is read (properties/diagnosis.cpp, cache_evidence).
const std::set<std::string> kTruncatedTableAtBf16 = {"truncating-cos-sin-table", "radial-bias", "truncating-stores",
                                                     "cos-sin-bf16"};

// dtype: the output dtype of a per-dtype cell ("" for the verdict's cause).
bool same_cause(const std::string& label, const std::string& named, const std::string& dtype) {
  if (label == named) return true;
  for (const auto& c : kSame)
    if (c.count(label) && c.count(named)) return true;
  if (dtype == "bf16" && kTruncatedTableAtBf16.count(label) && kTruncatedTableAtBf16.count(named)) return true;
  return (dtype == "f16" || dtype == "bf16") && kPrecision.count(label) && kPrecision.count(named);
}

struct GateRun {
  std::string stem, contract, log;
};

std::vector<std::string> mutant_stems() {
  std::vector<std::string> stems;
  for (const auto& e : fs::directory_iterator(ROPECHECK_MUTANT_DIR))
    if (e.path().extension() == ".so") stems.push_back(e.path().stem().string());
  std::sort(stems.begin(), stems.end());
  return stems;
}

// Each run: the reduced gate (`--cases 40 --property-cases 1 --shrink-tries 0`, and `--failing-cases 0`: the verdict is
// what is read, not the replay files, ~16 MB per failing run; measured 388 -> 371 CPU s for this test) on its kernel
// under its contract,
// its output in run.log and its verdict in run.log.json; status: the exit codes (-1: no exit).
void run_gates(const std::vector<GateRun>& runs, const fs::path& dir, const std::string& extra, std::vector<int>& status) {
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::map<pid_t, size_t> running;
  status.assign(runs.size(), -2);
  size_t next = 0;
  // The calls mostly wait on their children: four gates at a time keep two cores busy.
  while (next < runs.size() || !running.empty()) {
    if (next < runs.size() && running.size() < 4) {
      const GateRun& r = runs[next];
      const std::string cmd = std::string(ROPECHECK_CLI) + " gate --kernel " + ROPECHECK_MUTANT_DIR + "/" + r.stem +
                              ".so --contract " + r.contract + " " + extra +
                              " --cases 40 --property-cases 1 --shrink-tries 0 --failing-cases 0 --budget-seconds 20 "
                              "--call-timeout " + ropecheck::test::mutant_call_timeout(r.stem) + " --quiet --report-dir " + (dir / (r.stem + "-" + std::to_string(next))).string() +
                              " --verdict-json " + r.log + ".json > " + r.log + " 2>&1";
      const char* argv[] = {"/bin/sh", "-c", cmd.c_str(), nullptr};
      pid_t pid;
      ASSERT_EQ(posix_spawn(&pid, "/bin/sh", nullptr, nullptr, const_cast<char* const*>(argv), environ), 0);
      running[pid] = next++;
    } else {
      int st = 0;
      const pid_t p = waitpid(-1, &st, 0);
      ASSERT_GT(p, 0);
      status[running[p]] = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
      running.erase(p);
    }
  }
}

void confusion_matrix(const std::vector<GateRun>& runs, const std::vector<int>& status) {
  std::map<std::string, std::map<std::string, int>> m;  // label -> named -> kernels
  std::vector<std::string> off;
  size_t cells = 0;
  std::set<std::string> labels;
  for (size_t k = 0; k < runs.size(); ++k) {
    const GateRun& r = runs[k];
    if (r.contract != "default" || status[k] < 0) continue;
    const Expect& e = expectations().at(r.stem);
    std::string label = e.pass.count("default") ? "none" : e.cause.empty() ? "f32-angle-drift" /* ok_hf_eager */ : "";
    if (label.empty()) label = std::string(ropecheck::cause_id(e.cause.substr(0, e.cause.find('|'))));
    ASSERT_FALSE(label.empty()) << r.stem << ": its expectation '" << e.cause << "' has no cause id (properties/causes.cpp)";
    nlohmann::json v;
    std::ifstream f(r.log + ".json");
    ASSERT_TRUE(f) << r.stem << ": no verdict JSON";
    f >> v;
    const std::string named = v["pass"].get<bool>() ? "none" : v["cause_id"].get<std::string>();
    labels.insert(label);
    ++m[label][named];
    ++cells;
    if (!same_cause(label, named, "")) off.push_back(r.stem + ": " + label + " named " + named);
    // Per output dtype: the cause most of its failing rows name (rows named after a dtype: matrix, bias, ...).
    for (const std::string d : {"f32", "f16", "bf16"}) {
      std::map<std::string, int> n;
      for (const auto& row : v["rows"]) {
        const std::string name = " " + row["name"].get<std::string>() + " ";
        if (row["result"] == "fail" && name.find(" " + d + " ") != std::string::npos)
          ++n[row["cause_id"].get<std::string>()];
      }
      if (n.empty()) continue;
      const auto top = std::max_element(n.begin(), n.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
      ++cells;
      ++m[label + " @" + d][top->first];
      if (!same_cause(label, top->first, d)) off.push_back(r.stem + " at " + d + ": " + label + " named " + top->first);
    }
  }
  EXPECT_GE(labels.size(), 30u) << "causes planted";
  std::printf("\nconfusion matrix under the default contract (%zu cells; rows: true cause [@ output dtype], then "
              "each named cause and how many kernels):\n", cells);
  for (const auto& [label, named] : m) {
    std::printf("  %-40s", label.c_str());
    const size_t at = label.find(" @");
    const std::string dtype = at == std::string::npos ? "" : label.substr(at + 2);
    for (const auto& [n, count] : named)
      std::printf(" %s%s x%d", same_cause(label.substr(0, at), n, dtype) ? "" : "OFF-DIAGONAL ", n.c_str(), count);
    std::printf("\n");
  }
  for (const auto& o : off) ADD_FAILURE() << "off the diagonal: " << o;
}

}  // namespace

TEST(MutationSuite, ContractMatrix) {
  const std::vector<std::string> stems = mutant_stems();
  ASSERT_GE(stems.size(), 25u);
  for (const auto& s : stems) ASSERT_TRUE(expectations().count(s)) << s << " has no expectation in this test";
  const fs::path dir = fs::path(ROPECHECK_TEST_TMP) / "contract-matrix";
  std::vector<GateRun> runs;
  for (const auto& s : stems)
    for (size_t k = 0; k < kContracts.size(); ++k)
      if (!expectations().at(s).skip.count(kContracts[k]))  // (nothing to check there: not run)
        runs.push_back({s, kContracts[k], (dir / (s + "." + std::to_string(k) + ".log")).string()});
  std::vector<int> status;
  ASSERT_NO_FATAL_FAILURE(run_gates(runs, dir, "", status));
  size_t checked = 0;
  std::map<std::string, std::map<std::string, char>> table;  // stem -> contract -> mark
  for (size_t k = 0; k < runs.size(); ++k) {
    const GateRun& r = runs[k];
    const Expect& e = expectations().at(r.stem);
    const std::string log = slurp(r.log);
    const std::string verdict = verdict_line(log);
    table[r.stem][r.contract] = status[k] == 0 ? 'P' : status[k] == 1 ? 'F' : '?';
    ++checked;
    const int want = e.pass.count(r.contract) ? 0 : 1;
    EXPECT_EQ(status[k], want) << r.stem << " under --contract " << r.contract << ": " << verdict << "\n" << log;
    // One line a reader takes in at a glance (issue 50, scope 5): the other causes are on their FAILED lines.
    EXPECT_LE(verdict.size(), 200u) << r.stem << " under --contract " << r.contract << ": " << verdict;
    if (want == 1 && status[k] == 1 && !e.cause.empty() &&
        (r.contract == "default" || r.contract == "loosest" || e.pass.count("default"))) {
      bool named = false;
      for (size_t a = 0; a <= e.cause.size();) {
        const size_t bar = std::min(e.cause.find('|', a), e.cause.size());
        named |= verdict.find(e.cause.substr(a, bar - a)) != std::string::npos;
        a = bar + 1;
      }
      EXPECT_TRUE(named) << r.stem << " under --contract " << r.contract << ": the verdict should name '" << e.cause
                         << "': " << verdict;
    }
  }
  std::printf("contract matrix (%zu runs, each with an expectation): P pass, F fail, - not run\n%-28s", checked, "");
  for (const auto& c : kContracts) std::printf(" %s |", c.c_str());
  std::printf("\n");
  for (const auto& [stem, marks] : table) {
    std::printf("%-28s", stem.c_str());
    for (const auto& c : kContracts) std::printf(" %c", marks.count(c) ? marks.at(c) : '-');
    std::printf("\n");
  }

  // ---- advice that holds (issue 50): a row's suggestion, and the verdict's joined one, are printed only once the
  // gate re-judged every failing case under them; where the suggested contract is one of this matrix's, the run under
  // it (the same seed: the same cases) must pass those rows.
  {
    std::map<std::pair<std::string, std::string>, size_t> run_of;  // (stem, contract) -> run
    for (size_t k = 0; k < runs.size(); ++k) run_of[{runs[k].stem, runs[k].contract}] = k;
    auto rows_of = [&](size_t k) {
      nlohmann::json v;
      std::ifstream f(runs[k].log + ".json");
      if (f) f >> v;
      return v;
    };
    size_t held = 0;
    for (size_t k = 0; k < runs.size(); ++k) {
      if (status[k] != 1) continue;
      const nlohmann::json v = rows_of(k);
      if (v.is_null()) continue;
      std::vector<std::pair<std::string, std::string>> claims;  // (row, contract it passes under)
      for (const auto& row : v["rows"])
        if (row["result"] == "fail" && row.contains("suggestion") && !row["suggestion"].get<std::string>().empty())
          claims.push_back({row["name"].get<std::string>(), row["suggestion"].get<std::string>()});
      const std::string verdict = v["verdict"].get<std::string>();
      static const std::string kEvery = "every such row passes with --contract ";
      if (const size_t at = verdict.find(kEvery); at != std::string::npos) {
        std::string spec = verdict.substr(at + kEvery.size());
        spec = spec.substr(0, spec.find_first_of(" ;)"));
        for (const auto& row : v["rows"])
          if (row["result"] == "fail" && kPrecision.count(row["cause_id"].get<std::string>()))
            claims.push_back({row["name"].get<std::string>(), spec});
      }
      for (const auto& [row, spec] : claims) {
        const auto it = run_of.find({runs[k].stem, spec});
        if (it == run_of.end() || status[it->second] < 0) continue;
        const nlohmann::json w = rows_of(it->second);
        for (const auto& r2 : w["rows"])
          if (r2["name"] == row) {
            ++held;
            EXPECT_NE(r2["result"], "fail") << runs[k].stem << " under --contract " << runs[k].contract << ": row '"
                                            << row << "' was said to pass with --contract " << spec
                                            << ", and fails under it";
          }
      }
    }
    std::printf("advice checked against the matrix: %zu row(s) said to pass under a contract of the matrix\n", held);
    EXPECT_GT(held, 0u);
  }

  // ---- the diagnosis's confusion matrix (issue 23; docs/gate.md, "Causes") -------------------------------
  // Under the default contract: each kernel's true cause (its expectation above, by construction; "none" for a
  // kernel that passes) against the cause its verdict names (--verdict-json's cause_id: the cause that explains
  // the most failing rows), and per output dtype against the cause most of that dtype's failing rows name.
  // Diagonal, up to the classes of causes the outputs cannot tell apart (kSame).
  confusion_matrix(runs, status);
}

// The corpus held aside: the same kernels and reduced gate under the default contract with another seed (other
// cases, shapes and positions), which the diagnosis was never tuned on. The same matrix, diagonal up to the same
// classes.
TEST(MutationSuite, ConfusionMatrixOnAHeldOutSeed) {
  const fs::path dir = fs::path(ROPECHECK_TEST_TMP) / "confusion-held-out";
  std::vector<GateRun> runs;
  for (const std::string& s : mutant_stems()) runs.push_back({s, "default", (dir / (s + ".log")).string()});
  std::vector<int> status;
  ASSERT_NO_FATAL_FAILURE(run_gates(runs, dir, "--seed 7", status));
  confusion_matrix(runs, status);
}
