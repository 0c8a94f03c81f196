// NodeStreams (node_streams.h): every node's log stream and exit report
// through the Docker CLI.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include "container/create_body.h"
#include "container/docker_args.h"
#include "container/inspect.h"
#include "container/log_line.h"
#include "container/proc_net.h"
#include "container/timestamp.h"
#include "runner/console/exit_codes.h"
#include "runner/controller/job_state.h"
#include "runner/controller/node_streams.h"

namespace barge::runner::internal {

namespace {

// How a container ended, from `docker inspect`: "OOMKilled (exit code
// 137)", "killed by SIGKILL (exit code 137)", "exit code 3".
std::string EndReason(const container::ContainerState& st) {
  std::string code = "exit code " + std::to_string(st.exit_code);
  std::string reason;
  if (st.oom_killed) {
    reason = "OOMKilled (" + code + ")";
  } else if (st.exit_code > 128 && st.exit_code < 128 + 65) {
    const int sig = st.exit_code - 128;
    const char* name = sig == 9 ? "SIGKILL" : sig == 15 ? "SIGTERM" : sig == 6 ? "SIGABRT"
                     : sig == 11 ? "SIGSEGV" : sig == 2 ? "SIGINT" : nullptr;
    reason = std::string("killed by ") + (name ? name : "signal " + std::to_string(sig)) + " (" + code + ")";
  } else {
    reason = code;
  }
  if (!st.error.empty()) reason += ": " + st.error;
  return reason;
}

// std::regex recurses per character matched: a long line with a pattern
// like ".*ready" would overflow the stack. Readiness lines are short; only
// their first kReadyScan bytes are searched.
bool ReadyLineMatches(const std::regex& re, std::string_view text) {
  constexpr size_t kReadyScan = 4096;
  std::string_view head = text.substr(0, kReadyScan);
  return std::regex_search(head.begin(), head.end(), re);
}

}  // namespace


namespace {

// "@@barge-exit-" and 16 random hex digits.
std::string NewExitMarker() {
  static std::mt19937_64 rng(std::random_device{}());
  char buf[40];
  std::snprintf(buf, sizeof buf, "@@barge-exit-%016llx", static_cast<unsigned long long>(rng()));
  return buf;
}

}  // namespace

namespace {

// The next receipt stamp of a node's live log: the controller's clock, and
// 1 ns after the previous stamp when that is not later (lines arrive
// faster than the clock ticks, or the clock stepped back): strictly
// increasing, so a node's stamps are its lines' sequence and every reader
// that orders by stamp (NodeLog, `barge logs`' merge) keeps its order.
std::string NextReceiptStamp(NodeState::Live& live) {
  const int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  live.last_stamp_ns = std::max(now, live.last_stamp_ns + 1);
  return container::FormatTimestamp(live.last_stamp_ns);
}

}  // namespace

void NodeStreams::StreamLogs(NodeState& node, bool report_exit) {
  OpenLogLines(node, report_exit);
  if (node.host->engine.api) {
    FollowWithApi(node, report_exit);
    return;
  }
  StreamLogsWithCli(node, report_exit);
}

void NodeStreams::OpenLogLines(NodeState& node, bool report_exit) {
  const int rank = node.plan->rank;
  NodeState* self = &node;
  LogSink* sink = attempt_.sink.get();  // this attempt's (kept alive after it)
  node.exit_marker = report_exit ? NewExitMarker() : "";
  node.exit_report.reset();
  auto on_line = [this, rank, self, sink](Stream stream) {
    return [this, rank, self, sink, stream](std::string_view line, bool continuation) {
      if (stream == Stream::kStdout && !self->exit_marker.empty()) {
        if (self->exit_report) {
          *self->exit_report += line;
          if (!continuation) *self->exit_report += "\n";
          return;
        }
        // The marker follows the last log line, on a line of its own unless
        // the container's last output had no newline.
        if (size_t at = line.find(self->exit_marker); at != std::string_view::npos) {
          self->exit_report = std::string(line.substr(at + self->exit_marker.size())) + "\n";
          if (at == 0) return;
          line = line.substr(0, at);
        }
      }
      NodeState::Live& live = self->live;
      const size_t s = stream == Stream::kStdout ? 0 : 1;
      if (continuation) {
        if (live.on && live.skipping[s]) return;  // of a line a gap fill drops
        sink->Line(rank, stream, "", line);
        return;
      }
      if (live.on && live.attached) {
        // The attach stream: the container's own bytes, no stamp.
        ++live.lines[s];
        live.last_hash[s] = std::hash<std::string_view>{}(line);
        sink->Line(rank, stream, NextReceiptStamp(live), line);
        if (self->retired) return;
        if (progress_) progress_->Line(rank, line);
        if (self->ready_regex && !self->logged_ready && ReadyLineMatches(*self->ready_regex, line)) {
          self->logged_ready = true;
        }
        return;
      }
      Result<container::TimestampedLine> parsed = container::ParseTimestampedLine(line);
      if (parsed.ok() && self->skip_through_ns && parsed->ns <= *self->skip_through_ns) return;
      if (parsed.ok()) {
        NodeState::Seen& seen = self->seen[stream == Stream::kStdout ? 0 : 1];
        if (self->catching_up && seen.last_ns) {
          if (parsed->ns < *seen.last_ns) return;
          if (parsed->ns == *seen.last_ns && seen.at_last > 0) {
            --seen.at_last;
            return;
          }
        }
        if (!self->catching_up) {
          if (!seen.last_ns || parsed->ns > *seen.last_ns) {
            seen.last_ns = parsed->ns;
            seen.at_last = 0;
          }
          if (parsed->ns == *seen.last_ns) ++seen.at_last;
        }
      }
      std::string_view text = parsed.ok() ? parsed->text : line;
      if (live.on) {
        // A gap fill from the engine's log (node_streams_api.cc): its first
        // lines, as many per stream as were kept, are dropped; the rest
        // are stamped on receipt like the attach's.
        if (live.skip[s] > 0) {
          live.skipping[s] = true;
          if (--live.skip[s] == 0 && std::hash<std::string_view>{}(text) != live.last_hash[s]) {
            Say(self->host->name + ": the engine's log of node " + std::to_string(rank) +
                " no longer starts where the container's output did (its log driver rotated or "
                "dropped lines): lines written while the stream was broken may be missing or repeated");
          }
          return;
        }
        live.skipping[s] = false;
        ++live.lines[s];
        live.last_hash[s] = std::hash<std::string_view>{}(text);
        sink->Line(rank, stream, NextReceiptStamp(live), text);
      } else {
        sink->Line(rank, stream, parsed.ok() ? parsed->timestamp : "", text);
      }
      if (self->retired) return;
      if (progress_) progress_->Line(rank, text);
      if (self->ready_regex && !self->logged_ready && ReadyLineMatches(*self->ready_regex, text)) {
        self->logged_ready = true;
      }
    };
  };
  node.out_lines = std::make_unique<container::LineSplitter>(on_line(Stream::kStdout));
  node.err_lines = std::make_unique<container::LineSplitter>(on_line(Stream::kStderr));
  node.logs_open = true;
}

void NodeStreams::StreamLogsWithCli(NodeState& node, bool report_exit) {
  const int rank = node.plan->rank;
  ssh::CommandCallbacks cb;
  NodeState* n = &node;
  cb.on_stdout = [this, n](std::string_view d) {
    n->host->health.engine_heard = Now();
    n->out_lines->Feed(d);
  };
  cb.on_stderr = [this, n](std::string_view d) {
    n->host->health.engine_heard = Now();
    n->err_lines->Feed(d);
  };
  cb.on_exit = [this, n, report_exit](const ssh::ExitStatus& st) {
    n->out_lines->Flush();
    n->err_lines->Flush();
    if (st.known() && !n->caught_up && !n->retired && !n->host->lost) {
      // The stream ended because the container stopped: fetch what the
      // follow may have missed before anything (teardown) removes it.
      n->caught_up = true;
      CatchUp(*n, [this, n, report_exit, st] { LogsEnded(*n, report_exit, st); });
      return;
    }
    LogsEnded(*n, report_exit, st);
  };
  const std::optional<std::string> since =
      node.skip_through_ns ? std::optional<std::string>(container::FormatTimestamp(*node.skip_through_ns))
                           : std::nullopt;
  const std::string& name = node.plan->container.name;
  const std::string line = report_exit
                               ? node.host->docker->FollowUntilExit(name, since, node.exit_marker)
                           : since ? node.host->docker->LogsSince(name, *since)
                                   : node.host->docker->Logs(name);
  if (attempt_.commands.Stream(*node.host->exec, line, std::move(cb)) == nullptr) {
    // (Its on_exit still comes, from the loop, with the reason: NodeEnded
    // then marks the node lost.)
    Say(node.host->name + ": cannot stream logs of node " + std::to_string(rank));
  }
}

void NodeStreams::LogsEnded(NodeState& node, bool report_exit, const ssh::ExitStatus& st) {
  NodeState* n = &node;
  n->logs_open = false;
  if (!st.known() && !n->retired && !n->host->lost) {
    Say(n->host->name + ": log stream of node " + std::to_string(n->plan->rank) + " lost: " + st.error);
  }
  if (!report_exit) return;
  // The report: " CODE\n" then inspect's output (its error when CODE != 0).
  Outcome o;
  o.exit = st;
  o.redact = &ctx_.redact;
  if (st.known() && n->exit_report) {
    const std::string& r = *n->exit_report;
    const size_t eol = r.find('\n');
    int code = -1;
    if (std::sscanf(r.c_str(), " %d", &code) != 1) code = -1;
    o.exit.code = code;
    (code == 0 ? o.out : o.err) = r.substr(eol == std::string::npos ? r.size() : eol + 1);
  } else if (st.known()) {
    o.exit.code = -1;
    o.err = "its log stream ended without saying how it ended";
  }
  NodeEnded(*n, o);
}

void NodeStreams::CatchUp(NodeState& node, std::function<void()> then) {
  NodeState* n = &node;
  n->exit_marker.clear();  // the report is in; what comes now is log lines
  n->catching_up = true;
  // From the earlier of the streams' last stamps (a stream that gave no
  // line has nothing to skip); Docker's --since is inclusive.
  std::optional<int64_t> from;
  for (const NodeState::Seen& seen : n->seen) {
    if (seen.last_ns && (!from || *seen.last_ns < *from)) from = seen.last_ns;
  }
  if (!from) from = n->skip_through_ns;  // attach: what the kept file holds
  if (n->host->engine.api) {
    CatchUpWithApi(*n, from, std::move(then));
    return;
  }
  const std::optional<std::string> since =
      from ? std::optional<std::string>(container::FormatTimestamp(*from)) : std::nullopt;
  ssh::CommandCallbacks cb;
  cb.on_stdout = [n](std::string_view d) { n->out_lines->Feed(d); };
  cb.on_stderr = [n](std::string_view d) { n->err_lines->Feed(d); };
  cb.on_exit = [n, then = std::move(then)](const ssh::ExitStatus&) {
    n->out_lines->Flush();
    n->err_lines->Flush();
    n->catching_up = false;
    then();
  };
  attempt_.commands.Stream(*n->host->exec, n->host->docker->LogsRest(n->plan->container.name, since), std::move(cb));
}

void NodeStreams::NodeEnded(NodeState& node, const Outcome& o) {
  NodeState* n = &node;
  {
    if (n->retired) return;
    if (!o.exit.known() || n->host->lost) {
      // The host's session died under it: the host is lost (OnHostLost),
      // how the node ended is unknown.
      n->phase = NodePhase::kLost;
      Ended(n->PhaseOf(Phase::kRunning), false, "its host was lost");
      return;
    }
    Result<std::vector<container::ContainerState>> st = container::ParseContainerInspect(o.out);
    if (o.ok() && st.ok() && st->size() == 1) {
      NodeExited(*n, (*st)[0]);
    } else {
      NodeExited(*n, Status::Error(o.ok() ? st.status().message() : o.Reason()));
    }
  }
}

void NodeStreams::NodeExited(NodeState& node, const Result<container::ContainerState>& state) {
  NodeState* n = &node;
  {
    if (n->retired) return;
    n->phase = NodePhase::kExited;
    if (state.ok()) {
      n->exit_code = state->exit_code;
      n->end_reason = EndReason(*state);
    } else {
      n->exit_code.reset();
      n->end_reason = "unknown: " + state.status().message();
      Say(n->host->name + ": cannot learn how node " + std::to_string(n->plan->rank) +
          " ended: " + n->end_reason);
    }
    const bool failed = !n->exit_code || *n->exit_code != 0;
    Ended(n->PhaseOf(Phase::kRunning), !failed, n->end_reason);
    const std::string rank = std::to_string(n->plan->rank);
    RecordNode(*n, attempt_.sink.get());
    Event(event::kNodeExited, n->host->name,
          "rank " + rank + " (" + n->plan->role + ") ended: " + n->end_reason);
    if (n->plan->rank == 0) {
      Say("head ended: " + n->end_reason);
      // A head that fails is a node failure the restart policy may cover;
      // otherwise its code is the job's.
      Fault fault{Cause::kNodeFailed, n->host->name,
                  "node 0 (head) on " + n->host->name + " ended: " + n->end_reason,
                  n->exit_code.value_or(kExitBargeFailure), 0};
      if (failed && !attempt_.tearing_down && !attempt_.fault && faults_.Restartable(fault)) faults_.NoteFault(std::move(fault));
      return;
    }
    if (attempt_.tearing_down) return;
    if (failed && ctx_.spec.on_worker_exit == OnWorkerExit::kFail) {
      faults_.NoteFault({Cause::kNodeFailed, n->host->name,
                 "node " + rank + " (" + n->plan->role + ") on " + n->host->name + " ended: " + n->end_reason,
                 n->exit_code.value_or(kExitBargeFailure), n->plan->rank});
    } else {
      Say("node " + rank + " (" + n->plan->role + ") on " + n->host->name + " ended: " + n->end_reason);
    }
  }
}

}  // namespace barge::runner::internal
