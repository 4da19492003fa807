// `loopscale data verify`: reads every byte of a corpus folder and checks it against its
// manifest: each shard's header, size, vocabulary, token and text-byte counts and checksum, every
// token below the vocabulary, each split's totals, and the tokenizer file's checksum and
// vocabulary, and each version 2 token file against the checksum in its own header; a file named
// as a shard (train*.bin, val*.bin) that the manifest does not list is an error. A folder
// without a manifest (train.bin, val.bin) gets the checks its headers allow: its version 1 files
// record no checksum, and the report lists them (`unchecked`). A packed folder (packing.hpp) also
// has its BOS checked: the tokenizer's own, and the first token of every row. The first problem is
// a corpus_error naming the file.
#pragma once

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "loopscale/data/checksum.hpp"
#include "loopscale/data/corpus.hpp"
#include "loopscale/data/manifest.hpp"
#include "loopscale/data/shard_writer.hpp"
#include "loopscale/data/token_file.hpp"
#include "loopscale/data/tokenizer.hpp"

namespace loopscale::data {

struct VerifyReport {
  std::uint64_t files = 0, tokens = 0, bytes = 0;
  bool manifest = false;
  std::vector<std::string> unchecked;  // token files with no checksum recorded (version 1, no manifest)
};

inline VerifyReport verify_corpus(const std::filesystem::path& dir) {
  VerifyReport r;
  if (!has_manifest(dir)) {
    for (const Split s : {Split::train, Split::val}) {
      const Corpus c = open_corpus(dir, s, Verify::headers);
      for (const TokenFile& f : c.shards()) {
        if (!verify_tokens(f)) r.unchecked.push_back(f.path);  // checks the tokens too
        ++r.files;
        r.tokens += f.count;
        r.bytes += f.file_bytes();
      }
    }
    return r;
  }
  r.manifest = true;
  const Manifest m = read_manifest(dir);
  const std::string mpath = (dir / manifest_name).string();
  if (m.token_bytes != token_bytes_for(m.vocab))
    throw corpus_error("data: " + mpath + " says " + std::to_string(m.token_bytes) + " bytes per token for vocab " + std::to_string(m.vocab));
  if (m.tokenizer.vocab != m.vocab)
    throw corpus_error("data: " + mpath + ": vocab mismatch between the tokenizer (" + std::to_string(m.tokenizer.vocab) + ") and the shards (" +
                       std::to_string(m.vocab) + ")");
  if (!m.tokenizer.file.empty()) {
    const std::filesystem::path tp = dir / m.tokenizer.file;
    if (file_checksum(tp) != m.tokenizer.checksum) throw corpus_error("data: " + tp.string() + " does not match its checksum in " + mpath);
    const Tokenizer t = Tokenizer::load(tp.string());
    if (t.vocab() != m.vocab)
      throw corpus_error("data: vocab mismatch: " + tp.string() + " has " + std::to_string(t.vocab()) + " pieces, " + mpath + " says " + std::to_string(m.vocab));
    if (m.packing.row_tokens > 0 && t.bos_id() != m.packing.bos)
      throw corpus_error("data: " + mpath + " says its rows begin with BOS " + std::to_string(m.packing.bos) + ", but " + tp.string() +
                         (t.bos_id() < 0 ? std::string(" has no BOS") : "'s BOS is " + std::to_string(t.bos_id())));
  }
  for (const SplitInfo* s : {&m.train, &m.val}) {
    std::uint64_t tokens = 0, text = 0;
    for (const ShardInfo& x : s->shards) {
      const TokenFile f = open_shard(dir, m, x, Verify::headers);
      verify_tokens(f);  // checks the tokens too
      if (file_checksum(dir / x.file) != x.checksum)
        throw corpus_error("data: " + f.path + " does not match its checksum in " + mpath + " (corrupt or replaced)");
      tokens += f.count;
      text += f.text_bytes;
      ++r.files;
      r.bytes += f.file_bytes();
    }
    if (tokens != s->tokens || text != s->text_bytes)
      throw corpus_error("data: " + mpath + ": a split's totals (" + std::to_string(s->tokens) + " tokens, " + std::to_string(s->text_bytes) +
                         " text bytes) are not the sum of its shards (" + std::to_string(tokens) + ", " + std::to_string(text) + ")");
    r.tokens += tokens;
  }
  // Every check that opening a split makes (a training split that lists no shard, shards that
  // disagree), so that a corpus verify passes is one training and export open: a manifest whose
  // train list was emptied by hand was "valid" here. A corpus without a validation split (data
  // import without --val) is one; training refuses it, naming --val-fraction and --val-input.
  (void)open_corpus(dir, Split::train, Verify::headers);
  if (!m.val.shards.empty()) (void)open_corpus(dir, Split::val, Verify::headers);
  // A token file named as a shard but not listed: a manifest that lost an entry (its tokens would
  // be left out of training without a word), or a stray copy that the folder's next `data prepare
  // --force` removes. Either way the folder is not what its manifest says. (Regular files or not:
  // a folder or a pipe of that name is no more listed.) Checked after opening the splits, so that a
  // manifest whose train list was emptied by hand is told "lists no train shard".
  {
    std::set<std::string> listed;
    for (const SplitInfo* s : {&m.train, &m.val})
      for (const ShardInfo& x : s->shards) listed.insert(x.file);
    std::vector<std::string> stray;
    std::error_code ec;
    for (auto it = std::filesystem::directory_iterator(dir, ec); !ec && it != std::filesystem::directory_iterator(); it.increment(ec))
      if (is_split_token_file(it->path()) && !listed.count(it->path().filename().string())) stray.push_back(it->path().string());
    if (ec) throw corpus_error("data: cannot list the folder " + dir.string() + ": " + ec.message());
    if (!stray.empty()) {
      std::sort(stray.begin(), stray.end());
      throw corpus_error("data: " + stray.front() + " is a shard file that " + mpath + " does not list" +
                         (stray.size() > 1 ? " (and " + std::to_string(stray.size() - 1) + " more)" : std::string()) +
                         ": a manifest that lost an entry, or a file to remove");
    }
  }
  if (m.packing.row_tokens > 0)
    for (const Split s : {Split::train, Split::val}) {
      if (m.of(s == Split::val).shards.empty()) continue;
      const Corpus c = open_corpus(dir, s, Verify::headers);
      std::int32_t first = 0;
      for (std::uint64_t row = 0; row < c.rows(); ++row) {
        c.read(row * c.row_tokens(), 1, &first);
        c.release(row * c.row_tokens(), 1);  // the resident memory stays flat, as training's reads keep it
        if (first != m.packing.bos)
          throw corpus_error("data: " + c.name() + ": row " + std::to_string(row) + " begins with token " + std::to_string(first) +
                             ", not the BOS " + std::to_string(m.packing.bos) + " its manifest packs every row after");
      }
    }
  return r;
}

}  // namespace loopscale::data
