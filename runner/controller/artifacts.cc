// artifacts: copying files out of the nodes' containers (docker
// cp as a tar stream on the host's session, unpacked by a local tar) into
// runs/<id>/artifacts/<rank>/, every `every:` while the job runs and once
// more at teardown.
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "runner/controller/artifacts.h"
#include "runner/controller/job_state.h"
#include "runner/store/state_dir.h"
#include "ssh/local_executor.h"
#include "ssh/quote.h"

namespace barge::runner::internal {

std::vector<NodeState*> Artifacts::ArtifactNodes(const ArtifactSpec& a) {
  std::vector<NodeState*> out;
  for (auto& n : attempt_.nodes) {
    if (a.all_nodes || n->plan->rank == a.rank.value_or(0)) out.push_back(n.get());
  }
  return out;
}

void Artifacts::CopyArtifact(CommandGroup& group, NodeState& n, const ArtifactSpec& a,
                              std::function<void()> done) {
  const std::string dest = RunDir(ctx_.options.state_dir, plan_.job_id) + "/artifacts/" + std::to_string(n.plan->rank);
  if (Status s = MakeDirs(dest); !s.ok()) {
    Say(s.message());
    done();
    return;
  }
  // The local tar reads the stream on its stdin as it arrives.
  auto finished = std::make_shared<int>(0);
  auto done_shared = std::make_shared<std::function<void()>>(std::move(done));
  // The tar's command is valid until its callback has run (the group frees
  // it at its next start): the copy's stream, which may outlive it (a tar
  // that failed), checks `untar_running` before touching it.
  auto untar_running = std::make_shared<bool>(true);
  ssh::Command* untar = group.Run(Local(), ssh::ShellJoin({"tar", "-x", "--no-same-owner", "-C", dest}),
                                  [this, finished, done_shared, untar_running, rank = n.plan->rank](const Outcome& o) {
                                    *untar_running = false;
                                    if (!o.ok()) Say("artifacts of node " + std::to_string(rank) + ": tar: " + o.Reason());
                                    if (++*finished == 2) (*done_shared)();
                                  },
                                  /*keep_stdin=*/true);
  if (untar == nullptr) *untar_running = false;
  ssh::CommandCallbacks cb;
  cb.on_stdout = [untar, untar_running](std::string_view d) {
    if (*untar_running) untar->WriteStdin(d);
  };
  auto err = std::make_shared<std::string>();
  cb.on_stderr = [err](std::string_view d) { err->append(d); };
  cb.on_exit = [this, untar, untar_running, err, finished, done_shared, rank = n.plan->rank,
                path = a.path](const ssh::ExitStatus& st) {
    if (*untar_running) untar->CloseStdin();
    if (!st.known() || st.code != 0) {
      std::string why = st.known() ? *err : st.error;
      while (!why.empty() && why.back() == '\n') why.pop_back();
      spdlog::debug("Artifacts: copy failed. [rank: {}, path: {}, reason: {}]", rank, path, ctx_.redact(why));
    }
    if (++*finished == 2) (*done_shared)();
  };
  // A copy that cannot start ends through on_exit, from the loop.
  group.Stream(*n.host->exec, n.host->docker->CopyOut(n.plan->container.name, a.path), std::move(cb));
}

void Artifacts::SendOn(const NodeState& n, const ArtifactSpec& a, size_t index) {
  if (a.to.empty() || !ctx_.spec.storage) return;
  const std::string run = RunDir(ctx_.options.state_dir, plan_.job_id);
  std::string base = a.path;
  while (base.size() > 1 && base.back() == '/') base.pop_back();
  base = base.substr(base.rfind('/') + 1);
  const std::string local = run + "/artifacts/" + std::to_string(n.plan->rank) + "/" + base;
  Uploads().Queue(std::to_string(n.plan->rank) + ":" + std::to_string(index), local, a.to, plan_.job_id,
                  n.plan->rank, n.host->name);
}

ArtifactUploads& Artifacts::Uploads() {
  if (!uploads_) {
    uploads_ = std::make_unique<ArtifactUploads>(*ctx_.spec.storage, ctx_.store ? ctx_.options.state_dir : "",
                                                 plan_.job_id);
  }
  return *uploads_;
}

void Artifacts::ReportSent() {
  if (!uploads_) return;
  if (const std::string warning = uploads_->TakeWarning(); !warning.empty()) {
    Say("warning: job store: where files went to s3:// is not recorded: " + warning);
  }
  for (const ArtifactSent& s : uploads_->TakeSent()) {
    tally_.Add(s);
    if (s.state == UploadState::kFailed) {
      Say("artifact " + s.local + " not sent: " + s.detail);
    } else {
      spdlog::debug("Artifacts: {}. [file: {}, to: {}, size: {}, md5: {}{}]", ToString(s.state), s.local, s.name,
                    s.size, s.md5, s.detail.empty() ? "" : ", " + s.detail);
    }
  }
}

void Artifacts::SendLogs() {
  if (!ctx_.spec.storage || ctx_.spec.storage->logs.empty()) return;
  const std::string run = RunDir(ctx_.options.state_dir, plan_.job_id);
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(run, ec)) {
    const std::string name = entry.path().filename().string();
    // Kept logs are RANK-HOST.log (runner/logs/log_files.h).
    const size_t dash = name.find('-');
    if (!entry.is_regular_file(ec) || !name.ends_with(".log") || dash == std::string::npos) continue;
    const std::string host = name.substr(dash + 1, name.size() - dash - 5);
    Uploads().Queue("logs", entry.path().string(), ctx_.spec.storage->logs, plan_.job_id,
                    std::atoi(name.substr(0, dash).c_str()), host);
  }
}

void Artifacts::ScheduleArtifacts() {
  for (size_t i = 0; i < ctx_.spec.artifacts.size(); ++i) {
    const ArtifactSpec& a = ctx_.spec.artifacts[i];
    if (!a.every) continue;
    auto tick = std::make_shared<std::function<void()>>();
    *tick = [this, i, tick_weak = std::weak_ptr<std::function<void()>>(tick)] {
      if (attempt_.tearing_down) return;
      const ArtifactSpec& art = ctx_.spec.artifacts[i];
      ReportSent();
      for (NodeState* n : ArtifactNodes(art)) {
        if (n->phase != NodePhase::kRunning || copying_.count({n->plan->rank, i})) continue;
        // The copy being sent is not replaced under the upload.
        if (uploads_ && uploads_->Busy(std::to_string(n->plan->rank) + ":" + std::to_string(i))) continue;
        copying_.insert({n->plan->rank, i});
        CopyArtifact(attempt_.commands, *n, art, [this, i, n, rank = n->plan->rank] {
          copying_.erase({rank, i});
          SendOn(*n, ctx_.spec.artifacts[i], i);
        });
      }
      if (auto t = tick_weak.lock()) ctx_.timers.Add(Now() + *art.every, [t] { (*t)(); });
    };
    attempt_.monitors.push_back(tick);
    ctx_.timers.Add(Now() + *a.every, [tick] { (*tick)(); });
  }
}

void Artifacts::FinalArtifacts() {
  if (ctx_.spec.artifacts.empty()) return;
  CommandGroup group(&ctx_.loop, &ctx_.redact);
  int pending = 0;
  for (size_t i = 0; i < ctx_.spec.artifacts.size(); ++i) {
    const ArtifactSpec& a = ctx_.spec.artifacts[i];
    for (NodeState* n : ArtifactNodes(a)) {
      if (!n->run_attempted || n->container_id.empty() || n->host->lost) continue;
      ++pending;
      // Waits for a periodic upload of the same copy before replacing it.
      const std::string tag = std::to_string(n->plan->rank) + ":" + std::to_string(i);
      if (uploads_) RunUntil([&] { return !uploads_->Busy(tag); }, Now() + seconds(600));
      CopyArtifact(group, *n, a, [this, &pending, n, i] {
        --pending;
        SendOn(*n, ctx_.spec.artifacts[i], i);
      });
    }
  }
  if (!RunUntil([&] { return pending == 0; }, Now() + seconds(600))) {
    Say("copying artifacts did not finish within 600 s");
  } else if (pending == 0) {
    Say("artifacts copied to " + RunDir(ctx_.options.state_dir, plan_.job_id) + "/artifacts");
  }
}

void Artifacts::SendToStorage() {
  SendLogs();
  if (!uploads_) return;
  // The loop runs meanwhile (RunUntil); another interrupt ends the wait.
  const int interrupts = ctx_.interrupts;
  if (!RunUntil([&] { return uploads_->Idle() || ctx_.interrupts > interrupts; }, Now() + seconds(600))) {
    Say("sending to s3:// did not finish within 600 s");
  }
  if (!uploads_->Idle()) {
    uploads_->Cancel();
    Say("what was not yet sent to s3:// is left; its multipart uploads are recorded for a resume (barge show " +
        plan_.job_id + ")");
  }
  // The file in flight ends soon after Cancel (libcurl's progress callback).
  RunUntil([&] { return uploads_->Idle(); }, Now() + seconds(5));
  ReportSent();
  if (!tally_.empty()) Say(tally_.Line());
}

}  // namespace barge::runner::internal
