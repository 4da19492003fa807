// Checkpoints: everything a run needs to continue bit-identically, in one file written atomically
// (util/atomic_file.hpp: a temporary file in the same folder, flushed to disk, then renamed over the
// old one), so a kill at any moment leaves either the previous checkpoint or the new one, never a
// torn file; and one whose bytes rotted or were cut afterwards is detected on every load.
//
// Layout (version 3): "LSCKPT01" | u32 version | u32 bytes per value | u64 JSON length | JSON (step,
// tokens, elapsed time, RNG and data position, the run's config) | u64 n | params[n] | m[n] | v[n]
// | "LSCKPTOK" | u64 XXH3-64 of every byte before it (data/checksum.hpp's XXH3; `head -c -8 FILE |
// xxhsum -H3` prints the same digits). Versions 1 and 2 end at "LSCKPTOK" and carry no checksum;
// they are still read, with the checks their layout allows (magic, sizes, trailer).
// The data position and the RNG are the step number and the seed (data.hpp samples windows as a
// pure function of both), recorded in the JSON.
//
// Loading checks, before anything is allocated, that the file's size is exactly what its header
// announces (a truncated file is "truncated at byte N of M", a header whose n would overflow or
// exceed the file is refused), then hashes every byte as it reads them and compares with the stored
// checksum before the JSON is parsed: any flipped bit is "corrupt: checksum mismatch". Every
// problem with a checkpoint that cannot be used is a checkpoint_error naming the file (the
// `loopscale` program exits 2 on it); so is a value that is not finite or a negative second moment,
// the only damage versions 1 and 2 can be caught in. A failure to write one is a file_write_error
// (exit 1).
//
// The optimiser's state (optim.hpp's Optimizer) is m, v and the JSON's optimizer_steps, and with
// the paper recipe muon_matrices and muon_norms: m holds the AdamW first moments and the MuonH
// momentum (each value belongs to one tensor), v the AdamW second moments (zero over MuonH
// matrices), muon_norms the initial Frobenius norm of each MuonH matrix, as doubles (exact in
// JSON). Version 2 adds the recipe to the JSON; a version 1 checkpoint (AdamW only, its step count
// named adam_steps) is read as the adamw recipe's. Version 3 adds the checksum.
//
// The previous checkpoint is kept (save_checkpoint's `previous`, the trainer's checkpoint.prev.bin),
// so a checkpoint found corrupt on resume falls back to the one before it (trainer.hpp).
#pragma once

#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "loopscale/data/checksum.hpp"
#include "loopscale/util/atomic_file.hpp"
#include "loopscale/util/regular_file.hpp"

namespace loopscale::train {

// A checkpoint that cannot be used: missing, unreadable, truncated, corrupt, of another format, or
// not the model's.
struct checkpoint_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

inline constexpr char checkpoint_magic[8] = {'L', 'S', 'C', 'K', 'P', 'T', '0', '1'};
inline constexpr char checkpoint_trailer[8] = {'L', 'S', 'C', 'K', 'P', 'T', 'O', 'K'};
inline constexpr std::uint32_t checkpoint_version = 3;  // written; 1, 2 and 3 are read

template <class T>
struct Checkpoint {
  nlohmann::json meta;
  std::vector<T> params, m, v;
  std::filesystem::path path;        // the file it was loaded from
  std::uint32_t version = 0;         // its format version; below 3: no checksum was verified
};

// Keeps `path` as `previous` before a new checkpoint replaces it. The order makes every moment of a
// crash safe: the new content is already on disk (AtomicFile::sync) when this runs; a hard link
// PREVIOUS.tmp.PID to the current file is renamed over PREVIOUS (atomic: PREVIOUS is the older
// checkpoint or the current one, never absent nor torn), and only then does the caller rename the
// new file over PATH (the current one's data stays alive under PREVIOUS). So PATH always exists
// and is good, PREVIOUS always exists once there were two checkpoints. Where hard links are not
// supported PATH is renamed to PREVIOUS instead: until the new file is renamed in, only PREVIOUS
// exists, which the trainer's resume also accepts.
inline void keep_previous(const std::filesystem::path& path, const std::filesystem::path& previous) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return;
  const std::filesystem::path link = previous.string() + ".tmp." + std::to_string(::getpid());
  std::filesystem::remove(link, ec);
  const auto fail = [&](const std::string& what, int err) {
    std::filesystem::remove(link, ec);
    return file_write_error("cannot keep " + path.string() + " as " + previous.string() + ": " + what + ": " + std::strerror(err));
  };
  if (::link(path.c_str(), link.c_str()) == 0) {
    if (std::rename(link.c_str(), previous.c_str()) != 0) throw fail("rename", errno);
    return;
  }
  const int err = errno;
  if (err != EPERM && err != ENOTSUP && err != EOPNOTSUPP && err != EMLINK && err != ENOSYS) throw fail("link", err);
  if (std::rename(path.c_str(), previous.c_str()) != 0) throw fail("rename", errno);
}

// What is wrong with a training state's values, as words ("parameter value 17 of 74240 is NaN");
// empty when nothing is: every parameter and moment finite, every second moment non-negative. A
// state that fails holds no model to continue from: the trainer stops before it saves one (an update
// can overflow the parameters while the step's loss and gradient norm were finite), and loading
// refuses one as corrupt.
template <class T>
std::string state_value_fault(std::span<const T> params, std::span<const T> m, std::span<const T> v) {
  const auto first_bad = [](std::span<const T> a, const char* what, bool non_negative) -> std::string {
    for (std::size_t i = 0; i < a.size(); ++i)
      if (!std::isfinite(a[i]) || (non_negative && a[i] < 0))
        return std::string(what) + " value " + std::to_string(i) + " of " + std::to_string(a.size()) + " is " +
               (std::isnan(a[i]) ? "NaN" : std::isinf(a[i]) ? "infinite" : "negative");
    return {};
  };
  std::string why = first_bad(params, "parameter", false);
  if (why.empty()) why = first_bad(m, "first-moment", false);
  if (why.empty()) why = first_bad(v, "second-moment", true);
  return why;
}

// Streams the buffers to disk (no copy of the parameters in memory), hashing them on the way. With
// `previous`, the checkpoint `path` replaces is kept under that name (keep_previous). A failure to
// write (a full disk, a file size limit) is a file_write_error naming `path`; the old checkpoint,
// and the previous one, are then left as they were.
template <class T>
void save_checkpoint(const std::filesystem::path& path, const nlohmann::json& meta, std::span<const T> params,
                     std::span<const T> m, std::span<const T> v, const std::filesystem::path& previous = {}) {
  if (m.size() != params.size() || v.size() != params.size()) throw std::invalid_argument("checkpoint: buffers differ in size");
  const std::string js = meta.dump();
  AtomicFile<file_write_error> out(path);
  data::Checksum sum;
  const auto put = [&](const void* p, std::size_t k) {
    out.write(p, k);
    sum.update(p, k);
  };
  const std::uint64_t n = params.size(), jl = js.size();
  const std::uint32_t ver = checkpoint_version, vb = sizeof(T);
  put(checkpoint_magic, 8);
  put(&ver, 4);
  put(&vb, 4);
  put(&jl, 8);
  put(js.data(), jl);
  put(&n, 8);
  put(params.data(), n * sizeof(T));
  put(m.data(), n * sizeof(T));
  put(v.data(), n * sizeof(T));
  put(checkpoint_trailer, 8);
  const std::uint64_t h = sum.value();
  out.write(&h, 8);
  out.sync();
  if (!previous.empty()) keep_previous(path, previous);
  out.commit();
}

template <class T>
Checkpoint<T> load_checkpoint(const std::filesystem::path& path) {
  const std::string name = "checkpoint " + path.string();
  if (const std::string why = not_a_file(path); !why.empty()) throw checkpoint_error("cannot open " + name + ": " + why);
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) throw checkpoint_error("cannot open " + name + ": " + std::strerror(errno));
  struct Closer {
    FILE* f;
    ~Closer() { std::fclose(f); }
  } closer{f};
  std::error_code ec;
  const std::uint64_t size = std::filesystem::file_size(path, ec);
  if (ec) throw checkpoint_error("cannot read " + name + ": " + ec.message());
  std::uint64_t expect = 0;  // the size the header announces, once known
  std::uint64_t pos = 0;
  data::Checksum sum;
  const auto truncated = [&]() {
    return checkpoint_error(name + " is truncated at byte " + std::to_string(size) +
                            (expect > 0 ? " of " + std::to_string(expect) : " (inside its header)"));
  };
  const auto get = [&](void* p, std::size_t k) {
    if (pos + k > size) throw truncated();
    if (std::fread(p, 1, k, f) != k) throw checkpoint_error("cannot read " + name + ": " + std::strerror(errno));
    sum.update(p, k);
    pos += k;
  };
  char magic[8];
  get(magic, 8);
  if (std::memcmp(magic, checkpoint_magic, 8) != 0) throw checkpoint_error(path.string() + " is not a loopscale checkpoint (bad magic)");
  std::uint32_t ver = 0, vb = 0;
  std::uint64_t jl = 0, n = 0;
  get(&ver, 4);
  get(&vb, 4);
  if (ver < 1 || ver > checkpoint_version || vb != sizeof(T))
    throw checkpoint_error(name + " has version " + std::to_string(ver) + " and " + std::to_string(vb) +
                           "-byte values; expected version 1 to " + std::to_string(checkpoint_version) + " and " + std::to_string(sizeof(T)));
  get(&jl, 8);
  // Every size is checked against the file's before it is used, so a corrupt header can neither
  // overflow the arithmetic nor allocate more than the file holds.
  const std::uint64_t tail = 8 + (ver >= 3 ? 8 : 0);
  if (jl > (std::uint64_t{1} << 30))
    throw checkpoint_error(name + " is corrupt: its JSON length " + std::to_string(jl) + " is impossible (the file has " + std::to_string(size) + " bytes)");
  if (jl > size - pos)
    throw checkpoint_error(name + " is truncated at byte " + std::to_string(size) + " (inside its JSON of " + std::to_string(jl) + " bytes)");
  std::string js(static_cast<std::size_t>(jl), '\0');
  get(js.data(), js.size());
  get(&n, 8);
  const std::uint64_t per = 3 * sizeof(T);
  if (n > (std::numeric_limits<std::uint64_t>::max() - pos - tail) / per)
    throw checkpoint_error(name + " is corrupt: it claims " + std::to_string(n) + " values");
  expect = pos + n * per + tail;
  if (expect > size) throw truncated();
  if (expect < size)
    throw checkpoint_error(name + " is corrupt: " + std::to_string(size - expect) + " bytes more than its header announces (" + std::to_string(expect) + ")");
  Checkpoint<T> c;
  c.path = path;
  c.version = ver;
  for (std::vector<T>* a : {&c.params, &c.m, &c.v}) {
    a->resize(static_cast<std::size_t>(n));
    get(a->data(), n * sizeof(T));
  }
  char trailer[8];
  get(trailer, 8);
  if (ver >= 3) {
    const std::uint64_t computed = sum.value();
    std::uint64_t stored = 0;
    get(&stored, 8);
    if (stored != computed)
      throw checkpoint_error(name + " is corrupt: checksum mismatch (stored " + data::checksum_text(stored) + ", computed " +
                             data::checksum_text(computed) + ")");
  }
  if (std::memcmp(trailer, checkpoint_trailer, 8) != 0) throw checkpoint_error(name + " is corrupt: bad trailer");
  try {
    c.meta = nlohmann::json::parse(js);
  } catch (const nlohmann::json::exception& e) {
    throw checkpoint_error(name + " is corrupt: its JSON does not parse (" + e.what() + ")");
  }
  if (!c.meta.is_object()) throw checkpoint_error(name + " is corrupt: its JSON is not an object");
  // The trainer never saves such a state (state_value_fault), so one here is damage: versions 1 and
  // 2 have no checksum to catch it, and resuming from it would train on nonsense without a word.
  if (std::string why = state_value_fault<T>(c.params, c.m, c.v); !why.empty()) throw checkpoint_error(name + " is corrupt: its " + why);
  return c;
}

}  // namespace loopscale::train
