// The input files of `data prepare` and `data import`: none read twice, none in both splits.
#pragma once

#include <filesystem>
#include <string>
#include <system_error>
#include <tuple>
#include <vector>

#include "loopscale/data/error.hpp"

namespace loopscale::data {

// Inputs that would read the same file twice: an input of one split given twice (its documents or
// tokens doubled) or a validation input that a training input also reads (its text in training
// and in validation, so the validation loss would be measured on trained text). A folder reads
// every file below it. `train_flag` and `val_flag` name them in the message: --input and
// --val-input of data prepare, --train and --val of data import.
inline void check_inputs_disjoint(const std::vector<std::string>& train, const std::vector<std::string>& val, const std::string& train_flag,
                                  const std::string& val_flag) {
  namespace fs = std::filesystem;
  const auto canon = [](const std::vector<std::string>& ps) {
    std::vector<fs::path> out;
    for (const auto& p : ps) {
      std::error_code ec;
      const fs::path c = fs::weakly_canonical(p, ec);
      out.push_back(ec ? fs::path(p).lexically_normal() : c);
    }
    return out;
  };
  const auto overlap = [](const fs::path& a, const fs::path& b) {  // one is the other, or a folder above it
    auto ai = a.begin(), bi = b.begin();
    for (; ai != a.end() && bi != b.end(); ++ai, ++bi)
      if (*ai != *bi) return false;
    return true;
  };
  const std::vector<fs::path> tc = canon(train), vc = canon(val);
  for (const auto& [c, given, flag] : {std::tie(tc, train, train_flag), std::tie(vc, val, val_flag)})
    for (std::size_t i = 0; i < c.size(); ++i)
      for (std::size_t j = i + 1; j < c.size(); ++j)
        if (overlap(c[i], c[j]))
          throw corpus_error("data: " + flag + " " + given[j] + " is read twice (also through " + flag + " " + given[i] + "): its text would count twice");
  for (std::size_t i = 0; i < vc.size(); ++i)
    for (std::size_t j = 0; j < tc.size(); ++j)
      if (overlap(tc[j], vc[i]))
        throw corpus_error("data: " + val_flag + " " + val[i] + " is also read by " + train_flag + " " + train[j] +
                           ": its text would be in training and in validation");
}

}  // namespace loopscale::data
