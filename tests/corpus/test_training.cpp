// The corpus side of training: a sharded SentencePiece corpus trains, with the windows of the same
// corpus in one file; the run records its tokenizer; the model's vocabulary must be the corpus's;
// a corpus several times larger than the trainer's peak resident memory leaves that peak flat.
#include <catch2/catch.hpp>

#include <cstdio>

#include "cli/run_cli.hpp"
#include "corpus/helpers.hpp"
#include "corpus/tiny_run.hpp"
#include "loopscale/data/prepare.hpp"
#include "loopscale/data/tokenizer_train.hpp"
#include "loopscale/train/trainer.hpp"

using namespace loopscale;
using namespace loopscale::data;
using namespace loopscale::test;

namespace {

train::TrainConfig tiny(const fs::path& data, const fs::path& out, std::int64_t vocab) { return tiny_run(data, out, vocab); }

std::vector<std::string> log_lines(const fs::path& p) {
  std::vector<std::string> v;
  std::ifstream f(p);
  std::string line;
  while (std::getline(f, line)) {
    auto j = nlohmann::json::parse(line);
    for (const char* k : {"tokens_per_s", "mfu", "seconds"}) j.erase(k);
    v.push_back(j.dump());
  }
  return v;
}

}  // namespace

TEST_CASE("training: a sharded SentencePiece corpus trains like the same corpus in one file, and the run records its tokenizer",
          "[corpus][training]") {
  const fs::path dir = temp_dir("train_spm");
  std::ofstream f(dir / "docs.jsonl");
  for (int i = 0; i < 500; ++i) f << nlohmann::json{{"text", document(i)}}.dump() << "\n";
  f.close();
  TokenizerTrainOptions to;
  to.input.paths = {(dir / "docs.jsonl").string()};
  to.vocab = 450;
  write_text(dir / "tok.model", train_tokenizer(to).model);
  std::vector<std::vector<std::string>> logs;
  for (const std::uint64_t shard : {0ull, 500ull}) {
    PrepareOptions o;
    o.input.paths = to.input.paths;
    o.tokenizer = (dir / "tok.model").string();
    o.out = dir / ("c" + std::to_string(shard));
    o.split = {0.15, 3};
    o.shard_tokens = shard;
    const Manifest m = prepare_corpus(o).manifest;
    if (shard > 0) REQUIRE(m.train.shards.size() > 5);
    const fs::path out = dir / ("run" + std::to_string(shard));
    const train::TrainResult r = train::train(tiny(o.out, out, 450));
    REQUIRE(r.status == "done");
    REQUIRE(std::isfinite(r.val_bpb));
    REQUIRE(r.val_bpb > 0);
    logs.push_back(log_lines(out / "log.jsonl"));
    // config.json and the checkpoint name the tokenizer by path and checksum.
    const auto cfg = nlohmann::json::parse(slurp(out / "config.json"));
    REQUIRE(cfg.at("tokenizer").at("kind") == "sentencepiece");
    REQUIRE(cfg.at("tokenizer").at("checksum") == m.tokenizer.checksum);
    REQUIRE(cfg.at("tokenizer").at("vocab") == 450);
    REQUIRE(fs::equivalent(cfg.at("tokenizer").at("path").get<std::string>(), o.out / "tokenizer.model"));
    REQUIRE(cfg.at("tokenizer").at("checksum") == file_checksum(cfg.at("tokenizer").at("path").get<std::string>()));
    // A recorded config reads back as a config.
    REQUIRE(train::config_from_json(cfg).seed == 1);
    const auto ckpt = train::load_checkpoint<float>(out / "checkpoint.bin");
    REQUIRE(ckpt.meta.at("tokenizer") == cfg.at("tokenizer"));
  }
  REQUIRE(logs[0].size() == 12);
  REQUIRE(logs[0] == logs[1]);  // the same windows, the same losses, bit for bit

  // Resuming a run on a corpus made with another tokenizer is refused.
  // Another tokenizer of the same vocabulary: trained on another sample of the documents (the
  // unigram trainer cannot reach 450 pieces on them).
  to.split = {0.5, 11};
  write_text(dir / "tok2.model", train_tokenizer(to).model);
  PrepareOptions o2;
  o2.input.paths = to.input.paths;
  o2.tokenizer = (dir / "tok2.model").string();
  o2.out = dir / "other";
  o2.split = {0.15, 3};
  prepare_corpus(o2);
  train::TrainConfig c = tiny(o2.out, dir / "run0", 450);
  c.resume = true;  // the same config: only the corpus differs
  REQUIRE_THROWS_WITH(train::train(c), Catch::Contains("tokenizer"));
  fs::remove_all(dir);
}

TEST_CASE("training: the model's vocabulary must be the corpus's (padded to the multiple) and hold its every id", "[corpus][training]") {
  const fs::path dir = temp_dir("train_vocab");
  std::vector<std::int32_t> t(5000);
  for (std::size_t i = 0; i < t.size(); ++i) t[i] = static_cast<std::int32_t>(i % 300);
  write_token_file((dir / "train.bin").string(), t, 300, 2);
  write_token_file((dir / "val.bin").string(), t, 300, 2);
  // 300 and 320 pad to the same 320 embedding rows: accepted; 256 pads to 256: refused.
  REQUIRE(train::train(tiny(dir, dir / "ok", 320)).status == "done");
  REQUIRE_THROWS_WITH(train::train(tiny(dir, dir / "bad", 256)),
                      Catch::Contains("the model's vocab 256 does not match the corpus") && Catch::Contains("train.bin") &&
                          Catch::Contains("give the model vocab 300"));
  // 290 pads to 320 too, but the corpus's ids 290 to 299 would be targets outside its softmax.
  REQUIRE_THROWS_WITH(train::train(tiny(dir, dir / "short", 290)),
                      Catch::Contains("the model's vocab 290 does not match the corpus") && Catch::Contains("give the model vocab 300"));
  fs::remove_all(dir);
}

TEST_CASE("training: a corpus several times larger than the trainer's peak resident memory leaves that peak flat", "[corpus][memory]") {
  const fs::path dir = temp_dir("rss");
  // Two corpora of random tokens (vocab 512, 2 bytes each): 2 MB and 192 MB in 64 MB shards.
  const auto make = [&](const fs::path& out, std::uint64_t tokens) {
    fs::create_directories(out);
    SplitMix64 r{42};
    Manifest m;
    m.vocab = m.tokenizer.vocab = 512;
    m.tokenizer.kind = "external";
    m.token_bytes = 2;
    std::vector<std::int32_t> buf(1 << 20);
    for (int s = 0; s < 2; ++s) {
      ShardWriter w(out, s == 0 ? "train" : "val", 32ull << 20, 512, nullptr);
      for (std::uint64_t done = 0; done < (s == 0 ? tokens : tokens / 64 + 100000); done += buf.size()) {
        for (auto& x : buf) x = static_cast<std::int32_t>(r.next() % 512);
        w.append(buf);
      }
      (s == 0 ? m.train : m.val) = w.finish();
    }
    write_manifest(out, m);
  };
  make(dir / "small", 1 << 20);
  make(dir / "big", 96ull << 20);
  std::uint64_t big_bytes = 0;
  for (const auto& e : fs::directory_iterator(dir / "big")) big_bytes += fs::file_size(e.path());
  const auto probe = [&](const fs::path& data, const fs::path& out) {
    const std::string cmd = std::string(LOOPSCALE_RSS_PROBE) + " " + data.string() + " " + out.string() + " 400 512";
    FILE* p = popen(cmd.c_str(), "r");
    std::string s;
    char buf[512];
    while (std::fgets(buf, sizeof buf, p)) s += buf;
    REQUIRE(pclose(p) == 0);
    INFO(s);
    return nlohmann::json::parse(s);
  };
  const auto small = probe(dir / "small", dir / "run_small"), big = probe(dir / "big", dir / "run_big");
  const double hwm_small = small.at("vm_hwm_kb").get<double>() * 1024, hwm_big = big.at("vm_hwm_kb").get<double>() * 1024;
  INFO("peak RSS: " << hwm_small / 1e6 << " MB on 2 MB of tokens, " << hwm_big / 1e6 << " MB on " << big_bytes / 1e6 << " MB");
  REQUIRE(big.at("steps") == 400);
  // The run read 400 x 32 windows spread over the whole corpus ...
  REQUIRE(static_cast<double>(big_bytes) > 4 * hwm_big);
  // ... which was mapped (its peak address space held it all) ...
  REQUIRE(big.at("vm_peak_kb").get<double>() * 1024 > static_cast<double>(big_bytes));
  // ... and its peak resident memory is that of a run on a corpus 100 times smaller.
  REQUIRE(hwm_big < hwm_small + 8e6);
  fs::remove_all(dir);
}
