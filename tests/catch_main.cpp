#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>

#include "loopscale/util/openmp_wait.hpp"

namespace {

// The tests name their scratch files and folders in the temporary directory loopscale_..._PID (or
// loopscale_..._PID.EXT), PID their own process's. When the run ends, this removes what this
// process left there, so that test runs do not pile up in /tmp; a test that fails part-way leaves
// nothing behind either (look into a failure by running the case under a debugger, or with
// LOOPSCALE_KEEP_TEST_FILES=1 set).
struct RemoveTestFiles : Catch::TestEventListenerBase {
  using TestEventListenerBase::TestEventListenerBase;
  void testRunEnded(const Catch::TestRunStats&) override {
    if (std::getenv("LOOPSCALE_KEEP_TEST_FILES") != nullptr) return;
    namespace fs = std::filesystem;
    const std::string pid = "_" + std::to_string(getpid());
    std::error_code ec;
    const fs::path tmp = fs::temp_directory_path(ec);
    if (ec) return;
    for (const fs::directory_entry& e : fs::directory_iterator(tmp, ec)) {
      const std::string name = e.path().filename().string();
      const std::size_t at = name.rfind(pid);
      const bool ours = name.rfind("loopscale_", 0) == 0 && at != std::string::npos &&
                        (at + pid.size() == name.size() || name[at + pid.size()] == '.');
      if (ours) fs::remove_all(e.path(), ec);
    }
  }
};

}  // namespace

CATCH_REGISTER_LISTENER(RemoveTestFiles)

// The tests run as `loopscale` does: idle OpenMP threads sleep (util/openmp_wait.hpp), so two test
// programs that ctest runs at once on two cores do not spin each other to a crawl.
int main(int argc, char** argv) {
  loopscale::prefer_passive_openmp_wait(argv);
  return Catch::Session().run(argc, argv);
}
