// The inference path of a trained model: ModelScorer's per-position log-probabilities against the
// training forward (dense, MoE, mixed, every injection, both norm placements), other numbers of
// recurrences against the model built with that r, padding and batching, MoE capacity (dropped at
// inference, and why), and load_run on a real run folder (its validation loss reproduced, the
// previous checkpoint standing in for a corrupt one, bad folders as one-line errors).
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <unistd.h>

#include "loopscale/data/corpus.hpp"
#include "loopscale/eval/generate.hpp"
#include "loopscale/eval/model_scorer.hpp"
#include "loopscale/eval/probes.hpp"
#include "loopscale/eval/run_model.hpp"
#include "loopscale/eval/score.hpp"
#include "loopscale/eval/validation.hpp"
#include "loopscale/train/trainer.hpp"
#include "small_model.hpp"

using namespace loopscale;
using loopscale::eval::ModelScorer;
using loopscale::eval::SequenceScores;
using loopscale::train::Transformer;
using loopscale::eval::test::looped;
using loopscale::eval::test::random_tokens;
using loopscale::eval::test::vocab;
namespace fs = std::filesystem;

namespace {

// The second layer of the block and the coda as MoE layers (4 experts, top 2, hidden 12).
ModelSpec with_moe(ModelSpec m, bool shared = false, Activation act = Activation::relu2) {
  for (LayerSpec* l : {&m.recur.block.layers[1], &m.coda.layers[0]}) {
    l->ffn.experts = 4;
    l->ffn.top_k = 2;
    l->ffn.hidden = 12;
    l->ffn.shared_expert = shared;
    l->ffn.act = act;
  }
  return m;
}

train::MoeRouting sigmoid_bias() {
  train::MoeRouting r;
  r.router = train::RouterKind::sigmoid;
  r.balance = train::Balance::bias;
  return r;
}

// Initialised, then moved off the structured start (identity injection, cyclic lanes: with W =
// [I | 0] the state would not matter and every r would score alike), MoE biases nonzero.
std::unique_ptr<Transformer<float>> make_model(const ModelSpec& spec, int64 batch, int64 seq, const train::MoeRouting& routing = {},
                                               std::uint64_t seed = 1) {
  auto m = std::make_unique<Transformer<float>>(spec, batch, seq, 15.0, routing);
  m->init(seed);
  SplitMix64 r{seed + 100};
  for (float& v : m->params()) v += static_cast<float>(0.1 * r.normal());
  for (int64 i = 0; i < m->moe_layers(); ++i)
    for (float& b : m->moe_bias(i)) b = static_cast<float>(0.2 * (r.uniform() - 0.5));
  return m;
}

// B sequences of T + 1 tokens and the (inputs, targets) batch the training forward reads.
struct Batch {
  std::vector<std::vector<std::int32_t>> seqs;
  std::vector<std::int32_t> in, tgt;
};
Batch make_batch(int64 B, int64 T, std::uint64_t seed) {
  Batch b;
  for (int64 i = 0; i < B; ++i) {
    b.seqs.push_back(random_tokens(T + 1, seed + static_cast<std::uint64_t>(i)));
    b.in.insert(b.in.end(), b.seqs.back().begin(), b.seqs.back().end() - 1);
    b.tgt.insert(b.tgt.end(), b.seqs.back().begin() + 1, b.seqs.back().end());
  }
  return b;
}

double mean_nll(const std::vector<SequenceScores>& s) {
  double sum = 0;
  int64 n = 0;
  for (const SequenceScores& x : s)
    for (const float l : x.logp) sum -= l, ++n;
  return sum / static_cast<double>(n);
}

// The same weights in a model of another r: tensor by tensor by name (the paper's per-recurrence
// hyperconnection sets are cut to the first ones).
void copy_weights(const Transformer<float>& from, Transformer<float>& to) {
  for (const train::ParamTensor& t : to.tensors())
    for (const train::ParamTensor& f : from.tensors())
      if (f.name == t.name) {
        REQUIRE(f.size >= t.size);
        std::copy_n(from.params().begin() + f.offset, t.size, to.params().begin() + t.offset);
      }
  for (int64 i = 0; i < to.moe_layers(); ++i) std::copy_n(from.moe_bias(i).begin(), to.moe_bias(i).size(), to.moe_bias(i).begin());
}

ModelSpec with_r(ModelSpec m, int64 r) {
  m.recur.r = r;
  return m;
}

struct Case {
  std::string name;
  ModelSpec spec;
  train::MoeRouting routing{};
};

}  // namespace

TEST_CASE("model scorer: the mean of -logp is the training forward's loss, for every architecture", "[eval][scorer]") {
  ModelSpec gqa = with_moe(looped(2, Inject::linear));
  for (StackSpec* st : {&gqa.prelude, &gqa.recur.block, &gqa.coda})
    for (LayerSpec& l : st->layers) l.attn = {4, 0, 2};  // 4 query heads sharing 2 KV heads
  ModelSpec no_block = looped(1, Inject::none);
  no_block.recur.block = {};
  ModelSpec half = looped(4, Inject::linear);
  half.recur.bptt = half_bptt;
  const std::vector<Case> cases = {
      {"dense, r = 1", looped(1, Inject::none)},
      {"no shared block", no_block},
      {"linear, r = 2", looped(2, Inject::linear)},
      {"additive, r = 2", looped(2, Inject::additive)},
      {"passthrough, r = 2", looped(2, Inject::passthrough)},
      {"hyper:2, r = 2", looped(2, Inject::hyper, 2)},
      {"hyper-shared:2, r = 3", looped(3, Inject::hyper_shared, 2)},
      {"linear, norm after the loop", looped(2, Inject::linear, 0, StateNorm::after_loop)},
      {"hyper-shared:2, norm after the loop", looped(2, Inject::hyper_shared, 2, StateNorm::after_loop)},
      {"truncated BPTT (the forward is the same)", half},
      {"looped MoE, softmax, aux loss", with_moe(looped(2, Inject::linear))},
      {"looped MoE, sigmoid, bias, shared expert, swiglu", with_moe(looped(2, Inject::hyper_shared, 2), true, Activation::swiglu),
       sigmoid_bias()},
      {"looped MoE, grouped KV heads", gqa},
  };
  const int64 B = 4, T = 16;
  for (const Case& c : cases) {
    INFO(c.name);
    auto model = make_model(c.spec, B, T, c.routing);
    const Batch b = make_batch(B, T, 11);
    const double loss = model->forward(b.in.data(), b.tgt.data());
    const eval::RunModel run = eval::run_model_of(*model);
    ModelScorer scorer(run, c.spec.recur.r, B);
    REQUIRE(scorer.context() == T + 1);
    const std::vector<SequenceScores> s = scorer.score(b.seqs);
    REQUIRE(s.size() == static_cast<std::size_t>(B));
    CHECK(mean_nll(s) == Approx(loss).epsilon(1e-6));
    // Position by position: the same shape runs the same kernels, so the values are the training
    // forward's; the argmax is that of its softcapped logits over the real vocabulary.
    const auto losses = model->token_losses();
    const auto logits = model->logits();
    for (int64 i = 0; i < B; ++i)
      for (int64 t = 0; t < T; ++t) {
        const int64 row = i * T + t;
        CHECK(-s[i].logp[t] == Approx(losses[row]).margin(1e-6));
        int64 best = 0;
        for (int64 j = 1; j < vocab; ++j) best = logits[row * 40 + j] > logits[row * 40 + best] ? j : best;
        CHECK(s[i].argmax[t] == best);
      }
  }
}

TEST_CASE("model scorer: another number of recurrences runs, differs, and is the model built with that r", "[eval][scorer]") {
  const int64 B = 2, T = 16;
  const Batch b = make_batch(B, T, 21);
  const std::vector<Case> cases = {
      {"linear", looped(2, Inject::linear)},
      {"additive", looped(2, Inject::additive)},
      {"passthrough", looped(2, Inject::passthrough)},
      {"hyper-shared:2", looped(2, Inject::hyper_shared, 2)},
      {"looped MoE", with_moe(looped(2, Inject::linear), true), sigmoid_bias()},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    auto model = make_model(c.spec, B, T, c.routing);
    const eval::RunModel run = eval::run_model_of(*model);
    ModelScorer scorer(run, 2, B);
    const double at2 = mean_nll(scorer.score(b.seqs));
    for (const int64 r : {1, 3, 5}) {
      scorer.set_recurrences(r);
      REQUIRE(scorer.recurrences() == r);
      const double at_r = mean_nll(scorer.score(b.seqs));
      REQUIRE(std::isfinite(at_r));
      CHECK(std::abs(at_r - at2) > 1e-4);
      Transformer<float> built(with_r(c.spec, r), B, T, 15.0, c.routing);
      copy_weights(*model, built);
      CHECK(at_r == Approx(built.forward(b.in.data(), b.tgt.data())).epsilon(1e-5));
    }
  }
  // A model trained without a loop (r = 1, no injection) loops as passthrough when asked to.
  {
    auto model = make_model(looped(1, Inject::none), B, T);
    const eval::RunModel run = eval::run_model_of(*model);
    ModelScorer scorer(run, 2, B);
    Transformer<float> built(looped(2, Inject::passthrough), B, T);
    copy_weights(*model, built);
    CHECK(mean_nll(scorer.score(b.seqs)) == Approx(built.forward(b.in.data(), b.tgt.data())).epsilon(1e-5));
  }
  // The paper's hyperconnections: r below the trained R runs the first r parameter sets (the
  // trained loop cut after r recurrences); above R there are no parameters.
  {
    auto model = make_model(looped(3, Inject::hyper, 2), B, T);
    const eval::RunModel run = eval::run_model_of(*model);
    ModelScorer scorer(run, 3, B);
    const double at3 = mean_nll(scorer.score(b.seqs));
    CHECK(at3 == Approx(model->forward(b.in.data(), b.tgt.data())).epsilon(1e-6));
    scorer.set_recurrences(2);
    Transformer<float> built(looped(2, Inject::hyper, 2), B, T);
    copy_weights(*model, built);
    const double at2 = mean_nll(scorer.score(b.seqs));
    CHECK(at2 == Approx(built.forward(b.in.data(), b.tgt.data())).epsilon(1e-5));
    CHECK(std::abs(at2 - at3) > 1e-4);
    REQUIRE_THROWS_WITH(scorer.set_recurrences(4), Catch::Contains("hyperconnections (hyper:2) hold one parameter set per recurrence") &&
                                                       Catch::Contains("at most 3"));
    REQUIRE_THROWS_WITH(ModelScorer(run, 4), Catch::Contains("at most 3"));
    CHECK(scorer.recurrences() == 2);  // a refused r changes nothing
  }
  auto model = make_model(looped(2, Inject::linear), B, T);
  const eval::RunModel run = eval::run_model_of(*model);
  REQUIRE_THROWS_WITH(ModelScorer(run, 0), Catch::Contains("at least 1"));
  REQUIRE_THROWS_WITH(ModelScorer(run, -3), Catch::Contains("at least 1"));
  ModelSpec no_block = looped(1, Inject::none);
  no_block.recur.block = {};
  auto flat = make_model(no_block, B, T);
  const eval::RunModel flat_run = eval::run_model_of(*flat);
  REQUIRE_THROWS_WITH(ModelScorer(flat_run, 2), Catch::Contains("no shared block"));
}

TEST_CASE("model scorer: padding and batching leave the scores of real positions as they are", "[eval][scorer]") {
  const int64 T = 16;
  auto model = make_model(with_moe(looped(2, Inject::linear), true), 1, T, sigmoid_bias());
  const eval::RunModel run = eval::run_model_of(*model);
  std::vector<std::vector<std::int32_t>> seqs;
  for (const int64 n : {9, 2, 17, 5, 12, 3})  // 2 .. context tokens, in no order
    seqs.push_back(random_tokens(n, 40 + static_cast<std::uint64_t>(n)));
  ModelScorer together(run, 2, 8);
  ModelScorer pairs(run, 2, 2);
  ModelScorer alone(run, 2, 1);
  const auto a = together.score(seqs), p = pairs.score(seqs);
  CHECK(together.shapes() == 1);  // one (8, 16) forward
  for (std::size_t i = 0; i < seqs.size(); ++i) {
    INFO("sequence " << i << " of " << seqs[i].size() << " tokens");
    const auto one = alone.score(std::span(&seqs[i], 1));
    REQUIRE(a[i].logp.size() == seqs[i].size() - 1);
    for (std::size_t t = 0; t < a[i].logp.size(); ++t) {
      CHECK(a[i].logp[t] == Approx(one[0].logp[t]).margin(1e-5));
      CHECK(p[i].logp[t] == Approx(one[0].logp[t]).margin(1e-5));
      CHECK(a[i].argmax[t] == one[0].argmax[t]);
    }
  }
  // Causality: what follows a prefix (here, 8 more real tokens instead of padding) changes none
  // of the prefix's scores.
  std::vector<std::int32_t> longer = seqs[0];
  const auto more = random_tokens(8, 99);
  longer.insert(longer.end(), more.begin(), more.end());
  const auto l = alone.score(std::span(&longer, 1));
  for (std::size_t t = 0; t < seqs[0].size() - 1; ++t) CHECK(l[0].logp[t] == Approx(a[0].logp[t]).margin(1e-5));

  std::vector<std::vector<std::int32_t>> bad = {{1}};
  REQUIRE_THROWS_WITH(together.score(bad), Catch::Contains("sequence 0 has 1 tokens; a scored sequence has 2 to 17"));
  bad = {{1, 2}, random_tokens(18, 5)};
  REQUIRE_THROWS_WITH(together.score(bad), Catch::Contains("sequence 1 has 18 tokens"));
  bad = {{1, 2, 39}};
  REQUIRE_THROWS_WITH(together.score(bad), Catch::Contains("token 39 at position 2 of sequence 0 is outside the model's vocab 37"));
  CHECK(together.score(std::span<const std::vector<std::int32_t>>()).empty());
}

TEST_CASE("model scorer: MoE capacity makes the training forward depend on the batch, inference routes dropless",
          "[eval][scorer][moe]") {
  // With a capacity an expert runs only the first C slots routed to it in a call, ranked (choice,
  // token): a sequence's losses then depend on what else is in the batch. That is why inference
  // drops the capacity (RunModel::inference_routing).
  const int64 T = 16;
  train::MoeRouting cap;
  cap.capacity_factor = 0.25;
  const ModelSpec spec = with_moe(looped(2, Inject::linear));
  auto pair = make_model(spec, 2, T, cap);
  Transformer<float> single(spec, 1, T, 15.0, cap);
  copy_weights(*pair, single);
  const Batch both = make_batch(2, T, 61), first = make_batch(1, T, 61);
  REQUIRE(first.seqs[0] == both.seqs[0]);
  pair->forward(both.in.data(), both.tgt.data());
  single.forward(first.in.data(), first.tgt.data());
  CHECK(pair->moe_stats(0).drop_rate() > 0);
  double most = 0;
  for (int64 t = 0; t < T; ++t) most = std::max(most, std::abs(double(pair->token_losses()[t]) - single.token_losses()[t]));
  CHECK(most > 1e-3);

  // The scorer's scores of the first sequence are the same alone and beside the second, and are
  // the dropless model's.
  const eval::RunModel run = eval::run_model_of(*pair);
  ModelScorer scorer(run, 2, 2);
  const auto s2 = scorer.score(both.seqs);
  const auto s1 = scorer.score(first.seqs);
  train::MoeRouting dropless = cap;
  dropless.capacity_factor = 0;
  Transformer<float> reference(spec, 1, T, 15.0, dropless);
  copy_weights(*pair, reference);
  reference.forward(first.in.data(), first.tgt.data());
  for (int64 t = 0; t < T; ++t) {
    CHECK(s1[0].logp[t] == Approx(s2[0].logp[t]).margin(1e-5));
    CHECK(-s1[0].logp[t] == Approx(reference.token_losses()[t]).margin(1e-5));
  }
}

TEST_CASE("load_run: a trained run folder scores its validation loss, bad folders are one-line errors", "[eval][run]") {
  const fs::path root = fs::temp_directory_path() / concat("loopscale_eval_run_", static_cast<int64>(getpid()));
  fs::remove_all(root);
  fs::create_directories(root / "data");
  // A corpus with structure to learn, byte-level (no manifest: a vocab-256 single file is "byte").
  const auto text = [](std::size_t n, unsigned seed) {
    std::vector<std::int32_t> t;
    unsigned s = seed;
    while (t.size() < n) {
      s = s * 1103515245u + 12345u;
      for (char c : concat("the cat number ", s >> 20, " sat on the mat.\n")) t.push_back(static_cast<unsigned char>(c));
    }
    t.resize(n);
    return t;
  };
  data::write_token_file((root / "data" / "train.bin").string(), text(60000, 1), 256);
  data::write_token_file((root / "data" / "val.bin").string(), text(8000, 2), 256);
  train::TrainConfig cfg;
  cfg.spec.d_model = 32;
  cfg.spec.vocab = 256;
  LayerSpec l;
  l.attn.heads = 2;
  cfg.spec.prelude = {1, l};
  cfg.spec.coda = {1, l};
  cfg.spec.recur = {{1, l}, 2, {Inject::linear, 0}};
  cfg.batch = 4;
  cfg.seq_len = 16;
  cfg.tokens = 4 * 16 * 12;  // 12 steps
  cfg.checkpoint_every = 4;  // so checkpoint.prev.bin exists (step 8)
  cfg.eval_tokens = 128;     // 2 batches: 8 windows
  cfg.data = (root / "data").string();
  cfg.out = (root / "run").string();
  cfg.threads = 2;
  cfg.peak_flops = 1e11;
  const train::TrainResult res = train::train(cfg);
  REQUIRE(res.status == "done");

  const eval::RunModel run = eval::load_run(cfg.out);
  CHECK(run.step == 12);
  CHECK(run.warning.empty());
  CHECK(run.spec == cfg.spec);
  CHECK(run.seq_len == 16);
  CHECK(run.context() == 17);
  REQUIRE(run.tokenizer.has_value());
  CHECK(run.text_tokenizer().kind() == data::Tokenizer::Kind::byte);
  CHECK(run.params == train::load_checkpoint<float>(fs::path(cfg.out) / "checkpoint.bin").params);

  // The validation sample the trainer evaluated, scored: the mean is summary.json's val_loss.
  const train::ValidationSet val(data::open_corpus(cfg.data, data::Split::val), 16, 8);
  std::vector<std::int32_t> in(8 * 16), tgt(8 * 16);
  val.batch(0, 8, in.data(), tgt.data());
  std::vector<std::vector<std::int32_t>> windows;
  for (int64 w = 0; w < 8; ++w) {
    windows.emplace_back(in.begin() + w * 16, in.begin() + (w + 1) * 16);
    windows.back().push_back(tgt[static_cast<std::size_t>(w * 16 + 15)]);
  }
  ModelScorer scorer(run, 2);
  CHECK(mean_nll(scorer.score(windows)) == Approx(res.val_loss).epsilon(1e-5));
  scorer.set_recurrences(4);
  CHECK(std::isfinite(mean_nll(scorer.score(windows))));

  // Generation from the run through its tokenizer: greedy is the scorer's argmax, token by token.
  scorer.set_recurrences(2);
  const std::vector<std::int32_t> prompt = run.text_tokenizer().encode("the cat ");
  const eval::Generation g = eval::generate(run, prompt, 9, 0.0, 0, 0, 2);
  REQUIRE(g.tokens.size() == 9);
  std::vector<std::int32_t> all = prompt;
  all.insert(all.end(), g.tokens.begin(), g.tokens.end());
  const auto chain = scorer.score(std::span(&all, 1));
  for (std::size_t i = 0; i < g.tokens.size(); ++i) CHECK(chain[0].argmax[prompt.size() - 1 + i] == g.tokens[i]);
  CHECK(run.text_tokenizer().decode(g.tokens).size() == 9);

  // Bad folders, each a copy of the good one with one thing wrong.
  const auto copy_run = [&](const std::string& name) {
    const fs::path p = root / name;
    fs::copy(cfg.out, p, fs::copy_options::recursive);
    fs::remove(p / ".lock");
    return p;
  };
  REQUIRE_THROWS_WITH(eval::load_run(root / "nowhere"), Catch::Contains("the run folder") && Catch::Contains("does not exist"));
  REQUIRE_THROWS_AS(eval::load_run(root / "nowhere"), train::config_error);
  {
    const fs::path p = copy_run("no_config");
    fs::remove(p / "config.json");
    REQUIRE_THROWS_WITH(eval::load_run(p), Catch::Contains("config.json is missing"));
  }
  {
    const fs::path p = copy_run("bad_config");
    std::ofstream(p / "config.json") << "{ not json";
    REQUIRE_THROWS_WITH(eval::load_run(p), Catch::Contains("config.json is not valid JSON"));
  }
  {
    const fs::path p = copy_run("other_model");
    std::ifstream in_file(p / "config.json");
    nlohmann::json j = nlohmann::json::parse(in_file);
    in_file.close();
    j["spec"]["d_model"] = 64;
    std::ofstream(p / "config.json") << j.dump();
    REQUIRE_THROWS_WITH(eval::load_run(p), Catch::Contains("is not the model of") && Catch::Contains("'spec' differs"));
    REQUIRE_THROWS_AS(eval::load_run(p), train::checkpoint_error);
  }
  const auto flip = [](const fs::path& f) {
    std::fstream s(f, std::ios::in | std::ios::out | std::ios::binary);
    s.seekp(static_cast<std::streamoff>(fs::file_size(f) / 2));
    s.put('\x5a');
  };
  {
    const fs::path p = copy_run("corrupt");
    flip(p / "checkpoint.bin");
    const eval::RunModel prev = eval::load_run(p);  // the previous checkpoint stands in, with a warning
    CHECK(prev.step == 8);
    CHECK(prev.checkpoint == p / "checkpoint.prev.bin");
    CHECK_THAT(prev.warning, Catch::Contains("checkpoint.bin is corrupt: checksum mismatch") && Catch::Contains("evaluating") &&
                                 Catch::Contains("(step 8)"));
    flip(p / "checkpoint.prev.bin");
    REQUIRE_THROWS_WITH(eval::load_run(p), Catch::Contains("no usable checkpoint") && Catch::Contains("checkpoint.bin is corrupt") &&
                                               Catch::Contains("checkpoint.prev.bin is corrupt"));
    fs::remove(p / "checkpoint.bin");
    fs::remove(p / "checkpoint.prev.bin");
    REQUIRE_THROWS_WITH(eval::load_run(p), Catch::Contains("holds no checkpoint"));
  }
  {
    const fs::path p = copy_run("truncated");
    fs::remove(p / "checkpoint.prev.bin");
    fs::resize_file(p / "checkpoint.bin", fs::file_size(p / "checkpoint.bin") - 3);
    REQUIRE_THROWS_WITH(eval::load_run(p), Catch::Contains("checkpoint.bin is truncated"));
  }
  // A SentencePiece record whose file is gone, or is another file.
  REQUIRE_THROWS_WITH(eval::detail::recorded_tokenizer({{"kind", "sentencepiece"}, {"path", (root / "gone.model").string()}}, "config.json"),
                      Catch::Contains("gone.model' recorded in config.json cannot be opened"));
  REQUIRE_THROWS_WITH(eval::detail::recorded_tokenizer(
                          {{"kind", "sentencepiece"}, {"path", (root / "data" / "val.bin").string()}, {"checksum", "xxh3-64:0"}}, "x"),
                      Catch::Contains("it is not the tokenizer the run was trained with"));
  CHECK_FALSE(eval::detail::recorded_tokenizer({{"kind", "external"}, {"vocab", 50257}}, "x").has_value());
  fs::remove_all(root);
}

TEST_CASE("recurrence curve points: powers of two up to 4r, and r itself") {
  using loopscale::eval::recurrence_curve_points;
  CHECK(recurrence_curve_points(1) == std::vector<std::int64_t>{1, 2, 4});
  CHECK(recurrence_curve_points(3) == std::vector<std::int64_t>{1, 2, 3, 4, 8});
  CHECK(recurrence_curve_points(4) == std::vector<std::int64_t>{1, 2, 4, 8, 16});
  CHECK(recurrence_curve_points(6) == std::vector<std::int64_t>{1, 2, 4, 6, 8, 16});
  CHECK_THROWS_WITH(recurrence_curve_points(0), Catch::Contains("trained r of at least 1"));
}

TEST_CASE("evaluate_parallel: the built-in probes scored by a model on two threads, task by task, are one thread's results",
          "[eval][scorer]") {
  ModelSpec spec = looped(2, Inject::linear);
  spec.vocab = 256;  // the probes are bytes
  Transformer<float> m(spec, 1, 128);
  m.init(5);
  eval::RunModel run = eval::run_model_of(m);
  run.tokenizer = data::Tokenizer();  // byte-level
  eval::ProbeOptions po;
  po.seed = 3;
  po.items_per_task = 6;
  po.max_bytes = 128;
  const eval::Bundle probes = eval::builtin_probes(po).bundle;
  REQUIRE(probes.tasks.size() >= 8);
  eval::EvalOptions opt;
  opt.seed = 1;
  train::HostBackend::set_threads(1);
  ModelScorer one(run, 2);
  const nlohmann::json serial = eval::to_json(eval::evaluate(probes, one, *run.tokenizer, opt));
  train::HostBackend::set_threads(2);
  const auto make = [&]() -> std::unique_ptr<eval::Scorer> { return std::make_unique<ModelScorer<>>(run, 2); };
  CHECK(eval::to_json(eval::evaluate_parallel(probes, make, *run.tokenizer, opt, 2)) == serial);
  train::HostBackend::set_threads(0);
}
