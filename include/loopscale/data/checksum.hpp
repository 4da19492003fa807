// The checksum of corpus shards and tokenizer files: XXH3-64 (xxHash 0.8, Debian's libxxhash-dev,
// compiled inline from its header, so nothing is linked). Written as "xxh3-64:" and 16 hex digits,
// the algorithm in the text so that a file written with another one is recognised as such.
//
// Why XXH3 and not CRC32C: the checksum guards against torn copies and bit rot of files of
// gigabytes, read at disk speed; XXH3 runs at memory bandwidth on any x86-64 or ARM core without a
// CRC instruction, has 64 bits (a random corruption passes with probability 2^-64 instead of 2^-32)
// and a frozen output format (0.8.0 on), and the header-only build keeps loopscale header-only.
// CRC32C's advantages (hardware instruction, error-burst guarantees on small frames) matter for
// network frames, not for files. It is not a cryptographic hash: it detects accidents, not
// tampering.
#pragma once

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#ifndef XXH_INLINE_ALL
#define XXH_INLINE_ALL
#endif
#include <xxhash.h>

#include "loopscale/data/error.hpp"
#include "loopscale/util/regular_file.hpp"

namespace loopscale::data {

inline constexpr std::string_view checksum_prefix = "xxh3-64:";

// The text form of a 64-bit XXH3 value.
inline std::string checksum_text(std::uint64_t h) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return std::string(checksum_prefix) + buf;
}

// XXH3-64 of a stream of bytes given in pieces; the same value as of the bytes at once.
class Checksum {
 public:
  Checksum() : s_(XXH3_createState()) {
    if (!s_) throw std::bad_alloc();
    XXH3_64bits_reset(s_);
  }
  ~Checksum() { XXH3_freeState(s_); }
  Checksum(const Checksum&) = delete;
  Checksum& operator=(const Checksum&) = delete;

  void update(const void* p, std::size_t n) { XXH3_64bits_update(s_, p, n); }
  void update(std::string_view s) { update(s.data(), s.size()); }
  std::uint64_t value() const { return XXH3_64bits_digest(s_); }
  std::string text() const { return checksum_text(value()); }

 private:
  XXH3_state_t* s_;
};

// XXH3-64 of bytes in memory, and with a seed (the validation split hashes documents with one).
inline std::uint64_t xxh3(std::string_view s) { return XXH3_64bits(s.data(), s.size()); }
inline std::uint64_t xxh3(std::string_view s, std::uint64_t seed) { return XXH3_64bits_withSeed(s.data(), s.size(), seed); }

// The checksum of a whole file, read in 4 MiB pieces. A pipe or a device is refused before it is
// opened: `data verify` of a tokenizer.model that was a FIFO, or a link to /dev/zero, never ended.
inline std::string file_checksum(const std::filesystem::path& path) {
  if (const std::string why = not_a_file(path); !why.empty()) throw corpus_error("data: " + why);
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) throw corpus_error("data: cannot open " + path.string());
  Checksum c;
  std::vector<char> buf(std::size_t{4} << 20);
  std::size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), f)) > 0) c.update(buf.data(), n);
  const bool bad = std::ferror(f) != 0;
  std::fclose(f);
  if (bad) throw corpus_error("data: cannot read " + path.string());
  return c.text();
}

}  // namespace loopscale::data
