// The summary table of a job array.
#include "runner/fleet/array_summary.h"

#include <algorithm>

#include "runner/jobs_cli.h"

namespace barge::runner::fleet {

std::string PipeTable(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> widths;
  for (const auto& row : rows) {
    if (widths.size() < row.size()) widths.resize(row.size(), 0);
    for (size_t c = 0; c < row.size(); ++c) widths[c] = std::max(widths[c], row[c].size());
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (size_t c = 0; c < row.size(); ++c) {
      line += row[c];
      if (c + 1 < row.size()) line += std::string(widths[c] - row[c].size(), ' ') + " | ";
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  return out;
}

std::string SummaryTable(const std::vector<MemberRecord>& members, TimePoint now) {
  std::vector<std::vector<std::string>> rows = {{"INDEX", "PARAMS", "STATUS", "EXIT", "HOSTS", "DURATION"}};
  for (const MemberRecord& m : members) {
    std::string status = ToString(m.status);
    if (m.attempts > 1) status += " (" + std::to_string(m.attempts) + " attempts)";
    std::string duration = "-";
    if (m.started) duration = FormatDuration(m.ended.value_or(now) - *m.started);
    rows.push_back({std::to_string(m.index), m.params, status,
                    m.exit_code ? std::to_string(*m.exit_code) : "-", m.hosts.empty() ? "-" : m.hosts,
                    duration});
  }
  return PipeTable(rows);
}

}  // namespace barge::runner::fleet
