// `loopscale data prepare`: text in, a corpus folder out.
//
// The documents (documents.hpp) stream through in batches of about 16 MB; each batch is parsed,
// split (split.hpp: by whole documents, or every document of `val_inputs` into validation) and
// encoded by `threads` threads, each a contiguous part of the batch, and then written in input
// order, so the corpus is the same whatever the thread count. Each split is written as shards
// (shard_writer.hpp), the SentencePiece model is copied into the folder as tokenizer.model, and
// the manifest (manifest.hpp) is written last. With `pack` (packing.hpp) each split is written as
// rows of whole documents, each beginning with the tokenizer's BOS, instead of documents joined by
// a newline.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "loopscale/data/checksum.hpp"
#include "loopscale/data/documents.hpp"
#include "loopscale/data/input_files.hpp"
#include "loopscale/data/manifest.hpp"
#include "loopscale/data/packing.hpp"
#include "loopscale/data/shard_writer.hpp"
#include "loopscale/data/split.hpp"
#include "loopscale/data/tokenizer.hpp"
#include "loopscale/util/atomic_file.hpp"

namespace loopscale::data {

struct PrepareOptions {
  InputOptions input;                   // documents split by the rule below
  std::vector<std::string> val_inputs;  // documents that all go to validation (read after `input`)
  std::string tokenizer = "byte";       // byte | a SentencePiece .model file
  std::filesystem::path out;
  SplitRule split;                      // val_fraction 0: no document of `input` in validation
  std::uint64_t shard_tokens = 100'000'000;  // 0: one file per split (train.bin, val.bin)
  int threads = 0;                      // 0: every core
  bool force = false;                   // replace a corpus already in `out`
  Packing pack;                         // row_tokens 0: not packed (manifest.hpp)
};

struct PrepareProgress {
  std::uint64_t documents = 0, input_bytes = 0, tokens = 0;
  double seconds = 0, encode_seconds = 0;  // wall time; of it, time spent encoding
};

struct PrepareResult {
  Manifest manifest;
  PrepareProgress stats;
  int threads = 1;
};

namespace detail {

struct Encoded {
  bool validation = false;
  std::vector<std::int32_t> tokens;
  std::uint64_t bytes = 0;
};

// Parses, splits and encodes a batch on `threads` threads (contiguous parts, results in order).
inline std::vector<Encoded> encode_batch(const DocumentReader& reader, const std::vector<Record>& batch, const Tokenizer& tok,
                                         const SplitRule& rule, bool all_validation, int threads) {
  std::vector<Encoded> out(batch.size());
  const std::size_t n = batch.size(), parts = std::min<std::size_t>(static_cast<std::size_t>(std::max(1, threads)), n);
  std::vector<std::exception_ptr> errors(parts);
  const auto work = [&](std::size_t p) {
    try {
      for (std::size_t i = n * p / parts; i < n * (p + 1) / parts; ++i) {
        const std::string text = reader.text_of(batch[i]);
        out[i].validation = all_validation || rule.validation(text);
        out[i].bytes = text.size();
        tok.encode(text, out[i].tokens);
      }
    } catch (...) {
      errors[p] = std::current_exception();
    }
  };
  std::vector<std::thread> pool;
  for (std::size_t p = 1; p < parts; ++p) pool.emplace_back(work, p);
  if (parts > 0) work(0);
  for (auto& t : pool) t.join();
  for (const auto& e : errors)
    if (e) std::rethrow_exception(e);  // the first part's error: the earliest in the input
  return out;
}

}  // namespace detail

inline PrepareResult prepare_corpus(const PrepareOptions& o, const std::function<void(const PrepareProgress&)>& progress = {}) {
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  if (!(o.split.val_fraction >= 0 && o.split.val_fraction < 1)) throw corpus_error("data: --val-fraction must be in [0, 1)");  // NaN too
  check_inputs_disjoint(o.input.paths, o.val_inputs, "--input", "--val-input");
  check_pack_options(o.pack);
  const Tokenizer tok = Tokenizer::load(o.tokenizer);
  if (o.pack.packed() && tok.bos_id() < 0)
    throw corpus_error("data: --pack begins every document with the tokenizer's BOS, and " +
                       (tok.kind() == Tokenizer::Kind::byte ? std::string("the byte tokenizer has none")
                                                            : o.tokenizer + " has none (train one with `data tokenizer train --bos`)"));
  // Readers first: a missing or empty input fails before the folder is touched.
  DocumentReader main(o.input);
  std::unique_ptr<DocumentReader> val;
  if (!o.val_inputs.empty()) {
    InputOptions vi = o.input;
    vi.paths = o.val_inputs;
    val = std::make_unique<DocumentReader>(vi);
  }
  // Its bytes before the folder is prepared: the tokenizer may be the --out folder's own tokenizer.model.
  const std::string model_bytes = tok.kind() == Tokenizer::Kind::sentencepiece ? Tokenizer::read_all(o.tokenizer) : std::string();
  CorpusOutput out = begin_corpus_output(o.out, o.force);

  PrepareResult res;
  res.threads = o.threads > 0 ? o.threads : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  Manifest& m = res.manifest;
  m.vocab = tok.vocab();
  m.token_bytes = token_bytes_for(m.vocab);
  m.tokenizer.kind = tok.kind_name();
  m.tokenizer.vocab = tok.vocab();
  if (tok.kind() == Tokenizer::Kind::sentencepiece) {
    const std::string& model = model_bytes;
    write_file_atomic<corpus_error>(o.out / tokenizer_file_name, model);
    m.tokenizer.file = tokenizer_file_name;
    m.tokenizer.checksum = checksum_text(xxh3(model));
  }
  ShardWriter train(o.out, "train", o.shard_tokens, m.vocab, &tok), valw(o.out, "val", o.shard_tokens, m.vocab, &tok);
  if (o.pack.packed()) {
    m.packing = o.pack;
    m.packing.bos = tok.bos_id();
  }
  std::unique_ptr<PackedSplitWriter> train_rows, val_rows;  // packed: documents go through these
  if (m.packing.packed()) {
    train_rows = std::make_unique<PackedSplitWriter>(train, m.packing, 0);
    val_rows = std::make_unique<PackedSplitWriter>(valw, m.packing, 0x5641'4C00ull);  // another shuffle for val
  }
  PrepareProgress& st = res.stats;
  std::uint64_t val_documents = 0;
  for (DocumentReader* r : {&main, val.get()}) {
    if (!r) continue;
    const bool all_val = r == val.get();
    std::uint64_t text_bytes = 0;  // of this reader's documents
    for (std::vector<Record> batch; !(batch = r->next_batch()).empty();) {
      const auto e0 = clock::now();
      std::vector<detail::Encoded> enc = detail::encode_batch(*r, batch, tok, o.split, all_val, res.threads);
      st.encode_seconds += std::chrono::duration<double>(clock::now() - e0).count();
      for (const detail::Encoded& d : enc) {
        val_documents += d.validation;
        if (train_rows) (d.validation ? *val_rows : *train_rows).add_document(d.tokens);
        else (d.validation ? valw : train).add_document(d.tokens);
        ++st.documents;
        st.input_bytes += d.bytes;
        st.tokens += d.tokens.size();
        text_bytes += d.bytes;
      }
      st.seconds = std::chrono::duration<double>(clock::now() - t0).count();
      if (progress) progress(st);
    }
    // Documents that are all empty ({"text": ""} lines) are an empty input, as an empty file is
    // (DocumentReader): they made a corpus of 0 tokens, exit 0, that `data verify` then refused.
    if (text_bytes == 0) {
      std::string names;
      for (const std::string& p : r->options().paths) names += (names.empty() ? "" : ", ") + p;
      throw corpus_error("data: every document of " + std::string(all_val ? "--val-input " : "--input ") + names +
                         " is empty (empty input)");
    }
  }
  m.train = train_rows ? train_rows->finish() : train.finish();
  m.val = val_rows ? val_rows->finish() : valw.finish();
  if (o.pack.packed()) {
    for (const auto& [name, s] : {std::pair{"train", &m.train}, std::pair{"val", &m.val}})
      if (s->tokens == 0 && (s == &m.train ? st.documents > val_documents : val_documents > 0))
        throw corpus_error(std::string("data: the ") + name + " split's documents do not fill one row of " + std::to_string(o.pack.row_tokens) +
                           " tokens (--pack " + std::to_string(o.pack.row_tokens - 1) + "): give more text or a smaller --pack");
  }
  if (m.train.documents == 0)
    throw corpus_error("data: no document went to training (every one is in validation); lower --val-fraction");
  if (m.train.tokens == 0)  // its documents are empty, the text went to validation: no corpus training can open
    throw corpus_error("data: the training split's " + std::to_string(m.train.documents) +
                       " documents are empty (every one with text is in validation); lower --val-fraction");
  m.split = {{"rule", "xxh3-64 of the document text with the seed, below val_fraction of the range: validation"},
             {"val_fraction", o.split.val_fraction},
             {"seed", o.split.seed},
             {"val_inputs", o.val_inputs},
             {"separator", o.pack.packed() ? "none: rows of whole documents, each document begins with BOS" : "one newline between documents"}};
  m.inputs = o.input.paths;
  m.created_by = "loopscale data prepare";
  write_manifest(o.out, m);
  out.commit();
  st.seconds = std::chrono::duration<double>(clock::now() - t0).count();
  return res;
}

}  // namespace loopscale::data
