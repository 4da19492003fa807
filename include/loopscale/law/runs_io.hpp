// Reading runs from disk: CSV with a header line, or JSONL with one object per line. The result is
// a RunTable of text cells; RunReader (runs.hpp) turns the columns a law needs into numbers, so a
// column that no law reads may hold anything.
#pragma once

#include <filesystem>
#include <sstream>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "loopscale/law/runs.hpp"
#include "loopscale/util/json_parse.hpp"
#include "loopscale/util/regular_file.hpp"

namespace loopscale::law {

namespace detail {

// One CSV record (RFC 4180 quoting: "a, b" and "" inside quotes). Returns false at end of input.
// A quoted field may span lines; `line` advances by the lines consumed.
inline bool csv_record(std::istream& in, std::vector<std::string>& fields, long& line, const std::string& source) {
  fields.clear();
  std::string text;
  if (!std::getline(in, text)) return false;
  ++line;
  std::string field;
  bool quoted = false;
  for (std::size_t i = 0;; ++i) {
    if (i == text.size()) {
      if (quoted) {  // the quoted field goes on on the next line
        std::string more;
        if (!std::getline(in, more)) throw data_error("data: " + source + " line " + std::to_string(line) + ": a quote that never closes");
        ++line;
        field += '\n';
        text += '\n' + more;
        continue;
      }
      break;
    }
    const char c = text[i];
    if (quoted) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') field += '"', ++i;
      else if (c == '"') quoted = false;
      else field += c;
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      fields.push_back(field);
      field.clear();
    } else if (c != '\r') {
      field += c;
    } else if (i + 1 < text.size()) {
      // A CR is a CRLF file's line end; anywhere else it was dropped, and "3<CR>5" read as 35.
      throw data_error("data: " + source + " line " + std::to_string(line) +
                       ": a carriage return inside a line (outside quotes, one is read only as a CRLF line end)");
    }
  }
  fields.push_back(field);
  return true;
}

inline bool blank(const std::string& s) { return s.find_first_not_of(" \t\r\n") == std::string::npos; }

inline constexpr std::string_view utf8_bom = "\xEF\xBB\xBF";

}  // namespace detail

inline RunTable read_csv(std::istream& in, const std::string& source) {
  RunTable t;
  t.source = source;
  long line = 0;
  std::vector<std::string> fields;
  if (!detail::csv_record(in, fields, line, source)) throw data_error("data: " + source + " is empty (no CSV header)");
  t.header = fields;
  // A UTF-8 byte-order mark before the first column (spreadsheets write one) is not part of its name:
  // it made "N" read as "\xEF\xBB\xBFN", and the file as having "no column 'N'".
  if (!t.header.empty() && t.header[0].starts_with(detail::utf8_bom)) t.header[0].erase(0, detail::utf8_bom.size());
  for (auto& h : t.header) h.erase(h.find_last_not_of(" \t") + 1), h.erase(0, h.find_first_not_of(" \t"));
  // A column named twice: which one a variable reads would be an accident of order.
  for (std::size_t i = 0; i < t.header.size(); ++i)
    for (std::size_t k = 0; k < i; ++k)
      if (t.header[i] == t.header[k])
        throw data_error("data: " + source + " line 1: column '" + t.header[i] + "' appears twice in the header (columns " +
                         std::to_string(k + 1) + " and " + std::to_string(i + 1) + ")");
  t.cells.assign(t.header.size(), {});
  while (true) {
    const long start = line + 1;
    if (!detail::csv_record(in, fields, line, source)) break;
    if (fields.size() == 1 && detail::blank(fields[0])) continue;
    if (fields.size() != t.header.size())
      throw data_error("data: " + source + " line " + std::to_string(start) + ": " + std::to_string(fields.size()) +
                       " fields, the header has " + std::to_string(t.header.size()));
    for (std::size_t c = 0; c < fields.size(); ++c) t.cells[c].push_back(fields[c]);
    t.lines.push_back(start);
  }
  return t;
}

// JSONL: every line one object; its keys are the columns (the union over lines; a row lacking a
// key an earlier one had is an error, as a missing CSV field would be). Numbers and strings are
// both kept as text; nested values are rejected.
inline RunTable read_jsonl(std::istream& in, const std::string& source) {
  RunTable t;
  t.source = source;
  std::string text;
  long line = 0;
  std::vector<nlohmann::json> rows;
  std::vector<long> lines;
  while (std::getline(in, text)) {
    ++line;
    if (line == 1 && text.starts_with(detail::utf8_bom)) text.erase(0, detail::utf8_bom.size());  // as read_csv
    if (detail::blank(text)) continue;
    nlohmann::json j;
    try {
      j = parse_json_bounded<data_error>(text, "data: " + source + " line " + std::to_string(line));
    } catch (const nlohmann::json::out_of_range&) {  // 1e400 (tests/fuzz): a number, not a malformed line
      throw data_error("data: " + source + " line " + std::to_string(line) + ": a number beyond the range of a double");
    } catch (const nlohmann::json::exception&) {
      throw data_error("data: " + source + " line " + std::to_string(line) + ": not a JSON object (the line is not JSON)");
    }
    if (!j.is_object()) throw data_error("data: " + source + " line " + std::to_string(line) + ": not a JSON object");
    for (auto it = j.begin(); it != j.end(); ++it)
      if (t.column(it.key()) < 0) t.header.push_back(it.key());
    rows.push_back(std::move(j));
    lines.push_back(line);
  }
  t.cells.assign(t.header.size(), {});
  for (std::size_t r = 0; r < rows.size(); ++r) {
    for (std::size_t c = 0; c < t.header.size(); ++c) {
      const auto it = rows[r].find(t.header[c]);
      const std::string where = source + " line " + std::to_string(lines[r]) + ", key '" + t.header[c] + "'";
      if (it == rows[r].end()) throw data_error("data: " + where + " is missing");
      if (it->is_string()) t.cells[c].push_back(it->get<std::string>());
      else if (it->is_number()) {
        std::ostringstream s;
        s.precision(17);
        s << it->get<double>();
        t.cells[c].push_back(s.str());
      } else if (it->is_null()) t.cells[c].push_back("null");
      else throw data_error("data: " + where + " must be a number or a string");
    }
  }
  t.lines = std::move(lines);
  return t;
}

// By extension: .jsonl / .ndjson / .json are JSON lines, anything else CSV.
inline RunTable read_table(const std::string& path) {
  // A folder opened as a stream and read as empty ("no CSV header"), a pipe nobody writes to
  // blocked the reader and /dev/zero filled memory: read_input_file names each (a pipe with a
  // writer, `fit --data <(...)`, is read).
  const InputFile file = read_input_file(path);
  if (!file.fault.empty()) throw data_error("data: " + file.fault + "; runs are read from a CSV or JSONL file");
  std::istringstream in(file.text);
  const auto ends = [&](const char* ext) {
    const std::string e(ext);
    return path.size() >= e.size() && path.compare(path.size() - e.size(), e.size(), e) == 0;
  };
  if (ends(".jsonl") || ends(".ndjson") || ends(".json")) return read_jsonl(in, path);
  return read_csv(in, path);
}

}  // namespace loopscale::law
