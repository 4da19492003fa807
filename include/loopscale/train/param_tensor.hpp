// One named parameter tensor of the model's flat parameter buffer and its optimiser group: what the
// optimiser (optim.hpp) and the checkpoint need to know about the parameters without the model.
#pragma once

#include <cstdint>
#include <string>

namespace loopscale::train {

using int64 = std::int64_t;

// Optimiser groups (optim.hpp gives each its own learning rate and weight decay).
enum class ParamGroup : std::uint8_t { embedding, lm_head, matrix, norm_inject };
inline constexpr int param_groups = 4;

struct ParamTensor {
  std::string name;
  int64 offset = 0, size = 0;
  ParamGroup group = ParamGroup::matrix;
  int64 fan_in = 0;  // inputs of one output of a matrix (initialisation scale); 0 for vectors
};

}  // namespace loopscale::train
