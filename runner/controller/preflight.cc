// preflight: per host, in parallel and before anything starts, the engine
// answers, every image is there (pulled or pushed when image_pull says so),
// GPUs work where asked for, the login shell is POSIX, the disks have room,
// the rendezvous port is free and the watchdog is armed. Every host's
// problems are reported together, in one table.
#include "runner/controller/preflight.h"

#include <algorithm>
#include <cstdlib>
#include <set>
#include <sstream>

#include "container/proc_net.h"
#include "runner/controller/controller.h"
#include "runner/preflight_script.h"

namespace barge::runner {

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

std::string ProblemTable(
    const std::vector<std::pair<std::string, std::vector<std::string>>>& problems, size_t hosts) {
  size_t width = 4;
  for (const auto& [host, list] : problems) width = std::max(width, host.size());
  std::string msg = "preflight failed on " + std::to_string(problems.size()) + " of " +
                    std::to_string(hosts) + " host(s); nothing was started:\n  HOST" +
                    std::string(width - 4 + 2, ' ') + "PROBLEM";
  for (const auto& [host, list] : problems) {
    for (const auto& e : list) msg += "\n  " + host + std::string(width - host.size() + 2, ' ') + e;
  }
  return msg;
}

namespace internal {

namespace {

// BARGE_ENGINE_API=0 keeps every Docker call a CLI command line (to compare
// the two, or to rule the API out when diagnosing).
bool EngineApiWanted() {
  const char* v = std::getenv("BARGE_ENGINE_API");
  return v == nullptr || std::string(v) != "0";
}

}  // namespace

Status Controller::Preflight(const std::vector<HostState*>& targets) {
  // Every callback captures this frame: the group on it drops them all if
  // the wait ends early (an interrupt, the deadline).
  CommandGroup group(&loop_, &redact_);
  std::map<size_t, std::vector<std::string>> errors;  // by host
  std::map<HostState*, std::string> sockets;  // each engine's unix socket, for the Engine API
  // Hosts whose login shell is not POSIX, with that problem: every other
  // check there failed because of it, so it is the only one reported.
  std::map<size_t, std::string> shell_problems;
  std::map<std::string, std::vector<HostState*>> to_push;  // image → hosts lacking it
  std::map<HostState*, int> open;  // commands in flight, by host
  // A run whose hosts all failed to connect has no preflight to show.
  if (!targets.empty()) {
    observer_.StepBegan(Phase::kPreflight, "preflight", static_cast<int>(targets.size()));
  }
  for (HostState* hs : targets) Began(hs->PhaseOf(Phase::kPreflight));
  // Runs one command; the host's preflight has ended when its last one has.
  std::function<void(HostState*, const std::string&, std::function<void(const Outcome&)>)> check =
      [&](HostState* hs, const std::string& line, std::function<void(const Outcome&)> cb) {
        ++open[hs];
        group.Run(*hs->exec, line, [&, hs, cb = std::move(cb)](const Outcome& o) {
          cb(o);
          if (--open[hs] > 0) return;
          auto it = errors.find(hs->index);
          if (it == errors.end()) {
            Ended(hs->PhaseOf(Phase::kPreflight), true);
          } else {
            Ended(hs->PhaseOf(Phase::kPreflight), false, it->second.front());
          }
        });
      };
  // What a check printed, as a problem says it (secrets redacted, bounded).
  auto said = [this](const std::string& text) {
    std::string t = redact_(text);
    if (t.size() > 300) t = t.substr(0, 300) + "...";
    return t.empty() ? std::string("no output") : t;
  };
  const std::string engine_bound =
      "the Docker engine did not answer within " + std::to_string(spec_.ssh.engine_timeout.count() / 1000) +
      " s, " + std::to_string(spec_.ssh.engine_misses) +
      " time(s) in a row (ssh.engine_timeout, ssh.engine_misses)";
  // The rendezvous port must be free on the head's host when the head
  // shares the host's network (otherwise it lives in the container's own).
  const cluster::NodePlan& head = plan_.nodes[0];
  const bool head_on_host_network = head.container.options.network && *head.container.options.network == "host";
  for (HostState* hs : targets) {
    const size_t h = hs->index;
    PreflightChecks checks;
    std::set<std::string> images;
    const container::ContainerSpec* gpu_spec = nullptr;
    for (const auto& n : plan_.nodes) {
      if (n.host_index != h) continue;
      images.insert(n.container.image);
      if (n.container.options.gpus && !gpu_spec) gpu_spec = &n.container;
    }
    checks.images.assign(images.begin(), images.end());
    checks.pull_always = spec_.image_pull == ImagePull::kAlways;
    if (gpu_spec) checks.gpu_probe = hs->docker->GpuProbe(*gpu_spec);
    checks.tcp_tables = head_on_host_network && h == head.host_index;
    checks.arm_watchdog = ArmWatchdogCommand(WatchdogFor(*hs));
    checks.hold = TakeHoldsLine(*hs);
    checks.engine_timeout = spec_.ssh.engine_timeout;
    checks.engine_misses = spec_.ssh.engine_misses;
    checks.engine_socket = hs->docker->plain() && EngineApiWanted();
    // Armed or not, disarming removes whatever part of the watchdog was made
    // (a full disk can leave the directory without it).
    hs->watchdog_armed = true;
    check(hs, PreflightScript(*hs->docker, checks), [&, hs, checks](const Outcome& o) {
      std::vector<std::string>& problems = errors[hs->index];
      const PreflightReply reply = ParsePreflightReply(o.out);
      if (!o.exit.known()) {
        problems.push_back("preflight did not finish: " + o.Reason());
      } else if (!reply.posix_shell) {
        // barge's command lines are POSIX sh: the login shell that sshd
        // runs them with must be one.
        std::string said = Trim(o.err.empty() ? reply.first_line : o.err);
        shell_problems[hs->index] =
            kNotPosixShell + std::string(" (it answered ") +
            (said.empty() ? "nothing" : "'" + said.substr(0, 120) + "'") + " to `" + PosixShellProbe() +
            "`); barge's commands need sh syntax: make the user's "
            "shell /bin/sh or /bin/bash (chsh -s /bin/bash USER)";
        problems.push_back(shell_problems[hs->index]);
      }
      if (!problems.empty()) return;
      auto section = [&](const std::string& name) -> const PreflightSection* {
        const PreflightSection* s = reply.Find(name);
        if (!s) problems.push_back("preflight's " + name + " check did not report: " + o.Reason());
        return s;
      };
      if (const PreflightSection* w = section("watchdog"); w && w->exit != 0) {
        problems.push_back("cannot arm the watchdog: " + (w->text.empty() ? "exit " + std::to_string(w->exit) : w->text));
      }
      if (const PreflightSection* held = section("hold")) {
        if (std::string p = NoteHolds(*hs, held->text, held->exit); !p.empty()) problems.push_back(p);
      }
      // The engine: asked only when an image check failed (or to pull).
      const PreflightSection* engine = reply.Find("engine");
      bool engine_down = false;
      if (engine && engine->exit != 0) {
        engine_down = true;
        problems.push_back(engine->timed_out() ? engine_bound
                                               : "docker is not reachable: " + said(engine->text));
      }
      for (size_t i = 0; i < checks.images.size() && !checks.pull_always; ++i) {
        const std::string& image = checks.images[i];
        const PreflightSection* s = section("image" + std::to_string(i));
        if (!s) continue;
        if (s->exit == 0) {
          hs->image_ids[image] = ImageIdOf(s->text);
        } else if (s->timed_out()) {
          if (!engine_down) problems.push_back(engine_bound + " (image inspect " + image + ")");
        } else if (engine_down) {
          // Said once, above.
        } else if (spec_.image_pull == ImagePull::kPush) {
          to_push[image].push_back(hs);
        } else if (spec_.image_pull == ImagePull::kNever) {
          problems.push_back("image " + image + " is not present (image_pull: never): " + said(s->text));
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
      }
      if (checks.pull_always && !engine_down) {
        for (const std::string& image : checks.images) {
          check(hs, hs->docker->Pull(image) + " >/dev/null && " + hs->docker->ImageId(image),
                [&, hs, image](const Outcome& pulled) {
                  if (pulled.ok()) {
                    hs->image_ids[image] = Trim(pulled.out);
                  } else {
                    errors[hs->index].push_back("cannot pull " + image + " (image_pull: always): " +
                                                pulled.Reason());
                  }
                });
        }
      }
      if (const PreflightSection* d = section("disk")) {
        for (const std::string& problem : LowDiskSpace(d->text)) problems.push_back(problem);
      }
      if (checks.tcp_tables) {
        if (const PreflightSection* p = section("ports");
            p && container::ParseListeningPorts(p->text).count(spec_.rendezvous.port)) {
          problems.push_back("rendezvous port " + std::to_string(spec_.rendezvous.port) +
                             " is already in use on the head's host (rendezvous.port)");
        }
      }
      if (checks.gpu_probe && !engine_down) {
        if (const PreflightSection* g = section("gpu")) {
          if (g->timed_out() || g->exit != 0) {
            problems.push_back("GPUs requested but unavailable: " + said(g->text));
          } else {
            int count = 0;
            std::istringstream lines(g->text);
            std::string line;
            while (std::getline(lines, line)) count += line.rfind("GPU ", 0) == 0;
            input_.detected_gpus[hs->index] = count;
          }
        }
      }
      if (const PreflightSection* so = checks.engine_socket ? reply.Find("socket") : nullptr) {
        if (std::optional<std::string> path = EngineSocketOf(so->text)) sockets[hs] = *path;
      }
      if (problems.empty()) errors.erase(hs->index);
    });
  }
  // The leases are renewed from now on: a host whose preflight is slow (a
  // stalling engine) must not keep the others' renewals from starting, or
  // their watchdogs find the lease lapsed and remove the job there just as
  // it starts.
  RenewLeases();
  // No fixed deadline for the whole step: on many hosts (or a saturated
  // controller) it takes as long as it takes while hosts keep finishing.
  // It gives up once no command at all has finished for longer than one
  // host's script can take (every engine call timing out on every try,
  // plus a minute).
  const auto quiet_limit = spec_.ssh.connect_timeout + seconds(60) +
                           spec_.ssh.engine_timeout * spec_.ssh.engine_misses * 3;
  RunWhileProgressing(group, quiet_limit, [&] { return interrupts_ > 0; });
  const bool done = group.idle();
  for (auto& [hs, count] : open) {
    if (count > 0) {
      Ended(hs->PhaseOf(Phase::kPreflight), false, interrupts_ > 0 ? "interrupted" : "did not finish in time");
    }
  }
  observer_.StepEnded(Phase::kPreflight);
  if (interrupts_ > 0) return Status::Error("interrupted during preflight");
  if (!done) {
    std::string stuck;
    int n = 0;
    for (auto& [hs, count] : open) {
      if (count > 0 && n++ < 5) stuck += (stuck.empty() ? "" : ", ") + hs->name;
    }
    return Status::Error("preflight did not finish: nothing answered for " +
                         std::to_string(std::chrono::duration_cast<seconds>(quiet_limit).count()) + " s; " +
                         std::to_string(n) + " host(s) still at it (" + stuck + (n > 5 ? ", ..." : "") + ")");
  }
  group.Cancel();
  for (const auto& [h, why] : connect_errors_) {
    errors[h].insert(errors[h].begin(), why);
  }
  // On a host whose login shell is not POSIX every other check failed
  // because of it (its address probe too): report only the cause.
  for (const auto& [h, problem] : shell_problems) errors[h] = {problem};
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
  if (errors.empty()) {
    OpenEngineApis(sockets);
    return Status::Ok();
  }
  std::vector<std::pair<std::string, std::vector<std::string>>> table;
  for (const auto& [h, list] : errors) table.emplace_back(hosts_[h]->name, list);
  return Status::Error(ProblemTable(table, hosts_.size()));
}

}  // namespace internal
}  // namespace barge::runner
