// The dashboard's pages, rendered on the server from store records: pure
// functions from data to HTML (every value escaped), so they are unit-
// tested without a server.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "runner/store/job_store.h"
#include "runner/ui/log_view.h"

namespace barge::runner::ui {

struct JobsQuery {
  std::optional<std::string> status;  // a status name, as in `barge ls --status`
  std::string name;                   // a substring of the name; "" = all
};

// `/`: the jobs table (as `barge ls`: id, name, status, nodes, started,
// duration, exit), newest first as given, with the filter form.
std::string JobsPage(const std::vector<JobRecord>& jobs, const JobsQuery& query, TimePoint now);

struct JobPageData {
  JobRecord job;
  std::vector<NodeRecord> nodes;
  std::vector<EventRecord> events;
  std::string timeline_svg;  // TimelineSvg of the job
  std::string csrf;          // for the stop form; shown only while the job is not final
  std::string notice;        // a line shown at the top ("" for none)
  // Kept logs of a finished job (a page), or nullopt: a running job's page
  // follows its output live instead.
  std::optional<LogPage> kept_log;
  std::optional<int> log_node;  // the node filter of the log view
  size_t log_page_size = 0;
};

// `/jobs/<id>`: status, stop button, nodes, timeline, logs, events.
std::string JobPage(const JobPageData& data, TimePoint now);

// A small page for a 4xx or 5xx answer.
std::string ErrorPage(int code, const std::string& message);

}  // namespace barge::runner::ui
