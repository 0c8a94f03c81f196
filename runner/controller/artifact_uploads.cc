// ArtifactUploads (artifact_uploads.h): the worker and its files.
#include "runner/controller/artifact_uploads.h"

#include "runner/store/job_lookup.h"

#include <openssl/evp.h>

#include <filesystem>
#include <fstream>
#include <utility>

namespace barge::runner::internal {

namespace fs = std::filesystem;

namespace {

std::string Hex(const unsigned char* d, unsigned int n) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < n; ++i) out += {kHex[d[i] >> 4], kHex[d[i] & 0xf]};
  return out;
}

// The file's MD5 and the ETag S3 gives it when sent in parts of
// `part_size` (the MD5 of the parts' MD5s, "-N"; its MD5 for one PUT).
struct LocalDigest {
  uint64_t size = 0;
  std::string md5, etag;
  bool ok = false;
};

LocalDigest Digest(const std::string& path, uint64_t part_size) {
  LocalDigest d;
  std::ifstream in(path, std::ios::binary);
  if (!in) return d;
  std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> whole(EVP_MD_CTX_new(), EVP_MD_CTX_free),
      part(EVP_MD_CTX_new(), EVP_MD_CTX_free), parts(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  EVP_DigestInit_ex(whole.get(), EVP_md5(), nullptr);
  EVP_DigestInit_ex(part.get(), EVP_md5(), nullptr);
  EVP_DigestInit_ex(parts.get(), EVP_md5(), nullptr);
  std::vector<char> buf(1 << 20);
  uint64_t in_part = 0;
  int count = 0;
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  auto end_part = [&] {
    EVP_DigestFinal_ex(part.get(), md, &n);
    EVP_DigestUpdate(parts.get(), md, n);
    EVP_DigestInit_ex(part.get(), EVP_md5(), nullptr);
    ++count;
    in_part = 0;
  };
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(std::min<uint64_t>(buf.size(), part_size - in_part)));
    const auto got = static_cast<size_t>(in.gcount());
    if (got == 0) break;
    EVP_DigestUpdate(whole.get(), buf.data(), got);
    EVP_DigestUpdate(part.get(), buf.data(), got);
    d.size += got;
    in_part += got;
    if (in_part == part_size) end_part();
  }
  if (in.bad()) return d;
  if (in_part > 0) end_part();
  EVP_DigestFinal_ex(whole.get(), md, &n);
  d.md5 = Hex(md, n);
  if (d.size < part_size) {
    d.etag = d.md5;
  } else {
    EVP_DigestFinal_ex(parts.get(), md, &n);
    d.etag = Hex(md, n) + "-" + std::to_string(count);
  }
  d.ok = true;
  return d;
}

void Replace(std::string& s, std::string_view from, const std::string& to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) {
    s.replace(at, from.size(), to);
  }
}

}  // namespace

S3Destination ExpandS3Destination(std::string_view to, const std::string& job, int rank, const std::string& host,
                                  const std::string& name) {
  std::string rest(to.substr(to.starts_with("s3://") ? 5 : 0));
  const size_t slash = rest.find('/');
  S3Destination d{rest.substr(0, slash), slash == std::string::npos ? "" : rest.substr(slash + 1)};
  if (d.key.find("{name}") == std::string::npos) {
    if (!d.key.empty() && d.key.back() != '/') d.key += '/';
    d.key += "{name}";
  }
  Replace(d.key, "{job}", job);
  Replace(d.key, "{rank}", std::to_string(rank));
  Replace(d.key, "{host}", host);
  Replace(d.key, "{name}", name);
  return d;
}

ArtifactUploads::ArtifactUploads(StorageSpec storage, std::string state_dir, std::string job_id, S3Limits limits)
    : storage_(std::move(storage)), state_dir_(std::move(state_dir)), job_id_(std::move(job_id)), limits_(limits) {
  worker_ = std::thread([this] { Work(); });
}

ArtifactUploads::~ArtifactUploads() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    queue_.clear();
  }
  cancel_ = true;
  cv_.notify_all();
  worker_.join();
}

void ArtifactUploads::Queue(const std::string& tag, const std::string& root, const std::string& to,
                            const std::string& job, int rank, const std::string& host) {
  std::vector<File> files;
  std::error_code ec;
  const fs::path base = fs::path(root).parent_path();
  auto add = [&](const fs::path& p) {
    const std::string name = p.lexically_relative(base).string();
    S3Destination d = ExpandS3Destination(to, job, rank, host, name);
    files.push_back({tag, p.string(), d.bucket, d.key});
  };
  if (fs::is_regular_file(root, ec)) {
    add(root);
  } else if (fs::is_directory(root, ec)) {
    for (auto it = fs::recursive_directory_iterator(root, ec); !ec && it != fs::recursive_directory_iterator();
         it.increment(ec)) {
      if (it->is_regular_file(ec) && !it->is_symlink(ec)) add(it->path());
    }
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ || cancel_) return;  // cancelled: nothing more is sent
    for (File& f : files) {
      ++busy_[f.tag];
      queue_.push_back(std::move(f));
    }
  }
  cv_.notify_all();
}

bool ArtifactUploads::Busy(const std::string& tag) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = busy_.find(tag);
  return it != busy_.end() && it->second > 0;
}

bool ArtifactUploads::IdleLocked() const {
  for (const auto& [tag, n] : busy_) {
    if (n > 0) return false;
  }
  return true;
}

bool ArtifactUploads::Idle() {
  std::lock_guard<std::mutex> lock(mu_);
  return IdleLocked();
}

void ArtifactUploads::Cancel() {
  std::lock_guard<std::mutex> lock(mu_);
  for (const File& f : queue_) --busy_[f.tag];
  queue_.clear();
  cancel_ = true;
}

bool ArtifactUploads::Drain(std::chrono::milliseconds limit) {
  std::unique_lock<std::mutex> lock(mu_);
  const bool done = cv_.wait_for(lock, limit, [this] { return IdleLocked(); });
  lock.unlock();
  if (!done) Cancel();
  return done;
}

std::vector<ArtifactSent> ArtifactUploads::TakeSent() {
  std::lock_guard<std::mutex> lock(mu_);
  return std::exchange(sent_, {});
}

std::string ArtifactUploads::TakeWarning() {
  std::lock_guard<std::mutex> lock(mu_);
  return std::exchange(warning_, {});
}

void ArtifactUploads::Warn(const std::string& why) {
  std::lock_guard<std::mutex> lock(mu_);
  if (warning_.empty()) warning_ = why;
}

void ArtifactUploads::Work() {
  if (!state_dir_.empty()) {
    Result<std::unique_ptr<JobStore>> jobs = JobStore::Open(state_dir_);
    Result<std::unique_ptr<UploadStore>> records = UploadStore::Open(state_dir_);
    if (jobs.ok() && records.ok()) {
      jobs_ = std::move(jobs).value();
      records_ = std::move(records).value();
    } else {
      Warn((jobs.ok() ? records.status() : jobs.status()).message());
    }
  }
  for (;;) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (stopping_ || cancel_) break;
    File f = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    UploadRecord sent = Send(f);
    sent.at = WallNow();
    Remember(sent);
    lock.lock();
    const bool failed = sent.state == UploadState::kFailed || sent.state == UploadState::kInterrupted;
    sent_.push_back({sent, failed ? sent.detail : "", sent.state == UploadState::kAlreadyThere});
    --busy_[f.tag];
    lock.unlock();
    cv_.notify_all();
  }
  // The store's connections are the worker's: closed on its thread.
  records_.reset();
  jobs_.reset();
}

S3Client& ArtifactUploads::Client(const std::string& bucket) {
  std::unique_ptr<S3Client>& c = clients_[bucket];
  if (!c) {
    c = std::make_unique<S3Client>(
        S3Endpoint{.url = storage_.endpoint, .region = storage_.region, .path_style = storage_.path_style}, bucket,
        S3Credentials{storage_.access_key, storage_.secret_key, storage_.session_token}, limits_, &cancel_);
  }
  return *c;
}

UploadRecord ArtifactUploads::Send(const File& f) {
  S3Client& client = Client(f.bucket);
  UploadRecord out{.job_id = job_id_,
                   .name = client.Name(f.key),
                   .endpoint = client.endpoint().url,
                   .url = client.Url(f.key),
                   .local = f.local,
                   .state = UploadState::kFailed,
                   .part_size = storage_.part_size};
  std::error_code ec;
  out.size = fs::file_size(f.local, ec);
  if (ec) {
    out.size = 0;
    out.detail = "cannot read " + f.local + ": " + ec.message();
    return out;
  }
  Result<std::optional<S3ObjectInfo>> held = client.Head(f.key);
  if (!held.ok()) {
    out.detail = held.status().message();
    if (cancel_) {
      out.state = UploadState::kInterrupted;
      out.detail = "";
    }
    return out;
  }
  // Read twice only when the destination may hold the same bytes.
  if (held->has_value() && (*held)->size == out.size) {
    const LocalDigest local = Digest(f.local, storage_.part_size);
    if (local.ok && local.etag == (*held)->etag) {
      out.md5 = local.md5;
      out.etag = local.etag;
      out.state = UploadState::kAlreadyThere;
      return out;
    }
  }
  const std::optional<UploadRecord> earlier = Resumable(out);
  std::ifstream in(f.local, std::ios::binary);
  S3Upload upload(&client, f.key, {.part_size = storage_.part_size, .parallel = storage_.parallel},
                  earlier ? std::optional<std::string>(earlier->upload_id) : std::nullopt,
                  [this, &out](const std::string& id) {
                    UploadRecord sending = out;
                    sending.state = UploadState::kSending;
                    sending.upload_id = id;
                    sending.at = WallNow();
                    Remember(sending);
                  });
  std::vector<char> buf(1 << 20);
  Status written;
  while (written.ok() && in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    if (in.gcount() > 0) written = upload.Write(std::string_view(buf.data(), static_cast<size_t>(in.gcount())));
  }
  Result<S3Uploaded> done = written.ok() ? upload.Finish() : Result<S3Uploaded>(written);
  if (!done.ok()) {
    out.detail = done.status().message();
    // Cancelled: the multipart upload stays for a resume; else it was
    // aborted (or never began).
    if (cancel_) {
      out.state = UploadState::kInterrupted;
      out.upload_id = upload.upload_id();
      out.detail = "";
    }
    return out;
  }
  out.md5 = done->md5;
  out.etag = done->etag;
  out.parts = done->parts;
  out.parts_sent = done->parts_sent;
  out.state = UploadState::kSent;
  if (earlier && done->parts_sent < done->parts) {
    out.detail = "resumed the upload " + (earlier->job_id == job_id_ ? "begun earlier" : "of job " + earlier->job_id) +
                 ": " + std::to_string(done->parts - done->parts_sent) + " of " + std::to_string(done->parts) +
                 " parts were on the server already";
  }
  if (earlier && earlier->job_id != job_id_) {
    // The job that began it reads, from now on, what became of it.
    UploadRecord before = *earlier;
    before.state = UploadState::kInterrupted;
    before.upload_id = "";
    before.detail = "resumed and finished by job " + job_id_;
    Remember(before);
  }
  if (done->size != out.size) {
    out.state = UploadState::kFailed;
    out.detail = out.name + ": the file changed while it was sent";
  }
  return out;
}

std::optional<UploadRecord> ArtifactUploads::Resumable(const UploadRecord& r) {
  if (!records_) return std::nullopt;
  Result<std::optional<UploadRecord>> latest = records_->Latest(r.endpoint, r.name);
  if (!latest.ok()) {
    Warn(latest.status().message());
    return std::nullopt;
  }
  if (!latest->has_value()) return std::nullopt;
  const UploadRecord& l = **latest;
  if (l.upload_id.empty() || (l.state != UploadState::kSending && l.state != UploadState::kInterrupted)) {
    return std::nullopt;
  }
  if (l.job_id != job_id_) {
    Result<JobRecord> owner = jobs_->GetJob(l.job_id);
    if (owner.ok() && !IsFinal(owner->status) &&
        ControllerAlive(owner->controller_pid, owner->controller_identity)) {
      return std::nullopt;  // its controller is still sending it
    }
  }
  return l;
}

void ArtifactUploads::Remember(const UploadRecord& r) {
  if (!records_) return;
  UploadRecord stamped = r;
  if (stamped.at == TimePoint{}) stamped.at = WallNow();
  if (Status s = records_->Record(stamped); !s.ok()) Warn(s.message());
}

}  // namespace barge::runner::internal
