// Validation loss through a Scorer: the mean next-token loss over the same windows of val.bin the
// trainer evaluates (train::ValidationSet: evenly spaced (seq_len + 1)-token windows), so that at
// the trained number of recurrences it reproduces the run's val_loss, and at any other r_eval it
// is the test-time recurrence curve's loss on exactly the same tokens.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "loopscale/data/corpus.hpp"
#include "loopscale/eval/scorer.hpp"
#include "loopscale/train/data.hpp"
#include "loopscale/util/text.hpp"

namespace loopscale::eval {

struct ValidationResult {
  std::int64_t windows = 0, tokens = 0;  // tokens scored: windows x seq_len
  // The split's tokens the windows read, each once (train::ValidationSet::covered_tokens): less
  // than windows x (seq_len + 1) when the split is too short for them and they overlap.
  std::int64_t covered_tokens = 0;
  double loss = 0;                       // nats per token
  double bpb = 0;                        // bits per byte of the text (NaN when the corpus does not know its bytes)
  double seconds = 0, tokens_per_s = 0;  // of the scoring alone
};

inline nlohmann::json to_json(const ValidationResult& v) {
  const auto num = [](double x) { return std::isfinite(x) ? nlohmann::json(x) : nlohmann::json(nullptr); };
  return {{"windows", v.windows}, {"tokens", v.tokens}, {"covered_tokens", v.covered_tokens}, {"loss", num(v.loss)}, {"bpb", num(v.bpb)},
          {"seconds", v.seconds}, {"tokens_per_s", v.tokens_per_s}};
}

// The trainer's number of validation windows for a config over its validation split
// (train::validation_batches batches of `batch` windows; `what` names eval_tokens in its error).
inline std::int64_t trainer_validation_windows(std::int64_t eval_tokens, std::int64_t batch, std::int64_t seq_len, const data::Corpus& val,
                                               const std::string& what = "config: eval_tokens") {
  return train::validation_batches(eval_tokens, batch, seq_len, val, what) * batch;
}

// The numbers of recurrences of a trained-r model's test-time recurrence curve: 1, 2, 4, ... up to
// 4r, and r itself when it is not a power of two: fewer recurrences than trained show what each
// one adds, more show whether the state stays bounded (the iso-depth paper evaluates up to 4r).
inline std::vector<std::int64_t> recurrence_curve_points(std::int64_t r) {
  if (r < 1) throw std::invalid_argument(concat("eval: a recurrence curve needs a trained r of at least 1, got ", r));
  std::vector<std::int64_t> rs;
  for (std::int64_t x = 1; x <= 4 * r; x *= 2) rs.push_back(x);
  if (std::find(rs.begin(), rs.end(), r) == rs.end()) rs.insert(std::upper_bound(rs.begin(), rs.end(), r), r);
  return rs;
}

// Scores `windows` windows of seq_len + 1 tokens of `val` in groups of `group` sequences. A split
// shorter than the windows is not refused (the trainer validates on the same windows, and this
// must reproduce its val_loss): they overlap, and covered_tokens says how many tokens they read.
inline ValidationResult validation_loss(Scorer& scorer, const data::Corpus& val, std::int64_t seq_len, std::int64_t windows,
                                        std::int64_t group = 8) {
  if (seq_len + 1 > scorer.context())
    throw std::invalid_argument(concat("eval: validation windows of ", seq_len + 1, " tokens exceed the model's context of ",
                                       scorer.context()));
  if (val.tokens() < static_cast<std::uint64_t>(seq_len + 1))
    throw std::invalid_argument(concat("eval: ", val.name(), " holds ", val.tokens(), " tokens, fewer than one window of ", seq_len + 1));
  const train::ValidationSet set(val, seq_len, windows);
  std::vector<std::int32_t> inputs(static_cast<std::size_t>(seq_len)), targets(inputs.size());
  std::vector<std::vector<std::int32_t>> seqs;
  double nats = 0;
  std::int64_t scored = 0;
  double seconds = 0;
  for (std::int64_t first = 0; first < set.windows(); first += group) {
    seqs.clear();
    for (std::int64_t w = first; w < std::min(set.windows(), first + group); ++w) {
      set.batch(w, 1, inputs.data(), targets.data());
      std::vector<std::int32_t> s(inputs);
      s.push_back(targets.back());  // inputs then the last target: the (seq_len + 1)-token window
      seqs.push_back(std::move(s));
    }
    const auto t0 = std::chrono::steady_clock::now();
    const std::vector<SequenceScores> scores = scorer.score(seqs);
    seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    for (const SequenceScores& s : scores) {
      for (const float lp : s.logp) nats -= lp;
      scored += static_cast<std::int64_t>(s.logp.size());
    }
  }
  ValidationResult r;
  r.windows = set.windows();
  r.tokens = scored;
  r.covered_tokens = static_cast<std::int64_t>(set.covered_tokens());
  r.loss = nats / static_cast<double>(scored);
  r.bpb = val.bits_per_byte(r.loss);
  r.seconds = seconds;
  r.tokens_per_s = seconds > 0 ? static_cast<double>(scored) / seconds : 0;
  return r;
}

}  // namespace loopscale::eval
