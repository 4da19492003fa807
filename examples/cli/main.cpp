// The `loopscale` program: a thin layer over the library, one file per subcommand. Exit status:
// 0 done, 1 failed, 2 bad input (or a folder in use by another process), 75 stopped by a signal
// with its state saved (loopscale::exit_interrupted; run the same command again to continue).
#include <cstdio>
#include <exception>

#include "cli.hpp"
#include "loopscale/spec/spec.hpp"
#include "loopscale/train/checkpoint.hpp"
#include "loopscale/util/interrupt.hpp"

int main(int argc, char** argv) {
  CLI::App app{"loopscale: looped transformers, mixture of experts and their scaling laws"};
  app.require_subcommand(1);
  for (auto& reg : loopscale::cli::registry()) reg(app);
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
    std::fprintf(stderr, "loopscale: %s\n", e.what());
    return loopscale::exit_interrupted;
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "loopscale: error: %s\n", e.what());
    return 2;
  } catch (const loopscale::cli::usage_error& e) {
    std::fprintf(stderr, "loopscale: error: %s\n", e.what());
    return 2;
  } catch (const loopscale::spec_error& e) {
    std::fprintf(stderr, "loopscale: error: %s\n", e.what());
    return 2;
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "loopscale: error: %s\n", e.what());
    return 2;
  } catch (const loopscale::train::checkpoint_error& e) {
    // A checkpoint that cannot be used (truncated, corrupt, not the model's) is bad input too.
    std::fprintf(stderr, "loopscale: error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "loopscale: failed: %s\n", e.what());
    return 1;
  }
  return 0;
}
