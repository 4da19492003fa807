// The laws the command line knows by name. A new law: its header, then its name in RegisteredLaws.
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
#include "loopscale/util/extern_templates.hpp"

namespace loopscale::law {

// The laws by type, in the order the command line lists them.
template <Law... Ls>
struct LawList {};
using RegisteredLaws = LawList<Chinchilla, IsoDepth, Parcae, LoopedMoE, LoopedMoEBounded, LoopedMoELinear, LoopedMoEPower,
                               MoE, Clark, Krajewski, Abnar>;

// Run-time handles of the laws of a list. Templates, as fit is (huber_fit.hpp says why): a handle
// compiles every member of its law, and a file that never looks a law up by name pays nothing.
template <class List = RegisteredLaws>
const std::vector<AnyLaw>& all_laws() {
  static const std::vector<AnyLaw> laws = []<Law... Ls>(LawList<Ls...>) { return std::vector<AnyLaw>{AnyLaw(Ls{})...}; }(List{});
  return laws;
}

template <class List = RegisteredLaws>
std::string law_names() {
  std::string s;
  for (const auto& l : all_laws<List>()) s += (s.empty() ? "" : ", ") + l.name();
  return s;
}

template <class List = RegisteredLaws>
AnyLaw law_by_name(const std::string& name) {
  for (const auto& l : all_laws<List>())
    if (l.name() == name) return l;
  throw data_error("no law '" + name + "'; the laws are " + law_names<List>());
}

#ifdef LOOPSCALE_LAW_INSTANCE  // util/extern_templates.hpp: compiled once, in law/instances.cpp
LOOPSCALE_LAW_INSTANCE const std::vector<AnyLaw>& all_laws<RegisteredLaws>();
LOOPSCALE_LAW_INSTANCE std::string law_names<RegisteredLaws>();
LOOPSCALE_LAW_INSTANCE AnyLaw law_by_name<RegisteredLaws>(const std::string&);
#endif

}  // namespace loopscale::law
