// Downstream tasks as data: a task bundle holds tasks, each of one of the three types of the CORE
// format (DCLM / MosaicML in-context-learning tasks, which the iso-depth paper's code evaluates):
//
//   language_modeling  {context, continuation}        scored by teacher-forced greedy exact match
//   multiple_choice    {query, choices, gold}          the choice with the lowest mean loss wins
//   schema             {context_options, continuation, gold}
//                                                      the context under which the continuation has
//                                                      the lowest mean loss wins
//
// Each task belongs to one of the iso-depth paper's five downstream axes. Reading and writing
// bundles is eval/bundle.hpp; scoring them with a model is eval/score.hpp; what a model must provide
// to be scored is eval/scorer.hpp.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "loopscale/util/names.hpp"

namespace loopscale::eval {

enum class TaskType { language_modeling, multiple_choice, schema };
constexpr auto names_of(TaskType) {
  return make_names<TaskType>({{TaskType::language_modeling, "language_modeling"},
                               {TaskType::multiple_choice, "multiple_choice"},
                               {TaskType::schema, "schema"}});
}

// The iso-depth paper's five axes (its downstream section groups the CORE tasks so).
enum class Axis { parametric_knowledge, reading_comprehension, math, reasoning_primitives, compositional_symbolic };
constexpr auto names_of(Axis) {
  return make_names<Axis>({{Axis::parametric_knowledge, "parametric_knowledge"},
                           {Axis::reading_comprehension, "reading_comprehension"},
                           {Axis::math, "math"},
                           {Axis::reasoning_primitives, "reasoning_primitives"},
                           {Axis::compositional_symbolic, "compositional_symbolic"}});
}

// One row of a task's JSONL file. Which fields are used depends on the task type (see above);
// the others stay empty.
struct Item {
  std::string context;                       // language_modeling
  std::string query;                         // multiple_choice
  std::vector<std::string> choices;          // multiple_choice
  std::vector<std::string> context_options;  // schema
  std::string continuation;                  // language_modeling, schema
  std::int64_t gold = -1;                    // multiple_choice (into choices), schema (into context_options)
};

struct Task {
  std::string label;                        // unique in its bundle, e.g. "induction"
  std::string dataset_uri;                  // the JSONL file, relative to the bundle's folder
  TaskType type = TaskType::multiple_choice;
  Axis axis = Axis::reasoning_primitives;
  std::int64_t num_fewshot = 0;             // examples from the same task put before each item
  std::string continuation_delimiter = " "; // between context (or query) and continuation (or choice)
  std::string example_delimiter = "\n";     // between few-shot examples and the item
  double random_baseline = 0;               // chance accuracy, a fraction in [0, 1)
  std::vector<Item> items;
};

struct Bundle {
  std::string name;  // e.g. "builtin" or the folder's name
  std::vector<Task> tasks;
};

}  // namespace loopscale::eval
