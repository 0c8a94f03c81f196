// The errors of a job file as tests compare them: one line each, as
// JobFileError::ToString() writes it ("job.yaml:4:10: slurm.nodes: ...").
// Header-only, for the unit tests of runner/jobfile.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "runner/jobfile/job_file.h"

namespace barge::testing {

// Every error of `job`, in order.
inline std::vector<std::string> ErrorLines(const runner::LoadedJob& job) {
  std::vector<std::string> lines;
  for (const runner::JobFileError& e : job.errors) lines.push_back(e.ToString());
  return lines;
}

// The same for a job file that must be refused: a test failure (naming
// `text`) when it parsed without errors.
inline std::vector<std::string> RefusedWith(const runner::LoadedJob& job, const std::string& text) {
  EXPECT_FALSE(job.spec.has_value()) << "parsed without errors:\n" << text;
  return ErrorLines(job);
}

}  // namespace barge::testing
