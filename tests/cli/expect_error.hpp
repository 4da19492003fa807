// The check of the project's rule for bad input, through the program: exit code 2 and one line
// that contains `text`.
#pragma once

#include <string>

#include <catch2/catch.hpp>

#include "run_cli.hpp"

namespace loopscale::test {

inline void expect_error(const std::string& args, const std::string& text) {
  const auto r = run_cli(args);
  INFO(args << "\n-> " << r.out);
  CHECK(r.rc == 2);
  CHECK(count_lines(r.out) == 1);
  CHECK(r.out.find(text) != std::string::npos);
}

}  // namespace loopscale::test
