#include "runner/ui/server.h"

#include <httplib.h>
#include <fcntl.h>
#include <pwd.h>
#include <spawn.h>
#include <sys/wait.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <cstring>
#include <filesystem>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "base/argv.h"
#include "runner/store/array_store.h"
#include "runner/store/array_view.h"
#include "runner/store/diagnostics_bundles.h"
#include "runner/store/upload_store.h"
#include "runner/store/host_use.h"
#include "runner/store/usage.h"
#include "runner/store/job_store.h"
#include "runner/store/job_lookup.h"
#include "runner/ui/auth.h"
#include "runner/ui/gate.h"
#include "runner/ui/html.h"
#include "runner/ui/live_hosts.h"
#include "runner/ui/log_view.h"
#include "runner/ui/pages.h"
#include "runner/ui/timeline.h"

extern char** environ;

namespace barge::runner::ui {

namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

constexpr const char* kCsp =
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'self'";
constexpr milliseconds kStreamPoll{200};
constexpr std::chrono::seconds kKeepAliveComment{15};
constexpr size_t kStreamBacklogLines = 500;
constexpr const char* kJobId = "([A-Za-z0-9][A-Za-z0-9_.-]{0,127})";

void Html(httplib::Response& res, int status, const std::string& body) {
  res.status = status;
  res.set_content(body, "text/html; charset=utf-8");
}

// The most of a diagnostics file the dashboard serves (the controller caps
// each at 256 KiB).
constexpr size_t kMaxDiagnosticsFile = size_t{1} << 20;

// The diagnostics file `name` of bundle `bundle` under `run_dir` (both
// names checked by the caller): a regular file, neither it nor its bundle
// a symlink. nullopt when there is none.
std::optional<std::string> ReadDiagnosticsFile(const std::string& run_dir, const std::string& bundle,
                                               const std::string& name) {
  const std::string dir = DiagnosticsDir(run_dir) + "/" + bundle;
  struct stat st {};
  if (lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return std::nullopt;
  const int fd = open((dir + "/" + name).c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return std::nullopt;
  std::string text;
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
    char buf[65536];
    for (ssize_t n; text.size() < kMaxDiagnosticsFile && (n = read(fd, buf, sizeof buf)) > 0;) {
      text.append(buf, static_cast<size_t>(n));
    }
    if (text.size() > kMaxDiagnosticsFile) text.resize(kMaxDiagnosticsFile);
  } else {
    close(fd);
    return std::nullopt;
  }
  close(fd);
  return text;
}

// The whole response the gate sends for a refusal: the error page with the
// headers every response of the server carries.
std::string GateAnswer(int status, const std::string& message) {
  const char* reason = "Error";
  switch (status) {
    case 400: reason = "Bad Request"; break;
    case 401: reason = "Unauthorized"; break;
    case 403: reason = "Forbidden"; break;
    case 408: reason = "Request Timeout"; break;
    case 431: reason = "Request Header Fields Too Large"; break;
    case 503: reason = "Service Unavailable"; break;
    default: break;
  }
  const std::string body = ErrorPage(status, message, "");
  return "HTTP/1.1 " + std::to_string(status) + " " + reason +
         "\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\nConnection: close\r\nContent-Security-Policy: " +
         kCsp +
         "\r\nX-Content-Type-Options: nosniff\r\nReferrer-Policy: no-referrer\r\n"
         "X-Frame-Options: DENY\r\nCache-Control: no-store\r\n\r\n" +
         body;
}

// The store, opened for this request's thread; nullptr when barge has no
// database yet (nothing is created by looking).
Result<std::unique_ptr<JobStore>> OpenStore(const std::string& state_dir) {
  std::error_code ec;
  if (!std::filesystem::exists(state_dir + "/barge.db", ec)) {
    return std::unique_ptr<JobStore>();
  }
  return JobStore::Open(state_dir);
}

// A non-negative decimal number of at most 9 digits.
std::optional<int64_t> ParseCount(const std::string& text) {
  if (text.empty() || text.size() > 9) return std::nullopt;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
  }
  return std::stoll(text);
}

std::string SseLines(const std::vector<ViewLine>& lines, const std::string& cursor) {
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    const ViewLine& l = lines[i];
    nlohmann::json j = {{"rank", l.rank},
                        {"role", l.role},
                        {"host", l.host},
                        {"stderr", l.is_stderr},
                        {"text", l.text}};
    out += "event: line\n";
    if (i + 1 == lines.size()) out += "id: " + cursor + "\n";
    out += "data: " + j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n\n";
  }
  return out;
}

}  // namespace

struct UiServer::Impl {
  UiOptions options;
  std::unique_ptr<Auth> auth;
  std::unique_ptr<Gate> gate;  // the public address
  httplib::Server server;      // on `socket_path`, behind the gate
  std::string private_dir;     // 0700, holds socket_path
  std::string socket_path;
  std::thread thread;
  int port = 0;
  std::atomic<int> streams{0};
  std::atomic<bool> stopping{false};
  std::atomic<bool> listening_done{false};
  bool stopped = false;
  std::unique_ptr<LiveHosts> live_hosts;

  void Routes();
  bool Allowed(const httplib::Request& req, httplib::Response& res);
  // Answers `status` with an error page: one that links to the dashboard's
  // root when the request was let in (`let_in`), else a bare one.
  void Fail(httplib::Response& res, int status, const std::string& message, bool let_in = true);
  void JobsPage(const httplib::Request& req, httplib::Response& res);
  void JobPage(const httplib::Request& req, httplib::Response& res);
  void ArrayPage(const httplib::Request& req, httplib::Response& res);
  void HostsPage(const httplib::Request& req, httplib::Response& res);
  void Stream(const httplib::Request& req, httplib::Response& res);
  void StopJob(const httplib::Request& req, httplib::Response& res);
  // A diagnostics bundle's file, as plain text (runner/store/diagnostics_bundles.h).
  void DiagnosticsFile(const httplib::Request& req, httplib::Response& res);
  // Runs `barge down ID` detached, output to RUN_DIR/down.log.
  Status SpawnDown(const JobRecord& job);
};

void UiServer::Impl::Fail(httplib::Response& res, int status, const std::string& message, bool let_in) {
  Html(res, status, ErrorPage(status, message, let_in ? auth->root() : ""));
}

bool UiServer::Impl::Allowed(const httplib::Request& req, httplib::Response& res) {
  std::optional<std::string> token;
  if (req.has_param("token")) token = req.get_param_value("token");
  auto decide = [&] {
    return auth->Decide(req.get_header_value("Host"), req.path, token, req.get_header_value("Cookie"));
  };
  Auth::Decision d = decide();
  // Another request used the token first: this one is refused now.
  if (d.verdict == Auth::Verdict::kLogIn && !auth->RedeemToken()) d = decide();
  switch (d.verdict) {
    case Auth::Verdict::kServe:
      return true;
    case Auth::Verdict::kRefuse:
      Fail(res, d.status, d.message, false);
      return false;
    case Auth::Verdict::kLogIn:
      res.set_header("Set-Cookie", auth->SetCookieValue());
      [[fallthrough]];
    case Auth::Verdict::kDropToken:
      // On to the same address without the token (and without the rest of
      // the query): it leaves the address bar.
      Html(res, 200, MoveOnPage(req.path == auth->root() ? req.path + "/" : req.path));
      return false;
  }
  return false;
}

void UiServer::Impl::Routes() {
  server.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    return Allowed(req, res) ? httplib::Server::HandlerResponse::Unhandled
                             : httplib::Server::HandlerResponse::Handled;
  });
  server.set_post_routing_handler([](const httplib::Request&, httplib::Response& res) {
    res.set_header("Content-Security-Policy", kCsp);
    res.set_header("X-Content-Type-Options", "nosniff");
    res.set_header("Referrer-Policy", "no-referrer");
    res.set_header("X-Frame-Options", "DENY");
    res.set_header("Cache-Control", "no-store");
  });
  server.set_error_handler(httplib::Server::HandlerWithResponse(
      [this](const httplib::Request& req, httplib::Response& res) {
        if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
        std::string message = "error " + std::to_string(res.status);
        if (res.status == 404) message = "nothing here: " + req.path;
        if (res.status == 400) message = "bad request (malformed, or headers too large)";
        if (res.status == 413) message = "request body too large";
        if (res.status == 414) message = "request URI too long";
        // A 404 passed Allowed; a request cut short before it did not.
        Fail(res, res.status, message, res.status == 404);
        return httplib::Server::HandlerResponse::Handled;
      }));
  server.set_exception_handler(
      [this](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
        std::string what = "internal error";
        try {
          if (ep) std::rethrow_exception(ep);
        } catch (const std::exception& e) {
          what += std::string(": ") + e.what();
        } catch (...) {
        }
        Fail(res, 500, what, false);
      });
  // Every route is under the root (auth.h); Allowed refuses the rest.
  const std::string root = auth->root();
  server.Get(root, [root](const httplib::Request&, httplib::Response& res) {
    res.status = 303;
    res.set_header("Location", root + "/");
  });
  server.Get(root + "/static/ui.css", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(StyleSheet(), "text/css; charset=utf-8");
  });
  server.Get(root + "/static/ui.js", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(Script(), "text/javascript; charset=utf-8");
  });
  server.Get(root + "/", [this](const httplib::Request& req, httplib::Response& res) { JobsPage(req, res); });
  server.Get(root + "/jobs/" + kJobId,
             [this](const httplib::Request& req, httplib::Response& res) { JobPage(req, res); });
  server.Get(root + "/arrays/" + kJobId,
             [this](const httplib::Request& req, httplib::Response& res) { ArrayPage(req, res); });
  server.Get(root + "/hosts", [this](const httplib::Request& req, httplib::Response& res) { HostsPage(req, res); });
  server.Get(root + "/jobs/" + kJobId + "/logs/stream",
             [this](const httplib::Request& req, httplib::Response& res) { Stream(req, res); });
  server.Post(root + "/jobs/" + kJobId + "/stop",
              [this](const httplib::Request& req, httplib::Response& res) { StopJob(req, res); });
  server.Get(root + "/jobs/" + kJobId + "/diagnostics/([A-Za-z0-9_.-]{1,64})/([A-Za-z0-9_.-]{1,255})",
             [this](const httplib::Request& req, httplib::Response& res) { DiagnosticsFile(req, res); });
}

void UiServer::Impl::DiagnosticsFile(const httplib::Request& req, httplib::Response& res) {
  const std::string id = req.matches[1];
  const std::string bundle = req.matches[2];
  const std::string name = req.matches[3];
  const std::string missing = "no diagnostics file " + bundle + "/" + name + " of job '" + id + "'";
  if (!IsBundleName(bundle) || !IsBundleFileName(name)) return Fail(res, 404, missing);
  Result<std::unique_ptr<JobStore>> store = OpenStore(options.state_dir);
  if (!store.ok()) return Fail(res, 500, store.status().message());
  if (!*store) return Fail(res, 404, missing);
  Result<JobRecord> job = (*store)->GetJob(id);
  if (!job.ok() || job->run_dir.empty()) return Fail(res, 404, missing);
  std::optional<std::string> text = ReadDiagnosticsFile(job->run_dir, bundle, name);
  if (!text) return Fail(res, 404, missing);
  res.status = 200;
  res.set_content(*text, "text/plain; charset=utf-8");
}

void UiServer::Impl::JobsPage(const httplib::Request& req, httplib::Response& res) {
  JobsQuery query;
  JobFilter filter;
  if (req.has_param("status") && !req.get_param_value("status").empty()) {
    Result<JobStatus> status = ParseJobStatus(req.get_param_value("status"));
    if (!status.ok()) return Fail(res, 400, status.status().message());
    filter.status = *status;
    query.status = req.get_param_value("status");
  }
  query.name = req.get_param_value("name");
  Result<std::unique_ptr<JobStore>> store = OpenStore(options.state_dir);
  if (!store.ok()) return Fail(res, 500, store.status().message());
  std::vector<JobRecord> jobs;
  std::vector<ArrayView> arrays;
  if (*store) {
    // As `barge ls`: an array is one row; its members' jobs are not listed.
    Result<std::unique_ptr<ArrayStore>> array_store = ArrayStore::Open(options.state_dir);
    if (!array_store.ok()) return Fail(res, 500, array_store.status().message());
    Result<std::vector<std::string>> member_jobs = (*array_store)->MemberJobIds();
    if (!member_jobs.ok()) return Fail(res, 500, member_jobs.status().message());
    const std::set<std::string> hide(member_jobs->begin(), member_jobs->end());
    Result<std::vector<ArrayView>> all_arrays = LiveArrays(**array_store, options.state_dir);
    if (!all_arrays.ok()) return Fail(res, 500, all_arrays.status().message());
    for (ArrayView& v : *all_arrays) {
      if (query.status && *query.status != v.array.status) continue;
      if (!query.name.empty() && v.array.name.find(query.name) == std::string::npos) continue;
      arrays.push_back(std::move(v));
    }
    Result<std::vector<JobRecord>> all = (*store)->ListJobs(filter);
    if (!all.ok()) return Fail(res, 500, all.status().message());
    for (JobRecord& j : *all) {
      if (hide.count(j.id)) continue;
      if (Status s = MarkLostIfControllerGone(**store, &j); !s.ok()) {
        return Fail(res, 500, s.message());
      }
      if (filter.status && j.status != *filter.status) continue;
      if (!query.name.empty() && j.name.find(query.name) == std::string::npos) continue;
      jobs.push_back(std::move(j));
    }
  }
  Html(res, 200, ui::JobsPage(jobs, arrays, query, WallNow()));
}

namespace {

// The request's `node` parameter into `*node` (unset when absent or
// empty); false when it is not a rank.
bool NodeParam(const httplib::Request& req, std::optional<int>* node) {
  if (!req.has_param("node") || req.get_param_value("node").empty()) return true;
  std::optional<int64_t> n = ParseCount(req.get_param_value("node"));
  if (!n) return false;
  *node = static_cast<int>(*n);
  return true;
}

}  // namespace

void UiServer::Impl::JobPage(const httplib::Request& req, httplib::Response& res) {
  const std::string id = req.matches[1];
  std::optional<int> node;
  if (!NodeParam(req, &node)) return Fail(res, 400, "node must be a rank (a number)");
  std::optional<size_t> from;
  if (req.has_param("from")) {
    std::optional<int64_t> n = ParseCount(req.get_param_value("from"));
    if (!n) return Fail(res, 400, "from must be a line number");
    from = static_cast<size_t>(*n);
  }
  Result<std::unique_ptr<JobStore>> store = OpenStore(options.state_dir);
  if (!store.ok()) return Fail(res, 500, store.status().message());
  if (!*store) return Fail(res, 404, "no job '" + id + "'");
  JobStore& s = **store;
  Result<JobRecord> job = s.GetJob(id);
  if (!job.ok()) return Fail(res, 404, "no job '" + id + "'");
  if (Status st = MarkLostIfControllerGone(s, &*job); !st.ok()) return Fail(res, 500, st.message());
  Result<std::vector<NodeRecord>> nodes = s.GetNodes(id);
  Result<std::vector<EventRecord>> events = s.GetEvents(id);
  Result<std::vector<PhaseRecord>> phases = s.GetPhases(id);
  if (!nodes.ok()) return Fail(res, 500, nodes.status().message());
  if (!events.ok()) return Fail(res, 500, events.status().message());
  if (!phases.ok()) return Fail(res, 500, phases.status().message());
  if (node && std::none_of(nodes->begin(), nodes->end(),
                           [&](const NodeRecord& n) { return n.rank == *node; })) {
    return Fail(res, 404, "job " + id + " has no node " + std::to_string(*node));
  }
  JobPageData data;
  data.job = *job;
  data.nodes = *nodes;
  data.events = *events;
  const TimePoint now = WallNow();
  data.timeline_svg = TimelineSvg(BuildTimeline(*job, *nodes, *phases, *events, now));
  data.log_node = node;
  data.log_page_size = options.log_page_lines;
  if (!IsFinal(job->status)) data.csrf = auth->NewCsrf(id);
  if (req.has_param("stopping") && !IsFinal(job->status)) {
    data.notice = "stopping: `barge down " + id + "` runs (its output: " + job->run_dir +
                  "/down.log)";
  }
  if (IsFinal(job->status)) {
    Result<LogPage> page = ReadLogPage(*job, *nodes, node, from, options.log_page_lines);
    if (!page.ok()) return Fail(res, 500, page.status().message());
    data.kept_log = std::move(page).value();
  }
  if (!job->run_dir.empty()) data.diagnostics = ListDiagnostics(job->run_dir);
  Result<std::unique_ptr<UploadStore>> uploads = UploadStore::Open(options.state_dir);
  if (!uploads.ok()) return Fail(res, 500, uploads.status().message());
  Result<std::vector<UploadRecord>> sent = (*uploads)->ForJob(id);
  if (!sent.ok()) return Fail(res, 500, sent.status().message());
  data.uploads = std::move(sent).value();
  Html(res, 200, ui::JobPage(data, now));
}

void UiServer::Impl::ArrayPage(const httplib::Request& req, httplib::Response& res) {
  const std::string id = req.matches[1];
  Result<std::unique_ptr<JobStore>> store = OpenStore(options.state_dir);
  if (!store.ok()) return Fail(res, 500, store.status().message());
  if (!*store) return Fail(res, 404, "no array '" + id + "'");
  Result<std::unique_ptr<ArrayStore>> arrays = ArrayStore::Open(options.state_dir);
  if (!arrays.ok()) return Fail(res, 500, arrays.status().message());
  if (!(*arrays)->GetArray(id).ok()) return Fail(res, 404, "no array '" + id + "'");
  ArrayPageData data;
  Result<ArrayRecord> a = LiveArray(**arrays, options.state_dir, id);
  if (!a.ok()) return Fail(res, 500, a.status().message());
  Result<std::vector<MemberRecord>> members = (*arrays)->GetMembers(id);
  if (!members.ok()) return Fail(res, 500, members.status().message());
  ShowWaitingMembers(options.state_dir, &*members);
  data.view = {std::move(a).value(), std::move(members).value()};
  for (const MemberRecord& m : data.view.members) {
    for (const std::string& job_id : m.job_ids) {
      Result<JobRecord> job = (*store)->GetJob(job_id);
      if (!job.ok()) continue;  // removed
      if (Status s = MarkLostIfControllerGone(**store, &*job); !s.ok()) return Fail(res, 500, s.message());
      Result<std::vector<NodeRecord>> nodes = (*store)->GetNodes(job_id);
      if (!nodes.ok()) return Fail(res, 500, nodes.status().message());
      data.jobs[job_id] = std::move(job).value();
      data.nodes[job_id] = std::move(nodes).value();
    }
  }
  Html(res, 200, ui::ArrayPage(data, WallNow()));
}

namespace {

// "user@machine" of this process: the owner of the store it reads, on the
// machine its jobs were run from.
std::string ThisUserAtMachine() {
  std::string user;
  if (const passwd* pw = getpwuid(geteuid())) user = pw->pw_name;
  if (user.empty()) user = std::to_string(geteuid());
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
  return user + "@" + host;
}

}  // namespace

void UiServer::Impl::HostsPage(const httplib::Request&, httplib::Response& res) {
  HostsPageData data;
  data.store_owner = ThisUserAtMachine();
  Result<std::unique_ptr<JobStore>> store = OpenStore(options.state_dir);
  if (!store.ok()) return Fail(res, 500, store.status().message());
  if (*store) {
    Result<std::vector<HostUse>> use = HostsInUse(**store);
    if (!use.ok()) return Fail(res, 500, use.status().message());
    data.store = std::move(use).value();
    const TimePoint now = WallNow();
    Result<std::map<std::string, Usage>> recent =
        UsageByHostInStore(**store, now - std::chrono::hours(24) * data.recent_days, now);
    if (!recent.ok()) return Fail(res, 500, recent.status().message());
    data.recent_use = std::move(recent).value();
  }
  data.live_enabled = live_hosts->enabled();
  if (data.live_enabled) data.live = live_hosts->Read();
  Html(res, 200, ui::HostsPage(data, WallNow()));
}

void UiServer::Impl::Stream(const httplib::Request& req, httplib::Response& res) {
  const std::string id = req.matches[1];
  std::optional<int> node;
  if (!NodeParam(req, &node)) return Fail(res, 400, "node must be a rank (a number)");
  std::optional<std::map<int, uint64_t>> cursor;
  if (req.has_header("Last-Event-ID")) {
    cursor = LogTail::ParseCursor(req.get_header_value("Last-Event-ID"));
    if (!cursor) return Fail(res, 400, "Last-Event-ID is not a log cursor");
  }
  Result<std::unique_ptr<JobStore>> opened = OpenStore(options.state_dir);
  if (!opened.ok()) return Fail(res, 500, opened.status().message());
  if (!*opened || !(*opened)->GetJob(id).ok()) return Fail(res, 404, "no job '" + id + "'");
  if (streams.fetch_add(1) >= options.max_streams) {
    streams.fetch_sub(1);
    res.set_header("Retry-After", "5");
    return Fail(res, 503,
                "too many live log streams open (" + std::to_string(options.max_streams) +
                    "); close a tab or wait");
  }
  struct State {
    std::unique_ptr<JobStore> store;
    std::string id;
    LogTail tail;
    bool resumed;
    bool started = false;
    steady_clock::time_point deadline;
    steady_clock::time_point last_write;
  };
  auto st = std::make_shared<State>(State{std::move(opened).value(), id,
                                          LogTail(node, cursor.value_or(std::map<int, uint64_t>{})),
                                          cursor.has_value(), false,
                                          steady_clock::now() + options.stream_lifetime,
                                          steady_clock::now()});
  res.set_header("X-Accel-Buffering", "no");
  res.set_chunked_content_provider(
      "text/event-stream",
      [this, st](size_t, httplib::DataSink& sink) {
        auto write = [&](const std::string& text) {
          if (text.empty()) return true;
          st->last_write = steady_clock::now();
          return sink.write(text.data(), text.size());
        };
        if (stopping) {
          sink.done();
          return true;
        }
        if (st->started) std::this_thread::sleep_for(kStreamPoll);
        Result<JobRecord> job = st->store->GetJob(st->id);
        if (!job.ok()) {
          sink.done();
          return true;
        }
        if (!MarkLostIfControllerGone(*st->store, &*job).ok()) return false;
        Result<std::vector<NodeRecord>> nodes = st->store->GetNodes(st->id);
        if (!nodes.ok()) return false;
        std::string out;
        const bool first = !st->started;
        if (first) {
          out += "retry: 2000\n\n";
          st->started = true;
        }
        const bool final = IsFinal(job->status);
        // A new stream starts with the end of the backlog; a resumed one
        // with what came since its cursor, and each poll with what came
        // since the last, at most the page's kLiveLogLines (the older ones
        // would leave the page at once): however far back a cursor
        // (Last-Event-ID: 0:0) or however chatty the job, one poll holds
        // and sends a bounded number of lines.
        Result<std::vector<ViewLine>> lines = st->tail.Poll(
            *job, *nodes, false, first && !st->resumed ? kStreamBacklogLines : kLiveLogLines);
        if (!lines.ok()) return false;
        out += SseLines(*lines, st->tail.Cursor());
        if (final && !st->tail.grew()) {
          Result<std::vector<ViewLine>> rest = st->tail.Poll(*job, *nodes, true, kLiveLogLines);
          if (!rest.ok()) return false;
          out += SseLines(*rest, st->tail.Cursor());
          out += std::string("event: end\ndata: ") + ToString(job->status) + "\n\n";
          if (!write(out)) return false;
          sink.done();
          return true;
        }
        if (!write(out)) return false;
        if (steady_clock::now() > st->deadline) {
          sink.done();  // the browser reconnects with Last-Event-ID
          return true;
        }
        if (steady_clock::now() - st->last_write > kKeepAliveComment) return write(": alive\n\n");
        return true;
      },
      [this](bool) { streams.fetch_sub(1); });
}

void UiServer::Impl::StopJob(const httplib::Request& req, httplib::Response& res) {
  const std::string id = req.matches[1];
  if (!auth->CsrfValid(id, req.get_param_value("csrf"))) {
    return Fail(res, 403, "the stop request did not come from this job's page (bad CSRF token)");
  }
  Result<std::unique_ptr<JobStore>> store = OpenStore(options.state_dir);
  if (!store.ok()) return Fail(res, 500, store.status().message());
  if (!*store) return Fail(res, 404, "no job '" + id + "'");
  Result<JobRecord> job = (*store)->GetJob(id);
  if (!job.ok()) return Fail(res, 404, "no job '" + id + "'");
  if (IsFinal(job->status)) {
    res.status = 303;
    res.set_header("Location", auth->root() + "/jobs/" + UrlEncode(id));
    return;
  }
  if (Status s = SpawnDown(*job); !s.ok()) return Fail(res, 500, s.message());
  res.status = 303;
  res.set_header("Location", auth->root() + "/jobs/" + UrlEncode(id) + "?stopping=1");
}

Status UiServer::Impl::SpawnDown(const JobRecord& job) {
  const std::string log = job.run_dir.empty() ? "/dev/null" : job.run_dir + "/down.log";
  std::vector<std::string> args = {options.barge_binary, "down", job.id};
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    if (std::strncmp(*e, "BARGE_HOME=", 11) != 0) env.emplace_back(*e);
  }
  env.push_back("BARGE_HOME=" + options.state_dir);
  std::vector<char*> argv = NullTerminated(args), envp = NullTerminated(env);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log.c_str(),
                                   O_WRONLY | O_CREAT | O_APPEND, 0600);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID);
  pid_t pid = 0;
  const int rc =
      posix_spawn(&pid, options.barge_binary.c_str(), &actions, &attr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    return Status::Error("cannot run " + options.barge_binary + " down " + job.id + ": " +
                         std::strerror(rc));
  }
  // Reaped whenever it ends; the page follows the job's status, not this.
  std::thread([pid] { waitpid(pid, nullptr, 0); }).detach();
  return Status::Ok();
}

Result<std::unique_ptr<UiServer>> UiServer::Start(UiOptions options) {
  if (options.barge_binary == "/proc/self/exe") {
    char buf[PATH_MAX];
    const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
    if (n > 0) options.barge_binary.assign(buf, static_cast<size_t>(n));
  }
  Result<AuthSecrets> secrets = AuthSecrets::New(options.token);
  if (!secrets.ok()) return secrets.status();
  options.token = secrets->token;
  if (options.threads < options.max_streams + 2) {
    return Status::Error("the dashboard needs at least 2 more threads (" +
                         std::to_string(options.threads) + ") than live streams (" +
                         std::to_string(options.max_streams) + ")");
  }
  if (!options.hosts_job_file.empty() && !options.hosts_list.empty()) {
    return Status::Error("the hosts page asks the hosts of a job file or of --hosts, not both");
  }
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  impl->live_hosts = std::make_unique<LiveHosts>(
      LiveHostsSource{options.barge_binary, options.state_dir, options.hosts_job_file, options.hosts_list,
                      options.hosts_deadline, std::chrono::seconds(5)});
  const int threads = options.threads;
  impl->server.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  impl->server.set_keep_alive_timeout(2);
  impl->server.set_keep_alive_max_count(100);
  impl->server.set_read_timeout(5, 0);
  impl->server.set_write_timeout(5, 0);
  impl->server.set_payload_max_length(64 * 1024);
  // The public address is the gate's (gate.h); the server listens on a unix
  // socket in a directory of this user's only, which no other user can
  // connect to.
  Result<std::unique_ptr<Gate>> gate = Gate::Listen(options.listen_host, options.port, options.gate);
  if (!gate.ok()) return gate.status();
  impl->gate = std::move(gate).value();
  impl->port = impl->gate->port();
  char dir[] = "/tmp/barge-ui.XXXXXX";
  if (mkdtemp(dir) == nullptr) {
    return Status::Error(std::string("cannot make the dashboard's private directory: ") +
                         std::strerror(errno));
  }
  impl->private_dir = dir;
  impl->socket_path = impl->private_dir + "/http.sock";
  impl->server.set_address_family(AF_UNIX);
  if (!impl->server.bind_to_port(impl->socket_path, 80)) {
    std::filesystem::remove_all(impl->private_dir);
    return Status::Error("cannot listen on " + impl->socket_path);
  }
  impl->auth = std::make_unique<Auth>(std::move(secrets).value(), options.listen_host, impl->port);
  impl->Routes();
  Impl* raw = impl.get();
  impl->thread = std::thread([raw] {
    raw->server.listen_after_bind();
    raw->listening_done = true;
  });
  // Until it runs, Server::stop() would do nothing and Stop() would wait
  // forever: return only once it accepts.
  const auto deadline = steady_clock::now() + std::chrono::seconds(10);
  while (!impl->server.is_running() && steady_clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(2));
  }
  auto server = std::unique_ptr<UiServer>(new UiServer(std::move(impl)));
  if (!server->impl_->server.is_running()) {
    server->Stop();
    return Status::Error("the dashboard did not start listening within 10 s");
  }
  raw->gate->Serve(raw->socket_path, [raw](const RequestHead& head) -> std::optional<Gate::Answer> {
    // On the path as sent: one whose root is %XX-encoded is refused here.
    const Auth::Decision d =
        raw->auth->Decide(head.Field("Host"), head.Path(), head.QueryParam("token"), head.Field("Cookie"));
    if (d.verdict != Auth::Verdict::kRefuse) return std::nullopt;
    return Gate::Answer{d.status, d.message};
  }, GateAnswer);
  return server;
}

UiServer::UiServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

UiServer::~UiServer() { Stop(); }

int UiServer::port() const { return impl_->port; }
const std::string& UiServer::token() const { return impl_->auth->token(); }
const std::string& UiServer::root() const { return impl_->auth->root(); }

std::string UiServer::Url() const {
  const std::string& h = impl_->options.listen_host;
  const bool v6 = h.find(':') != std::string::npos;
  return "http://" + (v6 ? "[" + h + "]" : h) + ":" + std::to_string(impl_->port) + impl_->auth->root() +
         "/?token=" + impl_->auth->token();
}

void UiServer::Stop() {
  if (impl_->stopped) return;
  impl_->stopped = true;
  impl_->stopping = true;
  if (impl_->gate) impl_->gate->Stop();  // first: no new connection reaches the server
  // stop() acts only once the server runs: ask until the listener returned.
  while (impl_->thread.joinable() && !impl_->listening_done) {
    impl_->server.stop();
    std::this_thread::sleep_for(milliseconds(5));
  }
  if (impl_->thread.joinable()) impl_->thread.join();
  if (!impl_->private_dir.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(impl_->private_dir, ec);
  }
}

}  // namespace barge::runner::ui
