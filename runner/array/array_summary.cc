// The summary table of a job array.
#include "runner/array/array_summary.h"

#include <algorithm>

#include "runner/console/table.h"
#include "runner/console/time_format.h"

namespace barge::runner::array {

std::string PipeTable(const std::vector<std::vector<std::string>>& rows) { return FormatTable(rows, " | "); }

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

}  // namespace barge::runner::array
