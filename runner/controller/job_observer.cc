// JobObserver's fan-out, the status line and the JSON event stream.
#include "runner/controller/job_observer.h"

#include <nlohmann/json.hpp>

#include "runner/console/time_format.h"

namespace barge::runner {

const char* ToString(Phase phase) { return NameOf(kPhaseNames, phase).data(); }

void ObserverList::StepBegan(Phase phase, std::string_view label, int count) {
  for (JobObserver* o : observers_) o->StepBegan(phase, label, count);
}
void ObserverList::StepEnded(Phase phase) {
  for (JobObserver* o : observers_) o->StepEnded(phase);
}
void ObserverList::HostBegan(const HostPhase& p, TimePoint at) {
  for (JobObserver* o : observers_) o->HostBegan(p, at);
}
void ObserverList::HostEnded(const HostPhase& p, TimePoint at, bool ok, std::string_view detail) {
  for (JobObserver* o : observers_) o->HostEnded(p, at, ok, detail);
}
void ObserverList::JobEvent(std::string_view kind, const std::optional<std::string>& host,
                            std::string_view detail, TimePoint at) {
  for (JobObserver* o : observers_) o->JobEvent(kind, host, detail, at);
}
void ObserverList::Message(std::string_view line) {
  for (JobObserver* o : observers_) o->Message(line);
}
void ObserverList::Flush() {
  for (JobObserver* o : observers_) o->Flush();
}

void ProgressObserver::StepBegan(Phase phase, std::string_view label, int count) {
  if (label.empty()) {  // a step with no status line
    step_.reset();
    return;
  }
  step_ = phase;
  progress_->Begin(label, count);
}

void ProgressObserver::StepEnded(Phase phase) {
  if (step_ != phase) return;
  step_.reset();
  progress_->End();
}

void ProgressObserver::HostEnded(const HostPhase& p, TimePoint, bool ok, std::string_view detail) {
  if (step_ != p.phase) return;
  progress_->Done(p.label(), ok, detail);
}

void ProgressObserver::Message(std::string_view line) { progress_->Print(line); }

namespace {

void WriteLine(std::FILE* out, const nlohmann::json& j) {
  const std::string line = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  std::fwrite(line.data(), 1, line.size(), out);
  std::fflush(out);
}

nlohmann::json PhaseJson(const HostPhase& p, TimePoint at, const char* state) {
  nlohmann::json j = {{"at", IsoUtc(at)},          {"type", "phase"}, {"phase", ToString(p.phase)},
                      {"state", state},            {"host", p.host},  {"host_id", p.host_id}};
  if (p.rank) j["rank"] = *p.rank;
  return j;
}

}  // namespace

void EventStreamObserver::HostBegan(const HostPhase& p, TimePoint at) {
  WriteLine(out_, PhaseJson(p, at, "began"));
}

void EventStreamObserver::HostEnded(const HostPhase& p, TimePoint at, bool ok,
                                    std::string_view detail) {
  nlohmann::json j = PhaseJson(p, at, "ended");
  j["ok"] = ok;
  j["detail"] = std::string(detail);
  WriteLine(out_, j);
}

void EventStreamObserver::JobEvent(std::string_view kind, const std::optional<std::string>& host,
                                   std::string_view detail, TimePoint at) {
  nlohmann::json j = {{"at", IsoUtc(at)}, {"type", "event"}, {"kind", std::string(kind)},
                      {"detail", std::string(detail)}};
  if (host) j["host"] = *host;
  WriteLine(out_, j);
}

}  // namespace barge::runner
