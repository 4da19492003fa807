// A string as a JSON literal, for the summaries bench_model.cu and bench_gemm.cu write by hand
// (quotes and backslashes escaped; the names they write hold no control characters).
#pragma once

#include <string>

namespace loopscale::bench {

inline std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (const char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

}  // namespace loopscale::bench
