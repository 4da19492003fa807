// The report of a sweep folder: DIR/report.md (runs, iso-FLOP minima, per-r and joint fits, phi
// with its interval, R^2 and RMSE), DIR/analysis.json (the same numbers for programs, read by
// `sweep compare`), DIR/runs.csv (a flat table `loopscale fit` reads) and the plots rendered by
// gnuplot into DIR/plots/: iso-FLOP curves per r with the fitted joint law, the loss-compute
// frontier per r, the bootstrap distribution of phi, and, when the runs were scored on the
// built-in probes (downstream.hpp), answer bits per byte against validation bits per byte and the
// test-time recurrence curve of each r's largest model. Each plot's data and gnuplot script stay
// next to the PNG, so a figure can be restyled without refitting.
//
// This header renders and writes; the numbers it shows come from analyse.hpp (the fits) and
// report_data.hpp (the runs read, the joint law's predictions, the data of each plot).
// write_report does it all: read the folder, analyse, compute, render, write.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <string>
#include <tuple>
#include <vector>

#include <fmt/format.h>

#include "loopscale/sweep/analyse.hpp"
#include "loopscale/sweep/downstream.hpp"
#include "loopscale/sweep/report_data.hpp"
#include "loopscale/sweep/run.hpp"

namespace loopscale::sweep {

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

// Writes the data and gnuplot scripts of the plots (report_data.hpp, plot_data; downstream.hpp) and renders them.
inline std::vector<fs::path> write_plots(const fs::path& dir, const PlotData& p, const std::string& gnuplot, std::string& problem,
                                         const Downstream& down = {}) {
  const std::vector<DownstreamPoint>& downstream = down.points;
  const fs::path pd = dir / "plots";
  fs::create_directories(pd);
  const bool cairo = detail::has_cairo(gnuplot);
  const std::string term = cairo ? "set terminal pngcairo size 1200,900 enhanced font 'DejaVu Sans,11'"
                                 : "set terminal png size 1200,900";
  const auto colour_of = [&](double budget) {
    return detail::color(static_cast<std::size_t>(std::find(p.budgets.begin(), p.budgets.end(), budget) - p.budgets.begin()));
  };
  std::vector<fs::path> scripts;

  {  // 1. iso-FLOP curves: one panel per r, one colour per budget; points = runs, lines = joint law.
    std::ofstream gp(pd / "isoflop.gp");
    gp << term << "\nset output '" << (pd / "isoflop.png").string() << "'\n";
    const int cols = p.isoflop.size() > 1 ? 2 : 1, rows = static_cast<int>((p.isoflop.size() + 1) / 2);
    gp << fmt::format("set multiplot layout {},{} title 'iso-FLOP curves of sweep {}: runs (points){}' font ',13'\n", rows, cols,
                      p.sweep, p.law ? " and the fitted joint law (lines)" : "");
    gp << "set logscale x\nset grid\nset xlabel 'non-embedding parameters N (stored)'\nset ylabel 'validation loss (nats/token)'\n"
          "set key top right font ',9'\nset format x '%.0s%c'\n";
    for (const IsoFlopPanel& panel : p.isoflop) {
      const std::string pts = fmt::format("isoflop_r{}.dat", panel.r), law = fmt::format("isoflop_law_r{}.dat", panel.r);
      std::ofstream dp(pd / pts), dl(pd / law);
      for (const IsoFlopCurve& curve : panel.curves) {
        dp << "# C = " << budget_label(curve.budget) << "\n";
        for (const auto& [n, loss] : curve.runs) dp << n << " " << loss << "\n";
        dp << "\n\n";
        dl << "# C = " << budget_label(curve.budget) << "\n";
        for (const auto& [n, loss] : curve.law) dl << n << " " << loss << "\n";
        dl << "\n\n";
      }
      gp << fmt::format("set title 'r = {}'\nplot ", panel.r);
      for (std::size_t i = 0; i < panel.curves.size(); ++i) {
        const double c = panel.curves[i].budget;
        gp << fmt::format("'{}' index {} with points pt 7 ps 1.3 lc rgb '{}' title 'C = {}', ", (pd / pts).string(), i, colour_of(c),
                          budget_label(c));
        if (p.law) gp << fmt::format("'{}' index {} with lines lw 2 lc rgb '{}' notitle, ", (pd / law).string(), i, colour_of(c));
      }
      gp << "1/0 notitle\n";
    }
    gp << "unset multiplot\n";
    scripts.push_back(pd / "isoflop.gp");
  }

  {  // 2. loss-compute frontier per r: cell minima (points) and the joint law's minimum over N (lines).
    std::string plot = "plot ";
    for (std::size_t i = 0; i < p.frontier.size(); ++i) {
      const FrontierCurve& f = p.frontier[i];
      const std::string pts = fmt::format("frontier_r{}.dat", f.r), law = fmt::format("frontier_law_r{}.dat", f.r);
      std::ofstream dp(pd / pts), dl(pd / law);
      for (const auto& [c, loss] : f.minima) dp << c << " " << loss << "\n";
      if (!f.minima.empty())
        plot += fmt::format("'{}' with points pt 7 ps 1.5 lc rgb '{}' title 'r = {} minima', ", (pd / pts).string(), detail::color(i), f.r);
      for (const auto& [c, loss] : f.law) dl << c << " " << loss << "\n";
      if (!f.law.empty())
        plot += fmt::format("'{}' with lines lw 2 lc rgb '{}' title 'r = {} joint law', ", (pd / law).string(), detail::color(i), f.r);
    }
    // Nothing to draw (no cell with three widths around a minimum, no joint law: a sweep too small
    // to fit) is no plot, not a gnuplot error that reads like a missing gnuplot.
    if (plot != "plot ") {
      std::ofstream gp(pd / "frontier.gp");
      gp << term << "\nset output '" << (pd / "frontier.png").string() << "'\n";
      gp << fmt::format("set title 'compute frontier of sweep {}: iso-FLOP minima (points){}'\n", p.sweep,
                        p.law ? ", joint law minimised over width (lines)" : "");
      gp << "set logscale x\nset grid\nset xlabel 'training compute C (FLOPs)'\nset ylabel 'validation loss at the optimal width (nats/token)'\n"
            "set key top right\nset format x '10^{%L}'\n";
      gp << plot << "1/0 notitle\n";
      scripts.push_back(pd / "frontier.gp");
    }
  }

  if (p.phi) {  // 3. bootstrap distribution of phi
    const PhiHistogram& h = *p.phi;
    std::ofstream dp(pd / "phi_bootstrap.dat");
    for (double v : h.draws) dp << v << "\n";
    std::ofstream gp(pd / "phi_bootstrap.gp");
    gp << term << "\nset output '" << (pd / "phi_bootstrap.png").string() << "'\n";
    gp << fmt::format("set title 'block bootstrap of phi, sweep {}: {} resamples of {} (C, r) cells'\n", p.sweep, h.draws.size(), h.cells);
    gp << "set xlabel 'phi (value of one recurrence: 0 = nothing, 1 = a full copy of the block)'\nset ylabel 'resamples'\nset grid\n"
          "set style fill solid 0.6 border -1\nset key top left\n";
    gp << fmt::format("bw = {}\nbin(x) = bw * floor(x / bw) + bw / 2\nset boxwidth bw absolute\n", h.bin_width);
    gp << fmt::format("set arrow 1 from {0},graph 0 to {0},graph 1 nohead lw 3 lc rgb '#d95f02'\n", h.phi);
    gp << fmt::format("set arrow 2 from {0},graph 0 to {0},graph 1 nohead lw 2 dt 2 lc rgb '#333333'\n", h.lo);
    gp << fmt::format("set arrow 3 from {0},graph 0 to {0},graph 1 nohead lw 2 dt 2 lc rgb '#333333'\n", h.hi);
    gp << fmt::format("plot '{}' using (bin($1)):(1.0) smooth frequency with boxes lc rgb '#7570b3' title 'resampled phi', "
                      "NaN with lines lw 3 lc rgb '#d95f02' title 'fit: phi = {:.3f}', "
                      "NaN with lines lw 2 dt 2 lc rgb '#333333' title '{:.0f}% interval [{:.3f}, {:.3f}]'\n",
                      (pd / "phi_bootstrap.dat").string(), h.phi, 100 * h.level, h.lo, h.hi);
    scripts.push_back(pd / "phi_bootstrap.gp");
  }

  if (!downstream.empty()) {  // 4. does downstream track loss? answer bpb against validation bpb, one colour per r
    std::ofstream gp(pd / "downstream.gp");
    gp << term << "\nset output '" << (pd / "downstream.png").string() << "'\n";
    gp << fmt::format("set title 'sweep {}: answer bits per byte of the built-in probes against validation bits per byte, per run'\n", p.sweep);
    gp << "set grid\nset xlabel 'validation bits per byte'\nset ylabel 'answer bits per byte (all probe tasks pooled)'\nset key top left\n";
    std::ofstream dp(pd / "downstream.dat");
    std::string plot = "plot ";
    std::size_t block = 0;
    for (std::size_t i = 0; i < downstream.size(); ++block) {
      const int64 r = downstream[i].r;
      dp << "# r = " << r << "\n";
      for (; i < downstream.size() && downstream[i].r == r; ++i) dp << downstream[i].val_bpb << " " << downstream[i].answer_bpb << "\n";
      dp << "\n\n";
      plot += fmt::format("'{}' index {} with points pt 7 ps 1.4 lc rgb '{}' title 'r = {}', ", (pd / "downstream.dat").string(), block,
                          detail::color(block), r);
    }
    gp << plot << "1/0 notitle\n";
    scripts.push_back(pd / "downstream.gp");
  }

  if (!down.curves.empty()) {  // 5. test-time recurrence: loss against r_eval, one line per trained r (its largest model)
    // The y range covers every curve up to its trained r, with a margin: beyond it a model may
    // diverge (an r = 1 model has never run its block twice), and one such curve would flatten the
    // others; what leaves the range is in the report's table.
    double lo = INFINITY, hi = -INFINITY, all_hi = -INFINITY;
    for (const RecurrenceCurve& c : down.curves)
      for (std::size_t k = 0; k < c.r_eval.size(); ++k) {
        lo = std::min(lo, c.loss[k]);
        all_hi = std::max(all_hi, c.loss[k]);
        if (c.r_eval[k] <= c.r) hi = std::max(hi, c.loss[k]);
      }
    const double margin = std::max(0.25 * (hi - lo), 0.01);
    std::ofstream gp(pd / "recurrence.gp");
    gp << term << "\nset output '" << (pd / "recurrence.png").string() << "'\n";
    gp << fmt::format("set title 'sweep {}: test-time recurrence of the largest model of each trained r (filled: the trained r){}'\n", p.sweep,
                      all_hi > hi + margin ? "; losses above the range are in report.md" : "");
    gp << "set grid\nset logscale x 2\nset xlabel 'recurrences at evaluation, r_{eval}'\nset ylabel 'validation loss (nats/token)'\n"
          "set key top right\n";
    if (all_hi > hi + margin) gp << fmt::format("set yrange [{:.6g}:{:.6g}]\n", lo - margin, hi + margin);
    std::ofstream dp(pd / "recurrence.dat"), dt(pd / "recurrence_trained.dat");
    std::string plot = "plot ";
    for (std::size_t i = 0; i < down.curves.size(); ++i) {
      const RecurrenceCurve& c = down.curves[i];
      dp << "# " << c.id << "\n";
      dt << "# " << c.id << "\n";
      for (std::size_t k = 0; k < c.r_eval.size(); ++k) {
        dp << c.r_eval[k] << " " << c.loss[k] << "\n";
        if (c.r_eval[k] == c.r) dt << c.r_eval[k] << " " << c.loss[k] << "\n";
      }
      dp << "\n\n";
      dt << "\n\n";
      plot += fmt::format("'{}' index {} with linespoints pt 6 ps 1.3 lw 2 lc rgb '{}' title 'r = {} ({})', ", (pd / "recurrence.dat").string(), i,
                          detail::color(i), c.r, c.id);
      plot += fmt::format("'{}' index {} with points pt 7 ps 2 lc rgb '{}' notitle, ", (pd / "recurrence_trained.dat").string(), i, detail::color(i));
    }
    gp << plot << "1/0 notitle\n";
    scripts.push_back(pd / "recurrence.gp");
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

// A dense sweep's runs.csv. N_inject and injection say where N_once and N_rec count the injection
// (plan.hpp, run_columns), so `loopscale fit --injection once|excluded` can move it; results lines
// written before those columns existed take them from the plan (the same accounting).
inline std::string runs_csv(const Analysis& a, const Plan& plan) {
  std::string s = "id,C,r,s,d_model,N_once,N_rec,N,N_unrolled,F,D,loss,N_inject,injection\n";
  for (const auto& r : a.runs) {
    double n_inject = 0;
    std::string injection = std::string(name_of(InjectionCount::rec));
    if (r.line.contains("N_inject")) {
      n_inject = r.line.at("N_inject").get<double>();
      injection = r.line.value("injection", injection);
    } else {
      const auto planned = std::find_if(plan.runs.begin(), plan.runs.end(), [&](const PlannedRun& p) { return p.id == r.id; });
      if (planned == plan.runs.end()) throw sweep_error(fmt::format("runs.csv: run {} is not in the plan", r.id));
      n_inject = static_cast<double>(planned->acct.params.inject);
    }
    s += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n", r.id, r.budget, r.r, r.s, r.d_model, r.n_once, r.n_rec, r.n,
                     r.n_unrolled, r.flops_per_token, r.tokens, r.loss, n_inject, injection);
  }
  return s;
}

// An MoE sweep's runs.csv: every run (all E), with the looped-MoE law's columns (plan.hpp,
// moe_columns), ordered by C, E, r, N. Its N_once, N_rec, N_act and N_loop count the injection with
// the shared block ('rec'); its header, pinned by tests/sweep/test_moe.cpp, has no N_inject or
// injection column yet, so `loopscale fit --injection` refuses it (the results lines have both).
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
                   "no term for E. Fit the looped-MoE law (Chen et al., arXiv 2609.40316) on every run with\n\n"
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
  m += "}";
  if (flat_baseline(spec)) m += fmt::format(" (r = 1 as {} layers in one block, no prelude or coda)", spec.depth);
  m += fmt::format(", {} injection, {} BPTT; vocab {}, context {}, {} tokens per step. Spec fingerprint `{}`.\n\n", spec.inject,
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
    if (const auto edges = j.fit.box_edges(); !edges.empty())
      m += fmt::format("**Not determined**: the joint fit ended on an edge of the law's box for {}: those values are the box's "
                       "edges, not estimates, because these runs do not pin them down (too few, too small, or too few r).\n\n",
                       fmt::join(edges, ", "));
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
  std::string undetermined;  // per-r fits with a parameter on an edge of the box
  for (const ArchFit& f : a.per_r)
    if (f.fit)
      if (const auto edges = f.fit->box_edges(); !edges.empty()) undetermined += fmt::format("{}r = {}: {}", undetermined.empty() ? "" : "; ", f.r, fmt::join(edges, ", "));
  if (!undetermined.empty())
    m += "\nOn an edge of the law's box, so not determined by these runs (the table shows the edge): " + undetermined + ".\n";

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
  const std::vector<double> predicted = joint_law_at_runs(a);
  for (std::size_t i = 0; i < a.runs.size(); ++i) {
    const RunResult& r = a.runs[i];
    std::string pred = "", res = "";
    if (!predicted.empty()) {
      pred = fmt::format("{:.4f}", predicted[i]);
      res = fmt::format("{:+.4f}", r.loss - predicted[i]);
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
  const std::vector<RunResult> results = finished_runs(dir, plan);
  const std::vector<std::string> missing = missing_runs(plan, results);
  // A folder (or a pipe) where a report file goes failed at the write, exit 1, after the analysis.
  for (const char* name : {"analysis.json", "runs.csv", "report.md"})
    if (const std::string why = not_a_file(dir / name); !why.empty()) throw sweep_error("sweep report: " + why);

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
  write_file_atomic(out.csv, spec.moe() ? moe_runs_csv(results) : runs_csv(out.analysis, plan));
  const Downstream down = downstream(results);
  if (opt.plots) out.plots = write_plots(dir, plot_data(spec, out.analysis), opt.gnuplot, out.plot_problem, down);
  else out.plot_problem = "not rendered (--no-plots)";
  out.markdown = dir / "report.md";
  std::string md = report_markdown(spec, plan, out.analysis, missing, out.plots, out.plot_problem, dir, results.size());
  if (spec.moe()) md += moe_markdown(spec, results, analysed_e);
  md += downstream_markdown(down);
  write_file_atomic(out.markdown, md);
  return out;
}

}  // namespace loopscale::sweep
