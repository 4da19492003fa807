// One file of a two-file program that links loopscale::law_instances and loopscale::train_instances
// (instances_train.cpp is the other): it fits the iso-depth law through the registry, as a file of
// a user's program would, while the fitter itself is compiled once, in law/instances.cpp. run.cmake
// checks that this file's object code calls fit<AnyLaw> and does not define it.
#include <loopscale/law/laws.hpp>

namespace law = loopscale::law;

// phi fitted on 72 runs whose losses the library draws from the published iso-depth constants
// (with_synthetic_loss, noise 0.3% of log loss, seed 7).
double fitted_phi() {
  using P = law::IsoDepthPublished;
  const law::AnyLaw iso = law::law_by_name("iso-depth");
  law::Runs runs;
  for (const char* column : {"N_once", "N_rec", "r", "D"}) runs.set(column) = Eigen::ArrayXd(72);
  Eigen::Index i = 0;
  for (double no : {2e7, 3e8})
    for (double nr : {1e7, 4e7, 1.6e8})
      for (double rv : {1.0, 2.0, 4.0, 8.0})
        for (double dv : {2e9, 8e9, 3.2e10}) {  // three D: two leave E, B and beta one number short (law::fit refuses)
          runs.set("N_once")[i] = no, runs.set("N_rec")[i] = nr, runs.set("r")[i] = rv, runs.set("D")[i] = dv;
          ++i;
        }
  const Eigen::VectorXd published =
      law::theta_of(iso, {{"E", P::E}, {"A", P::A}, {"B", P::B}, {"alpha", P::alpha}, {"beta", P::beta}, {"phi", P::phi}});
  return law::fit(iso, law::with_synthetic_loss(iso, runs, published, 0.003, 7)).value("phi");
}
