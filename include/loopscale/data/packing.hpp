// Rows of whole documents: `data prepare --pack T` writes a split as rows of T + 1 tokens, each
// beginning at a document's first token, the way the iso-depth paper's code prepares its data
// (scripts/prepack.py of kschwethelm/looped-lm-scaling, with nanochat's best-fit packing):
//   - every document is the tokenizer's BOS followed by its tokens;
//   - documents wait in a buffer of `buffer` documents; a row takes the longest waiting document
//     that fits in what is left of it, again and again, and when none fits, the shortest one cut
//     to fill the row (the rest of that document is dropped). Among documents of equal length
//     the one that came first goes first. Before each row the buffer is topped up from the input;
//     when the input ends, rows are made until the buffer cannot fill one (that last part is
//     dropped). A full buffer that cannot fill a row is an error (the paper's code would stop
//     there and drop the rest of the input);
//   - rows are shuffled within groups of `shuffle_rows` consecutive rows (the paper shuffles each
//     output shard of 15,000 rows), here by a seeded Fisher-Yates, so the folder is reproducible.
// Training reads a packed split row by row, in order, epoch after epoch (train/data.hpp), as the
// paper's loader reads its shards: every window starts at a BOS and no token between two documents
// is made up. Its cost: the cut tails, which on a corpus of documents longer than a row are most
// of it (docs/data.md, "Packed rows", has measured shares).
#pragma once

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <limits>
#include <map>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "loopscale/data/error.hpp"
#include "loopscale/data/shard_writer.hpp"
#include "loopscale/spec/limits.hpp"
#include "loopscale/util/random.hpp"

namespace loopscale::data {

// The row length of `--pack T`: T + 1 tokens, T from 2 to the longest sequence a model spec may
// ask for (SpecLimits::seq_len, 2^20): a packed corpus trains only with --seq-len T, so a longer
// row could never be trained on, and T + 1 of 2^64 - 1 wrapped to 0, which is "not packed": the
// corpus was written unpacked without a word. 0: not packed.
inline std::uint64_t pack_row_tokens(std::uint64_t seq) {
  if (seq > static_cast<std::uint64_t>(SpecLimits::seq_len))
    throw corpus_error("data: --pack " + std::to_string(seq) + " is above " + std::to_string(SpecLimits::seq_len) +
                       ", the longest sequence training takes (--seq-len; spec/limits.hpp)");
  return seq > 0 ? seq + 1 : 0;
}

inline void check_pack_options(const Packing& o) {
  if (!o.packed()) return;
  if (o.row_tokens < 3) throw corpus_error("data: --pack must be at least 2 (rows of T + 1 tokens for sequences of T)");
  if (o.buffer < 1) throw corpus_error("data: --pack-buffer must be at least 1 document");
  if (o.shuffle_rows < 1) throw corpus_error("data: --pack-shuffle-rows must be at least 1");
}

// Best-fit packing of documents into rows (the rules at the top of this file).
class RowPacker {
 public:
  RowPacker(std::uint64_t row_tokens, std::uint64_t buffer) : row_(row_tokens), buffer_(buffer) {}

  // Adds a document; `emit(row)` receives each row made, as a span valid during the call.
  template <class Emit>
  void add(std::vector<std::int32_t> doc, Emit&& emit) {
    const Key k{doc.size(), next_++};
    waiting_.emplace(k, std::move(doc));
    // The paper's code ends its packing at the first row its full buffer cannot fill, dropping the
    // rest of the input unread; that is an error here.
    if (waiting_.size() >= buffer_ && !pack_one(emit))
      throw corpus_error("data: " + std::to_string(buffer_) + " documents could not fill a row of " + std::to_string(row_) +
                         " tokens; raise --pack-buffer");
  }
  // The input has ended: rows until the buffer cannot fill one.
  template <class Emit>
  void finish(Emit&& emit) {
    while (!waiting_.empty() && pack_one(emit)) {
    }
    waiting_.clear();
  }
  std::uint64_t documents_started() const { return started_; }  // documents with at least their BOS in a row written

 private:
  using Key = std::pair<std::size_t, std::uint64_t>;  // (length, arrival): the waiting documents in best-fit order
  template <class Emit>
  bool pack_one(Emit& emit) {
    row_buf_.clear();
    std::uint64_t taken = 0;
    while (row_buf_.size() < row_ && !waiting_.empty()) {
      const std::size_t room = row_ - row_buf_.size();
      auto it = waiting_.upper_bound({room, std::numeric_limits<std::uint64_t>::max()});  // past the longest that fits
      if (it != waiting_.begin()) it = waiting_.lower_bound({std::prev(it)->first.first, 0});  // the first to arrive of that length
      else it = waiting_.begin();                                                              // none fits: the shortest, cut below
      const std::vector<std::int32_t>& doc = it->second;
      row_buf_.insert(row_buf_.end(), doc.begin(), doc.begin() + static_cast<std::ptrdiff_t>(std::min(doc.size(), room)));
      waiting_.erase(it);
      ++taken;
    }
    if (row_buf_.size() < row_) return false;  // its documents are dropped with it, uncounted
    started_ += taken;
    emit(std::span<const std::int32_t>(row_buf_));
    return true;
  }

  std::uint64_t row_, buffer_, next_ = 0, started_ = 0;
  std::map<Key, std::vector<std::int32_t>> waiting_;
  std::vector<std::int32_t> row_buf_;
};

// A split written as packed rows: documents in (with their BOS), shuffled groups of rows out to a
// ShardWriter. The split's `documents` count is of the documents at least one of whose tokens is
// in a row.
class PackedSplitWriter {
 public:
  // `o.bos` begins every document; `split_salt` gives each split a shuffle of its own.
  PackedSplitWriter(ShardWriter& out, const Packing& o, std::uint64_t split_salt)
      : out_(out), o_(o), packer_(o.row_tokens, o.buffer), rng_{o.seed ^ split_salt} {}

  void add_document(std::span<const std::int32_t> tokens) {
    std::vector<std::int32_t> doc;
    doc.reserve(tokens.size() + 1);
    doc.push_back(o_.bos);
    doc.insert(doc.end(), tokens.begin(), tokens.end());
    packer_.add(std::move(doc), [this](std::span<const std::int32_t> row) { keep(row); });
  }
  // Flushes the last rows; returns the split's counts (ShardWriter::finish).
  SplitInfo finish() {
    packer_.finish([this](std::span<const std::int32_t> row) { keep(row); });
    flush();
    out_.set_documents(packer_.documents_started());
    return out_.finish();
  }

 private:
  void keep(std::span<const std::int32_t> row) {
    group_.insert(group_.end(), row.begin(), row.end());
    if (group_.size() / o_.row_tokens >= o_.shuffle_rows) flush();
  }
  void flush() {
    const std::size_t R = o_.row_tokens, n = group_.size() / R;
    std::vector<std::size_t> order(n);
    for (std::size_t i = 0; i < n; ++i) order[i] = i;
    for (std::size_t i = n; i > 1; --i) std::swap(order[i - 1], order[rng_.next() % i]);
    for (const std::size_t i : order) out_.append(std::span<const std::int32_t>(group_).subspan(i * R, R));
    group_.clear();
  }

  ShardWriter& out_;
  Packing o_;
  RowPacker packer_;
  SplitMix64 rng_;
  std::vector<std::int32_t> group_;
};

}  // namespace loopscale::data
