// Helpers shared by the report tests: run a command, read a file, a scratch dir.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace ropecheck::report::testing {

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline std::string scratch_dir(const std::string& name) {
  const std::string d = std::string(ROPECHECK_REPORT_TEST_DIR) + "/scratch-" + name;
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d;
}

// Runs `cmd` through the shell, capturing its output in OUT_FILE.
inline CommandResult run_command(const std::string& cmd, const std::string& out_file) {
  CommandResult r;
  const int st = std::system((cmd + " > '" + out_file + "' 2>&1").c_str());
  r.exit_code = (st != -1 && WIFEXITED(st)) ? WEXITSTATUS(st) : -1;
  r.output = read_file(out_file);
  return r;
}

}  // namespace ropecheck::report::testing
