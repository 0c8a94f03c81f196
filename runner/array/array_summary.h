// The summary table of a job array, printed when the array ends and by
// `barge show ARRAY`:
//   INDEX | PARAMS        | STATUS                 | EXIT | HOSTS    | DURATION
//   0     | lr=0.1 seed=1 | succeeded              | 0    | 10.77.0.1 | 2s
//   3     | lr=0.01 seed=2 | succeeded (2 attempts) | 0   | ...
// DURATION is the last attempt's, "-" for a member that never started (and
// to now for a running one).
#pragma once

#include <string>
#include <vector>

#include "runner/store/array_store.h"

namespace barge::runner::array {

std::string SummaryTable(const std::vector<MemberRecord>& members, TimePoint now);

// Rows of cells as a table whose columns are separated by " | " and padded
// to the widest cell; each line ends in '\n', trailing spaces dropped.
std::string PipeTable(const std::vector<std::vector<std::string>>& rows);

}  // namespace barge::runner::array
