// Bad input the `loopscale` program once took without a word: a list entry given twice, a Slurm time
// limit of nothing, law constants outside their formula's domain, SentencePiece's own warning before
// our error. Each is exit code 2 and one line naming what is wrong; and a looped-MoE exponent in the
// paper's sign, which is legal (exit 0) but gets a `loopscale: note:` line.
#include <catch2/catch.hpp>

#include <filesystem>
#include <functional>
#include <fstream>
#include <string>
#include <thread>

#include <sys/stat.h>

#include <nlohmann/json.hpp>

#include "loopscale/util/file_lock.hpp"
#include "expect_error.hpp"
#include "run_cli.hpp"

using loopscale::test::count_lines;
using loopscale::test::expect_error;
using loopscale::test::run_cli;

namespace {

std::string temp_dir(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() / ("loopscale_bad_input_" + name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (std::size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) s.replace(at, from.size(), to);
  return s;
}

// The iso-depth paper's constants, for `optimal`.
const std::string optimal = "optimal --param E=1.56773 --param A=28.027 --param B=915.82 --param alpha=0.19924 --param beta=0.36863 "
                            "--param phi=0.459 --max-width 1024 ";
// A looped-MoE law without E_start and E_max, for `design`.
const std::string design = "design --param c=1.5 --param A=20 --param B=400 --param alpha=0.2 --param beta=0.3 --param delta=0 "
                           "--param gamma=0 --param omega=0 --param zeta=0 --param kappa1=0.37 --param kappa2=1.4 --param theta=0.33 "
                           "--epsilon 0.01 --n-act 1e8 --n-loop 5e7 --expert-params 5e7 --budget 1e19 ";

}  // namespace

TEST_CASE("cli: a list entry given twice is refused, naming the flag and the value", "[cli][lists]") {
  // These printed the same row twice (optimal), or planned the same design two and four times (design).
  expect_error(optimal + "--budget 1e18 --r 1,1", "--r lists 1 twice");
  expect_error(optimal + "--budget 1e18 --budget 1e18", "--budget lists 1e+18 twice");
  expect_error(design + "--param E_start=1 --param E_max=1e5 --R 1,2,2.0", "--R lists 2 twice");  // compared as numbers
  expect_error(design + "--param E_start=1 --param E_max=1e5 --E 2,4,2", "--E lists 2 twice");
  expect_error("fit --law clark,clark --data /nonexistent.csv", "--law lists clark twice");
  // Refused as the flags are read, before the run folder or the corpus is opened.
  expect_error("eval /nonexistent --r-eval 1,2,1", "--r-eval lists 1 twice");
  expect_error("train --mix-probes-tasks induction,induction", "--mix-probes-tasks lists induction twice");
  // Distinct entries, and the defaults, still work.
  const auto ok = run_cli(optimal + "--budget 1e18 --budget 1e19 --r 1,2");
  INFO(ok.out);
  CHECK(ok.rc == 0);
  CHECK(run_cli(design + "--param E_start=1 --param E_max=1e5").rc == 0);
  CHECK(run_cli("optimal --help").out.find("--r INT=[1,2,4,8]") != std::string::npos);  // the help still shows the default
}

TEST_CASE("cli: an empty entry of a comma-separated list is refused, naming the flag and the value", "[cli][lists]") {
  // CLI11 dropped the empty pieces before our code saw them: `--r-eval 1,,2` evaluated 1 and 2, and
  // `--r-eval ''` said "the number of recurrences must be at least 1, not 0", naming no flag.
  expect_error("eval /nonexistent --r-eval 1,,2", "--r-eval: an empty entry in '1,,2'");
  expect_error("eval /nonexistent --r-eval 1,2,", "--r-eval: an empty entry in '1,2,'");
  expect_error("eval /nonexistent --r-eval ,1", "--r-eval: an empty entry in ',1'");
  expect_error("eval /nonexistent --r-eval ''", "--r-eval: an empty entry in ''");
  expect_error(optimal + "--budget 1e18 --r 1,,2", "--r: an empty entry in '1,,2'");
  expect_error(optimal + "--budget 1e18 --r 2,", "--r: an empty entry in '2,'");
  expect_error(design + "--param E_start=1 --param E_max=1e5 --R 1,,2", "--R: an empty entry in '1,,2'");
  expect_error("train --mix-probes-tasks induction,,repeat", "--mix-probes-tasks: an empty entry in 'induction,,repeat'");
  // The other messages stay: a value that is no number, and a repeat.
  expect_error(optimal + "--budget 1e18 --r 1,x", "Could not convert: --r = 1,x");
  expect_error("eval /nonexistent --r-eval 1,2,1", "--r-eval lists 1 twice");
  // Lists with no empty entry work as before, as one value or as several.
  const auto ok = run_cli(optimal + "--budget 1e18 --r 1,2");
  INFO(ok.out);
  CHECK(ok.rc == 0);
  CHECK(count_lines(ok.out) == count_lines(run_cli(optimal + "--budget 1e18 --r 1 --r 2").out));
}

// `optimal --r 3` said "choose r among its divisors: r = 3, recurrent depth 16", listing no divisor.
TEST_CASE("cli: an r that does not divide the family's recurrent depth is refused, listing the r that do", "[cli][spec]") {
  const std::string listed = "choose r among its divisors: r = 3, recurrent depth 16, whose divisors are 1, 2, 4, 8, 16";
  expect_error(optimal + "--budget 1e18 --r 3", listed);
  expect_error(optimal + "--budget 1e18 --r 1,2,3", listed);
}

TEST_CASE("cli: sweep slurm --time is a Slurm time limit of some time, longer than the warning", "[cli][slurm]") {
  const std::string slurm = "sweep slurm --preset smoke --out " + temp_dir("slurm") + " --dry-run ";
  // Slurm reads a limit of zero as no limit: these wrote "#SBATCH --time=0" and exited 0.
  for (const char* t : {"0", "00:00", "0:0:0", "0-0", "0-00:00:00"}) expect_error(slurm + "--time " + t, "--time '" + std::string(t) + "' is no time at all");
  // SIGUSR1 300 s before a limit of 90 s came as each task started: checkpoint after a step, requeue, again.
  expect_error(slurm + "--time 1:30", "--signal-seconds 300 is not less than --time '1:30' (90 s)");
  expect_error(slurm + "--time 5", "--signal-seconds 300 is not less than --time '5' (300 s)");
  expect_error(slurm + "--time 1:2:3:4", "--time '1:2:3:4' is not a Slurm time limit");
  // Every format of sbatch(1) with a positive total, and UNLIMITED.
  for (const char* t : {"10", "1:30 --signal-seconds 60", "1:30 --signal-seconds 0", "12:00:00", "2-12", "2-12:30", "2-12:30:00", "0-0:6", "UNLIMITED"}) {
    const auto r = run_cli(slurm + "--time " + t);
    INFO(t << ": " << r.out);
    CHECK(r.rc == 0);
  }
}

TEST_CASE("cli: law constants outside the formula's domain are refused, naming the constant", "[cli][law]") {
  const std::string dir = temp_dir("law");
  std::ofstream(dir + "/clark.csv") << "N,E,K,loss\n1e8,1,1,3.0\n1e8,2,1,2.9\n1e8,8,1,2.8\n2e8,1,1,2.8\n2e8,2,1,2.7\n2e8,8,1,2.6\n";
  const std::string clark = "law --law clark --data " + dir + "/clark.csv --param a=-0.08 --param b=-0.05 --param c=0.005 --param d=2.5 ";
  // Clark's transform needs 0 < E_start < E_max: E_start = E_max printed one loss for every E, a
  // negative E_start a NaN, and E_start > E_max finite losses of nothing (exit 0 each).
  expect_error(clark + "--param E_start=300 --param E_max=300", "--param E_start=300 is not below E_max=300");
  expect_error(clark + "--param E_start=4 --param E_max=2", "--param E_start=4 is not below E_max=2");
  expect_error(clark + "--param E_start=-1 --param E_max=300", "--param E_start=-1 is not positive");
  expect_error(design + "--param E_start=4 --param E_max=2 --E 1,2,8", "--param E_start=4 is not below E_max=2");
  expect_error(design + "--param E_start=0 --param E_max=1e5", "--param E_start=0 is not positive");
  // From a fit file, named as such.
  std::ofstream(dir + "/fit.json") << R"({"law": "looped-moe", "rmse": 0.02, "params": {
      "c": 1.6, "A": 300, "B": 800, "alpha": 0.30, "beta": 0.28, "delta": -0.2, "gamma": 0.01, "omega": -0.05, "zeta": 0.0,
      "E_start": 400, "E_max": 300, "kappa1": 0.3682, "kappa2": 1.4037, "theta": 0.3286}})";
  expect_error("design --fit " + dir + "/fit.json --n-act 6e8 --n-loop 2e8 --expert-params 4e8 --budget 1e23",
               "--fit " + dir + "/fit.json: E_start=400 is not below E_max=300");
  // Held in a fit, and as a fit's start.
  const std::string fit = "fit --law clark --data " + dir + "/clark.csv --starts random:2 ";
  expect_error(fit + "--freeze E_start=20 --freeze E_max=10", "--freeze E_start=20 is not below E_max=10");
  expect_error(fit + "--freeze E_start=0", "--freeze E_start=0 is not positive");
  // One of the pair frozen where the other's box reaches past it (E_max is fitted in [10, 1e5],
  // E_start in [1, 8]): refused before fitting, naming the free one.
  expect_error(fit + "--freeze E_start=20", "--freeze: E_max is fitted in [10, 100000], which crosses the frozen values");
  expect_error(fit + "--freeze E_max=5", "--freeze: E_start is fitted in [1, 8], which crosses the frozen values");
  CHECK(run_cli(fit + "--freeze E_start=5").rc == 0);
  CHECK(run_cli(fit + "--freeze E_max=50").rc == 0);
  // What the project itself writes and documents stays accepted: E_start = 1, E_max = 1e5 (docs/sweeps.md)
  // and E_start = 2, E_max = 300 (tests/law), a law's other constants of either sign.
  for (const char* e : {"--param E_start=1 --param E_max=1e5", "--param E_start=2 --param E_max=300", "--param E_start=0.5 --param E_max=300"}) {
    const auto r = run_cli(clark + e);
    INFO(e << ": " << r.out);
    CHECK(r.rc == 0);
  }
  CHECK(run_cli(fit + "--freeze E_start=1 --freeze E_max=1e5").rc == 0);
}

TEST_CASE("cli: a looped-MoE constant in the paper's sign is legal, with a note saying so", "[cli][law]") {
  // The looped-MoE paper writes alpha and beta without the minus loopscale's form has, so its
  // numbers copied as they stand are negative: predictions in which the loss grows with N_eff and D,
  // printed with exit 0 and nothing else.
  const std::string with = design + "--param E_start=1 --param E_max=1e5 --R 1,2 --E 1,8 ";
  const std::string paper = replace_all(replace_all(with, "alpha=0.2", "alpha=-0.2"), "beta=0.3", "beta=-0.3");
  const auto r = run_cli(paper);
  INFO(r.out);
  CHECK(r.rc == 0);
  CHECK(r.out.find("loopscale: note: alpha=-0.2 is negative, so the predicted loss grows with N_eff") != std::string::npos);
  CHECK(r.out.find("loopscale: note: beta=-0.3 is negative, so the predicted loss grows with D") != std::string::npos);
  CHECK(r.out.find("negatives of the looped-MoE paper's") != std::string::npos);
  // loopscale's own signs: no note.
  const auto own = run_cli(with);
  INFO(own.out);
  CHECK(own.rc == 0);
  CHECK(own.out.find("loopscale: note:") == std::string::npos);
}

TEST_CASE("cli: a SentencePiece training that fails is our one line, without SentencePiece's warning", "[cli][data]") {
  const std::string dir = temp_dir("tokenizer");
  {
    std::ofstream text(dir + "/t.txt");
    for (int i = 0; i < 200; ++i) text << "line " << i << " some words here and there " << 7 * i << "\n";
  }
  // BPE runs out of pieces for a vocab of 5000 on this text: SentencePiece logged "No valid symbol
  // found" (a LOG(WARNING) line) before our error.
  expect_error("data tokenizer train --input " + dir + "/t.txt --vocab 5000 --out " + dir + "/big.model",
               "data: SentencePiece could not train a tokenizer");
  // A vocab it can fill trains as before.
  const auto ok = run_cli("data tokenizer train --input " + dir + "/t.txt --vocab 300 --out " + dir + "/ok.model");
  INFO(ok.out);
  CHECK(ok.rc == 0);
  CHECK(ok.out.find("tokenizer: " + dir + "/ok.model (SentencePiece bpe, vocab 300") != std::string::npos);
  // A file that is no model is one line too (it was before: the loader returns a status, no log).
  std::ofstream(dir + "/bad.model") << "garbage\n";
  expect_error("data prepare --input " + dir + "/t.txt --tokenizer " + dir + "/bad.model --out " + dir + "/corpus",
               "is not a SentencePiece model");
}

TEST_CASE("cli: a folder given as a runs file is named as a folder, a failed data prepare or import leaves no folder behind",
          "[cli][files]") {
  const std::string dir = temp_dir("folders");
  // Read as an empty CSV before ("is empty (no CSV header)").
  expect_error("fit --law chinchilla --data " + dir, "is a folder, not a file; runs are read from a CSV or JSONL file");
  expect_error("law --law chinchilla --param E=1 --param A=1 --param B=1 --param alpha=0.3 --param beta=0.3 --data " + dir,
               "is a folder, not a file; runs are read from a CSV or JSONL file");
  // These failed with the right line and exit 2 but left their --out folder (empty) behind.
  std::ofstream(dir + "/empty.jsonl").close();
  std::ofstream(dir + "/no_text.jsonl") << "{\"x\": \"a\"}\n";
  expect_error("data prepare --input " + dir + "/empty.jsonl --out " + dir + "/out1", "holds no document");
  expect_error("data prepare --input " + dir + "/no_text.jsonl --out " + dir + "/out2", "has no text field");
  CHECK(!std::filesystem::exists(dir + "/out1"));
  CHECK(!std::filesystem::exists(dir + "/out2"));
  // Into a folder that exists (and holds something else), only what the failed call wrote goes.
  std::filesystem::create_directories(dir + "/out3");
  std::ofstream(dir + "/out3/notes.txt") << "mine\n";
  expect_error("data prepare --input " + dir + "/no_text.jsonl --out " + dir + "/out3", "has no text field");
  CHECK(std::filesystem::exists(dir + "/out3/notes.txt"));
  CHECK(!std::filesystem::exists(dir + "/out3/manifest.json"));
}

TEST_CASE("cli: run folders with a folder or a pipe where a file goes, a config training would refuse, and recurrences past the limits",
          "[cli][files][eval]") {
  namespace fs = std::filesystem;
  const std::string dir = temp_dir("run_folders");
  {
    std::ofstream docs(dir + "/docs.jsonl");
    for (int i = 0; i < 300; ++i) docs << "{\"text\": \"" << i << " the quick brown fox jumps over the lazy dog, again and again.\"}\n";
  }
  REQUIRE(run_cli("data prepare --input " + dir + "/docs.jsonl --val-fraction 0.2 --shard-tokens 0 --quiet --out " + dir + "/corpus").rc == 0);
  const std::string tiny = " --d-model 16 --head-dim 8 --depth 4 --prelude 1 --coda 1 --tokens 2000 --seq-len 32 --batch 2 --threads 1 --data " + dir + "/corpus";
  const auto trained = run_cli("train" + tiny + " --out " + dir + "/run");
  INFO(trained.out);
  REQUIRE(trained.rc == 0);
  const auto copy_run = [&](const std::string& name) {
    fs::copy(dir + "/run", dir + "/" + name, fs::copy_options::recursive);
    return dir + "/" + name;
  };

  // A batch of 0 in config.json divided by zero in the validation windows (SIGFPE); the trainer's checks run first now.
  const std::string zero = copy_run("batch0");
  {
    auto cfg = nlohmann::json::parse(std::ifstream(zero + "/config.json"));
    cfg["batch"] = 0;
    std::ofstream(zero + "/config.json") << cfg.dump();
  }
  expect_error("eval " + zero + " --tasks none", "batch must be at least 1");

  // Recurrences past the limit allocated KV caches and activations without bound (bad_alloc, exit 1).
  expect_error("sample " + dir + "/run --prompt hi --max-new 1 --r-eval 100000000000", "above the limit");
  expect_error("eval " + dir + "/run --tasks none --r-eval 5000", "above the limit");

  // A pipe where config.json or checkpoint.bin goes blocked eval and sample for ever.
  const std::string piped = copy_run("piped");
  fs::remove(piped + "/checkpoint.bin");
  REQUIRE(::mkfifo((piped + "/checkpoint.bin").c_str(), 0600) == 0);
  expect_error("eval " + piped + " --tasks none", "not a regular file");
  fs::remove(piped + "/config.json");
  REQUIRE(::mkfifo((piped + "/config.json").c_str(), 0600) == 0);
  expect_error("sample " + piped + " --prompt hi --max-new 1", "not a regular file");

  // A folder where summary.json goes failed after the whole run was trained.
  fs::create_directories(dir + "/blocked/summary.json");
  const auto blocked = run_cli("train" + tiny + " --out " + dir + "/blocked");
  CHECK(blocked.rc == 2);
  CHECK(count_lines(blocked.out) == 1);
  CHECK_THAT(blocked.out, Catch::Contains("summary.json is a folder"));
  CHECK(!fs::exists(dir + "/blocked/checkpoint.bin"));

  // eval --write-builtin into a folder that holds a folder where a task file goes: nothing written.
  fs::create_directories(dir + "/bundle/sort.jsonl");
  expect_error("eval --write-builtin " + dir + "/bundle", "sort.jsonl is a folder");
  CHECK(!fs::exists(dir + "/bundle/bundle.json"));

  // design --fit with a number past double's range (out_of_range, not a parse error: exit 1 before).
  std::ofstream(dir + "/big.json") << "{\"law\": \"looped-moe\", \"params\": {\"c\": 1e400}, \"rmse\": 0.01}";
  expect_error("design --fit " + dir + "/big.json --n-act 1e8 --n-loop 5e7 --expert-params 3e7 --budget 1e19", "is not JSON that loopscale can read");
}

TEST_CASE("cli: a pipe given as an input file is read (process substitution, /dev/stdin)", "[cli][files]") {
  // refuse_folder once refused pipes too, which broke `sweep plan <(jq ...)` and `--config /dev/stdin`.
  const std::string dir = temp_dir("pipe_input");
  const std::string fifo = dir + "/spec.json";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  std::thread writer([&] {
    std::ofstream(fifo) << R"({"name": "piped", "depth": 4, "prelude": 1, "coda": 1, "r": [1, 2], "width_per_s": 16, "width_round": 16,
        "head_dim": 16, "vocab": 256, "seq_len": 32, "batch_tokens": 128, "micro_batch_tokens": 128, "budgets": [{"C": 4e9, "s": [1]}]})";
  });
  const auto r = run_cli("sweep plan " + fifo);
  writer.join();
  INFO(r.out);
  CHECK(r.rc == 0);
  CHECK_THAT(r.out, Catch::Contains("piped"));
}

// Each of these made its folder only to fail there: exit 1 with "filesystem error: cannot create
// directories: Not a directory" after the work began (train, sweep run, sweep merge), "eval: cannot
// make the folder" (eval --write-builtin), or a warning and a script whose folder can never exist
// (sweep slurm, rc 0). Found 4 Dec 2026.
TEST_CASE("cli: an output folder under a file is refused before any work, naming the file", "[cli][files]") {
  const std::string dir = temp_dir("under_file");
  const std::string file = dir + "/afile";
  std::ofstream(file) << "hi\n";
  for (const std::string& sub : {file + "/sub", file + "/a/b"}) {
    const std::string named = sub + ": " + file + " is a file, not a folder";
    expect_error("train --tokens 320 --out " + sub, "--out: " + named);
    expect_error("sweep run --preset smoke --out " + sub, "--out: " + named);
    expect_error("sweep merge --preset smoke --out " + sub + " " + dir, "--out: " + named);
    expect_error("sweep slurm --preset smoke --out " + sub, "--out: " + named);
    expect_error("sweep slurm --preset smoke --out " + sub + " --dry-run", "--out: " + named);
    expect_error("eval --write-builtin " + sub, "--write-builtin: " + named);
    // The same folder as a config file's "out" (not a flag, so not checked as flags are read).
    std::ofstream(dir + "/config.json") << nlohmann::json{{"out", sub}}.dump();
    expect_error("train --tokens 320 --d-model 256 --config " + dir + "/config.json", "--config " + dir + "/config.json: out: " + named);
  }
  expect_error("sweep run --preset smoke --out " + file, "--out: " + file + " is a file, not a folder");  // the file itself, as before
  CHECK(std::filesystem::is_regular_file(file));
  std::filesystem::remove_all(dir);
}

TEST_CASE("cli: a negative value for an unsigned flag is refused (it read as 2^64 - 1)", "[cli][flags]") {
  expect_error("fit --law chinchilla --data /nonexistent.csv --seed -1", "--seed: must not be negative, not -1");
  expect_error("data prepare --input /nonexistent.jsonl --out /tmp/loopscale_never --shard-tokens -5", "--shard-tokens: must not be negative");
  CHECK(!std::filesystem::exists("/tmp/loopscale_never"));
}

// CLI11 reads integers with strtoull and strtoll, which saturate: --seed 18446744073709551616 ran
// as 18446744073709551615, and --d-model 99999999999999999999 was refused as "--d-model
// 9223372036854775807 is above the limit", a number nobody typed. cli::check_integer_options
// refuses them as read, the value as given and the type's range in the line.
TEST_CASE("cli: a whole number past an integer flag's type is refused as given, not saturated", "[cli][flags]") {
  const std::string u64 = " is out of range (0 to 18446744073709551615)", i64 = " is out of range (-9223372036854775808 to 9223372036854775807)";
  expect_error("fit --law chinchilla --data /nonexistent.csv --seed 18446744073709551616", "--seed: 18446744073709551616" + u64);
  expect_error("train --seed 18446744073709551616", "--seed: 18446744073709551616" + u64);
  expect_error("train --mix-probes-seed 99999999999999999999", "--mix-probes-seed: 99999999999999999999" + u64);
  expect_error("data prepare --input /nonexistent.jsonl --out /tmp/loopscale_never --split-seed 18446744073709551616",
               "--split-seed: 18446744073709551616" + u64);
  expect_error("data import --format llmc --train /nonexistent.bin --out /tmp/loopscale_never --shard-tokens 99999999999999999999",
               "--shard-tokens: 99999999999999999999" + u64);
  expect_error("account --d-model 99999999999999999999", "--d-model: 99999999999999999999" + i64);
  expect_error("account --d-model 256 --r -99999999999999999999", "--r: -99999999999999999999" + i64);
  expect_error("account --d-model 256 --recur-layers 99999999999999999999", "--recur-layers: 99999999999999999999" + i64);  // an optional
  expect_error("eval /nonexistent --r-eval 1,99999999999999999999", "--r-eval: 99999999999999999999" + i64);  // a list, entry by entry
  expect_error("optimal --param A=1 --budget 1e18 --r 99999999999999999999", "--r: 99999999999999999999" + i64);
  // An unsigned flag narrower than 64 bits refuses a negative value the same way; past its own
  // range (but within 64 bits) CLI11 says it cannot convert it, naming the flag.
  expect_error("data tokenizer train --input /nonexistent.txt --out /tmp/loopscale_never.model --vocab -1", "--vocab: must not be negative, not -1");
  expect_error("fit --law chinchilla --data /nonexistent.csv --polish 3000000000", "Could not convert: --polish = 3000000000");
  CHECK(!std::filesystem::exists("/tmp/loopscale_never"));
  CHECK(!std::filesystem::exists("/tmp/loopscale_never.model"));
  // The largest value is taken: the command goes on to the missing file.
  expect_error("fit --law chinchilla --data /nonexistent.csv --seed 18446744073709551615", "/nonexistent.csv");
  // A leading zero read as octal (CLI11 reads base 0): --seed 010 was 8, --threads 010 ran 8 threads.
  expect_error("fit --law chinchilla --data /nonexistent.csv --seed 010", "--seed: 010 has a leading zero, which would read as an octal number");
  expect_error("account --d-model 0256", "--d-model: 0256 has a leading zero");
  expect_error("fit --law chinchilla --data /nonexistent.csv --seed 0", "/nonexistent.csv");  // 0 itself is fine
  expect_error("fit --law chinchilla --data /nonexistent.csv --seed 0x10", "/nonexistent.csv");  // hexadecimal says what it is
}

// CLI::Range compares with < and >, which NaN passes: --level nan failed later as "the interval
// level must be in (0, 1)", naming no flag (4 Dec 2026, evening). cli::number_in refuses it as read.
TEST_CASE("cli: a real-number flag that is NaN or out of range is refused as read, naming the flag", "[cli][flags]") {
  const std::string dir = temp_dir("level");
  for (const char* level : {"nan", "inf", "0.3", "1", "x"}) {
    expect_error(std::string("sweep report ") + dir + " --level " + level, std::string("--level: must be a number from 0.5 to 0.999, not '") + level + "'");
    expect_error(std::string("sweep compare ") + dir + " " + dir + " --level " + level, "--level: must be a number from 0.5 to 0.999");
  }
}

TEST_CASE("cli: a JSON file nested past the depth limit is refused at parse time, naming the file", "[cli][json]") {
  // 100000 levels: nlohmann parses them, then dumping one into an error message (or copying it)
  // recursed past the stack, a SIGSEGV (exit 139); 5000 levels were refused properly.
  const auto dir = temp_dir("deep_json");
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  const auto spec = nlohmann::json::parse(run_cli("account --json --d-model 256 --vocab 256 --seq-len 256").out).at("spec");
  const auto write = [&](const std::string& name, const std::string& text) {
    std::ofstream(dir + "/" + name) << text;
    return dir + "/" + name;
  };
  const std::string good = write("spec.json", spec.dump());
  for (const std::string& text : {deep, "{\"spec\":" + deep + "}"}) {
    const std::string f = write("deep.json", text);
    expect_error("account --compare " + f + " " + good, "--compare: " + f + ": JSON nested deeper than 128 levels");
  }
  expect_error("sweep plan " + write("budgets.json", "{\"budgets\":[" + deep + "]}"), "JSON nested deeper than 128 levels");
  expect_error("sweep plan " + write("name.json", "{\"name\":" + deep + "}"), "JSON nested deeper than 128 levels");
  // Under the limit, a bad value is described briefly, not dumped whole.
  const std::string shallow = std::string(100, '[') + std::string(100, ']');
  const auto r = run_cli("sweep plan " + write("shallow.json", "{\"budgets\":[" + shallow + "]}"));
  CHECK(r.rc == 2);
  CHECK(count_lines(r.out) == 1);
  CHECK(r.out.find("a deeply nested array") != std::string::npos);
}

TEST_CASE("cli: account --compare refuses a fraction or an out-of-range number in an integer field of a spec, naming the field",
          "[cli][json]") {
  // They were truncated (256.5 counted as 256, r 2.99 as 2, exit 0) or undefined (1e300).
  const auto dir = temp_dir("whole_fields");
  const auto spec = nlohmann::json::parse(run_cli("account --json --d-model 256 --vocab 256 --seq-len 256").out).at("spec");
  const std::string good = dir + "/spec.json";
  std::ofstream(good) << spec.dump();
  const auto check = [&](const char* field, const std::function<void(nlohmann::json&)>& mutate) {
    nlohmann::json bad = spec;
    mutate(bad);
    const std::string f = dir + "/bad.json";
    std::ofstream(f) << bad.dump();
    expect_error("account --compare " + f + " " + good, std::string("field '") + field + "' must be a whole number");
  };
  check("d_model", [](nlohmann::json& j) { j["d_model"] = 256.5; });
  check("vocab", [](nlohmann::json& j) { j["vocab"] = 1e300; });
  check("d_model", [](nlohmann::json& j) { j["d_model"] = nlohmann::json::parse("9223372036854775808"); });
  check("r", [](nlohmann::json& j) { j["recur"]["r"] = 2.99; });
  check("mult_num", [](nlohmann::json& j) { j["prelude"]["layer"]["ffn"]["mult_num"] = 3.7; });
  check("heads", [](nlohmann::json& j) { j["coda"]["layer"]["attn"]["heads"] = 2.5; });
  // A whole number written as a float is that number.
  nlohmann::json whole = spec;
  whole["d_model"] = 256.0;
  std::ofstream(dir + "/whole.json") << whole.dump();
  CHECK(run_cli("account --compare " + dir + "/whole.json " + good).rc == 0);
}

TEST_CASE("cli: --mlp-mult that is not a multiple of 0.001 with a small fraction is refused, naming the flag and the rule", "[cli][flags]") {
  // 2.0004 became 2 silently; 2.71828 was refused as "mult_num = 1359 is above the limit 256".
  for (const char* v : {"2.0004", "2.71828", "2.667"})
    expect_error(std::string("account --d-model 384 --mlp-mult ") + v,
                 std::string("--mlp-mult ") + v + " must be a multiple of 0.001 whose fraction in lowest terms");
  CHECK(run_cli("account --d-model 384 --mlp-mult 2.75").rc == 0);
}

// Found 5 Dec 2026: `train --dry-run` checked the config, corpus and memory but not the run folder,
// so it said yes (exit 0) to a finished run without --resume, a resume with another recipe or other
// threads, and a folder another process was training in, all of which the run itself refuses.
TEST_CASE("cli: train --dry-run refuses what the run refuses in its run folder: a run without --resume, another recipe, a folder in use",
          "[cli][train]") {
  const std::string dir = temp_dir("dry_run_folder");
  {
    std::ofstream docs(dir + "/docs.jsonl");
    for (int i = 0; i < 300; ++i) docs << "{\"text\": \"" << i << " the quick brown fox jumps over the lazy dog, again and again.\"}\n";
  }
  REQUIRE(run_cli("data prepare --input " + dir + "/docs.jsonl --val-fraction 0.2 --shard-tokens 0 --quiet --out " + dir + "/corpus").rc == 0);
  const std::string base = "train --d-model 16 --head-dim 8 --depth 4 --prelude 1 --coda 1 --tokens 2000 --seq-len 32 --batch 2 --data " +
                           dir + "/corpus --out " + dir + "/run";
  const std::string tiny = base + " --threads 1";
  // A folder that does not exist yet is fine, and a dry run makes none.
  REQUIRE(run_cli(tiny + " --dry-run").rc == 0);
  CHECK(!std::filesystem::exists(dir + "/run"));
  const auto trained = run_cli(tiny);
  INFO(trained.out);
  REQUIRE(trained.rc == 0);
  expect_error(tiny + " --dry-run", "already holds a run; pass --resume");
  expect_error(tiny + " --resume --recipe paper --dry-run", "it was trained with the adamw recipe, not paper");
  expect_error(base + " --resume --threads 2 --dry-run", "the run was started with a different 'threads'");
  CHECK(run_cli(tiny + " --resume --dry-run").rc == 0);  // the same settings: a resume the run would take
  {
    const loopscale::FileLock held = loopscale::FileLock::acquire(dir + "/run/.lock", "the test");
    expect_error(tiny + " --resume --dry-run", "is in use by process");
  }
  CHECK(run_cli(tiny + " --resume --dry-run").rc == 0);
  // It takes no lock and writes nothing: an existing folder without a lock file keeps none.
  std::filesystem::create_directories(dir + "/empty");
  const std::string empty = "train --d-model 16 --head-dim 8 --depth 4 --prelude 1 --coda 1 --tokens 2000 --seq-len 32 --batch 2 --threads 1 --data " +
                            dir + "/corpus --out " + dir + "/empty --dry-run";
  CHECK(run_cli(empty).rc == 0);
  CHECK(std::filesystem::is_empty(dir + "/empty"));
  std::filesystem::remove_all(dir);
}

// Found by a bad-input hunt on 5 Dec 2026 (F4): a pipe that no process writes to (a `mkfifo` left
// alone) blocked design --fit, account --compare, sweep plan and train --config for ever, and a
// device (/dev/zero) read without end. A pipe with a writer is still read (the test above, and
// account --compare here).
TEST_CASE("cli: a pipe no process writes to, or a device, given as a JSON input file is refused at once", "[cli][files]") {
  const std::string dir = temp_dir("fifo_input");
  const std::string fifo = dir + "/in.json";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  const std::string alone = fifo + " is a pipe that no process writes to";
  const auto spec = nlohmann::json::parse(run_cli("account --json --d-model 256 --vocab 256 --seq-len 256").out).at("spec");
  const std::string good = dir + "/spec.json";
  std::ofstream(good) << spec.dump();
  expect_error("design --fit " + fifo + " --n-act 6e8 --n-loop 2e8 --expert-params 4e8 --budget 1e23", "design: --fit " + alone);
  expect_error("account --compare " + fifo + " " + good, "--compare: " + alone);
  expect_error("account --compare " + good + " " + fifo, "--compare: " + alone);
  expect_error("sweep plan " + fifo, "the spec file " + alone);
  expect_error("train --tokens 320 --d-model 16 --dry-run --config " + fifo, "--config: " + alone);
  for (const char* device : {"/dev/zero", "/dev/null"}) {
    const std::string named = std::string(device) + " is not a regular file (a device or socket)";
    expect_error("design --fit " + std::string(device) + " --n-act 6e8 --n-loop 2e8 --expert-params 4e8 --budget 1e23", named);
    expect_error("account --compare " + std::string(device) + " " + good, named);
  }
  // The same pipe with a writer is read.
  std::thread writer([&] { std::ofstream(fifo) << spec.dump(); });
  const auto r = run_cli("account --compare " + fifo + " " + good);
  writer.join();
  INFO(r.out);
  CHECK(r.rc == 0);
  CHECK_THAT(r.out, Catch::Contains("iso-depth"));
}

TEST_CASE("cli: optimal refuses --r for a law that has no r", "[cli][law]") {
  // --r 4 was ignored and the table printed r = 1 rows (rc 0).
  const std::string chinchilla = "optimal --law chinchilla --param E=1.69 --param A=406.4 --param B=410.7 --param alpha=0.34 --param beta=0.28 "
                                 "--budget 1e20 --budget 1e21 ";
  expect_error(chinchilla + "--r 4", "optimal: law chinchilla has no r");
  expect_error(chinchilla + "--r 1", "optimal: law chinchilla has no r");
  const auto ok = run_cli(chinchilla);
  INFO(ok.out);
  CHECK(ok.rc == 0);
}

TEST_CASE("cli: account --compare refuses every spec and routing flag, naming it", "[cli][account]") {
  // Only --d-model, --r and --experts were refused; the rest were ignored (rc 0).
  const std::string dir = temp_dir("compare_flags");
  const std::string a = dir + "/a.json";
  std::ofstream(a) << nlohmann::json::parse(run_cli("account --json --d-model 512 --r 4 --depth 12").out).at("spec").dump();
  const std::string compare = "account --compare " + a + " " + a + " ";
  for (const std::string flag : {"--vocab 5", "--activation swiglu", "--depth 40", "--heads 4", "--router sigmoid", "--shared-expert",
                                  "--no-renormalize", "--recur-layers 2", "--inject additive", "--moe-layers recur", "--d-model 512"})
    expect_error(compare + flag, "--compare reads both specs from files; drop " + flag.substr(0, flag.find(' ')));
  CHECK(run_cli(compare).rc == 0);
  CHECK(run_cli(compare + "--seq-len 1024 --convention causal").rc == 0);  // the comparison's own flags
}

TEST_CASE("cli: account refuses a --depth that contradicts --recur-layers, naming both", "[cli][account]") {
  // --depth was ignored once --recur-layers set the block: "effective depth 16", rc 0.
  expect_error("account --d-model 512 --r 4 --depth 20 --recur-layers 3",
               "--depth 20 contradicts --recur-layers 3: the effective depth is prelude + recur-layers x r + coda = 2 + 3 x 4 + 2 = 16");
  expect_error("account --d-model 512 --r 4 --depth 20 --recur-layers 99999", "--depth 20 contradicts --recur-layers 99999");
  expect_error("train --tokens 320 --d-model 16 --heads 1 --r 2 --depth 8 --recur-layers 1 --dry-run", "--depth 8 contradicts --recur-layers 1");
  // Values that agree, and either flag alone, are accepted.
  const auto agree = run_cli("account --d-model 512 --r 4 --depth 16 --recur-layers 3");
  INFO(agree.out);
  CHECK(agree.rc == 0);
  CHECK_THAT(agree.out, Catch::Contains("effective depth 16"));
  CHECK(run_cli("account --d-model 512 --r 4 --recur-layers 3").rc == 0);
  CHECK(run_cli("account --d-model 512 --r 4 --depth 12").rc == 0);
}

TEST_CASE("cli: account --compare reads a train config's seq_len as a whole number and names a spec field of the wrong kind",
          "[cli][account][json]") {
  const std::string dir = temp_dir("compare_seq_len");
  const auto spec = nlohmann::json::parse(run_cli("account --json --d-model 256 --vocab 256 --seq-len 256").out).at("spec");
  const std::string good = dir + "/spec.json";
  std::ofstream(good) << spec.dump();
  const auto write = [&](const nlohmann::json& j) {
    std::ofstream(dir + "/bad.json") << j.dump();
    return "account --compare " + dir + "/bad.json " + good;
  };
  // 4096.5 was read as 4096 (rc 0), 1e300 refused as "must be at least 1", "4096" as nlohmann's type_error.
  for (const nlohmann::json& t : {nlohmann::json(4096.5), nlohmann::json(1e300), nlohmann::json("4096")})
    expect_error(write({{"spec", spec}, {"seq_len", t}}), ": seq_len must be a whole number that fits in 64 bits, not " + t.dump());
  expect_error(write({{"spec", spec}, {"seq_len", 0}}), ": seq_len must be at least 1, not 0");
  CHECK_THAT(run_cli(write({{"spec", spec}, {"seq_len", 4096.0}})).out, Catch::Contains("seq_len 4096"));
  // A field of another kind named no field: "[json.exception.type_error.302] type must be number, but is string".
  const auto field = [&](const nlohmann::json::json_pointer& at, const nlohmann::json& v, const std::string& text) {
    nlohmann::json bad = spec;
    bad[at] = v;
    const auto r = run_cli(write(bad));
    expect_error(write(bad), text);
    CHECK(r.out.find("json.exception") == std::string::npos);
  };
  field("/d_model"_json_pointer, "512", "spec: model field 'd_model' must be a number, not \"512\"");
  field("/prelude/layer/ffn/act"_json_pointer, 5, "spec: ffn field 'act' must be a string, not 5");
  field("/coda/layer/attn/rope"_json_pointer, 1, "spec: attn field 'rope' must be true or false, not 1");
  field("/recur/state_norm"_json_pointer, nullptr, "spec: recur field 'state_norm' must be a string, not null");
}

TEST_CASE("cli: design refuses routed experts of no parameters", "[cli][law]") {
  // --expert-params 0 chose E = 16 experts that hold nothing, for a lower predicted loss (rc 0).
  const std::string zero = design + "--param E_start=1 --param E_max=1e5 ";
  const std::string no_experts = replace_all(zero, "--expert-params 5e7", "--expert-params 0");
  expect_error(no_experts, "design: expert params 0 with E = 2: routed experts of no parameters");
  const auto dense = run_cli(no_experts + "--E 1");  // a dense design has no experts to size
  INFO(dense.out);
  CHECK(dense.rc == 0);
}

TEST_CASE("cli: equivalent refuses --vocab without --d-model, as it refuses --injection", "[cli][law]") {
  const std::string sizes = "equivalent --param phi=0.459 --n-once 2e8 --n-rec 2e8 --r 4 ";
  expect_error(sizes + "--vocab 5", "equivalent: --vocab goes with --d-model");
  expect_error(sizes + "--injection once", "equivalent: --injection goes with --d-model");
  CHECK(run_cli(sizes).rc == 0);
  CHECK(run_cli("equivalent --param phi=0.459 --d-model 512 --r 4 --vocab 256").rc == 0);
}

TEST_CASE("cli: design --fit that is empty or holds a number past a double names the file and the field", "[cli][law][json]") {
  // Both were exit 2 with nlohmann's own text: "[json.exception.parse_error.101] ...", "[json.exception.out_of_range.406] ...".
  const std::string dir = temp_dir("fit_text");
  const std::string space = " --n-act 6e8 --n-loop 2e8 --expert-params 4e8 --budget 1e23";
  std::ofstream(dir + "/empty.json").close();
  expect_error("design --fit " + dir + "/empty.json" + space, "design: --fit " + dir + "/empty.json is not JSON that loopscale can read (the file is empty;");
  std::ofstream(dir + "/rmse.json") << R"({"law": "looped-moe", "params": {"c": 1.6}, "rmse": 1e400})";
  expect_error("design --fit " + dir + "/rmse.json" + space,
               "design: --fit " + dir + "/rmse.json is not JSON that loopscale can read (at the value of \"rmse\": number overflow parsing '1e400';");
  for (const char* f : {"/empty.json", "/rmse.json"})
    CHECK(run_cli("design --fit " + dir + f + space).out.find("json.exception") == std::string::npos);
}
