// Trains a tiny model on a corpus folder and prints the process's peak resident memory, read from
// /proc/self/status (VmHWM), with its peak address space (VmPeak, which counts the mapped corpus;
// read after the run, whose mapping is gone by then) as JSON:
// {"vm_hwm_kb": ..., "vm_peak_kb": ..., "steps": ..., "status": ...}.
// Usage: corpus_rss_probe CORPUS_DIR OUT_DIR STEPS VOCAB
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "corpus/tiny_run.hpp"
#include "loopscale/train/trainer.hpp"

namespace {
long status_kb(const char* key) {
  std::ifstream f("/proc/self/status");
  std::string k;
  long v = -1;
  std::string unit;
  while (f >> k) {
    if (k == key) {
      f >> v;
      return v;
    }
    std::getline(f, unit);
  }
  return -1;
}
}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: corpus_rss_probe CORPUS_DIR OUT_DIR STEPS VOCAB\n");
    return 2;
  }
  using namespace loopscale;
  train::TrainConfig c = test::tiny_run(argv[1], argv[2], std::atoll(argv[4]), 16, 32, 64, std::atoll(argv[3]));
  c.threads = 1;
  c.eval_every = 0;  // validation at the end only
  c.eval_tokens = 4 * 64;
  c.peak_flops = 1e10;
  try {
    const train::TrainResult r = train::train(c);
    std::printf("{\"vm_hwm_kb\": %ld, \"vm_peak_kb\": %ld, \"steps\": %lld, \"status\": \"%s\"}\n", status_kb("VmHWM:"), status_kb("VmPeak:"),
                static_cast<long long>(r.steps), r.status.c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "corpus_rss_probe: %s\n", e.what());
    return 2;
  }
  return 0;
}
