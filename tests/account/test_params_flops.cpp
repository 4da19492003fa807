// Every count checked against values computed by hand (the arithmetic is in the comments).
#include <catch2/catch.hpp>

#include <loopscale/loopscale.hpp>

using namespace loopscale;

namespace {
// The paper's family at s = 6: d 384, three heads of 128, vocab 32064, T 2048.
using Family = IsoDepthFamily<20, 2, 2, Rs<1, 2, 4, 8>, Width<384>, Vocab<32064>>;
constexpr int64 layer = 12 * 384 * 384 + 2 * 384;  // 1,770,240
}  // namespace

TEST_CASE("dense r = 1 counts by hand", "[account]") {
  const Accounting a = account(spec_of<Family::member<1>>(), 2048);
  CHECK(layer == 1770240);
  CHECK(a.effective_depth == 20);
  CHECK(a.params.embedding == 12312576);     // 32064 * 384
  CHECK(a.params.unembedding == 12312576);
  CHECK(a.params.once == 7082112);           // 4 layers + 3 outer norms of 384
  CHECK(a.params.rec == 28323840);           // 16 layers, no injection
  CHECK(a.params.non_embedding == 35405952); // the paper's published N at s = 6
  CHECK(a.params.total == 60031104);
  CHECK(a.params.active == a.params.total);
  CHECK(a.params.unrolled == 35405952);
  // 6 (once + lm_head + rec) + 12 h q T * 20 = 6 * 47,718,528 + 188,743,680
  CHECK(a.flops_per_token.train == 475054848);
  // 2 (once + lm_head + rec) + 4 h q T * 20
  CHECK(a.flops_per_token.forward == 158351616);
}

TEST_CASE("looped r = 4 with linear injection by hand", "[account]") {
  const Accounting a = account(spec_of<Family::member<4>>(), 2048);
  CHECK(a.params.rec == 7375872);            // 4 layers + 2 * 384^2
  CHECK(a.params.non_embedding == 14457984); // the paper's published N for r = 4, s = 6
  CHECK(a.params.unrolled == 36585600);      // 7,082,112 + 4 * 7,375,872
  CHECK(a.flops_per_token.train == 482132736);
}

TEST_CASE("truncated BPTT: forward-only recurrences cost 2x weights and 4 h q T", "[account]") {
  ModelSpec m = spec_of<Family::member<4>>();
  m.recur.bptt = half_bptt;  // ceil(4 / 2) = 2 recurrences get gradients
  CHECK(bptt_recurrences(m.recur) == 2);
  // once forward: 2 * (7,082,112 + 12,312,576) + 4 * 384 * 2048 * 4 = 51,372,288
  // one recurrence forward: 2 * 7,375,872 + 4 * 384 * 2048 * 4 = 27,334,656
  // train: 3 * 51,372,288 + 3 * 2 * 27,334,656 + 2 * 27,334,656
  CHECK(count_flops(m, 2048).train == 372794112);
  CHECK(count_flops(m, 2048).forward == count_flops(spec_of<Family::member<4>>(), 2048).forward);
  m.recur.bptt = 4;
  CHECK(count_flops(m, 2048).train == 482132736);
  m.recur.bptt = 1;
  CHECK(count_flops(m, 2048).train == 3 * 51372288 + 3 * 27334656 + 3 * 27334656);
}

TEST_CASE("looped MoE counts by hand", "[account][moe]") {
  // d 256 (2 heads of 128), vocab 256, prelude 1 dense, recur 2 MoE layers x r 2 (linear), coda 1.
  // MoE: 8 experts of hidden 512, top 2, relu^2.
  using MoELayer = Layer<Attention<>, MoE<8, 2, 512>>;
  using M = Model<Width<256>, Vocab<256>, Prelude<1>, Recur<Block<Repeat<2, MoELayer>>, 2, Linear>, Coda<1>>;
  const LayerCounts lp = layer_params(MoELayer{}.spec(), 256);
  CHECK(lp.attention == 262144);  // 4 * 256^2
  CHECK(lp.ffn == 2099200);       // router 2,048 + 8 experts * 262,144
  CHECK(lp.ffn_active == 526336); // router + 2 experts
  const Accounting a = account_of<M>(256);
  CHECK(a.params.once == 1574656);        // 2 dense layers (786,944 each) + 768
  CHECK(a.params.rec == 4854784);         // 2 * 2,361,856 + 131,072
  CHECK(a.params.rec_active == 1709056);  // 2 * 788,992 + 131,072
  CHECK(a.params.non_embedding == 6429440);
  CHECK(a.params.total == 6560512);
  CHECK(a.params.active == 3414784);
  CHECK(a.params.unrolled == 11284224);
  // 6 * (once + lm_head + 2 * rec_active) + 12 * 256 * 256 * 6 executed layers
  CHECK(a.flops_per_token.train == 35068416);
}

TEST_CASE("shared expert, swiglu and grouped KV heads", "[account][moe]") {
  LayerSpec l;
  l.attn = {8, 0, 2, true, true};  // 8 heads of 64 at d 512, 2 KV heads
  l.ffn = {Activation::swiglu, 8, 3, 0, 0, 0, false};
  const LayerCounts p = layer_params(l, 512);
  CHECK(p.attention == 512 * 512 + 2 * 512 * 2 * 64 + 512 * 512);
  CHECK(ffn_hidden(l.ffn, 512) == 1365);  // 512 * 8 / 3
  CHECK(p.ffn == 3 * 512 * 1365);
  l.ffn = {Activation::relu2, 4, 1, 256, 4, 1, true};  // 4 experts of 256, top 1, shared expert
  const LayerCounts q = layer_params(l, 512);
  CHECK(q.ffn == 512 * 4 + 4 * 2 * 512 * 256 + 2 * 512 * 256);
  CHECK(q.ffn_active == 512 * 4 + 1 * 2 * 512 * 256 + 2 * 512 * 256);
}

TEST_CASE("injection parameters", "[account]") {
  CHECK(inject_params({Inject::linear, 0}, 384) == 2 * 384 * 384);
  CHECK(inject_params({Inject::additive, 0}, 384) == 0);
  CHECK(inject_params({Inject::passthrough, 0}, 384) == 0);
  CHECK(inject_params({Inject::hyper, 4}, 384) == 16 + 8);
  CHECK(inject_params({Inject::none, 0}, 384) == 0);
}

TEST_CASE("conventions by hand", "[account][conventions]") {
  // One layer, d 128 (one head of 128), hidden 512, vocab 256, T 64.
  using M = Model<Width<128>, Vocab<256>, Prelude<1>, NoRecur>;
  // Chinchilla: embeddings 65,536; QKV 98,304; logits 16,384; softmax 192; values 16,384;
  // output 32,768; dense 262,144; final logits 65,536 -> forward 557,248; train 3x.
  CHECK(account_of<M>(64, Convention::chinchilla).flops_per_token.forward == 557248);
  CHECK(account_of<M>(64, Convention::chinchilla).flops_per_token.train == 1671744);
  // Kaplan: 2 N + 2 n_layer n_ctx d_attn with N = 12 d^2 = 196,608 -> 393,216 + 16,384.
  CHECK(account_of<M>(64, Convention::kaplan).flops_per_token.forward == 409600);
  // Paper: 2 (layer 196,864 + 3 * 128 norms + lm_head 32,768) + 4 * 128 * 64
  CHECK(account_of<M>(64, Convention::paper).flops_per_token.forward == 2 * (196864 + 384 + 32768) + 32768);
  // Causal: attention halved.
  CHECK(account_of<M>(64, Convention::causal).flops_per_token.forward == 2 * (196864 + 384 + 32768) + 16384);
  // Hyperconnection lane arithmetic is counted exactly only by the Chinchilla convention.
  ModelSpec h = spec_of<IsoDepthFamily<4, 1, 1, Rs<2>, Width<128>, Vocab<256>, Hyper<4>>::member<2>>();
  const int64 lanes = 2 * 4 * 128 + 2 * 16 * 128 + 2 * 4 * 128;
  ModelSpec p = h;
  p.recur.inject = {Inject::passthrough, 0};
  CHECK(count_flops(h, 64, Convention::chinchilla).forward - count_flops(p, 64, Convention::chinchilla).forward == 2 * lanes);
  CHECK(count_flops(h, 64).forward - count_flops(p, 64).forward == 2 * 2 * 24);
}

TEST_CASE("parse and print conventions", "[account][conventions]") {
  for (Convention c : {Convention::paper, Convention::causal, Convention::kaplan, Convention::chinchilla})
    CHECK(parse_convention(to_string(c)) == c);
  CHECK_FALSE(parse_convention("6nd").has_value());
}

TEST_CASE("mixed stack: dense and MoE layers alternating in the shared block, by hand", "[account][moe]") {
  // The mixed-moe preset's family at d = 12 (heads of 4), vocab 256, r = 2: prelude 1 dense, block
  // of 4 layers dense, MoE(4 experts, top 1), dense, MoE, run twice (linear injection), coda 1 dense.
  const ModelSpec m = family_member(
      [] {
        FamilySpec f;
        f.depth = 10, f.prelude = 1, f.coda = 1, f.vocab = 256;
        f.layer.attn.head_dim = 4;
        f.moe = {Activation::relu2, 4, 1, 0, 4, 1, false};
        f.placement = {MoeScope::recur, 2, 1};
        return f;
      }(),
      2, 12);
  REQUIRE(m.recur.block.size() == 4);
  CHECK(!m.recur.block[0].ffn.moe());
  CHECK(m.recur.block[1].ffn.experts == 4);
  CHECK(!m.recur.block[2].ffn.moe());
  CHECK(m.recur.block[3].ffn.experts == 4);
  // Dense layer: attention 4 * 144 = 576, MLP 2 * 12 * 48 = 1,152, norms 24: 1,752.
  // MoE layer: attention 576, router 48, 4 experts * 1,152 = 4,608, norms 24: 5,256; active
  // (router + 1 expert) 576 + 48 + 1,152 + 24 = 1,800.
  const ParamCounts p = count_params(m);
  CHECK(p.once == 2 * 1752 + 3 * 12);                 // 3,540
  CHECK(p.rec == 2 * 1752 + 2 * 5256 + 2 * 144);      // 14,304 with the 2 d^2 injection
  CHECK(p.rec_active == 2 * 1752 + 2 * 1800 + 288);   // 7,392
  CHECK(p.non_embedding == 17844);
  CHECK(p.unrolled == 3540 + 2 * 14304);
  CHECK(p.embedding == 256 * 12);
  // Paper FLOPs at T = 64: 6 (once + lm_head + 2 rec_active) + 12 h q T * 10 executed layers.
  CHECK(count_flops(m, 64).train == 6 * (3540 + 256 * 12 + 2 * 7392) + 12 * 12 * 64 * 10);
  // Truncated to the last recurrence: the first one costs a forward pass only.
  ModelSpec t = m;
  t.recur.bptt = 1;
  CHECK(count_flops(t, 64).train == 6 * (3540 + 256 * 12 + 7392) + 2 * 7392 + (12 * 6 + 4 * 4) * 12 * 64);
}

TEST_CASE("mixed stack: the memory plan keeps one scratch set per distinct block layer", "[account][memory]") {
  FamilySpec f;
  f.depth = 10, f.prelude = 1, f.coda = 1, f.vocab = 256;
  f.layer.attn.head_dim = 4;
  f.moe = {Activation::relu2, 4, 1, 0, 4, 1, false};
  f.placement = {MoeScope::recur, 2, 1};
  f.bptt = 1;
  const ModelSpec mixed = family_member(f, 2, 12);
  const LayerActivations dense = layer_activations(mixed.recur.block[0], 12, 64);
  const LayerActivations moe = layer_activations(mixed.recur.block[1], 12, 64);
  const ActivationPlan p = activation_plan(mixed, 64);
  CHECK(p.forward_only == 1);
  CHECK(p.scratch == dense.total() + moe.total() + 12);  // one dense and one MoE layer's worth, plus u
  CHECK(p.layers == 2 * dense.total() + (2 * dense.total() + 2 * moe.total()));
  CHECK(p.index == 2 * moe.index + moe.index);  // the kept recurrence's two MoE layers, the scratch's one
}
