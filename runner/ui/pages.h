// The dashboard's pages, rendered on the server from store records: pure
// functions from data to HTML (every value escaped), so they are unit-
// tested without a server.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "runner/store/array_view.h"
#include "runner/store/host_use.h"
#include "runner/store/job_store.h"
#include "runner/ui/live_hosts.h"
#include "runner/store/diagnostics_bundles.h"
#include "runner/store/upload_store.h"
#include "runner/store/usage.h"
#include "runner/ui/log_view.h"

namespace barge::runner::ui {

struct JobsQuery {
  std::optional<std::string> status;  // a status name, as in `barge ls --status`
  std::string name;                   // a substring of the name; "" = all
};

// `/`: the jobs table (as `barge ls`: id, name, status, nodes, started,
// duration, exit), newest first as given, with the filter form. Each array
// is one row among them, placed by its start as `barge ls` places it
// ("array running: running 2, succeeded 5", "N members"), linking to its
// page; the caller leaves its members' jobs out of `jobs`.
std::string JobsPage(const std::vector<JobRecord>& jobs, const std::vector<ArrayView>& arrays,
                     const JobsQuery& query, TimePoint now);

struct ArrayPageData {
  ArrayView view;
  // Every attempt's job by id (an attempt whose job was removed is
  // missing) and its nodes.
  std::map<std::string, JobRecord> jobs;
  std::map<std::string, std::vector<NodeRecord>> nodes;
};

// `/arrays/<id>`: the array's header and counts (as `barge show ARRAY`),
// its members (as `barge ls ARRAY`, with the summary's duration) and every
// attempt of every member with its job, hosts and exit code.
std::string ArrayPage(const ArrayPageData& data, TimePoint now);

struct HostsPageData {
  std::vector<HostUse> store;  // HostsInUse
  std::string store_owner;     // "user@machine" whose jobs the store holds
  // Whether `barge ui` was given hosts to ask, and what they answered
  // (nullopt while being asked for the first time).
  bool live_enabled = false;
  std::optional<LiveHostsReading> live;
  // What this store's jobs held of each host in the last `recent_days`
  // days (runner/store/usage.h UsageByHostInStore).
  int recent_days = 7;
  std::map<std::string, Usage> recent_use;
};

// `/hosts`: per host, from the store, the jobs that hold it (since when)
// and its queue, and its recent use; and, when enabled, each host's own
// listing: its failure record (out or not, each entry), its holds and
// leases, its queue of tickets in order, its barge containers.
std::string HostsPage(const HostsPageData& data, TimePoint now);

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
  // The diagnostics bundles of its failed attempts (linked: each file at
  // ROOT/jobs/ID/diagnostics/attempt-N/FILE).
  std::vector<DiagnosticsBundle> diagnostics;
  // Where its files went in object storage (as `barge show` lists them).
  std::vector<UploadRecord> uploads;
};

// `/jobs/<id>`: status, stop button, nodes, timeline, logs, diagnostics,
// object storage, events.
std::string JobPage(const JobPageData& data, TimePoint now);

// A small page for a 4xx or 5xx answer. `root`: the dashboard's root
// (auth.h), for an answer to a request that may see it (the page links to
// the jobs page); "" for a refused one (a page without links: it names
// nothing under the root, not even the stylesheet).
std::string ErrorPage(int code, const std::string& message, const std::string& root);

// The answer to a request that logged in, or that carried the token again:
// a page that moves the browser on to `url` (the same address without the
// token) at once, with a meta refresh, and a link. A refresh is a
// navigation the dashboard's own page starts, so the SameSite=Strict
// cookie goes with it even when the browser came to the token's URL from
// another site's link (where a redirect would go without it).
std::string MoveOnPage(const std::string& url);

}  // namespace barge::runner::ui
