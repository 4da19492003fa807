// Input and output files the `loopscale` program once took without a word (found by a bad-input
// hunt on 5 Dec 2026): a JSON key given twice (the last value won), an output folder that cannot
// be made (exit 1 and a raw filesystem error, after a dry run had approved it), one token file as
// both splits of an import, a misspelt key in a sweep budget. Each is exit 2 and one line.
#include <catch2/catch.hpp>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "expect_error.hpp"
#include "run_cli.hpp"

using loopscale::test::expect_error;
using loopscale::test::run_cli;

namespace {

std::filesystem::path files_dir(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() / ("loopscale_input_files_" + name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

std::string write_file(const std::filesystem::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
  return path.string();
}

const std::string tiny_train = "train --d-model 16 --heads 1 --depth 4 --prelude 1 --coda 1 --r 2 --vocab 256 --batch 2 --seq-len 16 --tokens 320 ";

}  // namespace

TEST_CASE("cli: a JSON key given twice in one object is refused, naming the file and the key", "[cli][json]") {
  const auto dir = files_dir("dup_keys");
  const std::string twice = "the key \"";
  // A runs file for fit and law: the first line's loss was 9, not 3.5.
  const std::string runs = write_file(dir / "runs.jsonl", "{\"N\":1e6,\"D\":1e8,\"loss\":3.5,\"loss\":9}\n{\"N\":1e7,\"D\":1e9,\"loss\":3}\n"
                                                          "{\"N\":1e8,\"D\":1e10,\"loss\":2.5}\n{\"N\":1e6,\"D\":1e9,\"loss\":3.3}\n");
  expect_error("law --law chinchilla --param E=1.7 --param A=400 --param B=410 --param alpha=0.34 --param beta=0.28 --data " + runs,
               twice + "loss\" appears twice in one object");
  expect_error("fit --law chinchilla --starts random:2 --data " + runs, runs + " line 1: the key \"loss\" appears twice");
  // A config: the second lr trained.
  const std::string config = write_file(dir / "config.json", "{\"lr\": 0.001, \"lr\": 5.0}");
  expect_error(tiny_train + "--out " + (dir / "run").string() + " --dry-run --config " + config, "--config: " + config + ": the key \"lr\" appears twice");
  // A sweep spec, nested one level down: the budgets' "s".
  const std::string spec = write_file(dir / "spec.json", R"({"depth": 4, "prelude": 1, "coda": 1, "r": [1, 2], "budgets": [{"C": 2e8, "s": [1], "s": [2]}]})");
  expect_error("sweep plan " + spec, twice + "s\" appears twice in one object");
  // A model spec of account --compare: the second d_model was compared.
  const std::string a = write_file(dir / "a.json", R"({"d_model": 384, "d_model": 512})");
  expect_error("account --compare " + a + " " + a, "--compare: " + a + ": the key \"d_model\" appears twice");
  // The same key in two objects is two keys.
  const std::string ok = write_file(dir / "ok.json", R"({"depth": 4, "prelude": 1, "coda": 1, "r": [1, 2], "width_per_s": 8, "width_round": 8,
    "head_dim": 8, "seq_len": 32, "batch_tokens": 128, "micro_batch_tokens": 128, "budgets": [{"C": 2e8, "s": [1]}, {"C": 4e8, "s": [1]}]})");
  const auto r = run_cli("sweep plan " + ok);
  INFO(r.out);
  CHECK(r.rc == 0);
}

TEST_CASE("cli: an output folder that cannot be made is refused before any work, and by the dry run", "[cli][files]") {
  // /proc refuses a new folder even to root, whom permission bits let through.
  expect_error(tiny_train + "--out /proc/loopscale_run --dry-run", "--out: /proc/loopscale_run: /proc: cannot make a folder in it");
  expect_error(tiny_train + "--out /proc/loopscale_run", "--out: /proc/loopscale_run: /proc: cannot make a folder in it");
  expect_error("sweep run --preset smoke --out /proc/loopscale_sweep", "--out: /proc/loopscale_sweep: /proc: cannot make a folder in it");
  expect_error("eval --write-builtin /proc/loopscale_probes", "--write-builtin: /proc/loopscale_probes: /proc: cannot make a folder in it");
  const auto dir = files_dir("out_names");
  const std::string long_name = (dir / std::string(300, 'x')).string();
  expect_error(tiny_train + "--out " + long_name + " --dry-run", "File name too long");
  expect_error("data export --format raw16 --data " + dir.string() + " --out " + long_name, "File name too long");
  // A link to nothing, which a folder cannot be made through.
  std::filesystem::create_symlink(dir / "gone", dir / "link");
  expect_error(tiny_train + "--out " + (dir / "link").string() + " --dry-run", "--out: " + (dir / "link").string() + ": " + (dir / "link").string() + " is a link to nothing");
  std::filesystem::remove(dir / "link");
  // A folder that can be made passes, and the dry run still writes nothing: the check made its
  // empty folder in `dir` and removed it.
  const auto r = run_cli(tiny_train + "--out " + (dir / "a" / "run").string() + " --dry-run --data /nonexistent_corpus");
  INFO(r.out);
  CHECK(r.rc == 2);  // the corpus, not --out
  CHECK(r.out.find("/nonexistent_corpus") != std::string::npos);
  for (const auto& e : std::filesystem::directory_iterator(dir)) FAIL("left behind: " << e.path());
}

TEST_CASE("cli: data import refuses one token file read twice or in both splits", "[cli][data]") {
  const auto dir = files_dir("import_twice");
  const std::string tokens = write_file(dir / "t.bin", std::string(2 * 4096, '\1'));  // uint16 tokens 257: under --vocab 300
  const std::string out = (dir / "c").string();
  expect_error("data import --format raw16 --vocab 300 --train " + tokens + " --val " + tokens + " --out " + out,
               "--val " + tokens + " is also read by --train " + tokens + ": its text would be in training and in validation");
  expect_error("data import --format raw16 --vocab 300 --train " + tokens + " " + (dir / "." / "t.bin").string() + " --out " + out, "is read twice");
  CHECK(!std::filesystem::exists(out));
  const std::string val = write_file(dir / "v.bin", std::string(2 * 1024, '\1'));
  expect_error("data import --format raw16 --vocab 300 --train " + tokens + " --val " + val + " " + val + " --out " + out,
               "--val " + val + " is read twice (also through --val " + val + ")");
  const auto r = run_cli("data import --format raw16 --vocab 300 --train " + tokens + " --val " + val + " --out " + out);
  INFO(r.out);
  CHECK(r.rc == 0);
}

TEST_CASE("cli: a sweep budget with a field other than C and s is refused, naming it", "[cli][sweep]") {
  const auto dir = files_dir("budget_field");
  const std::string spec = write_file(dir / "spec.json", R"({"depth": 4, "prelude": 1, "coda": 1, "r": [1, 2], "width_per_s": 8, "width_round": 8,
    "head_dim": 8, "seq_len": 32, "batch_tokens": 128, "micro_batch_tokens": 128, "budgets": [{"C": 2e8, "s": [1], "typo_s": [2, 3]}]})");
  expect_error("sweep plan " + spec, "unknown field \"typo_s\" in a budget");
}

TEST_CASE("cli: sweep plan prints a number past the E prefix in exponent form, not as a multiple of E", "[cli][sweep]") {
  const auto dir = files_dir("plan_huge");
  const std::string spec = write_file(dir / "spec.json", R"({"name": "x", "depth": 4, "prelude": 1, "coda": 1, "r": [1, 2], "width_per_s": 16,
    "width_round": 16, "head_dim": 16, "vocab": 256, "seq_len": 16, "batch_tokens": 64, "micro_batch_tokens": 64, "memory_limit_gib": 16,
    "budgets": [{"C": 1e30, "s": [1]}]})");
  const auto r = run_cli("sweep plan " + spec);
  INFO(r.out);
  CHECK(r.rc == 0);
  CHECK(r.out.find("e+06E") == std::string::npos);  // D = 8.96e24 tokens printed as "8.96e+06E"
  CHECK(r.out.find("e+24 ") != std::string::npos);
}
