// Load balancing of a looped MoE model on the real corpus (scripts/corpus.sh; built here if it is
// missing): over the last steps of a short run the busiest expert takes less than twice the slots
// of the idlest with either balancing method, and far more without balancing, where a few experts
// win the router early and keep winning. The load is summed over the last 25 steps: the bias
// method balances on average, with experts taking turns from step to step (docs/moe.md).
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <map>

#include <unistd.h>

#include "loopscale/train/trainer.hpp"
#include "real_corpus.hpp"

using namespace loopscale;
using namespace loopscale::train;
namespace fs = std::filesystem;

namespace {

// The worst layer's max/min expert load, loads summed over the last `last` steps of log.jsonl
// (infinite when an expert got nothing in all of them).
double late_max_min(const fs::path& log, int last) {
  std::vector<nlohmann::json> lines;
  std::ifstream f(log);
  std::string line;
  while (std::getline(f, line))
    if (!line.empty()) lines.push_back(nlohmann::json::parse(line));
  REQUIRE(static_cast<int>(lines.size()) >= last);
  std::map<std::string, std::vector<double>> load;
  for (std::size_t i = lines.size() - static_cast<std::size_t>(last); i < lines.size(); ++i)
    for (const auto& [layer, l] : lines[i].at("moe").at("load").items()) {
      auto& sum = load[layer];
      sum.resize(l.size());
      for (std::size_t e = 0; e < l.size(); ++e) sum[e] += l[e].get<double>();
    }
  double worst = 1;
  for (const auto& [layer, sum] : load) {
    const auto [lo, hi] = std::minmax_element(sum.begin(), sum.end());
    worst = std::max(worst, *lo > 0 ? *hi / *lo : std::numeric_limits<double>::infinity());
  }
  return worst;
}

}  // namespace

TEST_CASE("moe balancing: on the corpus, max/min expert load below 2 with balancing", "[train][moe][balance]") {
  const fs::path corpus = loopscale::test::real_corpus();

  TrainConfig c;
  c.spec.d_model = 32;
  c.spec.vocab = 256;
  LayerSpec l;
  l.attn.heads = 2;
  l.ffn.experts = 8;
  l.ffn.top_k = 2;
  l.ffn.hidden = 64;
  c.spec.prelude = {1, l};
  c.spec.coda = {1, l};
  c.spec.recur.block = {1, l};
  c.spec.recur.r = 2;
  c.spec.recur.inject = {Inject::linear, 0};
  c.batch = 8;
  c.seq_len = 64;
  c.tokens = 150 * 8 * 64;  // 150 steps
  c.lr = 3e-3;
  c.eval_tokens = 4096;
  c.threads = 1;  // ctest runs tests side by side: one thread each is faster than two oversubscribed
  c.peak_flops = 1e11;
  c.data = corpus.string();

  double ratio[3] = {0, 0, 0};
  // Coefficients for a short run: the common aux 0.01 needs far more than 150 steps here.
  const char* balance[3] = {"none", "aux:0.1", "bias:0.01"};
  for (int i = 0; i < 3; ++i) {
    c.moe_balance = balance[i];
    c.out = (fs::temp_directory_path() / ("loopscale_moe_balance_" + std::to_string(i) + "_" + std::to_string(getpid()))).string();
    fs::remove_all(c.out);
    const TrainResult r = train::train(c);
    REQUIRE(r.status == "done");
    ratio[i] = late_max_min(fs::path(c.out) / "log.jsonl", 25);
    std::cout << "moe balancing on the corpus: balance " << balance[i] << ": max/min expert load " << ratio[i]
              << " (last 25 steps, worst layer), val_bpb " << r.val_bpb << ", " << r.seconds << " s\n";
    fs::remove_all(c.out);
  }
  CHECK(ratio[1] < 2.0);
  CHECK(ratio[2] < 2.0);
  CHECK(ratio[0] > 2 * std::max(ratio[1], ratio[2]));
}
