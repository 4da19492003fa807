// Reading a user's JSON file without trusting its nesting or its keys. nlohmann parses and destroys a value
// iteratively, but copies, compares and dumps it recursively: "[[[...]]]" 100000 levels deep
// parses fine and then overflows the stack (SIGSEGV) in the first error message that dumps it or
// the first copy. No file loopscale reads nests deeper than a few levels, so the readers of user
// files parse through parse_json_bounded, which refuses the file at parse time; and error messages
// describe a bad value with json_brief, which is bounded however the value was made.
#pragma once

#include <set>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace loopscale {

// Far above any file loopscale writes or reads (a model spec nests 5 levels), far below what
// overflows the stack.
inline constexpr int json_depth_limit = 128;

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

// A text a user wrote (a CSV cell, a flag's value) for an error message: quoted, control
// characters escaped so the message stays one line (a quoted CSV field may hold a newline),
// invalid UTF-8 replaced, at most about 60 characters.
inline std::string text_brief(const std::string& text) {
  std::string s = nlohmann::json(text).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (s.size() > 60) s = s.substr(0, 56) + "...\"";
  return s;
}

// The kind of a JSON value in words, for "KEY must be a number, not \"512\"": nlohmann's own
// type_error ("type must be number, but is string") names neither the key nor the value, so readers
// compare a value's kind with the kind its setting has first (train configs, model specs).
inline const char* json_kind(const nlohmann::json& x) {
  return x.is_number() ? "a number" : x.is_string() ? "a string" : x.is_boolean() ? "true or false" : x.is_object() ? "an object" : x.is_array() ? "a list" : "null";
}

// nlohmann's message without its "[json.exception.type_error.302] " tag, for the last-resort
// catch of a reader whose own checks did not foresee the fault.
inline std::string json_error_text(const nlohmann::json::exception& e) {
  const std::string what = e.what();
  const std::size_t tag = what.rfind("[json.exception.", 0) == 0 ? what.find("] ") : std::string::npos;
  return tag == std::string::npos ? what : what.substr(tag + 2);
}

// nlohmann::json::parse(in), refusing a document nested deeper than json_depth_limit levels with
// Error("WHERE: JSON nested deeper than N levels"), and an object that names a key twice with
// Error("WHERE: the key \"K\" appears twice in one object"): nlohmann keeps the last value without a
// word, so `{"loss": 3.5, "loss": 9}` fitted 9 and a config's second "lr" trained. Other parse
// failures throw nlohmann's exceptions as parse does, for the caller's existing handling; where
// `last_key` is given it holds the last key the parse reached, which json_parse_fault names (a
// number past a double, "rmse": 1e400, fails without saying where).
template <class Error, class Input>
nlohmann::json parse_json_bounded(Input&& in, const std::string& where, std::string* last_key = nullptr) {
  using event_t = nlohmann::json::parse_event_t;
  std::vector<std::set<std::string>> keys;  // the keys seen so far in each object open around the event
  // depth is the number of arrays and objects already open around the event.
  const nlohmann::json::parser_callback_t cb = [&](int depth, event_t event, nlohmann::json& parsed) {
    if ((event == event_t::array_start || event == event_t::object_start) && depth >= json_depth_limit)
      throw Error(where + ": JSON nested deeper than " + std::to_string(json_depth_limit) + " levels");
    if (event == event_t::object_start) keys.emplace_back();
    if (event == event_t::object_end && !keys.empty()) keys.pop_back();
    if (event == event_t::key && !keys.empty() && !keys.back().insert(parsed.get<std::string>()).second)
      throw Error(where + ": the key " + json_brief(parsed) + " appears twice in one object");  // quoted and escaped: one line
    if (event == event_t::key && last_key) *last_key = parsed.get<std::string>();
    return true;
  };
  return nlohmann::json::parse(std::forward<Input>(in), cb);
}

// Why a JSON text did not parse, in words, for "F is not JSON ... (WHY)": empty, or nlohmann's
// message without its tag. A syntax error says its line and column; a number past a double
// (out_of_range) says nothing of where, so it gets the key whose value was being read (`last_key`
// from parse_json_bounded).
inline std::string json_parse_fault(const std::string& text, const nlohmann::json::exception& e, const std::string& last_key) {
  if (text.find_first_not_of(" \t\r\n") == std::string::npos) return "the file is empty";
  std::string why = json_error_text(e);
  if (!last_key.empty() && dynamic_cast<const nlohmann::json::out_of_range*>(&e))
    why = "at the value of " + json_brief(nlohmann::json(last_key)) + ": " + why;
  return why;
}

}  // namespace loopscale
