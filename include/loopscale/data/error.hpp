// The error of every bad input of the data layer: a missing, truncated or inconsistent token file,
// corpus folder, manifest, tokenizer or input text. The message is one line that names the file
// (and the line, for text input); the `loopscale` program prints it and exits with code 2, and the
// trainer reports it before the first step. An std::invalid_argument, like every bad-input error
// of the library.
#pragma once

#include <stdexcept>

namespace loopscale::data {

struct corpus_error : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

}  // namespace loopscale::data
