// Post (http_post.h) through libcurl's easy interface.
#include "runner/controller/http_post.h"

#include "runner/controller/curl_easy.h"

namespace barge::runner::internal {

namespace {

size_t Discard(char*, size_t size, size_t count, void*) { return size * count; }

}  // namespace

std::string HttpAnswer::Why() const { return status ? "HTTP " + std::to_string(status) : error; }

HttpAnswer Post(const HttpPost& post, const std::atomic<bool>* cancel) {
  HttpAnswer answer;
  CurlEasy curl = NewCurlEasy();
  if (!curl) {
    answer.error = "cannot start libcurl";
    return answer;
  }
  CurlList headers;
  for (const std::string& h : post.headers) headers.reset(curl_slist_append(headers.release(), h.c_str()));
  char error[CURL_ERROR_SIZE] = {};
  CURL* c = curl.get();
  curl_easy_setopt(c, CURLOPT_URL, post.url.c_str());
  curl_easy_setopt(c, CURLOPT_POST, 1L);
  curl_easy_setopt(c, CURLOPT_POSTFIELDS, post.body.data());
  curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(post.body.size()));
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers.get());
  BoundTransfer(c, post.connect_timeout, post.timeout, error, cancel);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, Discard);
  const CURLcode code = curl_easy_perform(c);
  if (code != CURLE_OK) {
    answer.error = code == CURLE_ABORTED_BY_CALLBACK ? "cancelled" : error[0] ? error : curl_easy_strerror(code);
    return answer;
  }
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &answer.status);
  return answer;
}

}  // namespace barge::runner::internal
