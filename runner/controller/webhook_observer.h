// WebhookObserver: the job's events sent to the webhooks its `notify:`
// names (runner/controller/webhooks.h, docs/guide/notifications.md). The
// store's event kinds are the notice kinds, but for `started` (the job's
// first `running`) and `restarted` (`restarting`). Sending happens on the
// webhooks' worker: an event costs the loop a queue push.
//
// Threading: the loop's thread only (as every observer).
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "runner/controller/job_observer.h"
#include "runner/jobfile/job_spec.h"
#include "runner/controller/webhooks.h"

namespace barge::runner::internal {

// How long the end of a job waits for its last notices (after its
// teardown, before barge exits).
inline constexpr std::chrono::seconds kNotifyDrain{10};

class WebhookObserver : public JobObserver {
 public:
  WebhookObserver(const std::vector<NotifySpec>& notify, std::string job_id, std::string job_name,
                  WebhookLimits limits = {});

  void JobEvent(std::string_view kind, const std::optional<std::string>& host, std::string_view detail,
                TimePoint at) override;
  // Waits at most `limit` for what is queued, then gives the rest up.
  void Finish(std::chrono::milliseconds limit) { hooks_.Drain(limit); }
  // Deliveries given up since the last call (webhooks.h's lines).
  std::vector<std::string> TakeFailures() { return hooks_.TakeFailures(); }

 private:
  static std::vector<WebhookTarget> Targets(const std::vector<NotifySpec>& notify);

  const std::string job_id_;
  const std::string job_name_;
  Webhooks hooks_;
  bool started_ = false;
};

}  // namespace barge::runner::internal
