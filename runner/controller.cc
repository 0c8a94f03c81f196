// The run of a job (Controller::Run, Execute, Launch: connect, preflight,
// start the head, wait for it, start the workers, stream logs, watch exits,
// tear down), the command plumbing every piece uses (Exec, RunUntil, the
// reaping of finished commands), and controller.h's entry points. Faults and
// restarts, file transfers, artifacts, the watchdog and the verbs on a
// recorded job live in the other controller_*.cc files.
#include "runner/controller.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include <unistd.h>

#include "container/docker_args.h"
#include "container/inspect.h"
#include "container/log_line.h"
#include "container/proc_net.h"
#include "runner/controller_internal.h"
#include "runner/docker_commands.h"
#include "runner/job_store.h"
#include "runner/log_sink.h"
#include "runner/progress.h"
#include "runner/signals.h"
#include "runner/state_dir.h"
#include "runner/watchdog.h"
#include "ssh/event_loop.h"
#include "ssh/local_executor.h"
#include "ssh/quote.h"
#include "ssh/session.h"
#include "ssh/ssh_executor.h"

namespace barge::runner {

cluster::PlanInput MakePlanInput(const JobSpec& spec, const std::string& job_id) {
  cluster::PlanInput in;
  in.job_id = job_id;
  in.job_name = spec.name;
  in.image = spec.image;
  in.command = spec.command;
  in.container = spec.container;
  in.hosts = spec.hosts;
  if (in.hosts.empty()) {
    cluster::Host local;
    local.address = cluster::kLocalAddress;
    in.hosts.push_back(local);
  }
  in.roles = spec.roles;
  in.rendezvous = spec.rendezvous;
  // workdir: and files: are mounted from the host's job directory into every
  // container, whatever volumes a role or host block sets.
  std::vector<std::string> mounts;
  if (spec.workdir) mounts.push_back(HostJobDir(job_id) + "/workdir:" + spec.workdir->mount);
  for (size_t i = 0; i < spec.files.size(); ++i) {
    mounts.push_back(HostJobDir(job_id) + "/files/" + std::to_string(i) + ":" + spec.files[i].to + ":ro");
  }
  // secrets: each one a read-only file at /run/secrets/NAME; those given as
  // environment come from an env file on the host (docker run --env-file),
  // so that no value is ever on a command line.
  for (const SecretSpec& secret : spec.secrets) {
    mounts.push_back(SecretsDir(job_id) + "/" + secret.name + ":/run/secrets/" + secret.name + ":ro");
  }
  if (!mounts.empty()) {
    auto add = [&](container::ContainerOptions& o, bool always) {
      if (!o.volumes && !always) return;
      if (!o.volumes) o.volumes.emplace();
      o.volumes->insert(o.volumes->end(), mounts.begin(), mounts.end());
    };
    add(in.container, true);
    for (auto& [name, role] : in.roles) add(role.container, false);
    for (auto& host : in.hosts) add(host.container, false);
  }
  if (std::any_of(spec.secrets.begin(), spec.secrets.end(),
                  [](const SecretSpec& s) { return s.as_env; })) {
    const std::vector<std::string> env_file = {"--env-file", SecretEnvFile(job_id)};
    auto add = [&](container::ContainerOptions& o, bool always) {
      if (!o.run_options && !always) return;
      if (!o.run_options) o.run_options.emplace();
      o.run_options->insert(o.run_options->begin(), env_file.begin(), env_file.end());
    };
    add(in.container, true);
    for (auto& [name, role] : in.roles) add(role.container, false);
    for (auto& host : in.hosts) add(host.container, false);
  }
  return in;
}

std::vector<std::string> DockerCommandOf(const JobSpec& spec, const cluster::Host& host,
                                         const std::string& job_id) {
  const std::string& text = host.docker_command ? *host.docker_command : spec.docker_command;
  Result<std::vector<std::string>> split = container::SplitDockerCommand(text);
  // Validated at parse time: the fallback is not reached.
  std::vector<std::string> words = split.ok() ? *split : std::vector<std::string>{"docker"};
  if (spec.registry && !job_id.empty()) {
    words.push_back("--config");
    words.push_back(DockerConfigDir(job_id));
  }
  return words;
}

namespace internal {

std::string HostName(const cluster::Host& h) { return h.address; }

namespace {

constexpr char kNotPosix[] = "the login shell is not a POSIX shell";

// Free space below this on the job directory's (/tmp) or the engine's
// filesystem fails preflight: a job cannot start on a full disk.
constexpr long long kMinFreeKib = 256 * 1024;

// Problems in `df -Pk` output: each filesystem with less than kMinFreeKib.
std::vector<std::string> LowDiskSpace(const std::string& df) {
  std::vector<std::string> problems;
  std::istringstream lines(df);
  std::string line;
  std::set<std::string> seen;
  while (std::getline(lines, line)) {
    std::istringstream fields(line);
    std::string fs, blocks, used, avail, capacity, mount;
    if (!(fields >> fs >> blocks >> used >> avail >> capacity >> mount) || fs == "Filesystem") continue;
    long long kib = 0;
    try {
      kib = std::stoll(avail);
    } catch (...) {
      continue;
    }
    if (kib >= kMinFreeKib || !seen.insert(mount).second) continue;
    problems.push_back("disk full: " + std::to_string(kib / 1024) + " MiB free on " + mount +
                       " (barge needs " + std::to_string(kMinFreeKib / 1024) + " MiB there)");
  }
  return problems;
}

}  // namespace

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  size_t i = 0;
  while (i < s.size() && s[i] == ' ') ++i;
  return s.substr(i);
}

ssh::Command* Controller::Exec(HostState& host, const std::string& line,
                               std::function<void(const Outcome&)> done, bool keep_stdin) {
  auto outcome = std::make_shared<Outcome>();
  outcome->redact = &redact_;
  auto finish = std::make_shared<std::function<void(const Outcome&)>>(std::move(done));
  ssh::CommandCallbacks cb;
  cb.on_stdout = [outcome](std::string_view d) { outcome->out.append(d); };
  cb.on_stderr = [outcome](std::string_view d) { outcome->err.append(d); };
  cb.on_exit = [outcome, finish](const ssh::ExitStatus& st) {
    outcome->exit = st;
    (*finish)(*outcome);
  };
  spdlog::debug("Remote command: start. [host: {}, command: {}]", host.name, redact_(line));
  Result<std::unique_ptr<ssh::Command>> cmd = host.exec->Start(line, std::move(cb));
  if (!cmd.ok()) {
    // Deliver the failure from the loop, like any other outcome.
    outcome->exit.error = cmd.status().message();
    loop_.AddTimer(Clock::now(), [outcome, finish] { (*finish)(*outcome); });
    return nullptr;
  }
  if (!keep_stdin) (*cmd)->CloseStdin();
  host.commands.push_back(std::move(cmd).value());
  return host.commands.back().get();
}

void Controller::ReapCommandsOf(HostState& host) {
  auto& cmds = host.commands;
  cmds.erase(std::remove_if(cmds.begin(), cmds.end(), [](const auto& c) { return c->done(); }),
             cmds.end());
}

void Controller::ReapCommands() {
  for (auto& [index, host] : hosts_) ReapCommandsOf(*host);
  ReapCommandsOf(local_);
}

bool Controller::RunUntil(const std::function<bool()>& finished, Clock::time_point deadline) {
  while (!finished()) {
    auto now = Clock::now();
    if (now >= deadline) return false;
    auto wait = std::min<milliseconds>(milliseconds(200),
                                       std::chrono::duration_cast<milliseconds>(deadline - now));
    loop_.Poll(std::max(wait, milliseconds(1)));
    ReapCommands();
  }
  return true;
}

Status Controller::Connect(const std::vector<size_t>& which) {
  std::vector<ssh::SessionOptions> remote;
  std::vector<size_t> remote_index;
  for (size_t h : which) connect_errors_.erase(h);
  for (size_t h : which) {
    const cluster::Host& host = plan_.hosts[h];
    if (auto old = hosts_.find(h); old != hosts_.end()) retired_.push_back(std::move(old->second));
    auto state = std::make_unique<HostState>();
    state->index = h;
    state->name = HostName(host);
    state->inventory = host;
    state->docker = std::make_unique<DockerCommands>(DockerCommandOf(spec_, host));
    if (host.is_local()) {
      state->exec = std::make_unique<ssh::LocalExecutor>(&loop_);
    } else {
      ssh::SessionOptions o;
      o.host = host.address;
      o.port = host.port ? host.port : spec_.ssh.port;
      o.user = host.user ? host.user : spec_.ssh.user;
      o.identity_file = host.identity_file ? host.identity_file : spec_.ssh.identity_file;
      o.known_hosts_file = spec_.ssh.known_hosts;
      o.config_file = spec_.ssh.config_file;
      o.host_key_checking = spec_.ssh.host_key_checking;
      o.connect_timeout = spec_.ssh.connect_timeout;
      remote.push_back(o);
      remote_index.push_back(h);
    }
    hosts_[h] = std::move(state);
  }
  if (spec_.ssh.host_key_checking == ssh::HostKeyChecking::kOff && !remote.empty()) {
    Say("warning: host_key_checking is off: host keys are not verified, an impostor host would be trusted");
  }
  if (remote.empty()) return Status::Ok();
  Say("connecting to " + std::to_string(remote.size()) + " host(s)");
  auto sessions = ssh::ConnectAll(remote, 32);
  std::vector<std::string> errors;
  for (size_t i = 0; i < sessions.size(); ++i) {
    HostState& state = *hosts_[remote_index[i]];
    if (!sessions[i].ok()) {
      errors.push_back(sessions[i].status().message());
      connect_errors_[remote_index[i]] = sessions[i].status().message();
      continue;
    }
    auto exec = std::make_unique<ssh::SshExecutor>(std::move(sessions[i]).value(), &loop_);
    exec->set_dead_after(spec_.ssh.dead_after);
    HostState* hs = &state;
    exec->set_on_connection_lost([this, hs](const Status& why) { OnHostLost(*hs, why.message()); });
    state.exec = std::move(exec);
  }
  if (!errors.empty()) {
    std::string msg = "cannot connect:";
    for (const auto& e : errors) msg += "\n  " + e;
    return Status::Error(msg);
  }
  return Status::Ok();
}

std::vector<HostState*> Controller::AllHosts() {
  std::vector<HostState*> out;
  for (auto& [h, host] : hosts_) out.push_back(host.get());
  return out;
}

std::vector<HostState*> Controller::ConnectedHosts() {
  std::vector<HostState*> out;
  for (auto& [h, host] : hosts_) {
    if (host->exec) out.push_back(host.get());
  }
  return out;
}

std::string Controller::Bounded(const std::string& line, std::chrono::milliseconds limit) {
  const long long secs = std::max<long long>(1, (limit.count() + 999) / 1000);
  return "timeout -s KILL " + std::to_string(secs) + " sh -c " + ssh::ShellQuote(line);
}

Status Controller::Preflight(const std::vector<HostState*>& targets) {
  // Per host, in parallel: the engine answers; every image the host's nodes
  // need is there (pulled when missing and image_pull allows); GPUs work
  // where asked for; the watchdog is armed. All in one round trip.
  std::map<size_t, std::vector<std::string>> errors;  // by host
  std::map<std::string, std::vector<HostState*>> to_push;  // image → hosts lacking it
  int pending = 0;
  std::map<HostState*, int> open;  // checks in flight, by host
  progress_->Begin("preflight", static_cast<int>(targets.size()));
  // Runs one check; the host is done (progress) when its last one is.
  std::function<void(HostState*, const std::string&, std::function<void(const Outcome&)>)> check =
      [&](HostState* hs, const std::string& line, std::function<void(const Outcome&)> cb) {
        ++pending;
        ++open[hs];
        Exec(*hs, line, [&, hs, cb = std::move(cb)](const Outcome& o) {
          cb(o);
          --pending;
          if (--open[hs] > 0) return;
          auto it = errors.find(hs->index);
          if (it == errors.end()) {
            progress_->Done(hs->name, true);
          } else {
            progress_->Done(hs->name, false, it->second.front());
          }
        });
      };
  for (HostState* hs : targets) {
    const size_t h = hs->index;
    std::set<std::string> images;
    const container::ContainerSpec* gpu_spec = nullptr;
    for (const auto& n : plan_.nodes) {
      if (n.host_index != h) continue;
      images.insert(n.container.image);
      if (n.container.options.gpus && !gpu_spec) gpu_spec = &n.container;
    }
    check(hs, Bounded(hs->docker->Version(), spec_.ssh.dead_after), [&, hs](const Outcome& o) {
      if (o.exit.known() && o.exit.code == 137 && o.err.empty()) {
        errors[hs->index].push_back("the Docker engine did not answer within " +
                                    std::to_string(spec_.ssh.dead_after.count() / 1000) +
                                    " s (ssh.dead_after)");
      } else if (!o.ok()) {
        errors[hs->index].push_back("docker is not reachable: " + o.Reason());
      }
    });
    for (const std::string& image : images) {
      if (spec_.image_pull == ImagePull::kAlways) {
        check(hs, hs->docker->Pull(image) + " >/dev/null && " + hs->docker->ImageId(image),
              [&, hs, image](const Outcome& o) {
                if (o.ok()) {
                  hs->image_ids[image] = Trim(o.out);
                } else {
                  errors[hs->index].push_back("cannot pull " + image + " (image_pull: always): " +
                                              o.Reason());
                }
              });
        continue;
      }
      check(hs, hs->docker->ImageId(image), [&, hs, image](const Outcome& o) {
        if (o.ok()) {
          hs->image_ids[image] = Trim(o.out);
        } else if (spec_.image_pull == ImagePull::kPush) {
          to_push[image].push_back(hs);
        } else if (spec_.image_pull == ImagePull::kNever) {
          errors[hs->index].push_back("image " + image + " is not present (image_pull: never): " +
                                      o.Reason());
        } else {
          Say(hs->name + ": pulling " + image);
          check(hs, hs->docker->Pull(image), [&, hs, image](const Outcome& pulled) {
            if (!pulled.ok()) {
              errors[hs->index].push_back("image " + image + " is missing and cannot be pulled: " +
                                          pulled.Reason());
              return;
            }
            check(hs, hs->docker->ImageId(image), [&, hs, image](const Outcome& again) {
              if (again.ok()) {
                hs->image_ids[image] = Trim(again.out);
              } else {
                errors[hs->index].push_back("image " + image + ": " + again.Reason());
              }
            });
          });
        }
      });
    }
    if (gpu_spec) {
      check(hs, hs->docker->GpuProbe(*gpu_spec), [&, hs](const Outcome& o) {
        if (!o.ok()) {
          errors[hs->index].push_back("GPUs requested but unavailable: " + o.Reason());
          return;
        }
        int count = 0;
        std::istringstream lines(o.out);
        std::string line;
        while (std::getline(lines, line)) count += line.rfind("GPU ", 0) == 0;
        input_.detected_gpus[hs->index] = count;
      });
    }
    // barge's command lines are POSIX sh: the login shell that sshd runs
    // them with must be one.
    check(hs, "echo barge-posix-$((6*7))", [&, hs](const Outcome& o) {
      if (!o.exit.known() || Trim(o.out) == "barge-posix-42") return;
      std::string said = Trim(o.err.empty() ? o.out : o.err);
      errors[hs->index].push_back(
          kNotPosix + std::string(" (it answered ") +
          (said.empty() ? "nothing" : "'" + said.substr(0, 120) + "'") +
          " to `echo barge-posix-$((6*7))`); barge's commands need sh syntax: make the user's "
          "shell /bin/sh or /bin/bash (chsh -s /bin/bash USER)");
    });
    // Room for the job's directory and the engine's containers.
    check(hs, "df -Pk /tmp \"$(" + hs->docker->Line({"info", "--format", "{{.DockerRootDir}}"}) +
                  " 2>/dev/null || echo /)\" 2>/dev/null",
          [&, hs](const Outcome& o) {
            if (!o.exit.known()) return;
            for (const std::string& problem : LowDiskSpace(o.out)) errors[hs->index].push_back(problem);
          });
    // The watchdog is armed before anything starts.
    // Armed or not, disarming removes whatever part of it was made (a full
    // disk can leave the directory without the watchdog).
    hs->watchdog_armed = true;
    check(hs, ArmWatchdogCommand(WatchdogFor(*hs)), [&, hs](const Outcome& o) {
      if (!o.ok()) {
        errors[hs->index].push_back("cannot arm the watchdog: " + o.Reason());
      }
    });
  }
  // The rendezvous port must be free on the head's host when the head
  // shares the host's network (otherwise it lives in the container's own).
  const cluster::NodePlan& head = plan_.nodes[0];
  HostState* head_host = hosts_[head.host_index].get();
  if (head.container.options.network && *head.container.options.network == "host" &&
      std::find(targets.begin(), targets.end(), head_host) != targets.end()) {
    const int port = spec_.rendezvous.port;
    check(head_host, "cat /proc/net/tcp /proc/net/tcp6", [&, head_host, port](const Outcome& o) {
      if (container::ParseListeningPorts(o.out).count(port)) {
        errors[head_host->index].push_back("rendezvous port " + std::to_string(port) +
                                           " is already in use on the head's host (rendezvous.port)");
      }
    });
  }
  bool done = RunUntil([&] { return pending == 0 || interrupts_ > 0; },
                       Clock::now() + spec_.ssh.connect_timeout + seconds(120));
  progress_->End();
  if (interrupts_ > 0) return Status::Error("interrupted during preflight");
  RenewLeases();
  if (!done) return Status::Error("preflight did not finish in time");
  for (const auto& [h, why] : connect_errors_) {
    errors[h].insert(errors[h].begin(), why);
  }
  // On a host whose login shell is not POSIX every other check failed
  // because of it: report only the cause.
  for (auto& [h, list] : errors) {
    auto shell = std::find_if(list.begin(), list.end(), [](const std::string& e) {
      return e.rfind(kNotPosix, 0) == 0;
    });
    if (shell != list.end()) list = {*shell};
  }
  for (const auto& [image, push_targets] : to_push) {
    if (!errors.empty()) break;  // don't push to a job that cannot start
    Push(image, push_targets, &errors);
  }
  // One stale tag on one node is a classic silent failure: every host must
  // run the same image ID for the same reference.
  std::map<std::string, std::map<std::string, std::vector<std::string>>> ids;  // image → id → hosts
  for (auto& [h, host] : hosts_) {
    for (const auto& [image, id] : host->image_ids) ids[image][id].push_back(host->name);
  }
  for (const auto& [image, by_id] : ids) {
    if (by_id.size() > 1) {
      std::string msg = "image " + image + " differs between hosts:";
      for (const auto& [id, names] : by_id) {
        msg += " " + id.substr(0, 19) + " on";
        for (const auto& n : names) msg += " " + n;
        msg += ";";
      }
      msg.pop_back();
      errors[hosts_.begin()->first].push_back(msg);
    } else if (!by_id.empty()) {
      Say("image " + image + " is " + by_id.begin()->first.substr(0, 19) + " on " +
          std::to_string(by_id.begin()->second.size()) + " host(s)");
    }
  }
  if (errors.empty()) return Status::Ok();
  // One table: every problem of every host, the host named on each row.
  size_t width = 4;
  for (const auto& [h, list] : errors) width = std::max(width, hosts_[h]->name.size());
  std::string msg = "preflight failed on " + std::to_string(errors.size()) + " of " +
                    std::to_string(hosts_.size()) + " host(s); nothing was started:\n  " +
                    std::string("HOST") + std::string(width - 4 + 2, ' ') + "PROBLEM";
  for (const auto& [h, list] : errors) {
    for (const auto& e : list) {
      msg += "\n  " + hosts_[h]->name + std::string(width - hosts_[h]->name.size() + 2, ' ') + e;
    }
  }
  return Status::Error(msg);
}

bool Controller::ReadyLineMatches(std::string_view text) const {
  // std::regex recurses per character matched: a long line with a pattern
  // like ".*ready" would overflow the stack. Readiness lines are short; only
  // their first kReadyScan bytes are searched.
  constexpr size_t kReadyScan = 4096;
  std::string_view head = text.substr(0, kReadyScan);
  return std::regex_search(head.begin(), head.end(), *ready_regex_);
}

void Controller::StreamLogs(NodeState& node) {
  const int rank = node.plan->rank;
  NodeState* self = &node;
  LogSink* sink = sink_.get();  // this attempt's (kept alive after it)
  auto on_line = [this, rank, self, sink](Stream stream) {
    return [this, rank, self, sink, stream](std::string_view line, bool continuation) {
      if (continuation) {
        sink->Line(rank, stream, "", line);
        return;
      }
      Result<container::TimestampedLine> parsed = container::ParseTimestampedLine(line);
      if (parsed.ok() && self->skip_through_ns && parsed->ns <= *self->skip_through_ns) return;
      std::string_view text = parsed.ok() ? parsed->text : line;
      sink->Line(rank, stream, parsed.ok() ? parsed->timestamp : "", text);
      if (self->retired) return;
      if (rank == 0 && ready_regex_ && !head_logged_ready_ &&
          ReadyLineMatches(text)) {
        head_logged_ready_ = true;
      }
    };
  };
  node.out_lines = std::make_unique<container::LineSplitter>(on_line(Stream::kStdout));
  node.err_lines = std::make_unique<container::LineSplitter>(on_line(Stream::kStderr));
  node.logs_open = true;
  ssh::CommandCallbacks cb;
  NodeState* n = &node;
  cb.on_stdout = [n](std::string_view d) { n->out_lines->Feed(d); };
  cb.on_stderr = [n](std::string_view d) { n->err_lines->Feed(d); };
  cb.on_exit = [this, n](const ssh::ExitStatus& st) {
    n->out_lines->Flush();
    n->err_lines->Flush();
    n->logs_open = false;
    if (!st.known() && !n->retired && !n->host->lost) {
      Say(n->host->name + ": log stream of node " + std::to_string(n->plan->rank) + " lost: " + st.error);
    }
  };
  const std::string line =
      node.skip_through_ns
          ? node.host->docker->LogsSince(node.plan->container.name,
                                         container::FormatTimestamp(*node.skip_through_ns))
          : node.host->docker->Logs(node.plan->container.name);
  Result<std::unique_ptr<ssh::Command>> cmd = node.host->exec->Start(line, std::move(cb));
  if (!cmd.ok()) {
    node.logs_open = false;
    Say(node.host->name + ": cannot stream logs: " + cmd.status().message());
    return;
  }
  (*cmd)->CloseStdin();
  node.host->commands.push_back(std::move(cmd).value());
}

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

}  // namespace

void Controller::WatchExit(NodeState& node) {
  NodeState* n = &node;
  // `docker wait` returns as soon as the container exits; inspect then says
  // how (OOM kill, signal, code).
  const std::string& name = node.plan->container.name;
  const std::string line = node.host->docker->Wait(name) + " >/dev/null; " +
                           node.host->docker->Line(container::InspectArgs({name}));
  Exec(*node.host, line, [this, n](const Outcome& o) {
    if (n->retired) return;
    if (!o.exit.known() || n->host->lost) {
      // The host's session died under it: the host is lost (OnHostLost),
      // how the node ended is unknown.
      n->phase = NodePhase::kLost;
      return;
    }
    n->phase = NodePhase::kExited;
    Result<std::vector<container::ContainerState>> st = container::ParseContainerInspect(o.out);
    if (o.ok() && st.ok() && st->size() == 1) {
      n->exit_code = (*st)[0].exit_code;
      n->end_reason = EndReason((*st)[0]);
    } else {
      n->exit_code.reset();
      n->end_reason = "unknown: " + (o.ok() ? st.status().message() : o.Reason());
      Say(n->host->name + ": cannot learn how node " + std::to_string(n->plan->rank) +
          " ended: " + n->end_reason);
    }
    const std::string rank = std::to_string(n->plan->rank);
    RecordNode(*n);
    Record(store_->AddEvent(plan_.job_id, event::kNodeExited, n->host->name,
                            redact_("rank " + rank + " (" + n->plan->role + ") ended: " + n->end_reason)));
    const bool failed = !n->exit_code || *n->exit_code != 0;
    if (n->plan->rank == 0) {
      Say("head ended: " + n->end_reason);
      // A head that fails is a node failure the restart policy may cover;
      // otherwise its code is the job's.
      Fault fault{Cause::kNodeFailed, n->host->name,
                  "node 0 (head) on " + n->host->name + " ended: " + n->end_reason,
                  n->exit_code.value_or(kExitBargeFailure), 0};
      if (failed && !tearing_down_ && !fault_ && Restartable(fault)) NoteFault(std::move(fault));
      return;
    }
    if (tearing_down_) return;
    if (failed && spec_.on_worker_exit == OnWorkerExit::kFail) {
      NoteFault({Cause::kNodeFailed, n->host->name,
                 "node " + rank + " (" + n->plan->role + ") on " + n->host->name + " ended: " + n->end_reason,
                 n->exit_code.value_or(kExitBargeFailure), n->plan->rank});
    } else {
      Say("node " + rank + " (" + n->plan->role + ") on " + n->host->name + " ended: " + n->end_reason);
    }
  });
}

Status Controller::StartNodes(const std::vector<NodeState*>& nodes) {
  std::vector<std::string> errors;
  int pending = 0;
  const bool head = nodes.size() == 1 && nodes[0]->plan->rank == 0;
  progress_->Begin(head ? "starting the head" : "starting workers", static_cast<int>(nodes.size()));
  for (NodeState* n : nodes) {
    n->phase = NodePhase::kStarting;
    n->run_attempted = true;
    ++pending;
    Exec(*n->host, n->host->docker->Run(n->plan->container), [&, n](const Outcome& o) {
      --pending;
      const std::string node = std::to_string(n->plan->rank) + " on " + n->host->name;
      if (!o.ok()) {
        errors.push_back("node " + std::to_string(n->plan->rank) + " (" + n->plan->role + ") on " +
                         n->host->name + " did not start: " + o.Reason());
        n->phase = NodePhase::kExited;
        progress_->Done(node, false, o.Reason());
        return;
      }
      progress_->Done(node, true);
      n->phase = NodePhase::kRunning;
      n->container_id = Trim(o.out);
      RecordNode(*n);
      StreamLogs(*n);
      WatchExit(*n);
    });
  }
  bool done = RunUntil([&] { return pending == 0; }, Clock::now() + seconds(300));
  progress_->End();
  if (!done) errors.push_back("starting containers did not finish in time");
  if (errors.empty()) return Status::Ok();
  std::string msg;
  for (const auto& e : errors) msg += (msg.empty() ? "" : "\n  ") + e;
  return Status::Error(msg);
}

Status Controller::WaitReady(NodeState& head) {
  using Kind = cluster::ReadinessProbe::Kind;
  const cluster::ReadinessProbe& probe = plan_.head_ready;
  if (probe.kind == Kind::kRunning) return Status::Ok();
  std::string what = probe.kind == Kind::kTcpPort ? "port " + std::to_string(probe.tcp_port) + " open"
                     : probe.kind == Kind::kLog   ? "a log line matching /" + probe.log_regex + "/"
                                                  : "`" + probe.command + "` succeeding";
  Say("waiting for the head to be ready (" + what + ")");

  // Shared with in-flight probe commands and timers, which may outlive this
  // call; `stop` silences them.
  struct ProbeState {
    bool ready = false;
    bool stop = false;
  };
  auto state = std::make_shared<ProbeState>();
  std::function<void()> probe_once;
  auto schedule = [this, state, &probe_once] {
    if (state->stop) return;
    loop_.AddTimer(Clock::now() + milliseconds(250), [state, &probe_once] {
      if (!state->stop) probe_once();
    });
  };
  probe_once = [&, state] {
    if (state->stop || head.phase != NodePhase::kRunning) return;
    std::string line = probe.kind == Kind::kTcpPort
                           ? head.host->docker->ListeningPorts(head.plan->container.name)
                           : head.host->docker->ExecShell(head.plan->container.name, probe.command);
    Exec(*head.host, line, [&, state](const Outcome& o) {
      if (state->stop) return;
      if (probe.kind == Kind::kTcpPort) {
        if (container::ParseListeningPorts(o.out).count(probe.tcp_port)) state->ready = true;
      } else if (o.ok()) {
        state->ready = true;
      }
      if (!state->ready) schedule();
    });
  };
  if (probe.kind != Kind::kLog) probe_once();
  RunUntil(
      [&] {
        return state->ready || head_logged_ready_ || head.phase != NodePhase::kRunning ||
               interrupts_ > 0 || fault_.has_value();
      },
      Clock::now() + probe.timeout);
  state->stop = true;
  if (interrupts_ > 0) return Status::Error("interrupted while waiting for the head");
  if (state->ready || head_logged_ready_) {
    Say("head is ready");
    Record(store_->AddEvent(plan_.job_id, event::kHeadReady, head.host->name, what));
    return Status::Ok();
  }
  // It finished (the job completes), or a fault ends the attempt.
  if (head.phase != NodePhase::kRunning || fault_) return Status::Ok();
  std::string msg = "the head was not ready after " +
                    std::to_string(std::chrono::duration_cast<milliseconds>(probe.timeout).count() / 1000.0).substr(0, 5) +
                    " s (waiting for " + what + ")";
  std::vector<std::string> tail = sink_->Tail(0, 10);
  msg += tail.empty() ? "; it printed nothing" : "; its last lines:";
  for (const auto& l : tail) msg += "\n  | " + l;
  return Status::Error(msg);
}

void Controller::Teardown(bool graceful, bool final) {
  // Stop what still runs, let output drain, then remove every container of
  // the job that may exist, host by host in parallel. A lost host is left
  // alone: its watchdog removes what it holds once the lease lapses (or
  // `barge reap` does when it comes back).
  tearing_down_ = true;
  ++generation_;  // the monitors stop
  Record(store_->SetStatus(plan_.job_id, JobStatus::kCompleting));
  std::map<HostState*, std::vector<std::string>> running, attempted;
  for (auto& n : nodes_) {
    if (!n->run_attempted || n->host->lost) continue;
    attempted[n->host].push_back(n->plan->container.name);
    if (n->phase == NodePhase::kRunning) running[n->host].push_back(n->plan->container.name);
  }
  const int grace = static_cast<int>(
      std::chrono::duration_cast<seconds>(spec_.stop_grace).count());
  if (!running.empty()) {
    size_t count = 0;
    for (auto& [host, names] : running) count += names.size();
    Say(std::string(graceful ? "stopping " : "killing ") + std::to_string(count) + " container(s)");
    for (auto& [host, names] : running) {
      Exec(*host, graceful ? host->docker->Stop(names, grace) : host->docker->Kill(names),
           [](const Outcome&) {});
    }
  }
  auto drained = [&] {
    return std::all_of(nodes_.begin(), nodes_.end(), [](const auto& n) {
      return !n->run_attempted || n->host->lost ||
             (n->phase != NodePhase::kRunning && !n->logs_open);
    });
  };
  int interrupts_before = interrupts_;
  RunUntil([&] { return drained() || (graceful && interrupts_ > interrupts_before); },
           Clock::now() + spec_.stop_grace + seconds(15));
  // Last copy of the artifacts: the containers have stopped but exist.
  FinalArtifacts();
  int pending = 0;
  for (auto& [host, names] : attempted) {
    ++pending;
    HostState* hs = host;
    Exec(*host, host->docker->Remove(names), [&, hs](const Outcome& o) {
      --pending;
      if (!o.ok()) Say(hs->name + ": removing containers failed: " + o.Reason());
    });
  }
  if (!RunUntil([&] { return pending == 0; }, Clock::now() + seconds(60))) {
    Say("removing containers did not finish in time; run `docker ps -a --filter label=barge.job=" +
        plan_.job_id + "` on the hosts");
  }
  if (final) RunTeardownHooks();
  Record(store_->AddEvent(plan_.job_id, event::kTornDown, std::nullopt, final ? "" : "before a restart"));
}

Status Controller::Launch() {
  // Plan this attempt (the restart count and replaced hosts change it).
  input_.restart_count = restart_count_;
  Result<cluster::Plan> plan = cluster::MakePlan(input_);
  if (!plan.ok()) return plan.status();
  for (auto& n : nodes_) n->retired = true;
  for (auto& n : nodes_) old_nodes_.push_back(std::move(n));
  nodes_.clear();
  if (sink_) old_sinks_.push_back(std::move(sink_));
  old_plans_.push_back(std::move(plan_));
  plan_ = std::move(plan).value();
  fault_.reset();
  tearing_down_ = false;
  head_logged_ready_ = false;

  const std::string run_dir = options_.state_dir + "/runs/" + plan_.job_id;
  std::vector<LogSink::Node> sink_nodes;
  for (const auto& n : plan_.nodes) {
    sink_nodes.push_back({n.rank, n.role, HostName(plan_.hosts[n.host_index])});
    auto state = std::make_unique<NodeState>();
    state->plan = &n;
    state->host = hosts_[n.host_index].get();
    nodes_.push_back(std::move(state));
  }
  Result<std::unique_ptr<LogSink>> sink = LogSink::Open(run_dir, sink_nodes, options_.echo);
  if (!sink.ok()) return sink.status();
  sink_ = std::move(sink).value();
  sink_->set_echo_guard([this] { progress_->Clear(); }, [this] { progress_->Redraw(); });
  if (restart_count_ == 0) {
    Say("job " + plan_.job_id + " (" + plan_.job_name + "): " + std::to_string(nodes_.size()) +
        " node(s); logs in " + run_dir);
  }

  // The head first; workers only once it is ready.
  NodeState& head = *nodes_[0];
  Record(store_->SetStatus(plan_.job_id, JobStatus::kStarting));
  StartMonitors();
  if (Status s = StartNodes({&head}); !s.ok()) return s;
  if (Status s = WaitReady(head); !s.ok()) return s;
  std::vector<NodeState*> workers;
  for (size_t i = 1; i < nodes_.size(); ++i) workers.push_back(nodes_[i].get());
  if (!workers.empty() && head.phase == NodePhase::kRunning && interrupts_ == 0 && !fault_) {
    if (Status s = StartNodes(workers); !s.ok()) return s;
  }
  Record(store_->SetStatus(plan_.job_id, JobStatus::kRunning, std::nullopt,
                           std::to_string(nodes_.size()) + " node(s)" +
                               (restart_count_ ? ", restart " + std::to_string(restart_count_) : "")));
  if (restart_count_ == 0) ScheduleArtifacts();

  // Running: until the head's main process exits, a fault, an interrupt or
  // the timeout.
  const Clock::time_point deadline =
      spec_.timeout ? started_ + *spec_.timeout : Clock::time_point::max();
  bool ended = RunUntil(
      [&] {
        return head.phase == NodePhase::kExited || head.phase == NodePhase::kLost ||
               fault_.has_value() || interrupts_ > 0;
      },
      deadline);
  if (!ended) timed_out_ = true;
  return Status::Ok();
}

int Controller::Execute() {
  SignalWatcher signals(&loop_, [this](int signo) {
    ++interrupts_;
    Say(std::string(interrupts_ == 1 ? "interrupted (signal " : "interrupted again (signal ") +
        std::to_string(signo) + (interrupts_ == 1 ? "): stopping the job" : "): killing the job"));
  });

  // Hosts that cannot be reached are reported with the other hosts'
  // preflight problems, in one table.
  if (Status s = Connect(); !s.ok() && connect_errors_.empty()) return Fail(s.message(), kExitBargeFailure);
  loop_.Poll(milliseconds(0));  // deliver a signal that came during the connects
  if (interrupts_ > 0) return kExitInterrupted;
  // registry: every host logs in before preflight checks or pulls images.
  if (Status s = Login(AllHosts()); !s.ok()) {
    return Fail(s.message(), interrupts_ > 0 ? kExitInterrupted : kExitBargeFailure);
  }
  if (Status s = Preflight(ConnectedHosts()); !s.ok()) {
    return Fail(s.message(), interrupts_ > 0 ? kExitInterrupted : kExitBargeFailure);
  }
  const std::string run_dir = options_.state_dir + "/runs/" + plan_.job_id;
  if (Status s = MakeDirs(run_dir); !s.ok()) return Fail(s.message(), kExitBargeFailure);
  if (plan_.head_ready.kind == cluster::ReadinessProbe::Kind::kLog) {
    try {
      ready_regex_.emplace(plan_.head_ready.log_regex, std::regex::ECMAScript);
    } catch (const std::regex_error& e) {
      return Fail("roles.head.ready.log: invalid regex: " + std::string(e.what()),
                  kExitBargeFailure);
    }
  }
  if (Status s = Upload(AllHosts()); !s.ok()) return Fail(s.message(), kExitBargeFailure);

  for (;;) {
    // Live hosts may have filled in GPU counts; restarts change hosts: the
    // plan is made again for every attempt.
    if (Status s = Launch(); !s.ok()) {
      // No partial launch: whatever started is removed.
      Fail(s.message(), interrupts_ > 0 ? kExitInterrupted : kExitBargeFailure);
      Teardown(interrupts_ < 2);
      return interrupts_ > 0 ? kExitInterrupted : kExitBargeFailure;
    }
    if (timed_out_) {
      Fail("the job reached its timeout (" +
               std::to_string(std::chrono::duration_cast<seconds>(*spec_.timeout).count()) +
               " s): stopping it",
           kExitTimedOut);
      Teardown(interrupts_ < 2);
      return interrupts_ > 0 ? kExitInterrupted : kExitTimedOut;
    }
    if (interrupts_ > 0) {
      Teardown(interrupts_ < 2);
      return kExitInterrupted;
    }
    NodeState& head = *nodes_[0];
    if (!fault_ && head.phase == NodePhase::kExited) {
      Teardown(true);
      if (!head.exit_code) return Fail("the head's exit code is unknown", kExitBargeFailure);
      return *head.exit_code;
    }
    // A fault ended the attempt.
    const Fault fault = fault_.value_or(Fault{Cause::kHostLost, head.host->name, "the head's host is lost"});
    const bool again = Restartable(fault);
    Teardown(/*graceful=*/interrupts_ < 2, /*final=*/!again);
    if (!again) {
      if (fault.cause == Cause::kNodeFailed && fault.rank == 0) {
        Fail("job failed: " + fault.detail, fault.exit_code);
        return fault.exit_code;
      }
      std::string msg = "job failed: " + fault.detail;
      if (spec_.restart) {
        msg += restart_count_ >= spec_.restart->max_restarts
                   ? " (no restarts left: max_restarts " + std::to_string(spec_.restart->max_restarts) + ")"
                   : std::string(" (restart.on does not list ") + CauseName(fault.cause) + ")";
      }
      return Fail(msg, kExitBargeFailure);
    }
    ++restart_count_;
    const std::string why = std::string(CauseName(fault.cause)) + ": " + fault.detail;
    Record(store_->NoteRestart(plan_.job_id, redact_("restart " + std::to_string(restart_count_) + " of " +
                                                 std::to_string(spec_.restart->max_restarts) + " after " + why)));
    Say("restarting the job (restart " + std::to_string(restart_count_) + " of " +
        std::to_string(spec_.restart->max_restarts) + ") in " +
        std::to_string(std::chrono::duration_cast<milliseconds>(spec_.restart->backoff).count() / 1000.0).substr(0, 4) +
        " s");
    RunUntil([&] { return interrupts_ > 0; }, Clock::now() + spec_.restart->backoff);
    if (interrupts_ == 0) {
      if (Status s = ReplaceHosts(); !s.ok()) {
        tearing_down_ = true;
        RunTeardownHooks();
        return Fail("job failed: " + why + "; cannot restart: " + s.message(), kExitBargeFailure);
      }
    }
    if (interrupts_ > 0) {
      RunTeardownHooks();
      return kExitInterrupted;
    }
  }
}

void Controller::RecordNode(const NodeState& node) {
  NodeRecord r;
  r.job_id = plan_.job_id;
  r.rank = node.plan->rank;
  r.role = node.plan->role;
  r.host = node.host->name;
  r.container_name = node.plan->container.name;
  r.container_id = node.container_id;
  auto id = node.host->image_ids.find(node.plan->container.image);
  if (id != node.host->image_ids.end()) r.image_id = id->second;
  r.exit_code = node.exit_code;
  r.log_path = sink_ ? sink_->path(node.plan->rank) : "";
  Record(store_->UpsertNode(r));
}

bool Controller::Prepare(bool with_store) {
  Result<cluster::Plan> plan = cluster::MakePlan(input_);
  if (!plan.ok()) {
    Say(plan.status().message());
    return false;
  }
  plan_ = std::move(plan).value();
  if (!with_store) return true;
  Result<std::unique_ptr<JobStore>> store = JobStore::Open(options_.state_dir);
  if (!store.ok()) {
    Say(store.status().message());
    return false;
  }
  store_ = std::move(store).value();
  return true;
}

int Controller::Run() {
  if (!Prepare(/*with_store=*/true)) return kExitBargeFailure;
  JobRecord job;
  job.id = plan_.job_id;
  job.name = plan_.job_name;
  // The job file never holds a secret's value (they come from files and
  // the environment); masked all the same.
  job.spec = redact_(options_.spec_text);
  job.status = JobStatus::kPreflight;
  job.created = WallNow();
  job.controller_pid = static_cast<int>(getpid());
  job.nodes = static_cast<int>(plan_.nodes.size());
  job.run_dir = options_.state_dir + "/runs/" + plan_.job_id;
  if (Status s = store_->CreateJob(job); !s.ok()) {
    Say(s.message());
    return kExitBargeFailure;
  }

  const int code = Execute();
  Logout();
  DisarmWatchdogs();

  JobStatus final_status = JobStatus::kFailed;
  std::string detail = final_detail_;
  if (code == kExitInterrupted && interrupts_ > 0) {
    final_status = JobStatus::kCancelled;
    detail = "interrupted";
  } else if (timed_out_) {
    final_status = JobStatus::kTimedOut;
  } else if (code == 0 && final_detail_.empty()) {
    final_status = JobStatus::kSucceeded;
  } else if (final_detail_.empty()) {
    detail = "head exited with code " + std::to_string(code);
  }
  Record(store_->SetStatus(plan_.job_id, final_status, code, redact_(detail)));
  return code;
}

}  // namespace internal

using internal::Controller;

int AttachToOrphan(const JobSpec& spec, const cluster::PlanInput& input,
                   const ControllerOptions& options, const std::map<int, int64_t>& kept_through_ns) {
  Controller controller(spec, input, options);
  return controller.AttachOrphan(kept_through_ns);
}

int ReapJobHosts(const JobSpec& spec, const cluster::PlanInput& input,
                 const ControllerOptions& options,
                 const std::function<bool(const std::string&)>& is_live) {
  Controller controller(spec, input, options);
  return controller.Reap(is_live);
}

int ExecInJobNode(const JobSpec& spec, const cluster::PlanInput& input,
                  const ControllerOptions& options, int rank, const std::vector<std::string>& argv) {
  Controller controller(spec, input, options);
  return controller.ExecInNode(rank, argv);
}

int TearDownJob(const JobSpec& spec, const cluster::PlanInput& input,
                const ControllerOptions& options) {
  Controller controller(spec, input, options);
  return controller.TearDownOrphan();
}

int RunJob(const JobSpec& spec, const cluster::PlanInput& input, const ControllerOptions& options) {
  Controller controller(spec, input, options);
  return controller.Run();
}

}  // namespace barge::runner
