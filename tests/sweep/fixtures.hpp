// Shared by the sweep's tests: scratch folders under the build tree (LOOPSCALE_TEST_TMP) and the
// small plan the run and reliability tests execute with the fake engine.
#pragma once

#include <filesystem>
#include <string>

#include <catch2/catch.hpp>

#include "loopscale/sweep/plan.hpp"
#include "loopscale/sweep/presets.hpp"

namespace loopscale::test {

// LOOPSCALE_TEST_TMP/<name>, emptied. Names are unique across the sweep's test files: ctest runs
// their test cases at once, in one folder.
inline std::filesystem::path fresh(const std::string& name) {
  const std::filesystem::path p = std::filesystem::path(LOOPSCALE_TEST_TMP) / name;
  std::filesystem::remove_all(p);
  std::filesystem::create_directories(p);
  return p;
}

// The smoke preset at two budgets: six runnable runs of a few steps (the wide runs of 1.5e8 are below one batch).
inline sweep::Plan small_plan() {
  sweep::SweepSpec s = sweep::preset("smoke");
  s.budgets = {{1.5e8, {1, 4}}, {6e9, {1, 4}}};
  sweep::Plan p = sweep::make_plan(s);
  REQUIRE(p.runnable() == 6);
  return p;
}

}  // namespace loopscale::test
