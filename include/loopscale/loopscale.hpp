// Umbrella header: the model spec, its accounting and the architecture algebra (Boost.Hana and the
// standard library only). The laws (loopscale/law/...), the training engine (loopscale/train/...)
// and sweeps (loopscale/sweep/...) are included on their own, since they bring Eigen, LBFGSpp,
// nlohmann-json and Thrust.
//
// The algebra's headers come first, each included from here directly, so that a compile error in
// a user's model type is reported a few lines from the top of the compiler's output (the include
// chain GCC prints before it stays two lines long).
#pragma once

// clang-format off
#include "loopscale/arch/size.hpp"
#include "loopscale/arch/layers.hpp"
#include "loopscale/arch/stacks.hpp"
#include "loopscale/arch/model.hpp"
#include "loopscale/arch/checks.hpp"
#include "loopscale/arch/iso_depth.hpp"
// clang-format on
#include "loopscale/account/account.hpp"
#include "loopscale/account/compare.hpp"
#include "loopscale/account/conventions.hpp"
#include "loopscale/account/flops.hpp"
#include "loopscale/account/memory.hpp"
#include "loopscale/account/params.hpp"
#include "loopscale/spec/family.hpp"
#include "loopscale/spec/paper_grid.hpp"
#include "loopscale/spec/spec.hpp"
