// preflight: per host, in parallel and before anything starts, the engine
// answers, every image is there (pulled or pushed when image_pull says so),
// GPUs work where asked for, the login shell is POSIX, the disks have room,
// the rendezvous port is free and the watchdog is armed. Every host's
// problems are reported together, in one table. One Run is a Round: its
// commands and what they found, by host, and one member function per step.
#include "runner/controller/preflight.h"
#include "runner/controller/job_state.h"
#include "runner/remote/host_address.h"

#include <algorithm>
#include <cstdlib>
#include <ctime>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

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

// The host's clock from its engine's answer `r`: the Date header (for the
// holds' labels and the job's place in line), nullopt without a readable
// one. Never this machine's clock: without it the host's script takes the
// holds, with the host's `date`.
std::optional<long long> EngineDate(const container::DockerApi::Response& r) {
  auto d = r.headers.find("date");
  return d == r.headers.end() ? std::nullopt : ParseHttpDate(d->second);
}

using PingAnswer = std::optional<container::Reply<container::DockerApi::Response>>;
using InspectAnswer = std::optional<container::Reply<container::ImageInfo>>;

// Why the engine's API is not used after its ping through the socket ended
// with `o`, and with `answer` when the call began: empty when the engine
// answered 200 "OK" and said the host's clock.
std::string WhyNotTheApi(const Outcome& o, const PingAnswer& answer) {
  if (o.timed_out()) return "no answer within ssh.engine_timeout";
  if (!o.exit.known()) return o.exit.error;
  if (!answer) return o.Reason();
  if (!answer->ok()) return answer->value.status().message();
  const container::DockerApi::Response& r = *answer->value;
  if (r.status != 200 || r.body != "OK") {
    return "its ping answered HTTP " + std::to_string(r.status) + " '" + r.body.substr(0, 40) + "'";
  }
  if (!EngineDate(r)) return "its ping carried no Date header (the host's clock)";
  return "";
}

}  // namespace

// One Run on its targets: the commands and Engine API calls in flight, and
// what they found, by host. A host's preflight has ended when the last of
// its commands and calls has (End). Every callback refers to this object:
// the group is its last member, destroyed first, which drops every callback
// not yet run (CommandGroup), so none outlives the round.
// Threading: the loop's thread only.
class Preflight::Round : private JobPart {
 public:
  // `preflight` (its holds, leases, GPU gate and Push) and `targets` must
  // outlive the round.
  Round(JobContext* ctx, Preflight* preflight, const std::vector<HostState*>& targets);

  // The step and each target's phase begin; each target's first script
  // goes out (the host's part, or everything where no Engine API may take
  // the engine's part). Its watchdog counts as armed from now on.
  void Start();
  // Runs the loop while the round's commands keep ending. An error when
  // interrupted, or when nothing has ended for longer than one host's
  // script can take (naming up to five hosts still at it); the step and
  // every unfinished host's phase have ended either way.
  [[nodiscard]] Status Wait();
  // After a Wait that succeeded: every host's problems in one table, or Ok
  // (and then the images are pushed where image_pull: push asked, the same
  // image ID is on every host, and the Engine APIs that answered are their
  // hosts' from now on).
  [[nodiscard]] Status Finish();

 private:
  using Callback = std::function<void(const Outcome&)>;
  using ApiStart = std::function<Result<CommandGroup::ApiCall>(CommandGroup::Finish)>;

  // --- A host's commands and calls: counted, each ending with End.
  // Runs `line` on the host; `cb` gets its outcome.
  void Check(HostState* hs, const std::string& line, Callback cb);
  // Runs one Engine API call, bounded by the engine timeout (one try).
  void Call(HostState* hs, const ApiStart& start, Callback cb);
  // One of the host's commands has ended; after its last, the disk's
  // output is judged and the host's phase ends (with its first problem).
  void End(HostState* hs);

  // --- The host's part: the first script and its sections.
  PreflightChecks ChecksFor(HostState* hs) const;
  void HostScriptEnded(HostState* hs, const PreflightChecks& checks, const Outcome& o);
  // A script that did not finish, or a login shell that is not POSIX.
  void NoteScriptFailure(HostState* hs, const PreflightReply& reply, const Outcome& o);
  // The section `name` of `reply`; a problem of the host when it is missing.
  const PreflightSection* Section(HostState* hs, const PreflightReply& reply, const std::string& name,
                                  const Outcome& o);
  void NotePort(HostState* hs, const PreflightReply& reply, const Outcome& o);
  void NoteGpus(HostState* hs, const PreflightChecks& checks, const PreflightReply& reply, const Outcome& o);
  void NoteInterface(HostState* hs, const PreflightReply& reply);
  void NoteRdma(HostState* hs, const PreflightReply& reply, const Outcome& o);

  // --- The engine's part: in the first script, a second one, or the API.
  void EngineSections(HostState* hs, const PreflightChecks& checks, const PreflightReply& reply,
                      const Outcome& o);
  void EngineScript(HostState* hs, PreflightChecks checks);
  void Ping(HostState* hs, const std::string& path, const PreflightChecks& checks);
  void Pinged(HostState* hs, container::DockerApi* api, const PreflightChecks& checks, const Outcome& o,
              const PingAnswer& answer);
  void EngineApi(HostState* hs, container::DockerApi* api, const PreflightChecks& checks, long long now);
  // The inspect of the host's image `image` (the checks' `i`th), tried
  // again after a timeout: `tries` in all. The first image's also measures
  // the disk of the engine's storage.
  void InspectImage(HostState* hs, container::DockerApi* api, const std::string& image, size_t i, int tries);
  void ImageInspected(HostState* hs, container::DockerApi* api, const std::string& image, size_t i, int tries,
                      const Outcome& o, const InspectAnswer& reply);
  // `df -Pk` of `dir` (of / when empty), judged at the host's end.
  void StorageDisk(HostState* hs, const std::string& dir);

  // --- Images that are not there.
  void MissingImage(HostState* hs, const std::string& image, const std::string& why);
  void PullAlways(HostState* hs, const std::vector<std::string>& images);
  std::string CannotPullHint(const std::string& image) const;
  // What a check printed, as a problem says it (secrets redacted, bounded).
  std::string Said(const std::string& text) const;

  // --- After the wait.
  // Connect errors first; on a host whose login shell is not POSIX only
  // that problem.
  void CollectProblems();
  void CompareImageIds();
  void HandOverApis();

  HostSet& hosts_;
  Planner& planner_;
  const cluster::Plan& plan_ = planner_.plan();
  Preflight& preflight_;
  Holds& holds_;
  Leases& leases_;
  GpuGate& gpu_gate_;
  const std::vector<HostState*>& targets_;
  const std::string engine_bound_;  // the problem of an engine that did not answer
  // The rendezvous port must be free on the head's host when the head
  // shares the host's network (otherwise it lives in the container's own).
  const size_t head_host_;
  const bool head_on_host_network_;

  // Each engine's API client, while preflight tries it; handed to its host
  // at the end.
  std::map<HostState*, std::unique_ptr<container::DockerApi>> apis_;
  std::map<HostState*, std::string> without_api_;  // why not, where a socket was found
  std::map<size_t, std::vector<std::string>> errors_;  // by host
  // Hosts whose login shell is not POSIX, with that problem: every other
  // check there failed because of it, so it is the only one reported.
  std::map<size_t, std::string> shell_problems_;
  std::map<std::string, std::vector<HostState*>> to_push_;  // image → hosts lacking it
  std::map<HostState*, int> open_;  // commands and calls in flight, by host
  std::map<HostState*, std::string> disks_;  // `df -Pk` output, judged at the host's end
  CommandGroup group_{&ctx_.loop, &ctx_.redact};  // last: see the class comment
};

Status Preflight::Run(const std::vector<HostState*>& targets) {
  Round round(&ctx_, this, targets);
  round.Start();
  // The leases are renewed from now on: a host whose preflight is slow (a
  // stalling engine) must not keep the others' renewals from starting, or
  // their watchdogs find the lease lapsed and remove the job there just as
  // it starts.
  leases_.RenewLeases();
  if (Status s = round.Wait(); !s.ok()) return s;
  return round.Finish();
}

Preflight::Round::Round(JobContext* ctx, Preflight* preflight, const std::vector<HostState*>& targets)
    : JobPart(ctx),
      hosts_(preflight->hosts_),
      planner_(preflight->planner_),
      preflight_(*preflight),
      holds_(preflight->holds_),
      leases_(preflight->leases_),
      gpu_gate_(preflight->gpu_gate_),
      targets_(targets),
      engine_bound_("the Docker engine did not answer within " +
                    std::to_string(ctx_.spec.ssh.engine_timeout.count() / 1000) + " s, " +
                    std::to_string(ctx_.spec.ssh.engine_misses) +
                    " time(s) in a row (ssh.engine_timeout, ssh.engine_misses)"),
      head_host_(plan_.nodes[0].host_index),
      head_on_host_network_(plan_.nodes[0].container.options.network &&
                            *plan_.nodes[0].container.options.network == "host") {}

void Preflight::Round::Start() {
  // A run whose hosts all failed to connect has no preflight to show.
  if (!targets_.empty()) {
    ctx_.observer.StepBegan(Phase::kPreflight, "preflight", static_cast<int>(targets_.size()));
  }
  for (HostState* hs : targets_) Began(hs->PhaseOf(Phase::kPreflight));
  for (HostState* hs : targets_) {
    const PreflightChecks checks = ChecksFor(hs);
    // Armed or not, disarming removes whatever part of the watchdog was made
    // (a full disk can leave the directory without it).
    hs->lease.armed = true;
    Check(hs, PreflightScript(*hs->docker, checks),
          [this, hs, checks](const Outcome& o) { HostScriptEnded(hs, checks, o); });
  }
}

// --- A host's commands and calls.

void Preflight::Round::Check(HostState* hs, const std::string& line, Callback cb) {
  ++open_[hs];
  group_.Run(*hs->exec, line, [this, hs, cb = std::move(cb)](const Outcome& o) {
    cb(o);
    End(hs);
  });
}

void Preflight::Round::Call(HostState* hs, const ApiStart& start, Callback cb) {
  ++open_[hs];
  group_.Api(
      start,
      [this, hs, cb = std::move(cb)](const Outcome& o) {
        cb(o);
        End(hs);
      },
      ctx_.spec.ssh.engine_timeout);
}

void Preflight::Round::End(HostState* hs) {
  if (--open_[hs] > 0) return;
  std::vector<std::string>& problems = errors_[hs->index];
  for (const std::string& problem : LowDiskSpace(disks_[hs])) problems.push_back(problem);
  if (problems.empty()) {
    Ended(hs->PhaseOf(Phase::kPreflight), true);
  } else {
    Ended(hs->PhaseOf(Phase::kPreflight), false, problems.front());
  }
}

// --- The host's part.

PreflightChecks Preflight::Round::ChecksFor(HostState* hs) const {
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
  checks.pull_always = ctx_.spec.image_pull == ImagePull::kAlways;
  if (gpu_spec) checks.gpu_probe = hs->docker->GpuProbe(*gpu_spec);
  checks.gpu_health = gpu_gate_.LinesFor(*hs);
  checks.interfaces = std::any_of(plan_.nodes.begin(), plan_.nodes.end(), [&](const cluster::NodePlan& n) {
    return n.host_index == h && n.container.options.network && *n.container.options.network == "host";
  });
  checks.rdma = ctx_.spec.network.rdma != RdmaUse::kOff;
  checks.tcp_tables = head_on_host_network_ && h == head_host_;
  checks.arm_watchdog = ArmWatchdogCommand(leases_.WatchdogFor(*hs));
  checks.hold = holds_.TakeHoldsLine(*hs);
  checks.engine_timeout = ctx_.spec.ssh.engine_timeout;
  checks.engine_misses = ctx_.spec.ssh.engine_misses;
  checks.engine_socket = hs->docker->plain() && EngineApiWanted();
  // The host's part first where the API may take the engine's.
  checks.part = checks.engine_socket ? PreflightPart::kHost : PreflightPart::kAll;
  return checks;
}

// The first script's reply: the watchdog, the engine's part (kAll) or the
// job directory's disk, the port, GPUs, interface and RDMA; then, where the
// host's part came alone and the watchdog is armed, the engine's part by
// the API (a socket was found) or a second script.
void Preflight::Round::HostScriptEnded(HostState* hs, const PreflightChecks& checks, const Outcome& o) {
  std::vector<std::string>& problems = errors_[hs->index];
  const PreflightReply reply = ParsePreflightReply(o.out);
  NoteScriptFailure(hs, reply, o);
  if (!problems.empty()) return;
  bool armed = false;
  if (const PreflightSection* w = Section(hs, reply, "watchdog", o)) {
    armed = w->exit == 0;
    if (!armed) {
      problems.push_back("cannot arm the watchdog: " +
                         (w->text.empty() ? "exit " + std::to_string(w->exit) : w->text));
    }
  }
  if (checks.part == PreflightPart::kAll) {
    EngineSections(hs, checks, reply, o);
  } else if (const PreflightSection* d = Section(hs, reply, "disk", o)) {
    disks_[hs] += d->text + "\n";
  }
  if (checks.tcp_tables) NotePort(hs, reply, o);
  NoteGpus(hs, checks, reply, o);
  NoteInterface(hs, reply);
  if (checks.rdma) NoteRdma(hs, reply, o);
  if (checks.part != PreflightPart::kHost) return;
  // Holds are taken only under an armed watchdog (it releases them).
  if (!armed) return;
  const PreflightSection* so = reply.Find("socket");
  std::optional<std::string> path = so ? EngineSocketOf(so->text) : std::nullopt;
  if (path) return Ping(hs, *path, checks);
  EngineScript(hs, checks);
}

void Preflight::Round::NoteScriptFailure(HostState* hs, const PreflightReply& reply, const Outcome& o) {
  std::vector<std::string>& problems = errors_[hs->index];
  if (!o.exit.known()) {
    problems.push_back("preflight did not finish: " + o.Reason());
  } else if (!reply.posix_shell) {
    // barge's command lines are POSIX sh: the login shell that sshd
    // runs them with must be one.
    std::string answered = Trim(o.err.empty() ? reply.first_line : o.err);
    shell_problems_[hs->index] =
        kNotPosixShell + std::string(" (it answered ") +
        (answered.empty() ? "nothing" : "'" + answered.substr(0, 120) + "'") + " to `" + PosixShellProbe() +
        "`); barge's commands need sh syntax: make the user's "
        "shell /bin/sh or /bin/bash (chsh -s /bin/bash USER)";
    problems.push_back(shell_problems_[hs->index]);
  }
}

const PreflightSection* Preflight::Round::Section(HostState* hs, const PreflightReply& reply,
                                                  const std::string& name, const Outcome& o) {
  const PreflightSection* s = reply.Find(name);
  if (!s) errors_[hs->index].push_back("preflight's " + name + " check did not report: " + o.Reason());
  return s;
}

// On the head's host (checks.tcp_tables): the rendezvous port is free.
void Preflight::Round::NotePort(HostState* hs, const PreflightReply& reply, const Outcome& o) {
  if (const PreflightSection* p = Section(hs, reply, "ports", o);
      p && container::ParseListeningPorts(p->text).count(ctx_.spec.rendezvous.port)) {
    errors_[hs->index].push_back("rendezvous port " + std::to_string(ctx_.spec.rendezvous.port) +
                                 " is already in use on the head's host (rendezvous.port)");
  }
}

// The GPU probe (unless the engine is down: said once already) counts the
// host's GPUs; the GPU gate reads its health sections.
void Preflight::Round::NoteGpus(HostState* hs, const PreflightChecks& checks, const PreflightReply& reply,
                                const Outcome& o) {
  const PreflightSection* engine = reply.Find("engine");
  if (checks.gpu_probe && !(engine && engine->exit != 0)) {
    if (const PreflightSection* g = Section(hs, reply, "gpu", o)) {
      if (g->timed_out() || g->exit != 0) {
        errors_[hs->index].push_back("GPUs requested but unavailable: " + Said(g->text));
      } else {
        int count = 0;
        std::istringstream lines(g->text);
        std::string line;
        while (std::getline(lines, line)) count += line.rfind("GPU ", 0) == 0;
        planner_.DetectedGpus(hs->index, count);
      }
    }
  }
  gpu_gate_.Note(*hs, reply);
}

// NCCL_SOCKET_IFNAME and GLOO_SOCKET_IFNAME of its host-network nodes
// (cluster::PlanInput::host_ifaces).
void Preflight::Round::NoteInterface(HostState* hs, const PreflightReply& reply) {
  const PreflightSection* ifs = reply.Find("iface");
  if (!ifs) return;
  const std::string address = cluster::InternalAddress(plan_.hosts[hs->index]);
  const std::string iface = InterfaceOf(ifs->text, address);
  planner_.Interface(hs->index, iface);
  if (iface.empty()) {
    Say(hs->name + ": cannot tell which interface carries " + address +
        ": NCCL_SOCKET_IFNAME and GLOO_SOCKET_IFNAME are not set there (NCCL and Gloo choose)");
  }
}

// network.rdma: the HCAs its nodes are given (cluster::PlanInput::host_rdma),
// or sockets, or (required) a problem.
void Preflight::Round::NoteRdma(HostState* hs, const PreflightReply& reply, const Outcome& o) {
  const PreflightSection* ib = Section(hs, reply, "ib", o);
  if (!ib) return;
  const rdma::RdmaInfo info = rdma::ParseRdma(ib->text);
  if (info.usable()) {
    planner_.Rdma(hs->index, info.active_hcas);
  } else if (ctx_.spec.network.rdma == RdmaUse::kRequired) {
    errors_[hs->index].push_back("RDMA is required (network.rdma: required) but the host has " + info.why_not());
  } else {
    planner_.Rdma(hs->index, {});
    Say(hs->name + ": no RDMA (" + info.why_not() + "): its nodes use sockets");
  }
}

// --- The engine's part.

// The engine's sections of a script's reply (kAll or kEngine): the hold,
// the engine, the images, the storage's disk.
void Preflight::Round::EngineSections(HostState* hs, const PreflightChecks& checks, const PreflightReply& reply,
                                      const Outcome& o) {
  std::vector<std::string>& problems = errors_[hs->index];
  if (const PreflightSection* held = Section(hs, reply, "hold", o)) {
    if (std::string p = holds_.NoteHolds(*hs, held->text, held->exit); !p.empty()) problems.push_back(p);
  }
  // The engine: asked only when an image check failed (or to pull).
  const PreflightSection* engine = reply.Find("engine");
  bool engine_down = false;
  if (engine && engine->exit != 0) {
    engine_down = true;
    problems.push_back(engine->timed_out() ? engine_bound_ : "docker is not reachable: " + Said(engine->text));
  }
  for (size_t i = 0; i < checks.images.size() && !checks.pull_always; ++i) {
    const std::string& image = checks.images[i];
    const PreflightSection* s = Section(hs, reply, "image" + std::to_string(i), o);
    if (!s) continue;
    if (s->exit == 0) {
      hs->images.ids[image] = ImageIdOf(s->text);
    } else if (s->timed_out()) {
      if (!engine_down) problems.push_back(engine_bound_ + " (image inspect " + image + ")");
    } else if (!engine_down) {  // (an engine that is down is said once, above)
      MissingImage(hs, image, s->text);
    }
  }
  if (checks.pull_always && !engine_down) PullAlways(hs, checks.images);
  if (const PreflightSection* d = Section(hs, reply, "disk", o)) disks_[hs] += d->text + "\n";
}

// Where the API cannot be reached: the engine's part as a second script.
void Preflight::Round::EngineScript(HostState* hs, PreflightChecks checks) {
  checks.part = PreflightPart::kEngine;
  Check(hs, PreflightScript(*hs->docker, checks), [this, hs, checks](const Outcome& o) {
    if (!o.exit.known()) {
      errors_[hs->index].push_back("preflight did not finish: " + o.Reason());
      return;
    }
    EngineSections(hs, checks, ParsePreflightReply(o.out), o);
  });
}

// A ping through the engine's socket at `path`: the API takes the engine's
// part (Pinged), or the second script does.
void Preflight::Round::Ping(HostState* hs, const std::string& path, const PreflightChecks& checks) {
  if (!hs->engine.streams) hs->engine.streams = std::make_unique<EngineStreams>(hs->exec.get());
  auto api = std::make_unique<container::DockerApi>(hs->engine.streams.get(), path);
  container::DockerApi* raw = api.get();
  apis_[hs] = std::move(api);
  auto answer = std::make_shared<PingAnswer>();
  Call(
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
      [this, hs, raw, answer, checks](const Outcome& o) { Pinged(hs, raw, checks, o, *answer); });
}

void Preflight::Round::Pinged(HostState* hs, container::DockerApi* api, const PreflightChecks& checks,
                              const Outcome& o, const PingAnswer& answer) {
  if (std::string why = WhyNotTheApi(o, answer); !why.empty()) {
    without_api_[hs] = why;
    return EngineScript(hs, checks);
  }
  EngineApi(hs, api, checks, *EngineDate(*answer->value));
}

// The engine's part through the API: the holds (with the host's clock
// `now`), each image's inspect, then the disk of the first image's storage
// (one shell command).
void Preflight::Round::EngineApi(HostState* hs, container::DockerApi* api, const PreflightChecks& checks,
                                 long long now) {
  ++open_[hs];
  TakeHoldsWithApi(group_, holds_.ApiHoldJobFor(*hs, api, now), [this, hs](HoldReply reply, bool failed) {
    if (std::string p = holds_.NoteHolds(*hs, std::move(reply), failed); !p.empty()) errors_[hs->index].push_back(p);
    End(hs);
  });
  if (checks.pull_always) {
    PullAlways(hs, checks.images);
    Check(hs, "df -Pk / 2>&1", [this, hs](const Outcome& o) { disks_[hs] += o.out; });
    return;
  }
  if (checks.images.empty()) StorageDisk(hs, "");
  for (size_t i = 0; i < checks.images.size(); ++i) {
    InspectImage(hs, api, checks.images[i], i, ctx_.spec.ssh.engine_misses);
  }
}

void Preflight::Round::InspectImage(HostState* hs, container::DockerApi* api, const std::string& image, size_t i,
                                    int tries) {
  auto reply = std::make_shared<InspectAnswer>();
  Call(
      hs,
      [api, image, reply](CommandGroup::Finish finish) {
        return api->InspectImage(image, [reply, finish](container::Reply<container::ImageInfo> r) {
          reply->emplace(std::move(r));
          Outcome o;
          o.exit.code = 0;
          finish(o);
        });
      },
      [this, hs, api, image, i, tries, reply](const Outcome& o) {
        ImageInspected(hs, api, image, i, tries, o, *reply);
      });
}

void Preflight::Round::ImageInspected(HostState* hs, container::DockerApi* api, const std::string& image,
                                      size_t i, int tries, const Outcome& o, const InspectAnswer& reply) {
  if (o.timed_out()) {
    if (tries > 1) return InspectImage(hs, api, image, i, tries - 1);
    errors_[hs->index].push_back(engine_bound_ + " (image inspect " + image + ")");
    if (i == 0) StorageDisk(hs, "");
    return;
  }
  if (!reply) {  // the call could not even start
    if (i == 0) StorageDisk(hs, "");
    errors_[hs->index].push_back("docker is not reachable: " + Said(o.Reason()));
    return;
  }
  const container::Reply<container::ImageInfo>& r = *reply;
  if (r.ok()) {
    hs->images.ids[image] = r.value->id;
    if (i == 0) StorageDisk(hs, r.value->upper_dir);
    return;
  }
  if (i == 0) StorageDisk(hs, "");
  if (r.not_found()) return MissingImage(hs, image, r.value.status().message());
  errors_[hs->index].push_back("docker is not reachable: " + Said(r.value.status().message()));
}

void Preflight::Round::StorageDisk(HostState* hs, const std::string& dir) {
  Check(hs, "df -Pk " + ssh::ShellQuote(dir.empty() ? "/" : dir) + " 2>&1",
        [this, hs](const Outcome& o) { disks_[hs] += o.out; });
}

// --- Images that are not there.

// Pushed, pulled, or a problem, as image_pull says.
void Preflight::Round::MissingImage(HostState* hs, const std::string& image, const std::string& why) {
  if (Pushes(ctx_.spec.image_pull)) {
    to_push_[image].push_back(hs);
  } else if (ctx_.spec.image_pull == ImagePull::kNever) {
    errors_[hs->index].push_back("image " + image + " is not present (image_pull: never): " + Said(why));
  } else {
    Say(hs->name + ": pulling " + image);
    Check(hs, hs->docker->Pull(image), [this, hs, image](const Outcome& pulled) {
      if (!pulled.ok()) {
        errors_[hs->index].push_back("image " + image + " is missing and cannot be pulled: " + pulled.Reason() +
                                     CannotPullHint(image));
        return;
      }
      Check(hs, hs->docker->ImageId(image), [this, hs, image](const Outcome& again) {
        if (again.ok()) {
          hs->images.ids[image] = Trim(again.out);
        } else {
          errors_[hs->index].push_back("image " + image + ": " + again.Reason());
        }
      });
    });
  }
}

// image_pull: always: each image pulled, one command each, and its ID read.
void Preflight::Round::PullAlways(HostState* hs, const std::vector<std::string>& images) {
  for (const std::string& image : images) {
    Check(hs, hs->docker->Pull(image) + " >/dev/null && " + hs->docker->ImageId(image),
          [this, hs, image](const Outcome& pulled) {
            if (pulled.ok()) {
              hs->images.ids[image] = Trim(pulled.out);
            } else {
              errors_[hs->index].push_back("cannot pull " + image + " (image_pull: always): " + pulled.Reason());
            }
          });
  }
}

// What to do about an image no registry gave, and where the job file
// names it.
std::string Preflight::Round::CannotPullHint(const std::string& image) const {
  std::string hint = "\n    check the image's name";
  if (auto at = ctx_.spec.image_written_at.find(image); at != ctx_.spec.image_written_at.end()) {
    hint += " (" + at->second + ")";
  }
  return hint + "; if the host cannot reach its registry, load it there (docker load) or set"
                " image_pull: push to copy it from this machine";
}

std::string Preflight::Round::Said(const std::string& text) const {
  std::string t = ctx_.redact(text);
  if (t.size() > 300) t = t.substr(0, 300) + "...";
  return t.empty() ? std::string("no output") : t;
}

// --- After the wait.

Status Preflight::Round::Wait() {
  // No fixed deadline for the whole step: on many hosts (or a saturated
  // controller) it takes as long as it takes while hosts keep finishing.
  // It gives up once no command at all has finished for longer than one
  // host's script can take (every engine call timing out on every try,
  // plus a minute).
  const auto quiet_limit = ctx_.spec.ssh.connect_timeout + seconds(60) +
                           ctx_.spec.ssh.engine_timeout * ctx_.spec.ssh.engine_misses * 3;
  RunWhileProgressing(group_, quiet_limit, [this] { return ctx_.interrupts > 0; });
  const bool done = group_.idle();
  for (auto& [hs, count] : open_) {
    if (count > 0) {
      Ended(hs->PhaseOf(Phase::kPreflight), false, ctx_.interrupts > 0 ? "interrupted" : "did not finish in time");
    }
  }
  ctx_.observer.StepEnded(Phase::kPreflight);
  if (ctx_.interrupts > 0) return Status::Error("interrupted during preflight");
  if (!done) {
    std::string stuck;
    int n = 0;
    for (auto& [hs, count] : open_) {
      if (count > 0 && n++ < 5) stuck += (stuck.empty() ? "" : ", ") + hs->name;
    }
    return Status::Error("preflight did not finish: nothing answered for " +
                         std::to_string(std::chrono::duration_cast<seconds>(quiet_limit).count()) + " s; " +
                         std::to_string(n) + " host(s) still at it (" + stuck + (n > 5 ? ", ..." : "") + ")");
  }
  group_.Cancel();
  return Status::Ok();
}

Status Preflight::Round::Finish() {
  CollectProblems();
  for (const auto& [image, push_targets] : to_push_) {
    if (!errors_.empty()) break;  // don't push to a job that cannot start
    preflight_.Push(image, push_targets, &errors_);
  }
  CompareImageIds();
  HandOverApis();
  if (errors_.empty()) return Status::Ok();
  // The GPU health gate's findings go in the same table.
  for (HostState* hs : targets_) {
    for (std::string& p : gpu_gate_.Problems(*hs)) errors_[hs->index].push_back(std::move(p));
  }
  std::vector<std::pair<std::string, std::vector<std::string>>> table;
  for (const auto& [h, list] : errors_) table.emplace_back(hosts_.by_index[h]->name, list);
  return Status::Error(ProblemTable(table, hosts_.by_index.size()));
}

void Preflight::Round::CollectProblems() {
  std::erase_if(errors_, [](const auto& e) { return e.second.empty(); });
  for (const auto& [h, why] : hosts_.connect_errors) {
    errors_[h].insert(errors_[h].begin(), why);
  }
  // On a host whose login shell is not POSIX every other check failed
  // because of it (its address probe too): report only the cause.
  for (const auto& [h, problem] : shell_problems_) errors_[h] = {problem};
}

// One stale tag on one node is a classic silent failure: every host must
// run the same image ID for the same reference. A difference is a problem
// (on the first host's row).
void Preflight::Round::CompareImageIds() {
  std::map<std::string, std::map<std::string, std::vector<std::string>>> ids;  // image → id → hosts
  for (auto& [h, host] : hosts_.by_index) {
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
      errors_[hosts_.by_index.begin()->first].push_back(msg);
    } else if (!by_id.empty()) {
      Say("image " + image + " is " + by_id.begin()->first.substr(0, 19) + " on " +
          std::to_string(by_id.begin()->second.size()) + " host(s)");
    }
  }
}

// Where a ping answered, the host's engine is the API's from now on.
void Preflight::Round::HandOverApis() {
  for (auto& [hs, api] : apis_) {
    if (!without_api_.count(hs)) hs->engine.api = std::move(api);
  }
  if (!without_api_.empty()) {
    // The first host by index; its name once (a session's errors already
    // begin with it).
    const auto first = std::min_element(without_api_.begin(), without_api_.end(), [](const auto& a, const auto& b) {
      return a.first->index < b.first->index;
    });
    std::string why = first->second;
    if (const std::string named = first->first->name + ": "; why.rfind(named, 0) == 0) why.erase(0, named.size());
    Say("the Docker Engine API cannot be reached over SSH on " + std::to_string(without_api_.size()) +
        " host(s) (" + first->first->name + ": " + why + "); the docker CLI is used there");
  }
}

}  // namespace internal
}  // namespace barge::runner
