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

#include <nlohmann/json.hpp>

#include "gate/case_json.hpp"
#include "gate/npy.hpp"
#include "impls/registry.hpp"

namespace ropecheck::test {

inline std::string mutant(const std::string& stem) { return std::string(ROPECHECK_MUTANT_DIR) + "/" + stem + ".so"; }

// An empty scratch directory under the test build's tmp/.
inline std::string tmpdir(const std::string& name) {
  const std::filesystem::path p = std::filesystem::path(ROPECHECK_TEST_TMP) / name;
  std::filesystem::remove_all(p);
  std::filesystem::create_directories(p);
  return p.string();
}

// Run `ropecheck ARGS` through the shell (prefix: e.g. "ulimit -v N;"), output to log; the exit status
// (-1 if signalled). A shell of its own: a ulimit in prefix stays there.
inline int run_cli(const std::string& args, const std::string& log, const std::string& prefix = "") {
  const std::string cmd = prefix + " timeout 120 " + std::string(ROPECHECK_CLI) + " " + args + " > " + log + " 2>&1";
  const int st = std::system(cmd.c_str());
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

inline std::string slurp(const std::string& p) {
  std::ifstream f(p);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// Every case's output of an exported case set written by a kernel, as an external program would.
inline void write_outputs(const std::string& dir, const Implementation& k) {
  std::ifstream f(dir + "/manifest.json");
  const auto m = nlohmann::json::parse(f);
  for (const auto& e : m["cases"]) {
    RopeCase c;
    gate::case_params_from_json(e["case"], c);
    const gate::NpyArray in = gate::npy_read(dir + "/" + e["input"].get<std::string>());
    c.input = in.data;
    Bytes out;
    ASSERT_EQ(run_kernel(k, c, out), RC_OK);
    gate::NpyArray o = in;
    o.data = out;
    gate::npy_write(dir + "/" + e["output"].get<std::string>(), o);
  }
}

}  // namespace ropecheck::test
