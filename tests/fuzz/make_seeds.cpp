// Writes the binary seeds of the fuzz corpora with the library's own writers, so they follow the
// formats when these change: a checkpoint (fuzz_checkpoint/) and token files of 1, 2 and 4 bytes
// per token (fuzz_token_file/). scripts/fuzz.sh runs it before fuzzing; the copies under
// tests/fuzz/corpus/ were written by it (`fuzz_make_seeds tests/fuzz/corpus`).
#include <cstdio>
#include <filesystem>
#include <vector>

#include <nlohmann/json.hpp>

#include "loopscale/data/token_file.hpp"
#include "loopscale/train/checkpoint.hpp"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: fuzz_make_seeds CORPUS_DIR\n");
    return 2;
  }
  const std::filesystem::path root = argv[1];
  std::filesystem::create_directories(root / "fuzz_token_file");
  std::filesystem::create_directories(root / "fuzz_checkpoint");

  const std::vector<std::int32_t> bytes = {72, 101, 108, 108, 111, 10, 0, 255};
  loopscale::data::write_token_file((root / "fuzz_token_file/bytes-1.bin").string(), bytes, 256, 1);
  loopscale::data::write_token_file((root / "fuzz_token_file/vocab4k-2.bin").string(), std::vector<std::int32_t>{1, 4095, 17, 300}, 4096, 2, 11);
  loopscale::data::write_token_file((root / "fuzz_token_file/vocab100k-4.bin").string(), std::vector<std::int32_t>{99999, 0, 65536}, 100000, 4, 0);
  loopscale::data::write_token_file((root / "fuzz_token_file/empty.bin").string(), std::vector<std::int32_t>{}, 256, 1);

  // The meta of a real run is larger; these keys are the ones a resume reads first.
  const nlohmann::json meta = {{"step", 3}, {"tokens", 384}, {"seed", 1}, {"recipe", "adamw"}, {"optimizer_steps", 3}};
  const std::vector<float> params = {0.5f, -1.25f, 3.0f}, m = {0.1f, 0.2f, 0.3f}, v = {0.01f, 0.02f, 0.03f};
  loopscale::train::save_checkpoint<float>(root / "fuzz_checkpoint/tiny.ckpt", meta, params, m, v);
  loopscale::train::save_checkpoint<float>(root / "fuzz_checkpoint/empty.ckpt", nlohmann::json::object(), std::vector<float>{},
                                           std::vector<float>{}, std::vector<float>{});
  return 0;
}
