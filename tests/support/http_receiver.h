// HttpReceiver: a real HTTP server on loopback (cpp-httplib's, in a thread
// of the test) that keeps every POST to PATH and answers each with the
// next of a scripted list of statuses (then 200), optionally after a delay
// (a hanging receiver, released when the receiver goes). For the tests of
// webhooks (runner/controller).
#pragma once

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace barge::testing {

class HttpReceiver {
 public:
  explicit HttpReceiver(std::vector<int> codes = {}, std::chrono::milliseconds delay = std::chrono::milliseconds(0),
                        std::string path = "/hook/T0KEN")
      : codes_(std::move(codes)), path_(std::move(path)) {
    server_.Post(path_, [this, delay](const httplib::Request& req, httplib::Response& res) {
      for (auto end = std::chrono::steady_clock::now() + delay; std::chrono::steady_clock::now() < end && !closing_;) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      std::lock_guard<std::mutex> lock(mu_);
      got_.push_back(req);
      const size_t i = got_.size() - 1;
      res.status = i < codes_.size() ? codes_[i] : 200;
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ~HttpReceiver() {
    closing_ = true;
    server_.stop();
    thread_.join();
  }
  HttpReceiver(const HttpReceiver&) = delete;
  HttpReceiver& operator=(const HttpReceiver&) = delete;

  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_) + path_; }
  std::vector<httplib::Request> got() {
    std::lock_guard<std::mutex> lock(mu_);
    return got_;
  }

 private:
  httplib::Server server_;
  std::atomic<bool> closing_{false};
  std::vector<int> codes_;
  std::string path_;
  int port_ = 0;
  std::thread thread_;
  std::mutex mu_;
  std::vector<httplib::Request> got_;
};

}  // namespace barge::testing
