// Where the optimiser starts: a law's deterministic grid (Chinchilla's 4,500 points), N points drawn
// uniformly in the law's box from a seed, or points the user gives. All in fitted coordinates.
// Random starts come from a counter-based generator, so start i is the same point whatever the
// thread count or the number of starts after it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <Eigen/Core>

#include "loopscale/law/law.hpp"
#include "loopscale/util/random.hpp"

namespace loopscale::law {

namespace detail {
// A uniform value in [0, 1) per (seed, counter) (util/random.hpp); plenty for spreading starts.
inline double unit_uniform(std::uint64_t seed, std::uint64_t counter) {
  return static_cast<double>(splitmix64(seed * 0x632BE59BD9B4E019ull + counter) >> 11) * 0x1.0p-53;
}
}  // namespace detail

inline std::vector<Eigen::VectorXd> random_starts(const Parameters& ps, int count, std::uint64_t seed) {
  std::vector<Eigen::VectorXd> s(static_cast<std::size_t>(count), Eigen::VectorXd(static_cast<Eigen::Index>(ps.size())));
  const std::uint64_t p = ps.size();
  for (std::uint64_t i = 0; i < static_cast<std::uint64_t>(count); ++i)
    for (std::uint64_t j = 0; j < p; ++j)
      s[i][static_cast<Eigen::Index>(j)] = ps[j].lo + (ps[j].hi - ps[j].lo) * detail::unit_uniform(seed, i * p + j);
  return s;
}

// "grid" | "random:N". The law's default is its grid when it has one, else random:500 (the
// iso-depth paper's choice).
struct StartPlan {
  enum class Kind { grid, random, given } kind = Kind::random;
  int count = 500;
  std::uint64_t seed = 0;
  std::vector<Eigen::VectorXd> given;  // fitted coordinates, full length
};

inline StartPlan parse_start_plan(const std::string& s, std::uint64_t seed) {
  StartPlan p;
  p.seed = seed;
  if (s == "grid") {
    p.kind = StartPlan::Kind::grid;
    return p;
  }
  if (s.rfind("random:", 0) == 0) {
    const std::string n = s.substr(7);
    char* end = nullptr;
    const long v = std::strtol(n.c_str(), &end, 10);
    if (n.empty() || *end != '\0' || v < 1 || v > 10'000'000)
      throw data_error("--starts random:N needs a count N >= 1, not '" + n + "'");
    p.kind = StartPlan::Kind::random;
    p.count = static_cast<int>(v);
    return p;
  }
  throw data_error("--starts must be grid or random:N, not '" + s + "'");
}

inline std::vector<Eigen::VectorXd> make_starts(const AnyLaw& law, const StartPlan& plan) {
  switch (plan.kind) {
    case StartPlan::Kind::grid: {
      auto g = law.grid();
      if (!g) throw data_error("law " + law.name() + " has no start grid; use --starts random:N");
      return *g;
    }
    case StartPlan::Kind::random: return random_starts(law.parameters(), plan.count, plan.seed);
    case StartPlan::Kind::given: return plan.given;
  }
  return {};
}

inline StartPlan default_start_plan(const AnyLaw& law, std::uint64_t seed = 0) {
  StartPlan p;
  p.seed = seed;
  p.kind = law.grid() ? StartPlan::Kind::grid : StartPlan::Kind::random;
  return p;
}

}  // namespace loopscale::law
