// The dashboard's HTTP handlers, driven over real loopback connections
// (cpp-httplib's client, and raw sockets for requests no client would send).
#include "runner/ui/server.h"

#include "runner/ui/html.h"

#include <arpa/inet.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>
#include <vector>

#include "runner/store/array_store.h"
#include "runner/store/job_store.h"
#include "runner/store/upload_store.h"

namespace barge::runner::ui {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/barge-ui-server-test-XXXXXX";
    path_ = mkdtemp(tmpl);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// A state directory with a finished job "done1" and a running job "live1"
// (its controller: this process), one node each, and a server over it.
class UiServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto opened = JobStore::Open(dir_.path());
    ASSERT_TRUE(opened.ok()) << opened.status().message();
    store_ = std::move(opened).value();
    for (const char* id : {"done1", "live1"}) {
      JobRecord j;
      j.id = id;
      j.name = id;
      j.status = std::string(id) == "done1" ? JobStatus::kSucceeded : JobStatus::kRunning;
      j.created = WallNow();
      if (j.status == JobStatus::kSucceeded) {
        j.ended = j.created + seconds(3);
        j.exit_code = 0;
      }
      j.controller_pid = getpid();
      j.nodes = 1;
      j.run_dir = dir_.path() + "/runs/" + id;
      std::filesystem::create_directories(j.run_dir);
      ASSERT_TRUE(store_->CreateJob(j).ok());
      NodeRecord n;
      n.job_id = id;
      n.rank = 0;
      n.role = "head";
      n.host = "local";
      n.log_path = j.run_dir + "/0-local.log";
      ASSERT_TRUE(store_->UpsertNode(n).ok());
      std::ofstream(n.log_path) << "2024-05-01T12:00:00.000000000Z stdout hello from " << id << "\n";
    }
    UiOptions options;
    options.state_dir = dir_.path();
    options.port = 0;
    options.token = "tok123";
    options.max_streams = 1;
    options.threads = 4;
    options.barge_binary = "/bin/true";
    auto server = UiServer::Start(options);
    ASSERT_TRUE(server.ok()) << server.status().message();
    server_ = std::move(server).value();
    host_ = "127.0.0.1:" + std::to_string(server_->port());
  }

  // The cookie this server hands out for its token, from its first use
  // ("barge_ui=SESSION"): the test logs in as a browser would.
  const std::string& Session() {
    if (session_.empty()) session_ = LogIn(*server_);
    return session_;
  }
  httplib::Headers Authed() { return {{"Cookie", Session()}}; }
  // `path` under the server's root.
  std::string P(const std::string& path) const { return server_->root() + path; }
  httplib::Client Client() const {
    httplib::Client c("127.0.0.1", server_->port());
    c.set_read_timeout(10, 0);
    return c;
  }
  // Sends `request` as given and returns the status line and headers.
  std::string Raw(const std::string& request) const {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(server_->port()));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      close(fd);
      return "connect failed";
    }
    size_t sent = 0;
    while (sent < request.size()) {
      ssize_t n = send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) break;
      sent += static_cast<size_t>(n);
    }
    std::string got;
    char buf[4096];
    timeval tv{5, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    for (ssize_t n; (n = recv(fd, buf, sizeof buf, 0)) > 0;) got.append(buf, static_cast<size_t>(n));
    close(fd);
    return got;
  }
  // GET `path` under the root, logged in.
  std::string Get(const std::string& path) {
    return Raw("GET " + P(path) + " HTTP/1.1\r\nHost: " + host_ + "\r\nCookie: " + Session() +
               "\r\nConnection: close\r\n\r\n");
  }

  // Logs in to `server` with its token ("tok123"): the name=value of the
  // cookie it hands out; "" when it hands out none.
  static std::string LogIn(const UiServer& server) {
    httplib::Client c("127.0.0.1", server.port());
    auto res = c.Get(server.root() + "/?token=tok123");
    if (!res || res->status != 200) return "";
    const std::string set = res->get_header_value("Set-Cookie");
    return set.substr(0, set.find(';'));
  }

  TempDir dir_;
  std::unique_ptr<JobStore> store_;
  std::unique_ptr<UiServer> server_;
  std::string host_;
  std::string session_;
};

TEST_F(UiServerTest, ARequestWithoutTheTokenGets401EvenOnLoopback) {
  auto c = Client();
  for (const std::string& path : {P("/"), P("/jobs/done1"), P("/static/ui.js"), P("/jobs/live1/logs/stream"),
                                  std::string("/"), std::string("/jobs/done1")}) {
    auto res = c.Get(path);
    ASSERT_TRUE(res) << path;
    EXPECT_EQ(res->status, 401) << path;
    EXPECT_EQ(res->body.find("hello from"), std::string::npos);
    // A refusal names nothing under the root.
    EXPECT_EQ(res->body.find(server_->root()), std::string::npos) << res->body;
  }
  // A cookie that holds the token (as before issue #40, named after the
  // port, or by the session cookie's name) is not the session.
  for (const std::string& cookie : {"barge_ui_" + std::to_string(server_->port()) + "=tok123",
                                    std::string("barge_ui=tok123"), std::string("barge_ui=tok124")}) {
    auto wrong = c.Get(P("/"), {{"Cookie", cookie}});
    ASSERT_TRUE(wrong);
    EXPECT_EQ(wrong->status, 401) << cookie;
  }
  auto wrong_query = c.Get(P("/?token=nope"));
  ASSERT_TRUE(wrong_query);
  EXPECT_EQ(wrong_query->status, 401);
  EXPECT_FALSE(wrong_query->has_header("Set-Cookie"));
  auto post = c.Post(P("/jobs/live1/stop"), "csrf=x", "application/x-www-form-urlencoded");
  ASSERT_TRUE(post);
  EXPECT_EQ(post->status, 401);
}

TEST_F(UiServerTest, TheTokenLogsInOnceWithACookieScopedToTheRootAndMovesOnToTheAddressWithoutIt) {
  const std::string& root = server_->root();
  EXPECT_EQ(root.size(), 3u + 32u);
  EXPECT_EQ(root.substr(0, 3), "/s/");
  EXPECT_EQ(root.find_first_not_of("0123456789abcdef", 3), std::string::npos) << root;
  EXPECT_EQ(server_->Url(), "http://" + host_ + root + "/?token=tok123");
  auto c = Client();
  auto res = c.Get(P("/jobs/done1?token=tok123&node=0"));
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_FALSE(res->has_header("Location"));
  const std::string set = res->get_header_value("Set-Cookie");
  const std::string session = set.substr(0, set.find(';'));
  ASSERT_EQ(session.size(), std::string("barge_ui=").size() + 64) << set;
  EXPECT_EQ(session.substr(0, 9), "barge_ui=");
  EXPECT_NE(session.substr(9), "tok123");
  // The browser sends it with requests for the root's paths only, on any
  // port; never to a script; never from another site.
  EXPECT_EQ(set, session + "; Path=" + root + "; HttpOnly; SameSite=Strict");
  EXPECT_NE(res->body.find("<meta http-equiv=\"refresh\" content=\"0; url=" + root + "/jobs/done1\">"),
            std::string::npos)
      << res->body;
  EXPECT_EQ(res->body.find("tok123"), std::string::npos);
  auto page = c.Get(P("/jobs/done1"), {{"Cookie", session}});
  ASSERT_TRUE(page);
  EXPECT_EQ(page->status, 200);
  EXPECT_NE(page->body.find("hello from done1"), std::string::npos);

  // Used once, the token logs in no one else.
  auto again = c.Get(P("/?token=tok123"));
  ASSERT_TRUE(again);
  EXPECT_EQ(again->status, 401);
  EXPECT_FALSE(again->has_header("Set-Cookie"));
  EXPECT_NE(again->body.find("logs in once"), std::string::npos) << again->body;
  // The browser that used it, opening the URL again, moves on without it.
  auto same = c.Get(P("/?token=tok123"), {{"Cookie", session}});
  ASSERT_TRUE(same);
  EXPECT_EQ(same->status, 200);
  EXPECT_FALSE(same->has_header("Set-Cookie"));
  EXPECT_NE(same->body.find("url=" + root + "/\""), std::string::npos) << same->body;
  // The root without its slash leads to it.
  auto bare = c.Get(root, {{"Cookie", session}});
  ASSERT_TRUE(bare);
  EXPECT_EQ(bare->status, 303);
  EXPECT_EQ(bare->get_header_value("Location"), root + "/");
  // On a connection the gate let in, each later request is checked too.
  httplib::Client kept("127.0.0.1", server_->port());
  kept.set_keep_alive(true);
  auto first = kept.Get(P("/"), {{"Cookie", session}});
  ASSERT_TRUE(first);
  EXPECT_EQ(first->status, 200);
  auto second = kept.Get(P("/?token=tok123"));
  ASSERT_TRUE(second);
  EXPECT_EQ(second->status, 401);
}

TEST_F(UiServerTest, AnotherPortsListenerGetsNothingThatAuthenticatesHere) {
  // A second dashboard, on another port, with the same token (as from one
  // --token-file): its root and session are its own.
  UiOptions options;
  options.state_dir = dir_.path();
  options.port = 0;
  options.token = "tok123";
  options.threads = 4;
  options.max_streams = 1;
  auto other = UiServer::Start(options);
  ASSERT_TRUE(other.ok()) << other.status().message();
  EXPECT_NE((*other)->root(), server_->root());
  const std::string here = Session();
  ASSERT_FALSE(here.empty());
  // What a browser sends another port: this dashboard's cookie only with
  // a request for this root's paths (the cookie's Path), and neither
  // that path nor the cookie lets it in there.
  httplib::Client to_other("127.0.0.1", (*other)->port());
  const httplib::Headers host = {{"Host", "127.0.0.1:" + std::to_string((*other)->port())}};
  for (const std::string& path : {P("/"), (*other)->root() + "/", std::string("/")}) {
    httplib::Headers h = host;
    h.emplace("Cookie", here);
    auto res = to_other.Get(path, h);
    ASSERT_TRUE(res) << path;
    EXPECT_EQ(res->status, 401) << path;
  }
  // Logging in here did not use the other's token, nor the other's here.
  const std::string there = LogIn(**other);
  ASSERT_FALSE(there.empty());
  EXPECT_NE(there, here);
  auto c = Client();
  auto theirs = c.Get(P("/"), {{"Cookie", there}});
  ASSERT_TRUE(theirs);
  EXPECT_EQ(theirs->status, 401);
}

TEST_F(UiServerTest, AWrongHostHeaderIsRefusedEvenWithTheToken) {
  auto c = Client();
  // With the token in the URL: no cookie is handed out, and the token is
  // not used up.
  auto query = c.Get(P("/?token=tok123"), {{"Host", "rebind.example"}});
  ASSERT_TRUE(query);
  EXPECT_EQ(query->status, 403);
  EXPECT_FALSE(query->has_header("Set-Cookie"));
  ASSERT_FALSE(Session().empty()) << "the refused request used the token up";
  httplib::Headers h = Authed();
  h.emplace("Host", "rebind.example:" + std::to_string(server_->port()));
  auto res = c.Get(P("/"), h);
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 403);
  EXPECT_NE(res->body.find("Host header"), std::string::npos);
}

TEST_F(UiServerTest, PagesCarryAStrictContentSecurityPolicy) {
  auto c = Client();
  for (const char* path : {"/", "/jobs/done1", "/jobs/nope", "/static/ui.css"}) {
    auto res = c.Get(P(path), Authed());
    ASSERT_TRUE(res) << path;
    const std::string csp = res->get_header_value("Content-Security-Policy");
    EXPECT_NE(csp.find("default-src 'none'"), std::string::npos) << path;
    EXPECT_NE(csp.find("script-src 'self'"), std::string::npos) << path;
    EXPECT_EQ(csp.find("unsafe-inline"), std::string::npos) << path;
    EXPECT_NE(csp.find("base-uri 'self'"), std::string::npos) << path;
    EXPECT_EQ(res->get_header_value("X-Content-Type-Options"), "nosniff");
  }
  auto jobs = c.Get(P("/"), Authed());
  ASSERT_TRUE(jobs);
  EXPECT_EQ(jobs->status, 200);
  EXPECT_NE(jobs->body.find("data-id=\"done1\""), std::string::npos);
  EXPECT_NE(jobs->body.find("data-id=\"live1\""), std::string::npos);
  auto filtered = c.Get(P("/?status=running"), Authed());
  ASSERT_TRUE(filtered);
  EXPECT_EQ(filtered->body.find("data-id=\"done1\""), std::string::npos);
  EXPECT_NE(filtered->body.find("data-id=\"live1\""), std::string::npos);
}

TEST_F(UiServerTest, BadPathsAndBadRequestsGetA4xxAndTheServerKeepsServing) {
  struct Case {
    std::string path;
    std::string status;
  };
  const std::vector<Case> cases = {
      {"/jobs/../../etc/passwd", "404"},
      {"/jobs/..%2F..%2Fetc%2Fpasswd", "404"},
      {"/static/../../../etc/passwd", "404"},
      {"/etc/passwd", "404"},
      {"/jobs/nope", "404"},
      {"/jobs/.hidden", "404"},
      {"/jobs/done1/logs/stream/../../../x", "404"},
      {"/jobs/done1?node=abc", "400"},
      {"/jobs/done1?node=7", "404"},
      {"/jobs/done1?from=-1", "400"},
      {"/?status=bogus", "400"},
  };
  for (const Case& c : cases) {
    const std::string got = Get(c.path);
    EXPECT_EQ(got.substr(0, 12), "HTTP/1.1 " + c.status) << c.path << "\n" << got.substr(0, 200);
    EXPECT_EQ(got.find("root:"), std::string::npos) << c.path;
  }
  // Huge headers.
  const std::string huge = Raw("GET / HTTP/1.1\r\nHost: " + host_ + "\r\nX-Big: " +
                               std::string(64 * 1024, 'a') + "\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(huge.substr(0, 10), "HTTP/1.1 4") << huge.substr(0, 200);
  const std::string long_uri = Get("/" + std::string(20000, 'a'));
  EXPECT_EQ(long_uri.substr(0, 10), "HTTP/1.1 4") << long_uri.substr(0, 200);
  const std::string garbage = Raw("\x01\x02 nonsense\r\n\r\n");
  EXPECT_EQ(garbage.substr(0, 10), "HTTP/1.1 4") << garbage.substr(0, 200);
  // Outside the root, the session cookie lets nothing in: a browser never
  // sends it there.
  for (const std::string& path : {std::string("/"), std::string("/etc/passwd"), std::string("/jobs/done1"),
                                   server_->root() + "x/", "/x" + server_->root() + "/"}) {
    const std::string got = Raw("GET " + path + " HTTP/1.1\r\nHost: " + host_ + "\r\nCookie: " + Session() +
                                "\r\nConnection: close\r\n\r\n");
    EXPECT_EQ(got.substr(0, 12), "HTTP/1.1 401") << path << "\n" << got.substr(0, 200);
  }
  // Still serving.
  EXPECT_EQ(Get("/").substr(0, 12), "HTTP/1.1 200");
}

TEST_F(UiServerTest, TheJobPageLinksEachDiagnosticsFileAndTheFileIsServedAsPlainTextOnly) {
  const std::string run = dir_.path() + "/runs/done1";
  const std::string bundle = run + "/diagnostics/attempt-0";
  std::filesystem::create_directories(bundle);
  std::ofstream(bundle + "/index.txt") << "why: node_failed: rank 1 <b>exited</b>\nat: 2024-05-01T12:00:00.000Z\n";
  std::ofstream(bundle + "/rank-0-local.txt") << "<script>alert(1)</script> docker inspect\n";
  std::filesystem::create_symlink("/etc/passwd", bundle + "/passwd.txt");
  std::filesystem::create_directory_symlink("/etc", run + "/diagnostics/attempt-1");
  auto c = Client();
  auto page = c.Get(P("/jobs/done1"), Authed());
  ASSERT_TRUE(page);
  EXPECT_NE(page->body.find("<h2>Diagnostics</h2>"), std::string::npos);
  EXPECT_NE(page->body.find("attempt 0 at 2024-05-01T12:00:00.000Z: node_failed: rank 1 &lt;b&gt;exited&lt;/b&gt;"),
            std::string::npos)
      << page->body;
  EXPECT_NE(page->body.find("<a href=\"jobs/done1/diagnostics/attempt-0/rank-0-local.txt\">rank-0-local.txt</a>"),
            std::string::npos)
      << page->body;
  EXPECT_EQ(page->body.find("passwd"), std::string::npos);
  auto file = c.Get(P("/jobs/done1/diagnostics/attempt-0/rank-0-local.txt"), Authed());
  ASSERT_TRUE(file);
  EXPECT_EQ(file->status, 200);
  EXPECT_EQ(file->body, "<script>alert(1)</script> docker inspect\n");
  EXPECT_EQ(file->get_header_value("Content-Type"), "text/plain; charset=utf-8");
  EXPECT_EQ(file->get_header_value("X-Content-Type-Options"), "nosniff");
  for (const char* path : {"/jobs/done1/diagnostics/attempt-0/passwd.txt", "/jobs/done1/diagnostics/attempt-1/passwd",
                           "/jobs/done1/diagnostics/attempt-1/hosts.txt", "/jobs/done1/diagnostics/attempt-0/..%2F..%2F0-local.log",
                           "/jobs/done1/diagnostics/attempt-0/.hidden.txt", "/jobs/done1/diagnostics/x/index.txt",
                           "/jobs/nope/diagnostics/attempt-0/index.txt"}) {
    const std::string got = Get(path);
    EXPECT_EQ(got.substr(0, 12), "HTTP/1.1 404") << path << "\n" << got.substr(0, 200);
    EXPECT_EQ(got.find("root:"), std::string::npos) << path;
  }
  // Without the session: refused like every page.
  auto anonymous = c.Get(P("/jobs/done1/diagnostics/attempt-0/index.txt"));
  ASSERT_TRUE(anonymous);
  EXPECT_EQ(anonymous->status, 401);
}

TEST_F(UiServerTest, TheJobPageListsWhereEachFileWentWithItsSizeChecksumAndOutcome) {
  {
    auto page = Client().Get(P("/jobs/done1"), Authed());
    ASSERT_TRUE(page);
    EXPECT_EQ(page->body.find("Object storage"), std::string::npos);  // none recorded: no section
  }
  Result<std::unique_ptr<UploadStore>> uploads = UploadStore::Open(dir_.path());
  ASSERT_TRUE(uploads.ok()) << uploads.status().message();
  const std::string run = dir_.path() + "/runs/done1";
  ASSERT_TRUE((*uploads)
                  ->Record({.job_id = "done1",
                            .name = "s3://ml/done1/rank-0/model.bin",
                            .endpoint = "http://127.0.0.1:9000",
                            .url = "http://127.0.0.1:9000/ml/done1/rank-0/model.bin",
                            .local = run + "/artifacts/0/model.bin",
                            .state = UploadState::kSent,
                            .size = 25165824,
                            .md5 = "887c9b7f134179475e8ec054ab93597e",
                            .parts = 3,
                            .parts_sent = 3,
                            .at = WallNow()})
                  .ok());
  ASSERT_TRUE((*uploads)
                  ->Record({.job_id = "done1",
                            .name = "s3://ml/done1/logs/0-local.log",
                            .endpoint = "http://127.0.0.1:9000",
                            .local = run + "/0-local.log",
                            .state = UploadState::kFailed,
                            .size = 51,
                            .detail = "s3://ml/done1/logs/0-local.log at http://127.0.0.1:9000: HTTP 403 <AccessDenied>",
                            .at = WallNow()})
                  .ok());
  ASSERT_TRUE((*uploads)
                  ->Record({.job_id = "done1",
                            .name = "s3://ml/done1/rank-0/big.bin",
                            .endpoint = "http://127.0.0.1:9000",
                            .local = run + "/artifacts/0/big.bin",
                            .state = UploadState::kSending,
                            .upload_id = "up-7",
                            .at = WallNow()})
                  .ok());
  auto page = Client().Get(P("/jobs/done1"), Authed());
  ASSERT_TRUE(page);
  ASSERT_EQ(page->status, 200);
  const std::string& b = page->body;
  EXPECT_NE(b.find("<h2>Object storage</h2>"), std::string::npos) << b;
  EXPECT_NE(b.find("<tr data-state=\"sent\"><td title=\"http://127.0.0.1:9000/ml/done1/rank-0/model.bin\">"
                   "s3://ml/done1/rank-0/model.bin</td><td>" + run + "/artifacts/0/model.bin</td><td class=\"num\">"
                   "24.0 MiB</td><td><code>887c9b7f134179475e8ec054ab93597e</code></td><td>sent in 3 parts</td></tr>"),
            std::string::npos)
      << b;
  EXPECT_NE(b.find("failed: s3://ml/done1/logs/0-local.log at http://127.0.0.1:9000: HTTP 403 &lt;AccessDenied&gt;"),
            std::string::npos)
      << b;
  // Sending when its job ended: interrupted, its upload id kept.
  EXPECT_NE(b.find("<tr data-state=\"interrupted\">"), std::string::npos) << b;
  EXPECT_NE(b.find("its multipart upload up-7 is kept for a resume"), std::string::npos) << b;
  // The running job's page has no such section (nothing recorded for it).
  auto live = Client().Get(P("/jobs/live1"), Authed());
  ASSERT_TRUE(live);
  EXPECT_EQ(live->body.find("Object storage"), std::string::npos);
}

TEST_F(UiServerTest, StopNeedsTheCsrfTokenOfThatJobsPage) {
  auto c = Client();
  auto res = c.Post(P("/jobs/live1/stop"), Authed(), "csrf=forged", "application/x-www-form-urlencoded");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 403);
  auto page = c.Get(P("/jobs/live1"), Authed());
  ASSERT_TRUE(page);
  const std::string marker = "name=\"csrf\" value=\"";
  const size_t at = page->body.find(marker);
  ASSERT_NE(at, std::string::npos);
  const std::string csrf = page->body.substr(at + marker.size(), 64);
  auto other = c.Post(P("/jobs/done1/stop"), Authed(), "csrf=" + csrf, "application/x-www-form-urlencoded");
  ASSERT_TRUE(other);
  EXPECT_EQ(other->status, 403);  // bound to live1's page
  auto ok = c.Post(P("/jobs/live1/stop"), Authed(), "csrf=" + csrf, "application/x-www-form-urlencoded");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 303);
  EXPECT_EQ(ok->get_header_value("Location"), P("/jobs/live1?stopping=1"));
  auto get = c.Get(P("/jobs/live1/stop"), Authed());
  ASSERT_TRUE(get);
  EXPECT_EQ(get->status, 404);  // only a POST stops
}

TEST_F(UiServerTest, TheLiveStreamSendsAppendedLinesAndEndsWhenTheJobEnds) {
  std::string received;
  std::atomic<bool> done{false};
  std::thread reader([&] {
    auto c = Client();
    auto res = c.Get(P("/jobs/live1/logs/stream"), Authed(),
                     [&](const char* data, size_t n) {
                       received.append(data, n);
                       return true;
                     });
    done = true;
  });
  const std::string log = dir_.path() + "/runs/live1/0-local.log";
  std::this_thread::sleep_for(milliseconds(500));
  // The cap is one stream: a second gets 503 while the first runs.
  {
    auto c = Client();
    auto res = c.Get(P("/jobs/live1/logs/stream"), Authed());
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 503);
  }
  std::ofstream(log, std::ios::app) << "2024-05-01T12:00:01.000000000Z stderr <b>appended</b>\n";
  std::this_thread::sleep_for(milliseconds(600));
  ASSERT_TRUE(store_->SetStatus("live1", JobStatus::kSucceeded, 0).ok());
  for (int i = 0; i < 50 && !done; ++i) std::this_thread::sleep_for(milliseconds(100));
  EXPECT_TRUE(done);
  reader.join();
  EXPECT_NE(received.find("\"text\":\"hello from live1\""), std::string::npos) << received;
  EXPECT_NE(received.find("\"stderr\":true,\"text\":\"<b>appended</b>\""), std::string::npos)
      << received;
  EXPECT_NE(received.find("id: 0:"), std::string::npos) << received;
  EXPECT_NE(received.find("event: end\ndata: succeeded"), std::string::npos) << received;
  // The stream's slot is free again.
  auto c = Client();
  auto again = c.Get(P("/jobs/done1/logs/stream"), Authed());
  ASSERT_TRUE(again);
  EXPECT_EQ(again->status, 200);
  EXPECT_NE(again->body.find("event: end"), std::string::npos);
}

TEST_F(UiServerTest, AStreamResumedFromTheLogsStartSendsAtMostThePagesLiveLinesOfALongLog) {
  // done1's log grows to 3 x kLiveLogLines lines; a browser that resumes
  // from cursor 0:0 (Last-Event-ID) gets the last kLiveLogLines, not the
  // whole log in one response.
  {
    std::ofstream log(dir_.path() + "/runs/done1/0-local.log", std::ios::app);
    for (size_t i = 0; i < 3 * kLiveLogLines; ++i) {
      log << "2024-05-01T12:00:01.000000000Z stdout line " << i << "\n";
    }
  }
  auto c = Client();
  httplib::Headers headers = Authed();
  headers.emplace("Last-Event-ID", "0:0");
  auto res = c.Get(P("/jobs/done1/logs/stream"), headers);
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  size_t events = 0;
  for (size_t at = res->body.find("event: line"); at != std::string::npos; at = res->body.find("event: line", at + 1)) {
    ++events;
  }
  EXPECT_LE(events, kLiveLogLines);
  EXPECT_GE(events, kLiveLogLines - 1);
  EXPECT_NE(res->body.find("\"text\":\"line " + std::to_string(3 * kLiveLogLines - 1) + "\""), std::string::npos);
  EXPECT_EQ(res->body.find("\"text\":\"line 0\""), std::string::npos) << "the log's start was sent";
  EXPECT_NE(res->body.find("event: end"), std::string::npos);
}

TEST_F(UiServerTest, HeadsThatNeverEndOnMoreConnectionsThanServerThreadsDoNotDelayAPage) {
  // Six connections (more than the 4 server threads) each send half a
  // head and nothing more. The gate holds them; the server's threads stay
  // free, so a page is served at once, and the six are still open.
  std::vector<int> slow;
  for (int i = 0; i < 6; ++i) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(server_->port()));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    const std::string half = "GET / HTTP/1.1\r\nHost: " + host_;
    ASSERT_EQ(send(fd, half.data(), half.size(), MSG_NOSIGNAL), static_cast<ssize_t>(half.size()));
    slow.push_back(fd);
  }
  std::this_thread::sleep_for(milliseconds(100));
  for (int i = 0; i < 3; ++i) {
    const std::string page = Get("/");  // Raw waits at most 5 s for each read
    EXPECT_EQ(page.substr(0, 12), "HTTP/1.1 200") << i << ": " << page.substr(0, 200);
  }
  for (int fd : slow) {
    pollfd p{fd, POLLIN, 0};
    EXPECT_EQ(poll(&p, 1, 0), 0) << "a half head was answered or closed before its deadline";
    close(fd);
  }
}


TEST_F(UiServerTest, AnArrayIsOneRowOnTheJobsPageAndHasAPageOfItsMembersAndAttempts) {
  // Array "arr1" of 3: member 0's job is done1 (succeeded), member 1's is
  // live1 (running), member 2 has not started.
  auto arrays = ArrayStore::Open(dir_.path());
  ASSERT_TRUE(arrays.ok()) << arrays.status().message();
  ArrayRecord a;
  a.id = "arr1";
  a.name = "sweep";
  a.size = 3;
  a.parallel = 2;
  a.created = WallNow();
  a.controller_pid = getpid();
  std::vector<MemberRecord> members(3);
  for (int i = 0; i < 3; ++i) {
    members[i].array_id = "arr1";
    members[i].index = i;
    members[i].params = "seed=" + std::to_string(i);
  }
  members[0].status = MemberStatus::kSucceeded;
  members[0].attempts = 1;
  members[0].job_ids = {"done1"};
  members[0].exit_code = 0;
  members[0].hosts = "local";
  members[1].status = MemberStatus::kRunning;
  members[1].attempts = 1;
  members[1].job_ids = {"live1"};
  members[1].hosts = "local";
  ASSERT_TRUE((*arrays)->CreateArray(a, members).ok());
  JobRecord plain;
  plain.id = "plain1";
  plain.name = "plain";
  plain.status = JobStatus::kSucceeded;
  plain.created = WallNow();
  plain.exit_code = 0;
  ASSERT_TRUE(store_->CreateJob(plain).ok());

  auto c = Client();
  auto jobs = c.Get(P("/"), Authed());
  ASSERT_TRUE(jobs);
  EXPECT_EQ(jobs->status, 200);
  EXPECT_NE(jobs->body.find("<tr class=\"array\" data-id=\"arr1\" data-status=\"running\" data-size=\"3\" "
                            "data-waiting=\"1\" data-running=\"1\" data-succeeded=\"1\" data-failed=\"0\""),
            std::string::npos)
      << jobs->body;
  EXPECT_NE(jobs->body.find("running 1, succeeded 1, waiting 1"), std::string::npos);
  EXPECT_NE(jobs->body.find("data-id=\"plain1\""), std::string::npos);
  // The members' jobs are the array's row, not rows of their own.
  EXPECT_EQ(jobs->body.find("data-id=\"done1\""), std::string::npos);
  EXPECT_EQ(jobs->body.find("data-id=\"live1\""), std::string::npos);
  auto filtered = c.Get(P("/?name=swe"), Authed());
  ASSERT_TRUE(filtered);
  EXPECT_NE(filtered->body.find("data-id=\"arr1\""), std::string::npos);
  EXPECT_EQ(filtered->body.find("data-id=\"plain1\""), std::string::npos);
  auto done_only = c.Get(P("/?status=succeeded"), Authed());
  ASSERT_TRUE(done_only);
  EXPECT_EQ(done_only->body.find("data-id=\"arr1\""), std::string::npos);

  auto page = c.Get(P("/arrays/arr1"), Authed());
  ASSERT_TRUE(page);
  EXPECT_EQ(page->status, 200);
  EXPECT_NE(page->body.find("<p id=\"array-counts\">members: running 1, succeeded 1, waiting 1"), std::string::npos);
  EXPECT_NE(page->body.find("<tr class=\"member\" data-index=\"0\" data-status=\"succeeded\" data-attempts=\"1\">"),
            std::string::npos);
  EXPECT_NE(page->body.find("<tr class=\"member\" data-index=\"2\" data-status=\"waiting\" data-attempts=\"0\">"),
            std::string::npos);
  // Each attempt with its job's status and the hosts of its nodes.
  EXPECT_NE(page->body.find("<tr class=\"attempt\" data-index=\"0\" data-attempt=\"1\" data-job=\"done1\" "
                            "data-status=\"succeeded\">"),
            std::string::npos)
      << page->body;
  EXPECT_NE(page->body.find("data-job=\"live1\" data-status=\"running\""), std::string::npos);
  EXPECT_NE(page->body.find("<td><a href=\"jobs/live1\">live1</a></td><td><span class=\"status status-running\">"
                            "running</span></td><td>local</td>"),
            std::string::npos);
  // A member whose job waits for hosts shows waiting.
  ASSERT_TRUE(store_->SetStatus("live1", JobStatus::kWaiting, std::nullopt, "for local").ok());
  auto waiting = c.Get(P("/arrays/arr1"), Authed());
  ASSERT_TRUE(waiting);
  EXPECT_NE(waiting->body.find("members: succeeded 1, waiting 2"), std::string::npos);

  for (const char* path : {"/arrays/nope", "/arrays/../jobs/done1", "/arrays/done1"}) {
    const std::string got = Get(path);
    EXPECT_EQ(got.substr(0, 12), "HTTP/1.1 404") << path;
  }
  EXPECT_NE(Get("/arrays/nope").find("no array &#39;nope&#39;"), std::string::npos);
}

TEST_F(UiServerTest, TheHostsPageShowsWhoHoldsAndWaitsForEachHostFromTheStore) {
  ASSERT_TRUE(store_->UpsertHost({"live1", 0, "local", "", std::nullopt}).ok());
  JobRecord w;
  w.id = "wait1";
  w.name = "waiter";
  w.status = JobStatus::kWaiting;
  w.created = WallNow();
  w.controller_pid = getpid();
  ASSERT_TRUE(store_->CreateJob(w).ok());
  ASSERT_TRUE(store_->UpsertHost({"wait1", 0, "local", "", std::nullopt}).ok());
  ASSERT_TRUE(store_->AddEvent("wait1", "waiting", std::nullopt, "for local (held by live1)").ok());
  // done1's node held host "local" and 2 GPUs for 36 s, an hour ago: its recent use.
  const TimePoint hour_ago = WallNow() - std::chrono::hours(1);
  ASSERT_TRUE(store_
                  ->WritePhases({{0, "done1", 0, "local", 0, "start", hour_ago, hour_ago, "ok", 2},
                                 {0, "done1", 0, "local", std::nullopt, "remove", hour_ago + seconds(30),
                                  hour_ago + seconds(36), "ok", std::nullopt}})
                  .ok());
  auto c = Client();
  auto page = c.Get(P("/hosts"), Authed());
  ASSERT_TRUE(page);
  EXPECT_EQ(page->status, 200);
  EXPECT_NE(page->body.find("<section class=\"host stored\" data-host=\"local\">"), std::string::npos) << page->body;
  EXPECT_NE(page->body.find("<tr class=\"hold\" data-job=\"live1\" data-status=\"running\">"), std::string::npos);
  EXPECT_NE(page->body.find("<tr class=\"ticket\" data-job=\"wait1\"><td>#1</td>"), std::string::npos);
  EXPECT_NE(page->body.find("<td>for local (held by live1)</td>"), std::string::npos);
  EXPECT_NE(page->body.find("barge ui --job-file FILE"), std::string::npos);  // not asked live
  EXPECT_EQ(page->body.find("class=\"host live\""), std::string::npos);
  EXPECT_EQ(page->body.find("data-job=\"done1\""), std::string::npos);  // ended: holds nothing
  EXPECT_NE(page->body.find("<tr class=\"use\" data-host=\"local\"><td>local</td><td class=\"num\">0.01</td>"
                            "<td class=\"num\">0.02</td></tr>"),
            std::string::npos)
      << page->body;
}

TEST_F(UiServerTest, GivenHostsTheHostsPageAlsoShowsWhatBargeHostsReadsFromThem) {
  const std::string fake = dir_.path() + "/fake-barge";
  std::ofstream(fake) << "#!/bin/sh\n"
                         "[ \"$*\" = 'hosts --json --hosts local' ] || { echo \"barge: bad args: $*\" >&2; exit 2; }\n"
                         "cat <<'EOF'\n"
                         "[{\"host\": \"local\", \"containers\": [], \"holds\": [{\"name\": \"barge-hold-host\", "
                         "\"job\": \"live1\", \"job_name\": \"live1\", \"user\": \"ann\", \"machine\": \"laptop\", "
                         "\"gpus\": \"all\", \"since\": \"2024-05-01T12:00:00Z\", \"stale_at\": null, \"stale\": false, "
                         "\"lease\": false, \"ticket\": false, \"queue_position\": null}]}]\n"
                         "EOF\n";
  chmod(fake.c_str(), 0700);
  UiOptions options;
  options.state_dir = dir_.path();
  options.port = 0;
  options.token = "tok123";
  options.threads = 4;
  options.max_streams = 1;
  options.barge_binary = fake;
  options.hosts_list = "local";
  auto server = UiServer::Start(options);
  ASSERT_TRUE(server.ok()) << server.status().message();
  httplib::Client c("127.0.0.1", (*server)->port());
  c.set_read_timeout(30, 0);
  auto page = c.Get((*server)->root() + "/hosts", {{"Cookie", LogIn(**server)}});
  ASSERT_TRUE(page);
  EXPECT_EQ(page->status, 200);
  EXPECT_NE(page->body.find("As <code>barge hosts --json --hosts local</code> answered"), std::string::npos)
      << page->body;
  EXPECT_NE(page->body.find("<section class=\"host live\" data-host=\"local\">"), std::string::npos);
  EXPECT_NE(page->body.find("<tr class=\"hold\" data-job=\"live1\" data-name=\"barge-hold-host\"><td>hold host</td>"),
            std::string::npos);
  EXPECT_NE(page->body.find("<td>ann@laptop</td><td>2024-05-01T12:00:00Z</td><td>all</td><td>never</td>"),
            std::string::npos);
  EXPECT_EQ(page->body.find("id=\"live-error\""), std::string::npos);

  options.hosts_job_file = "/x/job.yaml";
  auto both = UiServer::Start(options);
  ASSERT_FALSE(both.ok());
}


// The paths of the unix sockets this process listens on (its descriptors'
// sockets, looked up in the kernel's table, /proc/net/unix): found without
// asking the server where it put them.
std::vector<std::string> OwnListeningUnixSockets() {
  std::set<std::string> inodes;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
    std::error_code ec;
    const std::string target = std::filesystem::read_symlink(entry.path(), ec).string();
    if (!ec && target.rfind("socket:[", 0) == 0) inodes.insert(target.substr(8, target.size() - 9));
  }
  std::vector<std::string> paths;
  std::ifstream table("/proc/net/unix");
  std::string line;
  std::getline(table, line);  // Num RefCount Protocol Flags Type St Inode Path
  while (std::getline(table, line)) {
    std::istringstream fields(line);
    std::string num, refs, protocol, flags, type, state, inode, path;
    fields >> num >> refs >> protocol >> flags >> type >> state >> inode >> path;
    const bool listening = (std::stoul(flags, nullptr, 16) & 0x10000) != 0;  // __SO_ACCEPTCON
    if (listening && !path.empty() && inodes.count(inode) > 0) paths.push_back(path);
  }
  return paths;
}

// A connection to unix socket `path`, or -1 (errno says why).
int ConnectUnix(const std::string& path) {
  const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) return fd;
  const int saved = errno;
  close(fd);
  errno = saved;
  return -1;
}

// ConnectUnix(`path`) as uid/gid 65534 (nobody), in a child process: 0
// when it connected, else its errno.
int ConnectAsNobody(const std::string& path) {
  const pid_t pid = fork();
  if (pid == 0) {
    if (setgroups(0, nullptr) != 0 || setgid(65534) != 0 || setuid(65534) != 0) _exit(255);
    _exit(ConnectUnix(path) >= 0 ? 0 : errno);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 254;
}

TEST_F(UiServerTest, TheInnerSocketsDirectoryIs0700SoAnotherUserCannotConnectPastTheGateEvenUnderUmask0) {
  ASSERT_EQ(geteuid(), 0u) << "this test plays another user (uid 65534): it needs root";
  server_.reset();
  // Under umask 0 the socket file itself is open to all (cpp-httplib does
  // not chmod it): only the directory keeps other users out.
  const mode_t old_umask = umask(0);
  UiOptions options;
  options.state_dir = dir_.path();
  options.port = 0;
  options.token = "tok123";
  auto server = UiServer::Start(options);
  umask(old_umask);
  ASSERT_TRUE(server.ok()) << server.status().message();
  const std::vector<std::string> sockets = OwnListeningUnixSockets();
  ASSERT_EQ(sockets.size(), 1u);
  const std::filesystem::path inner = sockets[0];
  EXPECT_EQ(inner.filename(), "http.sock");
  struct stat dir {};
  ASSERT_EQ(lstat(inner.parent_path().c_str(), &dir), 0);
  EXPECT_TRUE(S_ISDIR(dir.st_mode));
  EXPECT_EQ(dir.st_uid, geteuid());
  EXPECT_EQ(dir.st_mode & 07777, 0700u) << inner.parent_path();
  const int nobody = ConnectAsNobody(inner);
  EXPECT_EQ(nobody, EACCES) << (nobody == 0 ? "connected" : std::strerror(nobody));
  // The socket is live: its owner connects.
  const int fd = ConnectUnix(inner);
  EXPECT_GE(fd, 0) << std::strerror(errno);
  if (fd >= 0) close(fd);
}

}  // namespace
}  // namespace barge::runner::ui
