// The MPI communicator of data-parallel training (train/dist/communicator.hpp), for processes
// started by mpirun or srun. Include this header only in programs that link MPI (CMake:
// MPI::MPI_CXX); the rest of loopscale never includes <mpi.h>.
//
// Every collective is non-blocking underneath and waited for with a deadline: a rank that dies is
// noticed by mpirun, which ends the job, but a rank that hangs (stopped, deadlocked, on a dead
// node whose launcher has not noticed) would keep the others in MPI_Allreduce forever. Past the
// deadline the waiting rank prints one line naming the collective and aborts the job
// (MPI_Abort), so the launcher returns and the job can be resumed from its last checkpoint.
#pragma once

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "loopscale/train/dist/communicator.hpp"

namespace loopscale::train {

// MPI_Init_thread (funneled: OpenMP threads compute, only the main thread communicates) and
// MPI_Finalize, once per process.
class MpiSession {
 public:
  MpiSession(int* argc, char*** argv) {
    int provided = 0;
    if (MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) throw std::runtime_error("MPI_Init_thread failed");
  }
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;
  ~MpiSession() { MPI_Finalize(); }
};

class MpiCommunicator final : public Communicator {
 public:
  // timeout_s: how long a collective may wait for the other ranks before the job is aborted.
  explicit MpiCommunicator(double timeout_s = 600, MPI_Comm comm = MPI_COMM_WORLD) : timeout_s_(timeout_s) {
    MPI_Comm_dup(comm, &comm_);
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
  }
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;
  ~MpiCommunicator() override { MPI_Comm_free(&comm_); }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void set_timeout(double s) { timeout_s_ = s; }

  std::string describe() const override {
    char v[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    MPI_Get_library_version(v, &len);
    std::string s(v, static_cast<std::size_t>(len));
    s = s.substr(0, s.find_first_of(",\n"));  // "Open MPI v4.1.4, package: ..." -> "Open MPI v4.1.4"
    return "MPI (" + s + "), " + std::to_string(size_) + " ranks";
  }

  void sum(std::span<float> x, Reduction how, const char* what) override { reduce(x.data(), x.size(), MPI_FLOAT, how, what); }
  void sum(std::span<double> x, Reduction how, const char* what) override { reduce(x.data(), x.size(), MPI_DOUBLE, how, what); }

  std::vector<std::uint64_t> gather(std::uint64_t v, const char* what) override {
    std::vector<std::uint64_t> all(static_cast<std::size_t>(size_));
    MPI_Request req;
    MPI_Iallgather(&v, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, comm_, &req);
    wait(&req, 1, what);
    return all;
  }

 private:
  // MPI counts are ints: long buffers go in pieces of 2^30 values.
  static constexpr std::size_t piece = std::size_t{1} << 30;

  template <class T>
  void reduce(T* x, std::size_t n, MPI_Datatype type, Reduction how, const char* what) {
    if (size_ == 1) return;
    for (std::size_t off = 0; off < n; off += piece) {
      const int count = static_cast<int>(std::min(piece, n - off));
      if (how == Reduction::allreduce) {
        MPI_Request req;
        MPI_Iallreduce(MPI_IN_PLACE, x + off, count, type, MPI_SUM, comm_, &req);
        wait(&req, 1, what);
      } else {
        chain(x + off, count, type, what);
      }
    }
  }

  // The ordered sum: rank r receives x_0 + ... + x_{r-1} from rank r - 1, adds its own x_r and
  // passes it on; the last rank holds the sum and broadcasts it.
  template <class T>
  void chain(T* x, int count, MPI_Datatype type, const char* what) {
    const std::size_t n = static_cast<std::size_t>(count);
    if (rank_ > 0) {
      scratch_.resize(std::max(scratch_.size(), n * sizeof(T)));
      T* acc = reinterpret_cast<T*>(scratch_.data());
      MPI_Request req;
      MPI_Irecv(acc, count, type, rank_ - 1, 0, comm_, &req);
      wait(&req, 1, what);
      for (std::size_t i = 0; i < n; ++i) x[i] = acc[i] + x[i];  // (x_0 + ... + x_{r-1}) + x_r
    }
    if (rank_ + 1 < size_) {
      MPI_Request req;
      MPI_Isend(x, count, type, rank_ + 1, 0, comm_, &req);
      wait(&req, 1, what);
    }
    MPI_Request req;
    MPI_Ibcast(x, count, type, size_ - 1, comm_, &req);
    wait(&req, 1, what);
  }

  // Waits for the requests, polling: spins for the first few microseconds (a step's collectives
  // usually complete at once), then sleeps between polls so that an oversubscribed core is left
  // to the rank it waits for. Past the deadline: one line, then MPI_Abort.
  void wait(MPI_Request* reqs, int n, const char* what) {
    using clock = std::chrono::steady_clock;
    const auto t0 = clock::now();
    for (long polls = 0;; ++polls) {
      int done = 0;
      MPI_Testall(n, reqs, &done, MPI_STATUSES_IGNORE);
      if (done) return;
      if (polls > 1000) std::this_thread::sleep_for(std::chrono::microseconds(polls > 100000 ? 1000 : 50));
      if (polls % 64 == 0 && std::chrono::duration<double>(clock::now() - t0).count() > timeout_s_) {
        std::fprintf(stderr,
                     "loopscale: rank %d: no answer from the other ranks for %.0f s during %s (a rank died or hangs); ending the job, "
                     "resume it from its last checkpoint with --resume\n",
                     rank_, timeout_s_, what);
        std::fflush(stderr);
        MPI_Abort(MPI_COMM_WORLD, 1);
        std::_Exit(1);
      }
    }
  }

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
  double timeout_s_;
  std::vector<unsigned char> scratch_;  // the ordered sum's receive buffer, grown once
};

}  // namespace loopscale::train
