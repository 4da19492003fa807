// Task bundles on disk (eval/bundle.hpp): write_bundle then read_bundle gives the same bundle; both
// manifest dialects read, CORE's conventions included (num_fewshot [k], the percent baseline, the
// default delimiters, keys CORE has and loopscale ignores); every bad bundle is one line naming the
// file, the row's line (or the manifest's entry) and the field.
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <type_traits>

#include <unistd.h>

#include "items.hpp"
#include "loopscale/eval/bundle.hpp"
#include "loopscale/util/text.hpp"
#include "test_files.hpp"

using namespace loopscale;
using namespace loopscale::eval;
namespace fs = std::filesystem;

namespace {

using loopscale::eval::test::lm_item;
using loopscale::eval::test::mc_item;
using loopscale::eval::test::schema_item;

using loopscale::test::temp_dir;

void write_text(const fs::path& p, const std::string& s) {
  fs::create_directories(p.parent_path());
  std::ofstream f(p, std::ios::binary);
  f << s;
}

std::string read_text(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

// The message of the bundle_error `f` throws (the test fails if it throws none or another type).
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const bundle_error& e) {
    const std::string m = e.what();
    CHECK(m.find('\n') == std::string::npos);  // one line
    return m;
  }
  FAIL("no bundle_error was thrown");
  return "";
}

Bundle sample_bundle() {
  Bundle b;
  b.name = "sample";
  Task lm;
  lm.label = "lambada_like";
  lm.dataset_uri = "reading/lambada_like.jsonl";  // a subfolder is made
  lm.type = TaskType::language_modeling;
  lm.axis = Axis::reading_comprehension;
  lm.num_fewshot = 1;
  lm.continuation_delimiter = " ";
  lm.example_delimiter = "\n\n";
  lm.random_baseline = 0;
  lm.items = {lm_item("The cat sat on the", "mat"),
              lm_item("Quotes \"inside\", a tab\tand\na newline ", "déjà vu 😀")};
  Task mc;
  mc.label = "arc_like";
  mc.dataset_uri = "arc_like.jsonl";
  mc.type = TaskType::multiple_choice;
  mc.axis = Axis::compositional_symbolic;
  mc.num_fewshot = 0;
  mc.continuation_delimiter = "\nAnswer: ";
  mc.example_delimiter = "\n";
  mc.random_baseline = 0.25;
  mc.items = {mc_item("2 + 2 =", {"3", "4", "5", "22"}, 1), mc_item("Red or blue?", {"red", "blue"}, 0)};
  Task sc;
  sc.label = "winograd_like";
  sc.dataset_uri = "";  // written as winograd_like.jsonl
  sc.type = TaskType::schema;
  sc.axis = Axis::reasoning_primitives;
  sc.num_fewshot = 1;
  sc.random_baseline = 0.5;
  sc.items = {schema_item({"The trophy did not fit: the trophy", "The trophy did not fit: the case"}, "was too big.", 0),
              schema_item({"A", "B", "C"}, "x", 2)};
  b.tasks = {lm, mc, sc};
  return b;
}

// A dialect-(a) manifest with one multiple-choice task whose entry is `entry` (a JSON object's
// body) and whose rows are `rows`.
fs::path mc_bundle(const std::string& name, const std::string& entry, const std::string& rows) {
  const fs::path dir = temp_dir(name);
  write_text(dir / "bundle.json", concat("{\"icl_tasks\": [{", entry, "}]}"));
  write_text(dir / "mc.jsonl", rows);
  return dir;
}

const std::string mc_entry =
    R"("label": "mc", "dataset_uri": "mc.jsonl", "icl_task_type": "multiple_choice", "axis": "math", "random_baseline": 0.5)";
const std::string mc_rows = "{\"query\": \"q1\", \"choices\": [\"a\", \"b\"], \"gold\": 0}\n{\"query\": \"q2\", \"choices\": [\"c\", \"d\"], \"gold\": 1}\n";

}  // namespace

static_assert(std::is_base_of_v<std::invalid_argument, bundle_error>, "bad bundles are bad input: the program exits with 2");

TEST_CASE("bundle: write_bundle then read_bundle gives the same bundle", "[eval]") {
  const fs::path dir = temp_dir("roundtrip");
  Bundle b = sample_bundle();
  write_bundle(b, dir);
  REQUIRE(fs::exists(dir / "bundle.json"));
  REQUIRE(fs::exists(dir / "reading" / "lambada_like.jsonl"));
  REQUIRE(fs::exists(dir / "winograd_like.jsonl"));
  for (const auto& e : fs::recursive_directory_iterator(dir)) REQUIRE(e.path().string().find(".tmp.") == std::string::npos);

  const Bundle back = read_bundle(dir);
  b.tasks[2].dataset_uri = "winograd_like.jsonl";  // the name it was given
  REQUIRE(back == b);
  // The manifest is dialect (a); one row per line, only the type's fields.
  const auto m = nlohmann::json::parse(read_text(dir / "bundle.json"));
  REQUIRE(m.at("icl_tasks").size() == 3);
  REQUIRE(m.at("icl_tasks")[1].at("random_baseline") == 0.25);
  const std::string rows = read_text(dir / "arc_like.jsonl");
  REQUIRE(std::count(rows.begin(), rows.end(), '\n') == 2);
  REQUIRE(rows.find("context") == std::string::npos);
  // Written again over itself (each file replaced atomically) and read again.
  write_bundle(back, dir);
  REQUIRE(read_bundle(dir) == back);
  // A manifest file may be given instead of its folder.
  REQUIRE(read_bundle(dir / "bundle.json") == back);
}

TEST_CASE("bundle: CORE's dialect, as core.yaml converted to JSON", "[eval]") {
  const fs::path dir = temp_dir("core");
  // As `yaml.safe_load(core.yaml)` dumps it, plus the axis and eval_meta_data.csv's percent baseline.
  write_text(dir / "eval_data" / "core.json", R"({"icl_tasks": [
    {"label": "hellaswag", "dataset_uri": "language_understanding/hellaswag.jsonl", "num_fewshot": [2],
     "icl_task_type": "multiple_choice", "max_seq_len": 2048, "axis": "reasoning_primitives", "random_baseline_percent": 25.0},
    {"label": "lambada_openai", "dataset_uri": "language_understanding/lambada_openai.jsonl", "num_fewshot": [0],
     "icl_task_type": "language_modeling", "axis": "reading_comprehension", "random_baseline_percent": 0.0},
    {"label": "winograd", "dataset_uri": "language_understanding/winograd.jsonl", "num_fewshot": 1, "has_categories": false,
     "task_type": "schema", "continuation_delimiter": "\nAnswer: ", "example_delimiter": "\n", "axis": "reasoning_primitives",
     "random_baseline": 0.5}]})");
  write_text(dir / "eval_data" / "language_understanding" / "hellaswag.jsonl",
             "{\"query\": \"q1\", \"choices\": [\"a\", \"b\", \"c\", \"d\"], \"gold\": 3, \"category\": \"x\"}\n"
             "\n"  // a blank line is skipped
             "{\"query\": \"q2\", \"choices\": [\"a\", \"b\", \"c\", \"d\"], \"gold\": 0}\r\n"
             "{\"query\": \"q3\", \"choices\": [\"a\", \"b\", \"c\", \"d\"], \"gold\": 1}");  // no final newline
  write_text(dir / "eval_data" / "language_understanding" / "lambada_openai.jsonl", "{\"context\": \"a b\", \"continuation\": \"c\"}\n");
  write_text(dir / "eval_data" / "language_understanding" / "winograd.jsonl",
             "{\"context_options\": [\"x\", \"y\"], \"continuation\": \"z\", \"gold\": 1}\n"
             "{\"context_options\": [\"u\", \"v\"], \"continuation\": \"w\", \"gold\": 0}\n");
  const Bundle b = read_bundle(dir / "eval_data" / "core.json");
  REQUIRE(b.name == "core");  // the manifest's stem, as it has no "name"
  REQUIRE(b.tasks.size() == 3);
  const Task& h = b.tasks[0];
  REQUIRE(h.label == "hellaswag");
  REQUIRE(h.type == TaskType::multiple_choice);
  REQUIRE(h.axis == Axis::reasoning_primitives);
  REQUIRE(h.num_fewshot == 2);
  REQUIRE(h.random_baseline == Approx(0.25));
  REQUIRE(h.continuation_delimiter == " ");  // CORE's defaults
  REQUIRE(h.example_delimiter == "\n\n");
  REQUIRE(h.items.size() == 3);
  REQUIRE(h.items[1].query == "q2");
  REQUIRE(h.items[2].gold == 1);
  REQUIRE(b.tasks[1].type == TaskType::language_modeling);
  REQUIRE(b.tasks[1].num_fewshot == 0);
  REQUIRE(b.tasks[1].random_baseline == 0);
  REQUIRE(b.tasks[1].items[0].context == "a b");
  const Task& w = b.tasks[2];
  REQUIRE(w.type == TaskType::schema);
  REQUIRE(w.num_fewshot == 1);
  REQUIRE(w.continuation_delimiter == "\nAnswer: ");
  REQUIRE(w.example_delimiter == "\n");
  REQUIRE(w.random_baseline == 0.5);
  REQUIRE(w.items[0].context_options == std::vector<std::string>{"x", "y"});
  REQUIRE(w.items[0].gold == 1);
}

TEST_CASE("bundle: the grouped dialect, tasks in axis order then group order", "[eval]") {
  const fs::path dir = temp_dir("grouped");
  write_text(dir / "bundle.json", R"({"name": "mine",
    "groups": {"reasoning_primitives": ["induction", "copy"], "math": ["sums"]},
    "tasks": {"copy": {"dataset_uri": "copy.jsonl", "icl_task_type": "language_modeling", "random_baseline": 0},
              "sums": {"dataset_uri": "sums.jsonl", "icl_task_type": "multiple_choice", "num_fewshot": [1], "random_baseline": 0.5},
              "induction": {"dataset_uri": "induction.jsonl", "icl_task_type": "language_modeling", "axis": "reasoning_primitives",
                            "random_baseline": 0}}})");
  write_text(dir / "copy.jsonl", "{\"context\": \"ab ab a\", \"continuation\": \"b\"}\n");
  write_text(dir / "induction.jsonl", "{\"context\": \"xy xy x\", \"continuation\": \"y\"}\n");
  write_text(dir / "sums.jsonl", "{\"query\": \"1+1\", \"choices\": [\"2\", \"3\"], \"gold\": 0}\n{\"query\": \"1+2\", \"choices\": [\"2\", \"3\"], \"gold\": 1}\n");
  const Bundle b = read_bundle(dir);
  REQUIRE(b.name == "mine");
  REQUIRE(b.tasks.size() == 3);
  REQUIRE(b.tasks[0].label == "sums");  // math comes before reasoning_primitives in task.hpp
  REQUIRE(b.tasks[0].axis == Axis::math);
  REQUIRE(b.tasks[0].num_fewshot == 1);
  REQUIRE(b.tasks[1].label == "induction");
  REQUIRE(b.tasks[2].label == "copy");
  REQUIRE(b.tasks[2].axis == Axis::reasoning_primitives);
  REQUIRE(b.tasks[2].items[0].continuation == "b");

  // The same bundle written (as dialect a) and read back.
  const fs::path out = temp_dir("grouped_out");
  write_bundle(b, out);
  REQUIRE(read_bundle(out) == b);
}

TEST_CASE("bundle: a bad row is one line naming the file, the line and the field", "[eval]") {
  const auto row_error = [](const std::string& name, const std::string& rows) {
    const fs::path dir = mc_bundle(name, mc_entry, rows);
    const std::string m = error_of([&] { read_bundle(dir); });
    CHECK(m.find((dir / "mc.jsonl").string()) != std::string::npos);
    return m;
  };
  const std::string good = "{\"query\": \"q\", \"choices\": [\"a\", \"b\"], \"gold\": 0}\n";

  SECTION("missing field") {
    const std::string m = row_error("missing", good + "{\"query\": \"q\", \"choices\": [\"a\", \"b\"]}\n");
    CHECK_THAT(m, Catch::Contains("line 2: missing field \"gold\""));
  }
  SECTION("wrong JSON type") {
    CHECK_THAT(row_error("type_gold", good + good + "{\"query\": \"q\", \"choices\": [\"a\", \"b\"], \"gold\": \"1\"}\n"),
               Catch::Contains("line 3: gold must be a whole number, not a string"));
    CHECK_THAT(row_error("type_gold_float", concat("{\"query\": \"q\", \"choices\": [\"a\", \"b\"], \"gold\": 0.5}\n", good)),
               Catch::Contains("line 1: gold must be a whole number, not a number"));
    CHECK_THAT(row_error("type_choices", good + "{\"query\": \"q\", \"choices\": \"ab\", \"gold\": 0}\n"),
               Catch::Contains("line 2: choices must be an array of strings, not a string"));
    CHECK_THAT(row_error("type_choice", good + "{\"query\": \"q\", \"choices\": [\"a\", 7], \"gold\": 0}\n"),
               Catch::Contains("line 2: choices[1] must be a string, not a whole number"));
    CHECK_THAT(row_error("type_query", good + "{\"query\": null, \"choices\": [\"a\", \"b\"], \"gold\": 0}\n"),
               Catch::Contains("line 2: query must be a string, not a null"));
    CHECK_THAT(row_error("type_row", good + "[1, 2]\n"), Catch::Contains("line 2: a row must be a JSON object, not an array"));
  }
  SECTION("gold out of range") {
    CHECK_THAT(row_error("gold_high", good + "{\"query\": \"q\", \"choices\": [\"a\", \"b\", \"c\"], \"gold\": 3}\n"),
               Catch::Contains("line 2: gold 3 is out of range: the row has 3 choices (0 .. 2)"));
    CHECK_THAT(row_error("gold_negative", good + "{\"query\": \"q\", \"choices\": [\"a\", \"b\"], \"gold\": -1}\n"),
               Catch::Contains("line 2: gold -1 is out of range"));
  }
  SECTION("empty choices") {
    CHECK_THAT(row_error("empty_choices", good + "{\"query\": \"q\", \"choices\": [], \"gold\": 0}\n"),
               Catch::Contains("line 2: choices holds 0 strings; a question needs at least 2"));
    CHECK_THAT(row_error("one_choice", good + "{\"query\": \"q\", \"choices\": [\"a\"], \"gold\": 0}\n"),
               Catch::Contains("line 2: choices holds 1 string;"));
    CHECK_THAT(row_error("empty_choice", good + "{\"query\": \"q\", \"choices\": [\"a\", \"\"], \"gold\": 0}\n"),
               Catch::Contains("line 2: choices[1] is empty"));
  }
  SECTION("a line that is not JSON") {
    CHECK_THAT(row_error("not_json", good + good + "{\"query\": \"q\", \"choices\": [\"a\"\n"),
               Catch::Contains("line 3: not a JSON object (the line is not JSON)"));
  }
  SECTION("no rows") { CHECK_THAT(row_error("no_rows", "\n\n"), Catch::Contains("holds no rows")); }
  SECTION("schema and language-modelling rows") {
    const fs::path dir = temp_dir("schema_rows");
    write_text(dir / "bundle.json", R"({"icl_tasks": [{"label": "s", "dataset_uri": "s.jsonl", "icl_task_type": "schema", "axis": "math", "random_baseline": 0.5},
                                                      {"label": "l", "dataset_uri": "l.jsonl", "icl_task_type": "language_modeling", "axis": "math", "random_baseline": 0}]})");
    write_text(dir / "l.jsonl", "{\"context\": \"a\", \"continuation\": \"b\"}\n");
    write_text(dir / "s.jsonl", "{\"context_options\": [\"a\", \"b\"], \"continuation\": \"c\", \"gold\": 2}\n");
    CHECK_THAT(error_of([&] { read_bundle(dir); }), Catch::Contains("s.jsonl line 1: gold 2 is out of range: the row has 2 context_options"));
    write_text(dir / "s.jsonl", "{\"context_options\": [\"a\", \"b\"], \"gold\": 0}\n");
    CHECK_THAT(error_of([&] { read_bundle(dir); }),
               Catch::Contains("s.jsonl line 1: missing field \"continuation\" (a schema row has context_options, continuation, gold)"));
    write_text(dir / "s.jsonl", "{\"context_options\": [\"a\", \"b\"], \"continuation\": \"c\", \"gold\": 0}\n");
    write_text(dir / "l.jsonl", "{\"context\": \"a\", \"continuation\": \"b\"}\n{\"context\": \"a\", \"continuation\": \"\"}\n");
    CHECK_THAT(error_of([&] { read_bundle(dir); }), Catch::Contains("l.jsonl line 2: continuation is empty"));
  }
}

TEST_CASE("bundle: a bad manifest is one line naming the file, the task and the field", "[eval]") {
  const auto manifest_error = [](const std::string& name, const std::string& entry) {
    const fs::path dir = mc_bundle(name, entry, mc_rows);
    const std::string m = error_of([&] { read_bundle(dir); });
    CHECK(m.find((dir / "bundle.json").string()) != std::string::npos);
    return m;
  };
  SECTION("missing field") {
    CHECK_THAT(manifest_error("no_axis", R"("label": "mc", "dataset_uri": "mc.jsonl", "icl_task_type": "multiple_choice", "random_baseline": 0.5)"),
               Catch::Contains("icl_tasks[0] (\"mc\"): missing field \"axis\""));
    CHECK_THAT(manifest_error("no_baseline", R"("label": "mc", "dataset_uri": "mc.jsonl", "icl_task_type": "multiple_choice", "axis": "math")"),
               Catch::Contains("missing field \"random_baseline\""));
    CHECK_THAT(manifest_error("no_label", R"("dataset_uri": "mc.jsonl", "icl_task_type": "multiple_choice", "axis": "math", "random_baseline": 0.5)"),
               Catch::Contains("icl_tasks[0]: missing field \"label\""));
  }
  SECTION("wrong JSON type") {
    CHECK_THAT(manifest_error("fewshot_string", mc_entry + R"(, "num_fewshot": "1")"),
               Catch::Contains("(\"mc\"): num_fewshot must be a whole number >= 0 (or a list of one), not a string"));
    CHECK_THAT(manifest_error("delim_number", mc_entry + R"(, "continuation_delimiter": 1)"),
               Catch::Contains("continuation_delimiter must be a string, not a whole number"));
    CHECK_THAT(manifest_error("label_array", R"("label": ["mc"], "dataset_uri": "mc.jsonl", "icl_task_type": "multiple_choice", "axis": "math", "random_baseline": 0.5)"),
               Catch::Contains("label must be a string, not an array"));
    const fs::path dir = temp_dir("tasks_not_array");
    write_text(dir / "bundle.json", R"({"icl_tasks": {"mc": 1}})");
    CHECK_THAT(error_of([&] { read_bundle(dir); }), Catch::Contains("icl_tasks must be an array of tasks, not an object"));
  }
  SECTION("a dataset_uri outside the folder, or not a regular file") {
    // A manifest must not send the reader to a device (it would never end) or to other folders.
    for (const char* uri : {"/dev/zero", "../mc.jsonl", "sub/../../mc.jsonl"})
      CHECK_THAT(manifest_error(std::string("uri_") + std::to_string(std::string(uri).size()),
                                concat(R"("label": "mc", "dataset_uri": ")", uri, R"(", "icl_task_type": "multiple_choice", "axis": "math", "random_baseline": 0.5)")),
                 Catch::Contains("is not a file inside the bundle's folder"));
    const fs::path dir = mc_bundle("uri_fifo", R"("label": "mc", "dataset_uri": "fifo.jsonl", "icl_task_type": "multiple_choice", "axis": "math", "random_baseline": 0.5)", mc_rows);
    REQUIRE(::mkfifo((dir / "fifo.jsonl").c_str(), 0600) == 0);
    CHECK_THAT(error_of([&] { read_bundle(dir); }), Catch::Contains("not a regular file"));
  }
  SECTION("unknown task type") {
    CHECK_THAT(manifest_error("type", R"("label": "mc", "dataset_uri": "mc.jsonl", "icl_task_type": "generation", "axis": "math", "random_baseline": 0.5)"),
               Catch::Contains("icl_task_type \"generation\" is not one of language_modeling, multiple_choice or schema"));
  }
  SECTION("unknown axis") {
    CHECK_THAT(manifest_error("axis", R"("label": "mc", "dataset_uri": "mc.jsonl", "icl_task_type": "multiple_choice", "axis": "commonsense", "random_baseline": 0.5)"),
               Catch::Contains("axis \"commonsense\" is not one of parametric_knowledge, reading_comprehension, math, reasoning_primitives or compositional_symbolic"));
    const fs::path dir = temp_dir("group_axis");
    write_text(dir / "bundle.json", R"({"groups": {"commonsense": ["mc"]}, "tasks": {"mc": {"dataset_uri": "mc.jsonl", "icl_task_type": "multiple_choice", "random_baseline": 0.5}}})");
    write_text(dir / "mc.jsonl", mc_rows);
    CHECK_THAT(error_of([&] { read_bundle(dir); }), Catch::Contains("groups: axis \"commonsense\" is not one of"));
  }
  SECTION("num_fewshot: CORE's list of one, but not of several, and not more than the other rows") {
    CHECK_THAT(manifest_error("fewshot_list", mc_entry + R"(, "num_fewshot": [0, 5])"),
               Catch::Contains("num_fewshot lists 2 values ([0,5]); a task is evaluated with one"));
    CHECK_THAT(manifest_error("fewshot_many", mc_entry + R"(, "num_fewshot": 2)"),
               Catch::Contains("num_fewshot 2 needs at least 3 rows (few-shot examples are other rows);"));
    CHECK_THAT(manifest_error("fewshot_negative", mc_entry + R"(, "num_fewshot": -1)"), Catch::Contains("num_fewshot must be a whole number >= 0"));
    REQUIRE(read_bundle(mc_bundle("fewshot_one", mc_entry + R"(, "num_fewshot": [1])", mc_rows)).tasks[0].num_fewshot == 1);
  }
  SECTION("random_baseline: a fraction, or random_baseline_percent") {
    const std::string head = R"("label": "mc", "dataset_uri": "mc.jsonl", "icl_task_type": "multiple_choice", "axis": "math")";
    CHECK_THAT(manifest_error("baseline_percent", head + R"(, "random_baseline": 25.0)"),
               Catch::Contains("random_baseline 25.0 is not a fraction in [0, 1); for CORE's percent (eval_meta_data.csv's 25.0) write random_baseline_percent"));
    CHECK_THAT(manifest_error("baseline_both", head + R"(, "random_baseline": 0.25, "random_baseline_percent": 25)"),
               Catch::Contains("not both"));
    CHECK_THAT(manifest_error("baseline_pct_high", head + R"(, "random_baseline_percent": 100)"), Catch::Contains("is not in [0, 100)"));
    CHECK_THAT(manifest_error("baseline_string", head + R"(, "random_baseline": "0.25")"),
               Catch::Contains("random_baseline must be a number, not a string"));
    REQUIRE(read_bundle(mc_bundle("baseline_ok", head + R"(, "random_baseline_percent": 25)", mc_rows)).tasks[0].random_baseline == 0.25);
  }
  SECTION("unreadable files") {
    const fs::path dir = temp_dir("unreadable");
    CHECK_THAT(error_of([&] { read_bundle(dir); }), Catch::Contains(concat("cannot read ", (dir / "bundle.json").string(), ": No such file")));
    write_text(dir / "bundle.json", concat("{\"icl_tasks\": [{", mc_entry, "}]}"));
    CHECK_THAT(error_of([&] { read_bundle(dir); }), Catch::Contains(concat("cannot read ", (dir / "mc.jsonl").string(), ": No such file")));
    fs::create_directories(dir / "mc.jsonl");
    CHECK_THAT(error_of([&] { read_bundle(dir); }), Catch::Contains("mc.jsonl: it is a folder"));
    write_text(dir / "bundle.json", "{\"icl_tasks\": [");
    CHECK_THAT(error_of([&] { read_bundle(dir); }), Catch::Contains("bundle.json is not JSON"));
    write_text(dir / "bundle.json", "[]");
    CHECK_THAT(error_of([&] { read_bundle(dir); }), Catch::Contains("must hold a JSON object, not an array"));
    write_text(dir / "bundle.json", "{\"name\": \"x\"}");
    CHECK_THAT(error_of([&] { read_bundle(dir); }), Catch::Contains("lists no tasks"));
  }
  SECTION("duplicate labels") {
    const fs::path dir = temp_dir("duplicate");
    write_text(dir / "mc.jsonl", mc_rows);
    write_text(dir / "bundle.json", concat("{\"icl_tasks\": [{", mc_entry, "}, {", mc_entry, "}]}"));
    CHECK_THAT(error_of([&] { read_bundle(dir); }), Catch::Contains("icl_tasks[1]: label \"mc\" is used twice (icl_tasks[0] and [1])"));
    // Grouped: the same key twice in "tasks" (nlohmann alone would keep the last), or a label in two groups.
    const std::string task = R"({"dataset_uri": "mc.jsonl", "icl_task_type": "multiple_choice", "random_baseline": 0.5})";
    write_text(dir / "bundle.json", concat("{\"groups\": {\"math\": [\"mc\"]}, \"tasks\": {\"mc\": ", task, ", \"mc\": ", task, "}}"));
    CHECK_THAT(error_of([&] { read_bundle(dir); }), Catch::Contains("the key \"mc\" appears twice in one object"));
    write_text(dir / "bundle.json", concat("{\"groups\": {\"math\": [\"mc\"], \"reasoning_primitives\": [\"mc\"]}, \"tasks\": {\"mc\": ", task, "}}"));
    CHECK_THAT(error_of([&] { read_bundle(dir); }), Catch::Contains("label \"mc\" is listed twice (in math and reasoning_primitives)"));
    // A row that names a key twice: nlohmann kept the last, so the row's gold was another answer.
    write_text(dir / "bundle.json", concat("{\"icl_tasks\": [{", mc_entry, "}]}"));
    write_text(dir / "mc.jsonl", R"({"query": "a", "choices": ["b", "c"], "gold": 0, "gold": 1})" "\n");
    CHECK_THAT(error_of([&] { read_bundle(dir); }), Catch::Contains("mc.jsonl line 1: the key \"gold\" appears twice in one object"));
    write_text(dir / "mc.jsonl", R"({"query": "a", "choices": ["b", "c"], "gold": 1e400})" "\n");
    CHECK_THAT(error_of([&] { read_bundle(dir); }), Catch::Contains("mc.jsonl line 1: a number beyond the range of a double"));
  }
  SECTION("the grouped dialect's own faults") {
    const fs::path dir = temp_dir("grouped_faults");
    write_text(dir / "mc.jsonl", mc_rows);
    const std::string task = R"({"dataset_uri": "mc.jsonl", "icl_task_type": "multiple_choice", "random_baseline": 0.5})";
    write_text(dir / "bundle.json", concat("{\"groups\": {\"math\": []}, \"tasks\": {\"mc\": ", task, "}}"));
    CHECK_THAT(error_of([&] { read_bundle(dir); }), Catch::Contains("tasks.mc is in no group"));
    write_text(dir / "bundle.json", concat("{\"groups\": {\"math\": [\"mc\", \"other\"]}, \"tasks\": {\"mc\": ", task, "}}"));
    CHECK_THAT(error_of([&] { read_bundle(dir); }), Catch::Contains("groups.math: label \"other\" has no entry in tasks"));
    write_text(dir / "bundle.json", "{\"groups\": {\"math\": [\"mc\"]}}");
    CHECK_THAT(error_of([&] { read_bundle(dir); }), Catch::Contains("needs both \"groups\""));
    write_text(dir / "bundle.json", concat("{\"groups\": {\"math\": [\"mc\"]}, \"tasks\": {\"mc\": ", task, "}, \"icl_tasks\": []}"));
    CHECK_THAT(error_of([&] { read_bundle(dir); }), Catch::Contains("holds both icl_tasks and groups/tasks"));
    write_text(dir / "bundle.json",
               R"({"groups": {"math": ["mc"]}, "tasks": {"mc": {"dataset_uri": "mc.jsonl", "icl_task_type": "multiple_choice", "random_baseline": 0.5, "axis": "reasoning_primitives"}}})");
    CHECK_THAT(error_of([&] { read_bundle(dir); }), Catch::Contains("tasks.mc (\"mc\"): axis \"reasoning_primitives\" differs from its group \"math\""));
  }
}

TEST_CASE("bundle: write_bundle refuses what read_bundle would, before writing anything", "[eval]") {
  const fs::path dir = temp_dir("write_refuses");
  const fs::path out = dir / "out";
  Bundle b = sample_bundle();
  b.tasks[1].items[1].gold = 2;  // of 2 choices
  CHECK_THAT(error_of([&] { write_bundle(b, out); }),
             Catch::Contains("task \"arc_like\" row 2: gold 2 is out of range: the row has 2 choices (0 .. 1)"));
  b = sample_bundle();
  b.tasks[2].label = "arc_like";
  CHECK_THAT(error_of([&] { write_bundle(b, out); }), Catch::Contains("label \"arc_like\" is used twice"));
  b = sample_bundle();
  b.tasks[0].dataset_uri = "../outside.jsonl";
  CHECK_THAT(error_of([&] { write_bundle(b, out); }), Catch::Contains("dataset_uri \"../outside.jsonl\" is not a file inside the folder"));
  b = sample_bundle();
  b.tasks[1].dataset_uri = b.tasks[0].dataset_uri;
  CHECK_THAT(error_of([&] { write_bundle(b, out); }), Catch::Contains("both write \"reading/lambada_like.jsonl\" with different rows"));
  b = sample_bundle();
  b.tasks[0].num_fewshot = 2;  // of 2 rows
  CHECK_THAT(error_of([&] { write_bundle(b, out); }), Catch::Contains("task \"lambada_like\": num_fewshot 2 needs 0 .. 1"));
  b = sample_bundle();
  b.tasks[0].items[0].continuation = "\xff";
  CHECK_THAT(error_of([&] { write_bundle(b, out); }), Catch::Contains("task \"lambada_like\" row 1 holds text that is not UTF-8"));
  REQUIRE(!fs::exists(out / "bundle.json"));
  REQUIRE(!fs::exists(out / "arc_like.jsonl"));
}
