// The learning tests: a small looped model (r = 2, linear injection) trained for a few hundred steps
// on the real corpus (scripts/corpus.sh; built here if it is missing) must bring validation bits per
// byte well below the corpus's unigram entropy, i.e. it learns more than byte frequencies; once with
// the adamw recipe and once with the paper's (MuonH + AdamW, its initialisation), same model, steps,
// tokens and seed. Each prints its validation loss and wall time: docs/training.md's comparison.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>

#include <unistd.h>

#include "loopscale/train/trainer.hpp"
#include "real_corpus.hpp"

using namespace loopscale;
using namespace loopscale::train;
namespace fs = std::filesystem;

namespace {

// The corpus folder, built if missing, and its unigram entropy in bits per byte.
std::pair<fs::path, double> corpus() {
  const fs::path dir = loopscale::test::real_corpus();
  std::ifstream mf(dir / "meta.json");
  const double entropy = nlohmann::json::parse(mf).at("unigram_entropy_bits_per_byte").get<double>();
  REQUIRE(entropy > 4.0);  // English bytes: about 4.8 bits
  return {dir, entropy};
}

// The learning test's model and length with the recipe's optimiser settings.
TrainConfig learning_config(Recipe recipe, const fs::path& data) {
  TrainConfig c = recipe_defaults(recipe);
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
  c.eval_tokens = 1 << 16;
  c.threads = 2;
  c.data = data.string();
  c.out = (fs::temp_directory_path() / ("loopscale_learning_" + c.recipe + "_" + std::to_string(getpid()))).string();
  fs::remove_all(c.out);
  return c;
}

TrainResult run(const TrainConfig& c, double entropy) {
  const TrainResult r = train::train(c);
  std::cout << "learning test, " << c.recipe << " recipe: val_loss " << r.val_loss << " nats/token, val_bpb " << r.val_bpb
            << " (unigram entropy " << entropy << "), " << r.tokens << " tokens in " << r.seconds << " s, " << r.tokens_per_s
            << " tokens/s, mfu " << r.mfu << "\n";
  fs::remove_all(c.out);
  return r;
}

}  // namespace

TEST_CASE("learning: a looped r = 2 model beats the corpus's unigram entropy by far", "[train][learning]") {
  const auto [data, entropy] = corpus();
  TrainConfig c = learning_config(Recipe::adamw, data);
  c.lr = 3e-3;
  c.warmup = 0.02;
  const TrainResult r = run(c, entropy);
  REQUIRE(r.status == "done");
  REQUIRE(r.val_bpb < entropy - 0.9);
}

TEST_CASE("learning: the paper recipe (MuonH + AdamW) on the same model, steps, tokens and seed", "[train][learning][recipe]") {
  const auto [data, entropy] = corpus();
  const TrainResult r = run(learning_config(Recipe::paper, data), entropy);
  REQUIRE(r.status == "done");
  REQUIRE(r.val_bpb < entropy - 0.9);
}
