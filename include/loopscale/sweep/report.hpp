// The report of a sweep folder: DIR/report.md (runs, iso-FLOP minima, per-r and joint fits, phi
// with its interval, R^2 and RMSE), DIR/analysis.json (the same numbers for programs, read by
// `sweep compare`), DIR/runs.csv (a flat table `loopscale fit` reads) and three plots rendered by
// gnuplot into DIR/plots/: iso-FLOP curves per r with the fitted joint law, the loss-compute
// frontier per r, and the bootstrap distribution of phi. Each plot's data and gnuplot script stay
// next to the PNG, so a figure can be restyled without refitting.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include <fmt/format.h>

#include "loopscale/sweep/analyse.hpp"
#include "loopscale/sweep/merge.hpp"
#include "loopscale/sweep/run.hpp"

namespace loopscale::sweep {

// The counts of an (r, d) point of the family for smooth law curves: heads = 1 so any even d is a
// valid spec. Parameters and FLOPs depend on h q = d only, so the counts equal the sweep's own.
// experts > 0: the MoE member with E experts (its expert hidden width follows d as the sweep's does).
inline Accounting curve_point(const SweepSpec& s, int64 r, int64 d, int64 experts = 0) {
  ModelSpec m = model_of(s, r, 1, experts);
  m.d_model = d;
  for (StackSpec* st : {&m.prelude, &m.recur.block, &m.coda}) {
    st->layer.attn.heads = 1, st->layer.attn.head_dim = 0;
    if (st->layer.ffn.experts > 0) st->layer.ffn.hidden = std::max<int64>(1, std::llround(s.expert_ff * static_cast<double>(d)));
  }
  return account(m, s.seq_len);
}

// The runs the iso-depth analysis (phi, iso-FLOP cells) reads. A dense sweep: all of them. An MoE
// sweep: the runs of its smallest expert count only (E = 1, a routed dense MLP, when swept), since
// the joint law of iso-depth has no term for E; the looped-MoE law is fitted on all runs with
// `loopscale fit --law looped-moe --data DIR/runs.csv`.
inline std::vector<RunResult> iso_depth_runs(const SweepSpec& spec, const std::vector<RunResult>& results, int64* experts = nullptr) {
  if (!spec.moe() || results.empty()) return results;
  int64 e = results.front().experts;
  for (const RunResult& r : results) e = std::min(e, r.experts);
  if (experts) *experts = e;
  std::vector<RunResult> out;
  for (const RunResult& r : results)
    if (r.experts == e) out.push_back(r);
  return out;
}

// The joint law's loss at (N_once, N_rec, r, D) with the fitted values.
inline double joint_loss(const law::FitResult& f, double n_once, double n_rec, double r, double d) {
  return f.value("E") + f.value("A") * std::pow(n_once + std::pow(r, f.value("phi")) * n_rec, -f.value("alpha")) +
         f.value("B") * std::pow(d, -f.value("beta"));
}

struct ReportOptions {
  AnalyseOptions analyse{};
  bool plots = true;
  std::string gnuplot = "gnuplot";
};

struct ReportFiles {
  fs::path markdown, json, csv;
  std::vector<fs::path> plots;
  std::string plot_problem;  // why no plots were rendered (empty: rendered)
  Analysis analysis;
};

namespace detail {

inline std::string g3(double v) { return fmt::format("{:.4g}", v); }
inline std::string sci(double v) { return fmt::format("{:.3e}", v); }

inline std::string fit_row(const law::FitResult& f) {
  return fmt::format("{} | {} | {} | {} | {} | {:.4f} | {:.4f}", g3(f.value("E")), g3(f.value("A")), g3(f.value("alpha")),
                     g3(f.value("B")), g3(f.value("beta")), f.r2, f.rmse);
}

inline bool has_cairo(const std::string& gnuplot) {
  const std::string cmd = gnuplot + " -e 'set terminal pngcairo' > /dev/null 2>&1";
  return std::system(cmd.c_str()) == 0;
}

inline const char* color(std::size_t i) {
  static const char* c[] = {"#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#66a61e", "#e6ab02", "#a6761d", "#666666"};
  return c[i % 8];
}

}  // namespace detail

// Writes the data and gnuplot scripts of the three plots and renders them.
inline std::vector<fs::path> write_plots(const fs::path& dir, const SweepSpec& spec, const Analysis& a, const std::string& gnuplot,
                                         std::string& problem) {
  const fs::path pd = dir / "plots";
  fs::create_directories(pd);
  const bool cairo = detail::has_cairo(gnuplot);
  const std::string term = cairo ? "set terminal pngcairo size 1200,900 enhanced font 'DejaVu Sans,11'"
                                 : "set terminal png size 1200,900";
  std::vector<int64> rs;
  std::vector<double> budgets;
  for (const auto& f : a.per_r) rs.push_back(f.r);
  for (const auto& c : a.cells)
    if (std::find(budgets.begin(), budgets.end(), c.budget) == budgets.end()) budgets.push_back(c.budget);
  std::sort(budgets.begin(), budgets.end());
  std::vector<fs::path> scripts;

  {  // 1. iso-FLOP curves: one panel per r, one colour per budget; points = runs, lines = joint law.
    std::ofstream gp(pd / "isoflop.gp");
    gp << term << "\nset output '" << (pd / "isoflop.png").string() << "'\n";
    const int cols = rs.size() > 1 ? 2 : 1, rows = static_cast<int>((rs.size() + 1) / 2);
    gp << fmt::format("set multiplot layout {},{} title 'iso-FLOP curves of sweep {}: runs (points){}' font ',13'\n", rows, cols,
                      spec.name, a.joint ? " and the fitted joint law (lines)" : "");
    gp << "set logscale x\nset grid\nset xlabel 'non-embedding parameters N (stored)'\nset ylabel 'validation loss (nats/token)'\n"
          "set key top right font ',9'\nset format x '%.0s%c'\n";
    for (int64 r : rs) {
      const std::string pts = fmt::format("isoflop_r{}.dat", r), law = fmt::format("isoflop_law_r{}.dat", r);
      std::ofstream dp(pd / pts), dl(pd / law);
      std::vector<double> used;
      for (double c : budgets) {
        std::vector<const RunResult*> cell;
        for (const auto& run : a.runs)
          if (run.r == r && run.budget == c) cell.push_back(&run);
        if (cell.empty()) continue;
        used.push_back(c);
        dp << "# C = " << budget_label(c) << "\n";
        int64 dmin = cell.front()->d_model, dmax = dmin;
        for (const auto* run : cell) {
          dp << run->n << " " << run->loss << "\n";
          dmin = std::min(dmin, run->d_model), dmax = std::max(dmax, run->d_model);
        }
        dp << "\n\n";
        dl << "# C = " << budget_label(c) << "\n";
        if (a.joint) {
          const int64 lo = std::max<int64>(2, dmin * 3 / 4 / 2 * 2), hi = dmax * 5 / 4 / 2 * 2;
          for (int64 d = lo; d <= hi; d += std::max<int64>(2, (hi - lo) / 80 / 2 * 2)) {
            const Accounting acc = curve_point(spec, r, d, a.runs.front().experts);
            const double f = static_cast<double>(acc.flops_per_token.train);
            dl << acc.params.non_embedding << " "
               << joint_loss(a.joint->fit, static_cast<double>(acc.params.once), static_cast<double>(acc.params.rec),
                             static_cast<double>(r), c / f)
               << "\n";
          }
        }
        dl << "\n\n";
      }
      gp << fmt::format("set title 'r = {}'\nplot ", r);
      for (std::size_t i = 0; i < used.size(); ++i) {
        const std::size_t ci = static_cast<std::size_t>(std::find(budgets.begin(), budgets.end(), used[i]) - budgets.begin());
        gp << fmt::format("'{}' index {} with points pt 7 ps 1.3 lc rgb '{}' title 'C = {}', ", (pd / pts).string(), i,
                          detail::color(ci), budget_label(used[i]));
        if (a.joint) gp << fmt::format("'{}' index {} with lines lw 2 lc rgb '{}' notitle, ", (pd / law).string(), i, detail::color(ci));
      }
      gp << "1/0 notitle\n";
    }
    gp << "unset multiplot\n";
    scripts.push_back(pd / "isoflop.gp");
  }

  {  // 2. loss-compute frontier per r: cell minima (points) and the joint law's minimum over N (lines).
    std::ofstream gp(pd / "frontier.gp");
    gp << term << "\nset output '" << (pd / "frontier.png").string() << "'\n";
    gp << fmt::format("set title 'compute frontier of sweep {}: iso-FLOP minima (points){}'\n", spec.name,
                      a.joint ? ", joint law minimised over width (lines)" : "");
    gp << "set logscale x\nset grid\nset xlabel 'training compute C (FLOPs)'\nset ylabel 'validation loss at the optimal width (nats/token)'\n"
          "set key top right\nset format x '10^{%L}'\n";
    std::string plot = "plot ";
    for (std::size_t i = 0; i < rs.size(); ++i) {
      const int64 r = rs[i];
      const std::string pts = fmt::format("frontier_r{}.dat", r), law = fmt::format("frontier_law_r{}.dat", r);
      std::ofstream dp(pd / pts), dl(pd / law);
      bool any = false;
      for (const auto& c : a.cells)
        if (c.r == r && c.ok) dp << c.budget << " " << c.loss_opt << "\n", any = true;
      if (any) plot += fmt::format("'{}' with points pt 7 ps 1.5 lc rgb '{}' title 'r = {} minima', ", (pd / pts).string(), detail::color(i), r);
      if (a.joint && !budgets.empty()) {
        int64 dmax = 0;
        for (const auto& run : a.runs) dmax = std::max(dmax, run.d_model);
        const double c0 = budgets.front() / 2, c1 = budgets.back() * 2;
        for (int k = 0; k <= 60; ++k) {
          const double c = c0 * std::pow(c1 / c0, k / 60.0);
          double best = std::numeric_limits<double>::infinity();
          for (int64 d = 8; d <= 4 * dmax; d += std::max<int64>(2, dmax / 200 * 2)) {
            const Accounting acc = curve_point(spec, r, d, a.runs.front().experts);
            best = std::min(best, joint_loss(a.joint->fit, static_cast<double>(acc.params.once), static_cast<double>(acc.params.rec),
                                             static_cast<double>(r), c / static_cast<double>(acc.flops_per_token.train)));
          }
          dl << c << " " << best << "\n";
        }
        plot += fmt::format("'{}' with lines lw 2 lc rgb '{}' title 'r = {} joint law', ", (pd / law).string(), detail::color(i), r);
      }
    }
    gp << plot << "1/0 notitle\n";
    scripts.push_back(pd / "frontier.gp");
  }

  if (a.joint && !a.joint->boot_phi.empty()) {  // 3. bootstrap distribution of phi
    const JointFit& j = *a.joint;
    std::ofstream dp(pd / "phi_bootstrap.dat");
    for (double v : j.boot_phi) dp << v << "\n";
    const double lo = *std::min_element(j.boot_phi.begin(), j.boot_phi.end());
    const double hi = *std::max_element(j.boot_phi.begin(), j.boot_phi.end());
    const double width = std::max((hi - lo) / 30, 1e-4);
    const double phi = j.fit.value("phi");
    std::ofstream gp(pd / "phi_bootstrap.gp");
    gp << term << "\nset output '" << (pd / "phi_bootstrap.png").string() << "'\n";
    gp << fmt::format("set title 'block bootstrap of phi, sweep {}: {} resamples of {} (C, r) cells'\n", spec.name, j.boot_phi.size(), j.cells);
    gp << "set xlabel 'phi (value of one recurrence: 0 = nothing, 1 = a full copy of the block)'\nset ylabel 'resamples'\nset grid\n"
          "set style fill solid 0.6 border -1\nset key top left\n";
    gp << fmt::format("bw = {}\nbin(x) = bw * floor(x / bw) + bw / 2\nset boxwidth bw absolute\n", width);
    gp << fmt::format("set arrow 1 from {0},graph 0 to {0},graph 1 nohead lw 3 lc rgb '#d95f02'\n", phi);
    gp << fmt::format("set arrow 2 from {0},graph 0 to {0},graph 1 nohead lw 2 dt 2 lc rgb '#333333'\n", j.phi_lo);
    gp << fmt::format("set arrow 3 from {0},graph 0 to {0},graph 1 nohead lw 2 dt 2 lc rgb '#333333'\n", j.phi_hi);
    gp << fmt::format("plot '{}' using (bin($1)):(1.0) smooth frequency with boxes lc rgb '#7570b3' title 'resampled phi', "
                      "NaN with lines lw 3 lc rgb '#d95f02' title 'fit: phi = {:.3f}', "
                      "NaN with lines lw 2 dt 2 lc rgb '#333333' title '{:.0f}% interval [{:.3f}, {:.3f}]'\n",
                      (pd / "phi_bootstrap.dat").string(), phi, 100 * j.level, j.phi_lo, j.phi_hi);
    scripts.push_back(pd / "phi_bootstrap.gp");
  }

  std::vector<fs::path> pngs;
  for (const auto& s : scripts) {
    const std::string cmd = gnuplot + " '" + s.string() + "' > '" + s.string() + ".log' 2>&1";
    if (std::system(cmd.c_str()) != 0) {
      problem = fmt::format("gnuplot failed on {} (see {}.log); is gnuplot installed (scripts/setup.sh)?", s.string(), s.string());
      continue;
    }
    pngs.push_back(fs::path(s).replace_extension(".png"));
  }
  return pngs;
}

inline std::string runs_csv(const Analysis& a) {
  std::string s = "id,C,r,s,d_model,N_once,N_rec,N,N_unrolled,F,D,loss\n";
  for (const auto& r : a.runs)
    s += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{}\n", r.id, r.budget, r.r, r.s, r.d_model, r.n_once, r.n_rec, r.n, r.n_unrolled,
                     r.flops_per_token, r.tokens, r.loss);
  return s;
}

// An MoE sweep's runs.csv: every run (all E), with the looped-MoE law's columns (plan.hpp,
// moe_columns), ordered by C, E, r, N.
inline std::string moe_runs_csv(std::vector<RunResult> runs) {
  std::sort(runs.begin(), runs.end(), [](const RunResult& x, const RunResult& y) {
    return std::tie(x.budget, x.experts, x.r, x.n) < std::tie(y.budget, y.experts, y.r, y.n);
  });
  std::string s = "id,C,E,K,r,R,s,d_model,N_once,N_rec,N,N_unrolled,N_act,N_loop,N_total,m,F,D,loss\n";
  for (const auto& r : runs)
    s += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n", r.id, r.budget, r.experts, r.top_k, r.r, r.r, r.s,
                     r.d_model, r.n_once, r.n_rec, r.n, r.n_unrolled, r.n_act, r.n_loop, r.n_total, r.m, r.flops_per_token, r.tokens,
                     r.loss);
  return s;
}

// The section of an MoE sweep's report: what was analysed above, and every run of every E.
inline std::string moe_markdown(const SweepSpec& spec, const std::vector<RunResult>& all, int64 analysed_e) {
  using detail::sci;
  std::string m = "## Mixture of experts\n\n";
  m += fmt::format("Expert counts E in {{");
  for (std::size_t i = 0; i < spec.experts.size(); ++i) m += (i ? ", " : "") + std::to_string(spec.experts[i]);
  m += fmt::format("}}, top-{} routing, expert hidden {} d{}, MoE FFNs in {} layers. ", spec.top_k, spec.expert_ff,
                   spec.shared_expert ? " plus a shared expert" : "", spec.moe_layers == "all" ? "all" : "the recurrent block's");
  m += fmt::format("**The iso-depth analysis above (phi, iso-FLOP minima, per-r fits) covers the E = {} runs only**; its law has "
                   "no term for E. Fit the looped-MoE law (Chen et al., REFERENCE s.2) on every run with\n\n"
                   "    loopscale fit --law looped-moe --data runs.csv\n\n"
                   "(runs.csv holds N_act, N_loop, N_total, m, R, E, K, D and loss by the law's names; see docs/sweeps.md for the "
                   "parameters worth freezing on a small sweep).\n\n",
                   analysed_e);
  std::vector<RunResult> runs = all;
  std::sort(runs.begin(), runs.end(), [](const RunResult& x, const RunResult& y) {
    return std::tie(x.experts, x.r, x.budget, x.n) < std::tie(y.experts, y.r, y.budget, y.n);
  });
  m += "| id | E | R | d | N_act | N_loop | N_total | m | D | loss |\n|---|---|---|---|---|---|---|---|---|---|\n";
  for (const RunResult& r : runs)
    m += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {:.3f} | {} | {:.4f} |\n", r.id, r.experts, r.r, r.d_model, sci(r.n_act),
                     sci(r.n_loop), sci(r.n_total), r.m, sci(r.tokens), r.loss);
  return m + "\n";
}

inline std::string report_markdown(const SweepSpec& spec, const Plan& plan, const Analysis& a, const std::vector<std::string>& missing,
                                   const std::vector<fs::path>& plots, const std::string& plot_problem, const fs::path& dir,
                                   std::size_t finished = 0 /* 0: a.runs.size() */) {
  using detail::g3;
  std::string m;
  m += fmt::format("# Sweep report: {}\n\n", spec.name);
  m += fmt::format("Iso-depth family: effective depth {} = {} + k r + {}, r in {{", spec.depth, spec.prelude, spec.coda);
  for (std::size_t i = 0; i < spec.r.size(); ++i) m += (i ? ", " : "") + std::to_string(spec.r[i]);
  m += fmt::format("}}, {} injection, {} BPTT; vocab {}, context {}, {} tokens per step. Spec fingerprint `{}`.\n\n", spec.inject,
                   spec.bptt, spec.vocab, spec.seq_len, spec.batch_tokens, plan.fingerprint);
  m += fmt::format("**{} of {} planned runs finished** ({} runnable).", finished ? finished : a.runs.size(), plan.runs.size(),
                   plan.runnable());
  if (!missing.empty()) {
    m += " Not finished:";
    for (const auto& id : missing) m += " `" + id + "`";
    m += ".";
  }
  m += "\n\n";

  m += "## phi: what one recurrence is worth\n\n";
  if (a.joint) {
    const JointFit& j = *a.joint;
    m += fmt::format("Joint law L = E + A (N_once + r^phi N_rec)^-alpha + B D^-beta over all {} runs:\n\n", j.fit.points);
    if (!j.boot_phi.empty())
      m += fmt::format("**phi = {:.3f}, {:.0f}% interval [{:.3f}, {:.3f}]** (block bootstrap: {} resamples of the {} (C, r) cells, {} failed).\n\n",
                       j.fit.value("phi"), 100 * j.level, j.phi_lo, j.phi_hi, j.boot_phi.size(), j.cells, j.boot_failed);
    else
      m += fmt::format("**phi = {:.3f}** (no bootstrap interval: run with --bootstrap N).\n\n", j.fit.value("phi"));
    m += "| fit | E | A | alpha | B | beta | phi | R^2 | RMSE |\n|---|---|---|---|---|---|---|---|---|\n";
    const auto row = [&](const char* name, const law::FitResult& f) {
      m += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {:.4f} | {:.4f} |\n", name, g3(f.value("E")), g3(f.value("A")),
                       g3(f.value("alpha")), g3(f.value("B")), g3(f.value("beta")), g3(f.value("phi")), f.r2, f.rmse);
    };
    row("joint, phi free", j.fit);
    row("restricted phi = 0 (shared block counted once)", j.phi0);
    row("restricted phi = 1 (unrolled, every recurrence a full copy)", j.phi1);
    m += "\nFitted as in the paper: Huber (delta 1e-3) on log L, L-BFGS-B from random starts in the paper's box "
         "(law/huber_fit.hpp). The paper's own sweep (116 runs, 32k vocabulary, FineWeb-Edu) found phi = 0.459, "
         "95% interval [0.41, 0.53], R^2 0.9972; phi = 0 gave R^2 0.9858 and phi = 1 R^2 0.9552.\n\n";
  } else {
    m += "No joint fit: " + a.joint_problem + ".\n\n";
  }

  m += "## Per-architecture Chinchilla fits and compute-optimal exponents\n\n";
  m += "L = E + A N^-alpha + B D^-beta per r, N = stored non-embedding parameters. N_opt ~ C^a and D_opt ~ C^b: "
       "from the law, a = beta / (alpha + beta) and b = alpha / (alpha + beta); from the iso-FLOP minima, the slopes of "
       "log N* and log D* against log C.\n\n";
  m += "| r | runs | E | A | alpha | B | beta | R^2 | RMSE | a (law) | b (law) | a (minima) | b (minima) |\n"
       "|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const ArchFit& f : a.per_r) {
    const std::string am = f.a_minima ? fmt::format("{:.3f}", *f.a_minima) : "-", bm = f.b_minima ? fmt::format("{:.3f}", *f.b_minima) : "-";
    if (f.fit)
      m += fmt::format("| {} | {} | {} | {:.3f} | {:.3f} | {} | {} |\n", f.r, f.points, detail::fit_row(*f.fit), f.a_law, f.b_law, am, bm);
    else
      m += fmt::format("| {} | {} | {} | | | | | | | | | {} | {} |\n", f.r, f.points, f.problem, am, bm);
  }

  m += "\n## Iso-FLOP minima per (C, r) cell\n\nA parabola in ln N through each cell's runs; its vertex is the "
       "compute-optimal N* (D* from a line through ln D against ln N).\n\n";
  m += "| C | r | runs | N* | D* | loss at N* | note |\n|---|---|---|---|---|---|---|\n";
  for (const Cell& c : a.cells) {
    if (c.ok)
      m += fmt::format("| {} | {} | {} | {} | {} | {:.4f} | {} |\n", budget_label(c.budget), c.r, c.rows.size(), detail::sci(c.n_opt),
                       detail::sci(c.d_opt), c.loss_opt, c.extrapolated ? "vertex outside the widths tried" : "");
    else
      m += fmt::format("| {} | {} | {} | | | | {} |\n", budget_label(c.budget), c.r, c.rows.size(), c.problem);
  }

  m += "\n## Plots\n\n";
  for (const auto& p : plots) m += fmt::format("![{}]({})\n\n", p.stem().string(), fs::relative(p, dir).string());
  if (!plot_problem.empty()) m += "Plots: " + plot_problem + "\n\n";

  m += "## Runs\n\n| id | C | r | d | N_once | N_rec | N | D | loss | joint law | residual |\n|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (std::size_t i = 0; i < a.runs.size(); ++i) {
    const RunResult& r = a.runs[i];
    std::string pred = "", res = "";
    if (a.joint) {
      const double p = joint_loss(a.joint->fit, r.n_once, r.n_rec, static_cast<double>(r.r), r.tokens);
      pred = fmt::format("{:.4f}", p);
      res = fmt::format("{:+.4f}", r.loss - p);
    }
    m += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} | {:.4f} | {} | {} |\n", r.id, budget_label(r.budget), r.r, r.d_model,
                     detail::sci(r.n_once), detail::sci(r.n_rec), detail::sci(r.n), detail::sci(r.tokens), r.loss, pred, res);
  }
  m += "\nFiles: `results.jsonl` (one line per run), `runs.csv` (the same, flat, for `loopscale fit`), `analysis.json`.\n";
  return m;
}

// Reads DIR (sweep.json and results.jsonl, or the shard results when there is no merged file),
// analyses and writes the report.
inline ReportFiles write_report(const fs::path& dir, const ReportOptions& opt) {
  const SweepSpec spec = folder_spec(dir);
  const Plan plan = make_plan(spec);
  std::vector<RunResult> results;
  if (fs::exists(dir / "results.jsonl")) {
    results = read_results(dir / "results.jsonl");
  } else {
    for (const auto& f : results_files(dir)) {
      auto more = read_results(f);
      results.insert(results.end(), more.begin(), more.end());
    }
  }
  results_by_id(results, dir.string());  // duplicates are an error
  for (const auto& r : results)
    if (r.sweep != plan.fingerprint) throw sweep_error(fmt::format("{}: run {} is from another sweep ({})", dir.string(), r.id, r.sweep));
  if (results.empty()) throw sweep_error(dir.string() + " has no finished runs yet");
  std::vector<std::string> missing;
  for (const auto& r : plan.runs)
    if (r.runnable() && std::none_of(results.begin(), results.end(), [&](const RunResult& x) { return x.id == r.id; })) missing.push_back(r.id);

  ReportFiles out;
  int64 analysed_e = 0;
  out.analysis = analyse(iso_depth_runs(spec, results, &analysed_e), opt.analyse);
  nlohmann::json j = analysis_json(out.analysis);
  j["sweep"] = spec.name;
  j["fingerprint"] = plan.fingerprint;
  j["missing"] = missing;
  if (spec.moe()) j["iso_depth_experts"] = analysed_e;  // the E whose runs the analysis read
  out.json = dir / "analysis.json";
  write_file_atomic(out.json, j.dump(2) + "\n");
  out.csv = dir / "runs.csv";
  write_file_atomic(out.csv, spec.moe() ? moe_runs_csv(results) : runs_csv(out.analysis));
  if (opt.plots) out.plots = write_plots(dir, spec, out.analysis, opt.gnuplot, out.plot_problem);
  else out.plot_problem = "not rendered (--no-plots)";
  out.markdown = dir / "report.md";
  std::string md = report_markdown(spec, plan, out.analysis, missing, out.plots, out.plot_problem, dir, results.size());
  if (spec.moe()) md += moe_markdown(spec, results, analysed_e);
  write_file_atomic(out.markdown, md);
  return out;
}

}  // namespace loopscale::sweep
