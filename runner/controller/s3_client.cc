// S3Client (s3_client.h) through libcurl's easy interface and its SigV4.
#include "runner/controller/s3_client.h"

#include "runner/controller/curl_easy.h"

#include <openssl/evp.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>

namespace barge::runner::internal {

namespace {

S3Endpoint Trimmed(S3Endpoint e) {
  while (!e.url.empty() && e.url.back() == '/') e.url.pop_back();
  return e;
}

size_t Collect(char* data, size_t size, size_t count, void* out) {
  static_cast<std::string*>(out)->append(data, size * count);
  return size * count;
}

// The body of a PUT, read by libcurl from memory (no copy).
struct BodyCursor {
  std::string_view rest;
};

size_t ReadBody(char* buffer, size_t size, size_t count, void* cursor) {
  auto* c = static_cast<BodyCursor*>(cursor);
  const size_t n = std::min(size * count, c->rest.size());
  std::memcpy(buffer, c->rest.data(), n);
  c->rest.remove_prefix(n);
  return n;
}

std::string Unquote(std::string s) {
  s.erase(std::remove(s.begin(), s.end(), '"'), s.end());
  return s;
}

std::string Md5Raw(std::string_view data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_Digest(data.data(), data.size(), digest, &length, EVP_md5(), nullptr);
  return std::string(reinterpret_cast<const char*>(digest), length);
}

// The host part of "scheme://host[:port]".
std::string_view HostOf(std::string_view url) {
  const size_t scheme = url.find("://");
  return scheme == std::string_view::npos ? url : url.substr(scheme + 3);
}

}  // namespace

struct S3Client::Request {
  std::string method = {};  // GET, HEAD, PUT, POST, DELETE
  std::string key = {};
  std::string query = {};  // canonical: sorted, "name=value&..."
  std::string_view body = {};
  bool has_body = false;  // sends Content-MD5 and expects the ETag to be its MD5
  std::string md5_hex = {};  // the body's MD5, when has_body
};

struct S3Client::Reply {
  long status = 0;    // 0: no answer
  std::string error;  // libcurl's words when status is 0
  std::string body;
  std::string etag;   // the ETag header, unquoted
  uint64_t size = 0;  // Content-Length of a HEAD
  bool ok() const { return status >= 200 && status < 300; }
  bool retryable() const { return status == 0 || status >= 500 || status == 429; }
};

S3Client::S3Client(S3Endpoint endpoint, std::string bucket, S3Credentials credentials, S3Limits limits,
                   const std::atomic<bool>* cancel)
    : endpoint_(Trimmed(std::move(endpoint))),
      bucket_(std::move(bucket)),
      credentials_(std::move(credentials)),
      limits_(limits),
      cancel_(cancel) {
}

std::string S3Client::Name(std::string_view key) const { return "s3://" + bucket_ + "/" + std::string(key); }

std::string S3Client::Url(std::string_view key) const {
  if (endpoint_.path_style) return endpoint_.url + "/" + bucket_ + "/" + S3EncodeKey(key);
  const size_t scheme = endpoint_.url.find("://");
  const std::string head = scheme == std::string::npos ? "" : endpoint_.url.substr(0, scheme + 3);
  return head + bucket_ + "." + std::string(HostOf(endpoint_.url)) + "/" + S3EncodeKey(key);
}

bool S3Client::Wait(std::chrono::milliseconds delay) const {
  const auto until = std::chrono::steady_clock::now() + delay;
  while (std::chrono::steady_clock::now() < until) {
    if (cancel_ != nullptr && cancel_->load()) return false;
    std::this_thread::sleep_for(std::min<std::chrono::milliseconds>(delay, std::chrono::milliseconds(50)));
  }
  return cancel_ == nullptr || !cancel_->load();
}

S3Client::Reply S3Client::Send(const Request& request) {
  Reply reply;
  std::chrono::milliseconds delay = limits_.backoff;
  for (int attempt = 1;; ++attempt) {
    reply = SendOnce(request);
    if (reply.ok() && request.has_body && !reply.etag.empty() && reply.etag != request.md5_hex) {
      // The server holds other bytes than those sent: send them again.
      reply.status = 0;
      reply.error = "the server's ETag " + reply.etag + " is not the MD5 of the bytes sent";
    }
    if (reply.ok() || !reply.retryable() || attempt >= limits_.tries) return reply;
    if (!Wait(delay)) {
      reply.status = 0;
      reply.error = "cancelled";
      return reply;
    }
    delay *= 2;
  }
}

S3Client::Reply S3Client::SendOnce(const Request& request) {
  Reply reply;
  if (request.has_body) ++bodies_sent_;
  CurlEasy curl = NewCurlEasy();
  if (!curl) {
    reply.error = "cannot start libcurl";
    return reply;
  }
  CURL* c = curl.get();
  std::string url = Url(request.key);
  if (!request.query.empty()) url += "?" + request.query;
  CurlList headers;
  auto add = [&headers](const std::string& h) { headers.reset(curl_slist_append(headers.release(), h.c_str())); };
  add("x-amz-content-sha256: UNSIGNED-PAYLOAD");
  // No "Expect:" header to switch 100-continue off: libcurl 7.88 signs the
  // empty header it then does not send, and the signature fails.
  if (!credentials_.session_token.empty()) add("x-amz-security-token: " + credentials_.session_token);
  if (request.has_body) add("Content-MD5: " + HexToBase64(request.md5_hex));
  const std::string sigv4 = "aws:amz:" + endpoint_.region + ":s3";
  BodyCursor cursor{request.body};
  char error[CURL_ERROR_SIZE] = {};
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_AWS_SIGV4, sigv4.c_str());
  curl_easy_setopt(c, CURLOPT_USERNAME, credentials_.access_key.c_str());
  curl_easy_setopt(c, CURLOPT_PASSWORD, credentials_.secret_key.c_str());
  if (request.method == "PUT") {
    curl_easy_setopt(c, CURLOPT_UPLOAD, 1L);
    curl_easy_setopt(c, CURLOPT_READFUNCTION, ReadBody);
    curl_easy_setopt(c, CURLOPT_READDATA, &cursor);
    curl_easy_setopt(c, CURLOPT_INFILESIZE_LARGE, static_cast<curl_off_t>(request.body.size()));
  } else if (request.method == "POST") {
    curl_easy_setopt(c, CURLOPT_POST, 1L);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, request.body.data() ? request.body.data() : "");
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(request.body.size()));
    add("Content-Type: application/xml");
  } else if (request.method == "HEAD") {
    curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
  } else if (request.method == "DELETE") {
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, "DELETE");
  }
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers.get());
  BoundTransfer(c, limits_.connect_timeout, limits_.try_timeout, error, cancel_);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, Collect);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &reply.body);
  const CURLcode code = curl_easy_perform(c);
  if (code != CURLE_OK) {
    reply.error = code == CURLE_ABORTED_BY_CALLBACK ? "cancelled" : error[0] ? error : curl_easy_strerror(code);
    reply.body.clear();
    return reply;
  }
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &reply.status);
  curl_header* h = nullptr;
  if (curl_easy_header(c, "ETag", 0, CURLH_HEADER, -1, &h) == CURLHE_OK) reply.etag = Unquote(h->value);
  curl_off_t length = 0;
  if (curl_easy_getinfo(c, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &length) == CURLE_OK && length > 0) {
    reply.size = static_cast<uint64_t>(length);
  }
  return reply;
}

Status S3Client::Failure(std::string_view key, const Reply& reply) const {
  std::string why;
  if (reply.status == 0) {
    why = reply.error;
  } else {
    why = "HTTP " + std::to_string(reply.status);
    std::vector<std::string> code = XmlValues(reply.body, "Code");
    std::vector<std::string> message = XmlValues(reply.body, "Message");
    if (!code.empty()) {
      why += " " + code[0];
    } else if (reply.status == 403) {
      why += " Forbidden (no body: a HEAD; check the keys, the region and the bucket's permissions)";
    }
    if (!message.empty()) why += ": " + message[0];
  }
  return Status::Error(Name(key) + " at " + endpoint_.url + ": " + why);
}

Result<std::string> S3Client::PutObject(std::string_view key, std::string_view data, std::string md5_hex) {
  if (md5_hex.empty()) md5_hex = Md5Hex(data);
  Reply r = Send({.method = "PUT", .key = std::string(key), .body = data, .has_body = true, .md5_hex = md5_hex});
  if (!r.ok()) return Failure(key, r);
  return r.etag.empty() ? md5_hex : r.etag;
}

Result<std::string> S3Client::CreateMultipart(std::string_view key) {
  Reply r = Send({.method = "POST", .key = std::string(key), .query = "uploads="});
  if (!r.ok()) return Failure(key, r);
  std::vector<std::string> id = XmlValues(r.body, "UploadId");
  if (id.empty() || id[0].empty()) return Status::Error(Name(key) + " at " + endpoint_.url + ": no UploadId in the answer");
  return id[0];
}

Result<std::string> S3Client::UploadPart(std::string_view key, std::string_view upload_id, int number,
                                         std::string_view data, std::string md5_hex) {
  if (md5_hex.empty()) md5_hex = Md5Hex(data);
  // partNumber sorts before uploadId: the query is canonical as it stands.
  Reply r = Send({.method = "PUT",
                  .key = std::string(key),
                  .query = "partNumber=" + std::to_string(number) + "&uploadId=" + S3EncodeKey(upload_id),
                  .body = data,
                  .has_body = true,
                  .md5_hex = md5_hex});
  if (!r.ok()) return Failure(key, r).Prefixed("part " + std::to_string(number));
  return r.etag.empty() ? md5_hex : r.etag;
}

Result<std::string> S3Client::CompleteMultipart(std::string_view key, std::string_view upload_id,
                                                const std::vector<S3Part>& parts) {
  std::string xml = "<CompleteMultipartUpload>";
  for (const S3Part& p : parts) {
    xml += "<Part><PartNumber>" + std::to_string(p.number) + "</PartNumber><ETag>\"" + p.etag + "\"</ETag></Part>";
  }
  xml += "</CompleteMultipartUpload>";
  Reply r = Send({.method = "POST", .key = std::string(key), .query = "uploadId=" + S3EncodeKey(upload_id), .body = xml});
  // S3 may answer 200 with an <Error> body when assembling failed late.
  if (r.ok() && !XmlValues(r.body, "Error").empty()) r.status = 500;
  if (!r.ok()) return Failure(key, r);
  std::vector<std::string> etag = XmlValues(r.body, "ETag");
  return etag.empty() ? std::string() : Unquote(etag[0]);
}

Status S3Client::AbortMultipart(std::string_view key, std::string_view upload_id) {
  Reply r = Send({.method = "DELETE", .key = std::string(key), .query = "uploadId=" + S3EncodeKey(upload_id)});
  if (!r.ok() && r.status != 404) return Failure(key, r);
  return Status::Ok();
}

Result<std::vector<S3Part>> S3Client::ListParts(std::string_view key, std::string_view upload_id) {
  std::vector<S3Part> parts;
  std::string marker;
  for (;;) {
    std::string query = "max-parts=1000";
    if (!marker.empty()) query += "&part-number-marker=" + marker;
    query += "&uploadId=" + S3EncodeKey(upload_id);
    Reply r = Send({.method = "GET", .key = std::string(key), .query = query});
    if (!r.ok()) return Failure(key, r);
    for (const std::string& part : XmlValues(r.body, "Part")) {
      std::vector<std::string> n = XmlValues(part, "PartNumber"), etag = XmlValues(part, "ETag"),
                               size = XmlValues(part, "Size");
      if (n.empty() || etag.empty() || size.empty()) continue;
      parts.push_back({std::atoi(n[0].c_str()), Unquote(etag[0]), std::strtoull(size[0].c_str(), nullptr, 10)});
    }
    std::vector<std::string> truncated = XmlValues(r.body, "IsTruncated"), next = XmlValues(r.body, "NextPartNumberMarker");
    if (truncated.empty() || truncated[0] != "true" || next.empty() || next[0] == marker) break;
    marker = next[0];
  }
  std::sort(parts.begin(), parts.end(), [](const S3Part& a, const S3Part& b) { return a.number < b.number; });
  return parts;
}

Result<std::optional<S3ObjectInfo>> S3Client::Head(std::string_view key) {
  Reply r = Send({.method = "HEAD", .key = std::string(key)});
  if (r.status == 404) return std::optional<S3ObjectInfo>();
  if (!r.ok()) return Failure(key, r);
  return std::optional<S3ObjectInfo>(S3ObjectInfo{r.etag, r.size});
}

Result<std::string> S3Client::GetObject(std::string_view key) {
  Reply r = Send({.method = "GET", .key = std::string(key)});
  if (!r.ok()) return Failure(key, r);
  return std::move(r.body);
}

std::string S3EncodeKey(std::string_view key) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (char ch : key) {
    const auto c = static_cast<unsigned char>(ch);
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' || c == '/') {
      out += ch;
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 0xf];
    }
  }
  return out;
}

std::vector<std::string> XmlValues(std::string_view xml, std::string_view tag) {
  std::vector<std::string> out;
  const std::string open = "<" + std::string(tag) + ">", close = "</" + std::string(tag) + ">";
  for (size_t at = xml.find(open); at != std::string_view::npos; at = xml.find(open, at)) {
    const size_t begin = at + open.size(), end = xml.find(close, begin);
    if (end == std::string_view::npos) break;
    std::string v;
    std::string_view raw = xml.substr(begin, end - begin);
    for (size_t i = 0; i < raw.size(); ++i) {
      static constexpr std::pair<std::string_view, char> kEntities[] = {
          {"&quot;", '"'}, {"&amp;", '&'}, {"&lt;", '<'}, {"&gt;", '>'}, {"&apos;", '\''}};
      bool entity = false;
      for (const auto& [name, ch] : kEntities) {
        if (raw.substr(i, name.size()) == name) {
          v += ch;
          i += name.size() - 1;
          entity = true;
          break;
        }
      }
      if (!entity) v += raw[i];
    }
    out.push_back(std::move(v));
    at = end + close.size();
  }
  return out;
}

std::string Md5Hex(std::string_view data) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  for (unsigned char c : Md5Raw(data)) {
    hex += kHex[c >> 4];
    hex += kHex[c & 0xf];
  }
  return hex;
}

std::string HexToBase64(std::string_view hex) {
  std::string raw;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    raw += static_cast<char>(std::stoi(std::string(hex.substr(i, 2)), nullptr, 16));
  }
  unsigned char out[64] = {};
  const int n = EVP_EncodeBlock(out, reinterpret_cast<const unsigned char*>(raw.data()), static_cast<int>(raw.size()));
  return std::string(reinterpret_cast<const char*>(out), n);
}

std::string Md5Base64(std::string_view data) {
  const std::string raw = Md5Raw(data);
  unsigned char out[64] = {};
  const int n = EVP_EncodeBlock(out, reinterpret_cast<const unsigned char*>(raw.data()), static_cast<int>(raw.size()));
  return std::string(reinterpret_cast<const char*>(out), n);
}

}  // namespace barge::runner::internal
