// The manifest of a corpus folder, manifest.json: what `loopscale data prepare` and `data import`
// write beside the shards, and what training, `data verify` and `data export` read.
//
//   {"format": "loopscale-corpus", "version": 1,
//    "tokenizer": {"kind": "byte" | "sentencepiece" | "external", "vocab": V,
//                  "file": "tokenizer.model", "checksum": "xxh3-64:..."   (sentencepiece only)
//                  "source": "..."                                          (external: where from)},
//    "vocab": V, "token_bytes": 1 | 2 | 4,
//    "train": {"documents": n, "tokens": n, "text_bytes": n, "shards": [SHARD, ...]},
//    "val":   {... the same ...},
//    "split": {...how documents were divided...}, "inputs": [...], "created_by": "...",
//    "packing": {"row_tokens": T + 1, "bos": id, "buffer": n, "shuffle_rows": n, "seed": n}   (packed only)}
//   SHARD = {"file": "train_00000.bin", "tokens": n, "text_bytes": n, "checksum": "xxh3-64:..."}
// A split's token stream is its shards' tokens in the listed order; documents within it are
// separated by the tokens of one newline, or, in a packed corpus (packing.hpp), the stream is rows
// of row_tokens tokens, each beginning with a document's BOS. File names are relative to the folder. The checksum of a
// shard is the XXH3-64 of the whole file (header and tokens: `xxhsum -H3 FILE` prints the same
// digits). text_bytes 0: unknown (imported tokens without their text).
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "loopscale/data/error.hpp"
#include "loopscale/util/atomic_file.hpp"

namespace loopscale::data {

inline constexpr const char* manifest_name = "manifest.json";
inline constexpr const char* tokenizer_file_name = "tokenizer.model";

struct ShardInfo {
  std::string file;
  std::uint64_t tokens = 0, text_bytes = 0;
  std::string checksum;
};

struct SplitInfo {
  std::uint64_t documents = 0, tokens = 0, text_bytes = 0;
  std::vector<ShardInfo> shards;
};

struct TokenizerInfo {
  std::string kind = "byte";  // byte | sentencepiece | external
  std::uint32_t vocab = 256;
  std::string file, checksum;  // sentencepiece: the model file in the folder and its checksum
  std::string source;          // external: where the tokens came from
};

// How a corpus is packed into rows (packing.hpp): the options of `data prepare --pack` and what its
// manifest records of them. row_tokens 0: not packed.
struct Packing {
  std::uint64_t row_tokens = 0;        // T + 1
  std::uint64_t buffer = 1000;         // documents the best fit chooses among (the paper's default)
  std::uint64_t shuffle_rows = 15000;  // rows shuffled together (the paper's rows per shard)
  std::uint64_t seed = 0;              // of the shuffle
  std::int32_t bos = -1;               // the tokenizer's BOS, which begins every document (prepare fills it in)
  bool packed() const { return row_tokens > 0; }
};

struct Manifest {
  TokenizerInfo tokenizer;
  Packing packing;
  std::uint32_t vocab = 256, token_bytes = 1;
  SplitInfo train, val;
  nlohmann::json split = nlohmann::json::object(), inputs = nlohmann::json::array();
  std::string created_by;

  const SplitInfo& of(bool validation) const { return validation ? val : train; }
};

inline nlohmann::json to_json_value(const Manifest& m) {
  const auto split = [](const SplitInfo& s) {
    nlohmann::json shards = nlohmann::json::array();
    for (const ShardInfo& x : s.shards)
      shards.push_back({{"file", x.file}, {"tokens", x.tokens}, {"text_bytes", x.text_bytes}, {"checksum", x.checksum}});
    return nlohmann::json{{"documents", s.documents}, {"tokens", s.tokens}, {"text_bytes", s.text_bytes}, {"shards", shards}};
  };
  nlohmann::json tok = {{"kind", m.tokenizer.kind}, {"vocab", m.tokenizer.vocab}};
  if (!m.tokenizer.file.empty()) tok["file"] = m.tokenizer.file;
  if (!m.tokenizer.checksum.empty()) tok["checksum"] = m.tokenizer.checksum;
  if (!m.tokenizer.source.empty()) tok["source"] = m.tokenizer.source;
  nlohmann::json j = {{"format", "loopscale-corpus"}, {"version", 1}, {"tokenizer", tok},       {"vocab", m.vocab},
                      {"token_bytes", m.token_bytes}, {"train", split(m.train)}, {"val", split(m.val)}, {"split", m.split},
                      {"inputs", m.inputs},           {"created_by", m.created_by}};
  if (m.packing.row_tokens > 0)
    j["packing"] = {{"row_tokens", m.packing.row_tokens}, {"bos", m.packing.bos}, {"buffer", m.packing.buffer},
                    {"shuffle_rows", m.packing.shuffle_rows}, {"seed", m.packing.seed}};
  return j;
}

// Reads DIR/manifest.json; every problem is one corpus_error naming the file.
inline Manifest read_manifest(const std::filesystem::path& dir) {
  const std::filesystem::path path = dir / manifest_name;
  std::ifstream in(path);
  if (!in) throw corpus_error("data: cannot open " + path.string());
  std::stringstream text;
  text << in.rdbuf();
  try {
    const nlohmann::json j = nlohmann::json::parse(text.str());
    if (j.value("format", "") != "loopscale-corpus") throw corpus_error("data: " + path.string() + " is not a loopscale corpus manifest");
    if (j.at("version").get<int>() != 1)
      throw corpus_error("data: " + path.string() + " has version " + j.at("version").dump() + ", expected 1");
    Manifest m;
    const auto& t = j.at("tokenizer");
    m.tokenizer.kind = t.at("kind").get<std::string>();
    m.tokenizer.vocab = t.at("vocab").get<std::uint32_t>();
    m.tokenizer.file = t.value("file", "");
    m.tokenizer.checksum = t.value("checksum", "");
    m.tokenizer.source = t.value("source", "");
    if (m.tokenizer.kind != "byte" && m.tokenizer.kind != "sentencepiece" && m.tokenizer.kind != "external")
      throw corpus_error("data: " + path.string() + ": unknown tokenizer kind '" + m.tokenizer.kind + "'");
    if (m.tokenizer.kind == "sentencepiece" && (m.tokenizer.file.empty() || m.tokenizer.checksum.empty()))
      throw corpus_error("data: " + path.string() + ": a sentencepiece tokenizer needs its file and checksum");
    m.vocab = j.at("vocab").get<std::uint32_t>();
    m.token_bytes = j.at("token_bytes").get<std::uint32_t>();
    const auto split = [](const nlohmann::json& s, SplitInfo& out) {
      out.documents = s.at("documents").get<std::uint64_t>();
      out.tokens = s.at("tokens").get<std::uint64_t>();
      out.text_bytes = s.at("text_bytes").get<std::uint64_t>();
      for (const auto& x : s.at("shards"))
        out.shards.push_back({x.at("file").get<std::string>(), x.at("tokens").get<std::uint64_t>(),
                              x.at("text_bytes").get<std::uint64_t>(), x.at("checksum").get<std::string>()});
    };
    split(j.at("train"), m.train);
    split(j.at("val"), m.val);
    m.split = j.value("split", nlohmann::json::object());
    m.inputs = j.value("inputs", nlohmann::json::array());
    m.created_by = j.value("created_by", "");
    if (j.contains("packing")) {
      const auto& p = j.at("packing");
      m.packing = {p.at("row_tokens").get<std::uint64_t>(), p.value("buffer", std::uint64_t{0}), p.value("shuffle_rows", std::uint64_t{0}),
                   p.value("seed", std::uint64_t{0}), p.at("bos").get<std::int32_t>()};
      if (m.packing.row_tokens < 2) throw corpus_error("data: " + path.string() + ": packing.row_tokens must be at least 2");
      for (const SplitInfo* s : {&m.train, &m.val})
        if (s->tokens % m.packing.row_tokens != 0)
          throw corpus_error("data: " + path.string() + ": a split of " + std::to_string(s->tokens) + " tokens is not whole rows of " +
                             std::to_string(m.packing.row_tokens));
    }
    std::set<std::string> listed;
    for (const SplitInfo* s : {&m.train, &m.val})
      for (const ShardInfo& x : s->shards) {
        if (x.file.empty() || x.file.find('/') != std::string::npos || x.file == "." || x.file == "..")
          throw corpus_error("data: " + path.string() + ": shard file name '" + x.file + "' is not a file in the folder");
        // Training read a shard listed under val too, and validation scored training tokens, silently.
        if (!listed.insert(x.file).second)
          throw corpus_error("data: " + path.string() + " lists the shard " + x.file + " twice" +
                             (s == &m.val ? " (in val as well as in train, or twice in val): validation would score tokens it trains on or count them twice"
                                          : " in train: training would read its tokens twice"));
      }
    return m;
  } catch (const nlohmann::json::exception& e) {
    throw corpus_error("data: " + path.string() + " is not a valid manifest: " + e.what());
  }
}

inline void write_manifest(const std::filesystem::path& dir, const Manifest& m) {
  write_file_atomic<corpus_error>(dir / manifest_name, to_json_value(m).dump(2) + "\n");
}

}  // namespace loopscale::data
