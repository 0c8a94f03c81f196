// Holds (holds.h): the controller's side of the reservations on the hosts.
#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <random>

#include "cluster/plan.h"
#include "runner/controller/holds.h"
#include "runner/controller/job_state.h"
#include "runner/remote/preflight_script.h"
#include "runner/remote/reservation.h"

namespace barge::runner::internal {

namespace {

HoldOwner OwnerOf(const cluster::Plan& plan, const JobSpec& spec) {
  HoldOwner o;
  o.job_id = plan.job_id;
  o.job_name = plan.job_name;
  if (const passwd* pw = getpwuid(geteuid())) o.user = pw->pw_name;
  if (o.user.empty()) o.user = std::to_string(geteuid());
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) == 0) o.machine = host;
  o.lease = std::chrono::duration_cast<seconds>(spec.lease);
  return o;
}

}  // namespace

HoldRequest Holds::HoldRequestFor(const HostState& hs) const {
  std::vector<HoldNode> nodes;
  std::vector<int> ports;
  for (const cluster::NodePlan& n : plan_.nodes) {
    if (n.host_index != hs.index) continue;
    const auto& o = n.container.options;
    const bool host_net = o.network && *o.network == "host";
    // A node the plan sliced asked for a count: the host script chooses
    // that many free GPUs, and SecureHolds gives the node devices of those.
    nodes.push_back({n.gpu_devices.empty() ? o.gpus : std::optional<std::string>(std::to_string(n.gpu_devices.size())),
                     host_net});
    if (!host_net) continue;
    if (n.rank == 0) ports.push_back(ctx_.spec.rendezvous.port);
    if (ctx_.spec.mpi && n.rank != 0) ports.push_back(ctx_.spec.mpi->port + n.slot);
  }
  if (ctx_.spec.slurm && !ctx_.spec.slurm->exclusive) {
    // A shared Slurm node: Slurm has placed other jobs beside this one, so
    // it holds only its own GPUs (the allocation's indices) and ports.
    return SharedRequestFor(nodes, std::move(ports));
  }
  HoldRequest r = RequestFor(nodes, plan_.hosts[hs.index].gpus, std::move(ports));
  r.excluded_gpus = hs.gpus.out;
  return r;
}

std::string Holds::TakeHoldsLine(const HostState& hs, std::optional<long long> ticket_since) const {
  HoldOwner owner = OwnerOf(plan_, ctx_.spec);
  owner.job_dir = hs.job_dir;
  if (ticket_since) {
    const std::vector<Hold> none;
    const std::vector<Hold>& listed = hs.holds.reply ? hs.holds.reply->holds : none;
    owner.has_lease = !LeaseIdOf(listed, plan_.job_id).empty();
    owner.has_ticket = hs.holds.in_line || std::any_of(listed.begin(), listed.end(), [&](const Hold& h) {
                         return h.job_id == plan_.job_id && IsTicket(h);
                       });
    owner.ticket_since = ticket_since;
  }
  return TakeHoldsScript(*hs.docker, HoldRequestFor(hs), owner,
                                std::chrono::duration_cast<seconds>(ctx_.spec.ssh.engine_timeout));
}

ApiHoldJob Holds::ApiHoldJobFor(HostState& hs, container::DockerApi* api, long long now) const {
  ApiHoldJob job;
  job.api = api;
  job.request = HoldRequestFor(hs);
  job.owner = OwnerOf(plan_, ctx_.spec);
  job.now = now;
  job.engine_timeout = ctx_.spec.ssh.engine_timeout;
  job.engine_misses = ctx_.spec.ssh.engine_misses;
  return job;
}

std::string Holds::NoteHolds(HostState& hs, const std::string& text, int exit) {
  return NoteHolds(hs, ParseHoldReply(text), exit != 0);
}

std::string Holds::NoteHolds(HostState& hs, HoldReply reply, bool failed) {
  hs.holds.reply = std::move(reply);
  hs.holds.holding = !hs.holds.reply->taken.empty() || HoldsAny(*hs.holds.reply, plan_.job_id);
  for (const std::string& s : hs.holds.reply->removed_stale) Say(hs.name + ": removed a stale hold: " + s);
  const HoldRequest request = HoldRequestFor(hs);
  if (!Conflicts(request, *hs.holds.reply, plan_.job_id).empty()) return "";
  // (A shared Slurm node's CPU share holds nothing there: its lease only.)
  if (failed || (hs.holds.reply->taken.empty() && AsksAnything(request))) {
    return "cannot reserve the host (a hold container on its engine): " +
           (hs.holds.reply->errors.empty() ? std::string(failed ? "it failed" : "nothing was taken") : hs.holds.reply->errors);
  }
  return "";
}

std::vector<BusyHost> Holds::BusyHosts() {
  std::vector<BusyHost> busy;
  std::vector<HostState*> hosts = hosts_.Connected();
  std::sort(hosts.begin(), hosts.end(), [](HostState* a, HostState* b) { return a->name < b->name; });
  for (HostState* hs : hosts) {
    if (!hs->holds.reply) continue;
    std::vector<Hold> c = Conflicts(HoldRequestFor(*hs), *hs->holds.reply, plan_.job_id);
    if (!c.empty()) busy.push_back({hs->name, hs->holds.reply->now, std::move(c)});
  }
  return busy;
}

Status Holds::AdoptHeldGpus(HostState& hs) {
  if (!hs.holds.reply) return Status::Ok();
  std::vector<int> gpus = HeldGpus(*hs.holds.reply, plan_.job_id);
  if (gpus.empty()) return Status::Ok();
  std::string list;
  for (int g : gpus) list += (list.empty() ? "" : ",") + std::to_string(g);
  Say(hs.name + ": holding GPU(s) " + list);
  // The job's nodes there get devices of those it holds: every other
  // index counts as another job's, so the plan gives them consecutive held
  // devices in rank order.
  const std::optional<int> total = plan_.hosts[hs.index].gpus;
  if (!total) return Status::Ok();
  if (Status s = planner_.HeldGpus(hs.index, GpusNotHeld(*total, gpus)); !s.ok()) {
    return Status::Error(hs.name + ": the GPUs held there do not fit the job's nodes: " + s.message());
  }
  return Status::Ok();
}

Status Holds::SecureHoldsOn(HostState& hs) {
  std::vector<Hold> c;
  if (hs.holds.reply) c = Conflicts(HoldRequestFor(hs), *hs.holds.reply, plan_.job_id);
  Status s = Status::Ok();
  if (!c.empty()) {
    s = Status::Error("it is held by another job:\n" + BusyTable({{hs.name, hs.holds.reply->now, std::move(c)}}));
  } else {
    s = AdoptHeldGpus(hs);
  }
  if (!s.ok()) ReleaseHoldsOn({&hs});
  return s;
}

Status Holds::SecureHolds() {
  std::vector<BusyHost> busy = BusyHosts();
  if (busy.empty()) {
    for (HostState* hs : hosts_.Connected()) {
      if (Status s = AdoptHeldGpus(*hs); !s.ok()) {
        ReleaseHolds();
        return s;
      }
    }
    return Status::Ok();
  }
  const bool wait = ctx_.options.wait || ctx_.spec.wait.has_value();
  // Unbounded: ten years (a steady_clock time point holds about 292).
  const milliseconds limit =
      ctx_.spec.wait.value_or(ctx_.options.wait_unbounded ? milliseconds(std::chrono::hours(24 * 3653))
                                                  : milliseconds(std::chrono::minutes(30)));
  const Clock::time_point give_up = Now() + limit;
  std::mt19937 random(std::random_device{}());
  std::string last_said;
  // The job's place in every host's queue: the second it began to wait by
  // its hosts' clocks at its first try (never this machine's), after every
  // waiter that try met there (PlaceInLine).
  std::vector<std::pair<long long, std::vector<Hold>>> seen;
  for (HostState* hs : hosts_.Connected()) {
    if (hs->holds.reply) seen.emplace_back(hs->holds.reply->now, hs->holds.reply->holds);
  }
  const long long ticket_since = PlaceInLine(seen, plan_.job_id);
  for (;;) {
    // All or nothing: what this job got anywhere goes before it fails or
    // waits, so it never holds one host while waiting for another. A
    // waiting job keeps its lease and ticket (its place in the queue).
    if (!wait || ctx_.interrupts > 0 || Now() >= give_up) {
      ReleaseHolds();
      break;
    }
    // Its place in line first, on every host; only then does it say so.
    JoinQueue(ticket_since);
    // The status line says what it waits for; anew only when that changes.
    const std::string what = WaitingFor(busy);
    if (what != last_said) {
      if (!last_said.empty()) ctx_.observer.StepEnded(Phase::kPreflight);
      // `barge ls` (and an array's `ls ARRAY`) shows the job waiting.
      SetStatus(JobStatus::kWaiting, "for " + what);
      Say("waiting for " + what);
      ctx_.observer.StepBegan(Phase::kPreflight, "waiting for " + what, 0);
      last_said = what;
    }
    // A random pause (1-3 s): two jobs that backed off from each other do
    // not come back in step.
    const auto pause = milliseconds(1000 + std::uniform_int_distribution<int>(0, 2000)(random));
    RunUntil([&] { return ctx_.interrupts > 0; }, std::min(give_up, Now() + pause));
    if (ctx_.interrupts > 0) break;
    // Every host again, in one round trip each, in parallel.
    std::map<HostState*, std::string> problems =
        RunTakes(hosts_.Connected(), [&](HostState& hs) { return TakeHoldsLine(hs, ticket_since); });
    if (!problems.empty()) {
      ctx_.observer.StepEnded(Phase::kPreflight);
      ReleaseHolds();
      std::string msg = "cannot reserve the hosts:";
      for (const auto& [hs, p] : problems) msg += "\n  " + hs->name + ": " + p;
      return Status::Error(msg);
    }
    busy = BusyHosts();
    if (busy.empty()) {
      ctx_.observer.StepEnded(Phase::kPreflight);
      SetStatus(JobStatus::kPreflight, "every host is free");
      Say("every host is free: starting");
      Status secured = SecureHolds();
      // Only once the holds are decided: without its ticket in the
      // listing, the job would count every other waiter's as before it.
      RemoveTickets();
      return secured;
    }
  }
  if (!last_said.empty()) ctx_.observer.StepEnded(Phase::kPreflight);
  if (ctx_.interrupts > 0) return Status::Error("interrupted while waiting for hosts");
  std::string head = wait ? "gave up waiting after " + ShortDuration(
                                                           std::chrono::duration_cast<seconds>(limit).count()) +
                                ": "
                          : "";
  bool queued = false;
  for (const BusyHost& b : busy) {
    queued = queued || std::any_of(b.holds.begin(), b.holds.end(), [](const Hold& h) { return IsTicket(h); });
  }
  return Status::Error(head + std::to_string(busy.size()) + " host(s) are held by other jobs" +
                       (queued ? " or wanted first by jobs waiting in line (GPUS: queued)" : "") +
                       "; nothing was started" +
                       (wait ? "" : " (--wait or `wait: 30m` waits for them)") + ":\n" + BusyTable(busy));
}

HoldRequest Holds::PutBackRequest(const HostState& hs) const {
  HoldRequest r = HoldRequestFor(hs);
  if (r.exclusive || r.gpu_count == 0 || !hs.holds.reply) return r;
  std::vector<int> held = HeldGpus(*hs.holds.reply, plan_.job_id);
  if (held.empty()) return r;
  r.gpu_count = 0;
  r.gpu_devices = std::move(held);
  return r;
}

std::string Holds::PutBackLine(const HostState& hs) const {
  HoldOwner owner = OwnerOf(plan_, ctx_.spec);
  owner.job_dir = hs.job_dir;
  // A new lease (has_lease false); a waiting job's try as any other (its
  // ticket made again at its place), a running job's holds by name.
  if (hs.holds.in_line) owner.ticket_since = hs.holds.ticket_since;
  return TakeHoldsScript(*hs.docker, PutBackRequest(hs), owner,
                                std::chrono::duration_cast<seconds>(ctx_.spec.ssh.engine_timeout));
}

std::vector<Hold> Holds::NotePutBack(HostState& hs, const std::string& text) {
  const HoldRequest request = PutBackRequest(hs);
  HoldReply reply = ParseHoldReply(text);
  std::vector<Hold> taken;
  if (!hs.holds.in_line) {
    // A running job: another job's hold on what it held was taken while
    // its lease was gone (a waiter's ticket is no taking).
    for (Hold& h : Conflicts(request, reply, plan_.job_id)) {
      if (!IsTicket(h)) taken.push_back(std::move(h));
    }
  }
  for (const std::string& s : reply.removed_stale) Say(hs.name + ": removed a stale hold: " + s);
  if (!reply.taken.empty()) hs.holds.holding = true;
  hs.holds.reply = std::move(reply);
  return taken;
}

void Holds::ReleaseHolds() {
  // The current hosts and those a spare replaced (a preempted host whose
  // release at the replacement did not get through): a lost one is left to
  // its watchdog, which removes the job's holds with its containers when
  // the lease lapses.
  std::vector<HostState*> hosts = hosts_.All();
  for (auto& old : hosts_.retired) hosts.push_back(old.get());
  ReleaseHoldsOn(hosts);
}

std::map<HostState*, std::string> Holds::RunTakes(const std::vector<HostState*>& hosts,
                                                  const std::function<std::string(HostState&)>& script) {
  CommandGroup group(&ctx_.loop, &ctx_.redact);
  std::map<HostState*, std::string> problems;
  for (HostState* hs : hosts) {
    const std::string text = SectionMarkers() + "echo " + std::string(kPosixShellAnswer) + "\nbs hold; (\n" + script(*hs) +
                             "\n) 2>&1; be hold $?\n";
    group.Run(*hs->exec, text, [this, hs, &problems](const Outcome& o) {
      const PreflightReply reply = ParsePreflightReply(o.out);
      const PreflightSection* s = reply.Find("hold");
      if (!s) {
        problems[hs] = "the hold did not report: " + o.Reason();
        return;
      }
      std::string p = NoteHolds(*hs, s->text, s->exit);
      if (!p.empty()) problems[hs] = p;
    });
  }
  RunWhileProgressing(group, ctx_.spec.ssh.engine_timeout * 3 + seconds(30), [&] { return ctx_.interrupts > 0; });
  group.Cancel();
  return problems;
}

Status Holds::TakeAgain(const std::vector<HostState*>& hosts) {
  std::map<HostState*, std::string> problems = RunTakes(hosts, [&](HostState& hs) {
    HoldOwner owner = OwnerOf(plan_, ctx_.spec);
    owner.job_dir = hs.job_dir;
    owner.has_lease = hs.holds.reply && !LeaseIdOf(hs.holds.reply->holds, plan_.job_id).empty();
    return ReleaseHoldsKeepingPlaceCommand(*hs.docker, plan_.job_id) + "\n" +
           TakeHoldsScript(*hs.docker, HoldRequestFor(hs), owner,
                                  std::chrono::duration_cast<seconds>(ctx_.spec.ssh.engine_timeout));
  });
  if (problems.empty()) return Status::Ok();
  ReleaseHolds();
  std::string msg = "cannot reserve the hosts again without their unhealthy GPUs:";
  for (const auto& [hs, p] : problems) msg += "\n  " + hs->name + ": " + p;
  return Status::Error(msg);
}

void Holds::JoinQueue(long long ticket_since) {
  CommandGroup group(&ctx_.loop, &ctx_.redact);
  for (HostState* hs : hosts_.Connected()) {
    if (hs->lost || !hs->exec) continue;
    std::string line;
    if (hs->holds.in_line) {
      if (!hs->holds.holding) continue;
      line = ReleaseHoldsKeepingPlaceCommand(*hs->docker, plan_.job_id);
    } else {
      HoldOwner owner = OwnerOf(plan_, ctx_.spec);
      owner.job_dir = hs->job_dir;
      owner.ticket_since = ticket_since;
      if (hs->holds.reply) {
        const std::vector<Hold>& listed = hs->holds.reply->holds;
        owner.has_lease = !LeaseIdOf(listed, plan_.job_id).empty();
        owner.has_ticket = std::any_of(listed.begin(), listed.end(), [&](const Hold& h) {
          return h.job_id == plan_.job_id && IsTicket(h);
        });
      }
      line = JoinQueueScript(*hs->docker, owner, std::chrono::duration_cast<seconds>(ctx_.spec.ssh.engine_timeout));
    }
    group.Run(*hs->exec, line, [this, hs, ticket_since](const Outcome& o) {
      if (o.ok()) {
        hs->holds.in_line = true;
        hs->holds.ticket_since = ticket_since;
      } else {
        Say(hs->name + ": taking its place in line or releasing the holds between tries failed: " + o.Reason());
      }
    });
  }
  RunWhileProgressing(group, ctx_.spec.ssh.engine_timeout * 3 + seconds(30));
}

void Holds::RemoveTickets() {
  CommandGroup group(&ctx_.loop, &ctx_.redact);
  for (HostState* hs : hosts_.Connected()) {
    if (hs->lost || !hs->exec) continue;
    group.Run(*hs->exec, RemoveTicketCommand(*hs->docker, plan_.job_id), [this, hs](const Outcome&) {
      // Gone (or never there): the listing the teardown removes by ID
      // must not name it.
      hs->holds.in_line = false;
      if (!hs->holds.reply) return;
      auto& listed = hs->holds.reply->holds;
      listed.erase(std::remove_if(listed.begin(), listed.end(),
                                  [&](const Hold& h) {
                                    return h.job_id == plan_.job_id && IsTicket(h);
                                  }),
                   listed.end());
    });
  }
  RunWhileProgressing(group, ctx_.spec.ssh.engine_timeout + seconds(30));
}

void Holds::ReleaseHoldsOn(const std::vector<HostState*>& hosts) {
  CommandGroup group(&ctx_.loop, &ctx_.redact);
  for (HostState* hs : hosts) {
    if (!hs->holds.holding || hs->lost || !hs->exec) continue;
    // The lease goes with the holds: a renewal from now on (they run until
    // the watchdogs are disarmed) would find it gone and put it back.
    hs->lease.releasing = true;
    group.Run(*hs->exec, ReleaseHoldsCommand(*hs->docker, plan_.job_id), [this, hs](const Outcome& o) {
      if (o.ok()) {
        hs->holds.holding = false;
        hs->holds.in_line = false;
      } else {
        Say(hs->name + ": releasing the hold failed (its watchdog removes it when the lease lapses): " + o.Reason());
      }
    });
  }
  RunWhileProgressing(group, ctx_.spec.ssh.engine_timeout + seconds(30));
}

}  // namespace barge::runner::internal
