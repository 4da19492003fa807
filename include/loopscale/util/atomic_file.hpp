// Replacing a file atomically: the content goes into a temporary file in the same folder
// (NAME.tmp.PID), which is flushed to disk (fflush + fsync) and renamed over NAME; then the folder
// itself is synced, so the rename survives a crash too. A kill at any moment leaves either the old
// file or the new one, never a torn one. The process id in the temporary's name keeps two processes
// that replace the same file at once (sweep shards claiming a folder) from writing into one
// temporary. Every file loopscale rewrites goes through here: checkpoints, run logs and summaries,
// token files, sweep results and reports.
//
// A failure throws `Error` (file_write_error unless the caller names its own type, constructible
// from a std::string) with a message naming the file and the system's reason, e.g.
// "cannot write out/checkpoint.bin.tmp.4242: No space left on device"; the temporary is removed and
// the old file is left as it was.
#pragma once

#include <cerrno>
#include <concepts>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>

#include <fcntl.h>
#include <unistd.h>

namespace loopscale {

struct file_write_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

namespace atomic_file_detail {

inline std::string reason(int err) { return err != 0 ? std::strerror(err) : "write failed"; }

// Syncs a folder so that a rename in it is on disk. Some file systems cannot sync a folder; the
// rename itself has happened, so that is not an error.
inline void fsync_dir(const std::filesystem::path& dir) {
  const int fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

}  // namespace atomic_file_detail

// Streaming: `fill(FILE*)` writes the content; it returns false (or leaves the stream in error)
// when a write failed, or returns nothing and lets the stream's error flag speak.
template <class Error = file_write_error, class Fill>
  requires std::invocable<Fill&, std::FILE*>
void write_file_atomic(const std::filesystem::path& path, Fill&& fill) {
  const std::filesystem::path tmp = path.string() + ".tmp." + std::to_string(::getpid());
  const auto fail = [&tmp](int err) { return Error("cannot write " + tmp.string() + ": " + atomic_file_detail::reason(err)); };
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) throw fail(errno);
  errno = 0;
  bool ok = true;
  try {
    if constexpr (std::is_void_v<std::invoke_result_t<Fill&, std::FILE*>>)
      fill(f);
    else
      ok = static_cast<bool>(fill(f));
  } catch (...) {
    std::fclose(f);
    std::remove(tmp.c_str());
    throw;
  }
  ok = ok && !std::ferror(f) && std::fflush(f) == 0 && ::fsync(::fileno(f)) == 0;
  int err = ok ? 0 : errno;
  if (std::fclose(f) != 0 && ok) {
    ok = false;
    err = errno;
  }
  if (!ok) {
    std::remove(tmp.c_str());
    throw fail(err);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    err = errno;
    std::remove(tmp.c_str());
    throw Error("cannot rename " + tmp.string() + " to " + path.string() + ": " + atomic_file_detail::reason(err));
  }
  atomic_file_detail::fsync_dir(path.parent_path());
}

// The whole content at once.
template <class Error = file_write_error>
void write_file_atomic(const std::filesystem::path& path, std::string_view bytes) {
  write_file_atomic<Error>(path, [bytes](std::FILE* f) { return std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size(); });
}

}  // namespace loopscale
