// The LSTOKENS token file: the one format loopscale trains from. A corpus shard, and each of the
// two files of a single-file corpus (train.bin, val.bin), is one such file.
//
//   offset  size  field
//        0     8  magic "LSTOKENS"
//        8     4  version, 1
//       12     4  bytes per token: 1, 2 or 4 (the fewest that hold vocab - 1: token_bytes_for)
//       16     4  vocab: every token is below it
//       20     4  reserved, 0
//       24     8  token count
//       32     8  text bytes: the length of the text the tokens encode (bits per byte = bits per
//                 token x tokens / text bytes); 0: unknown (tokens imported without their text)
//       40     -  the tokens, little-endian, `bytes per token` each
// All integers little-endian. A file is exactly 40 + count x bytes-per-token bytes long; anything
// else is a truncated or padded file.
//
// Reading maps the file (mapped_file.hpp): a TokenFile costs no memory until its tokens are read,
// and readers that release what they copied keep their resident memory flat.
#pragma once

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include <unistd.h>

#include "loopscale/data/error.hpp"
#include "loopscale/data/mapped_file.hpp"
#include "loopscale/util/atomic_file.hpp"

namespace loopscale::data {

inline constexpr char token_magic[8] = {'L', 'S', 'T', 'O', 'K', 'E', 'N', 'S'};
inline constexpr std::uint32_t token_version = 1;
inline constexpr std::size_t token_header_bytes = 40;

// The fewest bytes per token that hold every token of a vocabulary.
inline std::uint32_t token_bytes_for(std::uint64_t vocab) { return vocab <= 256 ? 1 : vocab <= 65536 ? 2 : 4; }

// The header's fields (see the table above).
struct TokenHeader {
  std::uint32_t token_bytes = 1;
  std::uint32_t vocab = 0;
  std::uint64_t count = 0;
  std::uint64_t text_bytes = 0;

  std::uint64_t file_bytes() const { return token_header_bytes + count * token_bytes; }
};

inline void encode_header(const TokenHeader& h, unsigned char out[token_header_bytes]) {
  const std::uint32_t h32[4] = {token_version, h.token_bytes, h.vocab, 0};
  const std::uint64_t h64[2] = {h.count, h.text_bytes};
  std::memcpy(out, token_magic, 8);
  std::memcpy(out + 8, h32, sizeof h32);
  std::memcpy(out + 24, h64, sizeof h64);
}

// Reads and checks a header; `path` names the file in the errors.
inline TokenHeader decode_header(const unsigned char* p, std::size_t available, const std::string& path) {
  if (available < token_header_bytes) throw corpus_error("data: " + path + " is shorter than its header (" + std::to_string(available) + " bytes)");
  if (std::memcmp(p, token_magic, 8) != 0) throw corpus_error("data: " + path + " is not a loopscale token file (bad magic)");
  std::uint32_t h32[4];
  std::uint64_t h64[2];
  std::memcpy(h32, p + 8, sizeof h32);
  std::memcpy(h64, p + 24, sizeof h64);
  if (h32[0] != token_version)
    throw corpus_error("data: " + path + " has version " + std::to_string(h32[0]) + ", expected " + std::to_string(token_version));
  TokenHeader h{h32[1], h32[2], h64[0], h64[1]};
  if (h.token_bytes != 1 && h.token_bytes != 2 && h.token_bytes != 4)
    throw corpus_error("data: " + path + " has " + std::to_string(h.token_bytes) + " bytes per token (1, 2 or 4)");
  if (h.vocab == 0) throw corpus_error("data: " + path + " declares vocab 0");
  if (h.token_bytes < 4 && h.vocab > (std::uint64_t{1} << (8 * h.token_bytes)))
    throw corpus_error("data: " + path + " declares vocab " + std::to_string(h.vocab) + ", more than " +
                       std::to_string(h.token_bytes) + " bytes per token can hold");
  return h;
}

// Reads token i of little-endian `token_bytes`-byte tokens at p.
inline std::int32_t load_token(const unsigned char* p, std::uint32_t token_bytes, std::uint64_t i) {
  switch (token_bytes) {
    case 1: return p[i];
    case 2: {
      std::uint16_t v;
      std::memcpy(&v, p + 2 * i, 2);
      return v;
    }
    default: {
      std::uint32_t v;
      std::memcpy(&v, p + 4 * i, 4);
      return static_cast<std::int32_t>(v);
    }
  }
}

// A token file, mapped. Copies share the mapping.
struct TokenFile : TokenHeader {
  std::string path;
  MappedFile map;

  std::int32_t operator[](std::uint64_t i) const { return load_token(map.data() + token_header_bytes, token_bytes, i); }

  // Copies tokens [first, first + n) to out.
  void read(std::uint64_t first, std::uint64_t n, std::int32_t* out) const {
    const unsigned char* p = map.data() + token_header_bytes + first * token_bytes;
    if (token_bytes == 1) {
      for (std::uint64_t i = 0; i < n; ++i) out[i] = p[i];
    } else {
      for (std::uint64_t i = 0; i < n; ++i) out[i] = load_token(p, token_bytes, i);
    }
  }

  // Drops the pages of tokens [first, first + n) from the resident set (mapped_file.hpp).
  void release(std::uint64_t first, std::uint64_t n) const {
    map.release(token_header_bytes + first * token_bytes, n * token_bytes);
  }

  // Nats per token to bits per byte of the text; NaN when the text bytes are unknown (0).
  double bits_per_byte(double nats_per_token) const {
    if (text_bytes == 0) return std::numeric_limits<double>::quiet_NaN();
    return nats_per_token / 0.6931471805599453 * static_cast<double>(count) / static_cast<double>(text_bytes);
  }
};

// Maps and checks a token file; every problem is a corpus_error naming the file.
inline TokenFile read_token_file(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) throw corpus_error("data: cannot open " + path + " (build a corpus with scripts/corpus.sh or loopscale data prepare)");
  if (std::filesystem::is_directory(path, ec)) throw corpus_error("data: " + path + " is a folder, not a token file");
  TokenFile t;
  t.path = path;
  t.map = MappedFile(path);
  static_cast<TokenHeader&>(t) = decode_header(t.map.data(), t.map.size(), path);
  const std::uint64_t expect = t.file_bytes();
  if (t.map.size() != expect)
    throw corpus_error("data: " + path + " is truncated or padded: " + std::to_string(t.map.size()) + " bytes, header says " +
                       std::to_string(expect));
  return t;
}

// Writes tokens as a token file, atomically (util/atomic_file.hpp). Every token must be in
// [0, vocab). `text_bytes` < 0: tokens x token_bytes (a byte-level file).
inline void write_token_file(const std::string& path, std::span<const std::int32_t> tokens, std::uint32_t vocab,
                             std::uint32_t token_bytes = 1, std::int64_t text_bytes = -1) {
  if (token_bytes != 1 && token_bytes != 2 && token_bytes != 4)
    throw corpus_error("data: " + path + ": bytes per token must be 1, 2 or 4, not " + std::to_string(token_bytes));
  TokenHeader h{token_bytes, vocab, tokens.size(), text_bytes < 0 ? tokens.size() * token_bytes : static_cast<std::uint64_t>(text_bytes)};
  for (std::size_t i = 0; i < tokens.size(); ++i)
    if (tokens[i] < 0 || static_cast<std::uint64_t>(tokens[i]) >= vocab ||
        (token_bytes < 4 && static_cast<std::uint64_t>(tokens[i]) >> (8 * token_bytes)))
      throw corpus_error("data: " + path + ": token " + std::to_string(tokens[i]) + " at " + std::to_string(i) +
                         " does not fit vocab " + std::to_string(vocab) + " in " + std::to_string(token_bytes) + " bytes");
  write_file_atomic<corpus_error>(path, [&](std::FILE* f) {
    unsigned char head[token_header_bytes];
    encode_header(h, head);
    bool ok = std::fwrite(head, 1, sizeof head, f) == sizeof head;
    std::vector<unsigned char> buf;
    constexpr std::size_t chunk = 1 << 16;
    for (std::size_t i = 0; ok && i < tokens.size(); i += chunk) {
      const std::size_t n = std::min(chunk, tokens.size() - i);
      buf.resize(n * token_bytes);
      for (std::size_t k = 0; k < n; ++k) {
        const auto v = static_cast<std::uint32_t>(tokens[i + k]);
        for (std::uint32_t b = 0; b < token_bytes; ++b) buf[k * token_bytes + b] = static_cast<unsigned char>(v >> (8 * b));
      }
      ok = std::fwrite(buf.data(), 1, buf.size(), f) == buf.size();
    }
    return ok;
  });
}
inline void write_token_file(const std::string& path, const std::vector<std::int32_t>& tokens, std::uint32_t vocab,
                             std::uint32_t token_bytes = 1, std::int64_t text_bytes = -1) {
  write_token_file(path, std::span<const std::int32_t>(tokens), vocab, token_bytes, text_bytes);
}

// Writes a token file piece by piece, for files larger than memory: tokens are appended, and
// finish() writes the header with the counts, syncs the file and renames it into place (a kill
// before that leaves no file, never a torn one: the temporary is PATH.tmp.PID).
class TokenWriter {
 public:
  TokenWriter(std::filesystem::path path, std::uint32_t vocab, std::uint32_t token_bytes)
      : path_(std::move(path)), tmp_(path_.string() + ".tmp." + std::to_string(::getpid())) {
    h_.vocab = vocab;
    h_.token_bytes = token_bytes;
    f_ = std::fopen(tmp_.c_str(), "wb");
    if (!f_) throw corpus_error("data: cannot write " + tmp_.string() + ": " + std::strerror(errno));
    unsigned char head[token_header_bytes] = {};
    write(head, sizeof head);
  }
  ~TokenWriter() {
    if (f_) {
      std::fclose(f_);
      std::remove(tmp_.c_str());
    }
  }
  TokenWriter(const TokenWriter&) = delete;
  TokenWriter& operator=(const TokenWriter&) = delete;

  // Appends tokens (each below vocab: the caller's tokenizer guarantees it) and the number of text
  // bytes they encode.
  void append(std::span<const std::int32_t> tokens, std::uint64_t text_bytes) {
    buf_.resize(tokens.size() * h_.token_bytes);
    for (std::size_t k = 0; k < tokens.size(); ++k) {
      const auto v = static_cast<std::uint32_t>(tokens[k]);
      if (v >= h_.vocab)
        throw corpus_error("data: " + path_.string() + ": token " + std::to_string(tokens[k]) + " is outside vocab " + std::to_string(h_.vocab));
      for (std::uint32_t b = 0; b < h_.token_bytes; ++b) buf_[k * h_.token_bytes + b] = static_cast<unsigned char>(v >> (8 * b));
    }
    write(buf_.data(), buf_.size());
    h_.count += tokens.size();
    h_.text_bytes += text_bytes;
  }
  const TokenHeader& header() const { return h_; }
  const std::filesystem::path& path() const { return path_; }

  // Writes the header and puts the file in place.
  void finish() {
    unsigned char head[token_header_bytes];
    encode_header(h_, head);
    bool ok = std::fflush(f_) == 0 && std::fseek(f_, 0, SEEK_SET) == 0 && std::fwrite(head, 1, sizeof head, f_) == sizeof head &&
              std::fflush(f_) == 0 && ::fsync(::fileno(f_)) == 0;
    const int err = errno;
    ok = std::fclose(f_) == 0 && ok;
    f_ = nullptr;
    if (!ok || std::rename(tmp_.c_str(), path_.c_str()) != 0) {
      std::remove(tmp_.c_str());
      throw corpus_error("data: cannot write " + path_.string() + ": " + std::strerror(err ? err : errno));
    }
  }

 private:
  void write(const void* p, std::size_t n) {
    if (std::fwrite(p, 1, n, f_) != n) throw corpus_error("data: cannot write " + tmp_.string() + ": " + std::strerror(errno));
  }
  std::filesystem::path path_, tmp_;
  TokenHeader h_;
  std::FILE* f_ = nullptr;
  std::vector<unsigned char> buf_;
};

}  // namespace loopscale::data
