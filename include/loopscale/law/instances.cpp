// The compiled unit of the law module's heaviest instantiations (util/extern_templates.hpp): the
// fitter, bootstrap and holdout over a run-time law handle (AnyLaw), and the registry. A program
// that links the CMake target loopscale::law_instances compiles this file once; its own files see
// the same lines as extern templates and compile none of it again (docs/using.md has the figures).
// Without CMake: compile this file once with the program's flags, and give every other file of the
// program -DLOOPSCALE_EXTERN_LAW.
// Compiled on its own, with nothing of loopscale before it: where the same translation unit has
// already included the headers as extern templates (CMake's UNITY_BUILD joins sources; a
// precompiled header is included at the top), the instantiations here would be silently skipped
// and the program would fail to link.
#ifdef LOOPSCALE_LAW_INSTANCE
#error "loopscale/law/instances.cpp must be its own translation unit with no loopscale header before it: set SKIP_UNITY_BUILD_INCLUSION and SKIP_PRECOMPILE_HEADERS on it (the INTERFACE_SOURCES of loopscale::law_instances)"
#endif
#define LOOPSCALE_INSTANTIATE_LAW
#include "loopscale/law/laws.hpp"
