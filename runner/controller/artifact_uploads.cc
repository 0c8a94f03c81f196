// ArtifactUploads (artifact_uploads.h): the worker and its files.
#include "runner/controller/artifact_uploads.h"

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

// The record file's lines, "UPLOAD-ID<TAB>s3://BUCKET/KEY": (name, id).
std::vector<std::pair<std::string, std::string>> ReadRecords(const std::string& path) {
  std::vector<std::pair<std::string, std::string>> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    const size_t tab = line.find('\t');
    if (tab != std::string::npos && tab > 0) out.emplace_back(line.substr(tab + 1), line.substr(0, tab));
  }
  return out;
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

ArtifactUploads::ArtifactUploads(StorageSpec storage, std::string record_file, S3Limits limits)
    : storage_(std::move(storage)), record_file_(std::move(record_file)), limits_(limits) {
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

void ArtifactUploads::Work() {
  for (;;) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (stopping_ || cancel_) return;
    File f = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    ArtifactSent sent = Send(f);
    lock.lock();
    sent_.push_back(std::move(sent));
    --busy_[f.tag];
    lock.unlock();
    cv_.notify_all();
  }
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

ArtifactSent ArtifactUploads::Send(const File& f) {
  S3Client& client = Client(f.bucket);
  ArtifactSent out{.local = f.local, .name = client.Name(f.key), .url = client.Url(f.key)};
  Result<std::optional<S3ObjectInfo>> held = client.Head(f.key);
  if (!held.ok()) {
    out.error = held.status().message();
    return out;
  }
  std::error_code ec;
  const uint64_t size = fs::file_size(f.local, ec);
  if (ec) {
    out.error = "cannot read " + f.local + ": " + ec.message();
    return out;
  }
  // Read twice only when the destination may hold the same bytes.
  if (held->has_value() && (*held)->size == size) {
    const LocalDigest local = Digest(f.local, storage_.part_size);
    if (local.ok && local.etag == (*held)->etag) {
      out.size = local.size;
      out.md5 = local.md5;
      out.skipped = true;
      return out;
    }
  }
  std::ifstream in(f.local, std::ios::binary);
  S3Upload upload(&client, f.key, {.part_size = storage_.part_size, .parallel = storage_.parallel},
                  Recorded(out.name), [this, &out](const std::string& id) { Record(out.name, id); });
  std::vector<char> buf(1 << 20);
  Status written;
  while (written.ok() && in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    if (in.gcount() > 0) written = upload.Write(std::string_view(buf.data(), static_cast<size_t>(in.gcount())));
  }
  Result<S3Uploaded> done = written.ok() ? upload.Finish() : Result<S3Uploaded>(written);
  if (!done.ok()) {
    out.error = done.status().message();
    // Cancelled: the upload stays recorded for a resume; else it is over.
    if (!cancel_) Record(out.name, "");
    return out;
  }
  if (!upload.upload_id().empty()) Record(out.name, "");
  out.size = done->size;
  out.md5 = done->md5;
  if (done->size != size) out.error = out.name + ": the file changed while it was sent";
  return out;
}

std::optional<std::string> ArtifactUploads::Recorded(const std::string& name) {
  if (record_file_.empty()) return std::nullopt;
  for (const auto& [n, id] : ReadRecords(record_file_)) {
    if (n == name) return id;
  }
  return std::nullopt;
}

void ArtifactUploads::Record(const std::string& name, const std::string& upload_id) {
  if (record_file_.empty()) return;
  std::vector<std::pair<std::string, std::string>> lines;
  for (auto& [n, id] : ReadRecords(record_file_)) {
    if (n != name) lines.emplace_back(std::move(n), std::move(id));
  }
  if (!upload_id.empty()) lines.emplace_back(name, upload_id);
  const std::string tmp = record_file_ + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    for (const auto& [n, id] : lines) out << id << '\t' << n << '\n';
  }
  std::error_code ec;
  fs::rename(tmp, record_file_, ec);
}

}  // namespace barge::runner::internal
