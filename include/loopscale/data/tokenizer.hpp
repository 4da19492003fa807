// A tokenizer: text bytes to token ids and back, exactly. Two kinds:
//   byte           id = the byte's value, vocab 256 (the byte-level corpus of scripts/corpus.sh)
//   sentencepiece  a SentencePiece model (Debian's libsentencepiece-dev; tokenizer_train.hpp trains
//                  one) with byte fallback: every byte the model has no piece for becomes one of
//                  its 256 byte pieces <0x00>..<0xFF>, so no text is unencodable.
// Exactness: decode(encode(text)) == text for every byte string, invalid UTF-8 included.
// SentencePiece itself would replace invalid UTF-8 by U+FFFD and read U+2581 (its space marker,
// "▁") as a space, so encode() gives SentencePiece only the valid UTF-8 runs without U+2581 and
// encodes every other byte as its byte piece; decode() writes each piece's bytes (byte pieces
// their byte, other pieces their text with "▁" as a space). The model must be trained without
// normalisation and without a dummy prefix (tokenizer_train.hpp does so), else its pieces do not
// spell the text; load() refuses a model that lacks the byte pieces.
//
// text_bytes(ids) is the length of decode(ids) without building it: the text bytes a run of tokens
// encodes, which bits per byte divide by.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <sentencepiece_processor.h>

#include "loopscale/data/checksum.hpp"
#include "loopscale/data/error.hpp"
#include "loopscale/data/utf8.hpp"
#include "loopscale/util/regular_file.hpp"

namespace loopscale::data {

class Tokenizer {
 public:
  enum class Kind { byte, sentencepiece };

  // The byte tokenizer.
  Tokenizer() : kind_(Kind::byte) {
    bytes_.resize(256);
    for (int b = 0; b < 256; ++b) {
      bytes_[static_cast<std::size_t>(b)] = std::string(1, static_cast<char>(b));
      byte_id_[static_cast<std::size_t>(b)] = b;
    }
  }

  // A SentencePiece model from its serialized form (the content of a .model file); `name` says
  // where it came from in errors.
  static Tokenizer sentencepiece(const std::string& serialized, const std::string& name) {
    Tokenizer t;
    t.kind_ = Kind::sentencepiece;
    auto sp = std::make_shared<sentencepiece::SentencePieceProcessor>();
    if (const auto st = sp->LoadFromSerializedProto(serialized); !st.ok())
      throw corpus_error("data: " + name + " is not a SentencePiece model (" + st.ToString() + ")");
    const int n = sp->GetPieceSize();
    t.bytes_.assign(static_cast<std::size_t>(n), std::string());
    t.byte_id_.fill(-1);
    static constexpr std::string_view space_marker = "\xE2\x96\x81";  // U+2581
    for (int id = 0; id < n; ++id) {
      const std::string piece = sp->IdToPiece(id);
      std::string& out = t.bytes_[static_cast<std::size_t>(id)];
      if (sp->IsByte(id)) {
        const int b = static_cast<int>(std::stoul(piece.substr(3, 2), nullptr, 16));  // "<0xNN>"
        out = std::string(1, static_cast<char>(b));
        t.byte_id_[static_cast<std::size_t>(b)] = id;
      } else if (sp->IsControl(id) || sp->IsUnknown(id) || sp->IsUnused(id)) {
        out.clear();  // no text
      } else {
        for (std::size_t i = 0; i < piece.size();) {
          if (piece.compare(i, space_marker.size(), space_marker) == 0) {
            out += ' ';
            i += space_marker.size();
          } else {
            out += piece[i++];
          }
        }
      }
    }
    for (int b = 0; b < 256; ++b)
      if (t.byte_id_[static_cast<std::size_t>(b)] < 0)
        throw corpus_error("data: " + name + " has no byte-fallback piece <0x" + hex2(b) +
                           ">; train it with byte_fallback (loopscale data tokenizer train does)");
    t.sp_ = std::move(sp);
    return t;
  }

  // "byte", or the path of a SentencePiece .model file.
  static Tokenizer load(const std::string& spec) {
    if (spec == "byte") return Tokenizer();
    std::error_code ec;
    if (const std::string why = not_a_file(spec); !why.empty()) throw corpus_error("data: the tokenizer " + why);
    if (!std::filesystem::is_regular_file(spec, ec)) throw corpus_error("data: cannot open tokenizer " + spec + " (give byte or a SentencePiece .model file)");
    return sentencepiece(read_all(spec), spec);
  }

  Kind kind() const { return kind_; }
  std::string kind_name() const { return kind_ == Kind::byte ? "byte" : "sentencepiece"; }
  std::uint32_t vocab() const { return static_cast<std::uint32_t>(bytes_.size()); }

  // Appends the tokens of `text` to `out`.
  void encode(std::string_view text, std::vector<std::int32_t>& out) const {
    if (kind_ == Kind::byte) {
      for (const char c : text) out.push_back(static_cast<unsigned char>(c));
      return;
    }
    std::vector<int> ids;
    std::size_t run = 0, i = 0;
    const auto flush = [&](std::size_t end) {
      if (end > run) {
        ids.clear();
        if (const auto st = sp_->Encode(text.substr(run, end - run), &ids); !st.ok())
          throw corpus_error("data: SentencePiece could not encode text: " + st.ToString());
        out.insert(out.end(), ids.begin(), ids.end());
      }
    };
    while (i < text.size()) {
      const std::size_t n = utf8_char_length(text, i);
      if (n == 0 || (n == 3 && text.compare(i, 3, "\xE2\x96\x81") == 0)) {
        flush(i);
        for (std::size_t k = 0; k < (n == 0 ? 1 : n); ++k) out.push_back(byte_id_[static_cast<unsigned char>(text[i + k])]);
        i += n == 0 ? 1 : n;
        run = i;
      } else {
        i += n;
      }
    }
    flush(text.size());
  }
  std::vector<std::int32_t> encode(std::string_view text) const {
    std::vector<std::int32_t> out;
    encode(text, out);
    return out;
  }

  // The text of tokens; an id outside the vocabulary is an error.
  std::string decode(std::span<const std::int32_t> ids) const {
    std::string s;
    for (const std::int32_t id : ids) s += piece_bytes(id);
    return s;
  }
  std::uint64_t text_bytes(std::span<const std::int32_t> ids) const {
    std::uint64_t n = 0;
    for (const std::int32_t id : ids) n += piece_bytes(id).size();
    return n;
  }
  const std::string& piece_bytes(std::int32_t id) const {
    if (id < 0 || static_cast<std::size_t>(id) >= bytes_.size())
      throw corpus_error("data: token " + std::to_string(id) + " is outside the tokenizer's vocab " + std::to_string(bytes_.size()));
    return bytes_[static_cast<std::size_t>(id)];
  }
  // The id of the byte piece of byte b.
  std::int32_t byte_id(unsigned char b) const { return byte_id_[b]; }
  // The id of the model's beginning-of-document token, -1 when it has none (the byte tokenizer;
  // a SentencePiece model trained without one, as `data tokenizer train` does unless --bos).
  std::int32_t bos_id() const { return sp_ ? static_cast<std::int32_t>(sp_->bos_id()) : -1; }

  // The whole of a file; a pipe or a device is refused before it is opened (a FIFO blocked the
  // open for ever, /dev/zero filled memory), as anything else the data layer reads.
  static std::string read_all(const std::filesystem::path& path) {
    if (const std::string why = not_a_file(path); !why.empty()) throw corpus_error("data: " + why);
    std::FILE* f = std::fopen(path.c_str(), "rb");
    if (!f) throw corpus_error("data: cannot open " + path.string());
    std::string s;
    char buf[1 << 16];
    std::size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) s.append(buf, n);
    std::fclose(f);
    return s;
  }

 private:
  static std::string hex2(int b) {
    static constexpr char d[] = "0123456789ABCDEF";
    return {d[b >> 4], d[b & 15]};
  }
  Kind kind_;
  std::shared_ptr<const sentencepiece::SentencePieceProcessor> sp_;
  std::vector<std::string> bytes_;  // the text of each id
  std::array<std::int32_t, 256> byte_id_{};
};

}  // namespace loopscale::data
