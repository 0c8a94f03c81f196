// S3Upload (s3_upload.h): parts cut on the writer's thread, sent by the
// upload's workers.
#include "runner/controller/s3_upload.h"

#include <algorithm>
#include <utility>

namespace barge::runner::internal {

S3Upload::S3Upload(S3Client* client, std::string key, S3UploadLimits limits, std::optional<std::string> resume_id,
                   std::function<void(const std::string&)> started)
    : client_(*client),
      key_(std::move(key)),
      limits_(limits),
      resume_id_(std::move(resume_id)),
      started_(std::move(started)),
      md5_(EVP_MD_CTX_new(), EVP_MD_CTX_free) {
  EVP_DigestInit_ex(md5_.get(), EVP_md5(), nullptr);
}

S3Upload::~S3Upload() { StopWorkers(); }

void S3Upload::StopWorkers() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    queue_.clear();
  }
  cv_.notify_all();
  for (std::thread& t : workers_) t.join();
  workers_.clear();
}

Status S3Upload::Start() {
  if (resume_id_ && !resume_id_->empty()) {
    Result<std::vector<S3Part>> parts = client_.ListParts(key_, *resume_id_);
    if (parts.ok()) {
      upload_id_ = *resume_id_;
      for (const S3Part& p : *parts) held_[p.number] = p;
    }
    // An upload the server no longer knows (completed, aborted, expired):
    // a new one.
  }
  if (upload_id_.empty()) {
    Result<std::string> id = client_.CreateMultipart(key_);
    if (!id.ok()) return id.status();
    upload_id_ = *id;
  }
  if (started_) started_(upload_id_);
  for (int i = 0; i < std::max(1, limits_.parallel); ++i) workers_.emplace_back([this] { Work(); });
  return Status::Ok();
}

Status S3Upload::Fail(Status why) {
  StopWorkers();
  if (!upload_id_.empty() && !client_.cancelled()) {
    if (Status s = client_.AbortMultipart(key_, upload_id_); !s.ok()) {
      return Status::Error(why.message() + " (and the upload " + upload_id_ + " was not aborted: " + s.message() + ")");
    }
  }
  return why;
}

Status S3Upload::Enqueue(std::string bytes) {
  if (upload_id_.empty()) {
    if (Status s = Start(); !s.ok()) return s;
  }
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return queue_.empty() || error_.has_value(); });
  if (error_) {
    Status why = *error_;
    lock.unlock();
    return Fail(why);
  }
  queue_.push_back({next_number_++, std::move(bytes)});
  lock.unlock();
  cv_.notify_all();
  return Status::Ok();
}

Status S3Upload::Write(std::string_view data) {
  EVP_DigestUpdate(md5_.get(), data.data(), data.size());
  size_ += data.size();
  while (!data.empty()) {
    const size_t take = std::min<size_t>(data.size(), limits_.part_size - buffer_.size());
    buffer_.append(data.substr(0, take));
    data.remove_prefix(take);
    if (buffer_.size() == limits_.part_size) {
      std::string part;
      part.swap(buffer_);
      if (Status s = Enqueue(std::move(part)); !s.ok()) return s;
    }
  }
  return Status::Ok();
}

void S3Upload::Work() {
  for (;;) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (stopping_) return;
    Part part = std::move(queue_.front());
    queue_.pop_front();
    ++in_flight_;
    lock.unlock();
    cv_.notify_all();
    SendPart(part);
    lock.lock();
    --in_flight_;
    lock.unlock();
    cv_.notify_all();
  }
}

void S3Upload::SendPart(Part& part) {
  const std::string md5 = Md5Hex(part.bytes);
  auto held = held_.find(part.number);
  if (held != held_.end() && held->second.size == part.bytes.size() && held->second.etag == md5) {
    std::lock_guard<std::mutex> lock(mu_);
    done_.push_back(held->second);
    return;
  }
  Result<std::string> etag = client_.UploadPart(key_, upload_id_, part.number, part.bytes, md5);
  std::lock_guard<std::mutex> lock(mu_);
  if (!etag.ok()) {
    if (!error_) error_ = etag.status();
    return;
  }
  done_.push_back({part.number, *etag, part.bytes.size()});
  ++sent_;
}

Result<S3Uploaded> S3Upload::Finish() {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_DigestFinal_ex(md5_.get(), digest, &length);
  static constexpr char kHex[] = "0123456789abcdef";
  S3Uploaded out{.name = client_.Name(key_), .url = client_.Url(key_), .size = size_};
  for (unsigned int i = 0; i < length; ++i) out.md5 += {kHex[digest[i] >> 4], kHex[digest[i] & 0xf]};
  if (upload_id_.empty()) {
    Result<std::string> etag = client_.PutObject(key_, buffer_);
    if (!etag.ok()) return etag.status();
    out.etag = *etag;
    return out;
  }
  if (!buffer_.empty()) {
    std::string last;
    last.swap(buffer_);
    if (Status s = Enqueue(std::move(last)); !s.ok()) return s;
  }
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return (queue_.empty() && in_flight_ == 0) || error_.has_value(); });
  std::optional<Status> error = error_;
  std::vector<S3Part> parts = done_;
  out.parts_sent = sent_;
  lock.unlock();
  if (error) return Fail(*error);
  StopWorkers();
  std::sort(parts.begin(), parts.end(), [](const S3Part& a, const S3Part& b) { return a.number < b.number; });
  out.parts = static_cast<int>(parts.size());
  Result<std::string> etag = client_.CompleteMultipart(key_, upload_id_, parts);
  if (!etag.ok()) return Fail(etag.status());
  out.etag = *etag;
  return out;
}

}  // namespace barge::runner::internal
