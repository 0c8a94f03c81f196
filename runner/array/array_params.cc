// CSV, JSON-lines and matrix expansion of a job array's rows.
#include "runner/array/array_params.h"

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "base/shell_word.h"
#include "runner/jobfile/job_text.h"
#include "runner/jobfile/job_values.h"

namespace barge::runner::array {
namespace {

// `header` names where the column names were read ("params.csv:1").
Status Check(const ArrayParams& p, const std::string& header) {
  std::set<std::string> seen;
  for (const std::string& c : p.columns) {
    if (Status s = CheckColumnName(c, header); !s.ok()) return s;
    if (!seen.insert(c).second) return Status::Error(header + ": column '" + c + "' is given twice");
  }
  if (p.columns.empty()) return Status::Error(p.source + ": no columns");
  if (p.rows.empty()) return Status::Error(p.source + ": no rows (a job array needs at least one)");
  return Status::Ok();
}

}  // namespace

Status CheckColumnName(const std::string& name, const std::string& source) {
  if (Status s = CheckArrayColumnName(name); !s.ok()) return Status::Error(source + ": " + s.message());
  return Status::Ok();
}

Result<ArrayParams> ParseCsv(std::string_view text, const std::string& file) {
  // The rows are kept as JSON (ParamsToJson), which holds UTF-8 only.
  if (const size_t bad = FindInvalidUtf8(text); bad != std::string_view::npos) {
    const auto line = 1 + std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(bad), '\n');
    return Status::Error(file + ":" + std::to_string(line) + ": not UTF-8 text (save the file as UTF-8)");
  }
  ArrayParams p;
  p.source = file;
  // Records of fields, with the line each record starts on.
  std::vector<std::pair<int, std::vector<std::string>>> records;
  std::vector<std::string> fields;
  std::string field;
  bool quoted = false, in_quotes = false, any = false;
  int line = 1, record_line = 1;
  auto end_field = [&] {
    fields.push_back(field);
    field.clear();
    quoted = false;
  };
  auto end_record = [&] {
    end_field();
    if (any) records.emplace_back(record_line, std::move(fields));
    fields.clear();
    any = false;
  };
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (in_quotes) {
      if (c == '"') {
        if (i + 1 < text.size() && text[i + 1] == '"') {
          field += '"';
          ++i;
        } else {
          in_quotes = false;
        }
      } else {
        if (c == '\n') ++line;
        field += c;
      }
      continue;
    }
    if (c == '"' && field.empty() && !quoted) {
      in_quotes = quoted = any = true;
    } else if (c == '"') {
      return Status::Error(file + ":" + std::to_string(line) +
                           ": a quote inside an unquoted field (quote the whole field and write \"\" for a quote)");
    } else if (c == ',') {
      any = true;
      end_field();
    } else if (c == '\n' || c == '\r') {
      if (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n') ++i;
      end_record();
      ++line;
      record_line = line;
    } else {
      if (quoted) {
        return Status::Error(file + ":" + std::to_string(line) + ": text after a closing quote");
      }
      any = true;
      field += c;
    }
  }
  if (in_quotes) return Status::Error(file + ":" + std::to_string(record_line) + ": unterminated quote");
  end_record();
  if (records.empty()) return Status::Error(file + ": empty (expected a header line of column names)");
  p.columns = records[0].second;
  const std::string header = file + ":" + std::to_string(records[0].first);
  for (size_t r = 1; r < records.size(); ++r) {
    if (records[r].second.size() != p.columns.size()) {
      return Status::Error(file + ":" + std::to_string(records[r].first) + ": " +
                           std::to_string(records[r].second.size()) + " field(s), but the header has " +
                           std::to_string(p.columns.size()));
    }
    p.rows.push_back(std::move(records[r].second));
  }
  if (Status s = Check(p, header); !s.ok()) return s;
  return p;
}

Result<ArrayParams> ParseJsonl(std::string_view text, const std::string& file) {
  ArrayParams p;
  p.source = file;
  int line_no = 0;
  std::string header = file;  // where the first object, whose keys are the columns, is
  std::istringstream in{std::string(text)};
  std::string line;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string at = file + ":" + std::to_string(line_no);
    nlohmann::ordered_json obj = nlohmann::ordered_json::parse(line, nullptr, false);
    if (obj.is_discarded() || !obj.is_object()) return Status::Error(at + ": expected one JSON object");
    std::vector<std::string> names, values;
    for (auto it = obj.begin(); it != obj.end(); ++it) {
      const auto& v = it.value();
      names.push_back(it.key());
      if (v.is_string()) {
        values.push_back(v.get<std::string>());
      } else if (v.is_number() || v.is_boolean()) {
        values.push_back(v.dump());
      } else {
        return Status::Error(at + ": " + QuoteValue(it.key()) + " must be a string, number or boolean");
      }
    }
    if (p.rows.empty() && p.columns.empty()) {
      p.columns = names;
      header = at;
    }
    std::vector<std::string> row(p.columns.size());
    if (names.size() != p.columns.size()) {
      return Status::Error(at + ": " + std::to_string(names.size()) + " key(s), but the first line has " +
                           std::to_string(p.columns.size()));
    }
    for (size_t i = 0; i < names.size(); ++i) {
      size_t c = 0;
      while (c < p.columns.size() && p.columns[c] != names[i]) ++c;
      if (c == p.columns.size()) {
        return Status::Error(at + ": key " + QuoteValue(names[i]) + " is not one of the first line's");
      }
      row[c] = values[i];
    }
    p.rows.push_back(std::move(row));
  }
  if (p.rows.empty()) return Status::Error(file + ": no rows (a job array needs at least one)");
  if (Status s = Check(p, header); !s.ok()) return s;
  return p;
}

Result<ArrayParams> ExpandMatrix(
    const std::vector<std::pair<std::string, std::vector<std::string>>>& matrix) {
  ArrayParams p;
  p.source = "array.matrix";
  p.rows.emplace_back();
  for (const auto& [name, values] : matrix) {
    p.columns.push_back(name);
    std::vector<std::vector<std::string>> next;
    for (const auto& row : p.rows) {
      for (const std::string& v : values) {
        next.push_back(row);
        next.back().push_back(v);
      }
    }
    p.rows = std::move(next);
  }
  if (matrix.empty()) p.rows.clear();
  if (Status s = Check(p, p.source); !s.ok()) return s;
  return p;
}

Result<ArrayParams> ReadArrayParams(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::Error(path + ": cannot read the array's file");
  std::stringstream text;
  text << in.rdbuf();
  auto ends_with = [&](std::string_view suffix) {
    return path.size() >= suffix.size() && path.compare(path.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  if (ends_with(".jsonl") || ends_with(".ndjson")) return ParseJsonl(text.str(), path);
  return ParseCsv(text.str(), path);
}

std::string ParamsToJson(const ArrayParams& params) {
  nlohmann::json j;
  j["source"] = params.source;
  j["columns"] = params.columns;
  j["rows"] = params.rows;
  return j.dump();
}

Result<ArrayParams> ParamsFromJson(std::string_view json) {
  nlohmann::json j = nlohmann::json::parse(json, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return Status::Error("the array's recorded rows are not JSON");
  try {
    ArrayParams p;
    p.source = j.at("source").get<std::string>();
    p.columns = j.at("columns").get<std::vector<std::string>>();
    p.rows = j.at("rows").get<std::vector<std::vector<std::string>>>();
    // Recorded by an older barge, whose column rule was looser: the rule
    // holds for a rerun too.
    if (Status st = Check(p, p.source); !st.ok()) return st;
    return p;
  } catch (const nlohmann::json::exception& e) {
    return Status::Error(std::string("the array's recorded rows: ") + e.what());
  }
}

std::string ParamsText(const ArrayParams& params, size_t row) {
  std::string out;
  for (size_t c = 0; c < params.columns.size() && row < params.rows.size(); ++c) {
    if (!out.empty()) out += ' ';
    out += params.columns[c] + "=" + ShellWord(params.rows[row][c]);
  }
  return out;
}

}  // namespace barge::runner::array
