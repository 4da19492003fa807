// UTF-8 validity, byte by byte: where text stops being valid UTF-8, so that a tokenizer can encode
// the valid runs as text and every other byte by itself (byte fallback).
#pragma once

#include <cstddef>
#include <string_view>

namespace loopscale::data {

// The length of the valid UTF-8 character at s[i] (1-4), or 0 when the bytes there are not one:
// a stray continuation byte, a truncated sequence, an overlong form, a surrogate, above U+10FFFF.
inline std::size_t utf8_char_length(std::string_view s, std::size_t i) {
  const auto b = [&](std::size_t k) { return static_cast<unsigned char>(s[i + k]); };
  const auto cont = [&](std::size_t k) { return i + k < s.size() && (b(k) & 0xC0) == 0x80; };
  const unsigned char c = b(0);
  if (c < 0x80) return 1;
  if (c < 0xC2) return 0;  // continuation byte or overlong 2-byte lead
  if (c < 0xE0) return cont(1) ? 2 : 0;
  if (c < 0xF0) {
    if (!cont(1) || !cont(2)) return 0;
    if (c == 0xE0 && b(1) < 0xA0) return 0;   // overlong
    if (c == 0xED && b(1) >= 0xA0) return 0;  // UTF-16 surrogate
    return 3;
  }
  if (c < 0xF5) {
    if (!cont(1) || !cont(2) || !cont(3)) return 0;
    if (c == 0xF0 && b(1) < 0x90) return 0;   // overlong
    if (c == 0xF4 && b(1) >= 0x90) return 0;  // above U+10FFFF
    return 4;
  }
  return 0;
}

}  // namespace loopscale::data
