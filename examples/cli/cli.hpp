// Shared plumbing of the `loopscale` program: subcommands register themselves here, and every
// kind of bad input ends as one line on stderr and exit code 2.
#pragma once

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

#include "loopscale/util/thread_limit.hpp"
#include "loopscale/util/regular_file.hpp"
#include "loopscale/util/text.hpp"

namespace loopscale::cli {

// Bad input from the user: printed as one line, exit code 2.
struct usage_error : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

// A whole-number option in [lo, hi], with a message that says the range in words (CLI11's
// PositiveNumber and NonNegativeNumber print their range up to 1.8e308 in full: "Value 0 not in
// range 0.000000 to 17976..."). `range` is the words: "of at least 1", "from 0 (every core) to 1024".
inline CLI::Validator whole_number(long long lo, long long hi, const std::string& range, const std::string& name) {
  return CLI::Validator(
      [lo, hi, range](std::string& v) -> std::string {
        try {
          std::size_t used = 0;
          const long long x = std::stoll(v, &used);
          if (used == v.size() && x >= lo && x <= hi) return {};
        } catch (const std::exception&) {
        }
        return "must be a whole number " + range + ", not '" + v + "'";
      },
      name);
}

inline CLI::Validator at_least(long long lo) {
  return whole_number(lo, std::numeric_limits<long long>::max(), "of at least " + std::to_string(lo), ">= " + std::to_string(lo));
}

// A real-number option in [lo, hi]. CLI::Range compares with < and >, which NaN passes
// (--level nan then failed later as "the interval level must be in (0, 1)", naming no flag).
inline CLI::Validator number_in(double lo, double hi) {
  return CLI::Validator(
      [lo, hi](std::string& v) -> std::string {
        char* end = nullptr;
        const double x = std::strtod(v.c_str(), &end);
        if (!v.empty() && end == v.c_str() + v.size() && x >= lo && x <= hi) return {};
        return concat("must be a number from ", lo, " to ", hi, ", not '", v, "'");
      },
      concat(lo, " to ", hi));
}

// A --threads option: 0 (every core) up to loopscale::max_threads (util/thread_limit.hpp).
inline CLI::Validator thread_count() {
  return whole_number(0, max_threads, "from 0 (every core) to " + std::to_string(max_threads), "0 to " + std::to_string(max_threads));
}

// An output folder: an existing folder, or a path that is not there yet (the command makes it).
// The path and its nearest existing ancestor must be folders: a file there (`--out afile` or
// `--out afile/sub`) would otherwise surface as an exit-1 filesystem error ("cannot create
// directories: Not a directory") halfway through, or as a warning and a script that cannot run.
// And a folder must be makeable there: a name too long, a read-only file system, a folder without
// write permission or /proc failed the same way (and `train --dry-run` approved them), so the
// check makes an empty folder where the first one would go and removes it at once: permission
// bits alone do not say (root passes them, /proc refuses root).
// The one check of every output folder: train, sweep run/merge/slurm, data, eval --write-builtin.
inline std::string output_folder_fault(const std::string& v) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const auto can_make_in = [&](const fs::path& p) -> std::string {  // p: an existing folder
    std::string probe = (p / ".loopscale-write-check-XXXXXX").string();
    const std::string at = p == fs::path(v) ? v : v + ": " + p.string();
    if (::mkdtemp(probe.data()) == nullptr) return at + ": cannot make a folder in it: " + std::strerror(errno);
    if (!fs::remove(probe, ec)) return at + ": cannot remove the empty folder " + probe + " made to check it: " + ec.message();
    return {};
  };
  fs::path p(v);
  for (; !p.empty(); p = p.parent_path()) {
    const fs::file_status st = fs::symlink_status(p, ec);
    if (ec && ec != std::errc::no_such_file_or_directory && ec != std::errc::not_a_directory)
      return v + ": " + ec.message();  // "File name too long", "Permission denied"
    if (fs::exists(st)) {
      if (fs::is_symlink(st) && !fs::exists(p, ec)) return v + ": " + p.string() + " is a link to nothing";
      if (!fs::is_directory(p, ec)) return p == fs::path(v) ? v + " is a file, not a folder" : v + ": " + p.string() + " is a file, not a folder";
      return can_make_in(p);
    }
    if (p == p.parent_path()) return {};  // the root, or a name whose parent is itself
  }
  return can_make_in(".");  // a relative path none of whose folders exists goes in the working folder
}

inline CLI::Validator output_folder() {
  return CLI::Validator([](std::string& v) { return output_folder_fault(v); }, "FOLDER");
}

// A whole number that an integer option's type cannot hold: CLI11 reads them with strtoll and
// strtoull, which saturate (`--seed 18446744073709551616` was taken as 18446744073709551615, and
// `--d-model 99999999999999999999` as 2^63 - 1, then refused showing that number), and strtoull
// reads "-1" as 2^64 - 1. The fault of `v` as a T: "" where it fits or is no whole number at all
// (CLI11's own "Could not convert: --seed = 1.5" says so). Read as CLI11 reads it (base 0: 0x10 is
// 16), except that a leading zero is refused: base 0 reads `--seed 010` as octal 8 without a word,
// and `--threads 010` passed a check that read 10, then ran 8 threads.
template <class T>
std::string integer_fault(const std::string& v) {
  static_assert(std::is_integral_v<T> && !std::is_same_v<T, bool>);
  {
    std::size_t d = v.find_first_not_of(" \t+-");
    if (d != std::string::npos && v[d] == '0' && d + 1 < v.size() && std::isdigit(static_cast<unsigned char>(v[d + 1])))
      return concat(v, " has a leading zero, which would read as an octal number; write it without");
  }
  const char* s = v.c_str();
  char* end = nullptr;
  errno = 0;
  bool fits = false;
  if constexpr (std::is_unsigned_v<T>) {
    std::size_t first = 0;
    while (first < v.size() && std::isspace(static_cast<unsigned char>(v[first]))) ++first;
    if (first < v.size() && v[first] == '-') return concat("must not be negative, not ", v);
    const unsigned long long x = std::strtoull(s, &end, 0);
    fits = errno != ERANGE && std::in_range<T>(x);
  } else {
    const long long x = std::strtoll(s, &end, 0);
    fits = errno != ERANGE && std::in_range<T>(x);
  }
  if (v.empty() || end != s + v.size() || fits) return {};
  return concat(v, " is out of range (", std::numeric_limits<T>::min(), " to ", std::numeric_limits<T>::max(), ")");
}

// Every integer option of `app` and of its subcommands, checked with integer_fault as CLI11 reads
// it: the one check of them all (main.cpp calls it once every command is registered). CLI11 names
// their type INT or UINT; the check reads them as 64 bits, and a value that fits 64 bits but not a
// narrower option (an int) is CLI11's "Could not convert: --polish = 3000000000". A list option
// (add_distinct_list) checks each of its entries itself: its value as given, "1,2", is no number here.
inline void check_integer_options(CLI::App& app) {
  for (CLI::Option* o : app.get_options()) {
    const std::string type = o->get_type_name();
    const std::string base = type.substr(0, type.find(':'));  // "INT:0 to 1024": a check's description follows
    if (base == "UINT") o->check(CLI::Validator([](std::string& v) { return integer_fault<std::uint64_t>(v); }, ""));
    if (base == "INT") o->check(CLI::Validator([](std::string& v) { return integer_fault<std::int64_t>(v); }, ""));
  }
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) check_integer_options(*sub);
}

// A file to write: not a folder, and in a folder that exists (a write would otherwise fail after
// the work that produced it, as an exit-1 filesystem error).
inline CLI::Validator output_file() {
  return CLI::Validator(
      [](std::string& v) -> std::string {
        std::error_code ec;
        const std::filesystem::path p(v);
        if (std::filesystem::is_directory(p, ec)) return v + " is a folder, not a file";
        const std::filesystem::path parent = p.has_parent_path() ? p.parent_path() : std::filesystem::path(".");
        if (!std::filesystem::is_directory(parent, ec)) return "the folder " + parent.string() + " of " + v + " does not exist";
        return {};
      },
      "FILE");
}

// An input file given as a folder: `std::ifstream` opens a folder and then fails on its first read
// ("basic_filebuf::underflow"), so the readers ask first. `what` says which file: "the spec file",
// "--config", "design: --fit".
inline void refuse_folder(const std::string& path, const std::string& what, const std::string& kind) {
  if (std::filesystem::is_directory(path)) throw usage_error(what + " " + path + " is a folder, not " + kind);
}

// The text of a JSON input file the user names (design --fit, account --compare, a sweep spec,
// train --config), read whole by read_input_file (util/regular_file.hpp): a folder is refused as
// not `kind`, and a device, a socket or a pipe that no process writes to (each blocked the reader
// for ever, or read without end) as that, after `what`; a pipe with a writer (`<(jq ...)`) is read.
inline std::string read_input(const std::string& path, const std::string& what, const std::string& kind) {
  refuse_folder(path, what, kind);
  InputFile f = read_input_file(path);
  if (!f.fault.empty()) throw usage_error(what + " " + f.fault);
  return std::move(f.text);
}

// A list whose entries each make a run, a row or a member of a set (`optimal --r 1,2,4`, `design
// --R`/`--E`, `eval --r-eval`, a repeated `optimal --budget`, `fit --law a,b`): an entry given twice
// would plan the same run or print the same row twice, so the first repeat is refused, naming the
// flag and the value. Entries compare as the values they convert to: `--R 2,2.0` repeats 2.
template <class T>
void refuse_repeats(const std::vector<T>& list, const std::string& flag) {
  for (auto it = list.begin(); it != list.end(); ++it)
    if (std::find(list.begin(), it, *it) != it) {
      std::ostringstream v;
      v << *it;
      throw usage_error(flag + " lists " + v.str() + " twice");
    }
}

// A list option whose entries must differ (refuse_repeats), given by repeating the flag
// (`optimal --budget 1e18 --budget 1e19`) and, with delimiter ',', also as one value split at its
// commas (`--r-eval 1,2,4`). The commas are split here, not by CLI11's ->delimiter(): CLI11 2.1.2
// drops the empty pieces of a delimited value before a callback sees them, so `--r-eval 1,,2` ran
// as 1,2 and `--r-eval ''` as 0. An empty entry is refused naming the flag and the value; an entry
// that does not convert gives CLI11's own "Could not convert: --r-eval = 1,x". Checked as CLI11
// reads the flag, so every command refuses the same way; the list's initial value is the default
// the help shows.
template <class T>
CLI::Option* add_distinct_list(CLI::App& app, const std::string& name, std::vector<T>& list, const std::string& help, char delimiter = '\0') {
  CLI::Option* o = app.add_option(
      name,
      [&list, name, delimiter](const CLI::results_t& given) {
        std::vector<T> v;
        if (given.empty()) throw usage_error(name + ": an empty entry in ''");
        for (const std::string& value : given) {
          std::vector<std::string> pieces;
          if (delimiter == '\0') {
            pieces.push_back(value);
          } else {
            for (std::size_t at = 0;;) {
              const std::size_t end = value.find(delimiter, at);
              pieces.push_back(value.substr(at, end == std::string::npos ? std::string::npos : end - at));
              if (end == std::string::npos) break;
              at = end + 1;
            }
          }
          for (const std::string& piece : pieces) {
            if (piece.find_first_not_of(" \t") == std::string::npos) throw usage_error(name + ": an empty entry in '" + value + "'");
            if constexpr (std::is_integral_v<T>)
              if (const std::string f = integer_fault<T>(piece); !f.empty()) throw usage_error(name + ": " + f);
            T x{};
            if (!CLI::detail::lexical_cast(piece, x)) throw CLI::ConversionError(name, given);
            v.push_back(std::move(x));
          }
        }
        refuse_repeats(v, name);
        list = std::move(v);
        return true;
      },
      help, false);
  o->type_name(CLI::detail::type_name<std::vector<T>>());
  o->type_size(CLI::detail::type_count_min<std::vector<T>>::value, CLI::detail::type_count<std::vector<T>>::value);
  o->expected(CLI::detail::expected_count<std::vector<T>>::value);
  if (!list.empty()) {
    std::ostringstream d;
    for (std::size_t i = 0; i < list.size(); ++i) d << (i ? "," : "[") << list[i];
    o->default_str(d.str() + "]");
  }
  return o;
}

using Register = std::function<void(CLI::App&)>;

inline std::vector<Register>& registry() {
  static std::vector<Register> r;
  return r;
}

// Each subcommand's file holds `const bool registered_<file> = cli::add_command(...)` in an
// anonymous namespace: a name of its own, so the files can be compiled as one unit (LOOPSCALE_UNITY_BUILD).
inline bool add_command(Register r) {
  registry().push_back(std::move(r));
  return true;
}

}  // namespace loopscale::cli
