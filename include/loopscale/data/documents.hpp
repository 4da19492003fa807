// Input text, read as a stream of documents: plain text files and JSON Lines files.
//
//   text   a document is a whole file (DocumentUnit::file), a paragraph (lines up to a blank
//          line; its lines keep their newlines) or a line (without its newline; blank lines are
//          skipped)
//   jsonl  one JSON object per line; the document is the string in its text field (--text-field,
//          default "text"); empty lines are skipped. A line that is not a JSON object, lacks the
//          field, holds a non-string there or names a key twice in one object is an error naming
//          the file and line.
// Folders are read recursively, files in name order (hidden files, and what is not a regular
// file, skipped); a file given by name that is a pipe, socket or device is an error. The format is
// chosen by extension (.jsonl, .ndjson: jsonl; anything else: text) unless given. An input with no
// document at all is an error naming it (an input whose documents are all empty: prepare.hpp).
//
// Reading is streamed: next_batch() returns records of about `batch_bytes` bytes in input order,
// so a corpus larger than memory is read in pieces. A JSON record is parsed by text_of(), which the
// encoding workers call in parallel.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <sys/types.h>

#include "loopscale/data/error.hpp"
#include "loopscale/util/json_parse.hpp"
#include "loopscale/util/regular_file.hpp"

namespace loopscale::data {

enum class InputFormat { automatic, text, jsonl };
enum class DocumentUnit { file, paragraph, line };

struct InputOptions {
  std::vector<std::string> paths;  // files or folders
  InputFormat format = InputFormat::automatic;
  std::string text_field = "text";  // jsonl
  DocumentUnit unit = DocumentUnit::file;  // text
};

// One record of the input: a document's text, or a JSON line to take it from.
struct Record {
  std::string raw;
  bool json = false;
  std::size_t file = 0;   // index into DocumentReader::files()
  std::uint64_t line = 0;  // 1-based line of the record's start
};

inline InputFormat format_of(const std::filesystem::path& p, InputFormat given) {
  if (given != InputFormat::automatic) return given;
  const std::string e = p.extension().string();
  return e == ".jsonl" || e == ".ndjson" ? InputFormat::jsonl : InputFormat::text;
}

// The files of the inputs, folders expanded recursively in name order.
inline std::vector<std::filesystem::path> expand_inputs(const std::vector<std::string>& paths) {
  namespace fs = std::filesystem;
  std::vector<fs::path> files;
  if (paths.empty()) throw corpus_error("data: no input given");
  for (const std::string& p : paths) {
    std::error_code ec;
    if (fs::is_directory(p, ec)) {
      std::vector<fs::path> in;
      for (auto it = fs::recursive_directory_iterator(p, fs::directory_options::skip_permission_denied, ec);
           !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
        const std::string name = it->path().filename().string();
        if (!name.empty() && name[0] == '.') {
          if (it->is_directory()) it.disable_recursion_pending();
          continue;
        }
        if (it->is_regular_file()) in.push_back(it->path());
      }
      if (ec) throw corpus_error("data: cannot read the folder " + p + ": " + ec.message());
      if (in.empty()) throw corpus_error("data: the input folder " + p + " holds no files (empty input)");
      std::sort(in.begin(), in.end());
      files.insert(files.end(), in.begin(), in.end());
    } else if (fs::is_regular_file(p, ec)) {
      files.emplace_back(p);
    } else if (const std::string why = not_a_file(p); !why.empty()) {
      throw corpus_error("data: the input " + why);
    } else {
      throw corpus_error("data: cannot open input " + p);
    }
  }
  return files;
}

class DocumentReader {
 public:
  explicit DocumentReader(InputOptions o) : o_(std::move(o)), files_(expand_inputs(o_.paths)) {}

  const std::vector<std::filesystem::path>& files() const { return files_; }
  const InputOptions& options() const { return o_; }

  // The next records, about `batch_bytes` of them (at least one); empty at the end.
  std::vector<Record> next_batch(std::size_t batch_bytes = std::size_t{16} << 20) {
    std::vector<Record> out;
    std::size_t bytes = 0;
    while (bytes < batch_bytes) {
      if (!f_ && !open_next()) break;
      Record r;
      if (!next_record(r)) {
        close_current();
        continue;
      }
      bytes += r.raw.size() + 64;
      out.push_back(std::move(r));
    }
    return out;
  }

  // The document text of a record (parses a JSON line).
  std::string text_of(const Record& r) const {
    if (!r.json) return r.raw;
    const std::string where = files_[r.file].string() + ":" + std::to_string(r.line);
    nlohmann::json j;
    try {
      // A key given twice is refused as every reader of users' JSON refuses it: nlohmann kept the
      // last value, so {"text": "aaaa", "text": "b"} was the document "b" without a word.
      j = parse_json_bounded<corpus_error>(r.raw, "data: " + where);
    } catch (const nlohmann::json::exception&) {
      throw corpus_error("data: " + where + " is not a JSON line");
    }
    if (!j.is_object()) throw corpus_error("data: " + where + " is not a JSON object");
    const auto it = j.find(o_.text_field);
    if (it == j.end()) throw corpus_error("data: " + where + " has no text field '" + o_.text_field + "' (see --text-field)");
    if (!it->is_string()) throw corpus_error("data: " + where + ": field '" + o_.text_field + "' is not a string");
    return it->get<std::string>();
  }

  // Documents read so far per file (for the empty-input check).
  std::uint64_t records() const { return records_; }

 private:
  bool open_next() {
    if (next_ >= files_.size()) return false;
    cur_ = next_++;
    f_ = std::fopen(files_[cur_].c_str(), "rb");
    if (!f_) throw corpus_error("data: cannot open input " + files_[cur_].string());
    fmt_ = format_of(files_[cur_], o_.format);
    line_ = 0;
    file_records_ = 0;
    return true;
  }
  void close_current() {
    std::fclose(f_);
    f_ = nullptr;
    if (file_records_ == 0) throw corpus_error("data: " + files_[cur_].string() + " holds no document (empty input)");
  }
  // One line without its newline; false at the end of the file. `had_newline` says whether it ended
  // with one.
  bool read_line(std::string& s, bool& had_newline) {
    const ssize_t n = ::getline(&line_buf_, &line_cap_, f_);  // keeps NUL bytes, unlike fgets
    if (n < 0) {
      if (std::ferror(f_)) throw corpus_error("data: cannot read " + files_[cur_].string());
      s.clear();
      had_newline = false;
      return false;
    }
    ++line_;
    had_newline = n > 0 && line_buf_[n - 1] == '\n';
    s.assign(line_buf_, static_cast<std::size_t>(n) - (had_newline ? 1 : 0));
    return true;
  }
  static bool blank(const std::string& s) { return s.find_first_not_of(" \t\r") == std::string::npos; }

  bool next_record(Record& r) {
    r.file = cur_;
    std::string line;
    bool nl = false;
    if (fmt_ == InputFormat::jsonl) {
      while (read_line(line, nl)) {
        if (blank(line)) continue;
        r.raw = std::move(line);
        r.json = true;
        r.line = line_;
        return count(r);
      }
      return false;
    }
    switch (o_.unit) {
      case DocumentUnit::file: {
        if (file_records_ > 0) return false;
        std::string s;
        char buf[1 << 16];
        std::size_t n;
        while ((n = std::fread(buf, 1, sizeof buf, f_)) > 0) s.append(buf, n);
        if (std::ferror(f_)) throw corpus_error("data: cannot read " + files_[cur_].string());
        if (s.empty()) return false;
        r.raw = std::move(s);
        r.line = 1;
        return count(r);
      }
      case DocumentUnit::line:
        while (read_line(line, nl)) {
          if (blank(line)) continue;
          r.raw = std::move(line);
          r.line = line_;
          return count(r);
        }
        return false;
      case DocumentUnit::paragraph: {
        r.raw.clear();
        while (read_line(line, nl)) {
          if (blank(line)) {
            if (r.raw.empty()) continue;
            break;
          }
          if (r.raw.empty()) r.line = line_;
          r.raw += line;
          r.raw += '\n';
        }
        if (r.raw.empty()) return false;
        return count(r);
      }
    }
    return false;
  }
  bool count(const Record&) {
    ++file_records_;
    ++records_;
    return true;
  }

  InputOptions o_;
  std::vector<std::filesystem::path> files_;
  std::size_t next_ = 0, cur_ = 0;
  std::FILE* f_ = nullptr;
  InputFormat fmt_ = InputFormat::text;
  std::uint64_t line_ = 0, file_records_ = 0, records_ = 0;
  char* line_buf_ = nullptr;  // getline's buffer
  std::size_t line_cap_ = 0;

 public:
  ~DocumentReader() {
    if (f_) std::fclose(f_);
    std::free(line_buf_);
  }
  DocumentReader(const DocumentReader&) = delete;
  DocumentReader& operator=(const DocumentReader&) = delete;
};

}  // namespace loopscale::data
