// UploadTally: a job's files sent to object storage, counted by outcome,
// for the one line said at the job's end (runner/controller/artifacts.h).
#pragma once

#include <string>

#include "runner/store/upload_store.h"

namespace barge::runner::internal {

class UploadTally {
 public:
  void Add(const UploadRecord& r);
  bool empty() const { return sent_ + already_there_ + failed_ + interrupted_ == 0; }
  // "sent to s3://: 2 file(s), 1 already there, 0 failed (last: s3://B/K)":
  // the last object sent or found there; where a file failed, the last
  // failure instead, named and with its reason ("... 1 failed (last
  // failure: s3://B/K at URL: HTTP 403 ...)"). Files cut short at the end
  // are counted when there are any (", 1 interrupted").
  std::string Line() const;

 private:
  int sent_ = 0, already_there_ = 0, failed_ = 0, interrupted_ = 0;
  std::string last_name_;     // the last object sent or already there
  std::string last_failure_;  // the last failure: its object and why
};

}  // namespace barge::runner::internal
