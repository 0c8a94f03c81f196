#include "runner/controller/byte_pipe.h"

#include <chrono>

namespace barge::runner::internal {

void BytePipe::Push(std::string_view data) {
  if (data.empty()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (end_ || abandoned_) return;
    chunks_.emplace_back(data);
    queued_ += data.size();
  }
  cv_.notify_all();
}

void BytePipe::Close(Status end) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (end_) return;
    end_ = std::move(end);
  }
  cv_.notify_all();
}

bool BytePipe::Full() const {
  std::lock_guard<std::mutex> lock(mu_);
  return queued_ >= high_mark_;
}

bool BytePipe::Abandoned() const {
  std::lock_guard<std::mutex> lock(mu_);
  return abandoned_;
}

bool BytePipe::Consumed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return consumed_ || abandoned_;
}

bool BytePipe::Read(std::string* out, Status* end, const std::atomic<bool>* cancel) {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    if (!chunks_.empty()) {
      out->clear();
      while (!chunks_.empty()) {
        out->append(chunks_.front());
        chunks_.pop_front();
      }
      queued_ = 0;
      return true;
    }
    if (end_) {
      consumed_ = true;
      *end = *end_;
      return false;
    }
    if (cancel != nullptr && cancel->load()) {
      *end = Status::Error("cancelled");
      return false;
    }
    cv_.wait_for(lock, std::chrono::milliseconds(100));
  }
}

void BytePipe::Abandon() {
  std::lock_guard<std::mutex> lock(mu_);
  abandoned_ = true;
  chunks_.clear();
  queued_ = 0;
}

}  // namespace barge::runner::internal
