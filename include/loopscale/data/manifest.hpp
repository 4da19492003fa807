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
#include <limits>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "loopscale/data/error.hpp"
#include "loopscale/util/atomic_file.hpp"
#include "loopscale/util/json_number.hpp"
#include "loopscale/util/json_parse.hpp"
#include "loopscale/util/regular_file.hpp"

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

namespace manifest_detail {
// Field `key` of the object j as a whole number of T, named `name` in errors (e.g. "train.tokens"):
// nlohmann's get<> truncates 57174.4 to 57174, wraps -5 round to 2^64 - 5 and is undefined for
// 1e30, and a manifest that says any of them is not one loopscale wrote.
template <class T>
T whole(const nlohmann::json& j, const char* key, const std::string& name, const std::string& path) {
  if (!j.is_object() || !j.contains(key)) throw corpus_error("data: " + path + " lacks the field '" + name + "'");
  const nlohmann::json& v = j.at(key);
  if (!v.is_number() || !json_whole<T>(v))
    throw corpus_error("data: " + path + ": '" + name + "' must be a whole number from " + std::to_string(std::numeric_limits<T>::min()) +
                       " to " + std::to_string(std::numeric_limits<T>::max()) + ", not " + json_brief(v));
  return v.get<T>();
}
inline std::string text(const nlohmann::json& j, const char* key, const std::string& name, const std::string& path) {
  if (!j.is_object() || !j.contains(key)) throw corpus_error("data: " + path + " lacks the field '" + name + "'");
  if (!j.at(key).is_string()) throw corpus_error("data: " + path + ": '" + name + "' must be a string, not " + json_brief(j.at(key)));
  return j.at(key).get<std::string>();
}
inline std::string text_or(const nlohmann::json& j, const char* key, const std::string& name, const std::string& path) {
  return j.contains(key) ? text(j, key, name, path) : std::string();
}
}  // namespace manifest_detail

// Reads DIR/manifest.json; every problem is one corpus_error naming the file (and the field).
inline Manifest read_manifest(const std::filesystem::path& dir) {
  using manifest_detail::text;
  using manifest_detail::text_or;
  using manifest_detail::whole;
  const std::filesystem::path path = dir / manifest_name;
  const std::string p = path.string();
  // Asked before opening: a pipe there blocked `data verify` and `data export` for ever, and a
  // folder read as empty text ("a JSON parse error").
  if (const std::string why = not_a_file(path); !why.empty()) throw corpus_error("data: " + why);
  std::ifstream in(path);
  if (!in) throw corpus_error("data: cannot open " + p);
  std::stringstream text_in;
  text_in << in.rdbuf();
  nlohmann::json j;
  try {
    j = parse_json_bounded<corpus_error>(text_in.str(), "data: " + p);
  } catch (const nlohmann::json::exception& e) {
    // nlohmann's text without its tag (json_error_text; 1e400 is out_of_range, not parse_error).
    throw corpus_error("data: " + p + " is not a valid manifest: " + json_error_text(e));
  }
  if (!j.is_object() || !j.contains("format") || j.at("format") != "loopscale-corpus")
    throw corpus_error("data: " + p + " is not a loopscale corpus manifest");
  if (const auto v = whole<std::int64_t>(j, "version", "version", p); v != 1)
    throw corpus_error("data: " + p + " has version " + std::to_string(v) + ", expected 1");
  Manifest m;
  if (!j.contains("tokenizer") || !j.at("tokenizer").is_object()) throw corpus_error("data: " + p + ": 'tokenizer' must be an object");
  const auto& t = j.at("tokenizer");
  m.tokenizer.kind = text(t, "kind", "tokenizer.kind", p);
  m.tokenizer.vocab = whole<std::uint32_t>(t, "vocab", "tokenizer.vocab", p);
  m.tokenizer.file = text_or(t, "file", "tokenizer.file", p);
  m.tokenizer.checksum = text_or(t, "checksum", "tokenizer.checksum", p);
  m.tokenizer.source = text_or(t, "source", "tokenizer.source", p);
  if (m.tokenizer.kind != "byte" && m.tokenizer.kind != "sentencepiece" && m.tokenizer.kind != "external")
    throw corpus_error("data: " + p + ": unknown tokenizer kind '" + m.tokenizer.kind + "'");
  if (m.tokenizer.kind == "sentencepiece" && (m.tokenizer.file.empty() || m.tokenizer.checksum.empty()))
    throw corpus_error("data: " + p + ": a sentencepiece tokenizer needs its file and checksum");
  m.vocab = whole<std::uint32_t>(j, "vocab", "vocab", p);
  m.token_bytes = whole<std::uint32_t>(j, "token_bytes", "token_bytes", p);
  const auto split = [&](const char* name, SplitInfo& out) {
    const std::string s = name;
    if (!j.contains(name) || !j.at(name).is_object()) throw corpus_error("data: " + p + ": '" + s + "' must be an object");
    const nlohmann::json& o = j.at(name);
    out.documents = whole<std::uint64_t>(o, "documents", s + ".documents", p);
    out.tokens = whole<std::uint64_t>(o, "tokens", s + ".tokens", p);
    out.text_bytes = whole<std::uint64_t>(o, "text_bytes", s + ".text_bytes", p);
    if (!o.contains("shards") || !o.at("shards").is_array()) throw corpus_error("data: " + p + ": '" + s + ".shards' must be an array");
    for (const auto& x : o.at("shards")) {
      const std::string at = s + ".shards[" + std::to_string(out.shards.size()) + "]";
      out.shards.push_back({text(x, "file", at + ".file", p), whole<std::uint64_t>(x, "tokens", at + ".tokens", p),
                            whole<std::uint64_t>(x, "text_bytes", at + ".text_bytes", p), text(x, "checksum", at + ".checksum", p)});
    }
    // Every document but the first follows a separator of at least one token (a newline's tokens,
    // or in a packed split each counted document has a token in a row): more documents than that
    // is a count no corpus has. (The tokens are checked against the shards' sum by data verify.)
    if (out.tokens < std::numeric_limits<std::uint64_t>::max() && out.documents > out.tokens + 1)
      throw corpus_error("data: " + p + ": '" + s + ".documents' = " + std::to_string(out.documents) + " is more than a split of " +
                         std::to_string(out.tokens) + " tokens can hold");
  };
  split("train", m.train);
  split("val", m.val);
  // Records of how the corpus was made, not read back by anything that checks it.
  m.split = j.value("split", nlohmann::json::object());
  m.inputs = j.value("inputs", nlohmann::json::array());
  m.created_by = j.contains("created_by") && j.at("created_by").is_string() ? j.at("created_by").get<std::string>() : "";
  if (j.contains("packing")) {
    const auto& pk = j.at("packing");
    if (!pk.is_object()) throw corpus_error("data: " + p + ": 'packing' must be an object");
    const auto opt = [&](const char* key) { return pk.contains(key) ? whole<std::uint64_t>(pk, key, std::string("packing.") + key, p) : 0; };
    m.packing = {whole<std::uint64_t>(pk, "row_tokens", "packing.row_tokens", p), opt("buffer"), opt("shuffle_rows"), opt("seed"),
                 whole<std::int32_t>(pk, "bos", "packing.bos", p)};
    if (m.packing.row_tokens < 2) throw corpus_error("data: " + p + ": packing.row_tokens must be at least 2");
    for (const SplitInfo* s : {&m.train, &m.val})
      if (s->tokens % m.packing.row_tokens != 0)
        throw corpus_error("data: " + p + ": a split of " + std::to_string(s->tokens) + " tokens is not whole rows of " +
                           std::to_string(m.packing.row_tokens));
  }
  std::set<std::string> listed;
  for (const SplitInfo* s : {&m.train, &m.val})
    for (const ShardInfo& x : s->shards) {
      if (x.file.empty() || x.file.find('/') != std::string::npos || x.file == "." || x.file == "..")
        throw corpus_error("data: " + p + ": shard file name '" + x.file + "' is not a file in the folder");
      // Training read a shard listed under val too, and validation scored training tokens, silently.
      if (!listed.insert(x.file).second)
        throw corpus_error("data: " + p + " lists the shard " + x.file + " twice" +
                           (s == &m.val ? " (in val as well as in train, or twice in val): validation would score tokens it trains on or count them twice"
                                        : " in train: training would read its tokens twice"));
    }
  return m;
}

inline void write_manifest(const std::filesystem::path& dir, const Manifest& m) {
  write_file_atomic<corpus_error>(dir / manifest_name, to_json_value(m).dump(2) + "\n");
}

}  // namespace loopscale::data
