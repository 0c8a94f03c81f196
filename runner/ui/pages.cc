#include "runner/ui/pages.h"

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

std::string JobHref(const std::string& id) { return "/jobs/" + UrlEncode(id); }

}  // namespace

std::string JobsPage(const std::vector<JobRecord>& jobs, const JobsQuery& query, TimePoint now) {
  std::string b = "<h1>Jobs</h1>\n<form class=\"filter\" method=\"get\" action=\"/\">"
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
  for (const JobRecord& j : jobs) {
    b += "<tr class=\"job\" data-id=\"" + HtmlEscape(j.id) + "\" data-status=\"" +
         ToString(j.status) + "\"><td><a href=\"" + JobHref(j.id) + "\">" + HtmlEscape(j.id) +
         "</a></td><td>" + HtmlEscape(j.name) + "</td><td>" + StatusCell(j.status) +
         "</td><td class=\"num\">" + std::to_string(j.nodes) + "</td><td>" +
         HtmlEscape(LocalTime(j.created, false)) + "</td><td class=\"num\">" +
         Duration(j, now) + "</td><td class=\"num\">" + Exit(j.exit_code) + "</td></tr>\n";
  }
  b += "</tbody></table>\n";
  if (jobs.empty()) b += "<p class=\"muted\">No job matches.</p>\n";
  return PageShell("barge: jobs", b);
}

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

  b += "<h2>Events</h2>\n<table id=\"events\"><thead><tr><th>TIME</th><th>EVENT</th><th>HOST</th>"
       "<th>DETAIL</th></tr></thead><tbody>\n";
  for (const EventRecord& e : d.events) {
    b += "<tr><td>" + HtmlEscape(LocalTime(e.at, true)) + "</td><td>" + HtmlEscape(e.kind) +
         "</td><td>" + HtmlEscape(e.host.value_or("")) + "</td><td>" + HtmlEscape(e.detail) +
         "</td></tr>\n";
  }
  b += "</tbody></table>\n";
  return PageShell("barge: job " + j.id + " (" + j.name + ")", b);
}

std::string ErrorPage(int code, const std::string& message) {
  return PageShell("barge: " + std::to_string(code),
                   "<h1>" + std::to_string(code) + "</h1><p id=\"error\">" + HtmlEscape(message) +
                       "</p><p><a href=\"/\">jobs</a></p>\n");
}

}  // namespace barge::runner::ui
