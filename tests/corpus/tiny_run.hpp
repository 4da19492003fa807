// The small looped model the corpus tests train (prelude 1 + one shared layer x r 2 with linear
// injection + coda 1, two heads), in one place for test_training, test_packing and rss_probe.
#pragma once

#include <cstdint>
#include <filesystem>

#include "loopscale/train/train_config.hpp"

namespace loopscale::test {

// `steps` optimiser steps of `batch` x `seq_len` tokens on the corpus folder `data`, into `out`;
// validation every half of the run on 256 tokens, two threads, a fixed peak for the MFU.
inline train::TrainConfig tiny_run(const std::filesystem::path& data, const std::filesystem::path& out, std::int64_t vocab,
                                   std::int64_t d_model = 32, std::int64_t batch = 4, std::int64_t seq_len = 32, std::int64_t steps = 12) {
  train::TrainConfig c;
  c.spec.d_model = d_model;
  c.spec.vocab = vocab;
  LayerSpec l;
  l.attn.heads = 2;
  c.spec.prelude = {1, l};
  c.spec.coda = {1, l};
  c.spec.recur.block = {1, l};
  c.spec.recur.r = 2;
  c.spec.recur.inject = {Inject::linear, 0};
  c.batch = batch;
  c.seq_len = seq_len;
  c.tokens = steps * batch * seq_len;
  c.data = data.string();
  c.out = out.string();
  c.threads = 2;
  c.eval_every = steps / 2;
  c.eval_tokens = 256;
  c.peak_flops = 1e11;
  return c;
}

}  // namespace loopscale::test
