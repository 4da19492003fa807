// The router and balancing options of a model's MoE layers, and their text forms. Training choices,
// not architecture: they change neither the parameter count nor the accounting's FLOPs, so they
// live beside the spec rather than in it, and every MoE layer of a model shares them. Parsed once,
// here, for the command line, train configs and sweeps; the kernels (kernels/moe_router.hpp) read
// the parsed values. Nothing here needs the engine, so `loopscale account` can check the flags
// without including a kernel.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <string>

#include "loopscale/spec/spec.hpp"
#include "loopscale/util/names.hpp"

namespace loopscale::train {

enum class RouterKind : std::uint8_t { softmax, sigmoid };
enum class Balance : std::uint8_t { none, aux_loss, bias };

constexpr auto names_of(RouterKind) {
  return make_names<RouterKind>({{RouterKind::softmax, "softmax"}, {RouterKind::sigmoid, "sigmoid"}});
}

struct MoeRouting {
  RouterKind router = RouterKind::softmax;
  bool renormalize = true;          // gates divided by their sum over the K chosen experts
  Balance balance = Balance::aux_loss;
  double aux_coef = 0.01;           // Switch aux loss coefficient (balance == aux_loss)
  double bias_rate = 1e-3;          // aux-loss-free bias step (balance == bias)
  double z_coef = 0.0;              // router z-loss coefficient (0: off)
  double capacity_factor = 0.0;     // 0: dropless; > 0: C = ceil(factor * N K / E) slots per expert
};

// "softmax" | "sigmoid". Errors are one line naming the bad value.
inline RouterKind parse_router(const std::string& s) {
  if (const auto r = parse_name<RouterKind>(s)) return *r;
  throw spec_error(concat("moe: router must be ", name_choices<RouterKind>(), ", not '", s, "'"));
}

// "none" | "aux:COEF" | "bias:RATE" into r.balance and its coefficient.
inline void parse_balance(const std::string& s, MoeRouting& r) {
  if (s == "none") {
    r.balance = Balance::none;
    return;
  }
  const auto colon = s.find(':');
  const std::string kind = s.substr(0, colon);
  if (colon == std::string::npos || (kind != "aux" && kind != "bias"))
    throw spec_error("moe: balance must be none, aux:COEF or bias:RATE, not '" + s + "'");
  const std::string num = s.substr(colon + 1);
  char* end = nullptr;
  const double v = std::strtod(num.c_str(), &end);
  if (num.empty() || end != num.c_str() + num.size() || !std::isfinite(v) || v < 0)
    throw spec_error("moe: balance " + kind + " needs a non-negative number, not '" + num + "'");
  if (kind == "aux") {
    r.balance = Balance::aux_loss;
    r.aux_coef = v;
  } else {
    r.balance = Balance::bias;
    r.bias_rate = v;
  }
}

// The inverse of parse_balance.
inline std::string balance_text(const MoeRouting& r) {
  const auto num = [](double v) {
    std::ostringstream o;
    o << v;
    return o.str();
  };
  switch (r.balance) {
    case Balance::aux_loss: return concat("aux:", num(r.aux_coef));
    case Balance::bias: return concat("bias:", num(r.bias_rate));
    default: return "none";
  }
}

inline void validate(const MoeRouting& r) {
  if (!(r.capacity_factor >= 0) || !std::isfinite(r.capacity_factor))
    throw spec_error("moe: capacity factor must be positive (0 = dropless)");
  if (!(r.z_coef >= 0) || !std::isfinite(r.z_coef)) throw spec_error("moe: z-loss coefficient must not be negative");
}

}  // namespace loopscale::train
