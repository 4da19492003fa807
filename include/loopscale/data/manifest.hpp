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
//    "split": {...how documents were divided...}, "inputs": [...], "created_by": "..."}
//   SHARD = {"file": "train_00000.bin", "tokens": n, "text_bytes": n, "checksum": "xxh3-64:..."}
// A split's token stream is its shards' tokens in the listed order; documents within it are
// separated by the tokens of one newline. File names are relative to the folder. The checksum of a
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

struct Manifest {
  TokenizerInfo tokenizer;
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
  return {{"format", "loopscale-corpus"}, {"version", 1}, {"tokenizer", tok},       {"vocab", m.vocab},
          {"token_bytes", m.token_bytes}, {"train", split(m.train)}, {"val", split(m.val)}, {"split", m.split},
          {"inputs", m.inputs},           {"created_by", m.created_by}};
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
