// Fuzzes the task-bundle reader (eval/bundle.hpp read_bundle), what `loopscale eval --tasks DIR`
// reads from outside. The input is split at its first NUL byte: before it the manifest
// (bundle.json), after it the rows of the one task file a manifest can name, `t.jsonl` (any other
// dataset_uri is a missing file, which is bad input too). Promises: every bad bundle is a
// bundle_error (an std::invalid_argument), and a bundle that reads writes back (write_bundle) and
// reads again equal, so nothing read_bundle accepts is refused or changed by the writer.
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "fuzz_common.hpp"
#include "loopscale/eval/bundle.hpp"

namespace fuzz_bundle {

namespace fs = std::filesystem;
using namespace loopscale::eval;

inline int one(const std::uint8_t* data, std::size_t size) {
  const std::string in = loopscale_fuzz::text_of(data, size);
  const std::size_t nul = in.find('\0');
  const std::string manifest = in.substr(0, nul), rows = nul == std::string::npos ? std::string() : in.substr(nul + 1);
  const char* tmp = std::getenv("TMPDIR");
  const fs::path dir = fs::path(tmp && *tmp ? tmp : "/tmp") / ("loopscale-fuzz-bundle-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "in");
  std::ofstream(dir / "in" / "bundle.json", std::ios::binary) << manifest;
  std::ofstream(dir / "in" / "t.jsonl", std::ios::binary) << rows;
  try {
    const Bundle b = read_bundle(dir / "in");
    write_bundle(b, dir / "out");
    Bundle again = read_bundle(dir / "out");
    again.name = b.name;  // the name is the folder's
    if (!(again == b)) {
      std::fprintf(stderr, "fuzz_bundle: a bundle read, written and read again differs\n");
      std::abort();
    }
  } catch (const bundle_error&) {
  }
  fs::remove_all(dir);
  return 0;
}

}  // namespace fuzz_bundle

#ifndef LOOPSCALE_FUZZ_REPLAY
extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) { return fuzz_bundle::one(data, size); }
#endif
