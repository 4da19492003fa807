// What a scaling law is to the fitter: named parameters with a box (parameter.hpp), the run
// variables it reads, and, once prepared on a data set, the predicted log loss of every point with
// its Jacobian in the fitted coordinates. Laws are written in log-sum-exp form where they allow it
// (log L = LSE of log-terms), which never overflows whatever the optimiser tries and makes the
// gradient a softmax-weighted sum of the terms' gradients.
#pragma once

#include <concepts>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <Eigen/Core>

#include "loopscale/law/parameter.hpp"
#include "loopscale/law/runs.hpp"

namespace loopscale::law {

// A law prepared on a data set (its variables transformed once: logs, Ehat, ...), whatever the
// law: the run-time handle of a PreparedLaw (below), as AnyLaw is of a Law. AnyLaw::prepare
// returns one; the fitter and the predictions take one.
class AnyPreparedLaw {
 public:
  virtual ~AnyPreparedLaw() = default;
  virtual Eigen::Index size() const = 0;
  // out[i] = predicted log loss at point i; with jac, jac(i, j) = d out[i] / d theta[j], theta in
  // the fitted coordinates. `out` and `*jac` must already have their sizes (n, n x p): the fitter
  // allocates once per start, not per evaluation.
  virtual void log_predict(const Eigen::VectorXd& theta, Eigen::ArrayXd& out, Eigen::MatrixXd* jac) const = 0;
  // The summed Huber loss (delta) of log predicted - log_loss at theta, and its gradient in every
  // fitted coordinate (grad has p entries), in one pass over the points: what the fitter evaluates
  // at every step of every start. false: this law has no such pass (or it could not represent a
  // point), and the fitter uses log_predict and the Jacobian.
  virtual bool huber(const Eigen::VectorXd& theta, const Eigen::ArrayXd& log_loss, double delta, double& f,
                     Eigen::VectorXd& grad) const {
    (void)theta, (void)log_loss, (void)delta, (void)f, (void)grad;
    return false;
  }
};

// What a law's prepare(runs) returns: its points' predicted log loss, with the Jacobian on request.
template <class P>
concept PreparedLaw = requires(const P& p, const Eigen::VectorXd& theta, Eigen::ArrayXd& out, Eigen::MatrixXd* jac) {
  { p.size() } -> std::convertible_to<Eigen::Index>;
  p.log_predict(theta, out, jac);
};

// A law is a small value type. Adding one: a header with a struct like chinchilla.hpp's, and a line
// in registry.hpp if the command line should know it by name.
template <class L>
concept Law = requires(const L& law, const Runs& runs) {
  { L::name } -> std::convertible_to<std::string_view>;
  { L::source } -> std::convertible_to<std::string_view>;
  { L::formula } -> std::convertible_to<std::string_view>;
  { law.parameters() } -> std::convertible_to<Parameters>;
  { law.columns() } -> std::convertible_to<std::vector<std::string>>;
  { law.prepare(runs) } -> PreparedLaw;
};

// Laws whose formula is defined only for some values of their constants, beyond the positive scale
// factors every law's log-scale parameters need (constants.hpp), say which: domain_fault(c) is ""
// when the constants in `c` (by name, natural units; some may be absent) are in the formula's
// domain, else one line naming the constant, its value and the domain.
template <class L>
concept HasDomain = requires(const L& law, const std::map<std::string, double>& c) {
  { law.domain_fault(c) } -> std::convertible_to<std::string>;
};

// Laws may say which legal constants are likely a mistake (a paper that writes the same law with
// the opposite sign): notes(c) gives one line each for the constants in `c` (by name, natural
// units; some may be absent), which the program prints and goes on.
template <class L>
concept HasNotes = requires(const L& law, const std::map<std::string, double>& c) {
  { law.notes(c) } -> std::convertible_to<std::vector<std::string>>;
};

// Laws may offer a deterministic start grid (Chinchilla's 4,500 starts), in fitted coordinates.
template <class L>
concept HasGrid = requires(const L& law) {
  { law.grid() } -> std::convertible_to<std::vector<Eigen::VectorXd>>;
};

// ---- numerics shared by the laws -------------------------------------------------------------

// Per-thread scratch for the laws' evaluations, so the fitter's inner loop does not allocate.
struct Scratch {
  Eigen::ArrayXXd terms;  // n x K log-terms, then their softmax weights
  Eigen::ArrayXXd derivs; // n x q derivatives of a sub-expression (N_eff) in its own parameters
  Eigen::ArrayXd a, b, c, d, e;
  static Scratch& local() {
    thread_local Scratch s;
    return s;
  }
};

// In place: the columns of t (log-terms) become their softmax weights d out / d t_k, and
// out = log sum_k exp(t_k), shifted by the row maximum so nothing overflows.
inline void log_sum_exp(Eigen::ArrayXXd& t, Eigen::ArrayXd& out, Eigen::ArrayXd& work) {
  // Column by column: each step is one vectorised pass over the points (a row-wise reduction over
  // a column-major n x K array is not).
  const Eigen::Index K = t.cols();
  work = t.col(0);
  for (Eigen::Index k = 1; k < K; ++k) work = work.max(t.col(k));
  for (Eigen::Index k = 0; k < K; ++k) t.col(k) = (t.col(k) - work).exp();
  out = t.col(0);
  for (Eigen::Index k = 1; k < K; ++k) out += t.col(k);
  for (Eigen::Index k = 0; k < K; ++k) t.col(k) /= out;
  out = work + out.log();
}

// ---- type erasure: one run-time handle for any law -------------------------------------------

class AnyLaw {
 public:
  template <Law L>
  AnyLaw(L law) : self_(std::make_shared<Holder<L>>(std::move(law))) {}  // NOLINT: implicit on purpose

  std::string name() const { return self_->name(); }
  std::string source() const { return self_->source(); }
  std::string formula() const { return self_->formula(); }
  Parameters parameters() const { return self_->parameters(); }
  std::vector<std::string> columns() const { return self_->columns(); }
  // Refuses a Runs whose columns differ in length (Runs::check) before the law reads them.
  std::unique_ptr<AnyPreparedLaw> prepare(const Runs& runs) const {
    runs.check();
    return self_->prepare(runs);
  }
  std::optional<std::vector<Eigen::VectorXd>> grid() const { return self_->grid(); }
  std::string domain_fault(const std::map<std::string, double>& c) const { return self_->domain_fault(c); }
  std::vector<std::string> notes(const std::map<std::string, double>& c) const { return self_->notes(c); }

 private:
  struct Concept {
    virtual ~Concept() = default;
    virtual std::string name() const = 0;
    virtual std::string source() const = 0;
    virtual std::string formula() const = 0;
    virtual Parameters parameters() const = 0;
    virtual std::vector<std::string> columns() const = 0;
    virtual std::unique_ptr<AnyPreparedLaw> prepare(const Runs&) const = 0;
    virtual std::optional<std::vector<Eigen::VectorXd>> grid() const = 0;
    virtual std::string domain_fault(const std::map<std::string, double>& c) const = 0;
    virtual std::vector<std::string> notes(const std::map<std::string, double>& c) const = 0;
  };
  template <class P>
  struct PreparedOf final : AnyPreparedLaw {
    P p;
    explicit PreparedOf(P x) : p(std::move(x)) {}
    Eigen::Index size() const override { return p.size(); }
    void log_predict(const Eigen::VectorXd& theta, Eigen::ArrayXd& out, Eigen::MatrixXd* jac) const override {
      p.log_predict(theta, out, jac);
    }
    bool huber(const Eigen::VectorXd& theta, const Eigen::ArrayXd& log_loss, double delta, double& f,
               Eigen::VectorXd& grad) const override {
      if constexpr (requires { p.huber(theta, log_loss, delta, f, grad); }) return p.huber(theta, log_loss, delta, f, grad);
      else return AnyPreparedLaw::huber(theta, log_loss, delta, f, grad);
    }
  };
  template <class L>
  struct Holder final : Concept {
    L law;
    explicit Holder(L l) : law(std::move(l)) {}
    std::string name() const override { return std::string(L::name); }
    std::string source() const override { return std::string(L::source); }
    std::string formula() const override { return std::string(L::formula); }
    Parameters parameters() const override { return law.parameters(); }
    std::vector<std::string> columns() const override { return law.columns(); }
    std::unique_ptr<AnyPreparedLaw> prepare(const Runs& runs) const override {
      using P = decltype(law.prepare(runs));
      return std::make_unique<PreparedOf<P>>(law.prepare(runs));
    }
    std::optional<std::vector<Eigen::VectorXd>> grid() const override {
      if constexpr (HasGrid<L>) return law.grid();
      else return std::nullopt;
    }
    std::string domain_fault(const std::map<std::string, double>& c) const override {
      if constexpr (HasDomain<L>) return law.domain_fault(c);
      else return {};
    }
    std::vector<std::string> notes(const std::map<std::string, double>& c) const override {
      if constexpr (HasNotes<L>) return law.notes(c);
      else return {};
    }
  };
  std::shared_ptr<const Concept> self_;
};

// Predicted losses (not logs) of a law with given fitted-coordinate parameters.
inline Eigen::ArrayXd predict_loss(const AnyPreparedLaw& prepared, const Eigen::VectorXd& theta) {
  Eigen::ArrayXd out(prepared.size());
  prepared.log_predict(theta, out, nullptr);
  return out.exp();
}

}  // namespace loopscale::law
