// Artifacts: copies of what the job file's artifacts: name out of the
// nodes' containers into runs/<id>/artifacts/<rank>/, every `every` while
// the job runs and once more at teardown; a copy whose artifact has an
// s3:// `to` is then sent on from there by ArtifactUploads (its own worker
// thread), and at teardown the kept logs to `storage.logs`.
#pragma once

#include <functional>
#include <memory>
#include <set>
#include <utility>
#include <vector>

#include "runner/controller/artifact_uploads.h"
#include "runner/controller/attempt.h"
#include "runner/controller/upload_tally.h"
#include "runner/controller/job_context.h"

namespace barge::runner::internal {

class Artifacts : private JobPart {
 public:
  Artifacts(JobContext* ctx, Attempt* attempt, const cluster::Plan* plan)
      : JobPart(ctx), attempt_(*attempt), plan_(*plan) {}

  // The periodic copies of the attempt (its commands and monitors).
  void ScheduleArtifacts();
  // Copies every artifact of every node once more and waits (bounded: 600 s
  // for the copies); the copies bound for s3:// are queued.
  void FinalArtifacts();
  // At the job's end, once its containers are gone and its hosts released
  // (Teardown): the kept logs queued, then waits (bounded: 600 s; another
  // interrupt ends it) for what goes to s3://; what is left is cancelled,
  // its multipart uploads recorded.
  void SendToStorage();
  // A new attempt: no copy of the previous one counts as in flight.
  void NewAttempt() { copying_.clear(); }

 private:
  Attempt& attempt_;
  const cluster::Plan& plan_;  // the current plan (the Controller makes it)
  // Copies `a` out of node `n`'s container (docker cp NAME:PATH -, a tar
  // stream on the host's session) into runs/<id>/artifacts/<rank>/, unpacked
  // by a local tar, with both commands in `group`. `done` runs when it has
  // finished (not if the group is cancelled first).
  void CopyArtifact(CommandGroup& group, NodeState& n, const ArtifactSpec& a,
                    std::function<void()> done);
  std::vector<NodeState*> ArtifactNodes(const ArtifactSpec& a);

  // Sends node `n`'s fresh copy of `a` (artifact `index`) to its `to`.
  void SendOn(const NodeState& n, const ArtifactSpec& a, size_t index);
  // Says what ArtifactUploads finished since the last call (errors; a line
  // per file at debug level).
  void ReportSent();
  void SendLogs();
  // Made at the first s3:// copy; it records each file's outcome in the
  // job's store (none for a job kept in no store).
  ArtifactUploads& Uploads();

  std::set<std::pair<int, size_t>> copying_;  // (rank, artifact index) in flight
  std::unique_ptr<ArtifactUploads> uploads_;
  UploadTally tally_;  // files, for the last line
};

}  // namespace barge::runner::internal
