#include "container/docker_api.h"

#include "base/json_depth.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "ssh/event_loop.h"
#include "ssh/local_executor.h"
#include "runner/remote/engine_streams.h"
#include "tests/support/ssh_test_util.h"

namespace barge::container {
namespace {

// --- Requests.

HttpRequest Get(std::string target) {
  HttpRequest r;
  r.target = std::move(target);
  return r;
}
HttpRequest Post(std::string target, std::string body = "", std::string type = "") {
  HttpRequest r;
  r.method = "POST";
  r.target = std::move(target);
  r.body = std::move(body);
  r.content_type = std::move(type);
  return r;
}

TEST(DockerApiRequest, AGetCarriesTheVersionPrefixHostAndConnectionClose) {
  EXPECT_EQ(BuildRequest(Get("/_ping"), "1.41"),
            "GET /v1.41/_ping HTTP/1.1\r\nHost: docker\r\nUser-Agent: barge\r\n"
            "Connection: close\r\n\r\n");
}

TEST(DockerApiRequest, APostAlwaysSaysItsContentLengthAndTheVersionIsAParameter) {
  EXPECT_EQ(BuildRequest(Post("/containers/x/wait"), "1.43"),
            "POST /v1.43/containers/x/wait HTTP/1.1\r\nHost: docker\r\nUser-Agent: barge\r\n"
            "Connection: close\r\nContent-Length: 0\r\n\r\n");
  EXPECT_EQ(BuildRequest(Post("/x", "{}", "application/json"), "1.41"),
            "POST /v1.41/x HTTP/1.1\r\nHost: docker\r\nUser-Agent: barge\r\nConnection: close\r\n"
            "Content-Type: application/json\r\nContent-Length: 2\r\n\r\n{}");
}

TEST(DockerApiRequest, AnUpgradeAsksToTakeTheConnectionOverInsteadOfClosingIt) {
  HttpRequest attach = Post("/containers/x/attach?stream=1&stdout=1&stderr=1");
  attach.upgrade = true;
  EXPECT_EQ(BuildRequest(attach, "1.41"),
            "POST /v1.41/containers/x/attach?stream=1&stdout=1&stderr=1 HTTP/1.1\r\n"
            "Host: docker\r\nUser-Agent: barge\r\nConnection: Upgrade\r\nUpgrade: tcp\r\n"
            "Content-Length: 0\r\n\r\n");
}

TEST(DockerApiRequest, UrlEncodeKeepsUnreservedBytesAndWhatItIsToldToKeep) {
  EXPECT_EQ(UrlEncode("a-b_c.d~9"), "a-b_c.d~9");
  EXPECT_EQ(UrlEncode("{\"label\":[\"barge.job=1\"]}"),
            "%7B%22label%22%3A%5B%22barge.job%3D1%22%5D%7D");
  EXPECT_EQ(UrlEncode("barge/test:local", "/:@"), "barge/test:local");
  EXPECT_EQ(UrlEncode("a b/é"), "a%20b%2F%C3%A9");
}

// --- The response parser, fed every way a response can be split.

struct Parsed {
  Status status;
  bool complete = false;
  int code = 0;
  std::string reason;
  std::map<std::string, std::string> headers;
  std::string body;
};

// Feeds `pieces` in order, then Finish if `close` (the engine closed the stream).
Parsed ParsePieces(const std::vector<std::string_view>& pieces, bool close) {
  Parsed p;
  HttpResponseParser parser([&](std::string_view b) { p.body.append(b); });
  for (std::string_view piece : pieces) {
    p.status = parser.Feed(piece);
    if (!p.status.ok()) break;
  }
  if (p.status.ok() && close) p.status = parser.Finish();
  p.complete = parser.complete();
  p.code = parser.status_code();
  p.reason = parser.reason();
  p.headers = parser.headers();
  return p;
}

// Parses `bytes` whole, byte by byte, and split in two at every boundary;
// every way must give `want`.
void ExpectSameAtEverySplit(const std::string& bytes, bool close, const Parsed& want) {
  auto check = [&](const Parsed& got, const std::string& how) {
    EXPECT_EQ(got.status.ok(), want.status.ok()) << how << ": " << got.status.message();
    EXPECT_EQ(got.complete, want.complete) << how;
    EXPECT_EQ(got.code, want.code) << how;
    EXPECT_EQ(got.reason, want.reason) << how;
    EXPECT_EQ(got.headers, want.headers) << how;
    EXPECT_EQ(got.body, want.body) << how;
  };
  check(ParsePieces({bytes}, close), "whole");
  std::vector<std::string_view> bytewise;
  for (size_t i = 0; i < bytes.size(); ++i) bytewise.push_back(std::string_view(bytes).substr(i, 1));
  check(ParsePieces(bytewise, close), "byte by byte");
  for (size_t i = 0; i <= bytes.size(); ++i) {
    std::string_view all(bytes);
    check(ParsePieces({all.substr(0, i), all.substr(i)}, close), "split at " + std::to_string(i));
  }
}

TEST(HttpResponseParser, ReadsABodyByContentLengthAtEverySplit) {
  const std::string bytes =
      "HTTP/1.1 200 OK\r\nApi-Version: 1.41\r\nContent-Type: text/plain; charset=utf-8\r\n"
      "Content-Length: 2\r\nDocker-Experimental: false\r\n\r\nOK";
  Parsed want;
  want.complete = true;
  want.code = 200;
  want.reason = "OK";
  want.headers = {{"api-version", "1.41"},
                  {"content-type", "text/plain; charset=utf-8"},
                  {"content-length", "2"},
                  {"docker-experimental", "false"}};
  want.body = "OK";
  ExpectSameAtEverySplit(bytes, /*close=*/false, want);
  // Complete before the close; the close changes nothing.
  ExpectSameAtEverySplit(bytes, /*close=*/true, want);
}

TEST(HttpResponseParser, ReadsAChunkedBodyWithExtensionsAndTrailersAtEverySplit) {
  // Chunks of 5, 24 (size with an extension) and 12 bytes, then trailers.
  const std::string bytes =
      "HTTP/1.1 404 Not Found\r\nTransfer-Encoding: chunked\r\n\r\n"
      "5\r\n{\"mes\r\n18;ext=1\r\nsage\":\"No such container\r\n"
      "c\r\n: barge-x\"}\n\r\n0\r\nX-Trailer: t\r\n\r\n";
  Parsed want;
  want.complete = true;
  want.code = 404;
  want.reason = "Not Found";
  want.headers = {{"transfer-encoding", "chunked"}};
  want.body = "{\"message\":\"No such container: barge-x\"}\n";
  ExpectSameAtEverySplit(bytes, /*close=*/false, want);
  EXPECT_EQ(ApiErrorMessage(want.body), "No such container: barge-x");
}

TEST(HttpResponseParser, ReadsABodyUntilCloseOnlyOnceTheStreamEnds) {
  const std::string bytes = "HTTP/1.0 200 OK\nServer: x\n\nline 1\nline 2\n";
  Parsed want;
  want.complete = true;
  want.code = 200;
  want.reason = "OK";
  want.headers = {{"server", "x"}};
  want.body = "line 1\nline 2\n";
  ExpectSameAtEverySplit(bytes, /*close=*/true, want);
  Parsed open = ParsePieces({bytes}, /*close=*/false);
  EXPECT_FALSE(open.complete);
  EXPECT_EQ(open.body, want.body);  // delivered as it arrives
}

TEST(HttpResponseParser, NoContentAndNotModifiedHaveNoBodyAndInterimResponsesAreSkipped) {
  Parsed stopped = ParsePieces({"HTTP/1.1 304 Not Modified\r\nDate: x\r\n\r\n"}, false);
  EXPECT_TRUE(stopped.complete);
  EXPECT_EQ(stopped.code, 304);
  Parsed removed = ParsePieces({"HTTP/1.1 204 No Content\r\n\r\n"}, false);
  EXPECT_TRUE(removed.complete);
  EXPECT_EQ(removed.body, "");
  Parsed interim = ParsePieces(
      {"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 3\r\n\r\nabc"}, false);
  EXPECT_TRUE(interim.complete);
  EXPECT_EQ(interim.code, 201);
  EXPECT_EQ(interim.body, "abc");
}

TEST(HttpResponseParser, AfterA101EveryByteIsTheUpgradedStreamUntilCloseAtEverySplit) {
  // As dockerd writes it for an attach; what follows is not HTTP (here a
  // frame header whose bytes would be a bad chunk size or status line),
  // and a Content-Length, were there one, would not bound it.
  const std::string stream = "\x01\0\0\0\0\0\0\x06hello\nHTTP/1.1 200 OK\r\n\r\n";
  const std::string bytes =
      "HTTP/1.1 101 UPGRADED\r\nContent-Type: application/vnd.docker.raw-stream\r\n"
      "Connection: Upgrade\r\nUpgrade: tcp\r\nContent-Length: 3\r\n\r\n" + stream;
  Parsed want;
  want.complete = true;
  want.code = 101;
  want.reason = "UPGRADED";
  want.headers = {{"content-type", "application/vnd.docker.raw-stream"},
                  {"connection", "Upgrade"},
                  {"upgrade", "tcp"},
                  {"content-length", "3"}};
  want.body = stream;
  ExpectSameAtEverySplit(bytes, /*close=*/true, want);
  Parsed open = ParsePieces({bytes}, /*close=*/false);
  EXPECT_FALSE(open.complete);  // only the close ends it
  EXPECT_EQ(open.body, stream);
}

TEST(HttpResponseParser, ATruncatedResponseIsAnErrorAtClose) {
  for (const std::string& cut :
       {std::string(""), std::string("HTTP/1.1 200 O"), std::string("HTTP/1.1 200 OK\r\nA: b\r\n"),
        std::string("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nabc"),
        std::string("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nabcde\r\n")}) {
    Parsed p = ParsePieces({cut}, /*close=*/true);
    EXPECT_FALSE(p.status.ok()) << cut;
    EXPECT_FALSE(p.complete) << cut;
    EXPECT_NE(p.status.message().find("closed the stream"), std::string::npos)
        << p.status.message();
  }
}

TEST(HttpResponseParser, MalformedResponsesAreErrorsThatStay) {
  for (const std::string& bad :
       {std::string("SSH-2.0-OpenSSH\r\n"), std::string("HTTP/1.1 2x0 OK\r\n"),
        std::string("HTTP/1.1 200 OK\r\nno colon here\r\n\r\n"),
        std::string("HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n"),
        std::string("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"),
        std::string("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nab\r\n")}) {
    HttpResponseParser parser(nullptr);
    Status s = parser.Feed(bad);
    EXPECT_FALSE(s.ok()) << bad;
    EXPECT_NE(s.message().find("malformed HTTP response"), std::string::npos) << s.message();
    EXPECT_FALSE(parser.Feed("HTTP/1.1 200 OK\r\n\r\n").ok());
  }
  HttpResponseParser endless(nullptr);
  EXPECT_FALSE(endless.Feed("HTTP/1.1 200 OK\r\nX: " + std::string(70000, 'a')).ok());
}

// --- The log demuxer.

std::string Frame(int stream, std::string_view payload) {
  std::string f(8, '\0');
  f[0] = static_cast<char>(stream);
  const auto n = static_cast<uint32_t>(payload.size());
  f[4] = static_cast<char>(n >> 24);
  f[5] = static_cast<char>(n >> 16);
  f[6] = static_cast<char>(n >> 8);
  f[7] = static_cast<char>(n);
  return f + std::string(payload);
}

struct Demuxed {
  std::string out, err;
  std::string order;  // "o"/"e" per frame payload piece boundary-merged below
  Status status;
  bool boundary = false;
};

Demuxed DemuxPieces(const std::vector<std::string_view>& pieces) {
  Demuxed d;
  LogStream last = LogStream::kStdout;
  bool any = false;
  LogDemuxer demuxer([&](LogStream s, std::string_view b) {
    EXPECT_FALSE(b.empty());
    (s == LogStream::kStdout ? d.out : d.err).append(b);
    if (!any || s != last) d.order += s == LogStream::kStdout ? 'o' : 'e';
    last = s;
    any = true;
  });
  for (std::string_view p : pieces) {
    d.status = demuxer.Feed(p);
    if (!d.status.ok()) break;
  }
  d.boundary = demuxer.at_frame_boundary();
  return d;
}

TEST(LogDemuxer, SeparatesStdoutAndStderrInOrderAtEverySplit) {
  // A 300-byte payload: its size needs two bytes of the header.
  const std::string long_line = std::string(300, 'x') + "\n";
  const std::string bytes = Frame(1, "2024-01-01T00:00:00.000000001Z out 1\n") +
                            Frame(2, "2024-01-01T00:00:00.000000002Z err 1\n") +
                            Frame(2, "") + Frame(1, long_line) + Frame(0, "stdin as stdout\n") +
                            Frame(2, "err 2\n");
  const std::string want_out =
      "2024-01-01T00:00:00.000000001Z out 1\n" + long_line + "stdin as stdout\n";
  const std::string want_err = "2024-01-01T00:00:00.000000002Z err 1\nerr 2\n";
  auto check = [&](const Demuxed& d, const std::string& how) {
    EXPECT_TRUE(d.status.ok()) << how << ": " << d.status.message();
    EXPECT_EQ(d.out, want_out) << how;
    EXPECT_EQ(d.err, want_err) << how;
    EXPECT_EQ(d.order, "oeoe") << how;
    EXPECT_TRUE(d.boundary) << how;
  };
  check(DemuxPieces({bytes}), "whole");
  std::vector<std::string_view> bytewise;
  for (size_t i = 0; i < bytes.size(); ++i) bytewise.push_back(std::string_view(bytes).substr(i, 1));
  check(DemuxPieces(bytewise), "byte by byte");
  for (size_t i = 0; i <= bytes.size(); ++i) {
    for (size_t j = i; j <= bytes.size(); j += 7) {
      std::string_view all(bytes);
      check(DemuxPieces({all.substr(0, i), all.substr(i, j - i), all.substr(j)}),
            "split at " + std::to_string(i) + " and " + std::to_string(j));
    }
  }
}

TEST(LogDemuxer, APartFrameIsNotAtABoundaryAndABadHeaderIsAnError) {
  const std::string f = Frame(1, "abc");
  EXPECT_FALSE(DemuxPieces({std::string_view(f).substr(0, 5)}).boundary);
  EXPECT_FALSE(DemuxPieces({std::string_view(f).substr(0, 9)}).boundary);
  EXPECT_TRUE(DemuxPieces({f}).boundary);
  Demuxed tty = DemuxPieces({"hello from a tty\n"});
  EXPECT_FALSE(tty.status.ok());
  EXPECT_NE(tty.status.message().find("TTY"), std::string::npos) << tty.status.message();
  Demuxed system = DemuxPieces({Frame(1, "a\n") + Frame(3, "log driver broke\n")});
  EXPECT_EQ(system.out, "a\n");
  EXPECT_EQ(system.status.message(),
            "the engine reported an error in the log stream: log driver broke");
}

// Issue #29: a broken engine or socket proxy cannot make the controller
// buffer without a limit: too many header lines, too many header bytes, an
// error frame whose header claims more than the cap (refused before any of
// it is buffered).
TEST(HttpResponseParser, HeaderLinesAndBytesAreCapped) {
  std::string many = "HTTP/1.1 200 OK\r\n";
  for (size_t i = 0; i <= HttpResponseParser::kMaxHeaders; ++i) many += "X-" + std::to_string(i) + ": v\r\n";
  HttpResponseParser lines(nullptr);
  Status s = lines.Feed(many);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("more than 256 header lines"), std::string::npos) << s.message();

  std::string big = "HTTP/1.1 200 OK\r\n";
  for (int i = 0; i < 10; ++i) big += "X-" + std::to_string(i) + ": " + std::string(30000, 'a') + "\r\n";
  HttpResponseParser bytes(nullptr);
  s = bytes.Feed(big);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("KiB of headers"), std::string::npos) << s.message();

  HttpResponseParser fine(nullptr);
  EXPECT_TRUE(fine.Feed("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n").ok());
  EXPECT_TRUE(fine.complete());
}

TEST(LogDemuxer, AnErrorFrameLongerThanTheCapIsRefusedFromItsHeader) {
  std::string header(8, '\0');
  header[0] = 3;
  header[4] = '\x7f';  // about 2 GiB claimed
  Demuxed d = DemuxPieces({header, "some"});
  ASSERT_FALSE(d.status.ok());
  EXPECT_NE(d.status.message().find("an error frame of 2130706432 bytes (at most 65536)"), std::string::npos)
      << d.status.message();
}

// --- JSON readers.

TEST(DockerApiJson, ReadsAContainerObjectAsInspectDoesForOneEntryOfItsArray) {
  const std::string object =
      R"({"Id":"abc","Name":"/barge-1","Image":"sha256:i","State":{"Status":"exited",)"
      R"("Running":false,"ExitCode":3,"OOMKilled":false,"Error":"",)"
      R"("StartedAt":"2024-01-01T00:00:00.5Z","FinishedAt":"0001-01-01T00:00:00Z"},)"
      R"("Config":{"Labels":{"barge.job":"7"}}})";
  Result<ContainerState> c = ParseContainerObject(object);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->name, "barge-1");
  EXPECT_EQ(c->exit_code, 3);
  EXPECT_EQ(c->status, "exited");
  EXPECT_EQ(c->labels.at("barge.job"), "7");
  EXPECT_EQ(c->started_at_ns, 1704067200500000000LL);
  EXPECT_FALSE(c->finished_at_ns.has_value());
  Result<std::vector<ContainerState>> array = ParseContainerInspect("[" + object + "]");
  ASSERT_TRUE(array.ok());
  EXPECT_EQ(array->at(0).id, c->id);
  Result<ContainerState> bad = ParseContainerObject(R"({"Id":"a","Name":"/n"})");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "engine API: container (n): field State is missing");
}

TEST(DockerApiJson, ReadsImagesContainerListsAndWaitAnswers) {
  Result<ImageInfo> image = ParseImageObject(
      R"({"Id":"sha256:ab","GraphDriver":{"Name":"overlay2","Data":{"UpperDir":"/var/lib/docker/overlay2/x/diff"}}})");
  ASSERT_TRUE(image.ok()) << image.status().message();
  EXPECT_EQ(image->id, "sha256:ab");
  EXPECT_EQ(image->upper_dir, "/var/lib/docker/overlay2/x/diff");
  EXPECT_EQ(ParseImageObject(R"({"Id":"sha256:ab","GraphDriver":{"Data":null}})")->upper_dir, "");
  EXPECT_FALSE(ParseImageObject(R"({"GraphDriver":{}})").ok());

  Result<std::vector<PsEntry>> list = ParseContainerList(
      R"([{"Id":"f00","Names":["/a","/b"],"Image":"img","State":"running","Status":"Up 1 s",)"
      R"("Labels":{"note":"x,y=z","barge.job":"9"}},{"Id":"ba5","Names":null,"Labels":null}])");
  ASSERT_TRUE(list.ok()) << list.status().message();
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ(list->at(0).names, "a,b");
  EXPECT_EQ(list->at(0).labels.at("note"), "x,y=z");  // exact, unlike `docker ps`
  EXPECT_EQ(list->at(0).state, "running");
  EXPECT_EQ(list->at(1).id, "ba5");
  EXPECT_FALSE(ParseContainerList(R"({"Id":"x"})").ok());

  EXPECT_EQ(*ParseWaitResponse(R"({"Error":null,"StatusCode":137})"), 137);
  Result<int> failed = ParseWaitResponse(R"({"Error":{"Message":"no such"},"StatusCode":-1})");
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().message(), "engine API: wait: no such");
  EXPECT_FALSE(ParseWaitResponse("not json").ok());
}

TEST(DockerApiJson, AnErrorBodyGivesTheEnginesMessageOrItsText) {
  EXPECT_EQ(ApiErrorMessage(R"({"message":"No such image: x"})"), "No such image: x");
  EXPECT_EQ(ApiErrorMessage("page not found\n"), "page not found");
  EXPECT_EQ(ApiErrorMessage(""), "no message");
}

// --- DockerApi over a real unix socket served by canned bytes.

// Accepts connections on a unix socket in a temp dir, one at a time; each
// gets `reply(request_bytes)` written in pieces of `piece` bytes.
class CannedEngine {
 public:
  CannedEngine(std::function<std::string(const std::string&)> reply, size_t piece, int connections)
      : path_(dir_.File("engine.sock")) {
    fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path_.c_str(), sizeof addr.sun_path - 1);
    EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    EXPECT_EQ(listen(fd_, 8), 0);
    thread_ = std::thread([this, reply, piece, connections] {
      for (int i = 0; i < connections; ++i) {
        int c = accept(fd_, nullptr, nullptr);
        if (c < 0) return;
        std::string request;
        char buf[4096];
        while (request.find("\r\n\r\n") == std::string::npos) {
          ssize_t n = read(c, buf, sizeof buf);
          if (n <= 0) break;
          request.append(buf, static_cast<size_t>(n));
        }
        requests_.push_back(request);
        const std::string out = reply(request);
        for (size_t off = 0; off < out.size(); off += piece) {
          std::string_view p = std::string_view(out).substr(off, piece);
          if (send(c, p.data(), p.size(), MSG_NOSIGNAL) < 0) break;
          usleep(200);
        }
        close(c);
      }
    });
  }
  ~CannedEngine() {
    shutdown(fd_, SHUT_RDWR);
    thread_.join();
    close(fd_);
  }
  const std::string& path() const { return path_; }
  const std::vector<std::string>& requests() const { return requests_; }  // after the join

 private:
  ssh::testing::TempDir dir_;
  std::string path_;
  int fd_ = -1;
  std::thread thread_;
  std::vector<std::string> requests_;
};

TEST(DockerApi, ANotFoundAnswerIsDistinguishableAndCarriesTheEnginesTextAndTheHost) {
  ssh::EventLoop loop;
  ssh::LocalExecutor local(&loop);
  runner::EngineStreams streams(&local);
  std::vector<std::string> requests;
  {
    CannedEngine engine(
        [](const std::string&) {
          return std::string(
              "HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\n"
              "Content-Length: 46\r\n\r\n{\"message\":\"No such container: barge-gone\"}\n\n\n");
        },
        5, 1);
    DockerApi api(&streams, engine.path());
    std::optional<Reply<ContainerState>> got;
    auto call = api.InspectContainer("barge-gone", [&](Reply<ContainerState> r) { got = std::move(r); });
    ASSERT_TRUE(call.ok()) << call.status().message();
    EXPECT_FALSE(got.has_value());  // never from inside the call
    ASSERT_TRUE(ssh::testing::PollUntil(loop, [&] { return got.has_value(); }));
    EXPECT_FALSE(got->ok());
    EXPECT_TRUE(got->not_found());
    EXPECT_EQ(got->http_status, 404);
    EXPECT_EQ(got->value.status().message(),
              "local: GET /containers/barge-gone/json: No such container: barge-gone (HTTP 404)");
  }
}

TEST(DockerApi, FollowedLogsSplitAcrossChunksAndReadsArriveDemultiplexedInOrder) {
  ssh::EventLoop loop;
  ssh::LocalExecutor local(&loop);
  runner::EngineStreams streams(&local);
  std::string body;
  std::string want_out, want_err;
  for (int i = 0; i < 50; ++i) {
    const std::string line = "2024-01-01T00:00:00." + std::to_string(100000000 + i) + "Z line " +
                             std::to_string(i) + "\n";
    body += Frame(i % 3 == 0 ? 2 : 1, line);
    (i % 3 == 0 ? want_err : want_out) += line;
  }
  // Chunks of 13 bytes: frame headers and payloads cut anywhere.
  std::string chunked = "HTTP/1.1 200 OK\r\nContent-Type: application/vnd.docker.raw-stream\r\n"
                        "Transfer-Encoding: chunked\r\n\r\n";
  for (size_t off = 0; off < body.size(); off += 13) {
    const std::string c = body.substr(off, 13);
    char size[16];
    std::snprintf(size, sizeof size, "%zx\r\n", c.size());
    chunked += size + c + "\r\n";
  }
  chunked += "0\r\n\r\n";
  std::vector<std::string> requests;
  std::string out, err;
  std::optional<Reply<NoContent>> got;
  {
    CannedEngine engine([&](const std::string&) { return chunked; }, 7, 1);
    DockerApi api(&streams, engine.path(), "1.40");
    LogOptions options;
    options.follow = true;
    options.since_ns = 1704067200123456789LL;
    auto call = api.Logs(
        "barge-x", options,
        [&](LogStream s, std::string_view b) { (s == LogStream::kStdout ? out : err).append(b); },
        [&](Reply<NoContent> r) { got = std::move(r); });
    ASSERT_TRUE(call.ok());
    ASSERT_TRUE(ssh::testing::PollUntil(loop, [&] { return got.has_value(); }));
    call->reset();
  }
  ASSERT_TRUE(got->ok()) << got->value.status().message();
  EXPECT_EQ(out, want_out);
  EXPECT_EQ(err, want_err);
}

TEST(DockerApi, SendsTheRequestLineOfEachHelper) {
  ssh::EventLoop loop;
  ssh::LocalExecutor local(&loop);
  runner::EngineStreams streams(&local);
  std::vector<std::string> lines;
  {
    CannedEngine engine(
        [&](const std::string& request) {
          lines.push_back(request.substr(0, request.find("\r\n")));
          if (request.rfind("POST /v1.41/containers/c/wait", 0) == 0) {
            return std::string("HTTP/1.1 200 OK\r\n\r\n{\"Error\":null,\"StatusCode\":7}\n");
          }
          if (request.rfind("POST /v1.41/containers/c/stop", 0) == 0) {
            return std::string("HTTP/1.1 304 Not Modified\r\n\r\n");
          }
          if (request.rfind("DELETE", 0) == 0) return std::string("HTTP/1.1 204 No Content\r\n\r\n");
          if (request.rfind("GET /v1.41/containers/json", 0) == 0) {
            return std::string("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n[]");
          }
          if (request.rfind("GET /v1.41/images/", 0) == 0) {
            const std::string body = "{\"Id\":\"sha256:1\",\"GraphDriver\":{}}";
            return "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(body.size()) +
                   "\r\n\r\n" + body;
          }
          return std::string("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nOK");
        },
        64, 6);
    DockerApi api(&streams, engine.path());
    int done = 0;
    std::optional<int> code;
    std::string ping, image_id;
    bool stopped = false, removed = false, listed = false;
    auto run = [&](Result<DockerApi::CallPtr> call) {
      ASSERT_TRUE(call.ok());
      const int before = done;
      ASSERT_TRUE(ssh::testing::PollUntil(loop, [&] { return done > before; }));
    };
    run(api.Ping([&](Reply<std::string> r) { ping = r.ok() ? *r.value : r.value.status().message(); ++done; }));
    run(api.Wait("c", [&](Reply<int> r) { if (r.ok()) code = *r.value; ++done; }));
    run(api.Stop("c", 10, [&](Reply<NoContent> r) { stopped = r.ok(); ++done; }));
    run(api.Remove("c", true, [&](Reply<NoContent> r) { removed = r.ok(); ++done; }));
    run(api.InspectImage("barge/test:local", [&](Reply<ImageInfo> r) {
      image_id = r.ok() ? r.value->id : r.value.status().message();
      ++done;
    }));
    run(api.ListContainers({"barge.job=7"}, [&](Reply<std::vector<PsEntry>> r) {
      listed = r.ok() && r.value->empty();
      ++done;
    }));
    EXPECT_EQ(ping, "OK");
    EXPECT_EQ(code, 7);
    EXPECT_TRUE(stopped);
    EXPECT_TRUE(removed);
    EXPECT_EQ(image_id, "sha256:1");
    EXPECT_TRUE(listed);
  }
  EXPECT_EQ(lines, (std::vector<std::string>{
                       "GET /v1.41/_ping HTTP/1.1",
                       "POST /v1.41/containers/c/wait HTTP/1.1",
                       "POST /v1.41/containers/c/stop?t=10 HTTP/1.1",
                       "DELETE /v1.41/containers/c?force=1 HTTP/1.1",
                       "GET /v1.41/images/barge/test:local/json HTTP/1.1",
                       "GET /v1.41/containers/json?all=1&filters="
                       "%7B%22label%22%3A%5B%22barge.job%3D7%22%5D%7D HTTP/1.1",
                   }));
}

// What an attach gave: the pieces in arrival order ("o:" / "e:" per piece,
// merged while the stream does not change), whether on_attached ran before
// any of them, and the reply.
struct Attached {
  std::string out, err;
  std::vector<std::pair<char, std::string>> runs;  // stream runs, in order
  int attached_calls = 0;
  bool output_before_attached = false;
  std::optional<Reply<NoContent>> reply;
  std::string request;
};

Attached AttachTo(const std::string& response, size_t piece, bool tty) {
  ssh::EventLoop loop;
  ssh::LocalExecutor local(&loop);
  runner::EngineStreams streams(&local);
  Attached a;
  {
    CannedEngine engine([&](const std::string&) { return response; }, piece, 1);
    DockerApi api(&streams, engine.path());
    auto call = api.Attach(
        "barge-x", tty, [&] { ++a.attached_calls; },
        [&](LogStream s, std::string_view b) {
          if (a.attached_calls == 0) a.output_before_attached = true;
          const char c = s == LogStream::kStdout ? 'o' : 'e';
          (c == 'o' ? a.out : a.err).append(b);
          if (a.runs.empty() || a.runs.back().first != c) a.runs.emplace_back(c, "");
          a.runs.back().second.append(b);
        },
        [&](Reply<NoContent> r) { a.reply = std::move(r); });
    EXPECT_TRUE(call.ok()) << call.status().message();
    if (!call.ok()) return a;
    EXPECT_TRUE(ssh::testing::PollUntil(loop, [&] { return a.reply.has_value(); }));
    call->reset();
  }
  return a;
}

const char kUpgraded[] =
    "HTTP/1.1 101 UPGRADED\r\nContent-Type: application/vnd.docker.raw-stream\r\n"
    "Connection: Upgrade\r\nUpgrade: tcp\r\n\r\n";

TEST(DockerApi, AnAttachDeliversInterleavedStreamsInOrderAfterSayingItIsAttachedAtAnyPieceSize) {
  std::string body;
  std::vector<std::pair<char, std::string>> want_runs;
  std::string want_out, want_err;
  for (int i = 0; i < 40; ++i) {
    // Runs of one to three lines per stream; one payload with two lines.
    const char c = (i / 3 + i % 2) % 2 == 0 ? 'o' : 'e';
    const std::string line = std::string(c == 'o' ? "out " : "err ") + std::to_string(i) +
                             (i % 7 == 0 ? "\nmore\n" : "\n");
    body += Frame(c == 'o' ? 1 : 2, line);
    (c == 'o' ? want_out : want_err) += line;
    if (want_runs.empty() || want_runs.back().first != c) want_runs.emplace_back(c, "");
    want_runs.back().second += line;
  }
  const std::string response = kUpgraded + body;
  for (size_t piece : {size_t{1}, size_t{2}, size_t{3}, size_t{5}, size_t{8}, size_t{13},
                       size_t{89}, response.size()}) {
    Attached a = AttachTo(response, piece, /*tty=*/false);
    ASSERT_TRUE(a.reply.has_value()) << piece;
    EXPECT_TRUE(a.reply->ok()) << piece << ": " << a.reply->value.status().message();
    EXPECT_EQ(a.reply->http_status, 101) << piece;
    EXPECT_EQ(a.attached_calls, 1) << piece;
    EXPECT_FALSE(a.output_before_attached) << piece;
    EXPECT_EQ(a.out, want_out) << piece;
    EXPECT_EQ(a.err, want_err) << piece;
    EXPECT_EQ(a.runs, want_runs) << piece;
  }
}

TEST(DockerApi, AnAttachSendsTheUpgradeAndATtyContainersBytesAreStdoutAsTheyAre) {
  ssh::EventLoop loop;
  ssh::LocalExecutor local(&loop);
  runner::EngineStreams streams(&local);
  std::string request;
  const std::string response = std::string(kUpgraded) + "raw \x01\0\0 tty\r\nbytes";
  {
    CannedEngine engine([&](const std::string& r) { request = r; return response; }, 4, 1);
    DockerApi api(&streams, engine.path());
    std::string out;
    int attached = 0;
    std::optional<Reply<NoContent>> reply;
    auto call = api.Attach(
        "barge x", /*tty=*/true, [&] { ++attached; },
        [&](LogStream s, std::string_view b) {
          EXPECT_EQ(s, LogStream::kStdout);
          out.append(b);
        },
        [&](Reply<NoContent> r) { reply = std::move(r); });
    ASSERT_TRUE(call.ok());
    ASSERT_TRUE(ssh::testing::PollUntil(loop, [&] { return reply.has_value(); }));
    EXPECT_TRUE(reply->ok()) << reply->value.status().message();
    EXPECT_EQ(attached, 1);
    EXPECT_EQ(out, "raw \x01\0\0 tty\r\nbytes");
  }
  EXPECT_EQ(request.substr(0, request.find("\r\n\r\n") + 4),
            "POST /v1.41/containers/barge%20x/attach?stream=1&stdout=1&stderr=1 HTTP/1.1\r\n"
            "Host: docker\r\nUser-Agent: barge\r\nConnection: Upgrade\r\nUpgrade: tcp\r\n"
            "Content-Length: 0\r\n\r\n");
}

TEST(DockerApi, AnAttachRefusedOrCutInsideAFrameIsAnErrorAndNeverSaysAttached) {
  Attached missing = AttachTo(
      "HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\nContent-Length: 41\r\n\r\n"
      "{\"message\":\"No such container: barge-x\"}\n",
      7, false);
  ASSERT_TRUE(missing.reply.has_value());
  EXPECT_TRUE(missing.reply->not_found());
  EXPECT_EQ(missing.attached_calls, 0);
  EXPECT_EQ(missing.reply->value.status().message(),
            "local: POST /containers/barge-x/attach: No such container: barge-x (HTTP 404)");
  Attached cut = AttachTo(kUpgraded + Frame(1, "whole\n") + Frame(2, "cut short\n").substr(0, 12),
                          5, false);
  ASSERT_TRUE(cut.reply.has_value());
  EXPECT_FALSE(cut.reply->ok());
  EXPECT_EQ(cut.attached_calls, 1);
  EXPECT_EQ(cut.out, "whole\n");
  EXPECT_NE(cut.reply->value.status().message().find("ended inside a frame"), std::string::npos)
      << cut.reply->value.status().message();
}

TEST(DockerApi, StartIsSuccessWhenStartedOrAlreadyRunningAndAnErrorOtherwise) {
  ssh::EventLoop loop;
  ssh::LocalExecutor local(&loop);
  runner::EngineStreams streams(&local);
  std::vector<std::string> lines;
  const std::vector<std::string> answers = {
      "HTTP/1.1 204 No Content\r\n\r\n", "HTTP/1.1 304 Not Modified\r\n\r\n",
      "HTTP/1.1 500 Internal Server Error\r\nContent-Length: 30\r\n\r\n"
      "{\"message\":\"no such image x\"}\n"};
  std::vector<Reply<NoContent>> replies;
  {
    size_t next = 0;
    CannedEngine engine(
        [&](const std::string& request) {
          lines.push_back(request.substr(0, request.find("\r\n")));
          return answers[next++];
        },
        3, static_cast<int>(answers.size()));
    DockerApi api(&streams, engine.path());
    for (size_t i = 0; i < answers.size(); ++i) {
      std::optional<Reply<NoContent>> got;
      auto call = api.Start("c", [&](Reply<NoContent> r) { got = std::move(r); });
      ASSERT_TRUE(call.ok());
      ASSERT_TRUE(ssh::testing::PollUntil(loop, [&] { return got.has_value(); }));
      replies.push_back(std::move(*got));
    }
  }
  ASSERT_EQ(replies.size(), 3u);
  EXPECT_TRUE(replies[0].ok());
  EXPECT_EQ(replies[0].http_status, 204);
  EXPECT_TRUE(replies[1].ok());
  EXPECT_EQ(replies[1].http_status, 304);
  EXPECT_FALSE(replies[2].ok());
  EXPECT_EQ(replies[2].value.status().message(),
            "local: POST /containers/c/start: no such image x (HTTP 500)");
  EXPECT_EQ(lines, std::vector<std::string>(3, "POST /v1.41/containers/c/start HTTP/1.1"));
}

TEST(DockerApi, AnEngineThatIsNotThereIsAnErrorWithNoHttpStatus) {
  ssh::EventLoop loop;
  ssh::LocalExecutor local(&loop);
  runner::EngineStreams streams(&local);
  ssh::testing::TempDir dir;
  DockerApi api(&streams, dir.File("no.sock"));
  std::optional<Reply<std::string>> got;
  auto call = api.Ping([&](Reply<std::string> r) { got = std::move(r); });
  ASSERT_TRUE(call.ok());
  ASSERT_TRUE(ssh::testing::PollUntil(loop, [&] { return got.has_value(); }));
  EXPECT_FALSE(got->ok());
  EXPECT_EQ(got->http_status, 0);
  EXPECT_FALSE(got->not_found());
  EXPECT_EQ(got->value.status().message(),
            "local: GET /_ping: unix socket " + dir.File("no.sock") +
                ": cannot connect: No such file or directory");
}

TEST(DockerApi, ACallDestroyedFromItsOwnOutputCallbackCallsNothingMore) {
  ssh::EventLoop loop;
  ssh::LocalExecutor local(&loop);
  runner::EngineStreams streams(&local);
  std::string body;
  for (int i = 0; i < 20; ++i) body += Frame(1, "line\n");
  const std::string response =
      "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
  CannedEngine engine([&](const std::string&) { return response; }, response.size(), 1);
  DockerApi api(&streams, engine.path());
  int outputs = 0, dones = 0;
  std::unique_ptr<DockerApi::Call> call;
  auto started = api.Logs(
      "c", {},
      [&](LogStream, std::string_view) {
        ++outputs;
        call.reset();
      },
      [&](Reply<NoContent>) { ++dones; });
  ASSERT_TRUE(started.ok());
  call = std::move(started).value();
  ASSERT_TRUE(ssh::testing::PollUntil(loop, [&] { return call == nullptr; }));
  for (int i = 0; i < 3; ++i) loop.Poll(std::chrono::milliseconds(10));
  EXPECT_EQ(outputs, 1);
  EXPECT_EQ(dones, 0);
}


// --- The buffered body's cap, over a fake stream (no socket: 64 MiB
// through a real one would cost seconds).

// Hands the test the callbacks of the one stream a call opens; says when
// the call closed it.
class FakeStreams : public StreamOpener {
 public:
  class Stream : public ByteStream {
   public:
    explicit Stream(bool* closed) : closed_(closed) {}
    ~Stream() override { *closed_ = true; }
    void Write(std::string_view) override {}

   private:
    bool* closed_;
  };
  Result<std::unique_ptr<ByteStream>> OpenStream(const std::string&,
                                                 ByteStreamCallbacks callbacks) override {
    callbacks_ = std::move(callbacks);
    return std::unique_ptr<ByteStream>(std::make_unique<Stream>(&closed_));
  }
  std::string label() const override { return "root@10.77.0.9:22"; }

  // Feeds `bytes` in pieces of 1 MiB until the call closed the stream;
  // returns how many bytes were fed.
  size_t Feed(const std::string& bytes) {
    size_t off = 0;
    while (off < bytes.size() && !closed_) {
      const size_t n = std::min<size_t>(size_t{1} << 20, bytes.size() - off);
      callbacks_.on_bytes(std::string_view(bytes).substr(off, n));
      off += n;
    }
    return off;
  }
  void Close() {
    if (!closed_) callbacks_.on_closed("");
  }
  bool closed() const { return closed_; }

 private:
  ByteStreamCallbacks callbacks_;
  bool closed_ = false;
};

std::string ResponseWithBody(int status, size_t body_bytes) {
  return "HTTP/1.1 " + std::to_string(status) + " X\r\nContent-Length: " +
         std::to_string(body_bytes) + "\r\n\r\n" + std::string(body_bytes, 'x');
}

TEST(DockerApi, ABufferedBodyOfTheCapIsReadWholeAndOneByteMoreFailsTheCallNamingTheHost) {
  constexpr size_t kCap = DockerApi::kMaxBufferedBody;
  ASSERT_EQ(kCap, size_t{64} << 20);
  {
    FakeStreams streams;
    DockerApi api(&streams, "/var/run/docker.sock");
    std::optional<Reply<std::string>> got;
    auto call = api.Ping([&](Reply<std::string> r) { got = std::move(r); });
    ASSERT_TRUE(call.ok());
    const std::string response = ResponseWithBody(200, kCap);
    EXPECT_EQ(streams.Feed(response), response.size());
    streams.Close();
    ASSERT_TRUE(got.has_value());
    ASSERT_TRUE(got->ok()) << got->value.status().message();
    EXPECT_EQ(got->value->size(), kCap);
  }
  for (int status : {200, 500}) {  // an answer read whole, and an error's body
    SCOPED_TRACE(status);
    FakeStreams streams;
    DockerApi api(&streams, "/var/run/docker.sock");
    std::optional<Reply<std::string>> got;
    auto call = api.Ping([&](Reply<std::string> r) { got = std::move(r); });
    ASSERT_TRUE(call.ok());
    const std::string response = ResponseWithBody(status, kCap + 1);
    EXPECT_EQ(streams.Feed(response), response.size());  // the last byte is the one too many
    ASSERT_TRUE(got.has_value());
    EXPECT_TRUE(streams.closed());
    EXPECT_FALSE(got->ok());
    EXPECT_EQ(got->http_status, status);
    EXPECT_EQ(got->value.status().message(),
              "root@10.77.0.9:22: GET /_ping: a response body over 64 MiB (the engine's answers "
              "barge reads are far smaller)");
  }
}

// Issue #40 (item 7): an answer that nests deeper than kMaxJsonNesting is
// refused before it is parsed, whatever its size; one at the bound is read.
TEST(DockerApi, AnAnswerNestingDeeperThanTheBoundIsRefusedBeforeItIsParsed) {
  const std::string deep = "[" + std::string(kMaxJsonNesting, '[') + std::string(kMaxJsonNesting + 1, ']');
  for (auto parse : {+[](std::string_view t) { return ParseContainerList(t).status(); },
                     +[](std::string_view t) { return ParseImageObject(t).status(); },
                     +[](std::string_view t) { return ParseWaitResponse(t).status(); }}) {
    Status s = parse(deep);
    EXPECT_FALSE(s.ok());
    EXPECT_NE(s.message().find("nests deeper than 128 levels"), std::string::npos) << s.message();
  }
  // At the bound: parsed (and refused for its shape only).
  const std::string at_bound = std::string(kMaxJsonNesting, '[') + std::string(kMaxJsonNesting, ']');
  Status s = ParseContainerList(at_bound).status();
  EXPECT_EQ(s.message().find("nests deeper"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace barge::container
