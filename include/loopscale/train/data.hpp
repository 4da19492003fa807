// Token data: the token file format scripts/corpus.sh writes, a deterministic sampler of training
// windows, and a fixed validation sample.
//
// File: a 40-byte header, then the tokens.
//   "LSTOKENS" | u32 version (1) | u32 bytes per token (1, 2 or 4) | u32 vocab | u32 reserved (0)
//   | u64 token count | u64 text bytes the tokens encode (for bits per byte) |  tokens, little-endian
// A corpus folder holds train.bin and val.bin. The training sampler only ever opens train.bin and
// the validation sample only val.bin, so validation text cannot leak into training.
//
// Sampling: the window of sequence b at step s starts at a position drawn from splitmix64 keyed by
// (seed, s, b), so the data position is the step number itself: a resumed run draws exactly the
// windows the uninterrupted run would have, whatever happened before.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "loopscale/train/param_tensor.hpp"
#include "loopscale/util/atomic_file.hpp"
#include "loopscale/util/random.hpp"

namespace loopscale::train {

// Missing, truncated or inconsistent data: bad input, reported before training starts.
struct corpus_error : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

inline constexpr char token_magic[8] = {'L', 'S', 'T', 'O', 'K', 'E', 'N', 'S'};
inline constexpr std::uint32_t token_version = 1;
inline constexpr std::size_t token_header_bytes = 40;

struct TokenFile {
  std::string path;
  std::uint32_t token_bytes = 1;
  std::uint32_t vocab = 0;
  std::uint64_t count = 0;
  std::uint64_t text_bytes = 0;
  std::vector<unsigned char> raw;  // the tokens as stored

  std::int32_t operator[](std::uint64_t i) const {
    const unsigned char* p = raw.data() + i * token_bytes;
    std::uint32_t v = 0;
    for (std::uint32_t b = 0; b < token_bytes; ++b) v |= static_cast<std::uint32_t>(p[b]) << (8 * b);
    return static_cast<std::int32_t>(v);
  }
  // Nats per token to bits per byte of the text.
  double bits_per_byte(double nats_per_token) const {
    return nats_per_token / 0.6931471805599453 * static_cast<double>(count) / static_cast<double>(text_bytes);
  }
};

// Reads and checks a token file; every problem is a corpus_error naming the file.
inline TokenFile read_token_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw corpus_error("data: cannot open " + path + " (build a corpus with scripts/corpus.sh)");
  unsigned char h[token_header_bytes];
  if (!f.read(reinterpret_cast<char*>(h), sizeof h)) throw corpus_error("data: " + path + " is shorter than its header");
  if (std::memcmp(h, token_magic, 8) != 0) throw corpus_error("data: " + path + " is not a loopscale token file (bad magic)");
  const auto u32 = [&h](int o) {
    std::uint32_t v;
    std::memcpy(&v, h + o, 4);
    return v;
  };
  const auto u64 = [&h](int o) {
    std::uint64_t v;
    std::memcpy(&v, h + o, 8);
    return v;
  };
  TokenFile t;
  t.path = path;
  if (u32(8) != token_version) throw corpus_error("data: " + path + " has version " + std::to_string(u32(8)) + ", expected 1");
  t.token_bytes = u32(12);
  t.vocab = u32(16);
  t.count = u64(24);
  t.text_bytes = u64(32);
  if (t.token_bytes != 1 && t.token_bytes != 2 && t.token_bytes != 4)
    throw corpus_error("data: " + path + " has " + std::to_string(t.token_bytes) + " bytes per token (1, 2 or 4)");
  if (t.text_bytes == 0) t.text_bytes = t.count;
  const auto size = std::filesystem::file_size(path);
  const auto expect = token_header_bytes + t.count * t.token_bytes;
  if (size != expect)
    throw corpus_error("data: " + path + " is truncated or padded: " + std::to_string(size) + " bytes, header says " +
                       std::to_string(expect));
  t.raw.resize(t.count * t.token_bytes);
  if (!f.read(reinterpret_cast<char*>(t.raw.data()), static_cast<std::streamsize>(t.raw.size())))
    throw corpus_error("data: could not read the tokens of " + path);
  return t;
}

// Writes a token file atomically (util/atomic_file.hpp); `token_bytes` low bytes of each token.
inline void write_token_file(const std::string& path, const std::vector<std::int32_t>& tokens, std::uint32_t vocab,
                             std::uint32_t token_bytes = 1) {
  write_file_atomic<corpus_error>(path, [&](std::FILE* f) {
    const std::uint32_t h32[4] = {token_version, token_bytes, vocab, 0};
    const std::uint64_t h64[2] = {tokens.size(), tokens.size() * token_bytes};
    bool ok = std::fwrite(token_magic, 1, 8, f) == 8 && std::fwrite(h32, 1, sizeof h32, f) == sizeof h32 &&
              std::fwrite(h64, 1, sizeof h64, f) == sizeof h64;
    for (std::size_t i = 0; ok && i < tokens.size(); ++i) ok = std::fwrite(&tokens[i], 1, token_bytes, f) == token_bytes;
    return ok;
  });
}

// Checks that the vocabulary a file declares fits the model's and that the file holds at least
// seq_len + 2 tokens (one more than a (seq_len + 1)-token window needs).
inline void check_fits(const TokenFile& f, int64 vocab, int64 seq_len) {
  if (f.vocab > static_cast<std::uint64_t>(vocab))
    throw corpus_error("data: " + f.path + " has vocab " + std::to_string(f.vocab) + " but the model's is " + std::to_string(vocab));
  if (f.count < static_cast<std::uint64_t>(seq_len) + 2)
    throw corpus_error("data: " + f.path + " holds " + std::to_string(f.count) + " tokens, fewer than one window of " +
                       std::to_string(seq_len + 1));
}

// Deterministic (T+1)-token windows of the training file: inputs are the first T, targets the last T.
class TrainSampler {
 public:
  TrainSampler(const TokenFile& train, std::uint64_t seed, int64 seq_len) : f_(&train), seed_(seed), T_(seq_len) {}

  // Fills batch x T inputs and targets for optimiser step `step`.
  void batch(int64 step, int64 batch, std::int32_t* inputs, std::int32_t* targets) const {
    const std::uint64_t span = f_->count - static_cast<std::uint64_t>(T_);  // starts in [0, count - T - 1]
    for (int64 b = 0; b < batch; ++b) {
      SplitMix64 r{seed_ ^ (static_cast<std::uint64_t>(step) * 0xD1B54A32D192ED03ull) ^
                   (static_cast<std::uint64_t>(b) * 0x8CB92BA72F3D8DD7ull)};
      r.next();
      const std::uint64_t start = r.next() % span;
      for (int64 t = 0; t < T_; ++t) {
        inputs[b * T_ + t] = (*f_)[start + t];
        targets[b * T_ + t] = (*f_)[start + t + 1];
      }
    }
  }

 private:
  const TokenFile* f_;
  std::uint64_t seed_;
  int64 T_;
};

// A fixed validation sample: `windows` windows spread evenly over the validation file, the same for
// every seed and every run, so validation losses of different runs compare.
class ValidationSet {
 public:
  ValidationSet(const TokenFile& val, int64 seq_len, int64 windows) : f_(&val), T_(seq_len) {
    // Evenly spaced starts; they overlap only when the file is shorter than the sample.
    const std::uint64_t span = val.count - static_cast<std::uint64_t>(seq_len);
    n_ = std::max<int64>(1, windows);
    for (int64 i = 0; i < n_; ++i) starts_.push_back(span * static_cast<std::uint64_t>(i) / static_cast<std::uint64_t>(n_));
  }
  int64 windows() const { return n_; }
  // Windows [first, first + batch) (modulo the sample size), as inputs and targets.
  void batch(int64 first, int64 batch, std::int32_t* inputs, std::int32_t* targets) const {
    for (int64 b = 0; b < batch; ++b) {
      const std::uint64_t start = starts_[static_cast<std::size_t>((first + b) % n_)];
      for (int64 t = 0; t < T_; ++t) {
        inputs[b * T_ + t] = (*f_)[start + t];
        targets[b * T_ + t] = (*f_)[start + t + 1];
      }
    }
  }

 private:
  const TokenFile* f_;
  int64 T_, n_ = 0;
  std::vector<std::uint64_t> starts_;
};

}  // namespace loopscale::train
