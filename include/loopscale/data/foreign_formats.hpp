// Token files of other trainers, read and written:
//   llmc   llm.c / nanoGPT-style shards: a header of 256 little-endian int32 (magic 20240520,
//          version 1, token count, the rest 0), then the tokens as uint16 (so vocab <= 65536)
//   raw16  a bare array of little-endian uint16 tokens (nanoGPT's train.bin / val.bin)
//   raw32  a bare array of little-endian uint32 tokens
// A foreign file says nothing of its vocabulary (and raw files nothing of their length beyond
// their size), so whoever imports gives the vocabulary and every token is checked against it.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "loopscale/data/error.hpp"
#include "loopscale/data/mapped_file.hpp"
#include "loopscale/util/atomic_file.hpp"

namespace loopscale::data {

enum class ForeignFormat { llmc, raw16, raw32 };

inline constexpr std::int32_t llmc_magic = 20240520;
inline constexpr std::int32_t llmc_version = 1;
inline constexpr std::size_t llmc_header_bytes = 256 * 4;

inline ForeignFormat parse_foreign_format(const std::string& s) {
  if (s == "llmc") return ForeignFormat::llmc;
  if (s == "raw16") return ForeignFormat::raw16;
  if (s == "raw32") return ForeignFormat::raw32;
  throw corpus_error("data: --format must be llmc, raw16 or raw32, not '" + s + "'");
}
inline std::uint32_t foreign_token_bytes(ForeignFormat f) { return f == ForeignFormat::raw32 ? 4 : 2; }
// The largest vocabulary a format holds.
inline std::uint64_t foreign_max_vocab(ForeignFormat f) { return f == ForeignFormat::raw32 ? (std::uint64_t{1} << 32) : 65536; }

// A foreign file, mapped; tokens() reads them.
class ForeignFile {
 public:
  ForeignFile(const std::filesystem::path& path, ForeignFormat fmt) : path_(path.string()), fmt_(fmt), map_(path) {
    const std::size_t size = map_.size();
    if (fmt == ForeignFormat::llmc) {
      if (size < llmc_header_bytes) throw corpus_error("data: " + path_ + " is shorter than an llm.c header (" + std::to_string(size) + " bytes)");
      std::int32_t h[3];
      std::memcpy(h, map_.data(), sizeof h);
      if (h[0] != llmc_magic) throw corpus_error("data: " + path_ + " is not an llm.c token file (bad magic " + std::to_string(h[0]) + ")");
      if (h[1] != llmc_version) throw corpus_error("data: " + path_ + " has llm.c version " + std::to_string(h[1]) + ", expected 1");
      if (h[2] < 0) throw corpus_error("data: " + path_ + " declares a negative token count");
      count_ = static_cast<std::uint64_t>(h[2]);
      offset_ = llmc_header_bytes;
      if (size != offset_ + 2 * count_)
        throw corpus_error("data: " + path_ + " is truncated or padded: " + std::to_string(size) + " bytes, its header says " +
                           std::to_string(offset_ + 2 * count_));
    } else {
      const std::size_t b = foreign_token_bytes(fmt);
      if (size % b != 0) throw corpus_error("data: " + path_ + " is truncated: " + std::to_string(size) + " bytes is not a whole number of " + std::to_string(b) + "-byte tokens");
      count_ = size / b;
    }
    if (count_ == 0) throw corpus_error("data: " + path_ + " holds no tokens (empty input)");
    map_.advise_random();
  }
  const std::string& path() const { return path_; }
  std::uint64_t count() const { return count_; }
  // Tokens [first, first + n) into out, each checked against `vocab`.
  void read(std::uint64_t first, std::uint64_t n, std::int32_t* out, std::uint64_t vocab) const {
    const unsigned char* p = map_.data() + offset_;
    const std::size_t b = foreign_token_bytes(fmt_);
    for (std::uint64_t i = 0; i < n; ++i) {
      std::uint32_t v = 0;
      std::memcpy(&v, p + (first + i) * b, b);  // little-endian host
      if (v >= vocab)
        throw corpus_error("data: " + path_ + ": token " + std::to_string(v) + " at " + std::to_string(first + i) + " is outside the vocab " +
                           std::to_string(vocab) + " (vocab mismatch: give --vocab)");
      out[i] = static_cast<std::int32_t>(v);
    }
    map_.release(offset_ + first * b, n * b);
  }

 private:
  std::string path_;
  ForeignFormat fmt_;
  MappedFile map_;
  std::uint64_t count_ = 0;
  std::size_t offset_ = 0;
};

// Writes tokens in a foreign format, atomically; `next(buf)` fills the next piece (empty: done).
template <class Next>
void write_foreign_file(const std::filesystem::path& path, ForeignFormat fmt, std::uint64_t count, Next&& next) {
  if (fmt == ForeignFormat::llmc && count > 0x7FFFFFFFull)
    throw corpus_error("data: " + path.string() + ": an llm.c file holds at most 2^31 - 1 tokens; lower --shard-tokens");
  write_file_atomic<corpus_error>(path, [&](std::FILE* f) {
    bool ok = true;
    if (fmt == ForeignFormat::llmc) {
      std::int32_t h[256] = {};
      h[0] = llmc_magic;
      h[1] = llmc_version;
      h[2] = static_cast<std::int32_t>(count);
      ok = std::fwrite(h, 1, sizeof h, f) == sizeof h;
    }
    const std::size_t b = foreign_token_bytes(fmt);
    std::vector<std::int32_t> buf;
    std::vector<unsigned char> bytes;
    std::uint64_t written = 0;
    while (ok && next(buf) && !buf.empty()) {
      bytes.resize(buf.size() * b);
      for (std::size_t i = 0; i < buf.size(); ++i) {
        const auto v = static_cast<std::uint32_t>(buf[i]);
        std::memcpy(bytes.data() + i * b, &v, b);
      }
      ok = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
      written += buf.size();
    }
    return ok && written == count;
  });
}

}  // namespace loopscale::data
