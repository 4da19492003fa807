// The learning test: a small looped model (r = 2, linear injection) trained for a few hundred steps
// on the real corpus (scripts/corpus.sh; built here if it is missing) must bring validation bits per
// byte well below the corpus's unigram entropy, i.e. it learns more than byte frequencies.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>

#include <unistd.h>

#include "loopscale/train/trainer.hpp"

using namespace loopscale;
using namespace loopscale::train;
namespace fs = std::filesystem;

TEST_CASE("learning: a looped r = 2 model beats the corpus's unigram entropy by far", "[train][learning]") {
  const fs::path root = LOOPSCALE_SOURCE_DIR;
  const fs::path corpus = root / "data" / "corpus";
  if (!fs::exists(corpus / "meta.json")) REQUIRE(std::system(("bash " + (root / "scripts" / "corpus.sh").string()).c_str()) == 0);
  std::ifstream mf(corpus / "meta.json");
  const double entropy = nlohmann::json::parse(mf).at("unigram_entropy_bits_per_byte").get<double>();
  REQUIRE(entropy > 4.0);  // English bytes: about 4.8 bits

  TrainConfig c;
  c.spec.d_model = 128;
  c.spec.vocab = 256;
  LayerSpec l;
  l.attn.heads = 2;
  c.spec.prelude = {1, l};
  c.spec.coda = {1, l};
  c.spec.recur.block = {2, l};
  c.spec.recur.r = 2;
  c.spec.recur.inject = {Inject::linear, 0};
  c.batch = 8;
  c.seq_len = 128;
  c.tokens = 320 * 8 * 128;  // 320 steps: well past the plateau near the unigram entropy
  c.lr = 3e-3;
  c.warmup = 0.02;
  c.eval_tokens = 1 << 16;
  c.threads = 2;
  c.data = corpus.string();
  c.out = (fs::temp_directory_path() / ("loopscale_learning_" + std::to_string(getpid()))).string();
  fs::remove_all(c.out);
  const TrainResult r = train::train(c);
  std::cout << "learning test: val_bpb " << r.val_bpb << " (unigram entropy " << entropy << "), " << r.tokens << " tokens in "
            << r.seconds << " s, " << r.tokens_per_s << " tokens/s, mfu " << r.mfu << "\n";
  fs::remove_all(c.out);
  REQUIRE(r.status == "done");
  REQUIRE(r.val_bpb < entropy - 0.9);
}
