// A file that includes the whole law module and fits nothing must not compile the fitter. GCC
// instantiates, in every file, the templates that non-template inline functions call; when the
// fitter's entry points were such functions, every file that included law/laws.hpp compiled
// LBFGSpp's solver, loopscale's own L-BFGS-B, the fitter's objective and every registered law's
// handle (16.3 to 17.7 s with -fsyntax-only, 5 December 2026, docs/design.md). They are templates now.
//
// The check needs no clock. Each piece below is declared, after including the module, as an
// explicit specialization: a deleted function, or a class left incomplete. GCC refuses an explicit
// specialization of something the headers have already instantiated ("specialization of ... after
// instantiation"), and a use that GCC instantiates only at the end of the file (a non-template
// function that calls fit(IsoDepth{}, ...), which calls fit_prepared) meets the deleted function
// or the incomplete class instead. So this file compiles only while including the headers
// instantiates none of them. Built by the ctest "compile_time: including law/laws.hpp compiles no
// fitter" (tests/compile_time).
#include "loopscale/law/laws.hpp"

namespace loopscale::law {

// The fitter's objective over a run-time law handle, which every fit through AnyLaw runs.
template <>
struct detail::HuberObjective<AnyPreparedLaw>;

// The fitter's entry points and the registry, for the run-time handle.
template <>
FitResult fit<AnyLaw>(const AnyLaw&, const Runs&, const FitOptions&) = delete;
template <>
FitResult fit_prepared<AnyPreparedLaw>(const AnyPreparedLaw&, const Parameters&, const Eigen::ArrayXd&,
                                       const std::vector<Eigen::VectorXd>&, const std::map<int, double>&,
                                       const FitOptions&) = delete;
template <>
BootstrapResult bootstrap<AnyLaw>(const AnyLaw&, const Runs&, const FitResult&, const FitOptions&,
                                  const BootstrapOptions&) = delete;
template <>
HoldoutResult holdout<AnyLaw>(const AnyLaw&, const Runs&, const std::vector<std::string>&, const std::string&,
                              const std::string&, const FitOptions&) = delete;
template <>
const std::vector<AnyLaw>& all_laws<RegisteredLaws>() = delete;

// loopscale's L-BFGS-B and LBFGSpp's, each minimising that objective.
template <>
template <>
int detail::SmallLBFGSB::minimize<detail::HuberObjective<AnyPreparedLaw>>(
    detail::HuberObjective<AnyPreparedLaw>&, Eigen::VectorXd&, double&, const Eigen::VectorXd&, const Eigen::VectorXd&) = delete;

}  // namespace loopscale::law

template <>
template <>
int LBFGSpp::LBFGSBSolver<double>::minimize<loopscale::law::detail::HuberObjective<loopscale::law::AnyPreparedLaw>>(
    loopscale::law::detail::HuberObjective<loopscale::law::AnyPreparedLaw>&, Eigen::VectorXd&, double&,
    const Eigen::VectorXd&, const Eigen::VectorXd&) = delete;

int main() {}
