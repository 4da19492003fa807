// The compiled unit of the law module's heaviest instantiations (util/extern_templates.hpp): the
// fitter, bootstrap and holdout over a run-time law handle (AnyLaw), and the registry. A program
// that links the CMake target loopscale::law_instances compiles this file once; its own files see
// the same lines as extern templates and compile none of it again (docs/using.md has the figures).
// Without CMake: compile this file once with the program's flags, and give every other file of the
// program -DLOOPSCALE_EXTERN_LAW.
#define LOOPSCALE_INSTANTIATE_LAW
#include "loopscale/law/laws.hpp"
