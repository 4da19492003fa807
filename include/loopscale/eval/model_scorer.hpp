// The Scorer of a loaded loopscale model (eval/run_model.hpp): per-position next-token
// log-probabilities and argmax of token sequences, at any number of recurrences the model can run.
//
// What is computed is the training forward itself (train::Transformer::forward), built forward
// only: no gradients, no backward buffers, and every recurrence through one set of scratch
// activations, so its memory does not depend on r. logp[t] is minus the cross-entropy the training
// loss averages at that position (log-softmax over the real vocabulary after the logit softcap);
// argmax[t] is the most likely token under the same capped logits (the lowest id on ties). The
// recurrences are the scorer's (set_recurrences; train::check_recurrences says which r a model can
// run and why the paper's per-recurrence hyperconnections cannot exceed their trained R).
//
// Batching: the sequences of a call are taken longest first, up to `batch` at a time, and padded to
// a shape of (b, T) with b and T powers of two (T at most seq_len, b at most `batch`), so a few
// shapes serve every call; each shape's engine is allocated the first time it is needed and reused
// (all of them read the RunModel's one copy of the parameters). Padding cannot change the scores of
// real positions: attention is causal, every other operation is per position, and MoE layers route
// without capacity at inference (RunModel::inference_routing says why), so position t depends on
// tokens 0..t only. Results may differ from another shape's in the last bits of a float (the GEMMs
// are blocked by shape), never more.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <map>
#include <memory>
#include <numeric>
#include <span>
#include <stdexcept>
#include <utility>
#include <vector>

#include "loopscale/eval/run_model.hpp"
#include "loopscale/eval/scorer.hpp"
#include "loopscale/train/model.hpp"

namespace loopscale::eval {

template <class B = train::HostBackend>
class ModelScorer : public Scorer {
 public:
  // Scores with `recurrences` recurrences, at most `batch` sequences per forward. The model must
  // outlive the scorer (its parameters are read in place).
  ModelScorer(const RunModel& model, int64 recurrences, int64 batch = 8) : model_(model), batch_(batch) {
    if (batch < 1) throw std::invalid_argument(concat("eval: the scorer's batch must be at least 1, not ", batch));
    if (model.seq_len < 1) throw std::invalid_argument("eval: the model has no trained sequence length");
    set_recurrences(recurrences);
  }
  // The scorer reads the model in place: a temporary would be gone before the first score().
  ModelScorer(RunModel&&, int64, int64 = 8) = delete;

  void set_recurrences(int64 r) {
    train::check_recurrences(model_.spec, r);
    r_ = r;
    for (auto& [shape, engine] : engines_) engine->set_recurrences(r);
  }
  int64 recurrences() const { return r_; }
  const RunModel& model() const { return model_; }

  std::int64_t context() const override { return model_.context(); }

  std::vector<SequenceScores> score(std::span<const std::vector<std::int32_t>> sequences) override {
    const int64 n = static_cast<int64>(sequences.size()), vocab = model_.spec.vocab;
    for (int64 i = 0; i < n; ++i) {
      const std::vector<std::int32_t>& s = sequences[static_cast<std::size_t>(i)];
      const int64 len = static_cast<int64>(s.size());
      if (len < 2 || len > context())
        throw std::invalid_argument(concat("eval: sequence ", i, " has ", len, " tokens; a scored sequence has 2 to ", context(),
                                           " (the model's context)"));
      for (int64 t = 0; t < len; ++t)
        if (s[static_cast<std::size_t>(t)] < 0 || s[static_cast<std::size_t>(t)] >= vocab)
          throw std::invalid_argument(concat("eval: token ", s[static_cast<std::size_t>(t)], " at position ", t, " of sequence ", i,
                                             " is outside the model's vocab ", vocab));
    }
    std::vector<SequenceScores> out(static_cast<std::size_t>(n));
    // Longest first, so each chunk's sequences need about the same number of positions.
    std::vector<int64> order(static_cast<std::size_t>(n));
    std::iota(order.begin(), order.end(), int64{0});
    std::stable_sort(order.begin(), order.end(), [&](int64 a, int64 b) {
      return sequences[static_cast<std::size_t>(a)].size() > sequences[static_cast<std::size_t>(b)].size();
    });
    for (int64 c = 0; c < n; c += batch_) {
      const std::span<const int64> chunk(order.data() + c, static_cast<std::size_t>(std::min(batch_, n - c)));
      score_chunk(sequences, chunk, out);
    }
    return out;
  }

  // The (batch, positions) shapes allocated so far.
  std::size_t shapes() const { return engines_.size(); }

 private:
  using Engine = train::Transformer<float, B>;

  static int64 pow2_at_least(int64 v) { return static_cast<int64>(std::bit_ceil(static_cast<std::uint64_t>(v))); }

  Engine& engine(int64 b, int64 T) {
    std::unique_ptr<Engine>& e = engines_[{b, T}];
    if (!e) e = inference_model<B>(model_, b, T, r_);
    return *e;
  }

  // One forward over the sequences `chunk` (indices into `seqs`), results into `out`.
  void score_chunk(std::span<const std::vector<std::int32_t>> seqs, std::span<const int64> chunk, std::vector<SequenceScores>& out) {
    const int64 count = static_cast<int64>(chunk.size());
    const int64 longest = static_cast<int64>(seqs[static_cast<std::size_t>(chunk[0])].size());
    const int64 T = std::min(pow2_at_least(longest - 1), model_.seq_len);
    const int64 b = std::min(pow2_at_least(count), batch_);
    Engine& m = engine(b, T);
    // Row i: the sequence's tokens 0..n-2 as input, 1..n-1 as targets; the padding reads token 0.
    tokens_.assign(static_cast<std::size_t>(b * T), 0);
    targets_.assign(tokens_.size(), 0);
    for (int64 i = 0; i < count; ++i) {
      const std::vector<std::int32_t>& s = seqs[static_cast<std::size_t>(chunk[static_cast<std::size_t>(i)])];
      std::copy(s.begin(), s.end() - 1, tokens_.begin() + i * T);
      std::copy(s.begin() + 1, s.end(), targets_.begin() + i * T);
      SequenceScores& r = out[static_cast<std::size_t>(chunk[static_cast<std::size_t>(i)])];
      r.logp.resize(s.size() - 1);
      r.argmax.resize(s.size() - 1);
    }
    m.forward(tokens_.data(), targets_.data());
    const float* loss = m.token_losses().data();
    const float* logits = m.logits().data();
    const int64 vp = m.padded_vocab(), vocab = model_.spec.vocab;
    SequenceScores* res = out.data();
    const int64* idx = chunk.data();
    B::parallel_for(count * T, [=](int64 row) {
      const int64 i = row / T, t = row % T;
      SequenceScores& r = res[idx[i]];
      if (t >= static_cast<int64>(r.logp.size())) return;  // padding
      r.logp[static_cast<std::size_t>(t)] = -loss[row];
      const float* z = logits + row * vp;
      int64 best = 0;
      for (int64 j = 1; j < vocab; ++j) best = z[j] > z[best] ? j : best;
      r.argmax[static_cast<std::size_t>(t)] = static_cast<std::int32_t>(best);
    });
  }

  const RunModel& model_;
  int64 batch_;
  int64 r_ = 1;
  std::map<std::pair<int64, int64>, std::unique_ptr<Engine>> engines_;
  std::vector<std::int32_t> tokens_, targets_;  // one chunk's inputs
};

}  // namespace loopscale::eval
