// preflight: per host, in parallel and before anything starts, the engine
// answers, every image is there (pulled or pushed when image_pull says so),
// GPUs work where asked for, the login shell is POSIX, the disks have room,
// the rendezvous port is free and the watchdog is armed. Every host's
// problems are reported together, in one table.
#include "runner/controller/preflight.h"
#include "runner/remote/host_address.h"
#include "runner/controller/job_state.h"

#include <algorithm>
#include <cstdlib>
#include <ctime>
#include <set>
#include <sstream>

#include "container/proc_net.h"

#include "runner/remote/preflight_script.h"
#include "runner/remote/rdma.h"
#include "ssh/quote.h"

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

Status Preflight::Run(const std::vector<HostState*>& targets) {
  // Each engine's API client, while preflight tries it; handed to its host
  // at the end. Declared before the group: its calls refer to them.
  std::map<HostState*, std::unique_ptr<container::DockerApi>> apis;
  std::map<HostState*, std::string> without_api;  // why not, where a socket was found
  // Every callback captures this frame: the group on it drops them all if
  // the wait ends early (an interrupt, the deadline).
  CommandGroup group(&loop_, &redact_);
  std::map<size_t, std::vector<std::string>> errors;  // by host
  // Hosts whose login shell is not POSIX, with that problem: every other
  // check there failed because of it, so it is the only one reported.
  std::map<size_t, std::string> shell_problems;
  std::map<std::string, std::vector<HostState*>> to_push;  // image → hosts lacking it
  std::map<HostState*, int> open;  // commands and calls in flight, by host
  std::map<HostState*, std::string> disks;  // `df -Pk` output, judged at the host's end
  // A run whose hosts all failed to connect has no preflight to show.
  if (!targets.empty()) {
    observer_.StepBegan(Phase::kPreflight, "preflight", static_cast<int>(targets.size()));
  }
  for (HostState* hs : targets) Began(hs->PhaseOf(Phase::kPreflight));
  // The host's preflight has ended when its last command or call has.
  auto end = [&](HostState* hs) {
    if (--open[hs] > 0) return;
    std::vector<std::string>& problems = errors[hs->index];
    for (const std::string& problem : LowDiskSpace(disks[hs])) problems.push_back(problem);
    if (problems.empty()) {
      Ended(hs->PhaseOf(Phase::kPreflight), true);
    } else {
      Ended(hs->PhaseOf(Phase::kPreflight), false, problems.front());
    }
  };
  // Runs one command.
  auto check = [&](HostState* hs, const std::string& line, std::function<void(const Outcome&)> cb) {
    ++open[hs];
    group.Run(*hs->exec, line, [&, hs, cb = std::move(cb)](const Outcome& o) {
      cb(o);
      end(hs);
    });
  };
  // Runs one Engine API call, bounded by the engine timeout (one try).
  auto call = [&](HostState* hs, const std::function<Result<CommandGroup::ApiCall>(CommandGroup::Finish)>& start,
                  std::function<void(const Outcome&)> cb) {
    ++open[hs];
    group.Api(
        start,
        [&, hs, cb = std::move(cb)](const Outcome& o) {
          cb(o);
          end(hs);
        },
        spec_.ssh.engine_timeout);
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
  auto checks_for = [&](HostState* hs) {
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
    checks.gpu_health = gpu_gate_.LinesFor(*hs);
    checks.interfaces = std::any_of(plan_.nodes.begin(), plan_.nodes.end(), [&](const cluster::NodePlan& n) {
      return n.host_index == h && n.container.options.network && *n.container.options.network == "host";
    });
    checks.rdma = spec_.network.rdma != RdmaUse::kOff;
    checks.tcp_tables = head_on_host_network && h == head.host_index;
    checks.arm_watchdog = ArmWatchdogCommand(leases_.WatchdogFor(*hs));
    checks.hold = holds_.TakeHoldsLine(*hs);
    checks.engine_timeout = spec_.ssh.engine_timeout;
    checks.engine_misses = spec_.ssh.engine_misses;
    checks.engine_socket = hs->docker->plain() && EngineApiWanted();
    // The host's part first where the API may take the engine's.
    checks.part = checks.engine_socket ? PreflightPart::kHost : PreflightPart::kAll;
    return checks;
  };
  // What to do about an image no registry gave, and where the job file
  // names it.
  auto cannot_pull_hint = [&](const std::string& image) {
    std::string hint = "\n    check the image's name";
    if (auto at = spec_.image_written_at.find(image); at != spec_.image_written_at.end()) {
      hint += " (" + at->second + ")";
    }
    return hint + "; if the host cannot reach its registry, load it there (docker load) or set"
                  " image_pull: push to copy it from this machine";
  };
  // An image that is not there: pushed, pulled, or a problem, as image_pull
  // says.
  auto missing_image = [&](HostState* hs, const std::string& image, const std::string& why) {
    if (spec_.image_pull == ImagePull::kPush) {
      to_push[image].push_back(hs);
    } else if (spec_.image_pull == ImagePull::kNever) {
      errors[hs->index].push_back("image " + image + " is not present (image_pull: never): " + said(why));
    } else {
      Say(hs->name + ": pulling " + image);
      check(hs, hs->docker->Pull(image), [&, hs, image](const Outcome& pulled) {
        if (!pulled.ok()) {
          errors[hs->index].push_back("image " + image + " is missing and cannot be pulled: " + pulled.Reason() +
                                      cannot_pull_hint(image));
          return;
        }
        check(hs, hs->docker->ImageId(image), [&, hs, image](const Outcome& again) {
          if (again.ok()) {
            hs->images.ids[image] = Trim(again.out);
          } else {
            errors[hs->index].push_back("image " + image + ": " + again.Reason());
          }
        });
      });
    }
  };
  auto pull_always = [&](HostState* hs, const std::vector<std::string>& images) {
    for (const std::string& image : images) {
      check(hs, hs->docker->Pull(image) + " >/dev/null && " + hs->docker->ImageId(image),
            [&, hs, image](const Outcome& pulled) {
              if (pulled.ok()) {
                hs->images.ids[image] = Trim(pulled.out);
              } else {
                errors[hs->index].push_back("cannot pull " + image + " (image_pull: always): " + pulled.Reason());
              }
            });
    }
  };
  // The engine's sections of a script's reply (kAll or kEngine): the hold,
  // the engine, the images, the storage's disk.
  auto engine_sections = [&](HostState* hs, const PreflightChecks& checks, const PreflightReply& reply,
                             const Outcome& o) {
    std::vector<std::string>& problems = errors[hs->index];
    auto section = [&](const std::string& name) -> const PreflightSection* {
      const PreflightSection* s = reply.Find(name);
      if (!s) problems.push_back("preflight's " + name + " check did not report: " + o.Reason());
      return s;
    };
    if (const PreflightSection* held = section("hold")) {
      if (std::string p = holds_.NoteHolds(*hs, held->text, held->exit); !p.empty()) problems.push_back(p);
    }
    // The engine: asked only when an image check failed (or to pull).
    const PreflightSection* engine = reply.Find("engine");
    bool engine_down = false;
    if (engine && engine->exit != 0) {
      engine_down = true;
      problems.push_back(engine->timed_out() ? engine_bound : "docker is not reachable: " + said(engine->text));
    }
    for (size_t i = 0; i < checks.images.size() && !checks.pull_always; ++i) {
      const std::string& image = checks.images[i];
      const PreflightSection* s = section("image" + std::to_string(i));
      if (!s) continue;
      if (s->exit == 0) {
        hs->images.ids[image] = ImageIdOf(s->text);
      } else if (s->timed_out()) {
        if (!engine_down) problems.push_back(engine_bound + " (image inspect " + image + ")");
      } else if (!engine_down) {  // (an engine that is down is said once, above)
        missing_image(hs, image, s->text);
      }
    }
    if (checks.pull_always && !engine_down) pull_always(hs, checks.images);
    if (const PreflightSection* d = section("disk")) disks[hs] += d->text + "\n";
  };
  // Where the API cannot be reached: the engine's part as a second script.
  auto engine_script = [&](HostState* hs, PreflightChecks checks) {
    checks.part = PreflightPart::kEngine;
    check(hs, PreflightScript(*hs->docker, checks), [&, hs, checks](const Outcome& o) {
      if (!o.exit.known()) {
        errors[hs->index].push_back("preflight did not finish: " + o.Reason());
        return;
      }
      engine_sections(hs, checks, ParsePreflightReply(o.out), o);
    });
  };
  // The engine's part through the API: the holds, each image's inspect,
  // then the disk of the first image's storage (one shell command).
  auto engine_api = [&](HostState* hs, container::DockerApi* api, const PreflightChecks& checks, long long now) {
    ++open[hs];
    fleet::TakeHoldsWithApi(group, holds_.ApiHoldJobFor(*hs, api, now), [&, hs](fleet::HoldReply reply, bool failed) {
      if (std::string p = holds_.NoteHolds(*hs, std::move(reply), failed); !p.empty()) errors[hs->index].push_back(p);
      end(hs);
    });
    if (checks.pull_always) {
      pull_always(hs, checks.images);
      check(hs, "df -Pk / 2>&1", [&, hs](const Outcome& o) { disks[hs] += o.out; });
      return;
    }
    auto storage_disk = [&, hs](const std::string& dir) {
      check(hs, "df -Pk " + ssh::ShellQuote(dir.empty() ? "/" : dir) + " 2>&1",
            [&, hs](const Outcome& o) { disks[hs] += o.out; });
    };
    if (checks.images.empty()) storage_disk("");
    for (size_t i = 0; i < checks.images.size(); ++i) {
      const std::string image = checks.images[i];
      // The inspect, tried again after a timeout: `tries` in all.
      auto inspect = std::make_shared<std::function<void(int)>>();
      *inspect = [&, hs, api, image, i, inspect, storage_disk](int tries) {
        auto reply = std::make_shared<std::optional<container::Reply<container::ImageInfo>>>();
        call(
            hs,
            [api, image, reply](CommandGroup::Finish finish) {
              return api->InspectImage(image, [reply, finish](container::Reply<container::ImageInfo> r) {
                reply->emplace(std::move(r));
                Outcome o;
                o.exit.code = 0;
                finish(o);
              });
            },
            [&, hs, image, i, inspect, storage_disk, reply, tries](const Outcome& o) {
              if (o.timed_out()) {
                if (tries > 1) return (*inspect)(tries - 1);
                errors[hs->index].push_back(engine_bound + " (image inspect " + image + ")");
                if (i == 0) storage_disk("");
                return;
              }
              if (!*reply) {  // the call could not even start
                if (i == 0) storage_disk("");
                errors[hs->index].push_back("docker is not reachable: " + said(o.Reason()));
                return;
              }
              const container::Reply<container::ImageInfo>& r = **reply;
              if (r.ok()) {
                hs->images.ids[image] = r.value->id;
                if (i == 0) storage_disk(r.value->upper_dir);
                return;
              }
              if (i == 0) storage_disk("");
              if (r.not_found()) return missing_image(hs, image, r.value.status().message());
              errors[hs->index].push_back("docker is not reachable: " + said(r.value.status().message()));
            });
      };
      (*inspect)(spec_.ssh.engine_misses);
    }
  };
  // A ping through the engine's socket: the API takes the engine's part, or
  // the second script does.
  auto ping = [&](HostState* hs, const std::string& path, const PreflightChecks& checks) {
    if (!hs->engine.streams) hs->engine.streams = std::make_unique<EngineStreams>(hs->exec.get());
    auto api = std::make_unique<container::DockerApi>(hs->engine.streams.get(), path);
    container::DockerApi* raw = api.get();
    apis[hs] = std::move(api);
    auto answer = std::make_shared<std::optional<container::Reply<container::DockerApi::Response>>>();
    call(
        hs,
        [raw, answer](CommandGroup::Finish finish) {
          container::HttpRequest req;
          req.target = "/_ping";
          return raw->Request(req, nullptr, [answer, finish](container::Reply<container::DockerApi::Response> r) {
            answer->emplace(std::move(r));
            Outcome o;
            o.exit.code = 0;
            finish(o);
          });
        },
        [&, hs, raw, answer, checks](const Outcome& o) {
          std::string why;
          if (o.timed_out()) {
            why = "no answer within ssh.engine_timeout";
          } else if (!o.exit.known()) {
            why = o.exit.error;
          } else if (!*answer) {
            why = o.Reason();
          } else if (!(*answer)->ok()) {
            why = (*answer)->value.status().message();
          } else if ((*answer)->value->status != 200 || (*answer)->value->body != "OK") {
            why = "its ping answered HTTP " + std::to_string((*answer)->value->status) + " '" +
                  (*answer)->value->body.substr(0, 40) + "'";
          }
          if (!why.empty()) {
            without_api[hs] = why;
            return engine_script(hs, checks);
          }
          // The host's clock, for the holds' labels: the engine's Date.
          long long now = static_cast<long long>(std::time(nullptr));
          const auto& headers = (*answer)->value->headers;
          if (auto d = headers.find("date"); d != headers.end()) {
            now = fleet::ParseHttpDate(d->second).value_or(now);
          }
          engine_api(hs, raw, checks, now);
        });
  };
  for (HostState* hs : targets) {
    const PreflightChecks checks = checks_for(hs);
    // Armed or not, disarming removes whatever part of the watchdog was made
    // (a full disk can leave the directory without it).
    hs->lease.armed = true;
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
      bool armed = false;
      if (const PreflightSection* w = section("watchdog")) {
        armed = w->exit == 0;
        if (!armed) {
          problems.push_back("cannot arm the watchdog: " +
                             (w->text.empty() ? "exit " + std::to_string(w->exit) : w->text));
        }
      }
      if (checks.part == PreflightPart::kAll) {
        engine_sections(hs, checks, reply, o);
      } else if (const PreflightSection* d = section("disk")) {
        disks[hs] += d->text + "\n";
      }
      if (checks.tcp_tables) {
        if (const PreflightSection* p = section("ports");
            p && container::ParseListeningPorts(p->text).count(spec_.rendezvous.port)) {
          problems.push_back("rendezvous port " + std::to_string(spec_.rendezvous.port) +
                             " is already in use on the head's host (rendezvous.port)");
        }
      }
      const PreflightSection* engine = reply.Find("engine");
      if (checks.gpu_probe && !(engine && engine->exit != 0)) {
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
      gpu_gate_.Note(*hs, reply);
      if (const PreflightSection* ifs = reply.Find("iface")) {
        // NCCL_SOCKET_IFNAME and GLOO_SOCKET_IFNAME of its host-network
        // nodes (cluster::PlanInput::host_ifaces).
        const std::string address = cluster::InternalAddress(plan_.hosts[hs->index]);
        const std::string iface = InterfaceOf(ifs->text, address);
        input_.host_ifaces[hs->index] = iface;
        if (iface.empty()) {
          Say(hs->name + ": cannot tell which interface carries " + address +
              ": NCCL_SOCKET_IFNAME and GLOO_SOCKET_IFNAME are not set there (NCCL and Gloo choose)");
        }
      }
      if (checks.rdma) {
        // network.rdma: the HCAs its nodes are given
        // (cluster::PlanInput::host_rdma), or sockets.
        if (const PreflightSection* ib = section("ib")) {
          const rdma::RdmaInfo info = rdma::ParseRdma(ib->text);
          if (info.usable()) {
            input_.host_rdma[hs->index] = info.active_hcas;
          } else if (spec_.network.rdma == RdmaUse::kRequired) {
            problems.push_back("RDMA is required (network.rdma: required) but the host has " + info.why_not());
          } else {
            input_.host_rdma[hs->index] = {};
            Say(hs->name + ": no RDMA (" + info.why_not() + "): its nodes use sockets");
          }
        }
      }
      if (checks.part != PreflightPart::kHost) return;
      // Holds are taken only under an armed watchdog (it releases them).
      if (!armed) return;
      const PreflightSection* so = reply.Find("socket");
      std::optional<std::string> path = so ? EngineSocketOf(so->text) : std::nullopt;
      if (path) return ping(hs, *path, checks);
      engine_script(hs, checks);
    });
  }
  // The leases are renewed from now on: a host whose preflight is slow (a
  // stalling engine) must not keep the others' renewals from starting, or
  // their watchdogs find the lease lapsed and remove the job there just as
  // it starts.
  leases_.RenewLeases();
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
  std::erase_if(errors, [](const auto& e) { return e.second.empty(); });
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
    for (const auto& [image, id] : host->images.ids) ids[image][id].push_back(host->name);
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
  // Where a ping answered, the host's engine is the API's from now on.
  for (auto& [hs, api] : apis) {
    if (!without_api.count(hs)) hs->engine.api = std::move(api);
  }
  if (!without_api.empty()) {
    const auto& [first, why] = *without_api.begin();
    Say("the Docker Engine API cannot be reached over SSH on " + std::to_string(without_api.size()) +
        " host(s) (" + first->name + ": " + why + "); the docker CLI is used there");
  }
  if (errors.empty()) return Status::Ok();
  // The GPU health gate's findings go in the same table.
  for (HostState* hs : targets) {
    for (std::string& p : gpu_gate_.Problems(*hs)) errors[hs->index].push_back(std::move(p));
  }
  std::vector<std::pair<std::string, std::vector<std::string>>> table;
  for (const auto& [h, list] : errors) table.emplace_back(hosts_[h]->name, list);
  return Status::Error(ProblemTable(table, hosts_.size()));
}

}  // namespace internal
}  // namespace barge::runner
