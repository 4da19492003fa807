// `loopscale data`: tokenizers and corpus folders (include/loopscale/data/).
//   data tokenizer train   a SentencePiece model with byte fallback from text or JSONL
//   data prepare           text or JSONL -> a corpus folder of shards and a manifest
//   data import            llm.c / nanoGPT .bin, raw uint16 / uint32 tokens -> a corpus folder
//   data export            a corpus folder -> llm.c .bin or raw tokens
//   data verify            every shard and the tokenizer against the manifest's and the shards' own
//                          checksums; names each file that records none
// Bad input of any kind is one line naming the file and exit code 2 (main.cpp).
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <fmt/core.h>

#include "cli.hpp"
#include "loopscale/data/checksum.hpp"
#include "loopscale/data/convert.hpp"
#include "loopscale/data/packing.hpp"
#include "loopscale/data/prepare.hpp"
#include "loopscale/data/tokenizer_train.hpp"
#include "loopscale/data/verify.hpp"
#include "loopscale/util/atomic_file.hpp"

namespace loopscale::cli {
namespace {

struct InputFlags {
  std::vector<std::string> input;
  std::string format = "auto", documents = "file", text_field = "text";
  double val_fraction = 0;
  std::uint64_t split_seed = 0;
  int threads = 0;

  void add_to(CLI::App& sub, const char* val_help) {
    sub.add_option("--input", input, "text or JSONL files or folders (read recursively, in name order)")->required();
    sub.add_option("--format", format, "auto (by extension: .jsonl, .ndjson are JSONL), text or jsonl")->capture_default_str();
    sub.add_option("--documents", documents, "plain text: a document is a file, a paragraph or a line")->capture_default_str();
    sub.add_option("--text-field", text_field, "JSONL: the field holding a document's text")->capture_default_str();
    sub.add_option("--val-fraction", val_fraction, val_help)->capture_default_str();
    sub.add_option("--split-seed", split_seed, "seed of the document hash that splits train and validation")->capture_default_str();
    sub.add_option("--threads", threads, "threads (0: every core)")->capture_default_str()->check(cli::thread_count());
  }
  data::InputOptions options() const {
    data::InputOptions o;
    o.paths = input;
    if (format == "auto") o.format = data::InputFormat::automatic;
    else if (format == "text") o.format = data::InputFormat::text;
    else if (format == "jsonl") o.format = data::InputFormat::jsonl;
    else throw usage_error("--format must be auto, text or jsonl, not '" + format + "'");
    if (documents == "file") o.unit = data::DocumentUnit::file;
    else if (documents == "paragraph") o.unit = data::DocumentUnit::paragraph;
    else if (documents == "line") o.unit = data::DocumentUnit::line;
    else throw usage_error("--documents must be file, paragraph or line, not '" + documents + "'");
    o.text_field = text_field;
    return o;
  }
  int thread_count() const { return threads > 0 ? threads : std::max(1, static_cast<int>(std::thread::hardware_concurrency())); }
};

void add_tokenizer(CLI::App& data) {
  CLI::App* tok = data.add_subcommand("tokenizer", "train SentencePiece tokenizers");
  tok->require_subcommand(1);
  CLI::App* sub = tok->add_subcommand("train", "train a SentencePiece model (byte fallback, no normalisation) on text or JSONL");
  auto in = std::make_shared<InputFlags>();
  auto o = std::make_shared<data::TokenizerTrainOptions>();
  auto out = std::make_shared<std::string>();
  in->add_to(*sub, "leave out the documents `data prepare --val-fraction F` would put into validation (same --split-seed)");
  sub->add_option("--vocab", o->vocab, "vocabulary size, the 256 byte pieces included")->required();
  sub->add_option("--model", o->model, "bpe or unigram")->capture_default_str();
  sub->add_option("--sample-lines", o->sample_lines, "lines sampled for training (0: all)")->capture_default_str();
  sub->add_flag("--bos", o->bos, "give the model a BOS piece (id 1), which `data prepare --pack` puts before every document");
  sub->add_option("--out", *out, "the model file to write (e.g. data/tok4k.model)")->required()->check(output_file());
  sub->callback([in, o, out] {
    o->input = in->options();
    o->split = {in->val_fraction, in->split_seed};
    o->threads = in->thread_count();
    const auto t0 = std::chrono::steady_clock::now();
    const data::TokenizerTrainResult r = data::train_tokenizer(*o);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    write_file_atomic<data::corpus_error>(*out, r.model);
    fmt::print("tokenizer: {} (SentencePiece {}, vocab {}, checksum {})\n", *out, o->model, o->vocab, data::checksum_text(data::xxh3(r.model)));
    fmt::print("trained on {} documents, {} lines, {:.1f} MB (sampled up to {} lines) in {:.1f} s with {} threads\n", r.documents, r.lines,
               static_cast<double>(r.bytes) / 1e6, o->sample_lines, s, o->threads);
  });
}

void add_prepare(CLI::App& data) {
  CLI::App* sub = data.add_subcommand("prepare", "encode text or JSONL into a corpus folder: shards, manifest, document-level validation split");
  auto in = std::make_shared<InputFlags>();
  auto o = std::make_shared<data::PrepareOptions>();
  auto out = std::make_shared<std::string>();
  in->add_to(*sub, "fraction of the documents (by a hash of their text) that go to validation");
  sub->add_option("--val-input", o->val_inputs, "files or folders whose documents all go to validation");
  sub->add_option("--tokenizer", o->tokenizer, "byte, or a SentencePiece .model file (copied into the folder)")->capture_default_str();
  sub->add_option("--out", *out, "the corpus folder")->required()->check(output_folder());
  sub->add_option("--shard-tokens", o->shard_tokens, "tokens per shard (0: one file per split, train.bin and val.bin)")->capture_default_str();
  sub->add_flag("--force", o->force, "replace a corpus already in --out");
  auto pack_seq = std::make_shared<std::uint64_t>(0);
  sub->add_option("--pack", *pack_seq,
                  "write rows of T + 1 tokens of whole documents, each after the tokenizer's BOS, best-fit packed as the paper's code "
                  "does; train with --seq-len T (0: documents joined by a newline)")
      ->capture_default_str();
  sub->add_option("--pack-buffer", o->pack.buffer, "documents the best fit chooses among")->capture_default_str();
  sub->add_option("--pack-shuffle-rows", o->pack.shuffle_rows, "rows shuffled together")->capture_default_str();
  sub->add_option("--pack-seed", o->pack.seed, "seed of the row shuffle")->capture_default_str();
  auto quiet_flag = std::make_shared<bool>(false);
  sub->add_flag("--quiet", *quiet_flag, "no progress lines");
  sub->callback([in, o, out, quiet_flag, pack_seq] {
    o->pack.row_tokens = data::pack_row_tokens(*pack_seq);
    o->input = in->options();
    o->split = {in->val_fraction, in->split_seed};
    o->threads = in->thread_count();
    o->out = *out;
    const bool quiet = *quiet_flag;
    double next = 10;
    const data::PrepareResult r = data::prepare_corpus(*o, [&](const data::PrepareProgress& p) {
      if (quiet || p.seconds < next) return;
      next = p.seconds + 10;
      std::fprintf(stderr, "prepare: %.0f MB, %llu documents, %llu tokens, %.0f s\n", static_cast<double>(p.input_bytes) / 1e6,
                   static_cast<unsigned long long>(p.documents), static_cast<unsigned long long>(p.tokens), p.seconds);
    });
    const data::Manifest& m = r.manifest;
    fmt::print("corpus: {} ({} tokenizer, vocab {}, {} bytes per token)\n", *out, m.tokenizer.kind, m.vocab, m.token_bytes);
    for (const auto& [name, s] : {std::pair{"train", &m.train}, std::pair{"val", &m.val}})
      fmt::print("  {:5}  {} documents, {} tokens, {} text bytes ({:.3f} bytes per token), {} shard(s){}\n", name, s->documents, s->tokens,
                 s->text_bytes, s->tokens ? static_cast<double>(s->text_bytes) / static_cast<double>(s->tokens) : 0.0, s->shards.size(),
                 m.packing.row_tokens > 0 ? fmt::format(", {} rows of {}", s->tokens / m.packing.row_tokens, m.packing.row_tokens) : "");
    if (m.packing.row_tokens > 0) {  // the rows hold each document's BOS and what of it fits; the cut tails are dropped
      const std::uint64_t kept = m.train.tokens + m.val.tokens - m.train.documents - m.val.documents;
      fmt::print("packed: {} of the documents' {} tokens in rows ({:.1f}%; the rest were cut tails and the last documents)\n", kept,
                 r.stats.tokens, r.stats.tokens ? 100.0 * static_cast<double>(kept) / static_cast<double>(r.stats.tokens) : 0.0);
    }
    const double mb = static_cast<double>(r.stats.input_bytes) / 1e6;
    fmt::print("read and encoded {:.1f} MB in {:.1f} s ({:.1f} MB/s; encoding alone {:.1f} s, {:.1f} MB/s on {} threads)\n", mb, r.stats.seconds,
               mb / r.stats.seconds, r.stats.encode_seconds, mb / r.stats.encode_seconds, r.threads);
  });
}

void add_import_export(CLI::App& data) {
  CLI::App* imp = data.add_subcommand("import", "a corpus folder from llm.c / nanoGPT .bin shards or raw uint16 / uint32 tokens");
  auto io = std::make_shared<data::ImportOptions>();
  auto ifmt = std::make_shared<std::string>();
  auto iout = std::make_shared<std::string>();
  imp->add_option("--format", *ifmt, "llmc (256 x int32 header, magic 20240520, uint16 tokens), raw16 or raw32")->required();
  imp->add_option("--train", io->train, "files of training tokens, in order")->required();
  imp->add_option("--val", io->val, "files of validation tokens, in order");
  imp->add_option("--vocab", io->vocab, "vocabulary of the tokens (e.g. 50257 for GPT-2); default: the tokenizer's");
  imp->add_option("--tokenizer", io->tokenizer, "the SentencePiece model that made the tokens (text bytes are then counted)");
  imp->add_option("--out", *iout, "the corpus folder")->required()->check(output_folder());
  imp->add_option("--shard-tokens", io->shard_tokens, "tokens per shard (0: one file per split)")->capture_default_str();
  imp->add_flag("--force", io->force, "replace a corpus already in --out");
  imp->callback([io, ifmt, iout] {
    io->format = data::parse_foreign_format(*ifmt);
    io->out = *iout;
    const data::Manifest m = data::import_tokens(*io);
    fmt::print("corpus: {} (vocab {}, tokenizer {}): {} training tokens in {} shard(s), {} validation tokens in {}\n", *iout, m.vocab,
               m.tokenizer.kind, m.train.tokens, m.train.shards.size(), m.val.tokens, m.val.shards.size());
  });

  CLI::App* exp = data.add_subcommand("export", "llm.c / nanoGPT .bin shards or raw tokens from a corpus folder");
  auto eo = std::make_shared<data::ExportOptions>();
  auto efmt = std::make_shared<std::string>();
  auto edata = std::make_shared<std::string>(), eout = std::make_shared<std::string>();
  exp->add_option("--format", *efmt, "llmc, raw16 or raw32")->required();
  exp->add_option("--data", *edata, "the corpus folder")->required();
  exp->add_option("--out", *eout, "folder of the files to write")->required()->check(output_folder());
  exp->add_option("--shard-tokens", eo->shard_tokens, "tokens per file (0: one file per split, {train,val}.bin)")->capture_default_str();
  exp->callback([eo, efmt, edata, eout] {
    eo->format = data::parse_foreign_format(*efmt);
    eo->data = *edata;
    eo->out = *eout;
    for (const auto& p : data::export_corpus(*eo)) fmt::print("{}\n", p.string());
    // The foreign formats have no rows: imported again, the tokens would be read as one stream.
    if (data::has_manifest(eo->data))
      if (const data::Manifest m = data::read_manifest(eo->data); m.packing.row_tokens > 0)
        std::fprintf(stderr, "loopscale: note: %s is packed in rows of %llu tokens, each after BOS %d; the exported files keep the tokens, not "
                             "that layout (data import reads them as one stream)\n",
                     eo->data.string().c_str(), static_cast<unsigned long long>(m.packing.row_tokens), m.packing.bos);
  });
}

void add_verify(CLI::App& data) {
  CLI::App* sub = data.add_subcommand("verify", "check every shard and the tokenizer of a corpus folder against its manifest");
  auto dir = std::make_shared<std::string>();
  sub->add_option("dir", *dir, "the corpus folder")->required();
  sub->callback([dir] {
    const data::VerifyReport r = data::verify_corpus(*dir);
    for (const std::string& f : r.unchecked)
      fmt::print("corpus: {}: no checksum recorded (a version 1 token file without a manifest; rewrite it with `data prepare` or "
                 "`data import` to add one)\n", f);
    fmt::print("corpus: {} is valid: {} file(s), {} tokens, {:.1f} MB{}\n", *dir, r.files, r.tokens, static_cast<double>(r.bytes) / 1e6,
               r.manifest ? ", every checksum matches"
               : r.unchecked.empty() ? " (no manifest: headers, sizes, token ranges and the files' own checksums checked)"
                                     : " (no manifest: headers, sizes and token ranges checked)");
  });
}

const bool registered_data = add_command([](CLI::App& app) {
  CLI::App* data = app.add_subcommand("data", "tokenizers and corpus folders: tokenizer train, prepare, import, export, verify");
  data->require_subcommand(1);
  add_tokenizer(*data);
  add_prepare(*data);
  add_import_export(*data);
  add_verify(*data);
});

}  // namespace
}  // namespace loopscale::cli
