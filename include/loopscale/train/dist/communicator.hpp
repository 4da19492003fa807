// What data-parallel training needs from the processes it runs on: their count, this one's rank,
// sums over all of them and an agreement on a few flags. The trainer (train/trainer.hpp) takes a
// Communicator; SingleProcess is the one-process case (every collective is the identity), and
// train/dist/mpi.hpp is the MPI one (include it, and link MPI, only where MPI is wanted: nothing
// else in loopscale includes <mpi.h>).
//
// Why an interface with virtual calls and not a template parameter: a collective moves the whole
// gradient, so one indirect call per collective costs nothing, and the trainer is compiled once
// for every transport (the CUDA backend's NCCL communicator will be a third implementation).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "loopscale/util/names.hpp"

namespace loopscale::train {

// How a sum over the ranks is formed.
//   allreduce  the transport's own algorithm (MPI_Allreduce: its order depends on the rank count and
//              the message size, is fixed for both, and every rank gets the same bits)
//   ordered    x_0 + x_1 + ... + x_{N-1}, left to right, whatever the transport: a chain through
//              the ranks, then a broadcast. Slower (N - 1 hops), but N ranks with batch B / N then
//              sum exactly as one process accumulating N micro-batches of B / N does (accum = N).
enum class Reduction : std::uint8_t { allreduce, ordered };

constexpr auto names_of(Reduction) { return make_names<Reduction>({{Reduction::allreduce, "allreduce"}, {Reduction::ordered, "ordered"}}); }

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // "single process", "MPI (Open MPI v4.1.4), 2 ranks": what log.jsonl records.
  virtual std::string describe() const = 0;
  // x <- the sum of x over the ranks, the same bits on every rank. `what` names the collective in
  // the message of a timeout.
  virtual void sum(std::span<float> x, Reduction how, const char* what) = 0;
  virtual void sum(std::span<double> x, Reduction how, const char* what) = 0;
  // v from every rank, in rank order, on every rank.
  virtual std::vector<std::uint64_t> gather(std::uint64_t v, const char* what) = 0;
  bool root() const { return rank() == 0; }
};

class SingleProcess final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string describe() const override { return "single process"; }
  void sum(std::span<float>, Reduction, const char*) override {}
  void sum(std::span<double>, Reduction, const char*) override {}
  std::vector<std::uint64_t> gather(std::uint64_t v, const char*) override { return {v}; }
};

// What an MPI launcher (mpirun or mpiexec of Open MPI or MPICH, srun with PMI or PMIx) tells each
// process it starts through the environment: read without any MPI call, so that a program can
// tell before MPI starts whether it is one of several ranks, and which.
namespace launcher_env {
inline constexpr const char* rank_vars[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"};
inline constexpr const char* size_vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"};
template <std::size_t N>
inline const char* first_set(const char* const (&vars)[N]) {
  for (const char* v : vars)
    if (const char* value = std::getenv(v)) return value;
  return nullptr;
}
}  // namespace launcher_env

// Whether a launcher started this process: a program that links MPI initialises it only then, so
// that a plain run stays a plain process.
inline bool launched_by_mpi() {
  return launcher_env::first_set(launcher_env::rank_vars) != nullptr || launcher_env::first_set(launcher_env::size_vars) != nullptr;
}
// This process's rank as its launcher says (0 for a plain process).
inline int launcher_rank() {
  const char* r = launcher_env::first_set(launcher_env::rank_vars);
  return r ? std::atoi(r) : 0;
}
// The number of ranks the launcher says it started (1 when it does not say: srun with PMIx).
inline int launcher_size() {
  const char* n = launcher_env::first_set(launcher_env::size_vars);
  return n ? std::atoi(n) : 1;
}

// The communicator of code that does not give one.
inline Communicator& single_process() {
  static SingleProcess c;
  return c;
}

// What the other ranks throw when one rank failed: that rank reports the failure itself, so a
// program prints nothing more for this one and exits with `code`, the failing rank's exit code
// (examples/cli/main.cpp).
struct other_rank_failed : std::runtime_error {
  int rank, code;
  other_rank_failed(int r, int c, const std::string& what)
      : std::runtime_error("rank " + std::to_string(r) + " " + what + " (its message says why)"), rank(r), code(c) {}
};

// The first rank that failed in a phase every rank goes through, and the exit code its failure
// means; rank -1 when none failed.
struct Failure {
  int rank = -1, code = 0;
};

// Every rank passes the exit code of its failure (0: it did not fail) and learns the first
// failure. So a phase that fails on one rank (a full disk while rank 0 writes a checkpoint, a
// corpus missing on one node) ends the job on every rank instead of leaving the others waiting
// in the next collective.
inline Failure first_failure(Communicator& comm, int code, const char* what) {
  const std::vector<std::uint64_t> f = comm.gather(static_cast<std::uint64_t>(code), what);
  for (std::size_t r = 0; r < f.size(); ++r)
    if (f[r] != 0) return {static_cast<int>(r), static_cast<int>(f[r])};
  return {};
}

}  // namespace loopscale::train
