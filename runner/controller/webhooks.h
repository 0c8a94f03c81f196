// Webhooks: a job's events POSTed to the URLs its `notify:` names, from one
// worker thread, so that nothing the job does waits on a receiver.
//
// Each notice is a JSON body (Body; documented in docs/guide/notifications.md):
//   {"text": "barge: job train (1a2b3c4d) failed: ...",   for Slack- and
//    "event": "failed", "job": {"id": ..., "name": ...},   Mattermost-style
//    "host": ..., "detail": ..., "at": "2026-12-07T03:00:00.000Z"}   receivers
// sent with Content-Type application/json, X-Barge-Event (the kind),
// X-Barge-Delivery (an id the same on each try, for receivers that
// de-duplicate) and, when the target has a secret, X-Barge-Signature:
// "sha256=" and the HMAC-SHA256 of the body keyed by the secret, in hex.
//
// Bounds: each try gives up after `try_timeout`; a try that gets no answer,
// a 5xx or a 429 is tried again after `backoff`, doubled each time, up to
// `tries` in all; other answers are final. Send never blocks: a notice
// that finds `queue` notices waiting is dropped and counted as failed.
// Drain waits at most its limit, then abandons what is left (the transfer
// in flight is cancelled within about a second).
//
// Threading: Send, Drain and TakeFailures from one thread (the loop's);
// the deliveries run on the worker.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace barge::runner::internal {

struct WebhookTarget {
  std::string url;
  std::set<std::string> events;  // the notice kinds it receives
  std::string secret;            // "" = not signed
};

struct Notice {
  std::string kind;  // "started", "failed", ...
  std::string job_id;
  std::string job_name;
  std::string host;  // "" = the whole job's
  std::string detail;
  std::string at;    // ISO 8601, UTC
  std::string text;  // the line a person reads
};

struct WebhookLimits {
  int tries = 3;
  std::chrono::milliseconds backoff{std::chrono::seconds(1)};
  std::chrono::milliseconds try_timeout{std::chrono::seconds(5)};
  size_t queue = 256;
};

class Webhooks {
 public:
  explicit Webhooks(std::vector<WebhookTarget> targets, WebhookLimits limits = {});
  // Abandons what is left at once (Drain(0)).
  ~Webhooks();
  Webhooks(const Webhooks&) = delete;
  Webhooks& operator=(const Webhooks&) = delete;

  // Queues `notice` for every target that receives its kind.
  void Send(const Notice& notice);
  // Waits until every queued notice was delivered or given up, or `limit`
  // passed, and stops the worker; true when nothing was abandoned. Later
  // Sends are dropped.
  bool Drain(std::chrono::milliseconds limit);
  // Deliveries given up since the last call, one line each
  // ("http://host/...: failed: failed: HTTP 503 (3 tries)": the event, then; the URL's path
  // is left out: some receivers' URLs carry their token there).
  std::vector<std::string> TakeFailures();

  static std::string Body(const Notice& notice);

 private:
  struct Delivery {
    const WebhookTarget* target;
    std::string kind;
    std::string body;
    std::string id;
  };
  void Work();
  void Deliver(const Delivery& d);

  const std::vector<WebhookTarget> targets_;
  const WebhookLimits limits_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Delivery> queue_;
  bool busy_ = false;  // the worker is delivering one
  bool stopping_ = false;
  std::atomic<bool> cancel_{false};
  std::vector<std::string> failures_;
  int sequence_ = 0;
  std::thread worker_;
};

}  // namespace barge::runner::internal
