// Replays inputs through the fuzz harnesses without libFuzzer, with any compiler: the regression
// test of every finding (tests/fuzz/regressions/<harness>/) and a check that the seeds
// (tests/fuzz/corpus/<harness>/) still run, in the normal build and its ctest.
//   fuzz_replay HARNESS PATH...   each PATH a file, or a folder whose files are fed one by one
// A finding shows as it did under the fuzzer: an exception the reader does not promise escapes
// (std::terminate), or a crash; the file being fed is printed first, so the log names it.
// A PATH that does not exist, or a run that feeds no input at all, exits 1: a mistyped or moved
// folder passed as "0 inputs replayed". The one exception is a harness's regressions folder
// (regressions/<harness>/), which git does not keep while it is empty, so a clone may lack it.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#define LOOPSCALE_FUZZ_REPLAY 1
#include "fuzz_bundle.cpp"
#include "fuzz_checkpoint.cpp"
#include "fuzz_results_jsonl.cpp"
#include "fuzz_runs_csv.cpp"
#include "fuzz_runs_jsonl.cpp"
#include "fuzz_sweep_spec.cpp"
#include "fuzz_token_file.cpp"
#include "fuzz_train_config.cpp"

namespace fs = std::filesystem;

int main(int argc, char** argv) {
  using Fn = int (*)(const std::uint8_t*, std::size_t);
  const std::map<std::string, Fn> harnesses = {
      {"fuzz_bundle", fuzz_bundle::one},         {"fuzz_checkpoint", fuzz_checkpoint::one},
      {"fuzz_results_jsonl", fuzz_results_jsonl::one}, {"fuzz_runs_csv", fuzz_runs_csv::one},
      {"fuzz_runs_jsonl", fuzz_runs_jsonl::one}, {"fuzz_sweep_spec", fuzz_sweep_spec::one},
      {"fuzz_token_file", fuzz_token_file::one}, {"fuzz_train_config", fuzz_train_config::one}};
  if (argc < 3 || !harnesses.count(argv[1])) {
    std::fprintf(stderr, "usage: fuzz_replay HARNESS PATH...   (HARNESS: fuzz_checkpoint, fuzz_results_jsonl, ...)\n");
    return 2;
  }
  const Fn one = harnesses.at(argv[1]);
  const auto regressions_folder = [](fs::path p) {
    p = p.lexically_normal();
    if (p.filename().empty()) p = p.parent_path();  // a trailing '/'
    return p.parent_path().filename() == "regressions";
  };
  std::vector<fs::path> files;
  for (int i = 2; i < argc; ++i) {
    const fs::path p = argv[i];
    if (fs::is_directory(p)) {
      for (const auto& e : fs::directory_iterator(p))
        if (e.is_regular_file() && e.path().filename() != "README.md") files.push_back(e.path());
    } else if (fs::exists(p)) {
      files.push_back(p);
    } else if (!regressions_folder(p)) {
      std::fprintf(stderr, "%s: %s does not exist\n", argv[1], p.c_str());
      return 1;
    }
  }
  if (files.empty()) {
    std::fprintf(stderr, "%s: no input to replay in the paths given\n", argv[1]);
    return 1;
  }
  std::sort(files.begin(), files.end());
  for (const fs::path& f : files) {
    std::fprintf(stderr, "%s: %s\n", argv[1], f.c_str());
    std::ifstream in(f, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    one(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
  }
  std::printf("%s: %zu inputs replayed\n", argv[1], files.size());
  return 0;
}
