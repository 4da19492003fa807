// One owner per folder: an exclusive flock(2) on a lock file in it (a run folder's OUT/.lock, a
// sweep shard's OUT/.lock.shard-I-of-N). The kernel drops the lock when its holder exits however it
// exits (return, exception, SIGKILL, power loss: the lock is not on disk), so a lock file left
// behind by a dead process is no obstacle: only a live holder refuses. The file holds the holder's
// pid and host, which the refusal names so the user can find (or kill) the other process:
//   "out/ is in use by process 1234 (host node7); wait for it to end, or stop it"
// The file is never removed: unlinking it would let a third process lock a new file of the same
// name while the second still holds the old one.
//
// On NFS, Linux emulates flock with byte-range locks (NFSv3 through lockd, NFSv4 natively), so the
// lock holds between hosts too; a file system without locks (ENOLCK) is reported, not ignored.
//
// remove_stale_temporaries() deletes NAME.tmp.PID files (util/atomic_file.hpp) whose PID is no live
// process: what a writer killed between creating and renaming its temporary leaves behind. Call it
// only while holding the folder's lock: the lock is what says no other writer (on any host) is
// using the folder.
#pragma once

#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <system_error>
#include <utility>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

namespace loopscale {

// Another live process holds the lock. An std::invalid_argument because, as with bad input, the
// fix is the user's (another --out, or wait): the `loopscale` program exits 2 on it.
struct folder_in_use : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
  long holder_pid = 0;  // as written in the lock file; 0 when it holds none
};

struct lock_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Holds an exclusive lock on a file until destroyed (or the process ends).
class FileLock {
 public:
  FileLock() = default;
  FileLock(FileLock&& o) noexcept : fd_(std::exchange(o.fd_, -1)), path_(std::move(o.path_)) {}
  FileLock& operator=(FileLock&& o) noexcept {
    if (this != &o) {
      release();
      fd_ = std::exchange(o.fd_, -1);
      path_ = std::move(o.path_);
    }
    return *this;
  }
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;
  ~FileLock() { release(); }

  // Locks `file` (created if missing) or throws folder_in_use with "<what> is in use by process
  // PID (host H); <advice>".
  static FileLock acquire(const std::filesystem::path& file, const std::string& what,
                          const std::string& advice = "wait for it to end, or stop it") {
    // O_CLOEXEC: a program this process starts must not inherit (and so prolong) the lock.
    const int fd = ::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) throw lock_error("cannot open lock file " + file.string() + ": " + std::strerror(errno));
    int rc;
    do rc = ::flock(fd, LOCK_EX | LOCK_NB);
    while (rc != 0 && errno == EINTR);
    if (rc != 0) {
      const int err = errno;
      if (err != EWOULDBLOCK) {
        ::close(fd);
        throw lock_error("cannot lock " + file.string() + ": " + std::strerror(err));
      }
      const folder_in_use e = in_use(fd, what, advice);
      ::close(fd);
      throw e;
    }
    char host[256] = {};
    ::gethostname(host, sizeof host - 1);
    const std::string me = std::to_string(::getpid()) + " " + host + "\n";
    // Best effort: the lock is what counts, the text only helps the message of a refusal.
    [[maybe_unused]] const bool written =
        ::ftruncate(fd, 0) == 0 && ::pwrite(fd, me.data(), me.size(), 0) == static_cast<ssize_t>(me.size());
    FileLock l;
    l.fd_ = fd;
    l.path_ = file;
    return l;
  }

  bool held() const { return fd_ >= 0; }
  const std::filesystem::path& path() const { return path_; }

  void release() {
    if (fd_ >= 0) ::close(fd_);  // closing the only descriptor drops the flock
    fd_ = -1;
  }

  // Throws folder_in_use, as acquire would, when another process holds `file`'s lock; creates
  // nothing, writes nothing and holds nothing after it returns (a shared lock, tried and dropped,
  // so that several probes at once, the ranks of one job say, do not refuse each other). A missing
  // lock file is a free folder.
  static void check_free(const std::filesystem::path& file, const std::string& what,
                         const std::string& advice = "wait for it to end, or stop it") {
    const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      if (errno == ENOENT) return;
      throw lock_error("cannot open lock file " + file.string() + ": " + std::strerror(errno));
    }
    int rc;
    do rc = ::flock(fd, LOCK_SH | LOCK_NB);
    while (rc != 0 && errno == EINTR);
    if (rc != 0 && errno == EWOULDBLOCK) {
      const folder_in_use e = in_use(fd, what, advice);
      ::close(fd);
      throw e;
    }
    ::close(fd);  // and with it the shared lock
  }

 private:
  // "<what> is in use by process PID (host H); <advice>", from the pid and host the holder wrote.
  static folder_in_use in_use(int fd, const std::string& what, const std::string& advice) {
    std::string text(256, '\0');
    const ssize_t n = ::pread(fd, text.data(), text.size(), 0);
    text.resize(n > 0 ? static_cast<std::size_t>(n) : 0);
    long pid = 0;
    std::string host;
    if (const auto sp = text.find(' '); sp != std::string::npos) {
      try {
        pid = std::stol(text.substr(0, sp));
      } catch (const std::exception&) {
        pid = 0;
      }
      host = text.substr(sp + 1);
      while (!host.empty() && (host.back() == '\n' || host.back() == ' ')) host.pop_back();
    }
    // The holder may not have written its pid yet (it locks first, then writes).
    folder_in_use e(what + " is in use by " +
                    (pid > 0 ? "process " + std::to_string(pid) + " (host " + host + ")" : std::string("another process")) + "; " + advice);
    e.holder_pid = pid;
    return e;
  }

  int fd_ = -1;
  std::filesystem::path path_;
};

// Whether `pid` is a live process on this host (one that exists but is not ours counts: EPERM).
inline bool process_alive(long pid) { return pid > 0 && (::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM); }

// Removes `dir`'s NAME.tmp.PID files whose PID is not a live process (only those whose NAME is
// `name`, when given); returns how many. Hold the lock of the folder (or of the file NAME) while
// calling (see the top of this file).
inline int remove_stale_temporaries(const std::filesystem::path& dir, const std::string& only_name = {}) {
  int removed = 0;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    const auto at = name.rfind(".tmp.");
    if (!only_name.empty() && name.compare(0, at, only_name) != 0) continue;
    if (at == std::string::npos || at + 5 >= name.size()) continue;
    const std::string digits = name.substr(at + 5);
    if (digits.find_first_not_of("0123456789") != std::string::npos || digits.size() > 9) continue;
    const long pid = std::stol(digits);
    if (pid == ::getpid() || process_alive(pid)) continue;
    std::error_code rm;
    if (e.is_regular_file(rm) && std::filesystem::remove(e.path(), rm)) ++removed;
  }
  return removed;
}

}  // namespace loopscale
