// The rows of a job array: read from a CSV file (a header line of column
// names), a JSON-lines file (one object per line), or expanded from a
// matrix (every combination). Each row becomes one member job; its columns
// become environment variables and {array.COLUMN} substitutions.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"

namespace barge::runner::array {

struct ArrayParams {
  std::vector<std::string> columns;            // in file / matrix order
  std::vector<std::vector<std::string>> rows;  // each as many values as columns
  std::string source;                          // "params.csv", "matrix", for messages
};

// CSV (RFC 4180): fields separated by ',', optionally in double quotes ("" is
// a quote inside them; a quoted field may hold commas and line breaks);
// lines end in \n or \r\n; blank lines are skipped. The first line names the
// columns. Errors name `file`, the line and the column: text that is not
// UTF-8 (the rows are stored as JSON), a row with a different number of
// fields, an unterminated quote, a column name that is not an environment
// variable name, a repeated column, no rows.
[[nodiscard]] Result<ArrayParams> ParseCsv(std::string_view text, const std::string& file);

// JSON lines: each non-blank line one object whose values are strings,
// numbers or booleans (numbers as JSON writes them: 0.1, 3). The columns are
// the first object's keys in order; every line must have exactly those.
[[nodiscard]] Result<ArrayParams> ParseJsonl(std::string_view text, const std::string& file);

// Every combination of the columns' values, the first column varying
// slowest: {lr: [0.1, 0.01], seed: [1, 2]} gives (0.1,1) (0.1,2) (0.01,1)
// (0.01,2).
[[nodiscard]] Result<ArrayParams> ExpandMatrix(
    const std::vector<std::pair<std::string, std::vector<std::string>>>& matrix);

// Reads `path`: .jsonl (or .ndjson) as JSON lines, anything else as CSV.
[[nodiscard]] Result<ArrayParams> ReadArrayParams(const std::string& path);

// CheckArrayColumnName (runner/jobfile/job_values.h), the error prefixed
// with `source` (the file and the line of the header).
[[nodiscard]] Status CheckColumnName(const std::string& name, const std::string& source);

// {"source": ..., "columns": [...], "rows": [[...], ...]}, as the store
// keeps an array's rows (so that `barge rerun ARRAY` needs no file).
std::string ParamsToJson(const ArrayParams& params);
[[nodiscard]] Result<ArrayParams> ParamsFromJson(std::string_view json);

// "lr=0.1 seed=1": a row as the summary table shows it.
std::string ParamsText(const ArrayParams& params, size_t row);

}  // namespace barge::runner::array
