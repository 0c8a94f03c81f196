// One HTTP POST through libcurl, blocking, bounded and cancellable: for the
// webhooks' worker thread (webhooks.h), never for the event loop's.
#pragma once

#include <atomic>
#include <chrono>
#include <string>
#include <vector>

namespace barge::runner::internal {

struct HttpPost {
  std::string url;
  std::string body;
  std::vector<std::string> headers;  // "Name: value"
  std::chrono::milliseconds connect_timeout{std::chrono::seconds(5)};
  std::chrono::milliseconds timeout{std::chrono::seconds(10)};  // the whole transfer
};

struct HttpAnswer {
  long status = 0;    // the HTTP status; 0: no answer (`error` says why)
  std::string error;  // libcurl's words, or ""
  bool ok() const { return status >= 200 && status < 300; }
  // Worth another try: no answer, a server error, or "too many requests".
  bool retryable() const { return status == 0 || status >= 500 || status == 429; }
  // "HTTP 503", or libcurl's words.
  std::string Why() const;
};

// Sends `post`; gives up (status 0, "cancelled") soon after `*cancel` turns
// true (libcurl's progress callback, at least once a second). Redirects
// are not followed: a webhook's URL is the receiver's.
HttpAnswer Post(const HttpPost& post, const std::atomic<bool>* cancel);

}  // namespace barge::runner::internal
