// spares: at a restart, a spare host (or the same host checked again)
// takes the place of every host a fault marked `replace`: connected,
// logged in, preflighted, its holds secured, its files uploaded.
#include <optional>
#include <string>

#include "runner/controller/controller.h"
#include "runner/remote/reservation.h"
#include "runner/remote/watchdog.h"

namespace barge::runner::internal {

Status Controller::ReplaceHosts() {
  for (auto& [h_key, host_ptr] : hosts_) {
    const size_t h = h_key;
    if (!host_ptr->health.replace) continue;
    const std::string old_name = host_ptr->name;
    const cluster::Host old_inventory = input_.hosts[h];
    HostState* old_state = host_ptr.get();
    if (!old_state->lost) {
      // Still reachable (preempted): its watchdog is not needed any more.
      job_.Run(*old_state->exec, DisarmWatchdogCommand(plan_.job_id, old_state->job_dir), [](const Outcome&) {});
    }
    bool placed = false;
    // A spare in its place: connected, preflighted, given the workdir.
    while (!placed && next_spare_ < spec_.spare_hosts.size() && interrupts_ == 0) {
      cluster::Host spare = spec_.spare_hosts[next_spare_++];
      spare.nodes = old_inventory.nodes;
      spare.role = old_inventory.role;
      spare.line = old_inventory.line;
      input_.hosts[h] = spare;
      plan_.hosts[h] = spare;
      Say("replacing " + old_name + " with spare host " + spare.address);
      Status s = connections_.Connect({h});
      if (s.ok()) s = login_.Login({hosts_[h].get()});
      if (s.ok()) s = preflight_.Run({hosts_[h].get()});
      // A spare another job holds is not used (its preflight took a hold).
      if (s.ok()) s = holds_.SecureHoldsOn(*hosts_[h]);
      if (s.ok()) s = uploads_.Upload({hosts_[h].get()});
      if (s.ok()) {
        Event(event::kRestarting, spare.address,
              "spare host " + spare.address + " takes the place of " + old_name);
        old_state->health.superseded = true;
        // The job's holds on the host it left go now (a lost one's go with
        // its watchdog; ReleaseHolds tries again at the end).
        if (old_state->holds.holding && !old_state->lost && old_state->exec) {
          job_.Run(*old_state->exec, fleet::ReleaseHoldsCommand(*old_state->docker, plan_.job_id),
                   [old_state](const Outcome& o) {
                     if (o.ok()) old_state->holds.holding = false;
                   });
        }
        RecordHost(*hosts_[h], old_state->id);
        placed = true;
      } else {
        Say("spare host " + spare.address + " cannot be used: " + s.message());
      }
    }
    if (placed) continue;
    // No spare left: the same host, checked again.
    input_.hosts[h] = old_inventory;
    plan_.hosts[h] = old_inventory;
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
        CommandGroup group(&loop_, &redact_);
        group.Run(*hosts_[h]->exec, DisarmWatchdogCommand(plan_.job_id, old_state->job_dir),
                  [&](const Outcome& o) { disarmed = o; });
        RunUntil([&] { return disarmed.has_value(); }, Now() + spec_.ssh.dead_after + seconds(60));
        if (!disarmed || !disarmed->ok()) {
          s = Status::Error("its old watchdog could not be stopped: " + (disarmed ? disarmed->Reason() : "no answer"));
        }
      }
      if (s.ok()) s = login_.Login({hosts_[h].get()});
      if (s.ok()) s = preflight_.Run({hosts_[h].get()});
      if (s.ok()) s = holds_.SecureHoldsOn(*hosts_[h]);
      // Its watchdog may have removed the job's directory meanwhile.
      if (s.ok()) s = uploads_.Upload({hosts_[h].get()});
    }
    HostState& hs = *hosts_[h];
    std::optional<Outcome> checked;
    if (s.ok()) {
      std::string line = faults_.RemoveJobContainersLine(hs);
      if (spec_.preemption && !was_lost) {
        line = "if " + Bounded(spec_.preemption->command, seconds(10)) +
               " >/dev/null 2>&1; then echo 'a preemption notice is still up' >&2; exit 3; fi; " + line;
      }
      CommandGroup group(&loop_, &redact_);
      group.Run(*hs.exec, line, [&](const Outcome& o) { checked = o; });
      RunUntil([&] { return checked.has_value(); }, Now() + spec_.ssh.dead_after + seconds(60));
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
