// Whether a path that a reader is about to open is a file it can read: a folder opens as a stream
// and then reads as empty or fails with "basic_filebuf::underflow", and a pipe, socket or device
// blocks the reader until someone writes to it. Readers of outside input ask first, so the answer
// is one sentence naming the path.
#pragma once

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>

#include <fcntl.h>
#include <unistd.h>

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

// The whole text of a small input file a user names on the command line (a sweep spec, a train
// config, a fit, a model spec), or why it cannot be read as one: `fault`, a sentence naming the path.
// A pipe is input there, as `<(jq ...)` and /dev/stdin give it (sweep plan and train --config are
// used so), and is read when a process holds it open for writing. A pipe nobody writes to (a
// `mkfifo` left alone) would block the reader for ever, so it is opened without blocking and
// refused when no writer has come within `wait`; a device (/dev/zero never ends) or a socket is
// refused at once.
struct InputFile {
  std::string text;
  std::string fault;  // empty: `text` is the file's
};

inline InputFile read_input_file(const std::filesystem::path& path, std::chrono::milliseconds wait = std::chrono::milliseconds(1000)) {
  namespace fs = std::filesystem;
  InputFile f;
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (!ec && fs::is_directory(st)) {
    f.fault = path.string() + " is a folder, not a file";
    return f;
  }
  const bool pipe = !ec && fs::is_fifo(st);
  if (!ec && fs::exists(st) && !pipe && !fs::is_regular_file(st)) {
    f.fault = path.string() + " is not a regular file (a device or socket)";
    return f;
  }
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | (pipe ? O_NONBLOCK : 0));
  if (fd < 0) {
    f.fault = "cannot open " + path.string() + ": " + std::strerror(errno);
    return f;
  }
  char buf[65536];
  if (pipe) {
    // With O_NONBLOCK, read() says 0 (end of file) while no process holds the pipe open for
    // writing, and EAGAIN while one does and has written nothing yet: a writer is there.
    const auto until = std::chrono::steady_clock::now() + wait;
    for (;;) {
      const ssize_t n = ::read(fd, buf, sizeof buf);
      if (n > 0) f.text.append(buf, static_cast<std::size_t>(n));
      if (n > 0 || (n < 0 && errno == EAGAIN)) break;
      if (n < 0 && errno != EINTR) {
        f.fault = "cannot read " + path.string() + ": " + std::strerror(errno);
        ::close(fd);
        return f;
      }
      if (std::chrono::steady_clock::now() >= until) {
        f.fault = path.string() + " is a pipe that no process writes to";
        ::close(fd);
        return f;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);  // a writer is there: wait for the rest of its text
  }
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n > 0) {
      f.text.append(buf, static_cast<std::size_t>(n));
    } else if (n == 0) {
      break;
    } else if (errno != EINTR) {
      f.fault = "cannot read " + path.string() + ": " + std::strerror(errno);
      break;
    }
  }
  ::close(fd);
  return f;
}

}  // namespace loopscale
