// The processes one `loopscale` command runs on: one, or the ranks an MPI launcher (mpirun, srun)
// started. Built with MPI (LOOPSCALE_WITH_MPI, examples/CMakeLists.txt), the program initialises
// MPI only when a launcher started it, so a plain command stays a plain process.
#pragma once

#include "loopscale/train/dist/communicator.hpp"

namespace loopscale::cli {

// The communicator of this command's processes, MPI started on first use; collectives wait at most
// timeout_s for the other ranks (train/dist/mpi.hpp).
train::Communicator& processes(double timeout_s = 600);
// Ends a job whose ranks may not all be failing: MPI_Abort when MPI was started (a rank that
// returned would otherwise leave the others waiting), else nothing.
void end_job(int code);

}  // namespace loopscale::cli
