// Transfers (transfers.h): files streamed or written into commands' stdin
// on many hosts at once.
#include <algorithm>
#include <chrono>
#include <cstdio>
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

std::map<HostState*, Outcome> Transfers::StreamFile(
    const std::string& file, const std::vector<HostState*>& targets,
    const std::function<std::string(HostState&)>& command, Phase phase, const std::string& label) {
  struct Target {
    HostState* host = nullptr;
    ssh::Command* cmd = nullptr;
    FILE* in = nullptr;
    bool sent_all = false;
    std::optional<Outcome> result;
  };
  CommandGroup group(&ctx_.loop, &ctx_.redact);
  std::vector<Target> streams(targets.size());
  ctx_.observer.StepBegan(phase, label, static_cast<int>(targets.size()));
  for (size_t i = 0; i < targets.size(); ++i) {
    Target& t = streams[i];
    t.host = targets[i];
    t.in = std::fopen(file.c_str(), "rb");
    Target* tp = &t;
    Began(t.host->PhaseOf(phase));
    t.cmd = group.Run(*t.host->exec, command(*t.host),
                      [this, tp, phase](const Outcome& o) {
                        tp->result = o;
                        tp->cmd = nullptr;
                        Ended(tp->host->PhaseOf(phase), o.ok(), o.ok() ? "" : o.Reason());
                      },
                      /*keep_stdin=*/true);
    if (!t.in && t.cmd) t.cmd->CloseStdin();
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
        if (n > 0) t.cmd->WriteStdin(std::string_view(buf.data(), n));
        if (n < buf.size()) {
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
    if (!t.result) Ended(t.host->PhaseOf(phase), false, ctx_.interrupts ? "interrupted" : "timed out");
  }
  ctx_.observer.StepEnded(phase);
  std::map<HostState*, Outcome> out;
  for (Target& t : streams) {
    if (t.in) std::fclose(t.in);
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
  for (const auto& [host, files] : writes) {
    HostState* hs = host;
    Began(hs->PhaseOf(Phase::kUpload));
    for (const auto& [path, content] : files) {
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
    for (const auto& [hs, why] : errors) msg += "\n  " + hs->name + ": " + why;
    return Status::Error(msg);
  }
  return Status::Ok();
}

}  // namespace barge::runner::internal
