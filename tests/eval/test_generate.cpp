// Generation with a KV cache: token for token what a full recomputation of the prefix gives (greedy
// and sampled with the same seed), for looped dense models of every injection and looped MoE models
// (dropless at inference, a trained capacity included), at the trained r and another; its
// log-probabilities are the scorer's; seeds repeat; top-k draws among the k most likely tokens and
// the temperature sharpens or flattens the draws; bad input is one readable line. A hidden case
// ([.][eval-timing]) measures scoring and generation speed.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <numeric>
#include <span>
#include <string>
#include <vector>

#include "loopscale/eval/generate.hpp"
#include "loopscale/eval/model_scorer.hpp"
#include "loopscale/eval/run_model.hpp"
#include "small_model.hpp"

using namespace loopscale;
using loopscale::eval::Decoding;
using loopscale::eval::Generation;
using loopscale::eval::Generator;
using loopscale::eval::Sampling;
using loopscale::train::Transformer;
using loopscale::eval::test::looped;
using loopscale::eval::test::random_tokens;
using loopscale::eval::test::vocab;

namespace {

// Every FFN of the shared block an MoE (4 experts, top 2, hidden 12), and the coda's.
ModelSpec looped_moe(int64 r, Inject inj, int64 lanes = 0, bool shared = false) {
  ModelSpec m = looped(r, inj, lanes);
  for (StackSpec* st : {&m.recur.block, &m.coda})
    for (LayerSpec& l : st->layers) {
      l.ffn.experts = 4;
      l.ffn.top_k = 2;
      l.ffn.hidden = 12;
      l.ffn.shared_expert = shared;
    }
  return m;
}

// A RunModel of a freshly initialised model moved off its structured start (see
// test_model_scorer.cpp), MoE biases nonzero.
eval::RunModel make_run(const ModelSpec& spec, int64 seq, const train::MoeRouting& routing = {}, std::uint64_t seed = 3) {
  Transformer<float> m(spec, 1, seq, 15.0, routing);
  m.init(seed);
  SplitMix64 r{seed + 100};
  for (float& v : m.params()) v += static_cast<float>(0.1 * r.normal());
  for (int64 i = 0; i < m.moe_layers(); ++i)
    for (float& b : m.moe_bias(i)) b = static_cast<float>(0.2 * (r.uniform() - 0.5));
  return eval::run_model_of(m);
}

struct GenerationCase {
  std::string name;
  ModelSpec spec;
  train::MoeRouting routing{};
};

}  // namespace

TEST_CASE("generate: the KV cache gives the tokens of full recomputation, greedy and sampled, dense and MoE", "[eval][generate]") {
  train::MoeRouting sig_bias;
  sig_bias.router = train::RouterKind::sigmoid;
  sig_bias.balance = train::Balance::bias;
  train::MoeRouting capacity;  // trained with a capacity; generation (and scoring) route dropless
  capacity.capacity_factor = 0.5;
  const std::vector<GenerationCase> cases = {
      {"looped dense, linear", looped(2, Inject::linear)},
      {"looped dense, additive, norm after the loop", looped(2, Inject::additive, 0, StateNorm::after_loop)},
      {"looped dense, hyper:2", looped(2, Inject::hyper, 2)},
      {"looped dense, hyper-shared:2", looped(2, Inject::hyper_shared, 2)},
      {"looped MoE, softmax, shared expert", looped_moe(2, Inject::linear, 0, true)},
      {"looped MoE, sigmoid + bias, hyper-shared:2", looped_moe(2, Inject::hyper_shared, 2), sig_bias},
      {"looped MoE trained with a capacity", looped_moe(2, Inject::passthrough), capacity},
  };
  const int64 seq = 24;
  const std::vector<std::int32_t> prompt = random_tokens(5, 8);
  const int64 max_new = seq + 1 - 5;  // up to the context
  const Sampling samplings[] = {{0.0, 0, 0}, {1.0, 0, 7}, {0.7, 5, 3}};
  for (const GenerationCase& c : cases) {
    const eval::RunModel run = make_run(c.spec, seq, c.routing);
    // The trained r, and one more (fewer for the paper's hyperconnections, which have no more sets).
    for (const int64 r : {int64{2}, c.spec.recur.inject.kind == Inject::hyper ? int64{1} : int64{3}}) {
      Generator kv(run, r);
      Generator full(run, r, Decoding::recompute);
      eval::ModelScorer scorer(run, r);
      for (const Sampling& s : samplings) {
        INFO(c.name << ", r = " << r << ", temperature " << s.temperature << ", top_k " << s.top_k);
        const Generation a = kv.generate(prompt, max_new, s), b = full.generate(prompt, max_new, s);
        REQUIRE(a.tokens.size() == static_cast<std::size_t>(max_new));
        CHECK(a.tokens == b.tokens);
        // The log-probabilities are the scorer's of the whole sequence, teacher-forced.
        std::vector<std::int32_t> all = prompt;
        all.insert(all.end(), a.tokens.begin(), a.tokens.end());
        const auto sc = scorer.score(std::span(&all, 1));
        for (int64 i = 0; i < max_new; ++i) {
          const std::size_t pos = prompt.size() - 1 + static_cast<std::size_t>(i);
          CHECK(a.logp[i] == Approx(b.logp[i]).margin(1e-4));
          CHECK(a.logp[i] == Approx(sc[0].logp[pos]).margin(1e-4));
          if (s.temperature == 0) CHECK(a.tokens[i] == sc[0].argmax[pos]);
        }
        // A generator is reusable, and a seed gives its tokens again.
        CHECK(kv.generate(prompt, max_new, s).tokens == a.tokens);
      }
    }
  }
}

TEST_CASE("generate: seeds, top-k and temperature do what they say", "[eval][generate]") {
  const eval::RunModel run = make_run(looped(2, Inject::linear), 32);
  const std::vector<std::int32_t> prompt = random_tokens(4, 1);
  Generator g(run, 2);
  const auto draw = [&](double temp, int64 k, std::uint64_t seed) { return g.generate(prompt, 28, {temp, k, seed}).tokens; };
  CHECK(draw(1.0, 0, 1) == draw(1.0, 0, 1));
  CHECK(draw(1.0, 0, 1) != draw(1.0, 0, 2));
  // top-k 1 is greedy whatever the temperature and the seed.
  CHECK(draw(5.0, 1, 9) == draw(0.0, 0, 0));
  // The free function is a generator with a cache.
  CHECK(eval::generate(run, prompt, 28, 1.0, 3, 5, 2).tokens == draw(1.0, 3, 5));
  // Only the first max_new tokens are made; none is allowed.
  CHECK(g.generate(prompt, 0, {}).tokens.empty());
  const std::vector<std::int32_t> greedy = draw(0.0, 0, 0);
  CHECK(g.generate(prompt, 3, {}).tokens == std::vector<std::int32_t>(greedy.begin(), greedy.begin() + 3));

  // Each sampled token's rank at its position: how many tokens of the vocabulary have larger
  // logits there (0: the most likely), the logits replayed through a decoder of its own.
  const auto ranks = [&](const std::vector<std::int32_t>& tokens) {
    eval::Decoder<> d(run, 2);
    std::span<const float> z;
    for (const std::int32_t t : prompt) z = d.step(t);
    std::vector<std::int64_t> r;
    for (std::size_t i = 0; i < tokens.size(); ++i) {
      const float zt = z[static_cast<std::size_t>(tokens[i])];
      r.push_back(std::count_if(z.begin(), z.end(), [&](float v) { return v > zt; }));
      if (i + 1 < tokens.size()) z = d.step(tokens[i]);
    }
    return r;
  };
  // top-k 3 draws among the 3 most likely tokens only, and not only the first: at temperature 5
  // the 37 tokens are near alike (this model's logits span about 1.7), so a draw that ignored k
  // would land past rank 2 at most of the 28 positions (measured: ranks up to 36 without top-k).
  for (const std::uint64_t seed : {std::uint64_t{1}, std::uint64_t{2}}) {
    INFO("seed " << seed);
    const std::vector<std::int64_t> r = ranks(draw(5.0, 3, seed));
    CHECK(*std::max_element(r.begin(), r.end()) < 3);
    CHECK(*std::max_element(r.begin(), r.end()) > 0);
  }
  // The temperature sharpens or flattens the draws from the same seed: the tokens drawn at 0.25
  // are far more often among the most likely than at 4, where the draw is near uniform (measured:
  // a mean rank of 3.9 against 18, a uniform draw's over 37 tokens), and the tokens differ.
  const std::vector<std::int32_t> cold = draw(0.25, 0, 11), hot = draw(4.0, 0, 11);
  CHECK(cold != hot);
  const std::vector<std::int64_t> rc = ranks(cold), rh = ranks(hot);
  const std::int64_t cold_sum = std::accumulate(rc.begin(), rc.end(), std::int64_t{0});
  const std::int64_t hot_sum = std::accumulate(rh.begin(), rh.end(), std::int64_t{0});
  INFO("rank sums over 28 tokens: " << cold_sum << " at temperature 0.25, " << hot_sum << " at 4");
  CHECK(2 * cold_sum < hot_sum);
}

TEST_CASE("generate: bad input is refused with one readable line", "[eval][generate]") {
  const eval::RunModel run = make_run(looped(2, Inject::hyper, 2), 16);
  const std::vector<std::int32_t> prompt = {1, 2, 3};
  REQUIRE_THROWS_WITH(eval::generate(run, prompt, 4, 0.0, 0, 0, 0), Catch::Contains("number of recurrences must be at least 1, not 0"));
  REQUIRE_THROWS_WITH(eval::generate(run, prompt, 4, 0.0, 0, 0, 3),
                      Catch::Contains("hyperconnections (hyper:2) hold one parameter set per recurrence, 2 of them"));
  REQUIRE_THROWS_WITH(eval::generate(run, {}, 4, 0.0, 0, 0, 2), Catch::Contains("needs a prompt of at least one token"));
  REQUIRE_THROWS_WITH(eval::generate(run, prompt, 15, 0.0, 0, 0, 2),
                      Catch::Contains("a prompt of 3 tokens and 15 new ones make 18 tokens, more than the model's context of 17"));
  CHECK(eval::generate(run, prompt, 14, 0.0, 0, 0, 2).tokens.size() == 14);  // exactly the context
  REQUIRE_THROWS_WITH(eval::generate(run, prompt, -1, 0.0, 0, 0, 2), Catch::Contains("must not be negative"));
  REQUIRE_THROWS_WITH(eval::generate(run, std::vector<std::int32_t>{1, 37}, 4, 0.0, 0, 0, 2),
                      Catch::Contains("prompt token 37 at position 1 is outside the model's vocab 37"));
  REQUIRE_THROWS_WITH(eval::generate(run, prompt, 4, -1.0, 0, 0, 2), Catch::Contains("temperature must be a number >= 0"));
  REQUIRE_THROWS_WITH(eval::generate(run, prompt, 4, NAN, 0, 0, 2), Catch::Contains("temperature"));
  REQUIRE_THROWS_WITH(eval::generate(run, prompt, 4, 1.0, -1, 0, 2), Catch::Contains("top_k must be between 0"));
  REQUIRE_THROWS_WITH(eval::generate(run, prompt, 4, 1.0, 38, 0, 2), Catch::Contains("top_k must be between 0"));
  // The cache holds the trained positions and no more.
  eval::Decoder<> d(run, 2);
  CHECK(d.positions() == 16);
  for (int64 t = 0; t < 16; ++t) d.step(1);
  REQUIRE_THROWS_WITH(d.step(1), Catch::Contains("KV cache is full: it holds 16 positions"));
  d.reset();
  CHECK(d.step(2).size() == static_cast<std::size_t>(vocab));
  REQUIRE_THROWS_WITH(d.step(-1), Catch::Contains("token -1 is outside the model's vocab 37"));
}

// Throughput on this machine; run by hand: build-*/tests/test_eval "[eval-timing]".
TEST_CASE("eval timing: scoring and generation tokens per second", "[.][eval-timing]") {
  ModelSpec m;
  m.d_model = 128;
  m.vocab = 256;
  LayerSpec l;
  l.attn.heads = 4;
  m.prelude = {1, l};
  m.coda = {1, l};
  m.recur.block = {2, l};
  m.recur.r = 4;
  m.recur.inject = {Inject::linear, 0};
  const int64 seq = 256;
  Transformer<float> t(m, 1, seq);
  t.init(1);
  const eval::RunModel run = eval::run_model_of(t);
  using clock = std::chrono::steady_clock;
  const auto secs = [](clock::time_point a) { return std::chrono::duration<double>(clock::now() - a).count(); };
  std::vector<std::vector<std::int32_t>> seqs;
  for (int i = 0; i < 64; ++i) seqs.push_back(random_tokens(seq + 1, static_cast<std::uint64_t>(i)));
  for (const int64 r : {4, 8}) {
    eval::ModelScorer scorer(run, r);
    scorer.score(std::span(seqs.data(), 8));  // allocate the shape
    auto t0 = clock::now();
    const auto scored = scorer.score(seqs);
    const double score_s = secs(t0);
    // The training model's forward over the same 64 sequences, 8 at a time, for comparison.
    ModelSpec mr = m;
    mr.recur.r = r;
    Transformer<float> tr(mr, 8, seq);
    std::copy(run.params.begin(), run.params.end(), tr.params().begin());
    std::vector<std::int32_t> in, tgt;
    for (int i = 0; i < 8; ++i) {
      in.insert(in.end(), seqs[static_cast<std::size_t>(i)].begin(), seqs[static_cast<std::size_t>(i)].end() - 1);
      tgt.insert(tgt.end(), seqs[static_cast<std::size_t>(i)].begin() + 1, seqs[static_cast<std::size_t>(i)].end());
    }
    tr.forward(in.data(), tgt.data());
    t0 = clock::now();
    for (int i = 0; i < 8; ++i) tr.forward(in.data(), tgt.data());
    const double train_s = secs(t0);
    Generator kv(run, r);
    Generator full(run, r, Decoding::recompute);
    const std::vector<std::int32_t> prompt = random_tokens(16, 1);
    t0 = clock::now();
    const Generation cached = kv.generate(prompt, 240, {});
    const double kv_s = secs(t0);
    t0 = clock::now();
    const Generation recomputed = full.generate(prompt, 32, {});
    const double full_s = secs(t0);
    // What was timed is the work asked for (the equality of the two routes is the first case's).
    CHECK(scored.size() == seqs.size());
    CHECK(cached.tokens.size() == 240);
    CHECK(recomputed.tokens.size() == 32);
    std::printf("d 128, 4 layers (1 + 2 x r + 1), r = %lld, seq 256, %d threads: scoring %.0f tokens/s (the training model's "
                "forward %.0f); generation with the KV cache %.0f tokens/s (16-token prompt + 240), by recomputation %.1f tokens/s (32)\n",
                static_cast<long long>(r), train::HostBackend::threads(), 64.0 * seq / score_s, 64.0 * seq / train_s, 256.0 / kv_s,
                32.0 / full_s);
  }
}
