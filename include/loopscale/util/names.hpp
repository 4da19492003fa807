// One name table per enumeration: the words the command line, JSON files and messages use for its
// values. Printing, parsing and the "one of: ..." part of an error all read the same table, so a
// new value is added in one place. A table is found by argument-dependent lookup of
// `names_of(E{})`, declared next to the enumeration it names.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace loopscale {

template <class E, std::size_t N>
struct NameTable {
  std::array<std::pair<E, std::string_view>, N> entries;

  constexpr std::string_view name(E e) const {
    for (const auto& [v, n] : entries)
      if (v == e) return n;
    return "?";
  }
  constexpr std::optional<E> parse(std::string_view s) const {
    for (const auto& [v, n] : entries)
      if (n == s) return v;
    return std::nullopt;
  }
  // "a, b or c": the allowed words, for messages.
  std::string choices(std::string_view last_sep = " or ") const {
    std::string out;
    for (std::size_t i = 0; i < N; ++i) {
      if (i > 0) out += i + 1 == N ? std::string(last_sep) : std::string(", ");
      out += entries[i].second;
    }
    return out;
  }
};

// make_names<Inject>({{Inject::none, "none"}, {Inject::linear, "linear"}, ...})
template <class E, std::size_t N>
constexpr NameTable<E, N> make_names(const std::pair<E, std::string_view> (&entries)[N]) {
  NameTable<E, N> t{};
  for (std::size_t i = 0; i < N; ++i) t.entries[i] = entries[i];
  return t;
}

template <class E>
concept named_enum = requires(E e) { names_of(e).name(e); };

template <named_enum E>
constexpr std::string_view name_of(E e) {
  return names_of(e).name(e);
}

// The value named `s`, or nullopt.
template <named_enum E>
constexpr std::optional<E> parse_name(std::string_view s) {
  return names_of(E{}).parse(s);
}

template <named_enum E>
std::string name_choices(std::string_view last_sep = " or ") {
  return names_of(E{}).choices(last_sep);
}

}  // namespace loopscale
