// Helpers shared by the gate's test programs: the planted-bug kernels, scratch
// directories, the CLI, and outputs written as an external program would.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gate/case_json.hpp"
#include "gate/npy.hpp"
#include "impls/registry.hpp"

namespace ropecheck::test {

inline std::string mutant(const std::string& stem) { return std::string(ROPECHECK_MUTANT_DIR) + "/" + stem + ".so"; }

// The --call-timeout of the mutation suites' gates: 3 s, and 1 s for the kernel that hangs. Each of its runs waits
// out two timeouts spinning a core (the call, then the same call alone); its other calls (6 tokens or fewer) take
// milliseconds, so one second finds the same hang and spends 2 CPU seconds where three spent 6 (measured: 6.1 ->
// 2.1 CPU s a run).
inline std::string mutant_call_timeout(const std::string& stem) { return stem == "mut_hang" ? "1" : "3"; }

// An empty scratch directory under the test build's tmp/.
inline std::string tmpdir(const std::string& name) {
  const std::filesystem::path p = std::filesystem::path(ROPECHECK_TEST_TMP) / name;
  std::filesystem::remove_all(p);
  std::filesystem::create_directories(p);
  return p.string();
}

// Run `ropecheck ARGS` through the shell (prefix: e.g. "ulimit -v N;"), output to log; the exit status
// (-1 if signalled). A shell of its own: a ulimit in prefix stays there.
// (A gate run here prints its whole verdict, --verbose: these tests read its tables and notes. The brief
// default has tests of its own: test_gate.cpp, GateCli.ThePassingVerdictIsBrief...)
inline int run_cli(const std::string& args, const std::string& log, const std::string& prefix = "") {
  const std::string a = args.rfind("gate ", 0) == 0 ? "gate --verbose " + args.substr(5) : args;
  const std::string cmd = prefix + " timeout 120 " + std::string(ROPECHECK_CLI) + " " + a + " > " + log + " 2>&1";
  const int st = std::system(cmd.c_str());
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

inline std::string slurp(const std::string& p) {
  std::ifstream f(p);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

inline nlohmann::json read_manifest(const std::string& dir) {
  std::ifstream f(dir + "/manifest.json");
  return nlohmann::json::parse(f);
}

// The path of a case's file named in the manifest ("output", "declined", "input"): version 3 names carry the
// export's run id.
inline std::string case_file(const std::string& dir, const std::string& id, const std::string& field = "output") {
  const auto m = read_manifest(dir);
  for (const auto& e : m["cases"])
    if (e["id"] == id) return dir + "/" + e[field].get<std::string>();
  ADD_FAILURE() << "no case " << id << " in " << dir;
  return dir + "/none";
}

// Every case of an exported case set run by a kernel, as an external program would: in place when the
// manifest says so; a case the kernel declines (RC_UNSUPPORTED) gets its decline marker instead of an output
// (version 3), and of the two files only the one written stays.
inline void write_outputs(const std::string& dir, const Implementation& k) {
  const auto m = read_manifest(dir);
  for (const auto& e : m["cases"]) {
    RopeCase c;
    gate::case_params_from_json(e["case"], c);
    const gate::NpyArray in = gate::npy_read(dir + "/" + e["input"].get<std::string>());
    c.input = in.data;
    Bytes out;
    const bool in_place = e.contains("in_place") && e["in_place"].get<bool>();
    const int rc = in_place ? run_kernel_in_place(k, c, out) : run_kernel(k, c, out);
    const std::string out_path = dir + "/" + e["output"].get<std::string>();
    if (rc == RC_UNSUPPORTED && e.contains("declined")) {
      std::filesystem::remove(out_path);
      std::ofstream(dir + "/" + e["declined"].get<std::string>());
      continue;
    }
    ASSERT_EQ(rc, RC_OK) << e["id"];
    if (e.contains("declined")) std::filesystem::remove(dir + "/" + e["declined"].get<std::string>());
    gate::NpyArray o = in;
    o.data = out;
    gate::npy_write(out_path, o);
  }
}

// One row of the verdict table as its cells: check, cases, declined, worst e, radial, tangential, angle,
// result, diagnosis (which may hold a '|' of its own: more cells). Empty when the row is not in the table.
inline std::vector<std::string> row_cells(const std::string& log, const std::string& name) {
  std::istringstream in(log);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("| " + name + " |", 0) != 0) continue;
    std::vector<std::string> cells;
    std::string cell;
    std::istringstream ls(line.substr(1));
    while (std::getline(ls, cell, '|')) cells.push_back(cell.substr(1, cell.size() >= 2 ? cell.size() - 2 : 0));
    return cells;
  }
  return {};
}

}  // namespace ropecheck::test
