// Every way a model spec can be wrong, with the one sentence that says so. The same sentence reaches
// a user whichever way the spec was made: a `static_assert` when every size is known while compiling
// (static model types, arch/), a `spec_error` when something is chosen at run time (the command line,
// a sweep, a model type with dynamic sizes). static_assert needs a string literal, hence macros.
#pragma once

// ---- the model ----
#define LOOPSCALE_MSG_SIZE_NOT_GIVEN "spec: a size declared dynamic was not given a value"
#define LOOPSCALE_MSG_D_MODEL "spec: d_model must be positive"
#define LOOPSCALE_MSG_VOCAB "spec: vocab must be positive"
#define LOOPSCALE_MSG_VOCAB_MULTIPLE "spec: vocab_multiple (the padding of Vocab<V, Multiple>) must be positive"
#define LOOPSCALE_MSG_NO_LAYERS "spec: the model needs at least one layer"
// ---- the recurrence ----
#define LOOPSCALE_MSG_R "recur: r (R of Recur<Block, R>) must be at least 1"
#define LOOPSCALE_MSG_R_NEEDS_BLOCK "recur: r > 1 needs a shared block of at least one layer"
#define LOOPSCALE_MSG_BPTT "recur: bptt must be full_bptt, half_bptt or a count of recurrences between 1 and r"
#define LOOPSCALE_MSG_INJECT_NEEDED "recur: r > 1 needs an injection (Linear, Additive, Passthrough or Hyper<Lanes>)"
#define LOOPSCALE_MSG_HYPER_LANES "recur: hyperconnections (Hyper<Lanes>) need at least one lane"
#define LOOPSCALE_MSG_LANES_WITHOUT_HYPER "recur: lanes are only meaningful for hyperconnections"
#define LOOPSCALE_MSG_INJECT_KIND \
  "recur: the injection must be none, linear, additive, passthrough, hyper or hyper_shared"
#define LOOPSCALE_MSG_STATE_NORM "recur: state_norm must be per_recurrence or after_loop"
#define LOOPSCALE_MSG_HYPER_TRUNCATED                                                                    \
  "recur: the paper's hyperconnections (Hyper<Lanes>, hyper:L) need full BPTT, since the lane parameters " \
  "of a forward-only recurrence would never get a gradient; use bptt full or the shared form "            \
  "(HyperShared<Lanes>, hyper-shared:L)"
#define LOOPSCALE_MSG_HYPER_AFTER_LOOP                                                                     \
  "recur: the paper's hyperconnections (Hyper<Lanes>, hyper:L) add beta_r * norm(block output) and need " \
  "the per-recurrence state norm; use state_norm per_recurrence or the shared form (HyperShared<Lanes>, " \
  "hyper-shared:L)"
// ---- a layer ----
#define LOOPSCALE_MSG_ATTN_NEGATIVE \
  "attention: heads, head_dim and kv_heads must not be negative (0 means 'derive from d_model')"
#define LOOPSCALE_MSG_ATTN_HEADS_DIVIDE "attention: d_model must be divisible by heads"
#define LOOPSCALE_MSG_ATTN_HEAD_DIM_DIVIDE "attention: d_model must be divisible by head_dim (128 unless given)"
#define LOOPSCALE_MSG_ATTN_NO_HEAD "attention: needs at least one head"
#define LOOPSCALE_MSG_ATTN_KV_DIVIDE "attention: kv_heads must divide heads"
#define LOOPSCALE_MSG_ATTN_ROPE_ODD "attention: RoPE needs an even head_dim"
#define LOOPSCALE_MSG_MLP_HIDDEN_NEGATIVE "mlp: the hidden width must not be negative"
#define LOOPSCALE_MSG_MLP_EXPANSION "mlp: the expansion mult_num / mult_den (Mlp<Act, MultNum, MultDen>) must be positive"
#define LOOPSCALE_MSG_MLP_HIDDEN_ZERO "mlp: the hidden width must be at least 1"
#define LOOPSCALE_MSG_MOE_EXPERTS "moe: experts (E of MoE<E, K>) must be at least 1"
#define LOOPSCALE_MSG_MOE_ROUTING_WITHOUT_EXPERTS "moe: top_k and shared_expert need experts >= 1"
#define LOOPSCALE_MSG_MOE_TOPK "moe: top_k (K of MoE<E, K>) must be at least 1"
#define LOOPSCALE_MSG_MOE_TOPK_EXCEEDS "moe: top_k (K of MoE<E, K>) must not exceed experts (E); lower K or raise E"

// The list the spec's checker (spec.hpp, find_fault) and the compile-time checks (arch/model.hpp)
// expand: X(name, message).
#define LOOPSCALE_SPEC_FAULTS(X)                                     \
  X(size_not_given, LOOPSCALE_MSG_SIZE_NOT_GIVEN)                   \
  X(d_model, LOOPSCALE_MSG_D_MODEL)                                 \
  X(vocab, LOOPSCALE_MSG_VOCAB)                                     \
  X(vocab_multiple, LOOPSCALE_MSG_VOCAB_MULTIPLE)                   \
  X(no_layers, LOOPSCALE_MSG_NO_LAYERS)                             \
  X(r, LOOPSCALE_MSG_R)                                             \
  X(r_needs_block, LOOPSCALE_MSG_R_NEEDS_BLOCK)                     \
  X(bptt, LOOPSCALE_MSG_BPTT)                                       \
  X(inject_needed, LOOPSCALE_MSG_INJECT_NEEDED)                     \
  X(hyper_lanes, LOOPSCALE_MSG_HYPER_LANES)                         \
  X(lanes_without_hyper, LOOPSCALE_MSG_LANES_WITHOUT_HYPER)         \
  X(inject_kind, LOOPSCALE_MSG_INJECT_KIND)                         \
  X(state_norm, LOOPSCALE_MSG_STATE_NORM)                           \
  X(hyper_truncated, LOOPSCALE_MSG_HYPER_TRUNCATED)                 \
  X(hyper_after_loop, LOOPSCALE_MSG_HYPER_AFTER_LOOP)               \
  X(attn_negative, LOOPSCALE_MSG_ATTN_NEGATIVE)                     \
  X(attn_heads_divide, LOOPSCALE_MSG_ATTN_HEADS_DIVIDE)             \
  X(attn_head_dim_divide, LOOPSCALE_MSG_ATTN_HEAD_DIM_DIVIDE)       \
  X(attn_no_head, LOOPSCALE_MSG_ATTN_NO_HEAD)                       \
  X(attn_kv_divide, LOOPSCALE_MSG_ATTN_KV_DIVIDE)                   \
  X(attn_rope_odd, LOOPSCALE_MSG_ATTN_ROPE_ODD)                     \
  X(mlp_hidden_negative, LOOPSCALE_MSG_MLP_HIDDEN_NEGATIVE)         \
  X(mlp_expansion, LOOPSCALE_MSG_MLP_EXPANSION)                     \
  X(mlp_hidden_zero, LOOPSCALE_MSG_MLP_HIDDEN_ZERO)                 \
  X(moe_experts, LOOPSCALE_MSG_MOE_EXPERTS)                         \
  X(moe_routing_without_experts, LOOPSCALE_MSG_MOE_ROUTING_WITHOUT_EXPERTS) \
  X(moe_topk, LOOPSCALE_MSG_MOE_TOPK)                               \
  X(moe_topk_exceeds, LOOPSCALE_MSG_MOE_TOPK_EXCEEDS)

// ---- requirements between two models (arch/checks.hpp statically, account/compare.hpp at run time) ----
#define LOOPSCALE_MSG_ISO_DEPTH \
  "iso_depth: the two models differ in effective depth; make prelude + k * r + coda equal"
#define LOOPSCALE_MSG_SAME_WIDTH "same_width: the two models have different d_model; use one width"
#define LOOPSCALE_MSG_MATCHED_COMPUTE                                                                \
  "matched_compute: training FLOPs per token differ by more than the tolerance; change width, r or " \
  "the block size, or widen the tolerance"
#define LOOPSCALE_MSG_MATCHED_PARAMS                                                                    \
  "matched_params: non-embedding parameters differ by more than the tolerance; change width or the " \
  "block size, or widen the tolerance"
// ---- iso-depth families ----
#define LOOPSCALE_MSG_FAMILY_R_DIVIDES \
  "iso-depth family: r does not divide the recurrent depth (depth - prelude - coda); choose r among its divisors"
