// The LSTOKENS token file: the one format loopscale trains from. A corpus shard, and each of the
// two files of a single-file corpus (train.bin, val.bin), is one such file.
//
//   offset  size  field
//        0     8  magic "LSTOKENS"
//        8     4  version: 2 (written); 1 is still read
//       12     4  bytes per token: 1, 2 or 4 (the fewest that hold vocab - 1: token_bytes_for)
//       16     4  vocab: every token is below it
//       20     4  version 2: the header check, the low 32 bits of the XXH3-64 of the header's other
//                 44 bytes (0-19 and 24-47); version 1: 0
//       24     8  token count
//       32     8  text bytes: the length of the text the tokens encode (bits per byte = bits per
//                 token x tokens / text bytes); 0: unknown (tokens imported without their text)
//       40     8  version 2: the XXH3-64 of the tokens (every byte from 48 to the end: what
//                 `tail -c +49 FILE | xxhsum -H3` prints)
//   48 (v1: 40) -  the tokens, little-endian, `bytes per token` each
// All integers little-endian. A file is exactly header + count x bytes-per-token bytes long;
// anything else is a truncated or padded file.
//
// Why a check of its own for the header: the tokens' checksum cannot cover the header (the writer
// streams the tokens before it knows their count), and a flipped bit in the text bytes would
// silently change bits per byte; 32 bits suffice for 44 bytes. Reading checks the header and its
// check (cheap); verify_tokens reads every token against the checksum and the vocabulary
// (open_corpus does, on every open; so does `loopscale data verify`). A version 1 file has no
// checksum of its own: a manifest's whole-file checksum stands in for it (corpus.hpp), and a file
// without either has only its tokens checked against the vocabulary.
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

#include "loopscale/data/checksum.hpp"
#include "loopscale/data/error.hpp"
#include "loopscale/data/mapped_file.hpp"
#include "loopscale/util/atomic_file.hpp"

namespace loopscale::data {

inline constexpr char token_magic[8] = {'L', 'S', 'T', 'O', 'K', 'E', 'N', 'S'};
inline constexpr std::uint32_t token_version = 2;  // written; 1 and 2 are read
inline constexpr std::size_t token_header_bytes = 48;  // of the version written
inline constexpr std::size_t token_header_bytes_v1 = 40;

// The fewest bytes per token that hold every token of a vocabulary.
inline std::uint32_t token_bytes_for(std::uint64_t vocab) { return vocab <= 256 ? 1 : vocab <= 65536 ? 2 : 4; }

// The header's fields (see the table above).
struct TokenHeader {
  std::uint32_t token_bytes = 1;
  std::uint32_t vocab = 0;
  std::uint64_t count = 0;
  std::uint64_t text_bytes = 0;
  std::uint32_t version = token_version;
  std::uint64_t checksum = 0;  // XXH3-64 of the tokens; version 2 only

  bool has_checksum() const { return version >= 2; }
  std::size_t header_bytes() const { return version >= 2 ? token_header_bytes : token_header_bytes_v1; }
  std::uint64_t file_bytes() const { return header_bytes() + count * token_bytes; }
};

namespace token_file_detail {
inline std::uint32_t header_check(const unsigned char* p) {
  unsigned char rest[token_header_bytes - 4];
  std::memcpy(rest, p, 20);
  std::memcpy(rest + 20, p + 24, token_header_bytes - 24);
  return static_cast<std::uint32_t>(XXH3_64bits(rest, sizeof rest));
}
}  // namespace token_file_detail

// Writes a version 2 header (h.version is ignored).
inline void encode_header(const TokenHeader& h, unsigned char out[token_header_bytes]) {
  const std::uint32_t h32[4] = {token_version, h.token_bytes, h.vocab, 0};
  const std::uint64_t h64[3] = {h.count, h.text_bytes, h.checksum};
  std::memcpy(out, token_magic, 8);
  std::memcpy(out + 8, h32, sizeof h32);
  std::memcpy(out + 24, h64, sizeof h64);
  const std::uint32_t check = token_file_detail::header_check(out);
  std::memcpy(out + 20, &check, 4);
}

// The most text bytes a token stands for, on average over a file. SentencePiece's pieces are at most
// 16 characters (max_sentencepiece_length's default, which tokenizer_train.hpp keeps) of at most 4
// UTF-8 bytes; real text averages 3-5 bytes per token. A header declaring more is corrupt or written
// wrong, and its bits per byte would be a silently wrong number (2^63 text bytes gave val_bpb 0.0000).
inline constexpr std::uint64_t max_text_bytes_per_token = 64;

// A header's text bytes against its token count: 0 (unknown) always passes; a byte-level file (vocab
// at most 256 in one byte per token: the byte tokenizer's, whose every token is one byte of text)
// must declare exactly its count; any other at most max_text_bytes_per_token per token.
inline void check_text_bytes(const TokenHeader& h, const std::string& path) {
  if (h.text_bytes == 0) return;
  const bool byte_level = h.vocab <= 256 && h.token_bytes == 1;
  const std::uint64_t per = max_text_bytes_per_token;
  if (byte_level ? h.text_bytes != h.count : h.text_bytes / per + (h.text_bytes % per != 0) > h.count)
    throw corpus_error("data: " + path + " declares " + std::to_string(h.text_bytes) + " text bytes for " + std::to_string(h.count) + " tokens (" +
                       (byte_level ? std::string("a byte-level file has one per token") : "more than " + std::to_string(per) + " per token") +
                       ", or 0: unknown); its header is corrupt or was written wrong");
}

// Reads and checks a header; `path` names the file in the errors.
inline TokenHeader decode_header(const unsigned char* p, std::size_t available, const std::string& path) {
  if (available < token_header_bytes_v1) throw corpus_error("data: " + path + " is shorter than its header (" + std::to_string(available) + " bytes)");
  if (std::memcmp(p, token_magic, 8) != 0) throw corpus_error("data: " + path + " is not a loopscale token file (bad magic)");
  std::uint32_t h32[4];
  std::uint64_t h64[2];
  std::memcpy(h32, p + 8, sizeof h32);
  std::memcpy(h64, p + 24, sizeof h64);
  if (h32[0] != 1 && h32[0] != 2)
    throw corpus_error("data: " + path + " has version " + std::to_string(h32[0]) + ", expected 1 or 2 (corrupt, or written by a newer loopscale)");
  TokenHeader h{h32[1], h32[2], h64[0], h64[1], h32[0], 0};
  if (h.version >= 2) {
    if (available < token_header_bytes)
      throw corpus_error("data: " + path + " is shorter than its header (" + std::to_string(available) + " bytes)");
    std::memcpy(&h.checksum, p + 40, 8);
    const std::uint32_t check = token_file_detail::header_check(p);
    if (check != h32[3])
      throw corpus_error("data: " + path + " is corrupt: its header does not match its header check (stored " + std::to_string(h32[3]) +
                         ", computed " + std::to_string(check) + ")");
  }
  if (h.token_bytes != 1 && h.token_bytes != 2 && h.token_bytes != 4)
    throw corpus_error("data: " + path + " has " + std::to_string(h.token_bytes) + " bytes per token (1, 2 or 4)");
  if (h.vocab == 0) throw corpus_error("data: " + path + " declares vocab 0");
  if (h.token_bytes < 4 && h.vocab > (std::uint64_t{1} << (8 * h.token_bytes)))
    throw corpus_error("data: " + path + " declares vocab " + std::to_string(h.vocab) + ", more than " +
                       std::to_string(h.token_bytes) + " bytes per token can hold");
  check_text_bytes(h, path);
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

  std::int32_t operator[](std::uint64_t i) const { return load_token(map.data() + header_bytes(), token_bytes, i); }

  // Copies tokens [first, first + n) to out.
  void read(std::uint64_t first, std::uint64_t n, std::int32_t* out) const {
    const unsigned char* p = map.data() + header_bytes() + first * token_bytes;
    if (token_bytes == 1) {
      for (std::uint64_t i = 0; i < n; ++i) out[i] = p[i];
    } else {
      for (std::uint64_t i = 0; i < n; ++i) out[i] = load_token(p, token_bytes, i);
    }
  }

  // Drops the pages of tokens [first, first + n) from the resident set (mapped_file.hpp).
  void release(std::uint64_t first, std::uint64_t n) const {
    map.release(header_bytes() + first * token_bytes, n * token_bytes);
  }

  // Nats per token to bits per byte of the text; NaN when the text bytes are unknown (0).
  double bits_per_byte(double nats_per_token) const {
    if (text_bytes == 0) return std::numeric_limits<double>::quiet_NaN();
    return nats_per_token / 0.6931471805599453 * static_cast<double>(count) / static_cast<double>(text_bytes);
  }
};

// Maps and checks a token file (its header, its header check, its size); every problem is a
// corpus_error naming the file. The tokens are checked by verify_tokens.
inline TokenFile read_token_file(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) throw corpus_error("data: cannot open " + path + " (build a corpus with scripts/corpus.sh or loopscale data prepare)");
  if (std::filesystem::is_directory(path, ec)) throw corpus_error("data: " + path + " is a folder, not a token file");
  TokenFile t;
  t.path = path;
  t.map = MappedFile(path);
  static_cast<TokenHeader&>(t) = decode_header(t.map.data(), t.map.size(), path);
  // The count is compared by division: a huge count times the token width would wrap around to
  // the file's size (a 40-byte file declaring 2^63 four-byte tokens once passed as complete).
  const std::uint64_t body = t.map.size() - t.header_bytes();  // decode_header checked size >= header
  if (t.count > body / t.token_bytes || t.count * t.token_bytes != body) {
    const std::string says = t.count > (std::numeric_limits<std::uint64_t>::max() - t.header_bytes()) / t.token_bytes
                                 ? std::to_string(t.count) + " tokens of " + std::to_string(t.token_bytes) + " bytes (more than a file can hold)"
                                 : std::to_string(t.file_bytes());
    throw corpus_error("data: " + path + " is truncated or padded: " + std::to_string(t.map.size()) + " bytes, header says " + says);
  }
  return t;
}

namespace token_file_detail {
template <class T>
std::uint32_t max_of(const unsigned char* p, std::uint64_t n) {
  T m = 0;
  for (std::uint64_t i = 0; i < n; ++i) {
    T v;
    std::memcpy(&v, p + i * sizeof(T), sizeof(T));
    m = v > m ? v : m;
  }
  return m;
}
// The largest of n little-endian tokens of `token_bytes` bytes at p.
inline std::uint32_t max_token(const unsigned char* p, std::uint32_t token_bytes, std::uint64_t n) {
  return token_bytes == 1 ? max_of<std::uint8_t>(p, n) : token_bytes == 2 ? max_of<std::uint16_t>(p, n) : max_of<std::uint32_t>(p, n);
}
}  // namespace token_file_detail

// One read of a token file's tokens: the XXH3-64 of the bytes read, and the first token outside
// the vocabulary as the error it makes (empty: none). The bad token is reported after the pass, not
// as it is met, so a caller that compares the checksum first names a corrupt file as corrupt.
struct TokenScan {
  std::uint64_t checksum = 0;
  std::string bad_token;
  void check() const {
    if (!bad_token.empty()) throw corpus_error(bad_token);
  }
};

// Reads every token of f once, in 4 MiB pieces (not through the mapping: pages read through one
// would stay in the reader's resident set, and training keeps that flat), checking each against the
// vocabulary in the same pass as the checksum. `whole_file`: the checksum covers the header too (a
// manifest's checksum of a version 1 shard), else only the tokens (a version 2 header's). Why the
// tokens on every open: a token at or above the vocabulary would otherwise be found only when
// training reads it, after the run folder is written and perhaps many steps in; in the checksum's
// read the check adds about 1 ms per 10M tokens from the page cache (docs/data.md, "Integrity").
inline TokenScan scan_tokens(const TokenFile& f, bool whole_file) {
  std::FILE* fp = std::fopen(f.path.c_str(), "rb");
  if (!fp) throw corpus_error("data: cannot open " + f.path + ": " + std::strerror(errno));
  Checksum c;
  if (whole_file) c.update(f.map.data(), f.header_bytes());
  TokenScan s;
  // A vocabulary that spans every value of the token width has no token outside it.
  const bool can_be_bad = f.token_bytes == 4 || f.vocab < (std::uint64_t{1} << (8 * f.token_bytes));
  bool bad = std::fseek(fp, static_cast<long>(f.header_bytes()), SEEK_SET) != 0;
  // A multiple of every token width: fread fills it except at the end, so pieces end between tokens.
  std::vector<unsigned char> buf(std::size_t{4} << 20);
  std::uint64_t at = 0;  // tokens before this piece
  std::size_t n;
  while (!bad && (n = std::fread(buf.data(), 1, buf.size(), fp)) > 0) {
    c.update(buf.data(), n);
    const std::uint64_t k = n / f.token_bytes;
    // The largest token first (a loop the compiler vectorizes); only a piece that holds a bad one is
    // searched for its first.
    if (can_be_bad && s.bad_token.empty() && token_file_detail::max_token(buf.data(), f.token_bytes, k) >= f.vocab)
      for (std::uint64_t i = 0; i < k; ++i)
        if (const auto t = static_cast<std::uint32_t>(load_token(buf.data(), f.token_bytes, i)); t >= f.vocab) {
          s.bad_token = "data: " + f.path + ": token " + std::to_string(t) + " at " + std::to_string(at + i) + " is outside its vocab " +
                        std::to_string(f.vocab);
          break;
        }
    at += k;
  }
  bad = bad || std::ferror(fp) != 0;
  std::fclose(fp);
  if (bad) throw corpus_error("data: cannot read " + f.path);
  s.checksum = c.value();
  return s;
}

// Reads every token of a file once: a version 2 file against the checksum its header records (a
// mismatch is a corpus_error, "... is corrupt: ..."), and every token against the vocabulary (a
// corpus_error naming the token and its position). Returns false for a version 1 file, which
// records no checksum (its tokens are still checked).
inline bool verify_tokens(const TokenFile& f) {
  const TokenScan s = scan_tokens(f, false);
  if (f.has_checksum() && s.checksum != f.checksum)
    throw corpus_error("data: " + f.path + " is corrupt: its tokens' checksum is " + checksum_text(s.checksum) + ", its header records " +
                       checksum_text(f.checksum));
  s.check();
  return f.has_checksum();
}

namespace token_file_detail {
// Tokens as `token_bytes` little-endian bytes each, appended to out.
inline void encode_tokens(std::span<const std::int32_t> tokens, std::uint32_t token_bytes, std::vector<unsigned char>& out) {
  out.resize(tokens.size() * token_bytes);
  for (std::size_t k = 0; k < tokens.size(); ++k) {
    const auto v = static_cast<std::uint32_t>(tokens[k]);
    for (std::uint32_t b = 0; b < token_bytes; ++b) out[k * token_bytes + b] = static_cast<unsigned char>(v >> (8 * b));
  }
}
}  // namespace token_file_detail

// Writes a token file piece by piece, for files larger than memory: tokens are appended, and
// finish() writes the header with the counts and the checksum and puts the file in place
// atomically (util/atomic_file.hpp: a kill before that leaves no file, never a torn one).
class TokenWriter {
 public:
  TokenWriter(std::filesystem::path path, std::uint32_t vocab, std::uint32_t token_bytes) : out_(std::move(path), "data: ") {
    h_.vocab = vocab;
    h_.token_bytes = token_bytes;
    unsigned char head[token_header_bytes] = {};
    out_.write(head, sizeof head);
  }
  TokenWriter(const TokenWriter&) = delete;
  TokenWriter& operator=(const TokenWriter&) = delete;

  // Appends tokens (each below vocab: the caller's tokenizer guarantees it) and the number of text
  // bytes they encode.
  void append(std::span<const std::int32_t> tokens, std::uint64_t text_bytes) {
    for (std::size_t k = 0; k < tokens.size(); ++k)
      if (static_cast<std::uint32_t>(tokens[k]) >= h_.vocab)
        throw corpus_error("data: " + path().string() + ": token " + std::to_string(tokens[k]) + " is outside vocab " + std::to_string(h_.vocab));
    token_file_detail::encode_tokens(tokens, h_.token_bytes, buf_);
    out_.write(buf_.data(), buf_.size());
    sum_.update(buf_.data(), buf_.size());
    h_.count += tokens.size();
    h_.text_bytes += text_bytes;
  }
  const TokenHeader& header() const { return h_; }
  const std::filesystem::path& path() const { return out_.path(); }

  // Writes the header and puts the file in place.
  void finish() {
    check_text_bytes(h_, path().string());  // a writer's wrong count is refused here, not by every reader later
    h_.checksum = sum_.value();
    unsigned char head[token_header_bytes];
    encode_header(h_, head);
    if (std::fflush(out_.file()) != 0 || std::fseek(out_.file(), 0, SEEK_SET) != 0) out_.fail(errno);
    out_.write(head, sizeof head);
    out_.commit();
  }

 private:
  AtomicFile<corpus_error> out_;
  TokenHeader h_;
  Checksum sum_;
  std::vector<unsigned char> buf_;
};

// Writes tokens as a token file, atomically. Every token must be in [0, vocab). `text_bytes` < 0:
// tokens x token_bytes (a byte-level file).
inline void write_token_file(const std::string& path, std::span<const std::int32_t> tokens, std::uint32_t vocab,
                             std::uint32_t token_bytes = 1, std::int64_t text_bytes = -1) {
  if (token_bytes != 1 && token_bytes != 2 && token_bytes != 4)
    throw corpus_error("data: " + path + ": bytes per token must be 1, 2 or 4, not " + std::to_string(token_bytes));
  for (std::size_t i = 0; i < tokens.size(); ++i)
    if (tokens[i] < 0 || static_cast<std::uint64_t>(tokens[i]) >= vocab ||
        (token_bytes < 4 && static_cast<std::uint64_t>(tokens[i]) >> (8 * token_bytes)))
      throw corpus_error("data: " + path + ": token " + std::to_string(tokens[i]) + " at " + std::to_string(i) +
                         " does not fit vocab " + std::to_string(vocab) + " in " + std::to_string(token_bytes) + " bytes");
  TokenWriter w(path, vocab, token_bytes);
  constexpr std::size_t chunk = 1 << 16;
  std::uint64_t text = text_bytes < 0 ? tokens.size() * token_bytes : static_cast<std::uint64_t>(text_bytes);
  for (std::size_t i = 0; i < tokens.size(); i += chunk) {
    const std::size_t n = std::min(chunk, tokens.size() - i);
    w.append(tokens.subspan(i, n), i == 0 ? text : 0);
  }
  if (tokens.empty()) w.append({}, text);
  w.finish();
}
inline void write_token_file(const std::string& path, const std::vector<std::int32_t>& tokens, std::uint32_t vocab,
                             std::uint32_t token_bytes = 1, std::int64_t text_bytes = -1) {
  write_token_file(path, std::span<const std::int32_t>(tokens), vocab, token_bytes, text_bytes);
}

}  // namespace loopscale::data
