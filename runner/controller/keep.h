// Keep (`on_failure: {keep: D}`): a job that failed is left as it is for a
// look before its teardown: its containers (stopped ranks to inspect with
// `barge logs`, live ones still running for `barge exec` and `barge
// attach`), its holds and its leases, for D or until `barge down` (or
// Ctrl-C); then the Controller tears it down as usual and exits with the
// code it would have. The hosts' watchdogs are told the keep's end
// (Leases::KeepUntil), so nothing is kept past it if the controller dies.
//
// A failure is the job's end by anything but success, an interrupt, its
// `timeout:` or its Slurm allocation's end: the head's non-zero exit, a
// fault that is not restarted (a failed worker, a lost host, a hang), a
// launch that failed once a container was made.
//
// Threading: the loop's thread only.
#pragma once

#include "runner/controller/attempt.h"
#include "runner/controller/job_context.h"
#include "runner/controller/leases.h"

namespace barge::runner::internal {

class Keep : private JobPart {
 public:
  Keep(JobContext* ctx, Attempt* attempt, Leases* leases) : JobPart(ctx), attempt_(*attempt), leases_(*leases) {}

  // The job failed (said already): when its file asks for a keep, no
  // interrupt came and a container of the attempt may exist, keeps it.
  // Says so with the verbs to use, records it (status completing, a `kept`
  // event), stops the attempt's monitors (no fault is looked for in a
  // failed job; the live ranks' logs and exits are still followed), tells
  // the watchdogs, and runs the loop (the leases' renewals with it) until
  // the keep's end or an interrupt (`barge down` sends SIGTERM). Returns
  // whether it kept the job.
  bool KeepFailedJob();

 private:
  Attempt& attempt_;
  Leases& leases_;
};

}  // namespace barge::runner::internal
