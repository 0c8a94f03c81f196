#include "runner/ui/pages.h"

#include <algorithm>
#include <climits>
#include <cstdint>

#include "runner/console/time_format.h"
#include "runner/ui/html.h"

namespace barge::runner::ui {

namespace {

std::string StatusCell(JobStatus status) {
  const std::string s = ToString(status);
  return "<span class=\"status status-" + s + "\">" + s + "</span>";
}

std::string Duration(const JobRecord& job, TimePoint now) {
  const TimePoint end = job.ended.value_or(IsFinal(job.status) ? job.created : now);
  return FormatDuration(std::max(std::chrono::milliseconds(0), end - job.created));
}

std::string Exit(const std::optional<int>& code) {
  return code ? std::to_string(*code) : "-";
}

// Relative to the page's <base>, the dashboard's root (html.h).
std::string JobHref(const std::string& id) { return "jobs/" + UrlEncode(id); }
std::string ArrayHref(const std::string& id) { return "arrays/" + UrlEncode(id); }

std::string JobLink(const std::string& id) {
  return "<a href=\"" + JobHref(id) + "\">" + HtmlEscape(id) + "</a>";
}

std::string Td(const std::string& escaped, bool num = false) {
  return std::string(num ? "<td class=\"num\">" : "<td>") + escaped + "</td>";
}

std::string MemberStatusCell(MemberStatus status) {
  const std::string s = ToString(status);
  return "<span class=\"status status-" + s + "\">" + s + "</span>";
}

// An array's status (running, succeeded, failed, cancelled, lost) styled as
// the job statuses of the same name.
std::string ArrayStatusCell(const std::string& status) {
  return "<span class=\"status status-" + HtmlEscape(status) + "\">" + HtmlEscape(status) + "</span>";
}

int CountOf(const std::vector<MemberRecord>& members, MemberStatus s) {
  return static_cast<int>(std::count_if(members.begin(), members.end(),
                                        [&](const MemberRecord& m) { return m.status == s; }));
}

std::string ArrayRow(const ArrayView& v, TimePoint now) {
  const ArrayRecord& a = v.array;
  std::string counts;
  for (const auto& [st, name] : kMemberStatusNames) {
    counts += " data-" + std::string(name) + "=\"" + std::to_string(CountOf(v.members, st)) + "\"";
  }
  const std::string text = CountsText(v.members);
  return "<tr class=\"array\" data-id=\"" + HtmlEscape(a.id) + "\" data-status=\"" + HtmlEscape(a.status) +
         "\" data-size=\"" + std::to_string(a.size) + "\"" + counts + "><td><a href=\"" + ArrayHref(a.id) + "\">" +
         HtmlEscape(a.id) + "</a></td>" + Td(HtmlEscape(a.name)) + "<td>array " + ArrayStatusCell(a.status) +
         (text.empty() ? "" : ": <span class=\"counts\">" + HtmlEscape(text) + "</span>") + "</td>" +
         Td(std::to_string(a.size) + " members", true) + Td(HtmlEscape(LocalTime(a.created, false))) +
         Td(FormatDuration(std::max(std::chrono::milliseconds(0), a.ended.value_or(now) - a.created)), true) +
         Td(Exit(a.exit_code), true) + "</tr>\n";
}

std::string Ago(TimePoint t, TimePoint now) {
  return HtmlEscape(LocalTime(t, false)) + " <span class=\"muted\">(" +
         FormatDuration(std::max(std::chrono::milliseconds(0), now - t)) + " ago)</span>";
}

}  // namespace

std::string JobsPage(const std::vector<JobRecord>& jobs, const std::vector<ArrayView>& arrays,
                     const JobsQuery& query, TimePoint now) {
  std::string b = "<h1>Jobs</h1>\n<form class=\"filter\" method=\"get\" action=\"./\">"
                  "<label>status <select name=\"status\"><option value=\"\">any</option>";
  for (const auto& [value, name] : kJobStatusNames) {
    const std::string s(name);
    b += "<option value=\"" + s + "\"" + (query.status && *query.status == s ? " selected" : "") + ">" + s +
         "</option>";
  }
  b += "</select></label> <label>name <input name=\"name\" value=\"" + HtmlEscape(query.name) +
       "\"></label> <button type=\"submit\">filter</button></form>\n";
  b += "<table id=\"jobs\"><thead><tr><th>ID</th><th>NAME</th><th>STATUS</th><th>NODES</th>"
       "<th>STARTED</th><th>DURATION</th><th>EXIT</th></tr></thead><tbody>\n";
  // Newest first, as `barge ls`: an array goes before the first job made
  // before it.
  size_t next_array = 0;
  auto arrays_made_after = [&](std::optional<TimePoint> t) {
    while (next_array < arrays.size() && (!t || arrays[next_array].array.created >= *t)) {
      b += ArrayRow(arrays[next_array++], now);
    }
  };
  for (const JobRecord& j : jobs) {
    arrays_made_after(j.created);
    b += "<tr class=\"job\" data-id=\"" + HtmlEscape(j.id) + "\" data-status=\"" +
         ToString(j.status) + "\"><td><a href=\"" + JobHref(j.id) + "\">" + HtmlEscape(j.id) +
         "</a></td><td>" + HtmlEscape(j.name) + "</td><td>" + StatusCell(j.status) +
         "</td><td class=\"num\">" + std::to_string(j.nodes) + "</td><td>" +
         HtmlEscape(LocalTime(j.created, false)) + "</td><td class=\"num\">" +
         Duration(j, now) + "</td><td class=\"num\">" + Exit(j.exit_code) + "</td></tr>\n";
  }
  arrays_made_after(std::nullopt);
  b += "</tbody></table>\n";
  if (jobs.empty() && arrays.empty()) b += "<p class=\"muted\">No job matches.</p>\n";
  return PageShell("barge: jobs", b, "./");  // at ROOT/
}

std::string ArrayPage(const ArrayPageData& d, TimePoint now) {
  const ArrayRecord& a = d.view.array;
  const std::vector<MemberRecord>& members = d.view.members;
  std::string b = "<h1>Array " + HtmlEscape(a.id) + " (" + HtmlEscape(a.name) + ") " +
                  "<span id=\"array-status\" data-status=\"" + HtmlEscape(a.status) + "\">" +
                  ArrayStatusCell(a.status) + "</span></h1>\n";
  b += "<table class=\"summary\"><tr><th>members</th><td>" + std::to_string(a.size) +
       "</td><th>at most at once</th><td>" + std::to_string(a.parallel) + "</td><th>retries</th><td>" +
       std::to_string(a.retries) + "</td><th>started</th><td>" + HtmlEscape(LocalTime(a.created, false)) +
       "</td><th>duration</th><td>" +
       FormatDuration(std::max(std::chrono::milliseconds(0), a.ended.value_or(now) - a.created)) +
       "</td><th>exit</th><td>" + Exit(a.exit_code) + "</td></tr></table>\n";
  b += "<p id=\"array-counts\">members: " + HtmlEscape(CountsText(members)) +
       " <span class=\"muted\">(as <code>barge show " + HtmlEscape(a.id) + "</code>)</span></p>\n";

  // As `barge ls ARRAY`, with the summary's status ("(N attempts)") and
  // duration (the last attempt's; to now while it runs).
  b += "<h2>Members</h2>\n<table id=\"members\"><thead><tr><th>INDEX</th><th>JOB</th><th>PARAMS</th>"
       "<th>STATUS</th><th>ATTEMPTS</th><th>EXIT</th><th>HOSTS</th><th>DURATION</th></tr></thead><tbody>\n";
  for (const MemberRecord& m : members) {
    std::string status = MemberStatusCell(m.status);
    if (m.attempts > 1) status += " (" + std::to_string(m.attempts) + " attempts)";
    const std::string duration =
        m.started ? FormatDuration(std::max(std::chrono::milliseconds(0), m.ended.value_or(now) - *m.started)) : "-";
    b += "<tr class=\"member\" data-index=\"" + std::to_string(m.index) + "\" data-status=\"" +
         ToString(m.status) + "\" data-attempts=\"" + std::to_string(m.attempts) + "\">" +
         Td(std::to_string(m.index), true) + Td(m.job_ids.empty() ? "-" : JobLink(m.job_ids.back())) +
         Td(HtmlEscape(m.params)) + Td(status) + Td(std::to_string(m.attempts), true) + Td(Exit(m.exit_code), true) +
         Td(m.hosts.empty() ? "-" : HtmlEscape(m.hosts)) + Td(duration, true) + "</tr>\n";
  }
  b += "</tbody></table>\n";

  b += "<h2>Attempts</h2>\n<table id=\"attempts\"><thead><tr><th>MEMBER</th><th>ATTEMPT</th><th>JOB</th>"
       "<th>STATUS</th><th>HOSTS</th><th>EXIT</th><th>STARTED</th><th>DURATION</th></tr></thead><tbody>\n";
  size_t attempts = 0;
  for (const MemberRecord& m : members) {
    for (size_t i = 0; i < m.job_ids.size(); ++i) {
      ++attempts;
      const std::string& id = m.job_ids[i];
      auto job = d.jobs.find(id);
      std::string head = "<tr class=\"attempt\" data-index=\"" + std::to_string(m.index) + "\" data-attempt=\"" +
                         std::to_string(i + 1) + "\" data-job=\"" + HtmlEscape(id) + "\"";
      if (job == d.jobs.end()) {
        b += head + ">" + Td(std::to_string(m.index), true) + Td(std::to_string(i + 1), true) +
             Td(HtmlEscape(id)) + "<td colspan=\"5\" class=\"muted\">removed</td></tr>\n";
        continue;
      }
      const JobRecord& j = job->second;
      std::vector<std::string> hosts;
      if (auto n = d.nodes.find(id); n != d.nodes.end()) {
        for (const NodeRecord& node : n->second) {
          if (std::find(hosts.begin(), hosts.end(), node.host) == hosts.end()) hosts.push_back(node.host);
        }
      }
      std::string host_text;
      for (const std::string& h : hosts) host_text += (host_text.empty() ? "" : ",") + h;
      b += head + " data-status=\"" + ToString(j.status) + "\">" + Td(std::to_string(m.index), true) +
           Td(std::to_string(i + 1), true) + Td(JobLink(id)) + Td(StatusCell(j.status)) +
           Td(host_text.empty() ? "-" : HtmlEscape(host_text)) + Td(Exit(j.exit_code), true) +
           Td(HtmlEscape(LocalTime(j.created, false))) + Td(Duration(j, now), true) + "</tr>\n";
    }
  }
  b += "</tbody></table>\n";
  if (attempts == 0) b += "<p class=\"muted\">No member has started yet.</p>\n";
  return PageShell("barge: array " + a.id + " (" + a.name + ")", b, "../");  // at ROOT/arrays/ID
}

namespace {

std::string HostSection(const std::string& host, const std::string& cls, const std::string& inner) {
  return "<section class=\"" + cls + "\" data-host=\"" + HtmlEscape(host) + "\"><h3>" + HtmlEscape(host) +
         "</h3>\n" + inner + "</section>\n";
}

// "hold host", "hold gpu-0", "lease", "queued #2", as `barge hosts` says.
std::string LiveWhat(const LiveHold& h) {
  if (h.ticket) return h.queue_position ? "queued #" + std::to_string(*h.queue_position) : "ticket (stale)";
  if (h.lease) return "lease";
  constexpr std::string_view kHold = "barge-hold-";
  return "hold " + (h.name.rfind(kHold, 0) == 0 ? h.name.substr(kHold.size()) : h.name);
}

// The host's failure record: whether it is out of every job's choice, its
// GPUs out, and each entry; nothing when it has none.
std::string RecordSection(const LiveHost& h) {
  const LiveRecord& r = h.record;
  if (r.entries.empty()) return "";
  std::string in = "<h4>failure record</h4>\n";
  const std::string rule = std::to_string(r.counted) + " host-caused failure(s) in the last " +
                           FormatDuration(std::chrono::seconds(r.window_s)) + " (more than " +
                           std::to_string(r.allowed) + " put it out)";
  in += std::string("<p class=\"") + (r.out ? "notice error\" id=\"record-out" : "muted") + "\">" +
        (r.out ? "Out of every job's choice: " : "") + HtmlEscape(rule) + ". <code>barge hosts --forgive " +
        HtmlEscape(h.host) + "</code> clears it.</p>\n";
  if (!r.gpus_out.empty()) {
    std::string gpus;
    for (int g : r.gpus_out) gpus += (gpus.empty() ? "" : ",") + std::to_string(g);
    in += "<p class=\"notice\">GPU(s) " + gpus + " out of every job's choice.</p>\n";
  }
  in += "<table class=\"record\"><thead><tr><th>AT (UTC)</th><th>KIND</th><th>GPU</th><th>JOB</th><th>NAME</th>"
        "<th>USER@MACHINE</th><th>DETAIL</th></tr></thead><tbody>\n";
  for (const LiveFault& f : r.entries) {
    in += "<tr class=\"fault\" data-kind=\"" + HtmlEscape(f.kind) + "\">" + Td(HtmlEscape(f.at)) + Td(HtmlEscape(f.kind)) +
          Td(f.gpu ? std::to_string(*f.gpu) : "-") + Td(JobLink(f.job)) + Td(HtmlEscape(f.job_name)) +
          Td(HtmlEscape(f.user + "@" + f.machine)) + Td(HtmlEscape(f.detail)) + "</tr>\n";
  }
  return in + "</tbody></table>\n";
}

std::string LiveHostSection(const LiveHost& h) {
  std::string in;
  if (!h.error.empty()) in += "<p class=\"notice error\">cannot ask: " + HtmlEscape(h.error) + "</p>\n";
  in += RecordSection(h);
  std::vector<const LiveHold*> holds, queue;
  for (const LiveHold& x : h.holds) (x.ticket ? queue : holds).push_back(&x);
  std::stable_sort(queue.begin(), queue.end(), [](const LiveHold* a, const LiveHold* b) {
    return a->queue_position.value_or(INT32_MAX) < b->queue_position.value_or(INT32_MAX);
  });
  if (h.error.empty() && h.holds.empty() && h.containers.empty() && !h.record.out) in += "<p class=\"free\">free</p>\n";
  if (!holds.empty()) {
    in += "<table class=\"holds\"><thead><tr><th>WHAT</th><th>JOB</th><th>NAME</th><th>USER@MACHINE</th>"
          "<th>SINCE (UTC)</th><th>GPUS</th><th>STALE AT</th></tr></thead><tbody>\n";
    for (const LiveHold* x : holds) {
      in += "<tr class=\"hold\" data-job=\"" + HtmlEscape(x->job) + "\" data-name=\"" + HtmlEscape(x->name) +
            "\">" + Td(HtmlEscape(LiveWhat(*x))) + Td(JobLink(x->job)) + Td(HtmlEscape(x->job_name)) +
            Td(HtmlEscape(x->user + "@" + x->machine)) + Td(HtmlEscape(x->since)) +
            Td(x->gpus.empty() ? "-" : HtmlEscape(x->gpus)) +
            Td(x->stale ? "stale now" : x->stale_at.empty() ? "never" : HtmlEscape(x->stale_at)) + "</tr>\n";
    }
    in += "</tbody></table>\n";
  }
  if (!queue.empty()) {
    in += "<h4>queue</h4>\n<table class=\"queue\"><thead><tr><th>PLACE</th><th>JOB</th><th>NAME</th>"
          "<th>USER@MACHINE</th><th>WAITING SINCE (UTC)</th></tr></thead><tbody>\n";
    for (const LiveHold* x : queue) {
      in += "<tr class=\"ticket\" data-job=\"" + HtmlEscape(x->job) + "\">" + Td(HtmlEscape(LiveWhat(*x))) +
            Td(JobLink(x->job)) + Td(HtmlEscape(x->job_name)) + Td(HtmlEscape(x->user + "@" + x->machine)) +
            Td(HtmlEscape(x->since)) + "</tr>\n";
    }
    in += "</tbody></table>\n";
  }
  if (!h.containers.empty()) {
    in += "<h4>barge containers</h4>\n<table class=\"containers\"><thead><tr><th>CONTAINER</th><th>JOB</th>"
          "<th>ROLE</th><th>RANK</th><th>STATUS</th></tr></thead><tbody>\n";
    for (const LiveContainer& c : h.containers) {
      in += "<tr class=\"container\" data-job=\"" + HtmlEscape(c.job) + "\">" + Td(HtmlEscape(c.name)) +
            Td(JobLink(c.job)) + Td(HtmlEscape(c.role)) + Td(HtmlEscape(c.rank), true) + Td(HtmlEscape(c.status)) +
            "</tr>\n";
    }
    in += "</tbody></table>\n";
  }
  return HostSection(h.host, "host live", in);
}

std::string StoreHostSection(const HostUse& u, const std::string& owner, TimePoint now) {
  std::string in;
  if (!u.holds.empty()) {
    in += "<table class=\"holds\"><thead><tr><th>JOB</th><th>NAME</th><th>USER@MACHINE</th><th>STATUS</th>"
          "<th>SINCE</th></tr></thead><tbody>\n";
    for (const HostJob& j : u.holds) {
      in += "<tr class=\"hold\" data-job=\"" + HtmlEscape(j.job_id) + "\" data-status=\"" + ToString(j.status) +
            "\">" + Td(JobLink(j.job_id)) + Td(HtmlEscape(j.job_name)) + Td(HtmlEscape(owner)) +
            Td(StatusCell(j.status)) + Td(Ago(j.since, now)) + "</tr>\n";
    }
    in += "</tbody></table>\n";
  }
  if (!u.queue.empty()) {
    in += "<h4>queue</h4>\n<table class=\"queue\"><thead><tr><th>PLACE</th><th>JOB</th><th>NAME</th>"
          "<th>USER@MACHINE</th><th>WAITING SINCE</th><th>FOR</th></tr></thead><tbody>\n";
    for (size_t i = 0; i < u.queue.size(); ++i) {
      const HostJob& j = u.queue[i];
      in += "<tr class=\"ticket\" data-job=\"" + HtmlEscape(j.job_id) + "\">" + Td("#" + std::to_string(i + 1)) +
            Td(JobLink(j.job_id)) + Td(HtmlEscape(j.job_name)) + Td(HtmlEscape(owner)) + Td(Ago(j.since, now)) +
            Td(HtmlEscape(j.detail)) + "</tr>\n";
    }
    in += "</tbody></table>\n";
  }
  return HostSection(u.host, "host stored", in);
}

// Each host's host-hours and GPU-hours of this store's jobs in the recent window.
std::string RecentUseSection(const HostsPageData& d) {
  const std::string days = std::to_string(d.recent_days) + "d";
  std::string b = "<h2>Recent use</h2>\n<div id=\"recent-use\">\n<p class=\"muted\">What the jobs of " +
                  HtmlEscape(d.store_owner) + " held in the last " + std::to_string(d.recent_days) +
                  " days, as <code>barge usage --by host --since " + days +
                  "</code>: from each node's start to its container's removal.</p>\n";
  if (d.recent_use.empty()) return b + "<p class=\"muted\" id=\"no-recent-use\">None.</p>\n</div>\n";
  b += "<table class=\"use\"><thead><tr><th>HOST</th><th>HOST-HOURS</th><th>GPU-HOURS</th></tr></thead><tbody>\n";
  for (const auto& [host, u] : d.recent_use) {
    b += "<tr class=\"use\" data-host=\"" + HtmlEscape(host) + "\">" + Td(HtmlEscape(host)) +
         Td(FormatHours(u.host_hours), true) + Td(FormatHours(u.gpu_hours, u.gpus_unknown), true) + "</tr>\n";
  }
  return b + "</tbody></table>\n</div>\n";
}

}  // namespace

std::string HostsPage(const HostsPageData& d, TimePoint now) {
  std::string b = "<h1>Hosts</h1>\n";
  b += "<h2>From the hosts</h2>\n<div id=\"live-hosts\">\n";
  if (!d.live_enabled) {
    b += "<p class=\"muted\">Not asked: start the dashboard with <code>barge ui --job-file FILE</code> or "
         "<code>--hosts a,b</code> to list what the hosts themselves hold (as <code>barge hosts</code>).</p>\n";
  } else if (!d.live) {
    b += "<p class=\"muted\" id=\"live-asking\">The hosts are being asked; reload in a moment.</p>\n";
  } else {
    const LiveHostsReading& r = *d.live;
    b += "<p class=\"muted\">As <code>" + HtmlEscape(r.command) + "</code> answered at " +
         HtmlEscape(LocalTime(r.at, false)) + ".</p>\n";
    if (!r.error.empty()) b += "<p class=\"notice error\" id=\"live-error\">" + HtmlEscape(r.error) + "</p>\n";
    for (const LiveHost& h : r.hosts) b += LiveHostSection(h);
  }
  b += "</div>\n<h2>From this machine's job store</h2>\n<div id=\"stored-hosts\">\n";
  b += "<p class=\"muted\">The hosts the live jobs run by " + HtmlEscape(d.store_owner) +
       " use: a job holds its hosts from its last preflight until it ends; a waiting job stands in each "
       "host's queue from when it began to wait.</p>\n";
  for (const HostUse& u : d.store) b += StoreHostSection(u, d.store_owner, now);
  if (d.store.empty()) b += "<p class=\"muted\" id=\"no-stored-hosts\">No live job holds or waits for a host.</p>\n";
  b += "</div>\n" + RecentUseSection(d);
  return PageShell("barge: hosts", b, "./");  // at ROOT/hosts
}

namespace {

// Where the job's files went in object storage: each object, the local file, its size, MD5 and outcome; nothing when none.
std::string UploadsSection(const std::vector<UploadRecord>& uploads, bool job_ended) {
  if (uploads.empty()) return "";
  std::string b = "<h2>Object storage</h2>\n<table id=\"uploads\"><thead><tr><th>SENT TO</th><th>FILE</th>"
                  "<th>SIZE</th><th>MD5</th><th>OUTCOME</th></tr></thead><tbody>\n";
  for (const UploadRecord& u : uploads) {
    const std::string state = job_ended && u.state == UploadState::kSending ? "interrupted" : ToString(u.state);
    // The s3:// name; its HTTP(S) URL (signed access only, mostly) as a title.
    b += "<tr data-state=\"" + state + "\"><td title=\"" + HtmlEscape(u.url) + "\">" + HtmlEscape(u.name) +
         "</td><td>" + HtmlEscape(u.local) + "</td><td class=\"num\">" + (u.size > 0 ? FormatBytes(u.size) : "-") +
         "</td><td><code>" + HtmlEscape(u.md5.empty() ? "-" : u.md5) + "</code></td><td>" +
         HtmlEscape(UploadOutcomeText(u, job_ended)) + "</td></tr>\n";
  }
  return b + "</tbody></table>\n";
}

}  // namespace

std::string JobPage(const JobPageData& d, TimePoint now) {
  const JobRecord& j = d.job;
  std::string b = "<h1>Job " + HtmlEscape(j.id) + " (" + HtmlEscape(j.name) + ") " +
                  "<span id=\"job-status\" data-status=\"" + ToString(j.status) + "\">" +
                  StatusCell(j.status) + "</span></h1>\n";
  if (!d.notice.empty()) b += "<p class=\"notice\">" + HtmlEscape(d.notice) + "</p>\n";
  b += "<table class=\"summary\"><tr><th>created</th><td>" +
       HtmlEscape(LocalTime(j.created, false)) + "</td><th>duration</th><td>" +
       Duration(j, now) + "</td><th>exit</th><td>" + Exit(j.exit_code) +
       "</td><th>restarts</th><td>" + std::to_string(j.restart_count) + "</td><th>nodes</th><td>" +
       std::to_string(j.nodes) + "</td></tr></table>\n";
  if (!IsFinal(j.status)) {
    b += "<form class=\"stop\" method=\"post\" action=\"" + JobHref(j.id) +
         "/stop\"><input type=\"hidden\" name=\"csrf\" value=\"" + HtmlEscape(d.csrf) +
         "\"><button type=\"submit\" id=\"stop\">stop</button> <span class=\"muted\">the same "
         "as <code>barge down " +
         HtmlEscape(j.id) + "</code></span></form>\n";
  }

  b += "<h2>Timeline</h2>\n" + d.timeline_svg;

  b += "<h2>Nodes</h2>\n<table id=\"nodes\"><thead><tr><th>RANK</th><th>ROLE</th><th>HOST</th>"
       "<th>CONTAINER</th><th>EXIT</th></tr></thead><tbody>\n";
  for (const NodeRecord& n : d.nodes) {
    b += "<tr><td class=\"num\">" + std::to_string(n.rank) + "</td><td>" + HtmlEscape(n.role) +
         "</td><td>" + HtmlEscape(n.host) + "</td><td>" + HtmlEscape(n.container_name) +
         "</td><td class=\"num\">" + Exit(n.exit_code) + "</td></tr>\n";
  }
  b += "</tbody></table>\n";

  b += "<h2>Logs</h2>\n<form class=\"filter\" method=\"get\" action=\"" + JobHref(j.id) +
       "\"><label>node <select name=\"node\" id=\"log-node\"><option value=\"\">all</option>";
  for (const NodeRecord& n : d.nodes) {
    b += "<option value=\"" + std::to_string(n.rank) + "\"" +
         (d.log_node && *d.log_node == n.rank ? " selected" : "") + ">" +
         std::to_string(n.rank) + " " + HtmlEscape(n.role) + " " + HtmlEscape(n.host) +
         "</option>";
  }
  b += "</select></label>";
  if (d.kept_log) b += " <button type=\"submit\">show</button>";
  b += "</form>\n";
  if (d.kept_log) {
    const LogPage& p = *d.kept_log;
    const std::string node_q = d.log_node ? "&node=" + std::to_string(*d.log_node) : "";
    std::string pager = "<p class=\"pager\">lines " + std::to_string(p.lines.empty() ? 0 : p.first + 1) +
                        "\u2013" + std::to_string(p.first + p.lines.size()) + " of " +
                        std::to_string(p.total) + " ";
    if (p.first > 0) {
      const size_t prev = p.first > d.log_page_size ? p.first - d.log_page_size : 0;
      pager += "<a href=\"" + JobHref(j.id) + "?from=0" + node_q + "\">first</a>";
      pager += "<a href=\"" + JobHref(j.id) + "?from=" + std::to_string(prev) + node_q +
               "\">older</a>";
    }
    if (p.first + p.lines.size() < p.total) {
      pager += "<a href=\"" + JobHref(j.id) + "?from=" + std::to_string(p.first + p.lines.size()) +
               node_q + "\">newer</a>";
      pager += "<a href=\"" + JobHref(j.id) + (d.log_node ? "?node=" + std::to_string(*d.log_node) : "") + "\">last</a>";
    }
    pager += "</p>\n";
    b += pager + "<pre class=\"log\" id=\"kept-log\">";
    for (const ViewLine& l : p.lines) {
      b += std::string("<div") + (l.is_stderr ? " class=\"stderr\"" : "") +
           "><span class=\"prefix\">[" + std::to_string(l.rank) + " " + HtmlEscape(l.role) + " " +
           HtmlEscape(l.host) + (l.is_stderr ? " stderr" : "") + "]</span> " +
           HtmlEscape(l.text) + "</div>";
    }
    b += "</pre>\n";
  } else {
    b += "<p class=\"muted\" id=\"live-state\">live output needs JavaScript</p>"
         "<pre class=\"log\" id=\"live-log\" data-stream=\"" +
         JobHref(j.id) + "/logs/stream\"></pre>\n";
  }

  if (!d.diagnostics.empty()) {
    b += "<h2>Diagnostics</h2>\n<p class=\"muted\">what the hosts told of each failed attempt before its "
         "teardown (<code>barge show " + HtmlEscape(j.id) + " --diagnostics</code>)</p>\n<ul id=\"diagnostics\">\n";
    for (const DiagnosticsBundle& bundle : d.diagnostics) {
      const std::string href = JobHref(j.id) + "/diagnostics/attempt-" + std::to_string(bundle.attempt) + "/";
      b += "<li>attempt " + std::to_string(bundle.attempt) + (bundle.at.empty() ? "" : " at " + HtmlEscape(bundle.at)) +
           (bundle.why.empty() ? "" : ": " + HtmlEscape(bundle.why)) + "<br>";
      for (const DiagnosticsFile& f : bundle.files) {
        b += "<a href=\"" + href + UrlEncode(f.name) + "\">" + HtmlEscape(f.name) + "</a> <span class=\"muted\">" +
             FormatBytes(f.bytes) + "</span> ";
      }
      b += "</li>\n";
    }
    b += "</ul>\n";
  }

  b += UploadsSection(d.uploads, IsFinal(j.status));

  b += "<h2>Events</h2>\n<table id=\"events\"><thead><tr><th>TIME</th><th>EVENT</th><th>HOST</th>"
       "<th>DETAIL</th></tr></thead><tbody>\n";
  for (const EventRecord& e : d.events) {
    b += "<tr><td>" + HtmlEscape(LocalTime(e.at, true)) + "</td><td>" + HtmlEscape(e.kind) +
         "</td><td>" + HtmlEscape(e.host.value_or("")) + "</td><td>" + HtmlEscape(e.detail) +
         "</td></tr>\n";
  }
  b += "</tbody></table>\n";
  return PageShell("barge: job " + j.id + " (" + j.name + ")", b, "../");  // at ROOT/jobs/ID
}

namespace {

// A document without the shell: no stylesheet, script or links.
std::string BareDocument(const std::string& title, const std::string& head, const std::string& body) {
  return "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">" + head + "<title>" +
         HtmlEscape(title) + "</title></head>\n<body>\n" + body + "</body></html>\n";
}

}  // namespace

std::string ErrorPage(int code, const std::string& message, const std::string& root) {
  const std::string title = "barge: " + std::to_string(code);
  const std::string body = "<h1>" + std::to_string(code) + "</h1><p id=\"error\">" + HtmlEscape(message) + "</p>";
  if (root.empty()) return BareDocument(title, "", body + "\n");
  return PageShell(title, body + "<p><a href=\"./\">jobs</a></p>\n", root + "/");
}

std::string MoveOnPage(const std::string& url) {
  const std::string href = HtmlEscape(url);
  return BareDocument("barge", "<meta http-equiv=\"refresh\" content=\"0; url=" + href + "\">",
                      "<p>On to <a id=\"move-on\" href=\"" + href + "\">the dashboard</a>.</p>\n");
}

}  // namespace barge::runner::ui
