// Fuzz target for the rows of a job array (runner/array/array_params.h):
// ParseCsv and ParseJsonl, both on every input (the whole input is the
// file's text).
//
// Checks, besides "never crashes" and the sanitizers:
//   - a parse that succeeds names the file, has columns and rows, every row
//     as many values as there are columns, the columns distinct and each a
//     name CheckColumnName accepts;
//   - its rows survive the store: ParamsFromJson(ParamsToJson(p)) is p (the
//     record `barge rerun` reads back);
//   - they read back the same written as CSV (every field quoted) and as
//     JSON lines (every value a string), whichever form they came from;
//   - a refused file's message is short and has no control bytes.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "runner/array/array_params.h"
#include "tests/fuzz/fuzz_checks.h"

namespace {

using barge::runner::array::ArrayParams;
using barge::runner::array::CheckColumnName;
using barge::runner::array::ParamsFromJson;
using barge::runner::array::ParamsText;
using barge::runner::array::ParamsToJson;
using barge::runner::array::ParseCsv;
using barge::runner::array::ParseJsonl;

constexpr char kTarget[] = "array_rows_fuzz";

void Check(bool ok, const char* what, std::string_view detail = {}) {
  if (!ok) barge::fuzz::Fail(kTarget, what, detail);
}

bool SameRows(const ArrayParams& a, const ArrayParams& b) {
  return a.columns == b.columns && a.rows == b.rows;
}

std::string CsvField(const std::string& value) {
  std::string out = "\"";
  for (char c : value) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

std::string AsCsv(const ArrayParams& p) {
  std::string out;
  auto record = [&](const std::vector<std::string>& fields) {
    for (size_t i = 0; i < fields.size(); ++i) out += (i ? "," : "") + CsvField(fields[i]);
    out += "\r\n";
  };
  record(p.columns);
  for (const auto& row : p.rows) record(row);
  return out;
}

std::string AsJsonl(const ArrayParams& p) {
  std::string out;
  for (const auto& row : p.rows) {
    nlohmann::ordered_json object = nlohmann::ordered_json::object();
    for (size_t c = 0; c < p.columns.size(); ++c) object[p.columns[c]] = row[c];
    out += object.dump() + "\n";
  }
  return out;
}

void CheckParams(const ArrayParams& p, const std::string& file) {
  Check(p.source == file, "the source is not the file", p.source);
  Check(!p.columns.empty() && !p.rows.empty(), "no columns or no rows");
  for (size_t c = 0; c < p.columns.size(); ++c) {
    Check(CheckColumnName(p.columns[c], file).ok(), "a column CheckColumnName refuses", p.columns[c]);
    for (size_t d = 0; d < c; ++d) Check(p.columns[d] != p.columns[c], "a column twice", p.columns[c]);
  }
  for (size_t r = 0; r < p.rows.size(); ++r) {
    Check(p.rows[r].size() == p.columns.size(), "a row with another number of values");
    (void)ParamsText(p, r);
  }
  auto stored = ParamsFromJson(ParamsToJson(p));
  Check(stored.ok(), "the stored rows do not read back", stored.status().message());
  Check(SameRows(*stored, p) && stored->source == p.source, "the stored rows read back otherwise");
  auto csv = ParseCsv(AsCsv(p), "again.csv");
  Check(csv.ok(), "the rows written as CSV do not read back", csv.status().message());
  Check(SameRows(*csv, p), "the rows written as CSV read back otherwise");
  auto jsonl = ParseJsonl(AsJsonl(p), "again.jsonl");
  Check(jsonl.ok(), "the rows written as JSON lines do not read back", jsonl.status().message());
  Check(SameRows(*jsonl, p), "the rows written as JSON lines read back otherwise");
}

void CheckParse(const barge::Result<ArrayParams>& parsed, const std::string& file) {
  if (parsed.ok()) {
    CheckParams(*parsed, file);
  } else {
    barge::fuzz::CheckMessage(kTarget, parsed.status().message(), 600);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  CheckParse(ParseCsv(text, "rows.csv"), "rows.csv");
  CheckParse(ParseJsonl(text, "rows.jsonl"), "rows.jsonl");
  return 0;
}
