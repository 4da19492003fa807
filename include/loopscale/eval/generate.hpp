// Text generation from a loaded model (eval/run_model.hpp) with a KV cache, at any number of
// recurrences the model can run (train::check_recurrences).
//
// The KV cache (Decoder) holds one key/value slot per layer *execution*: the prelude's layers, each
// layer of the shared block once per recurrence (a looped layer sees a different input in every
// recurrence, so recurrence i's keys are its own), then the coda's. A new token runs one position
// through the whole model: each attention reads the cached keys and values of the earlier
// positions of the same execution (kernels::attention_decode), every other operation is per
// position, so the cost of a token does not grow with the recurrence's state of the past. The
// arithmetic is the batch forward's (train::Transformer) for that position, through the same
// kernels and the same parameter offsets and shapes (read from a forward-only Transformer), so the
// logits equal a full recomputation of the prefix up to float rounding, and the tokens equal it
// token for token (tested, greedy and sampled, dense and MoE, trained and other r).
//
// Mixture-of-experts layers route the token by itself, dropless: the trained selection bias is
// used, the capacity is not (RunModel::inference_routing: with a capacity the training forward's
// routing of a token depends on the other tokens of its batch, later positions included, which no
// causal decoder can reproduce; scoring routes the same way, so both agree).
//
// Sampling: temperature 0 is greedy (the most likely token, the lowest id on ties); otherwise a
// token is drawn from softmax(z / temperature) over the top_k most likely tokens (all when top_k is
// 0), z the softcapped logits, with one uniform of a SplitMix64 stream seeded by `seed` per token:
// the same seed gives the same tokens. Generation::logp is the model's own log-probability of each
// token (the log-softmax of z, without temperature or top-k), as a scorer would report it.
//
// Decoding::recompute runs the whole prefix through the batch forward for every new token instead:
// quadratically more work, and the reference the cache is tested against.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <numeric>
#include <optional>
#include <span>
#include <stdexcept>
#include <utility>
#include <vector>

#include "loopscale/eval/run_model.hpp"
#include "loopscale/train/kernels/attention.hpp"
#include "loopscale/train/kernels/embedding.hpp"
#include "loopscale/train/kernels/inject.hpp"
#include "loopscale/train/kernels/linear.hpp"
#include "loopscale/train/kernels/loss.hpp"
#include "loopscale/train/kernels/mlp.hpp"
#include "loopscale/train/kernels/moe.hpp"
#include "loopscale/train/kernels/rmsnorm.hpp"
#include "loopscale/train/kernels/rope.hpp"
#include "loopscale/train/model.hpp"
#include "loopscale/util/random.hpp"

namespace loopscale::eval {

struct Sampling {
  double temperature = 0;  // 0: greedy
  int64 top_k = 0;         // draw among the k most likely tokens; 0: among all
  std::uint64_t seed = 0;  // the SplitMix64 stream of the draws
};

struct Generation {
  std::vector<std::int32_t> tokens;  // the new tokens, after the prompt
  std::vector<float> logp;           // the model's log-probability of each (no temperature, no top-k)
};

enum class Decoding { kv_cache, recompute };

// The KV cache and the one-position forward (see the top of this file). Memory is allocated once,
// in the constructor: 2 x seq_len x (kv heads x head dim) values per layer execution, and one
// position's activations.
template <class B = train::HostBackend>
class Decoder {
 public:
  using Engine = train::Transformer<float, B>;
  using Stack = typename Engine::Stack;

  // The model must outlive the decoder (its parameters are read in place).
  Decoder(const RunModel& model, int64 recurrences)
      : model_(model), layout_(inference_model<B>(model, 1, 1, recurrences)), r_(recurrences) {
    const ModelSpec& s = model.spec;
    d_ = s.d_model;
    vp_ = layout_->padded_vocab();
    vocab_ = s.vocab;
    ctx_ = model.seq_len;
    k_ = s.recur.block.size();
    inject_ = s.recur.inject.kind;
    lanes_ = is_hyper(inject_) ? s.recur.inject.lanes : 0;
    per_rec_ = s.recur.state_norm == StateNorm::per_recurrence;
    for (int64 i = 0; i < s.prelude.size(); ++i) execs_.push_back({Stack::prelude, i});
    for (int64 i = 0; i < r_; ++i)
      for (int64 j = 0; j < k_; ++j) execs_.push_back({Stack::block, j});
    for (int64 i = 0; i < s.coda.size(); ++i) execs_.push_back({Stack::coda, i});
    // One RoPE table for the head dimension every RoPE layer shares (the batch forward's rule).
    q_rope_ = layout_->rope_head_dim();
    int64 total = 0, C = 0, hq = 0, H = 0, H1 = 0, heads = 0;
    for (const Exec& x : execs_) {
      const auto& sh = layout_->layer_shape(x.stack, x.index);
      if (sh.rope && sh.q != q_rope_) throw spec_error("train: all layers must share one head dimension");
      kv_off_.push_back(total);
      total += 2 * ctx_ * sh.kv * sh.q;
      C = std::max(C, sh.C), hq = std::max(hq, sh.hq), H = std::max(H, sh.H), H1 = std::max(H1, sh.H1);
      heads = std::max(heads, sh.h + sh.kv);
    }
    kv_.assign(static_cast<std::size_t>(total), 0.0f);
    rope_cos_.resize(static_cast<std::size_t>(ctx_ * q_rope_ / 2));
    rope_sin_.resize(rope_cos_.size());
    train::kernels::rope_tables(ctx_, q_rope_, rope_cos_.data(), rope_sin_.data());
    // One position's activations, carved from one buffer.
    const int64 L = std::max<int64>(lanes_, 1);
    buf_.assign(static_cast<std::size_t>(15 * d_ + 2 * L * d_ + C + hq + H + H1 + heads * ctx_ + heads + 1 + vp_), 0.0f);
    float* p = buf_.data();
    for (float** b : {&x0_, &xa_, &xb_, &e_, &s_, &u_, &z_, &c0_, &xf_, &pooled_, &xmid_, &xn_, &xn2_, &ya_, &yb_}) b[0] = p, p += d_;
    lanes_a_ = p, p += L * d_;
    lanes_b_ = p, p += L * d_;
    qkv_ = p, p += C;
    att_ = p, p += hq;
    hact_ = p, p += H;
    hpre_ = p, p += H1;
    scores_ = p, p += heads * ctx_;
    rstd_qk_ = p, p += heads;
    rstd_ = p, p += 1;
    logits_ = p;
    // MoE layers: one token's saved activations and workspace (moe_sizes for N = 1), the largest.
    for (int64 i = 0; i < layout_->moe_layers(); ++i) {
      const train::kernels::MoeSizes z = train::kernels::moe_sizes(layout_->moe_shape(i), 1);
      moe_acts_ = std::max(moe_acts_, z.acts), moe_acts_index_ = std::max(moe_acts_index_, z.acts_index);
      moe_scratch_ = std::max(moe_scratch_, z.scratch), moe_scratch_index_ = std::max(moe_scratch_index_, z.scratch_index);
      stats_.emplace_back(layout_->moe_shape(i).experts);
    }
    moe_v_.assign(static_cast<std::size_t>(moe_acts_ + moe_scratch_), 0.0f);
    moe_iv_.assign(static_cast<std::size_t>(moe_acts_index_ + moe_scratch_index_), 0);
  }

  Decoder(RunModel&&, int64) = delete;  // the model is read in place: a temporary would be gone
  Decoder(const Decoder&) = delete;
  Decoder& operator=(const Decoder&) = delete;

  int64 recurrences() const { return r_; }
  // Positions held, and the most the cache holds (the trained sequence length).
  int64 position() const { return pos_; }
  int64 positions() const { return ctx_; }
  // Forgets every position (the cache's memory is kept).
  void reset() { pos_ = 0; }

  // Runs `token` at the next position and returns that position's softcapped logits over the
  // vocabulary (valid until the next call).
  std::span<const float> step(std::int32_t token) {
    if (pos_ >= ctx_)
      throw std::invalid_argument(concat("eval: the KV cache is full: it holds ", ctx_, " positions, the model's trained sequence length"));
    if (token < 0 || token >= vocab_) throw std::invalid_argument(concat("eval: token ", token, " is outside the model's vocab ", vocab_));
    namespace k = train::kernels;
    const float* P = model_.params.data();
    const auto off = layout_->offsets();
    const int64 t = pos_;
    int64 ex = 0;  // the layer execution, in order
    k::embedding_forward<B>(&token, P + off.embedding, x0_, 1, d_);
    k::rmsnorm_forward<B>(x0_, P + off.norm_embedding, xa_, rstd_, 1, d_);
    float *x = xa_, *y = xb_;
    for (int64 i = 0; i < model_.spec.prelude.size(); ++i, std::swap(x, y)) layer(ex++, x, y, t);
    k::copy<B>(e_, x, d_);
    const float* c = recur(ex, t);
    if (!per_rec_) {  // the recurrence's norm, once after the loop
      k::rmsnorm_forward<B>(c, P + off.norm_recur, c0_, rstd_, 1, d_);
      c = c0_;
    }
    for (int64 i = 0; i < model_.spec.coda.size(); ++i) {
      float* o = c == xa_ ? xb_ : xa_;
      layer(ex++, c, o, t);
      c = o;
    }
    k::rmsnorm_forward<B>(c, P + off.norm_final, xf_, rstd_, 1, d_);
    k::linear_forward<B>(xf_, P + off.lm_head, logits_, 1, d_, vp_);
    // The loss kernel caps the logits in place, exactly as in training (its loss is not needed).
    const std::int32_t any_target = 0;
    float loss = 0, lse = 0;
    k::softcap_ce_forward<B>(logits_, &any_target, &loss, &lse, {1, vp_, vocab_, model_.softcap});
    ++pos_;
    return {logits_, static_cast<std::size_t>(vocab_)};
  }

 private:
  struct Exec {
    Stack stack;
    int64 index;
  };

  // One layer execution at position t: x_out = x_mid + ffn(norm2(x_mid)), x_mid = x_in +
  // attn(norm1(x_in)), attention over the execution's cached positions 0..t.
  void layer(int64 ex, const float* in, float* out, int64 t) {
    namespace k = train::kernels;
    const Exec& e = execs_[static_cast<std::size_t>(ex)];
    const auto& s = layout_->layer_shape(e.stack, e.index);
    const auto& w = layout_->layer_offsets(e.stack, e.index);
    const float* P = model_.params.data();
    const int64 d = d_;
    k::rmsnorm_forward<B>(in, P + w.g1, xn_, rstd_, 1, d);
    k::linear_forward<B>(xn_, P + w.wqkv, qkv_, 1, d, s.C);
    if (s.qk_norm) k::rmsnorm_forward_strided<B>(qkv_, qkv_, rstd_qk_, 1, s.q, s.C, s.h + s.kv);
    // The tables from position t on, read as one row at "position 0".
    if (s.rope) k::rope_apply<B>(qkv_, rope_cos_.data() + t * (q_rope_ / 2), rope_sin_.data() + t * (q_rope_ / 2), 1, 1, s.h + s.kv, s.q, s.C, false);
    const int64 kvq = s.kv * s.q;
    float* K = kv_.data() + kv_off_[static_cast<std::size_t>(ex)];
    float* V = K + ctx_ * kvq;
    std::copy(qkv_ + s.h * s.q, qkv_ + s.h * s.q + kvq, K + t * kvq);
    std::copy(qkv_ + (s.h + s.kv) * s.q, qkv_ + (s.h + s.kv) * s.q + kvq, V + t * kvq);
    k::attention_decode<B>(qkv_, K, V, kvq, t, att_, scores_, {1, 1, s.h, s.kv, s.q});
    k::copy<B>(xmid_, in, d);
    k::linear_forward<B>(att_, P + w.wo, xmid_, 1, s.hq, d, true);
    k::rmsnorm_forward<B>(xmid_, P + w.g2, xn2_, rstd_, 1, d);
    k::copy<B>(out, xmid_, d);
    if (s.moe) {
      const k::MoeActs<float> a = k::moe_acts(s.ms, 1, moe_v_.data(), moe_iv_.data());
      const k::MoeScratch<float> sc = k::moe_scratch(s.ms, 1, moe_v_.data() + moe_acts_, moe_iv_.data() + moe_acts_index_);
      k::MoeStats& st = stats_[static_cast<std::size_t>(w.moe)];
      st.reset();  // balancing statistics mean nothing here; keep them from growing
      k::moe_forward<B>(s.ms, 1, xn2_, P + w.w1, layout_->moe_bias_data(w.moe), out, true, a, sc, st);
    } else {
      k::mlp_forward<B>(xn2_, P + w.w1, P + w.w2, hpre_, hact_, out, {1, d, s.H, s.act}, true);
    }
  }

  // The shared block once, on u; returns its output.
  const float* block(int64& ex, const float* u, int64 t) {
    const float* x = u;
    for (int64 j = 0; j < k_; ++j) {
      float* o = x == ya_ ? yb_ : ya_;
      layer(ex++, x, o, t);
      x = o;
    }
    return x;
  }

  // The recurrence's new state from the block output y: normed with the per-recurrence norm.
  const float* new_state(const float* y) {
    if (!per_rec_) return y;
    train::kernels::rmsnorm_forward<B>(y, model_.params.data() + layout_->offsets().norm_recur, z_, rstd_, 1, d_);
    return z_;
  }

  // The r recurrences from the prelude output e_ (train::Transformer::recur_forward for one
  // position); returns the state the coda reads (before the norm after the loop, if any).
  const float* recur(int64& ex, int64 t) {
    namespace k = train::kernels;
    const int64 d = d_;
    if (k_ == 0) return new_state(e_);
    if (is_hyper(inject_)) {
      const int64 L = lanes_;
      const bool shared = inject_ == Inject::hyper_shared;
      float *H = lanes_a_, *Hn = lanes_b_;
      for (int64 l = 0; l < L; ++l) k::copy<B>(H + l * d, e_, d);
      for (int64 i = 0; i < r_; ++i, std::swap(H, Hn)) {
        const auto h = layout_->hyper_set(i);
        k::hyper_aggregate<B>(H, h.alpha, u_, L, d);
        const float* z = new_state(block(ex, u_, t));
        k::hyper_update<B>(H, h.M, h.beta, shared ? u_ : nullptr, z, Hn, L, d);
      }
      k::copy<B>(pooled_, H, d);  // sum-pool the lanes, in lane order
      for (int64 l = 1; l < L; ++l) k::add_into<B>(pooled_, H + l * d, d);
      return pooled_;
    }
    if (inject_ == Inject::additive) k::fill<B>(s_, 0.0f, d);
    else k::copy<B>(s_, e_, d);
    for (int64 i = 0; i < r_; ++i) {
      switch (inject_) {
        case Inject::linear: k::inject_linear_forward<B>(e_, s_, model_.params.data() + layout_->offsets().inject, u_, 1, d); break;
        case Inject::additive: k::sum2<B>(u_, s_, e_, d); break;
        default: k::copy<B>(u_, s_, d); break;  // passthrough (and none)
      }
      k::copy<B>(s_, new_state(block(ex, u_, t)), d);
    }
    return s_;
  }

  const RunModel& model_;
  std::unique_ptr<Engine> layout_;  // a forward-only model of one position: offsets, shapes, MoE biases
  int64 r_;
  int64 d_ = 0, vp_ = 0, vocab_ = 0, ctx_ = 0, k_ = 0, lanes_ = 0, q_rope_ = 2, pos_ = 0;
  Inject inject_ = Inject::none;
  bool per_rec_ = true;
  std::vector<Exec> execs_;
  std::vector<int64> kv_off_;  // each execution's K (seq_len x kv q), V right after it
  std::vector<float> kv_, rope_cos_, rope_sin_, buf_, moe_v_;
  std::vector<train::kernels::int32> moe_iv_;
  int64 moe_acts_ = 0, moe_acts_index_ = 0, moe_scratch_ = 0, moe_scratch_index_ = 0;
  std::vector<train::kernels::MoeStats> stats_;
  float *x0_ = nullptr, *xa_ = nullptr, *xb_ = nullptr, *e_ = nullptr, *s_ = nullptr, *u_ = nullptr, *z_ = nullptr, *c0_ = nullptr;
  float *xf_ = nullptr, *pooled_ = nullptr, *xmid_ = nullptr, *xn_ = nullptr, *xn2_ = nullptr, *ya_ = nullptr, *yb_ = nullptr;
  float *lanes_a_ = nullptr, *lanes_b_ = nullptr, *qkv_ = nullptr, *att_ = nullptr, *hact_ = nullptr;
  float *hpre_ = nullptr, *scores_ = nullptr, *rstd_qk_ = nullptr, *rstd_ = nullptr, *logits_ = nullptr;
};

// Prompts in, tokens out (see the top of this file). Memory is allocated once, in the constructor.
template <class B = train::HostBackend>
class Generator {
 public:
  // The model must outlive the generator.
  Generator(const RunModel& model, int64 recurrences, Decoding how = Decoding::kv_cache) : model_(model) {
    train::check_recurrences(model.spec, recurrences);
    if (how == Decoding::kv_cache) {
      decoder_ = std::make_unique<Decoder<B>>(model, recurrences);
    } else {
      engine_ = inference_model<B>(model, 1, model.seq_len, recurrences);
      tokens_.assign(static_cast<std::size_t>(model.seq_len), 0);
      targets_.assign(tokens_.size(), 0);
    }
    ids_.resize(static_cast<std::size_t>(model.spec.vocab));
    weights_.resize(ids_.size());
  }
  Generator(RunModel&&, int64, Decoding = Decoding::kv_cache) = delete;  // read in place, as Decoder

  // The longest prompt plus new tokens: the model's context, seq_len + 1 (the last token is only
  // predicted, never read).
  int64 context() const { return model_.context(); }

  Generation generate(std::span<const std::int32_t> prompt, int64 max_new, const Sampling& s) {
    const int64 n = static_cast<int64>(prompt.size()), vocab = model_.spec.vocab;
    if (n == 0) throw std::invalid_argument("eval: generation needs a prompt of at least one token");
    if (max_new < 0) throw std::invalid_argument(concat("eval: the number of new tokens must not be negative, not ", max_new));
    if (max_new > context() - n)
      throw std::invalid_argument(concat("eval: a prompt of ", n, " tokens and ", max_new, " new ones make ", n + max_new,
                                         " tokens, more than the model's context of ", context(), " (its trained seq_len + 1)"));
    for (int64 i = 0; i < n; ++i)
      if (prompt[static_cast<std::size_t>(i)] < 0 || prompt[static_cast<std::size_t>(i)] >= vocab)
        throw std::invalid_argument(concat("eval: prompt token ", prompt[static_cast<std::size_t>(i)], " at position ", i,
                                           " is outside the model's vocab ", vocab));
    if (!(s.temperature >= 0) || !std::isfinite(s.temperature))
      throw std::invalid_argument("eval: the temperature must be a number >= 0 (0: greedy)");
    if (s.top_k < 0 || s.top_k > vocab)
      throw std::invalid_argument(concat("eval: top_k must be between 0 (all tokens) and the vocab ", vocab, ", not ", s.top_k));
    Generation g;
    SplitMix64 rng{s.seed};
    const float* z = nullptr;
    if (decoder_) {
      decoder_->reset();
      for (const std::int32_t tok : prompt) z = decoder_->step(tok).data();
    } else {
      history_.assign(prompt.begin(), prompt.end());
    }
    for (int64 i = 0; i < max_new; ++i) {
      if (!decoder_) z = recompute();
      const std::int32_t tok = choose(z, s, rng);
      g.tokens.push_back(tok);
      g.logp.push_back(log_softmax_at(z, tok));
      if (i + 1 == max_new) break;
      if (decoder_) z = decoder_->step(tok).data();
      else history_.push_back(tok);
    }
    return g;
  }

 private:
  // The whole prefix through the batch forward (padding after it changes nothing: it is causal);
  // returns the capped logits of its last position.
  const float* recompute() {
    std::fill(tokens_.begin(), tokens_.end(), 0);
    std::copy(history_.begin(), history_.end(), tokens_.begin());
    engine_->forward(tokens_.data(), targets_.data());
    return engine_->logits().data() + (static_cast<int64>(history_.size()) - 1) * engine_->padded_vocab();
  }

  std::int32_t choose(const float* z, const Sampling& s, SplitMix64& rng) {
    const int64 V = model_.spec.vocab;
    if (s.temperature == 0) {
      int64 best = 0;
      for (int64 j = 1; j < V; ++j) best = z[j] > z[best] ? j : best;
      return static_cast<std::int32_t>(best);
    }
    const int64 k = s.top_k > 0 ? s.top_k : V;
    std::iota(ids_.begin(), ids_.end(), 0);
    if (k < V) {
      // The k most likely (lower id first among equals), then walked in id order, so that the
      // draw does not depend on how near-equal candidates happen to be ordered.
      std::partial_sort(ids_.begin(), ids_.begin() + k, ids_.end(),
                        [z](std::int32_t a, std::int32_t b) { return z[a] > z[b] || (z[a] == z[b] && a < b); });
      std::sort(ids_.begin(), ids_.begin() + k);
    }
    double mx = -std::numeric_limits<double>::infinity(), total = 0;
    for (int64 j = 0; j < k; ++j) mx = std::max(mx, static_cast<double>(z[ids_[static_cast<std::size_t>(j)]]));
    for (int64 j = 0; j < k; ++j) {
      weights_[static_cast<std::size_t>(j)] = std::exp((static_cast<double>(z[ids_[static_cast<std::size_t>(j)]]) - mx) / s.temperature);
      total += weights_[static_cast<std::size_t>(j)];
    }
    const double u = rng.uniform() * total;
    double cum = 0;
    for (int64 j = 0; j < k; ++j) {
      cum += weights_[static_cast<std::size_t>(j)];
      if (u < cum) return ids_[static_cast<std::size_t>(j)];
    }
    return ids_[static_cast<std::size_t>(k - 1)];
  }

  float log_softmax_at(const float* z, std::int32_t tok) const {
    const int64 V = model_.spec.vocab;
    double mx = z[0], sum = 0;
    for (int64 j = 1; j < V; ++j) mx = std::max(mx, static_cast<double>(z[j]));
    for (int64 j = 0; j < V; ++j) sum += std::exp(static_cast<double>(z[j]) - mx);
    return static_cast<float>(static_cast<double>(z[tok]) - mx - std::log(sum));
  }

  const RunModel& model_;
  std::unique_ptr<Decoder<B>> decoder_;                   // kv_cache
  std::unique_ptr<train::Transformer<float, B>> engine_;  // recompute
  std::vector<std::int32_t> tokens_, targets_, history_, ids_;
  std::vector<double> weights_;
};

// One generation (see the top of this file): `max_new` tokens after `prompt`, at `recurrences`
// recurrences, greedy at temperature 0.
template <class B = train::HostBackend>
Generation generate(const RunModel& model, std::span<const std::int32_t> prompt, int64 max_new, double temperature, int64 top_k,
                    std::uint64_t seed, int64 recurrences) {
  Generator<B> g(model, recurrences);
  return g.generate(prompt, max_new, {temperature, top_k, seed});
}

}  // namespace loopscale::eval
