// Everything of the scaling-law module: the laws, reading runs, fitting, uncertainty, and using a
// fit (allocation, equivalence, looped-MoE design). Brings Eigen and LBFGSpp.
#pragma once

#include "loopscale/law/allocation.hpp"
#include "loopscale/law/bootstrap.hpp"
#include "loopscale/law/comparison.hpp"
#include "loopscale/law/constants.hpp"
#include "loopscale/law/equivalence.hpp"
#include "loopscale/law/holdout.hpp"
#include "loopscale/law/huber_fit.hpp"
#include "loopscale/law/iso_depth_grid.hpp"
#include "loopscale/law/moe_design.hpp"
#include "loopscale/law/registry.hpp"
#include "loopscale/law/runs_io.hpp"
#include "loopscale/law/synthetic.hpp"
