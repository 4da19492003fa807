// Reading a user's JSON file without trusting its nesting. nlohmann parses and destroys a value
// iteratively, but copies, compares and dumps it recursively: "[[[...]]]" 100000 levels deep
// parses fine and then overflows the stack (SIGSEGV) in the first error message that dumps it or
// the first copy. No file loopscale reads nests deeper than a few levels, so the readers of user
// files parse through parse_json_bounded, which refuses the file at parse time; and error messages
// describe a bad value with json_brief, which is bounded however the value was made.
#pragma once

#include <string>
#include <utility>

#include <nlohmann/json.hpp>

namespace loopscale {

// Far above any file loopscale writes or reads (a model spec nests 5 levels), far below what
// overflows the stack.
inline constexpr int json_depth_limit = 128;

// nlohmann::json::parse(in), refusing a document nested deeper than json_depth_limit levels with
// Error("WHERE: JSON nested deeper than N levels"). Other parse failures throw nlohmann's
// exceptions as parse does, for the caller's existing handling.
template <class Error, class Input>
nlohmann::json parse_json_bounded(Input&& in, const std::string& where) {
  // depth is the number of arrays and objects already open around the event.
  const nlohmann::json::parser_callback_t cb = [&](int depth, nlohmann::json::parse_event_t event, nlohmann::json&) {
    if ((event == nlohmann::json::parse_event_t::array_start || event == nlohmann::json::parse_event_t::object_start) &&
        depth >= json_depth_limit)
      throw Error(where + ": JSON nested deeper than " + std::to_string(json_depth_limit) + " levels");
    return true;
  };
  return nlohmann::json::parse(std::forward<Input>(in), cb);
}

namespace detail {
inline bool json_shallower_than(const nlohmann::json& v, int levels) {
  if (!v.is_structured()) return true;
  if (levels <= 1) return false;
  for (const auto& e : v)
    if (!json_shallower_than(e, levels - 1)) return false;
  return true;
}
}  // namespace detail

// A bad value for an error message, at most about 60 characters: its JSON when that is short and
// shallow, else what kind of value it is (dumping a deep value would overflow the stack).
inline std::string json_brief(const nlohmann::json& v) {
  if (!detail::json_shallower_than(v, 8)) return v.is_array() ? "a deeply nested array" : "a deeply nested object";
  std::string s = v.dump();
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  return s;
}

}  // namespace loopscale
