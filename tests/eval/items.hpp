// Items of the three CORE task types, for the eval tests that build bundles in code.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "loopscale/eval/task.hpp"

namespace loopscale::eval::test {

inline Item lm_item(std::string context, std::string continuation) {
  Item it;
  it.context = std::move(context);
  it.continuation = std::move(continuation);
  return it;
}
inline Item mc_item(std::string query, std::vector<std::string> choices, std::int64_t gold) {
  Item it;
  it.query = std::move(query);
  it.choices = std::move(choices);
  it.gold = gold;
  return it;
}
inline Item schema_item(std::vector<std::string> options, std::string continuation, std::int64_t gold) {
  Item it;
  it.context_options = std::move(options);
  it.continuation = std::move(continuation);
  it.gold = gold;
  return it;
}

}  // namespace loopscale::eval::test
