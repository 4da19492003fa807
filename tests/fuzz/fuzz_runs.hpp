// The reading of a runs table as a law's fit reads it, shared by fuzz_runs_csv and fuzz_runs_jsonl.
#pragma once

#include <string>
#include <vector>

#include "loopscale/law/runs_io.hpp"

namespace fuzz_runs {

using namespace loopscale::law;

// The variables of the laws' fits (Chinchilla, iso-depth, looped MoE), derived ones included.
inline void read_columns(const RunTable& t) {
  for (const std::vector<std::string>& need :
       {std::vector<std::string>{"N", "D", "loss"}, {"N_once", "N_rec", "r", "D", "loss"}, {"N_act", "N_loop", "R", "E", "K", "m", "D", "loss"}}) {
    try {
      RunReader reader(t, {});
      reader.read(need, {"F", "C", "N_inject"});
      reader.injection_label();
      if (reader.available("r")) reader.labels("r");
    } catch (const data_error&) {
    }
  }
  try {
    RunReader reader(t, {});
    reader.count_injection(loopscale::InjectionCount::rec);
    reader.read({"N_once", "N_rec", "r", "D", "loss"});
  } catch (const data_error&) {
  }
}

}  // namespace fuzz_runs
