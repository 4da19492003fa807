// A corpus split as one stream of tokens: its shards, mapped, in order. Two layouts of a folder:
//   manifest  manifest.json (manifest.hpp) lists each split's shards; `loopscale data prepare` and
//             `data import` write it
//   single    train.bin and val.bin, no manifest (what scripts/corpus.sh wrote before manifests,
//             and what tests write by hand): each split is one file
// Position p of a split is token p of the concatenation of its shards, so a reader that draws
// positions over the whole split reads the same tokens however the split was cut into shards.
//
// Opening checks every shard's header and size, and that it agrees with the manifest (vocab, token
// count, text bytes) and with the other shards, and (Verify::checksums, the default) reads every
// shard once against its checksum: the one in its header (token_file.hpp, version 2), or for a
// version 1 shard the manifest's whole-file one; a version 1 train.bin / val.bin without a
// manifest has none. The same read checks every token against the vocabulary, in every version.
// Why on every open: a flipped bit in a shard would otherwise train silently on wrong tokens, and a
// token outside the vocabulary would fail only when training reached it, after the run folder is
// written; reading costs about what the page cache delivers (docs/data.md, "Integrity", has the
// measured figures); the reads go through a buffer, not the mapping, so the trainer's resident
// memory stays flat. verify_corpus (`loopscale data verify`) reads every byte too.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "loopscale/data/checksum.hpp"
#include "loopscale/data/error.hpp"
#include "loopscale/data/manifest.hpp"
#include "loopscale/data/token_file.hpp"
#include "loopscale/spec/spec.hpp"

namespace loopscale::data {

enum class Split { train, val };
inline const char* split_name(Split s) { return s == Split::train ? "train" : "val"; }

class Corpus {
 public:
  Corpus() = default;
  // A corpus of the given shards (all of one vocab), named `name` in errors.
  Corpus(std::vector<TokenFile> shards, std::string name) : shards_(std::move(shards)), name_(std::move(name)) {
    for (const TokenFile& f : shards_) {
      if (!shards_.empty() && f.vocab != shards_.front().vocab)
        throw corpus_error("data: " + f.path + " has vocab " + std::to_string(f.vocab) + " but " + shards_.front().path + " has " +
                           std::to_string(shards_.front().vocab));
      // Each file's counts are bounded by its size (read_token_file, check_text_bytes), their sums
      // by nothing: a wrapped sum would be a wrong bits per byte.
      if (f.count > std::numeric_limits<std::uint64_t>::max() - tokens_ || f.text_bytes > std::numeric_limits<std::uint64_t>::max() - text_bytes_)
        throw corpus_error("data: " + name_ + ": its shards' token or text byte counts overflow 64 bits at " + f.path);
      starts_.push_back(tokens_);
      tokens_ += f.count;
      text_bytes_ += f.text_bytes;
      text_known_ = text_known_ && f.text_bytes > 0;
    }
    for (const TokenFile& f : shards_) f.map.advise_random();
  }
  // One token file as a corpus.
  explicit Corpus(const TokenFile& f) : Corpus(std::vector<TokenFile>{f}, f.path) {}

  const std::string& name() const { return name_; }
  const std::vector<TokenFile>& shards() const { return shards_; }
  std::uint64_t tokens() const { return tokens_; }
  std::uint64_t text_bytes() const { return text_known_ ? text_bytes_ : 0; }
  std::uint32_t vocab() const { return shards_.empty() ? 0 : shards_.front().vocab; }

  // A packed split (packing.hpp): its stream is rows of row_tokens() tokens, each beginning at a
  // document; 0: a stream of documents joined by a newline, read anywhere.
  std::uint64_t row_tokens() const { return row_tokens_; }
  std::uint64_t rows() const { return row_tokens_ > 0 ? tokens_ / row_tokens_ : 0; }
  void set_row_tokens(std::uint64_t r) {
    if (r > 0 && tokens_ % r != 0)
      throw corpus_error("data: " + name_ + " holds " + std::to_string(tokens_) + " tokens, not whole rows of " + std::to_string(r));
    row_tokens_ = r;
  }

  // Nats per token to bits per byte of the text; NaN when a shard's text bytes are unknown.
  double bits_per_byte(double nats_per_token) const {
    if (!text_known_ || text_bytes_ == 0) return std::numeric_limits<double>::quiet_NaN();
    return nats_per_token / 0.6931471805599453 * static_cast<double>(tokens_) / static_cast<double>(text_bytes_);
  }

  // Copies tokens [pos, pos + n) of the stream to out, across shard boundaries, and checks that
  // each is below the vocabulary (a corrupt shard is an error, not an out-of-range embedding).
  void read(std::uint64_t pos, std::uint64_t n, std::int32_t* out) const {
    each_piece(pos, n, [&](const TokenFile& f, std::uint64_t first, std::uint64_t k, std::uint64_t done) {
      f.read(first, k, out + done);
      for (std::uint64_t i = 0; i < k; ++i)
        if (static_cast<std::uint32_t>(out[done + i]) >= f.vocab)
          throw corpus_error("data: " + f.path + ": token " + std::to_string(out[done + i]) + " at " + std::to_string(first + i) +
                             " is outside its vocab " + std::to_string(f.vocab));
    });
  }
  // Drops the pages of [pos, pos + n) from the resident set (mapped_file.hpp).
  void release(std::uint64_t pos, std::uint64_t n) const {
    each_piece(pos, n, [](const TokenFile& f, std::uint64_t first, std::uint64_t k, std::uint64_t) { f.release(first, k); });
  }

 private:
  template <class F>
  void each_piece(std::uint64_t pos, std::uint64_t n, F&& f) const {
    if (pos + n > tokens_ || pos + n < pos)
      throw corpus_error("data: " + name_ + ": tokens [" + std::to_string(pos) + ", " + std::to_string(pos + n) + ") are outside its " +
                         std::to_string(tokens_));
    std::size_t s = static_cast<std::size_t>(std::upper_bound(starts_.begin(), starts_.end(), pos) - starts_.begin()) - 1;
    std::uint64_t done = 0;
    while (done < n) {
      const TokenFile& sh = shards_[s];
      const std::uint64_t first = pos + done - starts_[s];
      const std::uint64_t k = std::min(n - done, sh.count - first);
      if (k > 0) f(sh, first, k, done);
      done += k;
      ++s;
    }
  }

  std::vector<TokenFile> shards_;
  std::vector<std::uint64_t> starts_;
  std::uint64_t tokens_ = 0, text_bytes_ = 0, row_tokens_ = 0;
  bool text_known_ = true;
  std::string name_;
};

inline bool has_manifest(const std::filesystem::path& dir) {
  std::error_code ec;
  return std::filesystem::exists(dir / manifest_name, ec);
}

// How much opening a corpus checks: `checksums` reads every shard against its checksum, `headers`
// only the headers and sizes (for a caller that reads every byte itself, like verify_corpus).
// (`checksums` also checks every token against the vocabulary, in the same read.)
enum class Verify { checksums, headers };

// Reads a shard against its checksum (see the top of this file): the header's, else the manifest's
// (`manifest` names it; nullptr: none). Returns false when there was none to check against.
// Either way the tokens are checked against the vocabulary in the same read (scan_tokens).
inline bool verify_shard(const TokenFile& f, const ShardInfo* entry = nullptr, const std::string& manifest = "") {
  if (f.has_checksum() || !entry || entry->checksum.empty()) return verify_tokens(f);
  const TokenScan s = scan_tokens(f, true);
  if (checksum_text(s.checksum) != entry->checksum)
    throw corpus_error("data: " + f.path + " is corrupt: it does not match its checksum in " + manifest + " (" + entry->checksum + ")");
  s.check();
  return true;
}

// A shard of a manifest, mapped and checked against its entry.
inline TokenFile open_shard(const std::filesystem::path& dir, const Manifest& m, const ShardInfo& s, Verify verify = Verify::checksums) {
  const std::string path = (dir / s.file).string();
  TokenFile f = read_token_file(path);
  if (verify == Verify::checksums) verify_shard(f, &s, (dir / manifest_name).string());
  if (f.vocab != m.vocab)
    throw corpus_error("data: " + path + " has vocab " + std::to_string(f.vocab) + ", its manifest says " + std::to_string(m.vocab));
  if (f.count != s.tokens || f.text_bytes != s.text_bytes)
    throw corpus_error("data: " + path + " holds " + std::to_string(f.count) + " tokens of " + std::to_string(f.text_bytes) +
                       " text bytes, its manifest says " + std::to_string(s.tokens) + " of " + std::to_string(s.text_bytes));
  return f;
}

// Opens one split of a corpus folder (either layout).
inline Corpus open_corpus(const std::filesystem::path& dir, Split split, Verify verify = Verify::checksums) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec))
    throw corpus_error("data: the corpus folder " + dir.string() +
                       (std::filesystem::exists(dir, ec) ? " is a file, not a folder (a corpus is a folder: train.bin and val.bin, or a manifest and its shards)"
                                                         : " does not exist (build one with scripts/corpus.sh or loopscale data prepare)"));
  if (!has_manifest(dir)) {
    const TokenFile f = read_token_file((dir / (std::string(split_name(split)) + ".bin")).string());
    // The two files of this layout have no manifest to agree with, so each is held to the other's
    // header: train.bin of vocab 300 and val.bin of 256 were verified and exported as one corpus.
    const std::filesystem::path other = dir / (std::string(split_name(split == Split::train ? Split::val : Split::train)) + ".bin");
    if (std::filesystem::exists(other, ec))
      if (const TokenFile o = read_token_file(other.string()); o.vocab != f.vocab)
        throw corpus_error("data: " + f.path + " has vocab " + std::to_string(f.vocab) + " but " + o.path + " has " + std::to_string(o.vocab) +
                           ": the two splits of a corpus share one vocabulary");
    if (f.count == 0) throw corpus_error("data: " + f.path + " holds no tokens");  // verify called it valid, export wrote nothing
    if (verify == Verify::checksums) verify_tokens(f);
    return Corpus(f);
  }
  const Manifest m = read_manifest(dir);
  const SplitInfo& s = m.of(split == Split::val);
  if (s.shards.empty())
    throw corpus_error("data: " + (dir / manifest_name).string() + " lists no " + split_name(split) + " shard" +
                       (split == Split::val ? " (prepare it with --val-fraction or --val-input)" : ""));
  std::vector<TokenFile> shards;
  for (const ShardInfo& x : s.shards) shards.push_back(open_shard(dir, m, x, verify));
  Corpus c(std::move(shards), (dir / manifest_name).string() + " (" + split_name(split) + ")");
  // No writer lists shards that hold nothing (a split without tokens lists none).
  if (c.tokens() == 0) throw corpus_error("data: " + c.name() + " holds no tokens");
  c.set_row_tokens(m.packing.row_tokens);
  return c;
}

// Checks that the model's vocabulary is the corpus's: equal after both are padded to the spec's
// vocab_multiple (the embedding's padding, spec.hpp's padded_vocab), and holding every token id of
// the corpus. The loss spans the model's first `vocab` classes (kernels/loss.hpp): a model of vocab
// 32,001 on a corpus of 32,000 is the paper's, but a corpus id at or past the model's vocab would
// be a target outside the softmax, scored against a padding logit and given no gradient.
inline void check_vocab(const Corpus& c, const ModelSpec& spec, const std::string& where) {
  ModelSpec as_corpus = spec;
  as_corpus.vocab = c.vocab();
  if (padded_vocab(as_corpus) != padded_vocab(spec) || c.vocab() > spec.vocab)
    throw corpus_error("data: the model's vocab " + std::to_string(spec.vocab) + " does not match the corpus " + where + ", whose vocab is " +
                       std::to_string(c.vocab()) + " (padded to multiples of " + std::to_string(spec.vocab_multiple) + ": " +
                       std::to_string(padded_vocab(spec)) + " vs " + std::to_string(padded_vocab(as_corpus)) + "); give the model vocab " +
                       std::to_string(c.vocab()));
}

// Checks that a split holds at least seq_len + 2 tokens (one more than a (seq_len + 1)-token
// window), or, packed, that its rows are windows of seq_len + 1 (a row is read whole, never cut).
inline void check_fits(const Corpus& c, std::int64_t seq_len) {
  if (c.row_tokens() > 0) {
    if (c.row_tokens() != static_cast<std::uint64_t>(seq_len) + 1)
      throw corpus_error("data: " + c.name() + " is packed in rows of " + std::to_string(c.row_tokens()) + " tokens (data prepare --pack " +
                         std::to_string(c.row_tokens() - 1) + "): train and evaluate it with --seq-len " + std::to_string(c.row_tokens() - 1) +
                         ", not " + std::to_string(seq_len));
    if (c.rows() == 0) throw corpus_error("data: " + c.name() + " holds no row");
    return;
  }
  if (c.tokens() < static_cast<std::uint64_t>(seq_len) + 2)
    throw corpus_error("data: " + c.name() + " holds " + std::to_string(c.tokens()) + " tokens, fewer than one window of " +
                       std::to_string(seq_len + 1));
}

// What identifies a corpus folder's tokens without reading them: an XXH3 digest of every shard's
// header (vocabulary, token width, count, text bytes and, from format version 2, the checksum of
// its tokens), training split then validation split. Two copies of a corpus give the same digest
// wherever they are mounted; a corpus prepared again with another split, seed, packing or
// tokenizer gives another. (A version 1 shard records no checksum: its count and bytes stand in.)
// A sweep records it with every result (sweep/run.hpp), so that the runs of one fit are never
// trained on two corpora.
inline std::string corpus_digest(const Corpus& train, const Corpus& val) {
  Checksum c;
  for (const Corpus* split : {&train, &val}) {
    const std::uint64_t shards = split->shards().size();
    c.update(&shards, sizeof shards);
    for (const TokenFile& f : split->shards()) {
      const std::uint64_t h[5] = {f.vocab, f.token_bytes, f.count, f.text_bytes, f.has_checksum() ? f.checksum : 0};
      c.update(h, sizeof h);
    }
  }
  return c.text();
}

// What a run records of the tokenizer of the corpus it trains on (config.json, checkpoints): its
// kind, vocabulary and, for a SentencePiece model, the model's absolute path and checksum, so the
// run's text can be encoded and decoded with the same tokenizer later. A single-file corpus of
// vocab 256 is byte-level (scripts/corpus.sh); of another vocab its tokenizer is unknown.
// `train` is the folder's training split, already opened (open_corpus): its first shard's header
// answers for a folder without a manifest, which is not read again.
inline nlohmann::json tokenizer_record(const std::filesystem::path& dir, const Corpus& train) {
  if (!has_manifest(dir)) {
    if (train.shards().empty()) return {{"kind", "unknown"}, {"vocab", 0}};
    const TokenFile& f = train.shards().front();
    if (f.vocab == 256 && f.token_bytes == 1) return {{"kind", "byte"}, {"vocab", 256}};
    return {{"kind", "unknown"}, {"vocab", f.vocab}};
  }
  const Manifest m = read_manifest(dir);
  nlohmann::json j = {{"kind", m.tokenizer.kind}, {"vocab", m.tokenizer.vocab}};
  if (!m.tokenizer.file.empty()) {
    std::error_code ec;
    const std::filesystem::path p = std::filesystem::absolute(dir / m.tokenizer.file, ec);
    j["path"] = (ec ? dir / m.tokenizer.file : p).lexically_normal().string();
    j["checksum"] = m.tokenizer.checksum;
  }
  if (!m.tokenizer.source.empty()) j["source"] = m.tokenizer.source;
  // A packed corpus (packing.hpp): the token every document began with, which evaluation and
  // sampling put before a prompt as the run saw it before every document (eval/run_model.hpp).
  if (m.packing.row_tokens > 0) j["bos"] = m.packing.bos;
  return j;
}

// A run resumed on a corpus whose tokenizer is not the one its checkpoint was trained with would
// read other tokens under the same ids: refused. Checkpoints written before runs recorded their
// tokenizer (no record) are accepted.
inline void check_same_tokenizer(const nlohmann::json& recorded, const nlohmann::json& now, const std::string& checkpoint) {
  if (!recorded.is_object()) return;
  // The BOS of a packed corpus too: a run trained on rows after a BOS must not go on with documents
  // joined by a newline, or the reverse (records without one compare as -1).
  const auto key = [](const nlohmann::json& j) {
    return j.value("kind", "") + "|" + std::to_string(j.value("vocab", 0u)) + "|" + j.value("checksum", "") + "|" +
           std::to_string(j.value("bos", -1));
  };
  if (key(recorded) != key(now))
    throw corpus_error("data: cannot resume " + checkpoint + ": it was trained with the tokenizer " + recorded.dump() + ", the corpus now has " +
                       now.dump());
}

}  // namespace loopscale::data
