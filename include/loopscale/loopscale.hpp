// Umbrella header: the architecture algebra and its accounting. Light on purpose (standard library
// only); the laws (loopscale/law/...) and the training engine (loopscale/train/...) are included
// on their own, since they bring Eigen, LBFGSpp and Thrust.
#pragma once

#include "loopscale/account/account.hpp"
#include "loopscale/account/conventions.hpp"
#include "loopscale/account/flops.hpp"
#include "loopscale/account/params.hpp"
#include "loopscale/arch/iso_depth.hpp"
#include "loopscale/arch/layers.hpp"
#include "loopscale/arch/model.hpp"
#include "loopscale/arch/spec.hpp"
#include "loopscale/arch/stacks.hpp"
