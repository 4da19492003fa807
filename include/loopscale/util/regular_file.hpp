// Whether a path that a reader is about to open is a file it can read: a folder opens as a stream
// and then reads as empty or fails with "basic_filebuf::underflow", and a pipe, socket or device
// blocks the reader until someone writes to it. Readers of outside input ask first, so the answer
// is one sentence naming the path.
#pragma once

#include <filesystem>
#include <string>

namespace loopscale {

// Why `path` cannot be read as a file, as a sentence; empty when it can (a regular file, or a link
// to one) and when it does not exist (each opener says that in its own words).
inline std::string not_a_file(const std::filesystem::path& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (ec || !fs::exists(st)) return {};
  if (fs::is_directory(st)) return path.string() + " is a folder, not a file";
  if (!fs::is_regular_file(st)) return path.string() + " is not a regular file (a pipe, socket or device)";
  return {};
}

}  // namespace loopscale
