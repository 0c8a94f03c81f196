// What every libcurl easy transfer of barge shares (http_post.cc,
// s3_client.cc): the handle's and the header list's owners, and the
// options that bound a transfer and let it be cancelled.
#pragma once

#include <curl/curl.h>

#include <atomic>
#include <chrono>
#include <memory>

namespace barge::runner::internal {

struct CurlEasyDeleter {
  void operator()(CURL* c) const { curl_easy_cleanup(c); }
};
struct CurlListDeleter {
  void operator()(curl_slist* l) const { curl_slist_free_all(l); }
};
using CurlEasy = std::unique_ptr<CURL, CurlEasyDeleter>;
using CurlList = std::unique_ptr<curl_slist, CurlListDeleter>;

// curl_global_init, once per process; then a new handle (null on failure).
CurlEasy NewCurlEasy();

// Connect and whole-transfer timeouts, no signals, no redirects, http(s)
// only, libcurl's words into `error` (CURL_ERROR_SIZE bytes), and an end
// (CURLE_ABORTED_BY_CALLBACK) soon after `*cancel` turns true (`cancel`
// may be null; it and `error` outlive the transfer).
void BoundTransfer(CURL* c, std::chrono::milliseconds connect_timeout, std::chrono::milliseconds timeout, char* error,
                   const std::atomic<bool>* cancel);

}  // namespace barge::runner::internal
