// WebhookObserver (webhook_observer.h).
#include "runner/controller/webhook_observer.h"

#include "runner/console/time_format.h"

namespace barge::runner::internal {

WebhookObserver::WebhookObserver(const std::vector<NotifySpec>& notify, std::string job_id, std::string job_name,
                                 WebhookLimits limits)
    : job_id_(std::move(job_id)), job_name_(std::move(job_name)), hooks_(Targets(notify), limits) {}

std::vector<WebhookTarget> WebhookObserver::Targets(const std::vector<NotifySpec>& notify) {
  std::vector<WebhookTarget> targets;
  for (const NotifySpec& n : notify) {
    targets.push_back({n.url, std::set<std::string>(n.events.begin(), n.events.end()), n.secret});
  }
  return targets;
}

void WebhookObserver::JobEvent(std::string_view kind, const std::optional<std::string>& host,
                               std::string_view detail, TimePoint at) {
  std::string name(kind);
  if (kind == event::kRunning) {
    if (started_) return;
    started_ = true;
    name = "started";
  } else if (kind == event::kRestarting) {
    name = "restarted";
  }
  Notice notice{name, job_id_, job_name_, host.value_or(""), std::string(detail), IsoUtc(at), ""};
  notice.text = "barge: job " + job_name_ + " (" + job_id_ + ") " + name + (host && !host->empty() ? " on " + *host : "") +
                (detail.empty() ? "" : ": " + std::string(detail));
  hooks_.Send(notice);
}

}  // namespace barge::runner::internal
