// UploadTally (upload_tally.h).
#include "runner/controller/upload_tally.h"

namespace barge::runner::internal {

void UploadTally::Add(const UploadRecord& r) {
  switch (r.state) {
    case UploadState::kSent:
    case UploadState::kAlreadyThere:
      ++(r.state == UploadState::kSent ? sent_ : already_there_);
      last_name_ = r.name;
      break;
    case UploadState::kInterrupted:
      ++interrupted_;
      break;
    case UploadState::kFailed:
    case UploadState::kSending:  // not an outcome: counted as a failure
      ++failed_;
      // The S3 client's errors begin with the object; others (a file that
      // cannot be read) are given it.
      last_failure_ = r.detail.empty() ? r.name + ": no reason recorded"
                      : r.detail.starts_with(r.name) ? r.detail
                                                     : r.name + ": " + r.detail;
      break;
  }
}

std::string UploadTally::Line() const {
  std::string line = "sent to s3://: " + std::to_string(sent_) + " file(s), " + std::to_string(already_there_) +
                     " already there, " + std::to_string(failed_) + " failed";
  if (interrupted_ > 0) line += ", " + std::to_string(interrupted_) + " interrupted";
  if (!last_failure_.empty()) return line + " (last failure: " + last_failure_ + ")";
  if (!last_name_.empty()) return line + " (last: " + last_name_ + ")";
  return line;
}

}  // namespace barge::runner::internal
