// The subcommands of `ropecheck`. Each lives in its own source file, linked
// into the executable, and registers itself with a static Registration:
//
//   static const ropecheck::cli::Registration reg{{"name", add_options, run}};
//
// `add` creates the CLI11 subcommand and binds its options; `run` is called
// when that subcommand was parsed and returns the exit code
// (0 pass, 1 fail, 2 usage or input error).
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

namespace ropecheck::cli {

struct Command {
  std::string name;
  std::function<CLI::App*(CLI::App&)> add;
  std::function<int()> run;
};

std::vector<Command>& commands();

struct Registration {
  explicit Registration(Command c) { commands().push_back(std::move(c)); }
};

}  // namespace ropecheck::cli
