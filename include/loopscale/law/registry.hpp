// The laws the command line knows by name. A new law: its header, then one line here.
#pragma once

#include <string>
#include <vector>

#include "loopscale/law/abnar.hpp"
#include "loopscale/law/chinchilla.hpp"
#include "loopscale/law/clark.hpp"
#include "loopscale/law/iso_depth.hpp"
#include "loopscale/law/krajewski.hpp"
#include "loopscale/law/looped_moe.hpp"
#include "loopscale/law/parcae.hpp"

namespace loopscale::law {

inline const std::vector<AnyLaw>& all_laws() {
  static const std::vector<AnyLaw> laws{Chinchilla{}, IsoDepth{}, Parcae{},         LoopedMoE{}, LoopedMoEBounded{},
                                        LoopedMoELinear{}, LoopedMoEPower{}, MoE{}, Clark{},     Krajewski{},
                                        Abnar{}};
  return laws;
}

inline std::string law_names() {
  std::string s;
  for (const auto& l : all_laws()) s += (s.empty() ? "" : ", ") + l.name();
  return s;
}

inline AnyLaw law_by_name(const std::string& name) {
  for (const auto& l : all_laws())
    if (l.name() == name) return l;
  throw data_error("no law '" + name + "'; the laws are " + law_names());
}

}  // namespace loopscale::law
