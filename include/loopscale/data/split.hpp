// The train/validation split, by whole documents: a document goes to validation when the XXH3-64
// hash of its text (with the split's seed) falls below `fraction` of the hash range. A pure function
// of the text, so it needs no pass over the corpus, gives the same answer in any order and on any
// thread, puts identical documents on the same side (duplicates cannot leak across), and puts
// about `fraction` of the documents into validation.
#pragma once

#include <cstdint>
#include <string_view>

#include "loopscale/data/checksum.hpp"

namespace loopscale::data {

struct SplitRule {
  double val_fraction = 0;
  std::uint64_t seed = 0;

  bool validation(std::string_view text) const {
    if (val_fraction <= 0) return false;
    if (val_fraction >= 1) return true;
    // The top 53 bits as a fraction in [0, 1).
    return static_cast<double>(xxh3(text, seed) >> 11) * 0x1.0p-53 < val_fraction;
  }
};

}  // namespace loopscale::data
