// Where the injection counts: the split of a looped model's non-embedding parameters into the
// N_once and N_rec (N_act and N_loop) that the looped laws read.
//
// The injection (linear: 2 d^2, u = W [e ; s]) runs once per recurrence, so its FLOPs are counted r
// times in every convention of account/flops.hpp. Its parameters are stored once. Which side of
// the law's N_once + r^phi N_rec they sit on is a convention, and the iso-depth paper uses two:
//
//   rec       N_once = prelude + coda + outer norms, N_rec = shared block + injection.
//             loopscale's ParamCounts (once, rec) and the paper's code: nanochat/gpt.py's
//             effective_params returns once + r * (recur_block + inject), the unrolled count with the
//             injection counted with the reused parameters (and estimate_flops weights the injection
//             like the block, 6 r per weight). At d 2048, r 4 and phi 0.459: dense equivalent
//             N_once + r^phi N_rec = 597.6M, unrolled 1.040B.
//   once      the injection with the once-run parameters: N_once + injection, N_rec = shared block.
//             590.2M and 1.015B at the same model.
//   excluded  the injection in neither: N_once = prelude + coda + outer norms, N_rec = shared block,
//             N_once + N_rec = N - injection. The only one of the three that reproduces the paper's
//             example "410M at r = 4 ~ 580M dense ~ the cost of 1B" to 1%: 581.8M and 1.007B
//             (the 410M is the model's stored N, 411.1M, which does count the injection).
//
// None of the three reproduces the paper's published per-width columns N_once and n_block
// (tests/data/isodepth_project_page.json): those are a least-squares line through the family's N at
// r = 1, 2, 4, 8 (regress_once_block below), which spreads the injection (absent at r = 1, 2 d^2
// at r > 1) over both columns.
#pragma once

#include <span>
#include <vector>

#include "loopscale/account/params.hpp"
#include "loopscale/spec/family.hpp"
#include "loopscale/util/names.hpp"

namespace loopscale {

enum class InjectionCount { rec, once, excluded };

constexpr auto names_of(InjectionCount) {
  return make_names<InjectionCount>(
      {{InjectionCount::rec, "rec"}, {InjectionCount::once, "once"}, {InjectionCount::excluded, "excluded"}});
}

// The counts a looped law reads, under one convention. Stored parameters do not depend on it:
// ParamCounts::non_embedding is what the model holds, with the injection.
struct LoopedSplit {
  InjectionCount injection = InjectionCount::rec;
  int64 once = 0;         // N_once
  int64 rec = 0;          // N_rec
  int64 once_active = 0;  // N_act = once_active + rec_active (looped MoE)
  int64 rec_active = 0;   // N_loop
  constexpr int64 counted() const { return once + rec; }                // N_once + N_rec
  constexpr int64 unrolled(int64 r) const { return once + r * rec; }    // cost-equivalent dense size
  constexpr int64 n_act() const { return once_active + rec_active; }
};

constexpr LoopedSplit split_params(const ParamCounts& p, InjectionCount c) {
  LoopedSplit s{c, p.once, p.rec, p.once_active, p.rec_active};
  if (c == InjectionCount::rec) return s;
  s.rec -= p.inject;
  s.rec_active -= p.inject;
  if (c == InjectionCount::once) {
    s.once += p.inject;
    s.once_active += p.inject;
  }
  return s;
}

// N_once and N_rec of a run recorded under convention `from` (with its injection count), under `to`.
struct SplitPair {
  double once = 0, rec = 0;
};
constexpr SplitPair convert_split(double once, double rec, double inject, InjectionCount from, InjectionCount to) {
  // Back to rec first: the injection returns to the shared block.
  if (from == InjectionCount::once) once -= inject;
  if (from != InjectionCount::rec) rec += inject;
  if (to == InjectionCount::once) once += inject;
  if (to != InjectionCount::rec) rec -= inject;
  return {once, rec};
}

// The iso-depth paper's published per-width columns: at a width d, the least-squares line
// N(r) = n_once + k(r) n_block through the stored N of the family's members at the given r, with
// k(r) = (depth - prelude - coda) / r the layers of the shared block. With r = 1, 2, 4, 8 and the
// paper's family this reproduces width_tables.*.log_N_once and log_n_block to 1e-13 relative
// (tests/account/test_paper_tables.cpp). In closed form for that grid (x = 16 / r = 16, 8, 4, 2;
// injection 2 d^2 at r > 1, none at r = 1): the injection's indicator regressed on x has slope
// -17/230 and intercept 30/23, so
//   n_block = layer - (17/115) d^2      (12 d^2 + 2 d of a layer; ratio 0.98768 at every width)
//   n_once  = once + (60/23) d^2        (48 d^2 + 11 d;           ratio 1.05432)
// and n_once + k n_block misses N by the line's residuals: +0.10% at r = 1, -0.39% at r = 2,
// +0.02% at r = 4, +0.42% at r = 8.
struct OnceBlockLine {
  double n_once = 0;   // intercept
  double n_block = 0;  // slope: parameters per layer of the shared block
};

inline OnceBlockLine regress_once_block(const FamilySpec& f, int64 d_model, std::span<const int64> rs) {
  // The line is over the block sizes k = (depth - prelude - coda) / r of one prelude and coda; a
  // flat r = 1 member has neither, and would bend it.
  if (f.r1_layout == R1Layout::flat) throw spec_error("regress_once_block: needs a family whose r = 1 member is split (prelude + k + coda)");
  std::vector<double> xs, ys;
  for (const int64 r : rs) {
    const ModelSpec m = family_member(f, r, d_model);
    xs.push_back(static_cast<double>(m.recur.block.layers.size()));
    ys.push_back(static_cast<double>(count_params(m).non_embedding));
  }
  const auto n = static_cast<double>(xs.size());
  double mx = 0, my = 0;
  for (std::size_t i = 0; i < xs.size(); ++i) mx += xs[i] / n, my += ys[i] / n;
  double sxx = 0, sxy = 0;
  for (std::size_t i = 0; i < xs.size(); ++i) sxx += (xs[i] - mx) * (xs[i] - mx), sxy += (xs[i] - mx) * (ys[i] - my);
  if (!(sxx > 0)) throw spec_error("regress_once_block: needs at least two recurrence counts with different block sizes");
  const double slope = sxy / sxx;
  return {my - slope * mx, slope};
}

}  // namespace loopscale
