// Diagnostics (diagnostics.h): every host of a failed attempt asked at
// once, within a bound, and the answers written as a bundle.
#include "runner/controller/diagnostics.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "runner/console/time_format.h"
#include "runner/controller/job_state.h"
#include "runner/remote/diagnostics_commands.h"
#include "runner/remote/docker_commands.h"
#include "runner/store/diagnostics_bundles.h"
#include "runner/store/job_store.h"
#include "runner/store/state_dir.h"

namespace barge::runner::internal {
namespace {

// What Run keeps of one answer: more than any script prints (its sections
// are capped on the host), so that no answer fails for its size.
constexpr size_t kAnswerOutput = size_t{1} << 20;

// One question's answer.
struct Answer {
  bool asked = false;
  std::string not_asked;  // why not, when not asked
  bool done = false;
  Outcome outcome;
  milliseconds took{0};
};

std::string SecondsText(milliseconds d) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f s", static_cast<double>(d.count()) / 1000.0);
  return buf;
}

// How it went, in one line.
std::string StateOf(const Answer& a) {
  if (!a.asked) return a.not_asked;
  if (!a.done) return "no answer within " + std::to_string(Diagnostics::kBound.count()) + " s";
  if (!a.outcome.exit.known()) return "failed: " + a.outcome.Reason();
  if (a.outcome.timed_out()) return "cut off by its own bound after " + SecondsText(a.took);
  return "answered in " + SecondsText(a.took) +
         (a.outcome.exit.code != 0 ? " (exit " + std::to_string(a.outcome.exit.code) + ")" : "");
}

// The answer's text, or why there is none.
std::string TextOf(const Answer& a) {
  std::string text;
  if (a.done) text = a.outcome.out + (a.outcome.err.empty() ? "" : "--- its stderr\n" + a.outcome.err);
  if (!text.empty() && text.back() != '\n') text += '\n';
  if (!a.done || a.outcome.timed_out() || !a.outcome.exit.known()) text += "(" + StateOf(a) + ")\n";
  return text;
}

std::string FirstLine(const std::string& s) { return s.substr(0, s.find('\n')); }

// Writes `text` to `path`, mode 0600, not through a symlink.
Status WriteFile(const std::string& path, const std::string& text) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return Status::Error("cannot write " + path + ": " + std::strerror(errno));
  size_t at = 0;
  while (at < text.size()) {
    const ssize_t n = write(fd, text.data() + at, text.size() - at);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const std::string why = std::strerror(errno);
      close(fd);
      return Status::Error("cannot write " + path + ": " + why);
    }
    at += static_cast<size_t>(n);
  }
  if (close(fd) != 0) return Status::Error("cannot write " + path + ": " + std::strerror(errno));
  return Status::Ok();
}

// The bundle's files as they are written, within the bundle's cap.
class BundleWriter {
 public:
  BundleWriter(std::string dir, const Redactor* redact) : dir_(std::move(dir)), redact_(*redact) {}
  // Writes `name` (masked, capped at kFileCap and at what is left of the
  // bundle) and lists it with `note`.
  void Put(const std::string& name, const std::string& text, const std::string& note) {
    const size_t room = Diagnostics::kBundleCap - Diagnostics::kIndexCap - written_;
    if (room < 1024) {
      listing_ += "  " + name + "  left out (the bundle's cap of " + FormatBytes(Diagnostics::kBundleCap) +
                  " reached)  " + note + "\n";
      return;
    }
    const std::string body = diagnostics::CapText(redact_(text), std::min(Diagnostics::kFileCap, room));
    if (Status s = WriteFile(dir_ + "/" + name, body); !s.ok()) {
      errors_ += s.message() + "\n";
      return;
    }
    written_ += body.size();
    char size[32];
    std::snprintf(size, sizeof size, "%10zu", body.size());
    listing_ += "  " + name + "  " + size + " bytes  " + note + "\n";
  }
  const std::string& listing() const { return listing_; }
  const std::string& errors() const { return errors_; }
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
  const Redactor& redact_;
  size_t written_ = 0;
  std::string listing_;
  std::string errors_;
};

// A node's file: how barge saw it end, its last lines, its host's answer.
std::string NodeText(const NodeState& n, const LogSink* sink, const Answer& a) {
  static constexpr const char* kPhases[] = {"pending", "starting", "running", "exited", "lost (its host)"};
  std::string t = "rank " + std::to_string(n.plan->rank) + " (" + n.plan->role + ") on " + n.host->name +
                  ", container " + n.plan->container.name + "\n";
  t += "as barge saw it: " + std::string(kPhases[static_cast<int>(n.phase)]) +
       (n.end_reason.empty() ? "" : ", " + n.end_reason) + "\n";
  if (sink) {
    t += "its log: " + sink->path(n.plan->rank) + "\n";
    const std::vector<std::string> tail = sink->Tail(n.plan->rank, Diagnostics::kTailLines);
    t += std::string(diagnostics::kSectionPrefix) + "its last " + std::to_string(tail.size()) +
         " line(s) of output in this attempt\n";
    for (const std::string& line : tail) t += line + "\n";
  }
  t += std::string(diagnostics::kSectionPrefix) + "its host's answer: " + StateOf(a) + "\n";
  return t + TextOf(a);
}

}  // namespace

Diagnostics::Diagnostics(JobContext* ctx, Attempt* attempt)
    : JobPart(ctx),
      began_epoch_s_(std::chrono::duration_cast<seconds>(WallNow().time_since_epoch()).count()),
      attempt_(*attempt) {}

std::string Diagnostics::Collect(const std::string& why) {
  // The nodes that may have a container, and their hosts (once each, in
  // rank order).
  std::vector<const NodeState*> nodes;
  std::vector<HostState*> hosts;
  if (ctx_.interrupts > 0) return "";
  for (const auto& n : attempt_.nodes) {
    if (!n->run_attempted) continue;
    nodes.push_back(n.get());
    if (std::find(hosts.begin(), hosts.end(), n->host) == hosts.end()) hosts.push_back(n->host);
  }
  if (nodes.empty()) return "";
  const std::string dir = DiagnosticsBundleDir(RunDir(ctx_.options.state_dir, ctx_.job_id), attempt_.restart_count);
  if (Status s = MakeDirs(dir); !s.ok()) {
    Say("warning: diagnostics not kept: " + s.message());
    return "";
  }
  const TimePoint at = WallNow();

  // Every question at once; whatever has not answered by the bound is
  // abandoned with the group.
  std::vector<Answer> node_answers(nodes.size());
  std::vector<Answer> host_answers(hosts.size());
  const Clock::time_point began = Now();
  CommandGroup group(&ctx_.loop, &ctx_.redact, kAnswerOutput);
  // `script` is made only for a host that is asked.
  auto ask = [&](HostState& h, const std::function<std::string()>& script, Answer* a) {
    if (h.lost || !h.exec || !h.docker) {
      a->not_asked = "not asked: the host is lost";
      return;
    }
    a->asked = true;
    group.Run(*h.exec, BoundedLine(script(), kBound + kRemoteSlack), [this, a, began](const Outcome& o) {
      a->done = true;
      a->outcome = o;
      a->took = std::chrono::duration_cast<milliseconds>(Now() - began);
    });
  };
  for (size_t i = 0; i < nodes.size(); ++i) {
    HostState& h = *nodes[i]->host;
    const std::string& name = nodes[i]->plan->container.name;
    ask(h, [&] { return diagnostics::ContainerDiagnosticsScript(*h.docker, name, kStep); }, &node_answers[i]);
  }
  for (size_t i = 0; i < hosts.size(); ++i) {
    HostState& h = *hosts[i];
    const bool gpus = std::any_of(nodes.begin(), nodes.end(), [&h](const NodeState* n) {
      return n->host == &h && n->plan->container.options.gpus.has_value();
    });
    const int64_t since = began_epoch_s_ - kClockSlack.count();
    ask(h, [&] { return diagnostics::HostDiagnosticsScript(*h.docker, h.job_dir, since, gpus, kStep); },
        &host_answers[i]);
  }
  RunUntil([&] { return group.idle() || ctx_.interrupts > 0; }, began + kBound);
  group.Cancel();
  const milliseconds took = std::chrono::duration_cast<milliseconds>(Now() - began);

  BundleWriter files(dir, &ctx_.redact);
  // Processes stopped, in uninterruptible sleep or zombies: where to look
  // first (a frozen rank of a hang shows as stopped).
  std::string stuck;
  std::string stuck_ranks;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const std::vector<std::string> found = diagnostics::StuckProcesses(TextOf(node_answers[i]));
    if (found.empty()) continue;
    const std::string rank = "rank " + std::to_string(nodes[i]->plan->rank) + " (" + nodes[i]->host->name + ")";
    for (const std::string& p : found) stuck += "  " + rank + ": " + p + "\n";
    stuck_ranks += (stuck_ranks.empty() ? "" : ", ") + rank;
  }
  for (size_t i = 0; i < nodes.size(); ++i) {
    const NodeState& n = *nodes[i];
    files.Put("rank-" + std::to_string(n.plan->rank) + "-" + diagnostics::FileNamePart(n.host->name) + ".txt",
              NodeText(n, attempt_.sink.get(), node_answers[i]),
              "rank " + std::to_string(n.plan->rank) + " on " + n.host->name + ": " + StateOf(node_answers[i]));
  }
  for (size_t i = 0; i < hosts.size(); ++i) {
    int xids = 0;
    const std::string text = diagnostics::MarkXidLines(TextOf(host_answers[i]), &xids);
    files.Put("host-" + diagnostics::FileNamePart(hosts[i]->name) + ".txt",
              "host " + hosts[i]->name + ": " + StateOf(host_answers[i]) + "\n" + text,
              "host " + hosts[i]->name + ": " + StateOf(host_answers[i]) +
                  (xids ? ", " + std::to_string(xids) + " Xid line(s) marked" : ""));
  }
  std::string index = "diagnostics of job " + ctx_.job_id + ", attempt " + std::to_string(attempt_.restart_count) +
                      " (0: the first; N: after N restarts)\n";
  index += "why: " + why + "\n";
  index += "at: " + IsoUtc(at) + "\n";
  index += "collected in " + SecondsText(took) + " (bound " + std::to_string(kBound.count()) + " s" +
           (ctx_.interrupts > 0 ? "; cut short by an interrupt" : "") + "); caps: " + FormatBytes(kFileCap) +
           " a file, " + FormatBytes(kBundleCap) + " the bundle\n";
  if (!stuck.empty()) index += "look here first: processes stopped (T), in uninterruptible sleep (D) or zombies (Z):\n" + stuck;
  index += "files:\n" + files.listing();
  if (!files.errors().empty()) index += "not written:\n" + files.errors();
  if (Status s = WriteFile(dir + "/index.txt", diagnostics::CapText(ctx_.redact(index), kIndexCap)); !s.ok()) {
    Say("warning: diagnostics: " + s.message());
  }
  if (!files.errors().empty()) Say("warning: diagnostics: " + FirstLine(files.errors()));
  Say("diagnostics: " + dir + (stuck_ranks.empty() ? "" : " (a process stopped or stuck: " + stuck_ranks + ")"));
  Event(event::kDiagnostics, std::nullopt, dir + ": " + FirstLine(why));
  return dir;
}

}  // namespace barge::runner::internal
