// S3Client: the S3 calls an artifact upload needs (PUT object, the
// multipart upload's create/part/complete/abort/list, HEAD, GET), against
// AWS or any S3-compatible endpoint, through libcurl's easy interface.
//
// Signing: libcurl's SigV4 (CURLOPT_AWS_SIGV4, "aws:amz:REGION:s3") with an
// x-amz-content-sha256 header of UNSIGNED-PAYLOAD added here (Debian 12's
// libcurl 7.88 does not add it, and S3 refuses a request without it);
// query strings are built canonical (sorted, "uploads=") since that
// libcurl signs the query as it is given. Integrity: every body sent
// carries Content-MD5, and the ETag S3 answers for a PUT or a part must be
// that MD5 (else the call fails: the server stored other bytes).
//
// Bounds and retries: each try gives up after `try_timeout` (connect after
// `connect_timeout`); a try with no answer, a 5xx or a 429 is tried again
// after `backoff`, doubled each time, up to `tries` in all; other answers
// are final. Every wait ends soon after `*cancel` turns true.
//
// Errors name the object and the endpoint ("s3://BUCKET/KEY at
// http://127.0.0.1:9000: HTTP 403 SignatureDoesNotMatch: ..."); no error
// or log line carries a secret.
//
// Threading: the calls are blocking and may run on several threads at once
// (each call has its own libcurl handle); never on the event loop's thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace barge::runner::internal {

struct S3Endpoint {
  std::string url = {};             // scheme://host[:port], no path
  std::string region = "us-east-1";
  bool path_style = false;          // false: https://BUCKET.host/KEY
};

struct S3Credentials {
  std::string access_key = {};
  std::string secret_key = {};
  std::string session_token = {};  // "" = none
};

struct S3Limits {
  int tries = 5;
  std::chrono::milliseconds backoff{std::chrono::milliseconds(500)};
  std::chrono::milliseconds connect_timeout{std::chrono::seconds(10)};
  std::chrono::milliseconds try_timeout{std::chrono::seconds(120)};
};

struct S3Part {
  int number = 0;
  std::string etag;  // without quotes
  uint64_t size = 0;
};

struct S3ObjectInfo {
  std::string etag;  // without quotes
  uint64_t size = 0;
};

class S3Client {
 public:
  // `cancel` (may be null) outlives the client.
  S3Client(S3Endpoint endpoint, std::string bucket, S3Credentials credentials, S3Limits limits = {},
           const std::atomic<bool>* cancel = nullptr);

  // "s3://BUCKET/KEY": how a person names the object.
  std::string Name(std::string_view key) const;
  // The object's HTTP(S) URL (virtual-host or path style).
  std::string Url(std::string_view key) const;
  const S3Endpoint& endpoint() const { return endpoint_; }
  const std::string& bucket() const { return bucket_; }
  // Calls made so far that sent a body (PUTs and parts), retries included.
  int bodies_sent() const { return bodies_sent_.load(); }
  bool cancelled() const { return cancel_ != nullptr && cancel_->load(); }

  // One PUT of `data`; returns its ETag (its MD5 in hex). `md5_hex`: the
  // data's MD5 when the caller has it ("" = computed here).
  [[nodiscard]] Result<std::string> PutObject(std::string_view key, std::string_view data,
                                              std::string md5_hex = "");
  // Starts a multipart upload; returns its upload id.
  [[nodiscard]] Result<std::string> CreateMultipart(std::string_view key);
  // Sends part `number` (1..10000); returns its ETag (its MD5 in hex).
  [[nodiscard]] Result<std::string> UploadPart(std::string_view key, std::string_view upload_id, int number,
                                               std::string_view data, std::string md5_hex = "");
  // Assembles `parts` (in order); returns the object's ETag.
  [[nodiscard]] Result<std::string> CompleteMultipart(std::string_view key, std::string_view upload_id,
                                                      const std::vector<S3Part>& parts);
  // Drops the upload and every part sent to it.
  [[nodiscard]] Status AbortMultipart(std::string_view key, std::string_view upload_id);
  // The parts the server holds for the upload, by number.
  [[nodiscard]] Result<std::vector<S3Part>> ListParts(std::string_view key, std::string_view upload_id);
  // The object's ETag and size; nullopt when there is none.
  [[nodiscard]] Result<std::optional<S3ObjectInfo>> Head(std::string_view key);
  // The object's bytes, whole (for checks of small objects).
  [[nodiscard]] Result<std::string> GetObject(std::string_view key);

 private:
  struct Request;
  struct Reply;
  Reply Send(const Request& request);
  Reply SendOnce(const Request& request);
  Status Failure(std::string_view key, const Reply& reply) const;
  bool Wait(std::chrono::milliseconds delay) const;

  const S3Endpoint endpoint_;
  const std::string bucket_;
  const S3Credentials credentials_;
  const S3Limits limits_;
  const std::atomic<bool>* const cancel_;
  std::atomic<int> bodies_sent_{0};
};

// Pure helpers (s3_client_test.cc).
// RFC 3986 encoding of a key for a URL path: unreserved characters and '/'
// stay, every other byte is %XX.
std::string S3EncodeKey(std::string_view key);
// Every text between <tag> and </tag> in `xml`, with the five XML entities
// decoded.
std::vector<std::string> XmlValues(std::string_view xml, std::string_view tag);
// MD5 of `data`, in hex and in base64 (Content-MD5's form).
std::string Md5Hex(std::string_view data);
std::string Md5Base64(std::string_view data);
// Content-MD5's base64 of an MD5 given in hex.
std::string HexToBase64(std::string_view hex);

}  // namespace barge::runner::internal
