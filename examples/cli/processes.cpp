// examples/cli/processes.hpp.
#include "processes.hpp"

#include "cli.hpp"

#include <optional>

#ifdef LOOPSCALE_WITH_MPI
#include "loopscale/train/dist/mpi.hpp"
#endif

namespace loopscale::cli {

int process_rank() { return train::launcher_rank(); }

#ifdef LOOPSCALE_WITH_MPI
namespace {
struct Mpi {
  std::optional<train::MpiSession> session;   // finalised last
  std::optional<train::MpiCommunicator> comm;  // freed first
};
Mpi& mpi() {
  static Mpi m;
  return m;
}
}  // namespace

train::Communicator& processes(double timeout_s) {
  if (!train::launched_by_mpi()) return train::single_process();
  Mpi& m = mpi();
  if (!m.comm) {
    m.session.emplace(nullptr, nullptr);
    m.comm.emplace(timeout_s);
  }
  m.comm->set_timeout(timeout_s);
  return *m.comm;
}

void end_job(int code) {
  if (mpi().comm && mpi().comm->size() > 1) MPI_Abort(MPI_COMM_WORLD, code);
}
#else
train::Communicator& processes(double) {
  if (train::launcher_size() > 1)
    throw usage_error("this loopscale was built without MPI, so its ranks cannot train together; install libopenmpi-dev and rebuild");
  return train::single_process();
}
void end_job(int) {}
#endif

}  // namespace loopscale::cli
