// Webhooks (webhooks.h): the queue, the worker, the tries.
#include "runner/controller/webhooks.h"

#include <nlohmann/json.hpp>

#include "runner/controller/http_post.h"
#include "runner/controller/signature.h"

namespace barge::runner::internal {

namespace {

// A webhook's URL as messages show it: scheme and host only (Slack's and
// others' URLs carry their token in the path).
std::string Shown(const std::string& url) {
  const size_t scheme = url.find("://");
  const size_t path = url.find_first_of("/?#", scheme == std::string::npos ? 0 : scheme + 3);
  return path == std::string::npos ? url : url.substr(0, path) + "/...";
}

}  // namespace

Webhooks::Webhooks(std::vector<WebhookTarget> targets, WebhookLimits limits)
    : targets_(std::move(targets)), limits_(limits) {
  if (!targets_.empty()) worker_ = std::thread([this] { Work(); });
}

Webhooks::~Webhooks() { Drain(std::chrono::milliseconds(0)); }

std::string Webhooks::Body(const Notice& n) {
  nlohmann::json body = {{"text", n.text},     {"event", n.kind},
                         {"job", {{"id", n.job_id}, {"name", n.job_name}}},
                         {"host", n.host.empty() ? nlohmann::json(nullptr) : nlohmann::json(n.host)},
                         {"detail", n.detail}, {"at", n.at}};
  // Invalid UTF-8 (a job's own output in a detail) is replaced, not thrown on.
  return body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

void Webhooks::Send(const Notice& notice) {
  std::string body;
  std::lock_guard<std::mutex> lock(mu_);
  for (const WebhookTarget& t : targets_) {
    if (!t.events.contains(notice.kind)) continue;
    if (stopping_ || queue_.size() >= limits_.queue) {
      failures_.push_back(Shown(t.url) + ": " + notice.kind + ": not sent (" +
                          (stopping_ ? "the job's notices were over" : "too many notices waiting") + ")");
      continue;
    }
    if (body.empty()) body = Body(notice);
    queue_.push_back({&t, notice.kind, body, notice.job_id + "-" + std::to_string(++sequence_)});
  }
  cv_.notify_all();
}

bool Webhooks::Drain(std::chrono::milliseconds limit) {
  bool complete = true;
  {
    std::unique_lock<std::mutex> lock(mu_);
    complete = cv_.wait_for(lock, limit, [this] { return queue_.empty() && !busy_; });
    stopping_ = true;
    for (const Delivery& d : queue_) failures_.push_back(Shown(d.target->url) + ": " + d.kind + ": not sent (out of time)");
    queue_.clear();
  }
  cancel_ = true;
  cv_.notify_all();
  if (worker_.joinable()) worker_.join();
  return complete;
}

std::vector<std::string> Webhooks::TakeFailures() {
  std::lock_guard<std::mutex> lock(mu_);
  return std::exchange(failures_, {});
}

void Webhooks::Work() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping
    Delivery d = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    lock.unlock();
    Deliver(d);
    lock.lock();
    busy_ = false;
    cv_.notify_all();
  }
}

void Webhooks::Deliver(const Delivery& d) {
  HttpPost post;
  post.url = d.target->url;
  post.body = d.body;
  post.timeout = limits_.try_timeout;
  post.connect_timeout = std::min(limits_.try_timeout, post.connect_timeout);
  post.headers = {"Content-Type: application/json", "User-Agent: barge", "X-Barge-Event: " + d.kind,
                  "X-Barge-Delivery: " + d.id};
  if (!d.target->secret.empty()) post.headers.push_back("X-Barge-Signature: sha256=" + HmacSha256Hex(d.target->secret, d.body));
  HttpAnswer answer;
  auto backoff = limits_.backoff;
  int tries = 0;
  while (tries < limits_.tries && !cancel_) {
    ++tries;
    answer = Post(post, &cancel_);
    if (answer.ok() || !answer.retryable() || tries == limits_.tries) break;
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, backoff, [this] { return cancel_.load(); });
    backoff *= 2;
  }
  if (answer.ok()) return;
  std::lock_guard<std::mutex> lock(mu_);
  failures_.push_back(Shown(d.target->url) + ": " + d.kind + ": failed: " + (cancel_ && !answer.status ? "out of time" : answer.Why()) +
                      " (" + std::to_string(tries) + (tries == 1 ? " try)" : " tries)"));
}

}  // namespace barge::runner::internal
