// JobObserver: the one place every phase of a job reports to, like ninja's
// Status interface with StatusPrinter behind it. Per host (or node): which
// phase began and how it ended; per step: the count the status line shows;
// per job: the events the store keeps. The status line (ProgressObserver),
// the store's per-host phase spans (StoreObserver, store_observer.h) and
// the `--events json` stream are implementations; ObserverList fans out.
#pragma once

#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runner/console/progress.h"
#include "runner/store/job_store.h"

namespace barge::runner {

// Phase and kPhaseNames: runner/store/job_store.h (the store keeps the names).

// The phase's name in kPhaseNames.
const char* ToString(Phase phase);

// One host's (or one node's) part in a phase.
struct HostPhase {
  Phase phase = Phase::kConnect;
  int host_id = 0;           // stable for the job (see HostRecord)
  std::string host;          // the user's name for the host
  std::optional<int> rank;   // node phases: start, ready, running, stop
  // Node phases: how many GPUs the node was given (0: none; nullopt: not
  // known, as PhaseRecord::gpus). Host phases: nullopt.
  std::optional<int> gpus;
  // What the status line calls it: the host, or "0 on h1" for a node.
  std::string label() const {
    return rank ? std::to_string(*rank) + " on " + host : host;
  }
};

// Every method runs on the event loop's thread; none may block or throw.
class JobObserver {
 public:
  virtual ~JobObserver() = default;
  // A step over `count` hosts or nodes begins ("preflight", "starting
  // workers"): what the status line counts. Steps do not nest.
  virtual void StepBegan(Phase /*phase*/, std::string_view /*label*/, int /*count*/) {}
  virtual void StepEnded(Phase /*phase*/) {}
  virtual void HostBegan(const HostPhase& /*p*/, TimePoint /*at*/) {}
  // `ok` false: `detail` says what went wrong. `detail` may say something
  // worth a glance when ok (e.g. "4 GPUs").
  virtual void HostEnded(const HostPhase& /*p*/, TimePoint /*at*/, bool /*ok*/,
                         std::string_view /*detail*/) {}
  // A job event as the store keeps it (kind: event::k..., or a status name).
  virtual void JobEvent(std::string_view /*kind*/, const std::optional<std::string>& /*host*/,
                        std::string_view /*detail*/, TimePoint /*at*/) {}
  // One of barge's own messages for the user ("barge: ..."), already redacted.
  virtual void Message(std::string_view /*line*/) {}
  // Flush what is buffered (the job is ending, or a reader needs it now).
  virtual void Flush() {}
};

// Fans every call out to `observers`, in order. Owns none of them.
class ObserverList : public JobObserver {
 public:
  void Add(JobObserver* o) { observers_.push_back(o); }
  void StepBegan(Phase phase, std::string_view label, int count) override;
  void StepEnded(Phase phase) override;
  void HostBegan(const HostPhase& p, TimePoint at) override;
  void HostEnded(const HostPhase& p, TimePoint at, bool ok, std::string_view detail) override;
  void JobEvent(std::string_view kind, const std::optional<std::string>& host,
                std::string_view detail, TimePoint at) override;
  void Message(std::string_view line) override;
  void Flush() override;

 private:
  std::vector<JobObserver*> observers_;
};

// The status line: a step is a Progress phase, a host's end is one Done,
// a message is printed around the line. A step with an empty label has no
// line (nothing of it is printed).
class ProgressObserver : public JobObserver {
 public:
  explicit ProgressObserver(Progress* progress) : progress_(progress) {}
  void StepBegan(Phase phase, std::string_view label, int count) override;
  void StepEnded(Phase phase) override;
  void HostEnded(const HostPhase& p, TimePoint at, bool ok, std::string_view detail) override;
  void Message(std::string_view line) override;

 private:
  Progress* progress_;
  std::optional<Phase> step_;
};

// `barge run --events json`: one JSON object per line for every host phase
// edge and job event, in the order they happened:
//   {"at":"2026-11-24T10:00:00.123Z","type":"phase","phase":"preflight",
//    "state":"began"|"ended","host":"h1","host_id":1,"rank":0,"ok":true,"detail":""}
//   {"at":"...","type":"event","kind":"head_ready","host":"h1","detail":"..."}
// Writes to `out` (not owned), flushing after every line.
class EventStreamObserver : public JobObserver {
 public:
  explicit EventStreamObserver(std::FILE* out) : out_(out) {}
  void HostBegan(const HostPhase& p, TimePoint at) override;
  void HostEnded(const HostPhase& p, TimePoint at, bool ok, std::string_view detail) override;
  void JobEvent(std::string_view kind, const std::optional<std::string>& host,
                std::string_view detail, TimePoint at) override;

 private:
  std::FILE* out_;
};

}  // namespace barge::runner
