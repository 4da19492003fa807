// `loopscale data import` and `data export`: a corpus folder from foreign token files
// (foreign_formats.hpp), and foreign token files from a corpus folder.
//
// Import: the training files and the validation files become the two splits, each one token
// stream in the order of its files (no separator is added: the files carry their own). With a
// SentencePiece model (the one that made the tokens) the text bytes of every shard are counted
// and the model is copied in; without one they are unknown (0: bits per byte is not reported) and
// the tokenizer is recorded as external.
// Export: each split's stream cut into files of at most `shard_tokens` (llm.c:
// {split}_000000.bin, ...; 0: one file per split, {split}.bin, nanoGPT's layout).
#pragma once

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "loopscale/data/checksum.hpp"
#include "loopscale/data/corpus.hpp"
#include "loopscale/data/foreign_formats.hpp"
#include "loopscale/data/input_files.hpp"
#include "loopscale/data/manifest.hpp"
#include "loopscale/data/shard_writer.hpp"
#include "loopscale/data/tokenizer.hpp"

namespace loopscale::data {

struct ImportOptions {
  ForeignFormat format = ForeignFormat::llmc;
  std::vector<std::string> train, val;  // files
  std::uint32_t vocab = 0;              // 0: the tokenizer's (a tokenizer or a vocab is needed)
  std::string tokenizer;                // optional SentencePiece model
  std::filesystem::path out;
  std::uint64_t shard_tokens = 100'000'000;
  bool force = false;
};

inline Manifest import_tokens(const ImportOptions& o) {
  std::unique_ptr<Tokenizer> tok;
  if (!o.tokenizer.empty()) tok = std::make_unique<Tokenizer>(Tokenizer::load(o.tokenizer));
  const std::uint32_t vocab = o.vocab > 0 ? o.vocab : tok ? tok->vocab() : 0;
  if (vocab == 0) throw corpus_error("data: give the vocabulary of the imported tokens (--vocab) or their tokenizer (--tokenizer)");
  if (tok && tok->vocab() != vocab)
    throw corpus_error("data: vocab mismatch: --vocab " + std::to_string(vocab) + " but the tokenizer " + o.tokenizer + " has " + std::to_string(tok->vocab()));
  if (vocab > foreign_max_vocab(o.format)) throw corpus_error("data: vocab " + std::to_string(vocab) + " does not fit this format's tokens");
  if (o.train.empty()) throw corpus_error("data: no training files given (--train)");
  check_inputs_disjoint(o.train, o.val, "--train", "--val");
  std::vector<ForeignFile> train, val;  // open and check every file before writing anything
  for (const auto& p : o.train) train.emplace_back(p, o.format);
  for (const auto& p : o.val) val.emplace_back(p, o.format);
  for (int s = 0; s < 2; ++s) {  // before the folder is made: the counts are known
    std::uint64_t n = 0;
    for (const ForeignFile& f : s == 0 ? train : val) n += f.count();
    check_shard_count(shard_count(n, o.shard_tokens), o.shard_tokens, s == 0 ? "train" : "val");
  }
  // Its bytes before the folder is prepared: the tokenizer may be the --out folder's own tokenizer.model.
  const std::string model_bytes = tok ? Tokenizer::read_all(o.tokenizer) : std::string();
  CorpusOutput out = begin_corpus_output(o.out, o.force);

  Manifest m;
  m.vocab = vocab;
  m.token_bytes = token_bytes_for(vocab);
  if (tok) {
    const std::string& model = model_bytes;
    write_file_atomic<corpus_error>(o.out / tokenizer_file_name, model);
    m.tokenizer = {"sentencepiece", vocab, tokenizer_file_name, checksum_text(xxh3(model)), ""};
  } else {
    m.tokenizer = {"external", vocab, "", "", std::string(o.format == ForeignFormat::llmc ? "llmc" : o.format == ForeignFormat::raw16 ? "raw16" : "raw32") + ":" + o.train.front()};
  }
  std::vector<std::int32_t> buf;
  for (int s = 0; s < 2; ++s) {
    ShardWriter w(o.out, s == 0 ? "train" : "val", o.shard_tokens, vocab, tok.get());
    for (const ForeignFile& f : s == 0 ? train : val)
      for (std::uint64_t i = 0; i < f.count(); i += buf.size()) {
        buf.resize(static_cast<std::size_t>(std::min<std::uint64_t>(1 << 20, f.count() - i)));
        f.read(i, buf.size(), buf.data(), vocab);
        w.append(buf);
      }
    (s == 0 ? m.train : m.val) = w.finish();
  }
  m.split = {{"rule", "imported: the files given as training and as validation"}, {"train", o.train}, {"val", o.val}};
  m.inputs = o.train;
  for (const auto& p : o.val) m.inputs.push_back(p);
  m.created_by = "loopscale data import";
  write_manifest(o.out, m);
  out.commit();
  return m;
}

struct ExportOptions {
  ForeignFormat format = ForeignFormat::llmc;
  std::filesystem::path data, out;
  std::uint64_t shard_tokens = 100'000'000;  // 0: one file per split
};

// Writes the corpus's splits; returns the files written.
inline std::vector<std::filesystem::path> export_corpus(const ExportOptions& o) {
  namespace fs = std::filesystem;
  std::vector<fs::path> written;
  std::error_code ec;
  // Exporting into the corpus itself would overwrite the token files while it reads them, and into
  // a folder that holds an export would replace one without a word: both are refused.
  if (fs::exists(o.out, ec) && fs::equivalent(o.out, o.data, ec))
    throw corpus_error("data: --out " + o.out.string() + " is the corpus itself; export into another folder");
  if (fs::is_directory(o.out, ec))
    for (const auto& e : fs::directory_iterator(o.out, ec))
      if (is_split_token_file(e.path()))
        throw corpus_error("data: --out " + o.out.string() + " already holds " + e.path().filename().string() + "; export into an empty folder");
  // A manifest corpus without validation shards exports its training split alone.
  const auto skipped = [&](Split s) { return s == Split::val && has_manifest(o.data) && read_manifest(o.data).val.shards.empty(); };
  for (const Split s : {Split::train, Split::val}) {  // before the folder is made (headers only: the export reads every token later)
    if (skipped(s)) continue;
    check_shard_count(shard_count(open_corpus(o.data, s, Verify::headers).tokens(), o.shard_tokens), o.shard_tokens, split_name(s));
  }
  const bool created = !fs::exists(o.out, ec);
  std::filesystem::create_directories(o.out, ec);
  // A failure part-way (a bad token in the second split, a full disk) removes the files this call
  // wrote and the folder it made, so no half export is left to be taken for a whole one.
  CorpusOutput out(o.out, created);
  for (const Split s : {Split::train, Split::val}) {
    if (skipped(s)) continue;
    const Corpus c = open_corpus(o.data, s);
    if (c.vocab() > foreign_max_vocab(o.format))
      throw corpus_error("data: " + c.name() + " has vocab " + std::to_string(c.vocab()) + ", too large for 16-bit tokens; export as raw32");
    const std::uint64_t per = o.shard_tokens > 0 ? o.shard_tokens : c.tokens();
    for (std::uint64_t first = 0, k = 0; first < c.tokens(); first += per, ++k) {
      const std::uint64_t n = std::min(per, c.tokens() - first);
      char name[64];
      if (o.shard_tokens > 0) std::snprintf(name, sizeof name, "%s_%06llu.bin", split_name(s), static_cast<unsigned long long>(k));
      else std::snprintf(name, sizeof name, "%s.bin", split_name(s));
      std::uint64_t pos = first;
      write_foreign_file(o.out / name, o.format, n, [&](std::vector<std::int32_t>& buf) {
        const std::uint64_t m = std::min<std::uint64_t>(1 << 20, first + n - pos);
        buf.resize(static_cast<std::size_t>(m));
        if (m > 0) {
          c.read(pos, m, buf.data());
          c.release(pos, m);
        }
        pos += m;
        return true;
      });
      written.push_back(o.out / name);
    }
  }
  out.commit();
  return written;
}

}  // namespace loopscale::data
