// Replacing a file atomically: the content goes into a temporary file in the same folder
// (NAME.tmp.PID), which is flushed to disk (fflush + fsync) and renamed over NAME; then the folder
// itself is synced, so the rename survives a crash too. A kill at any moment leaves either the old
// file or the new one, never a torn one. The process id in the temporary's name keeps two processes
// that replace the same file at once (sweep shards claiming a folder) from writing into one
// temporary. Every file loopscale rewrites goes through AtomicFile (directly, or through
// write_file_atomic): checkpoints, run logs and summaries, token files, manifests, sweep results and
// reports; nothing else in the library renames or writes temporaries.
//
// A failure throws `Error` (file_write_error unless the caller names its own type, constructible
// from a std::string) with a message naming the file and the system's reason, e.g.
// "cannot write out/checkpoint.bin: No space left on device" (or "File too large", under a file
// size limit); the temporary is removed and the old file is left as it was.
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
#include <utility>

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

// One atomic replacement of `path`: write through file() (or write()), then commit(). Until
// commit() the old file is untouched; a destructor that runs before it (an exception, an early
// return) removes the temporary. sync() alone puts the content on disk without renaming, for a
// caller that must do something between the two (checkpoint.hpp keeps the previous checkpoint).
// `prefix` starts every error message ("data: " for the data layer's).
template <class Error = file_write_error>
class AtomicFile {
 public:
  explicit AtomicFile(std::filesystem::path path, std::string prefix = "")
      : path_(std::move(path)), tmp_(path_.string() + ".tmp." + std::to_string(::getpid())), prefix_(std::move(prefix)) {
    // The rename at the end would fail on a folder, after all the writing.
    if (std::error_code ec; std::filesystem::is_directory(path_, ec)) throw Error(prefix_ + "cannot write " + path_.string() + ": it is a folder");
    f_ = std::fopen(tmp_.c_str(), "wb");
    if (!f_) throw Error(prefix_ + "cannot write " + path_.string() + ": " + atomic_file_detail::reason(errno));
  }
  ~AtomicFile() {
    if (f_) std::fclose(f_);
    if (!committed_) std::remove(tmp_.c_str());
  }
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  std::FILE* file() const { return f_; }
  const std::filesystem::path& path() const { return path_; }
  const std::filesystem::path& temporary() const { return tmp_; }

  // Appends bytes; a short write throws at once, with the system's reason (errno is read before
  // anything else can change it).
  void write(const void* p, std::size_t n) {
    errno = 0;
    if (std::fwrite(p, 1, n, f_) != n) fail(errno);
  }

  // Throws Error with the reason `err` (an errno value; 0: unknown), removing the temporary.
  [[noreturn]] void fail(int err) {
    if (f_) std::fclose(f_);
    f_ = nullptr;
    std::remove(tmp_.c_str());
    committed_ = true;  // nothing left to remove
    throw Error(prefix_ + "cannot write " + path_.string() + ": " + atomic_file_detail::reason(err));
  }

  // Flushes the content to the disk and closes the temporary. Buffered writes fail here at the
  // latest (a full disk, a file size limit), so the stream's error flag and every call are checked.
  void sync() {
    if (!f_) return;
    bool ok = true;
    int err = 0;
    if (std::ferror(f_)) {  // a write failed earlier: errno still holds its reason
      ok = false;
      err = errno;
    } else if (errno = 0; std::fflush(f_) != 0 || ::fsync(::fileno(f_)) != 0) {
      ok = false;
      err = errno;
    }
    const int closed = std::fclose(f_);
    f_ = nullptr;
    if (ok && closed != 0) {
      ok = false;
      err = errno;
    }
    if (!ok) fail(err);
  }

  // sync(), then renames the temporary over the file and syncs the folder.
  void commit() {
    sync();
    if (std::rename(tmp_.c_str(), path_.c_str()) != 0) {
      const int err = errno;
      std::remove(tmp_.c_str());
      committed_ = true;
      throw Error(prefix_ + "cannot rename " + tmp_.string() + " to " + path_.string() + ": " + atomic_file_detail::reason(err));
    }
    committed_ = true;
    atomic_file_detail::fsync_dir(path_.parent_path());
  }

 private:
  std::filesystem::path path_, tmp_;
  std::string prefix_;
  std::FILE* f_ = nullptr;
  bool committed_ = false;
};

// Streaming: `fill(FILE*)` writes the content; it returns false (or leaves the stream in error)
// when a write failed, or returns nothing and lets the stream's error flag speak.
template <class Error = file_write_error, class Fill>
  requires std::invocable<Fill&, std::FILE*>
void write_file_atomic(const std::filesystem::path& path, Fill&& fill) {
  AtomicFile<Error> out(path);
  errno = 0;
  bool ok = true;
  if constexpr (std::is_void_v<std::invoke_result_t<Fill&, std::FILE*>>)
    fill(out.file());
  else
    ok = static_cast<bool>(fill(out.file()));
  if (!ok) out.fail(errno);
  out.commit();
}

// The whole content at once.
template <class Error = file_write_error>
void write_file_atomic(const std::filesystem::path& path, std::string_view bytes) {
  write_file_atomic<Error>(path, [bytes](std::FILE* f) { return std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size(); });
}

}  // namespace loopscale
