// FLOP-counting conventions. Papers disagree on what a training FLOP is; a library
// that compares architectures has to say which one it uses. The default is the iso-depth paper's.
#pragma once

#include <optional>
#include <string_view>

#include "loopscale/util/names.hpp"

namespace loopscale {

enum class Convention {
  // Schwethelm et al. 2026 / PaLM / nanochat: 6 x weights (norm scales included, embedding lookup
  // excluded, lm_head included) + 12 h q T per executed layer (attention at full T).
  paper,
  // The paper's convention with causal attention halved: 6 h q T per executed layer.
  causal,
  // Kaplan et al. 2020: C_fwd = 2 N + 2 n_layer n_ctx d_attn with N the executed matmul weights of
  // the layers (no norms, no embedding, no lm_head); train = 3 x forward.
  kaplan,
  // Hoffmann et al. 2022, appendix F: embeddings as a matmul, QKV/logits/softmax/attention-value/
  // output and dense FLOPs exactly, final logits; no norms; backward = 2 x forward.
  chinchilla,
};

constexpr auto names_of(Convention) {
  return make_names<Convention>({{Convention::paper, "paper"},
                                 {Convention::causal, "causal"},
                                 {Convention::kaplan, "kaplan"},
                                 {Convention::chinchilla, "chinchilla"}});
}
constexpr std::string_view to_string(Convention c) { return name_of(c); }
constexpr std::optional<Convention> parse_convention(std::string_view s) { return parse_name<Convention>(s); }

}  // namespace loopscale
