// L-BFGS-B for the few parameters of a law (at most SmallLBFGSB::max_n): LBFGSpp's LBFGSBSolver
// step for step (generalized Cauchy point, the subspace minimisation with its L/U/P iteration,
// LBFGSpp's More-Thuente line search, the same stopping tests and exceptions), with the limited-
// memory matrix B = theta I - W M W' held as a dense n x n matrix instead. Search::weak_wolfe
// swaps the line search for one that asks less of a kinked objective (weak_wolfe, below); the
// default keeps LBFGSpp's.
//
// Why: with 5 or 6 parameters and 5 to 10 corrections, LBFGSpp's compact form factorises a
// 2m x 2m middle matrix (Bunch-Kaufman) twice per iteration and allocates its temporaries; perf put
// that at about 40% of a whole fit (docs/benchmarks.md). Rebuilding B from the stored pairs by the
// recursive BFGS update from theta I (the same matrix as the compact form, Byrd, Nocedal and
// Schnabel 1994) costs O(m n^2), and every product with B, or solve with a block of it, is then
// an n x n operation on fixed-capacity storage that never touches the heap. The iterates equal
// LBFGSpp's in exact arithmetic and differ in rounding only.
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <vector>

#include <Eigen/Cholesky>
#include <Eigen/Core>
#include <LBFGSB.h>

namespace loopscale::law::detail {

// The line search: LBFGSpp's More-Thuente, or weak_wolfe (below).
enum class SmallLBFGSBSearch { more_thuente, weak_wolfe };

// MaxN parameters and MaxM corrections at most: the capacity of the fixed storage. A template (the
// fitter uses one instance, SmallLBFGSB below) so that its members, Eigen's factorisations among
// them, are compiled only in the files that run it: GCC compiles a non-template class's inline
// members in every file that includes it (huber_fit.hpp says more).
template <int MaxN, int MaxM>
class BasicSmallLBFGSB {
 public:
  static constexpr int max_n = MaxN;
  static constexpr int max_m = MaxM;
  using Vector = Eigen::VectorXd;  // what the objective and LBFGSpp's line search take

  using Search = SmallLBFGSBSearch;
  explicit BasicSmallLBFGSB(const LBFGSpp::LBFGSBParam<double>& param, Search search = Search::more_thuente)
      : param_(param), search_(search) {
    param_.check_param();
  }

  // As LBFGSBSolver::minimize: x in: the start, out: the point reached; fx out: f there. Throws
  // what LBFGSpp throws (a failed line search).
  template <class Foo>
  int minimize(Foo& f, Vector& x, double& fx, const Vector& lb, const Vector& ub) {
    const int n = static_cast<int>(x.size());
    if (lb.size() != n || ub.size() != n) throw std::invalid_argument("'lb' and 'ub' must have the same size as 'x'");
    if (n > max_n || param_.m > max_m) throw std::invalid_argument("SmallLBFGSB: too many parameters or corrections");
    x = x.cwiseMax(lb).cwiseMin(ub);
    reset(n);
    const int fpast = param_.past;
    fx = f(x, grad_);
    double projgnorm = proj_grad_norm(x, lb, ub);
    if (fpast > 0) fhist_[0] = fx;
    if (projgnorm <= param_.epsilon || projgnorm <= param_.epsilon_rel * x.norm()) return 1;

    cauchy_point(x, lb, ub);
    drt_ = xcp_ - x;
    drt_.normalize();
    const double eps = std::numeric_limits<double>::epsilon();
    int k = 1;
    for (;;) {
      xp_ = x;
      gradp_ = grad_;
      double step_max = max_step_size(x, lb, ub);
      step_max = std::min(param_.max_step, step_max);
      double step = std::min(1.0, step_max);
      if (search_ == Search::weak_wolfe) weak_wolfe(f, fx, x, step, step_max);
      else LBFGSpp::LineSearchMoreThuente<double>::LineSearch(f, fx, x, grad_, step, step_max, drt_, xp_, param_);

      projgnorm = proj_grad_norm(x, lb, ub);
      if (projgnorm <= param_.epsilon || projgnorm <= param_.epsilon_rel * x.norm()) return k;
      if (fpast > 0) {
        const double fxd = fhist_[k % fpast];
        if (k >= fpast && std::abs(fxd - fx) <= param_.delta * std::max({std::abs(fx), std::abs(fxd), 1.0})) return k;
        fhist_[k % fpast] = fx;
      }
      if (param_.max_iterations != 0 && k >= param_.max_iterations) return k;

      s_ = (x - xp_).head(n);
      y_ = (grad_ - gradp_).head(n);
      if (s_.dot(y_) > eps * y_.squaredNorm()) add_correction();

      x = x.cwiseMax(lb).cwiseMin(ub);
      cauchy_point(x, lb, ub);
      subspace_minimize(x, lb, ub);
      ++k;
    }
  }

 private:
  using SVec = Eigen::Matrix<double, Eigen::Dynamic, 1, Eigen::ColMajor, max_n, 1>;
  using SMat = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::ColMajor, max_n, max_n>;
  using Hist = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::ColMajor, max_n, max_m>;

  LBFGSpp::LBFGSBParam<double> param_;
  Search search_ = Search::more_thuente;
  int n_ = 0, m_ = 0, ncorr_ = 0, ptr_ = 0;
  double theta_ = 1;
  Hist S_, Y_;
  Eigen::Matrix<double, Eigen::Dynamic, 1, Eigen::ColMajor, max_m, 1> ys_;
  SMat B_;
  Vector grad_, gradp_, xp_, drt_, xcp_;
  SVec s_, y_, brk_, vecd_, Bd_, Bz_, work_;
  std::vector<double> fhist_;
  std::vector<int> ord_, fv_, newact_, P_, L_, U_, yP_, yL_, yU_;
  // subspace minimisation
  SVec vecc_, vecl_, vecu_, vecy_, yfallback_, lambda_, mu_, rhs_, tmp_;
  SMat BPP_;
  Eigen::LDLT<SMat> ldlt_;

  void reset(int n) {
    n_ = n;
    m_ = param_.m;
    ncorr_ = 0;
    ptr_ = m_;
    theta_ = 1;
    S_.resize(n, m_);
    Y_.resize(n, m_);
    ys_.resize(m_);
    B_.setIdentity(n, n);
    for (Vector* v : {&grad_, &gradp_, &xp_, &drt_, &xcp_}) v->resize(n);
    for (SVec* v : {&s_, &y_, &brk_, &vecd_, &Bd_, &Bz_, &work_}) v->resize(n);
    fhist_.assign(static_cast<std::size_t>(std::max(param_.past, 1)), 0.0);
    for (auto* v : {&ord_, &fv_, &newact_, &P_, &L_, &U_, &yP_, &yL_, &yU_}) v->reserve(static_cast<std::size_t>(n));
  }

  // Search::weak_wolfe: a bracketing line search for the weak Wolfe conditions (as Lewis and
  // Overton 2013 use for BFGS on nonsmooth functions): f(a) <= f0 + ftol a g0'd (param_.ftol,
  // 1e-4) and g(a)'d >= wolfe g0'd (param_.wolfe, 0.9), over x = xp_ + a drt_ from a = step, a at
  // most step_max. A step too long (no sufficient decrease) becomes the bracket's upper end, one
  // too short (still descending steeply) its lower end; while there is no upper end the step
  // grows 4 times (up to step_max, which is accepted with sufficient decrease, as LBFGSpp does);
  // then the minimiser of the cubic through both ends (values and slopes), kept in the middle 80%
  // of the bracket, the midpoint where the cubic has none. Throws LBFGSpp's messages on the same
  // failures, and after param_.max_linesearch trials.
  //
  // Why: the summed Huber loss with delta 1e-3 is close to a sum of absolute values, so along a
  // line its slope jumps from negative to positive within a tiny interval at each kink. The
  // strong Wolfe test of More-Thuente (|g(a)'d| <= 0.9 |g0'd|) then holds only inside that
  // interval, and More-Thuente's search ran out of its 20 trials on 27% of Epoch's grid starts
  // (each failure costing the 20 evaluations and a restart with empty memory). The weak test holds
  // anywhere past the kink's minimum, and still gives s'y > 0 for the update.
  template <class Foo>
  void weak_wolfe(Foo& f, double& fx, Vector& x, double& step, double step_max) {
    const double f0 = fx, dg0 = grad_.dot(drt_);
    if (!(dg0 < 0)) throw std::logic_error("the moving direction does not decrease the objective function value");
    const double inf = std::numeric_limits<double>::infinity();
    double lo = 0, hi = inf, flo = f0, dglo = dg0, fhi = inf, dghi = 0;
    for (int it = 0; it < param_.max_linesearch; ++it) {
      x.noalias() = xp_ + step * drt_;
      fx = f(x, grad_);
      const double dg = grad_.dot(drt_);
      if (!(fx <= f0 + param_.ftol * step * dg0)) {
        hi = step, fhi = fx, dghi = dg;
      } else if (dg < param_.wolfe * dg0) {
        if (step >= step_max) return;
        lo = step, flo = fx, dglo = dg;
      } else {
        return;
      }
      if (hi == inf) {
        step = std::min(step_max, 4 * step);
      } else {
        // the cubic's minimiser through (lo, flo, dglo) and (hi, fhi, dghi), kept in the middle
        // 80% of the bracket; the midpoint when the cubic does not give one.
        const double w = hi - lo;
        double t = lo + 0.5 * w;
        if (std::isfinite(fhi) && std::isfinite(dghi)) {
          const double d1 = dglo + dghi - 3 * (flo - fhi) / (lo - hi);
          const double disc = d1 * d1 - dglo * dghi;
          if (disc >= 0) {
            const double d2 = std::sqrt(disc);
            const double c = hi - w * (dghi + d2 - d1) / (dghi - dglo + 2 * d2);
            if (std::isfinite(c)) t = c;
          }
        }
        step = std::clamp(t, lo + 0.1 * w, hi - 0.1 * w);
      }
      if (step < param_.min_step) throw std::runtime_error("the line search step became smaller than the minimum value allowed");
    }
    throw std::runtime_error("the line search routine reached the maximum number of iterations");
  }

  double proj_grad_norm(const Vector& x, const Vector& lb, const Vector& ub) const {
    return ((x - grad_).cwiseMax(lb).cwiseMin(ub) - x).cwiseAbs().maxCoeff();
  }

  double max_step_size(const Vector& x0, const Vector& lb, const Vector& ub) const {
    double step = std::numeric_limits<double>::infinity();
    for (int i = 0; i < n_; ++i) {
      if (drt_[i] > 0) step = std::min(step, (ub[i] - x0[i]) / drt_[i]);
      else if (drt_[i] < 0) step = std::min(step, (lb[i] - x0[i]) / drt_[i]);
    }
    return step;
  }

  // The new pair (s_, y_) replaces the oldest; theta = y'y / s'y of the newest, as LBFGSpp; then B
  // from theta I through the stored pairs, oldest first.
  void add_correction() {
    const int loc = ptr_ % m_;
    S_.col(loc) = s_;
    Y_.col(loc) = y_;
    const double ys = s_.dot(y_);
    ys_[loc] = ys;
    theta_ = y_.squaredNorm() / ys;
    if (ncorr_ < m_) ++ncorr_;
    ptr_ = loc + 1;
    // Plain loops: Eigen's general products cost more than the arithmetic at n = 5 or 6.
    const int n = n_;
    B_.setZero(n, n);
    for (int i = 0; i < n; ++i) B_(i, i) = theta_;
    int j = (ptr_ + m_ - ncorr_) % m_;  // the oldest stored pair
    for (int c = 0; c < ncorr_; ++c, j = (j + 1) % m_) {
      const double* sj = &S_(0, j);
      const double* yj = &Y_(0, j);
      matvec(sj, work_.data());
      double sbs = 0;
      for (int i = 0; i < n; ++i) sbs += sj[i] * work_[i];
      const double a = 1 / sbs, b = 1 / ys_[j];
      for (int q = 0; q < n; ++q)
        for (int i = 0; i < n; ++i) B_(i, q) += b * yj[i] * yj[q] - a * work_[i] * work_[q];
    }
  }

  // out = B v (B symmetric, so by columns).
  void matvec(const double* v, double* out) const {
    const int n = n_;
    for (int i = 0; i < n; ++i) out[i] = 0;
    for (int q = 0; q < n; ++q) {
      const double vq = v[q];
      for (int i = 0; i < n; ++i) out[i] += B_(i, q) * vq;
    }
  }

  // LBFGSpp's Cauchy::get_cauchy_point, with B z (z = xcp - x0 along the path) in place of W'z and
  // B d in place of W'd. Sets xcp_, Bz_, newact_, fv_.
  void cauchy_point(const Vector& x0, const Vector& lb, const Vector& ub) {
    const Vector& g = grad_;
    const int n = n_;
    xcp_ = x0;
    Bz_.setZero();
    newact_.clear();
    fv_.clear();
    ord_.clear();
    const double inf = std::numeric_limits<double>::infinity();
    for (int i = 0; i < n; ++i) {
      if (lb[i] == ub[i]) brk_[i] = 0;
      else if (g[i] < 0) brk_[i] = (x0[i] - ub[i]) / g[i];
      else if (g[i] > 0) brk_[i] = (x0[i] - lb[i]) / g[i];
      else brk_[i] = inf;
      const bool iszero = brk_[i] == 0;
      vecd_[i] = iszero ? 0 : -g[i];
      if (brk_[i] == inf) fv_.push_back(i);
      else if (!iszero) ord_.push_back(i);
    }
    std::sort(ord_.begin(), ord_.end(), [&](int a, int b) { return brk_[a] < brk_[b]; });
    const int nord = static_cast<int>(ord_.size()), nfree = static_cast<int>(fv_.size());
    if (nfree < 1 && nord < 1) return;

    matvec(vecd_.data(), Bd_.data());
    double fp = -vecd_.squaredNorm();
    double fpp = vecd_.dot(Bd_);
    double deltatmin = -fp / fpp;
    double il = 0;
    int b = 0;
    double iu = nord < 1 ? inf : brk_[ord_[0]];
    double deltat = iu - il;
    bool crossed_all = false;
    while (deltatmin >= deltat) {
      Bz_ += deltat * Bd_;
      const int act_begin = b;
      int act_end = b;
      while (act_end < nord && !(brk_[ord_[act_end]] > iu)) ++act_end;
      --act_end;
      if (nfree == 0 && act_end == nord - 1) {
        for (int i = act_begin; i <= act_end; ++i) {
          const int act = ord_[i];
          xcp_[act] = vecd_[act] > 0 ? ub[act] : lb[act];
          newact_.push_back(act);
        }
        crossed_all = true;
        break;
      }
      fp += deltat * fpp;
      for (int i = act_begin; i <= act_end; ++i) {
        const int act = ord_[i];
        xcp_[act] = vecd_[act] > 0 ? ub[act] : lb[act];
        const double gact = g[act], ggact = gact * gact;
        // d loses its component -g_act: f' gains g_act^2 + g_act (Bz)_act, f'' gains
        // 2 g_act (Bd)_act + g_act^2 B_act,act (LBFGSpp's update through W and M).
        fp += ggact + gact * Bz_[act];
        fpp += 2 * gact * Bd_[act] + ggact * B_(act, act);
        Bd_ += gact * B_.col(act);
        vecd_[act] = 0;
        newact_.push_back(act);
      }
      deltatmin = -fp / fpp;
      il = iu;
      b = act_end + 1;
      if (b >= nord) break;
      iu = brk_[ord_[b]];
      deltat = iu - il;
    }
    const double eps = std::numeric_limits<double>::epsilon();
    if (fpp < eps) deltatmin = -fp / eps;
    if (!crossed_all) {
      deltatmin = std::max(deltatmin, 0.0);
      Bz_ += deltatmin * Bd_;
      const double tfinal = il + deltatmin;
      for (int i = 0; i < nfree; ++i) xcp_[fv_[i]] = x0[fv_[i]] + tfinal * vecd_[fv_[i]];
      for (int i = b; i < nord; ++i) {
        const int c = ord_[i];
        xcp_[c] = x0[c] + tfinal * vecd_[c];
        fv_.push_back(c);
      }
    }
  }

  // inv(B_PP) v for the index set P: LDLT of the block (B is positive definite in exact
  // arithmetic; the pivoted LDLT, like LBFGSpp's Bunch-Kaufman, tolerates rounding).
  void solve_PtBP(const std::vector<int>& P, const SVec& v, SVec& res) {
    const int nP = static_cast<int>(P.size());
    BPP_.resize(nP, nP);
    for (int j = 0; j < nP; ++j)
      for (int i = 0; i < nP; ++i) BPP_(i, j) = B_(P[i], P[j]);
    ldlt_.compute(BPP_);
    res = ldlt_.solve(v);
  }

  // LBFGSpp's SubspaceMin::subspace_minimize over the dense B; sets drt_.
  void subspace_minimize(const Vector& x0, const Vector& lb, const Vector& ub) {
    const Vector& g = grad_;
    drt_ = xcp_ - x0;
    const int nfree = static_cast<int>(fv_.size());
    if (nfree < 1) return;
    const int nact = static_cast<int>(newact_.size());
    vecc_.resize(nfree);
    vecl_.resize(nfree);
    vecu_.resize(nfree);
    for (int i = 0; i < nfree; ++i) {
      const int c = fv_[i];
      double v = 0;
      if (ncorr_ > 0)  // F'B A A'd: zero while B = theta I, as in LBFGSpp
        for (int a = 0; a < nact; ++a) v += B_(c, newact_[a]) * drt_[newact_[a]];
      vecc_[i] = v + g[c];
      vecl_[i] = lb[c] - x0[c];
      vecu_[i] = ub[c] - x0[c];
    }
    rhs_ = -vecc_;
    solve_PtBP(fv_, rhs_, vecy_);
    bool inside = true;
    for (int i = 0; i < nfree; ++i) inside = inside && !(vecy_[i] < vecl_[i] || vecy_[i] > vecu_[i]);
    if (inside) {
      for (int i = 0; i < nfree; ++i) drt_[fv_[i]] = vecy_[i];
      return;
    }
    yfallback_ = vecy_;
    lambda_.setZero(nfree);
    mu_.setZero(nfree);
    int k;
    for (k = 0; k < param_.max_submin; ++k) {
      for (auto* v : {&L_, &U_, &P_, &yL_, &yU_, &yP_}) v->clear();
      for (int i = 0; i < nfree; ++i) {
        const int c = fv_[i];
        const double li = vecl_[i], ui = vecu_[i];
        if (vecy_[i] < li || (vecy_[i] == li && lambda_[i] >= 0)) {
          L_.push_back(c), yL_.push_back(i);
          vecy_[i] = li;
          mu_[i] = 0;
        } else if (vecy_[i] > ui || (vecy_[i] == ui && mu_[i] >= 0)) {
          U_.push_back(c), yU_.push_back(i);
          vecy_[i] = ui;
          lambda_[i] = 0;
        } else {
          P_.push_back(c), yP_.push_back(i);
          lambda_[i] = 0;
          mu_[i] = 0;
        }
      }
      const int nP = static_cast<int>(P_.size()), nL = static_cast<int>(L_.size()), nU = static_cast<int>(U_.size());
      if (nP > 0) {
        rhs_.resize(nP);
        for (int i = 0; i < nP; ++i) {
          double v = vecc_[yP_[i]];
          if (ncorr_ > 0) {  // + B_PL l_L + B_PU u_U
            for (int a = 0; a < nL; ++a) v += B_(P_[i], L_[a]) * vecl_[yL_[a]];
            for (int a = 0; a < nU; ++a) v += B_(P_[i], U_[a]) * vecu_[yU_[a]];
          }
          rhs_[i] = -v;
        }
        solve_PtBP(P_, rhs_, tmp_);
        for (int i = 0; i < nP; ++i) vecy_[yP_[i]] = tmp_[i];
      }
      // The multipliers as LBFGSpp computes them: -(L'W M W'F y) + c_L, i.e. (B_LF y)_L - theta y_L
      // + c_L (and the mirror for U).
      const auto bfy = [&](int row, int yi) {
        if (ncorr_ < 1) return 0.0;
        double v = 0;
        for (int i = 0; i < nfree; ++i) v += B_(row, fv_[i]) * vecy_[i];
        return v - theta_ * vecy_[yi];
      };
      for (int a = 0; a < nL; ++a) lambda_[yL_[a]] = bfy(L_[a], yL_[a]) + vecc_[yL_[a]];
      for (int a = 0; a < nU; ++a) mu_[yU_[a]] = -bfy(U_[a], yU_[a]) - vecc_[yU_[a]];
      bool conv = true;
      for (int a = 0; a < nL; ++a) conv = conv && !(lambda_[yL_[a]] < 0);
      for (int a = 0; a < nU; ++a) conv = conv && !(mu_[yU_[a]] < 0);
      for (int a = 0; a < nP; ++a) conv = conv && !(vecy_[yP_[a]] < vecl_[yP_[a]] || vecy_[yP_[a]] > vecu_[yP_[a]]);
      if (conv) break;
    }
    if (k >= param_.max_submin) {
      const double eps = std::numeric_limits<double>::epsilon();
      vecy_ = vecy_.cwiseMax(vecl_).cwiseMin(vecu_);
      for (int i = 0; i < nfree; ++i) drt_[fv_[i]] = vecy_[i];
      if (drt_.dot(g) <= -eps) return;
      vecy_ = yfallback_.cwiseMax(vecl_).cwiseMin(vecu_);
      for (int i = 0; i < nfree; ++i) drt_[fv_[i]] = vecy_[i];
      if (drt_.dot(g) <= -eps) return;
      for (int i = 0; i < nfree; ++i) drt_[fv_[i]] = yfallback_[i];
      return;
    }
    for (int i = 0; i < nfree; ++i) drt_[fv_[i]] = vecy_[i];
  }
};

// What the fitter runs: the laws have at most 16 parameters, and L-BFGS-B's memory at most 32 pairs.
using SmallLBFGSB = BasicSmallLBFGSB<16, 32>;

}  // namespace loopscale::law::detail
