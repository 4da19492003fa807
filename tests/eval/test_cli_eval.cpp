// `loopscale eval` and `loopscale sample` on a run trained by `loopscale train` on data/corpus (built
// here if it is missing, tests/real_corpus.hpp): the validation loss at the trained r reproduces
// summary.json's, another r_eval differs, the built-in probes cover the five axes, a written bundle
// reads back and scores, sampling is deterministic by seed, and bad input is one line with exit 2.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include <nlohmann/json.hpp>
#include <unistd.h>

#include "../cli/run_cli.hpp"
#include "loopscale/data/token_file.hpp"
#include "real_corpus.hpp"
#include "test_files.hpp"

namespace fs = std::filesystem;
using loopscale::test::run_cli;

namespace {

// Built here when the checkout has none, so that no case below is skipped.
fs::path corpus() { return loopscale::test::real_corpus(); }

nlohmann::json parse_json(const std::string& out) {
  // The JSON object is the whole of stdout; warnings, if any, went to stderr before it.
  const std::size_t at = out.find('{');
  REQUIRE(at != std::string::npos);
  return nlohmann::json::parse(out.substr(at));
}

// One run for every case below (80 steps, about 3 s to train): enough that the recurrence matters.
const fs::path& trained_run() {
  static const fs::path run = [] {
    const fs::path root = fs::temp_directory_path() / ("loopscale_cli_eval_" + std::to_string(getpid()));
    fs::remove_all(root);
    fs::create_directories(root);
    const auto r = run_cli("train --d-model 32 --heads 2 --depth 4 --prelude 1 --coda 1 --r 2 --seq-len 128 --batch 4 "
                           "--tokens 40960 --lr 1e-2 --threads 2 --eval-tokens 1024 --peak-flops 1e11 --data " + corpus().string() +
                           " --out " + (root / "run").string());
    INFO(r.out);
    REQUIRE(r.rc == 0);
    return root / "run";
  }();
  return run;
}

// `loopscale ARGS` is refused: exit 2 and one line that contains `what`.
void bad(const std::string& args, const std::string& what) {
  const auto r = run_cli(args);
  INFO(args << "\n" << r.out);
  CHECK(r.rc == 2);
  CHECK(loopscale::test::count_lines(r.out) == 1);
  CHECK_THAT(r.out, Catch::Contains(what));
}

}  // namespace

TEST_CASE("eval: validation at the trained r is the run's, other r differ, the probes cover the five axes", "[eval][cli]") {
  const fs::path& run = trained_run();
  const auto r = run_cli("eval " + run.string() + " --r-eval 1,2,4 --max-per-task 4 --json");
  INFO(r.out);
  REQUIRE(r.rc == 0);
  const nlohmann::json j = parse_json(r.out);
  std::ifstream sf(run / "summary.json");
  const nlohmann::json summary = nlohmann::json::parse(sf);
  REQUIRE(j.at("trained_r") == 2);
  REQUIRE(j.at("results").size() == 3);
  const auto loss = [&](int i) { return j.at("results")[i].at("validation").at("loss").get<double>(); };
  CHECK(j.at("results")[1].at("validation").at("windows") == 8);  // the trainer's: 1024 / (4 x 128) batches of 4
  CHECK(loss(1) == Approx(summary.at("val_loss").get<double>()).epsilon(1e-5));
  CHECK(std::abs(loss(0) - loss(1)) > 1e-4);
  // Past the trained r the state of this small model is already near a fixed point (measured: r = 4
  // differs from r = 2 by about 4e-5 nats), so only "it ran with another r" is asserted there.
  CHECK(loss(2) != loss(1));
  std::set<std::string> axes;
  for (const auto& t : j.at("results")[1].at("eval").at("tasks")) {
    axes.insert(t.at("axis").get<std::string>());
    CHECK(t.at("n").get<int>() == 4);
    CHECK(t.at("accuracy").get<double>() >= 0);
    CHECK(t.at("accuracy").get<double>() <= 1);
  }
  CHECK(axes.size() == 5);
}

TEST_CASE("eval: a written built-in bundle reads back and scores, sample is deterministic by seed", "[eval][cli]") {
  const fs::path& run = trained_run();
  const fs::path bundle = run.parent_path() / "bundle";
  auto w = run_cli("eval --write-builtin " + bundle.string() + " --items 10 --max-bytes 128 --corpus " + corpus().string());
  INFO(w.out);
  REQUIRE(w.rc == 0);
  REQUIRE(fs::exists(bundle / "bundle.json"));
  const auto r = run_cli("eval " + run.string() + " --tasks " + bundle.string() + " --max-per-task 3 --val-tokens 0 --json");
  INFO(r.out);
  REQUIRE(r.rc == 0);
  const nlohmann::json j = parse_json(r.out);
  REQUIRE(j.at("results").size() == 1);
  CHECK_FALSE(j.at("results")[0].contains("validation"));
  CHECK(j.at("results")[0].at("eval").at("tasks").size() >= 10);
  CHECK(j.at("tasks") == bundle.string());  // the folder asked for, not the written bundle's name "builtin"

  const std::string sample = "sample " + run.string() + " --prompt 'The ' --max-new 24 --json ";
  const auto a = run_cli(sample + "--seed 7"), b = run_cli(sample + "--seed 7"), c = run_cli(sample + "--seed 8");
  INFO(a.out << c.out);
  REQUIRE(a.rc == 0);
  REQUIRE(c.rc == 0);
  const nlohmann::json ja = parse_json(a.out), jb = parse_json(b.out), jc = parse_json(c.out);
  CHECK(ja.at("tokens").size() == 24);
  CHECK(ja.at("tokens") == jb.at("tokens"));
  CHECK(ja.at("tokens") != jc.at("tokens"));
  const auto g1 = run_cli(sample + "--temperature 0 --r-eval 1"), g2 = run_cli(sample + "--temperature 0 --r-eval 1 --seed 9");
  REQUIRE(g1.rc == 0);
  CHECK(parse_json(g1.out).at("tokens") == parse_json(g2.out).at("tokens"));  // greedy ignores the seed
}

TEST_CASE("eval, sample: bad input is one line and exit 2", "[eval][cli]") {
  const fs::path& run = trained_run();
  const fs::path bad_bundle = run.parent_path() / "bad_bundle";
  fs::create_directories(bad_bundle);
  std::ofstream(bad_bundle / "bundle.json") << R"({"icl_tasks": [{"label": "x", "dataset_uri": "x.jsonl", "icl_task_type": "nonsense"}]})";
  bad("eval " + run.string() + " --r-eval 0", "at least 1");
  bad("eval /nonexistent/run", "/nonexistent/run");
  bad("eval", "RUN_DIR");
  bad("eval " + run.string() + " --tasks " + bad_bundle.string(), "nonsense");
  bad("eval " + run.string() + " --tasks /nonexistent/bundle", "/nonexistent/bundle");
  bad("eval --write-builtin " + (run.parent_path() / "b2").string() + " " + run.string(), "no RUN_DIR");
  bad("sample " + run.string() + " --prompt x --max-new 1000", "context");
  bad("sample " + run.string() + " --prompt '' --max-new 10", "empty");
  bad("sample " + run.string() + " --prompt x --temperature -1", "temperature");
  // inf passed the ">= 0" test and nan failed later naming no flag (4 Dec 2026, evening).
  bad("sample " + run.string() + " --prompt x --temperature inf", "--temperature inf: must be a finite number");
  bad("sample " + run.string() + " --prompt x --temperature nan", "--temperature nan: must be a finite number");
  bad("sample " + run.string() + " --prompt x --r-eval 0", "--r-eval: must be a whole number of at least 1");
  bad("sample " + run.string() + " --prompt x --threads -2", "--threads: must be a whole number from 0 (every core) to 1024, not '-2'");
  bad("eval " + run.string() + " --threads -1", "--threads: must be a whole number from 0 (every core) to 1024, not '-1'");
  bad("eval " + run.string() + " --threads 100000", "--threads: must be a whole number from 0 (every core) to 1024");  // once SIGSEGV
  bad("eval --write-builtin " + (run / "config.json").string(), "is a file, not a folder");  // once exit 1
  bad("eval " + run.string() + " --val-tokens 0 --tasks none", "leave nothing to evaluate");  // printed nothing, exit 0
  bad("eval " + run.string() + " --val-tokens -5", "--val-tokens must be 0 (none) or more, not -5");
  // -1 was the unset value inside, so it ran as the default (the trainer's windows).
  bad("eval " + run.string() + " --val-tokens -1", "--val-tokens must be 0 (none) or more, not -1");
  // Its corpus not found from here (config.json's relative path, read from another folder): an
  // error where nothing else is asked for, not an empty report.
  bad("eval " + run.string() + " --tasks none --corpus /nonexistent/corpus", "/nonexistent/corpus");
  // A file given as the run folder is named as a file (it was said not to exist).
  bad("eval " + (run / "config.json").string(), "is a file, not a folder");
  bad("sample " + (run / "config.json").string() + " --prompt x", "is a file, not a folder");
  // A sample past the split's distinct windows (1.3M of them) is refused, as the trainer's is; it
  // ran for ever, printing nothing. From --val-tokens, and from config.json's eval_tokens.
  bad("eval " + run.string() + " --tasks none --val-tokens 99999999999999", "--val-tokens (99999999999999) asks for");
  {
    const fs::path huge = run.parent_path() / "huge_eval_tokens";
    fs::remove_all(huge);
    fs::copy(run, huge, fs::copy_options::recursive);
    std::ifstream cf(run / "config.json");
    nlohmann::json cfg = nlohmann::json::parse(cf);
    cfg["eval_tokens"] = 100000000000000;
    std::ofstream(huge / "config.json") << cfg.dump();
    bad("eval " + huge.string() + " --tasks none", "config.json: eval_tokens (the default of --val-tokens) (100000000000000) asks for");
    fs::remove_all(huge);
  }
  // A run folder's errors name the folder, not a subcommand (sample once printed "eval: ...").
  const auto missing = run_cli("sample /nonexistent/run --prompt x");
  CHECK(missing.rc == 2);
  CHECK_THAT(missing.out, Catch::Contains("the run folder /nonexistent/run does not exist") && !Catch::Contains("eval:"));
}

TEST_CASE("eval: a run's relative corpus is read from the folder train ran in, and another corpus found there is refused", "[eval][cli]") {
  // `loopscale ARGS` run in the folder `dir`.
  const auto run_in = [](const fs::path& dir, const std::string& args) {
    loopscale::test::CliResult r;
    FILE* p = popen(("cd '" + dir.string() + "' && " + std::string(LOOPSCALE_CLI) + " " + args + " 2>&1").c_str(), "r");
    REQUIRE(p != nullptr);
    char buf[4096];
    for (std::size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) r.out.append(buf, n);
    const int status = pclose(p);
    r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return r;
  };
  const fs::path root = loopscale::test::temp_dir("eval_relative_corpus");
  fs::create_directories(root / "work");
  fs::create_directory_symlink(fs::absolute(corpus()), root / "work" / "corp");
  // ./corp beside work/: another byte-level corpus under the same name.
  fs::create_directories(root / "corp");
  std::vector<std::int32_t> text;
  for (int i = 0; i < 5000; ++i) text.push_back('a' + i * 7 % 26);
  loopscale::data::write_token_file((root / "corp" / "train.bin").string(), text, 256);
  loopscale::data::write_token_file((root / "corp" / "val.bin").string(), text, 256);
  const auto t = run_in(root / "work", "train --data corp --d-model 32 --heads 2 --depth 4 --prelude 1 --coda 1 --r 2 --seq-len 32 --batch 4 "
                                        "--tokens 8192 --threads 2 --eval-tokens 1024 --peak-flops 1e11 --out run");
  INFO(t.out);
  REQUIRE(t.rc == 0);
  std::ifstream sf(root / "work" / "run" / "summary.json");
  const double val_loss = nlohmann::json::parse(sf).at("val_loss").get<double>();
  const auto loss = [](const std::string& out) { return parse_json(out).at("results")[0].at("validation").at("loss").get<double>(); };
  // From the training folder and from the one above it (which scored ./corp, the other corpus,
  // without a word): the run's own corpus, its val_loss.
  for (const auto& [dir, arg] : {std::pair{root / "work", std::string("run")}, std::pair{root, std::string("work/run")}}) {
    const auto e = run_in(dir, "eval " + arg + " --tasks none --threads 2 --json");
    INFO(arg << "\n" << e.out);
    REQUIRE(e.rc == 0);
    CHECK(loss(e.out) == Approx(val_loss).epsilon(1e-5));
  }
  // A copy of the run folder elsewhere: only ./corp is found, and it is not the recorded corpus.
  fs::copy(root / "work" / "run", root / "moved", fs::copy_options::recursive);
  const auto m = run_in(root, "eval moved --tasks none");
  INFO(m.out);
  CHECK(m.rc == 2);
  CHECK(loopscale::test::count_lines(m.out) == 1);
  CHECK_THAT(m.out, Catch::Contains("moved: the run was trained on corpus xxh3-64:") && Catch::Contains(", and corp is xxh3-64:") &&
                        Catch::Contains("give --corpus DIR"));
  // --corpus is taken as given.
  const auto c = run_in(root, "eval moved --tasks none --threads 2 --json --corpus work/corp");
  INFO(c.out);
  REQUIRE(c.rc == 0);
  CHECK(loss(c.out) == Approx(val_loss).epsilon(1e-5));
  fs::remove_all(root);
}

TEST_CASE("train --mix-probes: the probes' training text is written beside the run and recorded in its config", "[eval][cli]") {
  const fs::path out = trained_run().parent_path() / "mixed";
  fs::remove_all(out);
  const auto train_into = [](const fs::path& dir) {
    return "train --d-model 32 --heads 2 --depth 4 --prelude 1 --coda 1 --r 2 --seq-len 128 --batch 4 --threads 2 "
           "--eval-tokens 1024 --peak-flops 1e11 --data " + corpus().string() + " --out " + dir.string();
  };
  const std::string base = train_into(out);
  const auto r = run_cli(base + " --tokens 5120 --mix-probes 0.5");
  INFO(r.out);
  REQUIRE(r.rc == 0);
  std::ifstream cf(out / "config.json");
  const nlohmann::json cfg = nlohmann::json::parse(cf);
  CHECK(cfg.at("mix_frac") == 0.5);
  CHECK(cfg.at("mix_data") == (out / "probes.bin").string());
  REQUIRE(fs::exists(out / "probes.bin"));
  CHECK(fs::file_size(out / "probes.bin") > (std::uintmax_t{2} << 20));
  // A resume with the same flags continues; the fraction is part of the run's identity.
  const auto again = run_cli(base + " --tokens 5120 --mix-probes 0.5 --resume");
  INFO(again.out);
  CHECK(again.rc == 0);
  const auto other = run_cli(base + " --tokens 5120 --mix-probes 0.25 --resume");
  CHECK(other.rc == 2);
  CHECK_THAT(other.out, Catch::Contains("mix_frac"));
  const auto bad = run_cli(base + "_bad --tokens 5120 --mix-probes 1.5");
  CHECK(bad.rc == 2);
  CHECK_THAT(bad.out, Catch::Contains("--mix-probes must be a fraction in (0, 1)"));
  // What probes.bin was written from is recorded beside it, and a resume must ask for the same.
  std::ifstream rf(out / "probes.json");
  const nlohmann::json record = nlohmann::json::parse(rf);
  CHECK(record.at("seed") == 0);
  CHECK(record.at("tasks") == nlohmann::json::array());
  CHECK(record.at("window") == 129);
  CHECK(record.at("bytes") == std::size_t{2} << 20);  // the least: this run mixes in about 2,600 bytes
  const auto reseeded = run_cli(base + " --tokens 5120 --mix-probes 0.5 --mix-probes-seed 3 --resume");
  CHECK(reseeded.rc == 2);
  CHECK_THAT(reseeded.out, Catch::Contains("was written from {") && Catch::Contains("\"seed\":3"));
  const auto narrowed = run_cli(base + " --tokens 5120 --mix-probes 0.5 --mix-probes-tasks induction --resume");
  CHECK(narrowed.rc == 2);
  CHECK_THAT(narrowed.out, Catch::Contains("\"tasks\":[\"induction\"]") && Catch::Contains("--mix-probes-tasks"));

  // --mix-probes-tasks: only those tasks' text; a wrong name or a missing --mix-probes is refused.
  const fs::path few = out.parent_path() / "mixed_few";
  fs::remove_all(few);
  const auto lookups = run_cli(train_into(few) + " --tokens 1024 --mix-probes 0.5 --mix-probes-seed 5 --mix-probes-tasks induction,var_assign_d0_math");
  INFO(lookups.out);
  REQUIRE(lookups.rc == 0);
  std::ifstream ff(few / "probes.json");
  CHECK(nlohmann::json::parse(ff).at("tasks") == nlohmann::json({"induction", "var_assign_d0_math"}));
  const std::string text = loopscale::test::slurp(few / "probes.bin");
  CHECK(text.find(" -> ") != std::string::npos);
  CHECK(text.find("What is the numerical value of ") != std::string::npos);
  CHECK(text.find("Copy: ") == std::string::npos);
  // `eval` scores such a run with the probes' seed it trained on (whose items the text left out),
  // and warns when told another.
  const std::string eval_few = "eval " + few.string() + " --json --max-per-task 2 --val-tokens 0 --threads 1";
  const auto own = run_cli(eval_few);
  INFO(own.out);
  REQUIRE(own.rc == 0);
  CHECK(nlohmann::json::parse(own.out.substr(own.out.find('{'))).at("seed") == 5);
  CHECK_THAT(own.out, !Catch::Contains("warning"));
  const auto told = run_cli(eval_few + " --seed 1");
  REQUIRE(told.rc == 0);
  CHECK_THAT(told.out, Catch::Contains("trained on the probes' text of seed 5, which may hold evaluation items of --seed 1"));
  const auto typo = run_cli(train_into(few) + "_typo --tokens 1024 --mix-probes 0.5 --mix-probes-tasks inductoin");
  CHECK(typo.rc == 2);
  CHECK_THAT(typo.out, Catch::Contains("'inductoin' is not a task of the probes' training text"));
  const auto alone = run_cli(train_into(few) + "_alone --tokens 1024 --mix-probes-tasks induction");
  CHECK(alone.rc == 2);
  CHECK_THAT(alone.out, Catch::Contains("--mix-probes-tasks needs --mix-probes"));
}

TEST_CASE("eval: --items past the probes' bound is refused naming the flag, before the run is read", "[eval][cli]") {
  // Probe generation is linear in --items: 100000000000 ran for ever (200000 took 22 s and 1.5 GB).
  bad("eval /nonexistent/run --items 100000000000", "--items must be from 2 to 100000, not 100000000000");
  bad("eval /nonexistent/run --items 1", "--items must be from 2 to 100000, not 1");
  const fs::path out = loopscale::test::temp_path("eval_items");
  bad("eval --write-builtin " + out.string() + " --items 100001", "--items must be from 2 to 100000, not 100001");
  CHECK_FALSE(fs::exists(out / "bundle.json"));
  bad("sweep run --preset smoke --out " + out.string() + " --eval-items 100001", "--eval-items");
}

TEST_CASE("eval: an over-long bundle row and a num_fewshot past the context are one line before anything is scored", "[eval][cli]") {
  const fs::path& run = trained_run();  // seq_len 128: a context of 129 tokens
  const fs::path dir = loopscale::test::temp_dir("eval_scorable");
  const auto task = [](const std::string& label, int fewshot) {
    return R"({"label": ")" + label + R"(", "dataset_uri": ")" + label + R"(.jsonl", "icl_task_type": "language_modeling", "num_fewshot": )" +
           std::to_string(fewshot) + R"(, "axis": "math", "random_baseline": 0})";
  };
  const auto rows = [](const fs::path& file, int n, std::size_t continuation) {
    std::ofstream f(file);
    for (int i = 0; i < n; ++i) f << R"({"context": "Say )" << i << R"(", "continuation": ")" << std::string(continuation, 'x') << "\"}\n";
  };
  const auto expect = [&](const fs::path& bundle, const std::string& what) {
    // Two r_eval values and the validation windows: before, the row was found after the windows
    // and the first r_eval's tasks were scored (their lines printed before the error).
    const auto r = run_cli("eval " + run.string() + " --tasks " + bundle.string() + " --r-eval 1,2 --threads 1");
    INFO(r.out);
    CHECK(r.rc == 2);
    CHECK(loopscale::test::count_lines(r.out) == 1);
    CHECK_THAT(r.out, Catch::Contains(what) && !Catch::Contains("r_eval 1:"));
  };
  fs::create_directories(dir / "long");
  std::ofstream(dir / "long" / "bundle.json") << R"({"name": "long", "icl_tasks": [)" << task("ok", 0) << ", " << task("long", 0) << "]}";
  rows(dir / "long" / "ok.jsonl", 4, 3);
  rows(dir / "long" / "long.jsonl", 1, 200);
  expect(dir / "long", "eval: long.jsonl: task \"long\" row 1: the scored span of the continuation is 201 tokens");

  fs::create_directories(dir / "many");
  std::ofstream(dir / "many" / "bundle.json") << R"({"name": "many", "icl_tasks": [)" << task("many", 150) << "]}";
  rows(dir / "many" / "many.jsonl", 200, 3);
  expect(dir / "many", "eval: many.jsonl: task \"many\": num_fewshot 150 cannot fit a context of 129 tokens (at most 128 examples)");

  // An empty context at 0 shots leaves nothing before the continuation to predict its first token
  // from: refused, saying to give a prefix; --prefix puts one before every prompt (CORE's BOS).
  fs::create_directories(dir / "empty");
  std::ofstream(dir / "empty" / "bundle.json") << R"({"name": "empty", "icl_tasks": [)" << task("empty", 0) << "]}";
  std::ofstream(dir / "empty" / "empty.jsonl") << R"({"context": "", "continuation": "x"})" << "\n" << R"({"context": "", "continuation": "y"})" << "\n";
  expect(dir / "empty", "nothing comes before the scored span of the continuation");
  const auto prefixed = run_cli("eval " + run.string() + " --tasks " + (dir / "empty").string() + " --val-tokens 0 --threads 1 --json --prefix '\n'");
  INFO(prefixed.out);
  REQUIRE(prefixed.rc == 0);
  CHECK(nlohmann::json::parse(prefixed.out).dump().find("\"empty\"") != std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("eval: validation windows that overlap on a short split say how many distinct tokens they read", "[eval][cli]") {
  const fs::path& run = trained_run();
  // A byte-level split of 300 tokens: 10 windows of 129 cannot be apart. "10 windows of 128
  // tokens" alone read as 1,290 tokens of text.
  const fs::path small = loopscale::test::temp_dir("eval_short_split");
  std::vector<std::int32_t> text;
  for (int i = 0; i < 300; ++i) text.push_back('a' + i % 26);
  loopscale::data::write_token_file((small / "train.bin").string(), text, 256);
  loopscale::data::write_token_file((small / "val.bin").string(), text, 256);
  const std::string base = "eval " + run.string() + " --tasks none --corpus " + small.string() + " --val-tokens 1280";
  const auto r = run_cli(base);
  INFO(r.out);
  REQUIRE(r.rc == 0);
  CHECK_THAT(r.out, Catch::Contains("10 windows of 128 tokens, overlapping: ") && Catch::Contains(" distinct tokens of the split"));
  const auto j = run_cli(base + " --json");
  REQUIRE(j.rc == 0);
  const nlohmann::json v = parse_json(j.out).at("results")[0].at("validation");
  CHECK(v.at("windows") == 10);
  CHECK(v.at("covered_tokens").get<std::int64_t>() > 129);
  CHECK(v.at("covered_tokens").get<std::int64_t>() <= 300);
  // Windows that fit apart are counted whole and print no note.
  const auto apart = run_cli("eval " + run.string() + " --tasks none --val-tokens 1024");
  INFO(apart.out);
  REQUIRE(apart.rc == 0);
  CHECK_THAT(apart.out, Catch::Contains("8 windows of 128 tokens, ") && !Catch::Contains("overlapping"));
  const auto aj = run_cli("eval " + run.string() + " --tasks none --val-tokens 1024 --json");
  CHECK(parse_json(aj.out).at("results")[0].at("validation").at("covered_tokens") == 8 * 129);
  fs::remove_all(small);
}
