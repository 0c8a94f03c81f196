// spares: a spare host takes the place of a host the GPU health gate or
// its failure record puts out at the start (connected, logged in,
// preflighted, judged by its own record, gated), and at a restart (or the
// same host checked again) of every host a fault marked `replace`:
// connected, logged in, preflighted, judged by its own record (one it puts
// out is passed over, with a host_avoided event), its holds secured, its
// files uploaded.
#include <algorithm>
#include <optional>
#include <string>

#include "runner/controller/controller.h"
#include "runner/remote/reservation.h"
#include "runner/remote/watchdog.h"

namespace barge::runner::internal {

void Controller::LeaveHost(HostState* old, bool disarm, bool release) {
  if (old->lost || !old->exec) return;
  // Still reachable: its watchdog is not needed any more, and the job's
  // holds there go now (a lost one's go with its watchdog; ReleaseHolds
  // tries again at the end).
  if (disarm) ctx_.job_commands.Run(*old->exec, DisarmWatchdogCommand(old->job_dir), [](const Outcome&) {});
  if (release && old->holds.holding) {
    ctx_.job_commands.Run(*old->exec, ReleaseHoldsCommand(*old->docker, plan_.job_id), [old](const Outcome& o) {
      if (o.ok()) old->holds.holding = false;
    });
  }
}

bool Controller::PlaceSpare(size_t h, const std::string& why, const std::function<Status(HostState&)>& after) {
  HostState* old_state = hosts_.by_index[h].get();
  const std::string old_name = old_state->name;
  const cluster::Host old_inventory = planner_.facts().hosts[h];
  while (next_spare_ < ctx_.spec.spare_hosts.size() && ctx_.interrupts == 0) {
    cluster::Host spare = ctx_.spec.spare_hosts[next_spare_++];
    spare.nodes = old_inventory.nodes;
    spare.role = old_inventory.role;
    spare.line = old_inventory.line;
    planner_.ReplaceHost(h, spare);
    Say("replacing " + old_name + " with spare host " + spare.address + (why.empty() ? "" : ": " + why));
    Status s = connections_.Connect({h});
    if (s.ok()) s = login_.Login({hosts_.by_index[h].get()});
    if (s.ok()) s = preflight_.Run({hosts_.by_index[h].get()});
    if (s.ok()) s = after(*hosts_.by_index[h]);
    if (s.ok()) {
      old_state->health.superseded = true;
      RecordHost(*hosts_.by_index[h], old_state->id);
      return true;
    }
    Say("spare host " + spare.address + " cannot be used: " + s.message());
  }
  planner_.ReplaceHost(h, old_inventory);
  return false;
}

Status Controller::GateGpus() {
  std::vector<HostState*> check = hosts_.Connected();
  std::vector<HostState*> out;      // out, with no spare to take their place
  std::vector<HostState*> avoided;  // of those, out by their failure record
  while (!check.empty()) {
    // The failure records first (read by preflight's holds listing): a
    // host they put out is not asked anything more.
    std::vector<HostState*> recorded;
    records_.Apply(check, &recorded);
    std::vector<HostState*> gated;
    for (HostState* hs : check) {
      if (std::find(recorded.begin(), recorded.end(), hs) == recorded.end()) gated.push_back(hs);
    }
    std::vector<HostState*> unhealthy;
    gpu_gate_.Diagnose(gated);
    if (Status s = gpu_gate_.Apply(gated, &unhealthy); !s.ok()) return s;
    check.clear();
    for (HostState* hs : recorded) unhealthy.push_back(hs);
    for (HostState* hs : unhealthy) {
      const bool by_record = std::find(recorded.begin(), recorded.end(), hs) != recorded.end();
      if (next_spare_ >= ctx_.spec.spare_hosts.size()) {
        (by_record ? avoided : out).push_back(hs);
        continue;
      }
      LeaveHost(hs, /*disarm=*/true, /*release=*/true);
      const size_t h = hs->index;
      const std::string why = by_record ? "its failure record puts it out" : gpu_gate_.OutReason(*hs);
      if (PlaceSpare(h, why, [](HostState&) { return Status::Ok(); })) {
        Event(by_record ? event::kHostAvoided : event::kGpuUnhealthy, hs->name,
              "spare host " + hosts_.by_index[h]->name + " takes its place");
        check.push_back(hosts_.by_index[h].get());
      } else {
        (by_record ? avoided : out).push_back(hs);
      }
    }
  }
  if (!avoided.empty()) {
    Status s = records_.OutError(avoided, plan_.hosts.size());
    if (out.empty()) return s;
    return Status::Error(s.message() + gpu_gate_.OutError(out, plan_.hosts.size()).message());
  }
  if (!out.empty()) return gpu_gate_.OutError(out, plan_.hosts.size());
  return Status::Ok();
}

Status Controller::ReplaceHosts() {
  for (auto& [h_key, host_ptr] : hosts_.by_index) {
    const size_t h = h_key;
    if (!host_ptr->health.replace) continue;
    const std::string old_name = host_ptr->name;
    const cluster::Host old_inventory = planner_.facts().hosts[h];
    HostState* old_state = host_ptr.get();
    LeaveHost(old_state, /*disarm=*/true, /*release=*/false);
    // A spare in its place: connected, preflighted, not out by its failure
    // record (read by preflight's holds listing, as at the start), its
    // holds secured (a spare another job holds is not used), given the
    // workdir.
    const bool placed = PlaceSpare(h, "", [&](HostState& spare) {
      if (Status s = records_.Admit(spare); !s.ok()) {
        LeaveHost(&spare, /*disarm=*/true, /*release=*/true);
        return s;
      }
      Status s = holds_.SecureHoldsOn(spare);
      if (s.ok()) s = uploads_.Upload({&spare});
      if (s.ok()) {
        const std::string& address = spare.inventory.address;
        Event(event::kRestarting, address, "spare host " + address + " takes the place of " + old_name);
      }
      return s;
    });
    if (placed) {
      LeaveHost(old_state, /*disarm=*/false, /*release=*/true);
      continue;
    }
    // No spare left: the same host, checked again; not one whose GPUs were
    // found unhealthy while the job ran (gpu_watch.h).
    if (!old_state->gpus.out_while_running.empty()) {
      return Status::Error(old_name + " cannot be used again (" + old_state->gpus.out_while_running +
                           ") and no spare host is left");
    }
    planner_.ReplaceHost(h, old_inventory);
    const bool was_lost = old_state->lost;
    Say("no spare host left; checking " + old_name + " again");
    Status s = Status::Ok();
    if (was_lost) {
      s = connections_.Connect({h});
      // Its old watchdog may still run, on the job's old directory there:
      // it goes before a new one is armed on a new directory (it would
      // otherwise remove the new attempt's containers when its lease lapses).
      if (s.ok()) {
        std::optional<Outcome> disarmed;
        CommandGroup group(&ctx_.loop, &ctx_.redact);
        group.Run(*hosts_.by_index[h]->exec, DisarmWatchdogCommand(old_state->job_dir),
                  [&](const Outcome& o) { disarmed = o; });
        RunUntil([&] { return disarmed.has_value(); }, Now() + ctx_.spec.ssh.dead_after + seconds(60));
        if (!disarmed || !disarmed->ok()) {
          s = Status::Error("its old watchdog could not be stopped: " + (disarmed ? disarmed->Reason() : "no answer"));
        }
      }
      if (s.ok()) s = login_.Login({hosts_.by_index[h].get()});
      if (s.ok()) s = preflight_.Run({hosts_.by_index[h].get()});
      if (s.ok()) s = holds_.SecureHoldsOn(*hosts_.by_index[h]);
      // Its watchdog may have removed the job's directory meanwhile.
      if (s.ok()) s = uploads_.Upload({hosts_.by_index[h].get()});
    }
    HostState& hs = *hosts_.by_index[h];
    std::optional<Outcome> checked;
    if (s.ok()) {
      std::string line = faults_.RemoveJobContainersLine(hs);
      if (ctx_.spec.preemption && !was_lost) {
        line = "if " + Bounded(ctx_.spec.preemption->command, seconds(10)) +
               " >/dev/null 2>&1; then echo 'a preemption notice is still up' >&2; exit 3; fi; " + line;
      }
      CommandGroup group(&ctx_.loop, &ctx_.redact);
      group.Run(*hs.exec, line, [&](const Outcome& o) { checked = o; });
      RunUntil([&] { return checked.has_value(); }, Now() + ctx_.spec.ssh.dead_after + seconds(60));
      if (!checked || !checked->ok()) {
        s = Status::Error(checked ? checked->Reason() : "no answer");
      }
    }
    if (!s.ok()) {
      return Status::Error(old_name + " cannot be used again and no spare host is left: " + s.message());
    }
    hs.health.replace = false;
    Say(old_name + " checked again: it is used for the restart");
  }
  return Status::Ok();
}

}  // namespace barge::runner::internal
