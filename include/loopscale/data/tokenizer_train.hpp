// Training a SentencePiece tokenizer (Debian's libsentencepiece-dev) on documents
// (documents.hpp), for tokenizer.hpp's exact encoding:
//   byte_fallback            every byte has a piece, so nothing is unencodable
//   identity normalisation, no dummy prefix, whitespace kept as it is
//                            pieces spell the text byte for byte (tokenizer.hpp)
//   "\n" a user-defined piece   newlines are one token; pieces never span lines
//   split_digits             numbers are written digit by digit
// SentencePiece trains on sentences; each line of a document is one, and a line longer than
// `max_line_bytes` is cut at a space into several. It samples `sample_lines` of them uniformly
// (reservoir sampling while the documents stream in; 0: all). Documents the split rule would put
// into validation are left out, so the tokenizer never sees validation text.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <sentencepiece_trainer.h>

#include "loopscale/data/documents.hpp"
#include "loopscale/data/error.hpp"
#include "loopscale/data/split.hpp"
#include "loopscale/data/tokenizer.hpp"

namespace loopscale::data {

struct TokenizerTrainOptions {
  InputOptions input;
  SplitRule split;                 // documents in its validation part are skipped
  std::uint32_t vocab = 4096;
  std::string model = "bpe";       // bpe | unigram
  std::uint64_t sample_lines = 2'000'000;  // lines SentencePiece trains on (0: every line)
  std::size_t max_line_bytes = 4096;
  int threads = 2;
  std::uint64_t seed = 0;          // of SentencePiece's sampling
  bool bos = false;                // a BOS piece (id 1, after <unk>), which `data prepare --pack` needs
};

struct TokenizerTrainResult {
  std::string model;  // the serialized model (a .model file's content)
  std::uint64_t documents = 0, lines = 0, bytes = 0;  // training documents and their lines and bytes
};

namespace detail {

// Streams the lines of the training documents to SentencePiece.
class LineIterator : public sentencepiece::SentenceIterator {
 public:
  LineIterator(DocumentReader& r, const TokenizerTrainOptions& o, TokenizerTrainResult& res) : r_(r), o_(o), res_(res) { fill(); }
  bool done() const override { return i_ >= lines_.size(); }
  void Next() override {
    if (++i_ >= lines_.size()) fill();
  }
  const std::string& value() const override { return lines_[i_]; }
  sentencepiece::util::Status status() const override { return {}; }

 private:
  void fill() {
    lines_.clear();
    i_ = 0;
    while (lines_.empty()) {
      const std::vector<Record> batch = r_.next_batch(std::size_t{4} << 20);
      if (batch.empty()) return;
      for (const Record& rec : batch) {
        const std::string text = r_.text_of(rec);
        if (o_.split.validation(text)) continue;
        ++res_.documents;
        res_.bytes += text.size();
        std::size_t start = 0;
        while (start <= text.size()) {
          std::size_t end = text.find('\n', start);
          if (end == std::string::npos) end = text.size();
          add_line(std::string_view(text).substr(start, end - start));
          start = end + 1;
        }
      }
    }
  }
  void add_line(std::string_view line) {
    while (!line.empty()) {
      std::size_t n = line.size();
      if (n > o_.max_line_bytes) {
        n = line.rfind(' ', o_.max_line_bytes);
        if (n == std::string_view::npos || n == 0) n = o_.max_line_bytes;
      }
      lines_.emplace_back(line.substr(0, n));
      ++res_.lines;
      line.remove_prefix(n);
    }
  }
  DocumentReader& r_;
  const TokenizerTrainOptions& o_;
  TokenizerTrainResult& res_;
  std::vector<std::string> lines_;
  std::size_t i_ = 0;
};

}  // namespace detail

inline TokenizerTrainResult train_tokenizer(const TokenizerTrainOptions& o) {
  if (o.model != "bpe" && o.model != "unigram") throw corpus_error("data: --model must be bpe or unigram, not '" + o.model + "'");
  if (o.vocab < 260 + 2) throw corpus_error("data: a SentencePiece vocab needs room for its 256 byte pieces and more; give at least 262");
  if (!(o.split.val_fraction >= 0 && o.split.val_fraction < 1)) throw corpus_error("data: --val-fraction must be in [0, 1)");
  // SentencePiece's own check of its input_sentence_size (0: all, else above 100) ends in an
  // "Internal: trainer_interface.cc(76)" message that names no flag of ours.
  if (o.sample_lines > 0 && o.sample_lines <= 100)
    throw corpus_error("data: --sample-lines must be 0 (every line) or more than 100 (SentencePiece samples at least 101), not " +
                       std::to_string(o.sample_lines));
  // SentencePiece refuses more than 128 threads with an internal check of its own.
  if (o.threads > 128) throw corpus_error("data: --threads must be at most 128 for SentencePiece's trainer");
  DocumentReader reader(o.input);
  TokenizerTrainResult res;
  detail::LineIterator it(reader, o, res);
  if (it.done()) throw corpus_error("data: the inputs hold no training text (empty input)");
  const std::unordered_map<std::string, std::string> args = {
      {"model_type", o.model},
      {"vocab_size", std::to_string(o.vocab)},
      {"byte_fallback", "true"},
      {"normalization_rule_name", "identity"},
      {"add_dummy_prefix", "false"},
      {"remove_extra_whitespaces", "false"},
      {"allow_whitespace_only_pieces", "true"},
      {"split_digits", "true"},
      {"user_defined_symbols", "\n"},
      {"character_coverage", "0.9995"},
      {"max_sentence_length", std::to_string(o.max_line_bytes)},
      {"input_sentence_size", std::to_string(o.sample_lines)},
      {"shuffle_input_sentence", "true"},
      {"num_threads", std::to_string(o.threads > 0 ? o.threads : 1)},
      {"unk_id", "0"},
      {"bos_id", o.bos ? "1" : "-1"},
      {"eos_id", "-1"},
      {"pad_id", "-1"},
      // Errors only (read by SentencePiece's argument parser). Its warnings would come before our one
      // error line, not instead of it: BPE's "No valid symbol found" precedes the failure of a vocab
      // larger than the text has pieces for, and the lines we give it are never too long to warn of.
      {"minloglevel", "2"},
  };
  sentencepiece::SetRandomGeneratorSeed(static_cast<unsigned>(o.seed));  // SentencePiece's sampling
  if (const auto st = sentencepiece::SentencePieceTrainer::Train(args, &it, &res.model); !st.ok())
    throw corpus_error("data: SentencePiece could not train a tokenizer: " + st.ToString());
  Tokenizer::sentencepiece(res.model, "the trained model");  // checks the byte pieces are there
  return res;
}

}  // namespace loopscale::data
