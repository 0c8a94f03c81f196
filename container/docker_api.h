// A minimal Docker Engine API client spoken over a byte stream to the
// engine's unix socket (byte_stream.h: an SSH channel or a local socket), so that a call runs
// no process on the host: no docker CLI, no shell.
//
// Pure parts, each testable on canned bytes: BuildRequest (HTTP/1.1),
// HttpResponseParser (incremental: status line, headers, a body by
// Content-Length, chunked, or until close), LogDemuxer (the 8-byte frame
// headers of a non-TTY container's log stream) and the JSON readers. One
// thin adapter, DockerApi, opens one stream per call through the
// StreamOpener seam (byte_stream.h) and feeds them.
//
// One request per stream: every request says "Connection: close" and a
// call is over when its response is complete or the engine closes the
// stream. That is the simplest HTTP there is, and it matches the transport:
// over SSH a stream is one direct-streamlocal channel (one round trip to
// open, no process on the host), cheaper than keeping a connection's
// request/response pairing straight.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "container/inspect.h"
#include "container/byte_stream.h"

namespace barge::container {

// The API version of Docker 20.10's engine; every path is prefixed with it.
inline constexpr std::string_view kDefaultApiVersion = "1.41";

struct HttpRequest {
  std::string method = "GET";
  // Path and query, without the version prefix: "/containers/x/json?all=1".
  // Callers encode what they put in it (UrlEncode).
  std::string target;
  std::string body;          // sent with Content-Length (POST gets one even when empty)
  std::string content_type;  // of the body, e.g. "application/json"
  // Asks to take the connection over ("Connection: Upgrade", "Upgrade:
  // tcp" instead of "Connection: close"), as the engine's attach wants in
  // order to answer 101 and then stream raw bytes.
  bool upgrade = false;
};

// The bytes of `request` to API version `api_version` ("1.41"):
// "METHOD /v1.41TARGET HTTP/1.1", then Host, Connection: close (or the
// upgrade's two headers), and Content-Type/Content-Length when there is a
// body or the method is POST.
std::string BuildRequest(const HttpRequest& request, std::string_view api_version);

// Percent-encodes every byte but the unreserved ones (A-Z a-z 0-9 - . _ ~)
// and those in `keep` (e.g. "/:@" for an image reference in a path).
std::string UrlEncode(std::string_view text, std::string_view keep = "");

// An incremental HTTP/1.1 response parser. Feed it bytes as they arrive, in
// any chunking; body bytes (de-chunked) go to `on_body` as they arrive.
// Interim 1xx responses are skipped, except 101 (Switching Protocols, the
// engine's "UPGRADED" answer to an attach): after its headers every byte
// is the taken-over stream's, delivered as a body until close, whatever
// the headers say. 204, 304 and HEAD-less empty bodies are handled. A malformed response is an error that stays (later Feeds return
// it). Bytes after a complete response are ignored.
class HttpResponseParser {
 public:
  explicit HttpResponseParser(std::function<void(std::string_view)> on_body);

  [[nodiscard]] Status Feed(std::string_view bytes);
  // The stream ended: completes a body that runs until close; an error if
  // the response is incomplete.
  [[nodiscard]] Status Finish();

  bool headers_done() const { return state_ > State::kHeaders; }
  bool complete() const { return state_ == State::kDone; }
  int status_code() const { return status_code_; }
  const std::string& reason() const { return reason_; }
  // By lower-cased name; the last one wins when a name repeats.
  const std::map<std::string, std::string>& headers() const { return headers_; }
  std::optional<std::string> Header(const std::string& lower_name) const;

  // Longer status or header lines (or chunk-size lines) are an error, as
  // are more header lines than kMaxHeaders or more header bytes than
  // kMaxHeaderBytes in one response: a broken engine or proxy cannot make
  // the controller buffer without a limit.
  static constexpr size_t kMaxLine = 64 * 1024;
  static constexpr size_t kMaxHeaders = 256;
  static constexpr size_t kMaxHeaderBytes = 256 * 1024;

 private:
  enum class State {
    kStatusLine,
    kHeaders,
    kBodyLength,
    kChunkSize,
    kChunkData,
    kChunkDataEnd,
    kTrailers,
    kBodyUntilClose,
    kDone,
    kFailed,
  };
  Status Fail(std::string why);
  // Takes one CRLF- (or LF-) terminated line out of the input; false when
  // the line is not complete yet.
  bool TakeLine(std::string_view* input, std::string* line, Status* error);
  Status OnStatusLine(const std::string& line);
  Status OnHeaderLine(const std::string& line);
  Status StartBody();
  void Body(std::string_view bytes);

  std::function<void(std::string_view)> on_body_;
  State state_ = State::kStatusLine;
  std::string partial_;  // an incomplete line
  int status_code_ = 0;
  std::string reason_;
  std::map<std::string, std::string> headers_;
  size_t header_lines_ = 0;  // of the current response
  size_t header_bytes_ = 0;
  uint64_t remaining_ = 0;  // of a Content-Length body or a chunk
  Status error_;
};

// Which stream a log frame belongs to (Docker's stdcopy numbering).
enum class LogStream { kStdout = 1, kStderr = 2 };

// Splits a non-TTY container's multiplexed log (or attach) stream: frames
// of an 8-byte header [stream, 0, 0, 0, size as 4 bytes big-endian] and
// `size` bytes of payload. Headers and payloads may be split anywhere
// across Feed calls (with follow=1 they are split across chunks and reads).
// `sink` gets each frame's payload in order, possibly in several pieces (a
// piece never spans two frames); stream 0 (stdin) is delivered as stdout,
// as Docker's own client does. Stream 3 (the engine's own error, API 1.42+)
// becomes Feed's error with its text (at most kMaxErrorFrame bytes of it
// are kept: a longer one is an error as soon as its header says so); any
// other stream byte is an error.
class LogDemuxer {
 public:
  static constexpr uint32_t kMaxErrorFrame = 64 * 1024;
  using Sink = std::function<void(LogStream, std::string_view)>;
  explicit LogDemuxer(Sink sink);
  [[nodiscard]] Status Feed(std::string_view bytes);
  // True between frames: no header or payload is partly read.
  bool at_frame_boundary() const { return header_size_ == 0 && remaining_ == 0; }

 private:
  Sink sink_;
  unsigned char header_[8] = {};
  size_t header_size_ = 0;  // bytes of header_ filled
  uint32_t remaining_ = 0;  // payload bytes of the current frame still due
  int stream_ = 0;
  std::string system_error_;  // payload of a stream-3 frame
  Status error_;
};

// The engine's error text from an error response's body ({"message": ...});
// the body itself (trimmed) when it is not such JSON.
std::string ApiErrorMessage(std::string_view body);

// GET /images/{name}/json, the parts barge uses.
struct ImageInfo {
  std::string id;         // "sha256:..."
  std::string upper_dir;  // GraphDriver.Data.UpperDir ("" for drivers without one)
};
[[nodiscard]] Result<ImageInfo> ParseImageObject(std::string_view json);

// GET /containers/json: one PsEntry per container, with the full ID, the
// names without Docker's leading "/" (comma-joined, as `docker ps` prints
// them) and the labels exactly (no comma ambiguity here).
[[nodiscard]] Result<std::vector<PsEntry>> ParseContainerList(std::string_view json);

// POST /containers/{name}/wait: StatusCode; an error when the engine says
// it could not wait (Error.Message).
[[nodiscard]] Result<int> ParseWaitResponse(std::string_view json);

// The outcome of one call: a value or why not, and the HTTP status when the
// engine answered (0 when it did not: the stream could not be opened, was
// lost, or the response was malformed). A missing container or image is
// `not_found()` (404); its message carries the engine's text ("No such
// container: x").
template <typename T>
struct Reply {
  Result<T> value;
  int http_status = 0;
  bool ok() const { return value.ok(); }
  bool not_found() const { return http_status == 404; }
};
struct NoContent {};

// GET /containers/{name}/logs options.
struct LogOptions {
  bool follow = false;
  // Only lines stamped after this (ns since the epoch), as since=SECONDS.NANOS.
  std::optional<int64_t> since_ns;
  bool timestamps = true;
  // A TTY container's log is not multiplexed: everything is stdout.
  bool tty = false;
};

// Calls on one engine through streams from `streams` to `socket_path` (the
// path of DOCKER_HOST's unix:// URL on that host, e.g. /var/run/docker.sock).
// Each call opens its own stream and returns at once; its `done` callback
// runs exactly once, from the loop's Poll (never from inside the call that
// started it), unless the returned Call was destroyed first: destroying it
// abandons the call (no callback after that) and closes its stream. `done`
// may destroy the Call. No call has a time limit of its own: the caller
// bounds it with a timer of its loop and destroys the Call.
//
// Errors name the host (the opener's label), the request and the engine's text:
// "root@10.77.0.1:22: GET /containers/x/json: No such container: x (HTTP 404)".
//
// Threading: the loop's thread only. `streams` must outlive every Call.
class DockerApi {
 public:
  DockerApi(StreamOpener* streams, std::string socket_path,
            std::string api_version = std::string(kDefaultApiVersion));
  DockerApi(const DockerApi&) = delete;
  DockerApi& operator=(const DockerApi&) = delete;

  class Call {
   public:
    virtual ~Call() = default;
  };
  using CallPtr = std::unique_ptr<Call>;
  template <typename T>
  using Done = std::function<void(Reply<T>)>;

  // Any request: the response's status, headers and whole body. An HTTP
  // error status is not an error here (value holds the response). With
  // `on_body`, body bytes go there as they arrive and `body` stays empty.
  struct Response {
    int status = 0;
    std::map<std::string, std::string> headers;
    std::string body;
  };
  [[nodiscard]] Result<CallPtr> Request(HttpRequest request,
                                        std::function<void(std::string_view)> on_body,
                                        Done<Response> done);

  // GET /_ping: "OK".
  [[nodiscard]] Result<CallPtr> Ping(Done<std::string> done);
  // GET /containers/{name}/json.
  [[nodiscard]] Result<CallPtr> InspectContainer(const std::string& name,
                                                 Done<ContainerState> done);
  // GET /containers/{name}/logs?stdout=1&stderr=1[&timestamps=1][&follow=1][&since=S.N]:
  // `on_output` gets each stream's bytes as they arrive (pieces of frames,
  // in order; with timestamps each line starts with its RFC 3339 stamp and
  // a space); `done` when the log ended (follow: the container stopped).
  [[nodiscard]] Result<CallPtr> Logs(const std::string& name, const LogOptions& options,
                                     LogDemuxer::Sink on_output, Done<NoContent> done);
  // POST /containers/{name}/attach?stream=1&stdout=1&stderr=1, asking for
  // the upgrade: the engine answers 101 UPGRADED (200 from one that ignores
  // the upgrade) and then streams what the container writes, live, as it
  // writes it (multiplexed frames; raw bytes, all stdout, for a TTY
  // container: `tty`), until the container's stdio closes (it stopped).
  // Nothing goes through the log driver: a driver that rotates or drops
  // lines does not lose them here, and nothing is replayed (what was
  // written before the attach is not sent).
  // `on_attached` runs once, when the answer's headers arrived, before any
  // output: from then on the container's output reaches this call, so a
  // created container may be started (the engine connects the stream to
  // the container right after writing its answer, as for `docker start
  // -a`, which starts at the same moment). `on_output` as Logs'. `done`
  // when the stream ended: success when the engine closed it at a frame
  // boundary after a 101/2xx answer.
  [[nodiscard]] Result<CallPtr> Attach(const std::string& name, bool tty,
                                       std::function<void()> on_attached,
                                       LogDemuxer::Sink on_output, Done<NoContent> done);
  // POST /containers/create?name={name} with `body` (create_body.h): the new
  // container's ID. A name in use is HTTP 409, a missing image 404.
  [[nodiscard]] Result<CallPtr> Create(const std::string& name, std::string body, Done<std::string> done);
  // POST /containers/{name}/start; one already running (304) is success.
  [[nodiscard]] Result<CallPtr> Start(const std::string& name, Done<NoContent> done);
  // POST /containers/{name}/wait: the exit code once the container stopped.
  [[nodiscard]] Result<CallPtr> Wait(const std::string& name, Done<int> done);
  // POST /containers/{name}/stop?t=N; an already stopped container (304) is
  // success.
  [[nodiscard]] Result<CallPtr> Stop(const std::string& name, int timeout_s, Done<NoContent> done);
  // DELETE /containers/{name}[?force=1].
  [[nodiscard]] Result<CallPtr> Remove(const std::string& name, bool force, Done<NoContent> done);
  // GET /images/{name}/json.
  [[nodiscard]] Result<CallPtr> InspectImage(const std::string& name, Done<ImageInfo> done);
  // GET /containers/json?all=1&filters={"label":[...]}: containers carrying
  // every label filter ("key" or "key=value"); all of them when empty.
  [[nodiscard]] Result<CallPtr> ListContainers(const std::vector<std::string>& label_filters,
                                               Done<std::vector<PsEntry>> done);

  const std::string& socket_path() const { return socket_path_; }

  // A response body barge reads whole (inspect, lists, errors) may be at
  // most this big; a larger one fails the call, naming the host.
  static constexpr size_t kMaxBufferedBody = size_t{64} << 20;

 private:
  class HttpCall;
  // Runs `request`; `finish` turns a complete 2xx/3xx response's body into
  // the reply's value.
  // A call whose 101/2xx body is a container's output (Logs, Attach).
  Result<CallPtr> Streamed(HttpRequest request, bool tty, std::function<void()> on_attached,
                           LogDemuxer::Sink on_output, Done<NoContent> done);
  template <typename T>
  Result<CallPtr> Typed(HttpRequest request, std::function<Result<T>(const Response&)> finish,
                        Done<T> done);

  StreamOpener* streams_;
  std::string socket_path_;
  std::string api_version_;
};

}  // namespace barge::container
