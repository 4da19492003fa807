// Fuzzes the token-file reader (data/token_file.hpp read_token_file: header checks and size),
// verify_tokens (the checksum and every token against the vocabulary in one read) and the reading
// of its tokens as a corpus (data/corpus.hpp Corpus::read, which checks them again), what training
// and `loopscale data verify|export` do with a shard. The reader maps a path, so the input goes
// through a temporary file. Promise: every bad file is a data::corpus_error.
#include <algorithm>
#include <vector>

#include "fuzz_common.hpp"
#include "loopscale/data/corpus.hpp"

namespace fuzz_token_file {

using namespace loopscale::data;

inline int one(const std::uint8_t* data, std::size_t size) {
  const loopscale_fuzz::TempFile file(data, size, ".tokens.bin");
  try {
    const TokenFile f = read_token_file(file.path());
    verify_tokens(f);  // what opening a corpus does: the checksum and every token in one read
    const Corpus c(f);
    c.bits_per_byte(1.0);
    // The first and the last tokens: a header whose count does not match the file shows at the end.
    const std::uint64_t n = std::min<std::uint64_t>(c.tokens(), 4096);
    std::vector<std::int32_t> out(n);
    c.read(0, n, out.data());
    c.read(c.tokens() - n, n, out.data());
  } catch (const corpus_error&) {
  }
  return 0;
}

}  // namespace fuzz_token_file

#ifndef LOOPSCALE_FUZZ_REPLAY
extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) { return fuzz_token_file::one(data, size); }
#endif
