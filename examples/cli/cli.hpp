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

// A whole-number option's lower bound, with a message that says it (CLI11's PositiveNumber and
// NonNegativeNumber print their range up to 1.8e308 in full: "Value 0 not in range 0.000000 to 17976...").
inline CLI::Validator at_least(long long lo) {
  return CLI::Validator(
      [lo](std::string& v) -> std::string {
        try {
          std::size_t used = 0;
          const long long x = std::stoll(v, &used);
          if (used == v.size() && x >= lo) return {};
        } catch (const std::exception&) {
        }
        return "must be a whole number of at least " + std::to_string(lo) + ", not '" + v + "'";
      },
      ">= " + std::to_string(lo));
}

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
