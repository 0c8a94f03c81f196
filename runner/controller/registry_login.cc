// RegistryLogin (registry_login.h): docker login and logout on every host.
#include <memory>
#include <string>
#include <vector>

#include "runner/controller/registry_login.h"
#include "runner/controller/job_state.h"
#include "runner/remote/docker_commands.h"

namespace barge::runner::internal {

Status RegistryLogin::Login(const std::vector<HostState*>& targets) {
  if (!ctx_.spec.registry) return Status::Ok();
  const RegistrySpec& registry = *ctx_.spec.registry;
  const auto limit = seconds(120);
  std::vector<HostState*> connected;
  for (HostState* hs : targets) {
    if (hs->exec) connected.push_back(hs);  // the others are reported by preflight
  }
  if (connected.empty()) return Status::Ok();
  CommandGroup group(&ctx_.loop, &ctx_.redact);
  std::vector<std::string> errors;
  ctx_.observer.StepBegan(Phase::kLogin, "logging in to " + registry.server, static_cast<int>(connected.size()));
  for (HostState* hs : connected) {
    // From now on every docker command of the job on this host uses the
    // job's own client config.
    hs->docker = std::make_unique<DockerCommands>(
        DockerCommandOf(ctx_.spec, plan_.hosts[hs->index], hs->job_dir));
    hs->login.tried = true;
    Began(hs->PhaseOf(Phase::kLogin));
    ssh::Command* cmd = group.Run(
        *hs->exec, Bounded(hs->docker->Login(DockerConfigDir(hs->job_dir), registry.server, registry.username), limit),
        [&, hs](const Outcome& o) {
          std::string why;
          if (!o.ok()) {
            why = o.timed_out() ? "docker login did not finish within " + std::to_string(limit.count()) + " s"
                                : o.Reason();
            errors.push_back(hs->name + ": " + why);
          }
          Ended(hs->PhaseOf(Phase::kLogin), o.ok(), why);
        },
        /*keep_stdin=*/true);
    if (cmd != nullptr) {
      cmd->WriteStdin(registry.password);
      cmd->CloseStdin();
    }
  }
  const bool done = RunUntil([&] { return group.idle() || ctx_.interrupts > 0; },
                             Now() + limit + seconds(10));
  ctx_.observer.StepEnded(Phase::kLogin);
  if (ctx_.interrupts > 0) return Status::Error("interrupted while logging in to " + registry.server);
  if (!done) errors.push_back("docker login did not finish in time");
  if (errors.empty()) {
    Say("logged in to " + registry.server + " as " + registry.username + " on " +
        std::to_string(connected.size()) + " host(s)");
    return Status::Ok();
  }
  std::string msg = "registry login to " + registry.server + " as " + registry.username +
                    " failed; nothing was started:";
  for (const std::string& e : errors) msg += "\n  " + e;
  return Status::Error(msg);
}

void RegistryLogin::Logout() {
  if (!ctx_.spec.registry) return;
  CommandGroup group(&ctx_.loop, &ctx_.redact);
  for (auto& [h, host] : hosts_.by_index) {
    if (!host->login.tried || host->lost || !host->exec) continue;
    HostState* hs = host.get();
    group.Run(*hs->exec,
              Bounded(hs->docker->Logout(DockerConfigDir(hs->job_dir), ctx_.spec.registry->server), seconds(30)),
              [this, hs](const Outcome& o) {
                hs->login.tried = false;
                if (!o.ok()) Say(hs->name + ": docker logout failed: " + o.Reason());
              });
  }
  if (!RunUntil([&] { return group.idle(); }, Now() + seconds(40))) {
    Say("docker logout did not finish on every host; the job's directory, credential included, "
        "is removed with the watchdog");
  }
}

}  // namespace barge::runner::internal
