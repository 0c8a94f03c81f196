// Getting files onto the hosts: the bounded-memory stream of a local file
// into a command on many hosts at once, and what uses it or the command's
// stdin: secrets:, workdir: and files: shipped to the job's directory,
// image_pull: push (docker save | docker load), and the registry: login
// (and logout) into the job's own Docker client config.
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

#include "runner/controller_internal.h"
#include "runner/docker_commands.h"
#include "runner/job_store.h"
#include "runner/state_dir.h"
#include "runner/watchdog.h"
#include "ssh/local_executor.h"
#include "ssh/quote.h"

namespace barge::runner::internal {

std::map<HostState*, Outcome> Controller::StreamFile(
    const std::string& file, const std::vector<HostState*>& targets,
    const std::function<std::string(HostState&)>& command, const std::string& phase) {
  struct Target {
    HostState* host = nullptr;
    ssh::Command* cmd = nullptr;
    FILE* in = nullptr;
    bool sent_all = false;
    std::optional<Outcome> result;
  };
  std::vector<Target> streams(targets.size());
  progress_->Begin(phase, static_cast<int>(targets.size()));
  for (size_t i = 0; i < targets.size(); ++i) {
    Target& t = streams[i];
    t.host = targets[i];
    t.in = std::fopen(file.c_str(), "rb");
    Target* tp = &t;
    t.cmd = Exec(*t.host, command(*t.host),
                 [this, tp](const Outcome& o) {
                   tp->result = o;
                   progress_->Done(tp->host->name, o.ok(), o.ok() ? "" : o.Reason());
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
  auto deadline = Clock::now() + seconds(3600);
  while (Clock::now() < deadline && interrupts_ == 0 &&
         !std::all_of(streams.begin(), streams.end(),
                      [](const Target& t) { return t.result.has_value(); })) {
    pump();
    loop_.Poll(milliseconds(5));
    ReapCommands();
  }
  progress_->End();
  std::map<HostState*, Outcome> out;
  for (Target& t : streams) {
    if (t.in) std::fclose(t.in);
    if (t.result) out[t.host] = *t.result;
  }
  return out;
}

Status Controller::ShipSecrets(const std::vector<HostState*>& targets) {
  if (spec_.secrets.empty() || targets.empty()) return Status::Ok();
  std::vector<std::pair<std::string, const std::string*>> files;  // path on the host, content
  std::string env_file;  // NAME=VALUE lines, as docker run --env-file reads them
  std::string names;
  for (const SecretSpec& secret : spec_.secrets) {
    files.push_back({SecretsDir(plan_.job_id) + "/" + secret.name, &secret.value});
    if (secret.as_env) env_file += secret.name + "=" + EnvValueOf(secret) + "\n";
    names += (names.empty() ? "" : ", ") + secret.name;
  }
  if (!env_file.empty()) files.push_back({SecretEnvFile(plan_.job_id), &env_file});
  // Shared with the callbacks, which may outlive this call on a timeout.
  struct Shipping {
    int pending = 0;
    bool ended = false;
    std::map<HostState*, int> open;
    std::map<HostState*, std::string> errors;
  };
  auto st = std::make_shared<Shipping>();
  progress_->Begin("writing secrets", static_cast<int>(targets.size()));
  for (HostState* hs : targets) {
    for (const auto& [path, content] : files) {
      ++st->pending;
      ++st->open[hs];
      ssh::Command* cmd = Exec(*hs, WriteSecretCommand(path), [this, st, hs](const Outcome& o) {
        --st->pending;
        if (!o.ok() && !st->errors.count(hs)) st->errors[hs] = o.Reason();
        if (--st->open[hs] > 0 || st->ended) return;
        auto failed = st->errors.find(hs);
        progress_->Done(hs->name, failed == st->errors.end(),
                        failed == st->errors.end() ? "" : failed->second);
      }, /*keep_stdin=*/true);
      if (cmd != nullptr) {
        cmd->WriteStdin(*content);
        cmd->CloseStdin();
      }
    }
  }
  const bool done = RunUntil([&] { return st->pending == 0 || interrupts_ > 0; },
                             Clock::now() + spec_.ssh.connect_timeout + seconds(60));
  st->ended = true;
  progress_->End();
  if (interrupts_ > 0) return Status::Error("interrupted while writing secrets");
  if (!done) return Status::Error("writing secrets to the hosts did not finish in time");
  if (!st->errors.empty()) {
    std::string msg = "writing secrets failed:";
    for (const auto& [hs, why] : st->errors) msg += "\n  " + hs->name + ": " + why;
    return Status::Error(msg);
  }
  Say("secrets " + names + " written to " + std::to_string(targets.size()) + " host(s) (" +
      SecretsDir(plan_.job_id) + ", mode 0600)");
  return Status::Ok();
}

Status Controller::Login(const std::vector<HostState*>& targets) {
  if (!spec_.registry) return Status::Ok();
  const RegistrySpec& registry = *spec_.registry;
  const std::string config = DockerConfigDir(plan_.job_id);
  const auto limit = seconds(120);
  struct Logins {
    int pending = 0;
    bool ended = false;
    std::vector<std::string> errors;
  };
  auto st = std::make_shared<Logins>();
  std::vector<HostState*> connected;
  for (HostState* hs : targets) {
    if (hs->exec) connected.push_back(hs);  // the others are reported by preflight
  }
  if (connected.empty()) return Status::Ok();
  progress_->Begin("logging in to " + registry.server, static_cast<int>(connected.size()));
  for (HostState* hs : connected) {
    // From now on every docker command of the job on this host uses the
    // job's own client config.
    hs->docker = std::make_unique<DockerCommands>(
        DockerCommandOf(spec_, plan_.hosts[hs->index], plan_.job_id));
    hs->login_tried = true;
    ++st->pending;
    ssh::Command* cmd = Exec(
        *hs, Bounded(hs->docker->Login(config, registry.server, registry.username), limit),
        [this, st, hs, limit](const Outcome& o) {
          --st->pending;
          if (st->ended) return;
          std::string why;
          if (!o.ok()) {
            why = o.exit.known() && o.exit.code == 137 && o.err.empty()
                      ? "docker login did not finish within " + std::to_string(limit.count()) + " s"
                      : o.Reason();
            st->errors.push_back(hs->name + ": " + why);
          }
          progress_->Done(hs->name, o.ok(), why);
        },
        /*keep_stdin=*/true);
    if (cmd != nullptr) {
      cmd->WriteStdin(registry.password);
      cmd->CloseStdin();
    }
  }
  const bool done = RunUntil([&] { return st->pending == 0 || interrupts_ > 0; },
                             Clock::now() + limit + seconds(10));
  st->ended = true;
  progress_->End();
  if (interrupts_ > 0) return Status::Error("interrupted while logging in to " + registry.server);
  if (!done) st->errors.push_back("docker login did not finish in time");
  if (st->errors.empty()) {
    Say("logged in to " + registry.server + " as " + registry.username + " on " +
        std::to_string(connected.size()) + " host(s)");
    return Status::Ok();
  }
  std::string msg = "registry login to " + registry.server + " as " + registry.username +
                    " failed; nothing was started:";
  for (const std::string& e : st->errors) msg += "\n  " + e;
  return Status::Error(msg);
}

void Controller::Logout() {
  if (!spec_.registry) return;
  auto pending = std::make_shared<int>(0);
  for (auto& [h, host] : hosts_) {
    if (!host->login_tried || host->lost || !host->exec) continue;
    HostState* hs = host.get();
    ++*pending;
    Exec(*hs,
         Bounded(hs->docker->Logout(DockerConfigDir(plan_.job_id), spec_.registry->server), seconds(30)),
         [this, pending, hs](const Outcome& o) {
           --*pending;
           hs->login_tried = false;
           if (!o.ok()) Say(hs->name + ": docker logout failed: " + o.Reason());
         });
  }
  if (!RunUntil([&] { return *pending == 0; }, Clock::now() + seconds(40))) {
    Say("docker logout did not finish on every host; the job's directory, credential included, "
        "is removed with the watchdog");
  }
}

Status Controller::Upload(const std::vector<HostState*>& targets) {
  if (Status s = ShipSecrets(targets); !s.ok()) return s;
  if (!spec_.workdir && spec_.files.empty()) return Status::Ok();
  const std::string dir = HostJobDir(plan_.job_id);
  const std::string tmp = options_.state_dir + "/tmp";
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
  if (spec_.workdir) {
    // tar the directory once, locally, then stream it to every host.
    const std::string file = tmp + "/workdir-" + plan_.job_id + ".tar";
    std::vector<std::string> argv = {"tar", "-C", spec_.workdir->path};
    for (const auto& pattern : spec_.workdir->exclude) argv.push_back("--exclude=" + pattern);
    argv.insert(argv.end(), {"-cf", file, "."});
    std::optional<Outcome> made;
    Exec(Local(), ssh::ShellJoin(argv), [&](const Outcome& o) { made = o; });
    RunUntil([&] { return made.has_value(); }, Clock::now() + seconds(600));
    if (!made || !made->ok()) {
      std::remove(file.c_str());
      return Status::Error("cannot pack workdir " + spec_.workdir->path + ": " +
                           (made ? made->Reason() : "timed out"));
    }
    Say("shipping workdir " + spec_.workdir->path + " to " + std::to_string(targets.size()) + " host(s)");
    auto results = StreamFile(file, targets, [&](HostState&) {
      return "mkdir -p " + ssh::ShellQuote(dir + "/workdir") + " && tar -x --no-same-owner -C " +
             ssh::ShellQuote(dir + "/workdir");
    }, "shipping the workdir");
    std::remove(file.c_str());
    if (Status s = check(results, "the workdir"); !s.ok()) return s;
  }
  for (size_t i = 0; i < spec_.files.size(); ++i) {
    const std::string remote = dir + "/files/" + std::to_string(i);
    auto results = StreamFile(spec_.files[i].from, targets, [&](HostState&) {
      return "mkdir -p " + ssh::ShellQuote(dir + "/files") + " && cat > " + ssh::ShellQuote(remote);
    }, "shipping " + spec_.files[i].from);
    if (Status s = check(results, spec_.files[i].from); !s.ok()) return s;
  }
  return Status::Ok();
}

void Controller::Push(const std::string& image, const std::vector<HostState*>& targets,
                      std::map<size_t, std::vector<std::string>>* errors) {
  // Save once to a file, then stream it to each host at the pace its channel
  // takes it, so memory stays bounded however big the image is.
  const std::string dir = options_.state_dir + "/tmp";
  if (Status s = MakeDirs(dir); !s.ok()) {
    for (HostState* t : targets) (*errors)[t->index].push_back(s.message());
    return;
  }
  const std::string file = dir + "/push-" + plan_.job_id + ".tar";
  Say("pushing " + image + " to " + std::to_string(targets.size()) + " host(s) (docker save | docker load)");
  Record(store_->SetStatus(plan_.job_id, JobStatus::kPushing, std::nullopt,
                           image + " to " + std::to_string(targets.size()) + " host(s)"));
  const auto started = Clock::now();
  HostState local;
  local.name = "local";
  local.exec = std::make_unique<ssh::LocalExecutor>(&loop_);
  DockerCommands local_docker({"docker"});
  std::optional<Outcome> saved;
  Exec(local, local_docker.Line({"save", "-o", file, image}), [&](const Outcome& o) { saved = o; });
  RunUntil([&] {
    ReapCommandsOf(local);
    return saved.has_value() || interrupts_ > 0;
  }, Clock::now() + seconds(1800));
  if (!saved || !saved->ok()) {
    std::string why = saved ? saved->Reason() : "interrupted or timed out";
    for (HostState* t : targets) {
      (*errors)[t->index].push_back("cannot push " + image + ": local docker save failed: " + why);
    }
    std::remove(file.c_str());
    return;
  }

  std::map<HostState*, Outcome> results =
      StreamFile(file, targets, [](HostState& h) { return h.docker->Load(); }, "pushing " + image);
  for (HostState* t : targets) {
    auto it = results.find(t);
    if (it == results.end() || !it->second.ok()) {
      (*errors)[t->index].push_back("pushing " + image + " failed: " +
                                    (it == results.end() ? "interrupted or timed out" : it->second.Reason()));
    }
  }
  std::remove(file.c_str());
  // What the hosts now hold.
  int pending = 0;
  for (HostState* hs : targets) {
    auto it = results.find(hs);
    if (it == results.end() || !it->second.ok()) continue;
    ++pending;
    Exec(*hs, hs->docker->ImageId(image), [&, hs](const Outcome& o) {
      --pending;
      if (o.ok()) {
        hs->image_ids[image] = Trim(o.out);
      } else {
        (*errors)[hs->index].push_back("image " + image + " still missing after push: " + o.Reason());
      }
    });
  }
  RunUntil([&] { return pending == 0; }, Clock::now() + seconds(120));
  double secs = std::chrono::duration<double>(Clock::now() - started).count();
  char took[32];
  std::snprintf(took, sizeof took, "%.1f", secs);
  Say("pushed " + image + " in " + took + " s");
}

}  // namespace barge::runner::internal
