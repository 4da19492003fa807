// Shared plumbing of the `loopscale` program: subcommands register themselves here, and every
// kind of bad input ends as one line on stderr and exit code 2.
#pragma once

#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace loopscale::cli {

// Bad input from the user: printed as one line, exit code 2.
struct usage_error : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

using Register = std::function<void(CLI::App&)>;

inline std::vector<Register>& registry() {
  static std::vector<Register> r;
  return r;
}

// Each subcommand's file holds `const bool registered_<file> = cli::add_command(...)` in an
// anonymous namespace: a name of its own, so the files can be compiled as one unit (LOOPSCALE_UNITY_BUILD).
inline bool add_command(Register r) {
  registry().push_back(std::move(r));
  return true;
}

}  // namespace loopscale::cli
