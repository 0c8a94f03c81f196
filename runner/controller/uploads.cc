// Uploads (uploads.h): secrets:, workdir: and files: into every host's job
// directory before anything starts.
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

#include "runner/controller/uploads.h"
#include "runner/controller/job_state.h"
#include "runner/remote/docker_commands.h"
#include "runner/remote/watchdog.h"
#include "runner/store/state_dir.h"
#include "ssh/quote.h"


namespace barge::runner::internal {

Status Uploads::ShipSecrets(const std::vector<HostState*>& targets) {
  if (ctx_.spec.secrets.empty() || targets.empty()) return Status::Ok();
  std::string env_file;  // NAME=VALUE lines, as docker run --env-file reads them
  std::string names;
  for (const SecretSpec& secret : ctx_.spec.secrets) {
    if (secret.as_env) env_file += secret.name + "=" + EnvValueOf(secret) + "\n";
    names += (names.empty() ? "" : ", ") + secret.name;
  }
  // Each host's files in its own job directory (path there, content).
  std::map<HostState*, std::vector<std::pair<std::string, const std::string*>>> writes;
  for (HostState* hs : targets) {
    for (const SecretSpec& secret : ctx_.spec.secrets) {
      writes[hs].push_back({SecretsDir(hs->job_dir) + "/" + secret.name, &secret.value});
    }
    if (!env_file.empty()) writes[hs].push_back({SecretEnvFile(hs->job_dir), &env_file});
  }
  if (Status s = transfers_.WriteFiles(writes, "secrets"); !s.ok()) return s;
  Say("secrets " + names + " written to " + std::to_string(targets.size()) + " host(s) (" +
      SecretsDir(HostJobDirShown(plan_.job_id)) + ", mode 0600)");
  return Status::Ok();
}

Status Uploads::Upload(const std::vector<HostState*>& targets) {
  if (Status s = ShipSecrets(targets); !s.ok()) return s;
  if (Status s = mpi_.ShipMpiFiles(targets); !s.ok()) return s;
  if (!ctx_.spec.workdir && ctx_.spec.files.empty()) return Status::Ok();
  const std::string tmp = ctx_.options.state_dir + "/tmp";
  if (Status s = MakeDirs(tmp); !s.ok()) return s;
  auto check = [&](const std::map<HostState*, Outcome>& results, const std::string& what) {
    for (HostState* t : targets) {
      auto it = results.find(t);
      if (it == results.end() || !it->second.ok()) {
        return Status::Error(t->name + ": shipping " + what + " failed: " +
                             (it == results.end() ? "interrupted or timed out" : it->second.Reason()));
      }
    }
    return Status::Ok();
  };
  if (ctx_.spec.workdir) {
    // tar the directory once, locally, then stream it to every host.
    const std::string file = tmp + "/workdir-" + plan_.job_id + ".tar";
    std::vector<std::string> argv = {"tar", "-C", ctx_.spec.workdir->path};
    for (const auto& pattern : ctx_.spec.workdir->exclude) argv.push_back("--exclude=" + pattern);
    argv.insert(argv.end(), {"-cf", file, "."});
    CommandGroup pack(&ctx_.loop, &ctx_.redact);
    std::optional<Outcome> made;
    pack.Run(Local(), ssh::ShellJoin(argv), [&](const Outcome& o) { made = o; });
    RunUntil([&] { return made.has_value() || ctx_.interrupts > 0; }, Now() + seconds(600));
    if (!made || !made->ok()) {
      std::remove(file.c_str());
      return Status::Error("cannot pack workdir " + ctx_.spec.workdir->path + ": " +
                           (made ? made->Reason() : ctx_.interrupts ? "interrupted" : "timed out"));
    }
    Say("shipping workdir " + ctx_.spec.workdir->path + " to " + std::to_string(targets.size()) + " host(s)");
    auto results = transfers_.StreamFile(file, targets, [&](HostState& hs) {
      return ReceiveWorkdirCommand(hs.job_dir);
    }, Phase::kUpload, "shipping the workdir");
    std::remove(file.c_str());
    if (Status s = check(results, "the workdir"); !s.ok()) return s;
  }
  for (size_t i = 0; i < ctx_.spec.files.size(); ++i) {
    auto results = transfers_.StreamFile(ctx_.spec.files[i].from, targets, [&](HostState& hs) {
      return ReceiveFileCommand(hs.job_dir, i);
    }, Phase::kUpload, "shipping " + ctx_.spec.files[i].from);
    if (Status s = check(results, ctx_.spec.files[i].from); !s.ok()) return s;
  }
  return Status::Ok();
}

}  // namespace barge::runner::internal
