// Transfers (transfers.h): files streamed or written into commands' stdin
// on many hosts at once.
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "runner/controller/transfers.h"
#include "runner/controller/job_state.h"
#include "runner/remote/docker_commands.h"
#include "runner/remote/watchdog.h"
#include "runner/store/state_dir.h"
#include "ssh/quote.h"


namespace barge::runner::internal {
namespace {

// A host's part that failed on this machine: exit unknown, `why` said.
Outcome LocalFailure(const std::string& why) {
  Outcome o;
  o.exit.error = why;
  return o;
}

}  // namespace

std::map<HostState*, Outcome> Transfers::StreamFile(
    const std::string& file, const std::vector<HostState*>& targets,
    const std::function<std::string(HostState&)>& command, Phase phase, const std::string& label,
    uint64_t* sent, bool report) {
  struct Target {
    HostState* host = nullptr;
    ssh::Command* cmd = nullptr;
    FILE* in = nullptr;
    bool sent_all = false;
    bool read_failed = false;  // the host got a part of the file only
    std::optional<Outcome> result;
  };
  CommandGroup group(&ctx_.loop, &ctx_.redact);
  std::vector<Target> streams(targets.size());
  if (report) ctx_.observer.StepBegan(phase, label, static_cast<int>(targets.size()));
  for (size_t i = 0; i < targets.size(); ++i) {
    Target& t = streams[i];
    t.host = targets[i];
    t.in = std::fopen(file.c_str(), "rb");
    Target* tp = &t;
    if (report) Began(t.host->PhaseOf(phase));
    if (!t.in) {
      // Never an empty file in its place: the host's part fails here.
      t.result = LocalFailure("cannot read " + file + ": " + std::strerror(errno));
      if (report) Ended(t.host->PhaseOf(phase), false, t.result->exit.error);
      continue;
    }
    t.cmd = group.Run(*t.host->exec, command(*t.host),
                      [this, tp, phase, report](const Outcome& o) {
                        tp->result = o;
                        tp->cmd = nullptr;
                        if (report) Ended(tp->host->PhaseOf(phase), o.ok(), o.ok() ? "" : o.Reason());
                      },
                      /*keep_stdin=*/true);
  }
  // Each host takes the stream at its own pace; at most kWindow bytes wait
  // in memory per host.
  constexpr size_t kWindow = 8 << 20;
  std::vector<char> buf(1 << 20);
  auto pump = [&] {
    for (Target& t : streams) {
      if (t.result || t.sent_all || !t.cmd || !t.in) continue;
      while (t.cmd->stdin_pending() < kWindow) {
        size_t n = std::fread(buf.data(), 1, buf.size(), t.in);
        if (n > 0) {
          t.cmd->WriteStdin(std::string_view(buf.data(), n));
          if (sent != nullptr) *sent += n;
        }
        if (n < buf.size()) {
          t.read_failed = std::ferror(t.in) != 0;
          t.sent_all = true;
          t.cmd->CloseStdin();
          break;
        }
      }
    }
  };
  auto deadline = Now() + seconds(3600);
  while (Now() < deadline && ctx_.interrupts == 0 &&
         !std::all_of(streams.begin(), streams.end(),
                      [](const Target& t) { return t.result.has_value(); })) {
    pump();
    ctx_.loop.Poll(milliseconds(5));
  }
  for (Target& t : streams) {
    if (!t.result && report) Ended(t.host->PhaseOf(phase), false, ctx_.interrupts ? "interrupted" : "timed out");
  }
  if (report) ctx_.observer.StepEnded(phase);
  std::map<HostState*, Outcome> out;
  for (Target& t : streams) {
    if (t.in) std::fclose(t.in);
    if (t.read_failed) t.result = LocalFailure("reading " + file + " failed after a part of it was sent");
    if (t.result) out[t.host] = *t.result;
  }
  return out;
}

Status Transfers::WriteFiles(
    const std::map<HostState*, std::vector<std::pair<std::string, const std::string*>>>& writes,
    const std::string& what) {
  CommandGroup group(&ctx_.loop, &ctx_.redact);
  std::map<HostState*, int> open;
  std::map<HostState*, std::string> errors;
  ctx_.observer.StepBegan(Phase::kUpload, "writing " + what, static_cast<int>(writes.size()));
  // In host index order (the map's is the pointers').
  std::vector<HostState*> hosts;
  for (const auto& [host, files] : writes) hosts.push_back(host);
  std::sort(hosts.begin(), hosts.end(), [](HostState* a, HostState* b) { return a->index < b->index; });
  for (HostState* hs : hosts) {
    Began(hs->PhaseOf(Phase::kUpload));
    for (const auto& [path, content] : writes.at(hs)) {
      ++open[hs];
      ssh::Command* cmd = group.Run(*hs->exec, WriteSecretCommand(hs->job_dir, path), [&, hs](const Outcome& o) {
        if (!o.ok() && !errors.count(hs)) errors[hs] = o.Reason();
        if (--open[hs] > 0) return;
        auto failed = errors.find(hs);
        Ended(hs->PhaseOf(Phase::kUpload), failed == errors.end(),
              failed == errors.end() ? "" : failed->second);
      }, /*keep_stdin=*/true);
      if (cmd != nullptr) {
        cmd->WriteStdin(*content);
        cmd->CloseStdin();
      }
    }
  }
  const bool done = RunUntil([&] { return group.idle() || ctx_.interrupts > 0; },
                             Now() + ctx_.spec.ssh.connect_timeout + seconds(60));
  ctx_.observer.StepEnded(Phase::kUpload);
  if (ctx_.interrupts > 0) return Status::Error("interrupted while writing " + what);
  if (!done) return Status::Error("writing " + what + " to the hosts did not finish in time");
  if (!errors.empty()) {
    std::string msg = "writing " + what + " failed:";
    for (HostState* hs : hosts) {
      if (auto why = errors.find(hs); why != errors.end()) msg += "\n  " + hs->name + ": " + why->second;
    }
    return Status::Error(msg);
  }
  return Status::Ok();
}

}  // namespace barge::runner::internal
