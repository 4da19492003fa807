// What scoring a task needs from a model: for token sequences, the log-probability of every next
// token and the most likely one. eval/score.hpp asks only this, so tasks are scored the same way
// by a trained loopscale model (eval/model_scorer.hpp), by any number of recurrences, and by the
// toy models of the tests.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace loopscale::eval {

// For a sequence x_0 .. x_{n-1}: logp[t] = log p(x_{t+1} | x_0 .. x_t) in nats and argmax[t] the
// most likely token after x_0 .. x_t, for t = 0 .. n-2.
struct SequenceScores {
  std::vector<float> logp;
  std::vector<std::int32_t> argmax;
};

class Scorer {
 public:
  virtual ~Scorer() = default;
  // The longest sequence score() accepts, in tokens; callers crop contexts from the left to it.
  virtual std::int64_t context() const = 0;
  // One result per sequence, in order; every sequence has 2 .. context() tokens.
  virtual std::vector<SequenceScores> score(std::span<const std::vector<std::int32_t>> sequences) = 0;
};

}  // namespace loopscale::eval
