// The `loopscale` program: a thin layer over the library, one file per subcommand. Exit status:
// 0 done, 1 failed, 2 bad input (or a folder in use by another process), 75 stopped by a signal
// with its state saved (loopscale::exit_interrupted; run the same command again to continue).
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <exception>

#include <unistd.h>

#include "cli.hpp"
#include "processes.hpp"
#include "loopscale/spec/spec.hpp"
#include "loopscale/train/checkpoint.hpp"
#include "loopscale/train/dist/communicator.hpp"
#include "loopscale/util/interrupt.hpp"
#include "loopscale/util/openmp_wait.hpp"

int main(int argc, char** argv) {
  // A file-size limit (ulimit -f) must make a write fail (EFBIG: one line, exit 1, the temporary
  // file removed, as a full disk does), not kill the process mid-checkpoint with SIGXFSZ.
  std::signal(SIGXFSZ, SIG_IGN);
  // Idle OpenMP threads sleep rather than spin unless the user says otherwise (util/openmp_wait.hpp).
  loopscale::prefer_passive_openmp_wait(argv);
  CLI::App app{"loopscale: looped transformers, mixture of experts and their scaling laws"};
  app.require_subcommand(1);
  for (auto& reg : loopscale::cli::registry()) reg(app);
  loopscale::cli::check_integer_options(app);  // a number an integer option cannot hold is refused, not saturated
  // Under an MPI launcher every rank parses the same command and meets the same bad input: rank 0
  // alone prints it. The ranks agree on failures while they train (train/trainer.hpp), so a rank
  // that fails alone ends the job (cli::end_job).
  const int rank = loopscale::train::launcher_rank();  // no MPI call: errors before MPI starts are printed once
  const auto bad_input = [rank](const char* what) {
    if (rank == 0) std::fprintf(stderr, "loopscale: error: %s\n", what);
    return 2;
  };
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::fputs(app.help().c_str(), stdout);
    return 0;
  } catch (const CLI::CallForAllHelp&) {
    std::fputs(app.help("", CLI::AppFormatMode::All).c_str(), stdout);
    return 0;
  } catch (const loopscale::interrupted_error& e) {
    // Stopped by a signal with its state saved: 75 (EX_TEMPFAIL) tells a job script to run it again.
    if (rank == 0) std::fprintf(stderr, "loopscale: %s\n", e.what());
    return loopscale::exit_interrupted;
  } catch (const CLI::ParseError& e) {
    return bad_input(e.what());
  } catch (const loopscale::cli::usage_error& e) {
    return bad_input(e.what());
  } catch (const loopscale::spec_error& e) {
    return bad_input(e.what());
  } catch (const std::invalid_argument& e) {
    return bad_input(e.what());
  } catch (const loopscale::train::checkpoint_error& e) {
    // A checkpoint that cannot be used (truncated, corrupt, not the model's) is bad input too.
    return bad_input(e.what());
  } catch (const loopscale::train::other_rank_failed& e) {
    return e.code;  // the failing rank said why
  } catch (const std::exception& e) {
    if (rank == 0) std::fprintf(stderr, "loopscale: failed: %s\n", e.what());
    else std::fprintf(stderr, "loopscale: rank %d failed: %s\n", rank, e.what());
    loopscale::cli::end_job(1);  // the other ranks may still be running: end them too
    return 1;
  }
  return 0;
}
