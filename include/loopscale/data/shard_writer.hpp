// Writing one split of a corpus as shards: tokens are appended to the open shard until it holds
// `shard_tokens`, then the next one opens (train_00000.bin, train_00001.bin, ...; shard_tokens 0:
// one file, train.bin). The cut falls wherever the count says, inside a document if need be: a
// split is one token stream (corpus.hpp), and the text bytes of each shard are counted token by
// token (Tokenizer::text_bytes), so they are exact at any cut. Documents are separated by the
// tokens of one newline.
#pragma once

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "loopscale/data/checksum.hpp"
#include "loopscale/data/manifest.hpp"
#include "loopscale/data/token_file.hpp"
#include "loopscale/data/tokenizer.hpp"

namespace loopscale::data {

// The most files one split is cut into, by `data prepare`, `import` and `export` alike: the shards'
// names carry 5 digits (train_00000.bin; export's llm.c names 6), and a name past them sorts out of
// order in the sorted glob llm.c reads its shards by. No real layout comes near it (llm.c's FineWeb
// 10B is 100 files of 100M tokens); what does is a --shard-tokens too small for the corpus (1
// wrote a file per token, 25M for the project's corpus). Tiny shards below the limit stay allowed:
// tests cut corpora into shards of 64 tokens to test reads across boundaries.
inline constexpr std::uint64_t max_shards_per_split = 100'000;

// The files a split of `tokens` tokens is cut into at `shard_tokens` per file (0: one).
inline std::uint64_t shard_count(std::uint64_t tokens, std::uint64_t shard_tokens) {
  return shard_tokens == 0 || tokens == 0 ? 1 : tokens / shard_tokens + (tokens % shard_tokens != 0);
}

// Refuses a --shard-tokens that cuts `split` into `files` files, more than `limit`. `so_far`: the
// count is of the files opened so far (prepare's), the total unknown.
inline void check_shard_count(std::uint64_t files, std::uint64_t shard_tokens, const std::string& split, bool so_far = false,
                              std::uint64_t limit = max_shards_per_split) {
  if (files <= limit) return;
  throw corpus_error("data: --shard-tokens " + std::to_string(shard_tokens) + " would write " +
                     (so_far ? "more than " + std::to_string(limit) : std::to_string(files)) + " files for the " + split + " split; at most " +
                     std::to_string(limit) + " per split: give a larger --shard-tokens, or 0 for one file per split");
}

class ShardWriter {
 public:
  // `tokenizer` counts text bytes; without one they are unknown (0). `max_shards`: a test's smaller
  // limit (reaching the real one writes 100,000 files).
  ShardWriter(std::filesystem::path dir, std::string split, std::uint64_t shard_tokens, std::uint32_t vocab,
              const Tokenizer* tokenizer, std::uint64_t max_shards = max_shards_per_split)
      : dir_(std::move(dir)), split_(std::move(split)), shard_tokens_(shard_tokens), max_shards_(max_shards), vocab_(vocab),
        token_bytes_(token_bytes_for(vocab)), tok_(tokenizer) {
    if (tok_) sep_ = tok_->encode("\n");
  }

  // A document: the separator (after the first), then its tokens.
  void add_document(std::span<const std::int32_t> tokens) {
    if (info_.documents++ > 0) append(sep_);
    append(tokens);
  }

  // Tokens as they are (imported streams, which carry their own separators).
  void append(std::span<const std::int32_t> tokens) {
    while (!tokens.empty()) {
      if (!w_) open();
      const std::uint64_t room = shard_tokens_ > 0 ? shard_tokens_ - w_->header().count : tokens.size();
      const std::size_t take = static_cast<std::size_t>(std::min<std::uint64_t>(room, tokens.size()));
      const auto part = tokens.first(take);
      w_->append(part, tok_ ? tok_->text_bytes(part) : 0);
      tokens = tokens.subspan(take);
      if (shard_tokens_ > 0 && w_->header().count == shard_tokens_) close();
    }
  }

  // Closes the last shard and checksums every shard (reading each file back).
  SplitInfo finish() {
    if (w_) close();
    for (ShardInfo& s : info_.shards) s.checksum = file_checksum(dir_ / s.file);
    return info_;
  }

  std::uint64_t tokens() const { return info_.tokens + (w_ ? w_->header().count : 0); }
  // The split's document count, for a writer that appends documents itself (packing.hpp).
  void set_documents(std::uint64_t n) { info_.documents = n; }

 private:
  void open() {
    // prepare learns its token count only as it encodes: the shard past the limit is refused as it
    // would open (import and export check the count before anything is written).
    if (shard_tokens_ > 0) check_shard_count(info_.shards.size() + 1, shard_tokens_, split_, true, max_shards_);
    char name[64];
    if (shard_tokens_ == 0) std::snprintf(name, sizeof name, "%s.bin", split_.c_str());
    else std::snprintf(name, sizeof name, "%s_%05zu.bin", split_.c_str(), info_.shards.size());
    w_ = std::make_unique<TokenWriter>(dir_ / name, vocab_, token_bytes_);
  }
  void close() {
    w_->finish();
    const TokenHeader& h = w_->header();
    info_.shards.push_back({w_->path().filename().string(), h.count, h.text_bytes, ""});
    info_.tokens += h.count;
    info_.text_bytes += h.text_bytes;
    w_.reset();
  }

  std::filesystem::path dir_;
  std::string split_;
  std::uint64_t shard_tokens_, max_shards_;
  std::uint32_t vocab_, token_bytes_;
  const Tokenizer* tok_;
  std::vector<std::int32_t> sep_;
  std::unique_ptr<TokenWriter> w_;
  SplitInfo info_;
};

// Makes `dir` ready to receive a corpus: created if missing; one that already holds a corpus
// (manifest.json, train*.bin, val*.bin) is refused unless `replace`, which removes those files
// (the manifest first, so a crash cannot leave a manifest over missing shards).
// A token file of a split as the writers name them: train*.bin or val*.bin.
inline bool is_split_token_file(const std::filesystem::path& p) {
  const std::string n = p.filename().string();
  return p.extension() == ".bin" && (n.rfind("train", 0) == 0 || n.rfind("val", 0) == 0);
}

inline void prepare_output_folder(const std::filesystem::path& dir, bool replace) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir)) throw corpus_error("data: cannot create the output folder " + dir.string());
  std::vector<fs::path> old;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_regular_file() && is_split_token_file(e.path())) old.push_back(e.path());
  const bool has = fs::exists(dir / manifest_name) || !old.empty();
  if (has && !replace) throw corpus_error("data: " + dir.string() + " already holds a corpus; pass --force to replace it");
  if (!has) return;  // a tokenizer.model without a corpus is the user's (perhaps the --tokenizer itself)
  fs::remove(dir / manifest_name, ec);
  fs::remove(dir / tokenizer_file_name, ec);
  for (const fs::path& p : old) fs::remove(p, ec);
}

// A corpus folder being written (`data prepare`, `import`, `export`): unless commit() is called once
// the last file is written, the corpus files (token files, tokenizer, manifest) that were not in
// `dir` when this was made are removed again, and `dir` itself when `created` (the caller made it),
// so a failure part-way (an empty input, a document without its text field, a bad token, a full
// disk) leaves no half corpus and no empty folder.
class CorpusOutput {
 public:
  CorpusOutput(const std::filesystem::path& dir, bool created) : dir_(dir), created_(created) {
    std::error_code ec;
    for (auto it = std::filesystem::directory_iterator(dir_, ec); !ec && it != std::filesystem::directory_iterator(); it.increment(ec))
      before_.insert(it->path().filename().string());
  }
  CorpusOutput(const CorpusOutput&) = delete;
  CorpusOutput& operator=(const CorpusOutput&) = delete;
  ~CorpusOutput() {
    if (!committed_) discard();
  }
  void commit() { committed_ = true; }

 private:
  void discard() noexcept {
    namespace fs = std::filesystem;
    std::error_code ec;
    std::vector<fs::path> ours;  // what the writers added: entries that were not there when this began
    for (auto it = fs::directory_iterator(dir_, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
      const std::string name = it->path().filename().string();
      if (!before_.count(name) && (name == manifest_name || name == tokenizer_file_name || is_split_token_file(it->path())))
        ours.push_back(it->path());
    }
    for (const fs::path& p : ours) fs::remove(p, ec);
    if (created_) fs::remove(dir_, ec);  // only when empty: nothing of anyone else's goes
  }
  std::filesystem::path dir_;
  std::set<std::string> before_;
  bool created_ = false, committed_ = false;
};

// prepare_output_folder, and the undo of what then goes into the folder (`data prepare`, `import`).
inline CorpusOutput begin_corpus_output(const std::filesystem::path& dir, bool replace) {
  std::error_code ec;
  const bool created = !std::filesystem::exists(dir, ec);
  prepare_output_folder(dir, replace);
  return CorpusOutput(dir, created);
}

}  // namespace loopscale::data
