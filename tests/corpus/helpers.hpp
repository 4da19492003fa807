// Shared by the data layer's tests: synthetic documents, reading a split back (temporary folders
// and whole-file reads: tests/test_files.hpp).
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <unistd.h>

#include "loopscale/data/corpus.hpp"
#include "loopscale/util/random.hpp"
#include "test_files.hpp"

namespace loopscale::test {

namespace fs = std::filesystem;

// Document i: a sentence or several with a unique marker "<doc i>", some numbers, punctuation and
// (every 7th) non-ASCII text.
inline std::string document(int i) {
  SplitMix64 r{static_cast<std::uint64_t>(i) * 7919 + 1};
  static const char* words[] = {"the", "cat", "sat", "on", "a", "mat", "while", "looped", "models", "recur", "over",
                                "shared", "blocks", "and", "tokens", "flow", "through", "depth", "width", "budget"};
  std::string s = "<doc " + std::to_string(i) + ">";
  const int n = 5 + static_cast<int>(r.next() % 60);
  for (int k = 0; k < n; ++k) {
    s += ' ';
    s += words[r.next() % 20];
    if (r.next() % 9 == 0) {  // appended piecewise: " " + std::string trips GCC 12's false -Wrestrict
      s += ' ';
      s += std::to_string(r.next() % 10000);
    }
    if (r.next() % 11 == 0) s += ".\n";
  }
  if (i % 7 == 0) s += " déjà vu — naïve 日本語 😀";
  return s + "\n";
}

// Every token of a split.
inline std::vector<std::int32_t> all_tokens(const data::Corpus& c) {
  std::vector<std::int32_t> t(static_cast<std::size_t>(c.tokens()));
  if (!t.empty()) c.read(0, t.size(), t.data());
  return t;
}

}  // namespace loopscale::test
