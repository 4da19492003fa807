// A file mapped read-only into memory (mmap). Shared by copies (the mapping lives while any copy
// does), so token files can be passed around by value.
//
// Resident memory: pages of a file mapping that have been read count in the process's resident
// set (RSS) until the kernel reclaims them, and reclaim only happens under memory pressure. A
// sampler that reads windows all over a corpus larger than memory would see its RSS climb to the
// size of the machine's free memory. `release(offset, bytes)` tells the kernel the pages are not
// needed (madvise MADV_DONTNEED: the process's page-table entries go, the page cache keeps the
// data), so a reader that releases what it has copied keeps its RSS flat whatever the corpus size.
#pragma once

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "loopscale/data/error.hpp"
#include "loopscale/util/regular_file.hpp"

namespace loopscale::data {

class MappedFile {
 public:
  MappedFile() = default;
  // Maps the whole file; an empty file maps to nothing (size 0).
  explicit MappedFile(const std::filesystem::path& path) {
    // Before opening: a folder opens read-only and then fails to map ("No such device"), and opening
    // a pipe waits for a writer.
    if (const std::string why = not_a_file(path); !why.empty()) throw corpus_error("data: " + why);
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw corpus_error("data: cannot open " + path.string() + ": " + std::strerror(errno));
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
      const int err = errno;
      ::close(fd);
      throw corpus_error("data: cannot stat " + path.string() + ": " + std::strerror(err));
    }
    const auto size = static_cast<std::size_t>(st.st_size);
    void* p = nullptr;
    if (size > 0) {
      p = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
      if (p == MAP_FAILED) {
        const int err = errno;
        ::close(fd);
        throw corpus_error("data: cannot map " + path.string() + ": " + std::strerror(err));
      }
    }
    ::close(fd);  // the mapping keeps the file
    m_ = std::shared_ptr<Map>(new Map{static_cast<const unsigned char*>(p), size});
  }

  const unsigned char* data() const { return m_ ? m_->p : nullptr; }
  std::size_t size() const { return m_ ? m_->n : 0; }

  // Hints that the file will be read at random places: no read-ahead beyond what is asked.
  void advise_random() const {
    if (size() > 0) ::madvise(const_cast<unsigned char*>(m_->p), m_->n, MADV_RANDOM);
  }

  // Drops the pages of [offset, offset + bytes) from this process's resident set (see above). The
  // data stays readable: a later read faults the pages in again from the page cache or the disk.
  // The range is widened to whole aligned blocks of release_block bytes: a read fault maps not
  // only its page but the pages around it that are in the page cache (Linux's fault-around, 64 KiB,
  // and whole large folios, up to a 2 MiB huge page, on filesystems that cache files in them), so
  // releasing only the pages read left the rest mapped and the RSS climbed (measured on this 2-core
  // EPYC: 194 MB peak after 50 steps of 32 windows on a 200 MB corpus, 39 MB after one step).
  void release(std::size_t offset, std::size_t bytes) const {
    if (!m_ || bytes == 0 || offset >= m_->n) return;
    // The blocks are aligned in the address space; the mapping starts page-aligned.
    const auto base = reinterpret_cast<std::uintptr_t>(m_->p);
    const std::uintptr_t lo = std::max(base, (base + offset) / release_block * release_block);
    const std::uintptr_t hi = std::min(base + m_->n, (base + offset + bytes + release_block - 1) / release_block * release_block);
    ::madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_DONTNEED);
  }

  // The largest run of pages one read fault maps: a PMD-sized huge page (2 MiB on x86-64 and
  // arm64 with 4 KiB pages), which also covers fault-around's 64 KiB.
  static constexpr std::size_t release_block = 2 * 1024 * 1024;

 private:
  struct Map {
    const unsigned char* p;
    std::size_t n;
    ~Map() {
      if (p) ::munmap(const_cast<unsigned char*>(p), n);
    }
  };
  std::shared_ptr<const Map> m_;
};

}  // namespace loopscale::data
