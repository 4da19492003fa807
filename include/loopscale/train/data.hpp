// Training data: a deterministic sampler of training windows and a fixed validation sample, over a
// corpus split (data/corpus.hpp: one token file or many shards, memory-mapped). The token file
// format, corpus folders and tokenizers are the data layer's (include/loopscale/data/); the names
// below keep their old spelling in this namespace.
//
// A corpus folder has a training and a validation split. The training sampler only ever reads the
// training split and the validation sample only the validation split, so validation text cannot
// leak into training (data prepare splits by whole documents).
//
// Sampling: the window of sequence b at step s starts at a position drawn from splitmix64 keyed by
// (seed, s, b) over the whole training stream (the concatenation of its shards), so
//   - the data position is the step number itself: a resumed run draws exactly the windows the
//     uninterrupted run would have, whatever happened before;
//   - the windows do not depend on how the stream was cut into shards (a window may span two), and
//     a single-file corpus gives the windows it always gave.
// After copying a window the sampler releases its pages of the mapping (data/mapped_file.hpp), so
// the trainer's resident memory stays flat however large the corpus.
//
// A packed training split (data/packing.hpp: rows of seq_len + 1 tokens, each beginning at a
// document's BOS) is read row by row instead, as the paper's loader reads its rows: sequence b of
// step s is row (s x batch + b) modulo the rows, so each epoch reads every row once, in the
// folder's (shuffled) order, and a resumed run again reads what the uninterrupted one would. The
// seed does not change that order (the paper's loader has none either), and a window drawn from a
// mix corpus leaves its row unread. The validation sample of a packed split is its first rows,
// each read at most once (validation_batches).
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "loopscale/data/corpus.hpp"
#include "loopscale/data/error.hpp"
#include "loopscale/data/token_file.hpp"
#include "loopscale/train/param_tensor.hpp"
#include "loopscale/util/random.hpp"

namespace loopscale::train {

using data::corpus_error;
using data::Corpus;
using data::TokenFile;
using data::read_token_file;
using data::write_token_file;
using data::token_magic;
using data::token_version;
using data::token_header_bytes;
using data::check_fits;

// Checks that the vocabulary a file declares fits the model's and that the file holds at least
// seq_len + 2 tokens (one more than a (seq_len + 1)-token window needs).
inline void check_fits(const TokenFile& f, int64 vocab, int64 seq_len) {
  if (f.vocab > static_cast<std::uint64_t>(vocab))
    throw corpus_error("data: " + f.path + " has vocab " + std::to_string(f.vocab) + " but the model's is " + std::to_string(vocab));
  check_fits(Corpus(f), seq_len);
}

// Deterministic (T+1)-token windows of the training split: inputs are the first T, targets the last T.
// With a mix corpus, the window of (step, b) comes from it with probability mix_frac, decided by a
// third draw of the same key: the windows that stay in the corpus are exactly those a run without
// the mix reads at the same (step, b), and a resumed run draws the same sources. With mix_stride
// S > 0 a window from the mix starts only at a multiple of S (TrainConfig::mix_stride).
// `batch` (the sequences of a step) places a packed split's rows; an unpacked one does not need it.
class TrainSampler {
 public:
  TrainSampler(Corpus train, std::uint64_t seed, int64 seq_len, std::optional<Corpus> mix = std::nullopt, double mix_frac = 0,
               int64 mix_stride = 0, int64 batch = 0)
      : c_(std::move(train)), mix_(std::move(mix)), mix_frac_(mix_ ? mix_frac : 0), mix_stride_(mix_ ? mix_stride : 0), seed_(seed),
        T_(seq_len), batch_(batch), window_(static_cast<std::size_t>(seq_len + 1)) {
    if (c_.row_tokens() > 0) {
      data::check_fits(c_, seq_len);
      if (batch_ < 1) throw corpus_error("data: " + c_.name() + " is packed in rows: its sampler needs the batch size");
    }
  }
  TrainSampler(const TokenFile& train, std::uint64_t seed, int64 seq_len) : TrainSampler(Corpus(train), seed, seq_len) {}

  // Whether the window of sequence b at step `step` comes from the mix corpus.
  bool from_mix(int64 step, int64 b) const {
    if (mix_frac_ <= 0) return false;
    SplitMix64 r = key(step, b);
    r.next();
    r.next();
    return r.uniform() < mix_frac_;
  }

  // The first position of the window of sequence b at step `step`, in the corpus it comes from.
  std::uint64_t start(int64 step, int64 b) const {
    const bool mixed = from_mix(step, b);
    if (!mixed && c_.row_tokens() > 0) {
      __extension__ using u128 = unsigned __int128;  // step x batch may pass 64 bits only in a fuzzer's hands
      const u128 row = (static_cast<u128>(step) * static_cast<u128>(batch_) + static_cast<u128>(b)) % c_.rows();
      return static_cast<std::uint64_t>(row) * c_.row_tokens();
    }
    const Corpus& c = mixed ? *mix_ : c_;
    const std::uint64_t span = c.tokens() - static_cast<std::uint64_t>(T_);  // starts in [0, tokens - T - 1]
    SplitMix64 r = key(step, b);
    r.next();
    if (mixed && mix_stride_ > 0) {  // starts 0, S, 2S, ... up to tokens - T - 1 (check_fits: tokens >= T + 2)
      const auto stride = static_cast<std::uint64_t>(mix_stride_);
      return r.next() % ((span - 1) / stride + 1) * stride;
    }
    return r.next() % span;
  }

  // Fills batch x T inputs and targets for optimiser step `step`.
  void batch(int64 step, int64 batch, std::int32_t* inputs, std::int32_t* targets) const {
    if (c_.row_tokens() > 0 && batch != batch_)  // rows are placed by the constructor's batch: another would skip or repeat rows
      throw corpus_error("data: " + c_.name() + " is read in rows placed by batches of " + std::to_string(batch_) + ", not " + std::to_string(batch));
    this->batch(step, 0, batch, inputs, targets);
  }
  // Sequences [first, first + count) of step `step`'s batch: a data-parallel rank's share, the
  // same windows whatever the split (trainer.hpp).
  void batch(int64 step, int64 first, int64 count, std::int32_t* inputs, std::int32_t* targets) const {
    for (int64 i = 0; i < count; ++i) {
      const int64 b = first + i;
      const Corpus& c = from_mix(step, b) ? *mix_ : c_;
      const std::uint64_t s = start(step, b);
      c.read(s, window_.size(), window_.data());
      c.release(s, window_.size());
      std::copy(window_.begin(), window_.end() - 1, inputs + i * T_);
      std::copy(window_.begin() + 1, window_.end(), targets + i * T_);
    }
  }

  const Corpus& corpus() const { return c_; }

 private:
  SplitMix64 key(int64 step, int64 b) const {
    return SplitMix64{seed_ ^ (static_cast<std::uint64_t>(step) * 0xD1B54A32D192ED03ull) ^ (static_cast<std::uint64_t>(b) * 0x8CB92BA72F3D8DD7ull)};
  }

  Corpus c_;
  std::optional<Corpus> mix_;
  double mix_frac_ = 0;
  int64 mix_stride_ = 0;
  std::uint64_t seed_;
  int64 T_, batch_;
  mutable std::vector<std::int32_t> window_;  // one (T+1)-token window, allocated once
};

// The trainer's validation sample in batches of `batch` windows: eval_tokens / (batch x seq_len),
// at least one. A packed split holds no more than its rows: validation reads each row at most
// once (as the paper's final evaluation reads its whole validation split once, 34,560 of its
// 34,608 rows in batches of 32 x 8 ranks), so the count stops at rows / batch, dropping fewer
// than `batch` rows at the end. Only a split of fewer rows than one batch is read with rows
// repeated. The one rule for the trainer and for `loopscale eval` (eval/validation.hpp), which
// reproduces the trainer's val_loss on the same windows.
//
// A sample larger than the split is bounded (check_validation_windows): `what` names the setting
// for the error (the config's eval_tokens, or a run's config.json read by `loopscale eval`).
inline int64 validation_batches(int64 eval_tokens, int64 batch, int64 seq_len, const Corpus& val,
                                const std::string& what = "config: eval_tokens");

// TrainConfig's default eval_tokens (train_config.hpp), the floor of the bound below.
inline constexpr int64 default_eval_tokens = 1 << 17;

// The most windows a validation sample of `val` may have: one per distinct window of the split
// (its rows, packed; else its start positions, tokens - seq_len), or the default sample's
// (default_eval_tokens / seq_len) where that is more. Past the distinct windows a sample only
// scores the same windows again, so a larger one adds time and nothing else: eval_tokens
// 99999999999999 asked for 3e12 windows of a 1.3M-token split, and the trainer allocated a loss
// per forward pass after the whole run had trained (std::bad_alloc, the run lost), `loopscale eval`
// ran for ever. The default's floor keeps the default sample (which overlaps on a toy split)
// accepted, as it always was.
inline std::uint64_t distinct_validation_windows(const Corpus& val, int64 seq_len) {
  if (val.row_tokens() > 0) return val.rows();
  return val.tokens() > static_cast<std::uint64_t>(seq_len) ? val.tokens() - static_cast<std::uint64_t>(seq_len) : 1;
}
inline int64 max_validation_windows(const Corpus& val, int64 seq_len) {
  const std::uint64_t cap = std::uint64_t{1} << 40;  // far above any split; keeps the tokens of the bound (x seq_len <= 2^20) in an int64
  const std::uint64_t floor = static_cast<std::uint64_t>(std::max<int64>(1, default_eval_tokens / seq_len));
  return static_cast<int64>(std::max(std::min(distinct_validation_windows(val, seq_len), cap), floor));
}

// Refuses `windows` validation windows (asked for by `what` = `tokens`, in groups of `batch`
// windows) past max_validation_windows, rounded up to whole groups: one line naming the setting,
// the split and the most it may be, before any work (the trainer checks it before its first step,
// `train --dry-run` and `loopscale eval` before they score).
inline void check_validation_windows(int64 windows, int64 batch, int64 seq_len, const Corpus& val, const std::string& what, int64 tokens) {
  const int64 groups = (max_validation_windows(val, seq_len) + batch - 1) / batch;  // whole groups: the last may repeat a few windows
  if (windows <= groups * batch) return;
  throw corpus_error(what + " (" + std::to_string(tokens) + ") asks for " + std::to_string(windows) + " validation windows of " +
                     std::to_string(seq_len + 1) + " tokens, but the validation split " + val.name() + " holds " +
                     std::to_string(distinct_validation_windows(val, seq_len)) +
                     " distinct ones (more only score the same windows again); give at most " + std::to_string(groups * batch * seq_len) +
                     " tokens");
}

inline int64 validation_batches(int64 eval_tokens, int64 batch, int64 seq_len, const Corpus& val, const std::string& what) {
  int64 n = std::max<int64>(1, eval_tokens / (batch * seq_len));
  if (val.row_tokens() > 0 && val.rows() >= static_cast<std::uint64_t>(batch))
    n = std::min<int64>(n, static_cast<int64>(val.rows() / static_cast<std::uint64_t>(batch)));
  check_validation_windows(n * batch, batch, seq_len, val, what, eval_tokens);
  return n;
}

// A fixed validation sample: `windows` windows spread evenly over the validation split, the same
// for every seed and every run, so validation losses of different runs compare.
class ValidationSet {
 public:
  ValidationSet(Corpus val, int64 seq_len, int64 windows)
      : c_(std::move(val)), T_(seq_len), window_(static_cast<std::size_t>(seq_len + 1)) {
    // Evenly spaced starts (start()); they overlap only when the split is shorter than the sample.
    // A packed split: its first rows (start()), repeated when it has fewer.
    if (c_.row_tokens() > 0) data::check_fits(c_, seq_len);
    span_ = c_.tokens() - static_cast<std::uint64_t>(seq_len);
    n_ = std::max<int64>(1, windows);
  }
  ValidationSet(const TokenFile& val, int64 seq_len, int64 windows) : ValidationSet(Corpus(val), seq_len, windows) {}
  int64 windows() const { return n_; }
  const Corpus& corpus() const { return c_; }
  // The tokens of the split the windows read, each counted once: windows() x (seq_len + 1) unless
  // the split is shorter than that, when the windows overlap (and repeat where there are more
  // windows than starts), so the loss over them weights some tokens more than once and rests on
  // fewer tokens than the count says. `loopscale eval` prints it then.
  std::uint64_t covered_tokens() const {
    const std::uint64_t w = window_.size();
    if (c_.row_tokens() > 0) return std::min<std::uint64_t>(static_cast<std::uint64_t>(n_), c_.rows()) * w;
    if (span_ / static_cast<std::uint64_t>(n_) >= w) return static_cast<std::uint64_t>(n_) * w;  // every gap at least a window
    std::uint64_t covered = 0;
    for (int64 i = 0; i + 1 < n_; ++i) covered += std::min(w, start(i + 1) - start(i));
    return covered + w;
  }
  // Windows [first, first + batch) (modulo the sample size), as inputs and targets.
  void batch(int64 first, int64 batch, std::int32_t* inputs, std::int32_t* targets) const {
    for (int64 b = 0; b < batch; ++b) {
      const std::uint64_t s = start((first + b) % n_);
      c_.read(s, window_.size(), window_.data());
      c_.release(s, window_.size());
      std::copy(window_.begin(), window_.end() - 1, inputs + b * T_);
      std::copy(window_.begin() + 1, window_.end(), targets + b * T_);
    }
  }

 private:
  // Window i starts at span i / n (in 128 bits: span x i overflows 64 for a long split and a large
  // sample; below that the value is the one 64-bit arithmetic gave).
  std::uint64_t start(int64 i) const {
    if (c_.row_tokens() > 0) return static_cast<std::uint64_t>(i) % c_.rows() * c_.row_tokens();
    __extension__ using u128 = unsigned __int128;
    return static_cast<std::uint64_t>(static_cast<u128>(span_) * static_cast<u128>(i) / static_cast<u128>(n_));
  }
  Corpus c_;
  int64 T_, n_ = 0;
  std::uint64_t span_ = 0;
  mutable std::vector<std::int32_t> window_;  // one (T+1)-token window, allocated once
};

}  // namespace loopscale::train
