// The Docker Engine API client: HTTP/1.1 request bytes, the incremental
// response parser, the log demuxer, JSON readers, and DockerApi's calls over
// one byte stream each (byte_stream.h).
#include "container/docker_api.h"

#include <algorithm>
#include <cctype>
#include <cinttypes>
#include <cstdio>
#include <exception>
#include <utility>

#include <nlohmann/json.hpp>

#include "base/json_depth.h"

namespace barge::container {
namespace {

using nlohmann::json;

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r' ||
                        s.back() == '\n')) {
    s.remove_suffix(1);
  }
  return s;
}

// Decimal digits only, no overflow.
std::optional<uint64_t> ParseDecimal(std::string_view s) {
  if (s.empty() || s.size() > 19) return std::nullopt;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  return v;
}

std::optional<uint64_t> ParseHex(std::string_view s) {
  if (s.empty() || s.size() > 15) return std::nullopt;
  uint64_t v = 0;
  for (char c : s) {
    int d;
    if (c >= '0' && c <= '9') {
      d = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      d = c - 'a' + 10;
    } else if (c >= 'A' && c <= 'F') {
      d = c - 'A' + 10;
    } else {
      return std::nullopt;
    }
    v = v * 16 + static_cast<uint64_t>(d);
  }
  return v;
}

Result<json> ParseJsonBody(std::string_view text, const char* what) {
  if (!JsonNestingWithin(text)) {
    return Status::Error(std::string(what) + ": the response nests deeper than " +
                         std::to_string(kMaxJsonNesting) + " levels");
  }
  try {
    return json::parse(text.begin(), text.end());
  } catch (const json::exception& e) {
    return Status::Error(std::string(what) + ": the response is not valid JSON (" + e.what() + ")");
  }
}

// A string field: "" when absent or null; false when present with another type.
bool OptionalString(const json& object, const char* key, std::string* out) {
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return true;
  if (!it->is_string()) return false;
  *out = it->get<std::string>();
  return true;
}

}  // namespace

// --- Requests.

std::string UrlEncode(std::string_view text, std::string_view keep) {
  static const char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(text.size());
  for (char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~' ||
        keep.find(ch) != std::string_view::npos) {
      out += ch;
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

std::string BuildRequest(const HttpRequest& request, std::string_view api_version) {
  std::string out;
  out.reserve(128 + request.target.size() + request.body.size());
  out += request.method;
  out += " /v";
  out += api_version;
  out += request.target;
  out += " HTTP/1.1\r\nHost: docker\r\nUser-Agent: barge\r\n";
  out += request.upgrade ? "Connection: Upgrade\r\nUpgrade: tcp\r\n" : "Connection: close\r\n";
  if (!request.body.empty() || request.method == "POST" || request.method == "PUT") {
    if (!request.content_type.empty()) out += "Content-Type: " + request.content_type + "\r\n";
    out += "Content-Length: " + std::to_string(request.body.size()) + "\r\n";
  }
  out += "\r\n";
  out += request.body;
  return out;
}

// --- HttpResponseParser.

HttpResponseParser::HttpResponseParser(std::function<void(std::string_view)> on_body)
    : on_body_(std::move(on_body)) {}

std::optional<std::string> HttpResponseParser::Header(const std::string& lower_name) const {
  auto it = headers_.find(lower_name);
  if (it == headers_.end()) return std::nullopt;
  return it->second;
}

Status HttpResponseParser::Fail(std::string why) {
  state_ = State::kFailed;
  error_ = Status::Error("malformed HTTP response from the engine: " + why);
  return error_;
}

bool HttpResponseParser::TakeLine(std::string_view* input, std::string* line, Status* error) {
  const size_t nl = input->find('\n');
  if (nl == std::string_view::npos) {
    partial_.append(*input);
    input->remove_prefix(input->size());
    if (partial_.size() > kMaxLine) *error = Fail("a line longer than 64 KiB");
    return false;
  }
  *line = std::move(partial_);
  partial_.clear();
  line->append(input->substr(0, nl));
  input->remove_prefix(nl + 1);
  if (!line->empty() && line->back() == '\r') line->pop_back();
  if (line->size() > kMaxLine) {
    *error = Fail("a line longer than 64 KiB");
    return false;
  }
  return true;
}

Status HttpResponseParser::OnStatusLine(const std::string& line) {
  // "HTTP/1.1 200 OK"
  if (line.rfind("HTTP/1.", 0) != 0 || line.size() < 12 || line[8] != ' ') {
    return Fail("bad status line \"" + line.substr(0, 80) + "\"");
  }
  std::optional<uint64_t> code = ParseDecimal(std::string_view(line).substr(9, 3));
  if (!code || *code < 100 || *code > 999 || (line.size() > 12 && line[12] != ' ')) {
    return Fail("bad status line \"" + line.substr(0, 80) + "\"");
  }
  status_code_ = static_cast<int>(*code);
  reason_ = line.size() > 13 ? line.substr(13) : "";
  headers_.clear();
  header_lines_ = 0;
  header_bytes_ = 0;
  return Status::Ok();
}

Status HttpResponseParser::OnHeaderLine(const std::string& line) {
  const size_t colon = line.find(':');
  if (colon == std::string::npos || colon == 0) {
    return Fail("bad header line \"" + line.substr(0, 80) + "\"");
  }
  headers_[Lower(Trim(std::string_view(line).substr(0, colon)))] =
      std::string(Trim(std::string_view(line).substr(colon + 1)));
  return Status::Ok();
}

Status HttpResponseParser::StartBody() {
  if (status_code_ >= 100 && status_code_ < 200 && status_code_ != 101) {
    state_ = State::kStatusLine;  // an interim response: the real one follows
    return Status::Ok();
  }
  if (status_code_ == 101) {
    // The connection was taken over: the rest is the upgraded stream's.
    state_ = State::kBodyUntilClose;
    return Status::Ok();
  }
  if (status_code_ == 204 || status_code_ == 304) {
    state_ = State::kDone;
    return Status::Ok();
  }
  if (auto te = Header("transfer-encoding"); te && Lower(*te).find("chunked") != std::string::npos) {
    state_ = State::kChunkSize;
    return Status::Ok();
  }
  if (auto cl = Header("content-length")) {
    std::optional<uint64_t> n = ParseDecimal(*cl);
    if (!n) return Fail("bad Content-Length \"" + cl->substr(0, 40) + "\"");
    remaining_ = *n;
    state_ = remaining_ == 0 ? State::kDone : State::kBodyLength;
    return Status::Ok();
  }
  state_ = State::kBodyUntilClose;
  return Status::Ok();
}

void HttpResponseParser::Body(std::string_view bytes) {
  if (!bytes.empty() && on_body_) on_body_(bytes);
}

Status HttpResponseParser::Feed(std::string_view in) {
  if (state_ == State::kFailed) return error_;
  Status error;
  std::string line;
  while (!in.empty()) {
    switch (state_) {
      case State::kStatusLine:
        if (!TakeLine(&in, &line, &error)) return error;
        if (Status s = OnStatusLine(line); !s.ok()) return s;
        state_ = State::kHeaders;
        break;
      case State::kHeaders:
        if (!TakeLine(&in, &line, &error)) return error;
        header_bytes_ += line.size();
        if (++header_lines_ > kMaxHeaders) {
          return Fail("more than " + std::to_string(kMaxHeaders) + " header lines");
        }
        if (header_bytes_ > kMaxHeaderBytes) {
          return Fail("more than " + std::to_string(kMaxHeaderBytes / 1024) + " KiB of headers");
        }
        if (line.empty()) {
          if (Status s = StartBody(); !s.ok()) return s;
        } else if (line.front() == ' ' || line.front() == '\t') {
          // An obsolete folded continuation: ignored.
        } else if (Status s = OnHeaderLine(line); !s.ok()) {
          return s;
        }
        break;
      case State::kBodyLength:
      case State::kChunkData: {
        const size_t n = static_cast<size_t>(std::min<uint64_t>(remaining_, in.size()));
        Body(in.substr(0, n));
        in.remove_prefix(n);
        remaining_ -= n;
        if (remaining_ == 0) {
          state_ = state_ == State::kBodyLength ? State::kDone : State::kChunkDataEnd;
        }
        break;
      }
      case State::kChunkSize: {
        if (!TakeLine(&in, &line, &error)) return error;
        std::string_view size = Trim(std::string_view(line).substr(0, line.find(';')));
        std::optional<uint64_t> n = ParseHex(size);
        if (!n) return Fail("bad chunk size \"" + line.substr(0, 40) + "\"");
        remaining_ = *n;
        state_ = remaining_ == 0 ? State::kTrailers : State::kChunkData;
        break;
      }
      case State::kChunkDataEnd:
        if (!TakeLine(&in, &line, &error)) return error;
        if (!line.empty()) return Fail("a chunk is longer than its size says");
        state_ = State::kChunkSize;
        break;
      case State::kTrailers:
        if (!TakeLine(&in, &line, &error)) return error;
        if (line.empty()) state_ = State::kDone;
        break;
      case State::kBodyUntilClose:
        Body(in);
        in.remove_prefix(in.size());
        break;
      case State::kDone:
        return Status::Ok();  // anything after the response is ignored
      case State::kFailed:
        return error_;
    }
  }
  return Status::Ok();
}

Status HttpResponseParser::Finish() {
  switch (state_) {
    case State::kDone:
      return Status::Ok();
    case State::kBodyUntilClose:
      state_ = State::kDone;
      return Status::Ok();
    case State::kFailed:
      return error_;
    case State::kStatusLine:
      if (status_code_ == 0 && partial_.empty()) {
        return Fail("the engine closed the stream without answering");
      }
      [[fallthrough]];
    default:
      return Fail("the engine closed the stream before the response was complete");
  }
}

// --- LogDemuxer.

LogDemuxer::LogDemuxer(Sink sink) : sink_(std::move(sink)) {}

Status LogDemuxer::Feed(std::string_view in) {
  if (!error_.ok()) return error_;
  while (!in.empty()) {
    if (remaining_ == 0) {
      const size_t n = std::min(sizeof header_ - header_size_, in.size());
      std::copy_n(in.data(), n, header_ + header_size_);
      header_size_ += n;
      in.remove_prefix(n);
      if (header_size_ < sizeof header_) return Status::Ok();
      header_size_ = 0;
      stream_ = header_[0];
      remaining_ = (uint32_t{header_[4]} << 24) | (uint32_t{header_[5]} << 16) |
                   (uint32_t{header_[6]} << 8) | uint32_t{header_[7]};
      if (stream_ > 3 || header_[1] != 0 || header_[2] != 0 || header_[3] != 0) {
        error_ = Status::Error("malformed log stream from the engine: a frame header starts with "
                               "bytes " + std::to_string(header_[0]) + " " +
                               std::to_string(header_[1]) + " " + std::to_string(header_[2]) +
                               " " + std::to_string(header_[3]) +
                               " (is the container's log a TTY's?)");
        return error_;
      }
      system_error_.clear();
      if (stream_ == 3 && remaining_ > kMaxErrorFrame) {
        error_ = Status::Error("malformed log stream from the engine: an error frame of " +
                               std::to_string(remaining_) + " bytes (at most " +
                               std::to_string(kMaxErrorFrame) + ")");
        return error_;
      }
      continue;
    }
    const size_t n = std::min<size_t>(remaining_, in.size());
    std::string_view piece = in.substr(0, n);
    in.remove_prefix(n);
    remaining_ -= static_cast<uint32_t>(n);
    if (stream_ == 3) {
      system_error_.append(piece);
      if (remaining_ == 0) {
        error_ = Status::Error("the engine reported an error in the log stream: " +
                               std::string(Trim(system_error_)));
        return error_;
      }
      continue;
    }
    sink_(stream_ == 2 ? LogStream::kStderr : LogStream::kStdout, piece);
  }
  return Status::Ok();
}

// --- JSON readers.

std::string ApiErrorMessage(std::string_view body) {
  if (!JsonNestingWithin(body)) return "";
  try {
    json doc = json::parse(body.begin(), body.end());
    if (doc.is_object()) {
      auto it = doc.find("message");
      if (it != doc.end() && it->is_string()) return it->get<std::string>();
    }
  } catch (const json::exception&) {
  }
  std::string text(Trim(body));
  if (text.size() > 400) text = text.substr(0, 400) + "...";
  return text.empty() ? "no message" : text;
}

Result<ImageInfo> ParseImageObject(std::string_view text) {
  constexpr const char* kWhat = "engine API: image";
  Result<json> doc = ParseJsonBody(text, kWhat);
  if (!doc.ok()) return doc.status();
  if (!doc->is_object()) return Status::Error(std::string(kWhat) + ": not a JSON object");
  ImageInfo info;
  if (!OptionalString(*doc, "Id", &info.id) || info.id.empty()) {
    return Status::Error(std::string(kWhat) + ": field Id is missing or not a string");
  }
  auto gd = doc->find("GraphDriver");
  if (gd != doc->end() && gd->is_object()) {
    auto data = gd->find("Data");
    if (data != gd->end() && data->is_object() && !OptionalString(*data, "UpperDir", &info.upper_dir)) {
      return Status::Error(std::string(kWhat) + ": field GraphDriver.Data.UpperDir is not a string");
    }
  }
  return info;
}

Result<std::vector<PsEntry>> ParseContainerList(std::string_view text) {
  constexpr const char* kWhat = "engine API: container list";
  Result<json> doc = ParseJsonBody(text, kWhat);
  if (!doc.ok()) return doc.status();
  if (!doc->is_array()) return Status::Error(std::string(kWhat) + ": not a JSON array");
  std::vector<PsEntry> out;
  for (size_t i = 0; i < doc->size(); ++i) {
    const json& o = (*doc)[i];
    const std::string where = std::string(kWhat) + ": entry " + std::to_string(i);
    if (!o.is_object()) return Status::Error(where + " is not a JSON object");
    PsEntry e;
    if (!OptionalString(o, "Id", &e.id) || e.id.empty()) {
      return Status::Error(where + ": field Id is missing or not a string");
    }
    if (!OptionalString(o, "Image", &e.image) || !OptionalString(o, "State", &e.state) ||
        !OptionalString(o, "Status", &e.status)) {
      return Status::Error(where + ": field Image, State or Status is not a string");
    }
    if (auto names = o.find("Names"); names != o.end() && !names->is_null()) {
      if (!names->is_array()) return Status::Error(where + ": field Names is not an array");
      for (const json& n : *names) {
        if (!n.is_string()) return Status::Error(where + ": field Names holds a non-string");
        std::string name = n.get<std::string>();
        if (!name.empty() && name.front() == '/') name.erase(0, 1);
        if (!e.names.empty()) e.names += ",";
        e.names += name;
      }
    }
    if (auto labels = o.find("Labels"); labels != o.end() && !labels->is_null()) {
      if (!labels->is_object()) return Status::Error(where + ": field Labels is not an object");
      for (const auto& [k, v] : labels->items()) {
        if (!v.is_string()) return Status::Error(where + ": label " + k + " is not a string");
        e.labels[k] = v.get<std::string>();
      }
    }
    out.push_back(std::move(e));
  }
  return out;
}

Result<int> ParseWaitResponse(std::string_view text) {
  constexpr const char* kWhat = "engine API: wait";
  Result<json> doc = ParseJsonBody(text, kWhat);
  if (!doc.ok()) return doc.status();
  if (!doc->is_object()) return Status::Error(std::string(kWhat) + ": not a JSON object");
  if (auto err = doc->find("Error"); err != doc->end() && err->is_object()) {
    std::string message;
    if (OptionalString(*err, "Message", &message) && !message.empty()) {
      return Status::Error(std::string(kWhat) + ": " + message);
    }
  }
  auto code = doc->find("StatusCode");
  if (code == doc->end() || !code->is_number_integer()) {
    return Status::Error(std::string(kWhat) + ": field StatusCode is missing or not an integer");
  }
  const int64_t v = code->get<int64_t>();
  if (v < INT32_MIN || v > INT32_MAX) {
    return Status::Error(std::string(kWhat) + ": field StatusCode is out of range");
  }
  return static_cast<int>(v);
}

// --- DockerApi.

// One request on one stream. Owns the stream (destroying the call closes
// it), the parser and, for logs, the demuxer. Every user callback may
// destroy the call: `alive_` is checked after each, and callbacks are
// copied to locals before they run.
class DockerApi::HttpCall : public DockerApi::Call {
 public:
  HttpCall(std::string label, std::string what, Done<Response> done)
      : label_(std::move(label)),
        what_(std::move(what)),
        done_(std::move(done)),
        parser_([this](std::string_view b) { piece_.append(b); }) {}
  ~HttpCall() override { *alive_ = false; }
  HttpCall(const HttpCall&) = delete;
  HttpCall& operator=(const HttpCall&) = delete;

  // Body bytes of a 2xx response go to `on_body` instead of Response::body.
  void StreamBody(std::function<void(std::string_view)> on_body) { on_body_ = std::move(on_body); }
  // Body bytes of a 2xx response are demultiplexed into `sink` (tty: all
  // to stdout as they are).
  void DemuxBody(LogDemuxer::Sink sink, bool tty) {
    log_sink_ = std::move(sink);
    tty_ = tty;
    demuxer_ = std::make_unique<LogDemuxer>(
        [this](LogStream s, std::string_view b) { frames_.emplace_back(s, std::string(b)); });
  }

  // `on_headers` runs once, when a 101/2xx answer's headers are in, before
  // any of its body is delivered.
  void OnHeaders(std::function<void()> on_headers) { on_headers_ = std::move(on_headers); }

  Status Open(StreamOpener* streams, const std::string& socket_path, std::string bytes) {
    ByteStreamCallbacks cb;
    cb.on_bytes = [this](std::string_view b) { OnBytes(b); };
    cb.on_closed = [this](const std::string& error) { OnClosed(error); };
    Result<std::unique_ptr<ByteStream>> stream = streams->OpenStream(socket_path, std::move(cb));
    if (!stream.ok()) return stream.status();
    stream_ = std::move(stream).value();
    // No EOF after the request: the engine (Go's net/http) takes a client's
    // EOF as the client going away and cancels a request still running
    // (a wait, logs with follow).
    stream_->Write(bytes);
    return Status::Ok();
  }

 private:
  // A body worth streaming: a 2xx answer's, or the stream after a 101.
  bool Success() const {
    return parser_.status_code() == 101 ||
           (parser_.status_code() >= 200 && parser_.status_code() < 300);
  }

  void OnBytes(std::string_view bytes) {
    if (finished_) return;
    std::shared_ptr<bool> alive = alive_;
    piece_.clear();
    Status parsed = parser_.Feed(bytes);
    if (on_headers_ && parser_.headers_done() && Success()) {
      auto fn = std::move(on_headers_);
      on_headers_ = nullptr;
      fn();
      if (!*alive || finished_) return;
    }
    if (!piece_.empty()) {
      std::string piece = std::move(piece_);
      piece_.clear();
      Deliver(piece);
      if (!*alive || finished_) return;
    }
    if (!parsed.ok()) return Fail(parsed, 0);
    if (parser_.complete()) Succeed();
  }

  void Deliver(const std::string& piece) {
    if (!Success() || (!on_body_ && !log_sink_)) {
      if (response_body_.size() + piece.size() > kMaxBufferedBody) {
        Fail(Status::Error("a response body over " + std::to_string(kMaxBufferedBody >> 20) +
                           " MiB (the engine's answers barge reads are far smaller)"),
             parser_.status_code());
        return;
      }
      response_body_ += piece;
      return;
    }
    std::shared_ptr<bool> alive = alive_;
    if (on_body_) {
      auto fn = on_body_;
      fn(piece);
      return;
    }
    if (tty_) {
      auto sink = log_sink_;
      sink(LogStream::kStdout, piece);
      return;
    }
    frames_.clear();
    Status demuxed = demuxer_->Feed(piece);
    auto frames = std::move(frames_);
    frames_.clear();
    auto sink = log_sink_;
    for (const auto& [stream, bytes] : frames) {
      sink(stream, bytes);
      if (!*alive) return;
    }
    if (!demuxed.ok()) Fail(demuxed, parser_.status_code());
  }

  void OnClosed(const std::string& error) {
    if (finished_) return;
    if (!error.empty()) {
      std::string why = error;
      if (why.rfind(label_ + ": ", 0) == 0) why.erase(0, label_.size() + 2);
      return Fail(Status::Error(why), 0);
    }
    Status finished = parser_.Finish();
    if (!finished.ok()) return Fail(finished, 0);
    if (demuxer_ && Success() && !tty_ && !demuxer_->at_frame_boundary()) {
      return Fail(Status::Error("the log stream ended inside a frame"), parser_.status_code());
    }
    Succeed();
  }

  void Succeed() {
    Response r;
    r.status = parser_.status_code();
    r.headers = parser_.headers();
    r.body = std::move(response_body_);
    Complete(Reply<Response>{std::move(r), parser_.status_code()});
  }

  void Fail(const Status& why, int http_status) {
    Complete(Reply<Response>{Status::Error(label_ + ": " + what_ + ": " + why.message()),
                             http_status});
  }

  // Closes the stream and runs done; the last thing this object does.
  void Complete(Reply<Response> reply) {
    if (finished_) return;
    finished_ = true;
    stream_.reset();  // allowed from inside its own callbacks
    Done<Response> done = std::move(done_);
    done_ = nullptr;
    if (done) done(std::move(reply));
  }

  std::string label_;
  std::string what_;
  Done<Response> done_;
  HttpResponseParser parser_;
  std::string piece_;  // body bytes of the current Feed
  std::string response_body_;
  std::function<void(std::string_view)> on_body_;
  std::function<void()> on_headers_;
  LogDemuxer::Sink log_sink_;
  bool tty_ = false;
  std::unique_ptr<LogDemuxer> demuxer_;
  std::vector<std::pair<LogStream, std::string>> frames_;  // of the current piece
  std::unique_ptr<ByteStream> stream_;
  bool finished_ = false;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

DockerApi::DockerApi(StreamOpener* streams, std::string socket_path, std::string api_version)
    : streams_(streams),
      socket_path_(std::move(socket_path)),
      api_version_(std::move(api_version)) {}

namespace {

HttpRequest Req(std::string method, std::string target) {
  HttpRequest r;
  r.method = std::move(method);
  r.target = std::move(target);
  return r;
}

// "GET /containers/x/json" (the query left out of messages).
std::string Describe(const HttpRequest& request) {
  return request.method + " " + request.target.substr(0, request.target.find('?'));
}

}  // namespace

Result<DockerApi::CallPtr> DockerApi::Request(HttpRequest request,
                                              std::function<void(std::string_view)> on_body,
                                              Done<Response> done) {
  auto call = std::make_unique<HttpCall>(streams_->label(), Describe(request), std::move(done));
  if (on_body) call->StreamBody(std::move(on_body));
  Status opened = call->Open(streams_, socket_path_, BuildRequest(request, api_version_));
  if (!opened.ok()) return opened;
  return CallPtr(std::move(call));
}

template <typename T>
Result<DockerApi::CallPtr> DockerApi::Typed(HttpRequest request,
                                            std::function<Result<T>(const Response&)> finish,
                                            Done<T> done) {
  const std::string context = streams_->label() + ": " + Describe(request);
  return Request(std::move(request), nullptr,
                 [context, finish = std::move(finish), done = std::move(done)](
                     Reply<Response> reply) {
                   if (!reply.ok()) {
                     return done(Reply<T>{reply.value.status(), reply.http_status});
                   }
                   const Response& r = *reply.value;
                   if (r.status >= 400) {
                     return done(Reply<T>{Status::Error(context + ": " + ApiErrorMessage(r.body) +
                                                        " (HTTP " + std::to_string(r.status) + ")"),
                                          r.status});
                   }
                   Result<T> value = finish(r);
                   if (!value.ok()) {
                     return done(Reply<T>{value.status().Prefixed(context), r.status});
                   }
                   done(Reply<T>{std::move(value), r.status});
                 });
}

Result<DockerApi::CallPtr> DockerApi::Ping(Done<std::string> done) {
  return Typed<std::string>(Req("GET", "/_ping"),
                            [](const Response& r) -> Result<std::string> { return r.body; },
                            std::move(done));
}

Result<DockerApi::CallPtr> DockerApi::InspectContainer(const std::string& name,
                                                       Done<ContainerState> done) {
  return Typed<ContainerState>(
      Req("GET", "/containers/" + UrlEncode(name) + "/json"),
      [](const Response& r) { return ParseContainerObject(r.body); }, std::move(done));
}

Result<DockerApi::CallPtr> DockerApi::Logs(const std::string& name, const LogOptions& options,
                                           LogDemuxer::Sink on_output, Done<NoContent> done) {
  HttpRequest request = Req("GET", "/containers/" + UrlEncode(name) + "/logs?stdout=1&stderr=1");
  if (options.timestamps) request.target += "&timestamps=1";
  if (options.follow) request.target += "&follow=1";
  if (options.since_ns) {
    const int64_t ns = *options.since_ns;
    int64_t s = ns / 1000000000, frac = ns % 1000000000;
    if (frac < 0) {
      frac += 1000000000;
      --s;
    }
    char buf[48];
    std::snprintf(buf, sizeof buf, "&since=%" PRId64 ".%09" PRId64, s, frac);
    request.target += buf;
  }
  return Streamed(std::move(request), options.tty, nullptr, std::move(on_output), std::move(done));
}

Result<DockerApi::CallPtr> DockerApi::Streamed(HttpRequest request, bool tty,
                                               std::function<void()> on_attached,
                                               LogDemuxer::Sink on_output, Done<NoContent> done) {
  const std::string context = streams_->label() + ": " + Describe(request);
  auto call = std::make_unique<HttpCall>(
      streams_->label(), Describe(request),
      [context, done = std::move(done)](Reply<Response> reply) {
        if (!reply.ok()) return done(Reply<NoContent>{reply.value.status(), reply.http_status});
        const Response& r = *reply.value;
        if (r.status >= 400) {
          return done(Reply<NoContent>{Status::Error(context + ": " + ApiErrorMessage(r.body) +
                                                     " (HTTP " + std::to_string(r.status) + ")"),
                                       r.status});
        }
        done(Reply<NoContent>{NoContent{}, r.status});
      });
  call->DemuxBody(std::move(on_output), tty);
  if (on_attached) call->OnHeaders(std::move(on_attached));
  Status opened = call->Open(streams_, socket_path_, BuildRequest(request, api_version_));
  if (!opened.ok()) return opened;
  return CallPtr(std::move(call));
}

Result<DockerApi::CallPtr> DockerApi::Attach(const std::string& name, bool tty,
                                             std::function<void()> on_attached,
                                             LogDemuxer::Sink on_output, Done<NoContent> done) {
  HttpRequest request =
      Req("POST", "/containers/" + UrlEncode(name) + "/attach?stream=1&stdout=1&stderr=1");
  request.upgrade = true;
  return Streamed(std::move(request), tty, std::move(on_attached), std::move(on_output),
                  std::move(done));
}

Result<DockerApi::CallPtr> DockerApi::Create(const std::string& name, std::string body,
                                             Done<std::string> done) {
  HttpRequest r = Req("POST", "/containers/create?name=" + UrlEncode(name));
  r.body = std::move(body);
  r.content_type = "application/json";
  return Typed<std::string>(
      std::move(r),
      [](const Response& resp) -> Result<std::string> {
        const json j = JsonNestingWithin(resp.body) ? json::parse(resp.body, nullptr, /*allow_exceptions=*/false)
                                                    : json();
        if (!j.is_object() || !j.contains("Id") || !j["Id"].is_string()) {
          return Status::Error("the engine's answer names no container ID");
        }
        return j["Id"].get<std::string>();
      },
      std::move(done));
}

Result<DockerApi::CallPtr> DockerApi::Start(const std::string& name, Done<NoContent> done) {
  return Typed<NoContent>(Req("POST", "/containers/" + UrlEncode(name) + "/start"),
                          [](const Response&) -> Result<NoContent> { return NoContent{}; },
                          std::move(done));
}

Result<DockerApi::CallPtr> DockerApi::Wait(const std::string& name, Done<int> done) {
  return Typed<int>(Req("POST", "/containers/" + UrlEncode(name) + "/wait"),
                    [](const Response& r) { return ParseWaitResponse(r.body); }, std::move(done));
}

Result<DockerApi::CallPtr> DockerApi::Stop(const std::string& name, int timeout_s,
                                           Done<NoContent> done) {
  return Typed<NoContent>(
      Req("POST", "/containers/" + UrlEncode(name) + "/stop?t=" + std::to_string(timeout_s)),
      [](const Response&) -> Result<NoContent> { return NoContent{}; }, std::move(done));
}

Result<DockerApi::CallPtr> DockerApi::Remove(const std::string& name, bool force,
                                             Done<NoContent> done) {
  return Typed<NoContent>(
      Req("DELETE", "/containers/" + UrlEncode(name) + (force ? "?force=1" : "")),
      [](const Response&) -> Result<NoContent> { return NoContent{}; }, std::move(done));
}

Result<DockerApi::CallPtr> DockerApi::InspectImage(const std::string& name, Done<ImageInfo> done) {
  return Typed<ImageInfo>(Req("GET", "/images/" + UrlEncode(name, "/:@") + "/json"),
                          [](const Response& r) { return ParseImageObject(r.body); },
                          std::move(done));
}

Result<DockerApi::CallPtr> DockerApi::ListContainers(const std::vector<std::string>& label_filters,
                                                     Done<std::vector<PsEntry>> done) {
  std::string target = "/containers/json?all=1";
  if (!label_filters.empty()) {
    json filters = {{"label", label_filters}};
    target += "&filters=" + UrlEncode(filters.dump());
  }
  return Typed<std::vector<PsEntry>>(Req("GET", std::move(target)),
                                     [](const Response& r) { return ParseContainerList(r.body); },
                                     std::move(done));
}

}  // namespace barge::container
