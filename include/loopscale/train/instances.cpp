// The compiled unit of the training engine's heaviest instantiations (util/extern_templates.hpp):
// the host engine's Transformer<float> and AdamW<float>, and train::train on the host. A program
// that links the CMake target loopscale::train_instances compiles this file once; its own files see
// the same lines as extern templates and compile none of it again (docs/using.md has the figures).
// Without CMake: compile this file once with the program's flags, and give every other file of the
// program -DLOOPSCALE_EXTERN_TRAIN.
#define LOOPSCALE_INSTANTIATE_TRAIN
#include "loopscale/train/trainer.hpp"
