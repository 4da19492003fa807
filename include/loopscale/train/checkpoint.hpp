// Checkpoints: everything a run needs to continue bit-identically, in one file written atomically
// (util/atomic_file.hpp: a temporary file in the same folder, flushed to disk, then renamed over the
// old one), so a kill at any moment leaves either the previous checkpoint or the new one, never a
// torn file.
//
// Layout: "LSCKPT01" | u32 version | u32 bytes per value | u64 JSON length | JSON (step, tokens,
// elapsed time, RNG and data position, the run's config) | u64 n | params[n] | m[n] | v[n] | "LSCKPTOK"
// The data position and the RNG are the step number and the seed (data.hpp samples windows as a
// pure function of both), recorded in the JSON.
//
// The optimiser's state (optim.hpp's Optimizer) is m, v and the JSON's optimizer_steps, and with
// the paper recipe muon_matrices and muon_norms: m holds the AdamW first moments and the MuonH
// momentum (each value belongs to one tensor), v the AdamW second moments (zero over MuonH
// matrices), muon_norms the initial Frobenius norm of each MuonH matrix, as doubles (exact in
// JSON). Version 2 adds the recipe to the JSON; a version 1 checkpoint (AdamW only, its step count
// named adam_steps) is read as the adamw recipe's.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "loopscale/util/atomic_file.hpp"

namespace loopscale::train {

struct checkpoint_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

inline constexpr char checkpoint_magic[8] = {'L', 'S', 'C', 'K', 'P', 'T', '0', '1'};
inline constexpr char checkpoint_trailer[8] = {'L', 'S', 'C', 'K', 'P', 'T', 'O', 'K'};
inline constexpr std::uint32_t checkpoint_version = 2;  // written; 1 and 2 are read

template <class T>
struct Checkpoint {
  nlohmann::json meta;
  std::vector<T> params, m, v;
};

// Streams the buffers to disk (no copy of the parameters in memory).
template <class T>
void save_checkpoint(const std::filesystem::path& path, const nlohmann::json& meta, std::span<const T> params,
                     std::span<const T> m, std::span<const T> v) {
  if (m.size() != params.size() || v.size() != params.size()) throw checkpoint_error("checkpoint: buffers differ in size");
  const std::string js = meta.dump();
  write_file_atomic<checkpoint_error>(path, [&](FILE* f) {
    const std::uint64_t n = params.size(), jl = js.size();
    const std::uint32_t ver = checkpoint_version, vb = sizeof(T);
    const auto put = [f](const void* p, std::size_t k) { return std::fwrite(p, 1, k, f) == k; };
    return put(checkpoint_magic, 8) && put(&ver, 4) && put(&vb, 4) && put(&jl, 8) && put(js.data(), jl) && put(&n, 8) &&
           put(params.data(), n * sizeof(T)) && put(m.data(), n * sizeof(T)) && put(v.data(), n * sizeof(T)) &&
           put(checkpoint_trailer, 8);
  });
}

template <class T>
Checkpoint<T> load_checkpoint(const std::filesystem::path& path) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) throw checkpoint_error("cannot open checkpoint " + path.string());
  struct Closer {
    FILE* f;
    ~Closer() { std::fclose(f); }
  } closer{f};
  const auto get = [&](void* p, std::size_t k) {
    if (std::fread(p, 1, k, f) != k) throw checkpoint_error("checkpoint " + path.string() + " is truncated");
  };
  char magic[8];
  get(magic, 8);
  if (std::memcmp(magic, checkpoint_magic, 8) != 0) throw checkpoint_error(path.string() + " is not a loopscale checkpoint");
  std::uint32_t ver = 0, vb = 0;
  std::uint64_t jl = 0, n = 0;
  get(&ver, 4);
  get(&vb, 4);
  if (ver < 1 || ver > checkpoint_version || vb != sizeof(T))
    throw checkpoint_error("checkpoint " + path.string() + " has version " + std::to_string(ver) + " and " +
                           std::to_string(vb) + "-byte values; expected version 1 or 2 and " + std::to_string(sizeof(T)));
  get(&jl, 8);
  if (jl > (std::uint64_t{1} << 30)) throw checkpoint_error("checkpoint " + path.string() + " is corrupt");
  std::string js(jl, '\0');
  get(js.data(), jl);
  Checkpoint<T> c;
  c.meta = nlohmann::json::parse(js);
  get(&n, 8);
  const auto size = std::filesystem::file_size(path);
  if (size != 8 + 4 + 4 + 8 + jl + 8 + 3 * n * sizeof(T) + 8) throw checkpoint_error("checkpoint " + path.string() + " is truncated");
  c.params.resize(n);
  c.m.resize(n);
  c.v.resize(n);
  get(c.params.data(), n * sizeof(T));
  get(c.m.data(), n * sizeof(T));
  get(c.v.data(), n * sizeof(T));
  char trailer[8];
  get(trailer, 8);
  if (std::memcmp(trailer, checkpoint_trailer, 8) != 0) throw checkpoint_error("checkpoint " + path.string() + " is corrupt");
  return c;
}

}  // namespace loopscale::train
