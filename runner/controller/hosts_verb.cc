// `barge hosts`: asks every host of a job file (or of --hosts) for its holds
// and running barge containers, one command per host in parallel (the CLI
// prints them, every host group's too, in one table or JSON). Exit 0 when
// every host answered, 125 when one could not be asked. With --forgive
// HOST, that host's failure record is forgiven first, in the same command
// (125 when HOST is none of the hosts, or the entry could not be written).
#include <algorithm>
#include <cstdio>

#include <pwd.h>
#include <unistd.h>

#include "runner/console/exit_codes.h"
#include "runner/controller/host_records.h"
#include "runner/controller/host_verbs.h"
#include "runner/controller/job_state.h"
#include "runner/remote/host_record.h"
#include "runner/remote/hosts_view.h"

namespace barge::runner::internal {

std::string HostVerbs::ForgiveCommand(const HostState& hs) const {
  FaultEntry e;
  e.kind = std::string(kForgivenKind);
  e.detail = "barge hosts --forgive";
  if (const passwd* pw = getpwuid(geteuid())) e.user = pw->pw_name;
  if (e.user.empty()) e.user = std::to_string(geteuid());
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) == 0) e.machine = host;
  return RecordFaultsNowCommand(*hs.docker, {e}, 0, std::chrono::duration_cast<seconds>(ctx_.spec.ssh.engine_timeout));
}

int HostVerbs::ListHosts(const std::string& label, std::vector<HostView>* out) {
  if (!Prepare(/*with_store=*/false)) return kExitBargeFailure;
  UseEveryHost();
  (void)connections_.Connect();  // a host that cannot be reached gets its row
  CommandGroup group(&ctx_.loop, &ctx_.redact);
  bool forgive_failed = false;
  std::vector<HostView> views;
  std::map<size_t, size_t> row;  // host index → views
  for (auto& [h, host] : hosts_.by_index) {
    row[h] = views.size();
    views.emplace_back().host = host->name + (label.empty() ? "" : " (" + label + ")");
    if (!host->exec) {
      auto why = hosts_.connect_errors.find(h);
      views.back().error = why == hosts_.connect_errors.end() ? "not connected" : why->second;
      continue;
    }
    HostState* hs = host.get();
    const bool forgive = !ctx_.options.hosts_forgive.empty() &&
                         (ctx_.options.hosts_forgive == hs->name || ctx_.options.hosts_forgive == hs->inventory.address);
    std::string script;
    if (forgive) {
      script = "( " + ForgiveCommand(*hs) + " ) || exit 1\n";
    }
    script += ListHoldsScript(*hs->docker, /*containers=*/true,
                                                std::chrono::duration_cast<seconds>(ctx_.spec.ssh.engine_timeout));
    if (ctx_.options.hosts_gpus) {
      // After the listing (which exits at once when it fails): the GPUs'
      // problems are their sections', not the command's.
      script += "(\n" + HostGpuLines(ctx_.spec.health.nvidia_smi, std::chrono::duration_cast<seconds>(
                                                                     std::clamp<milliseconds>(ctx_.spec.ssh.engine_timeout, seconds(5), seconds(30)))) +
                "\n)\n:\n";
    }
    group.Run(*hs->exec, script, [&, h = h, hs, forgive](const Outcome& o) {
      HostView v = ParseHostView(hs->name, o.out);
      v.host = views[row[h]].host;
      v.rule = RuleOf(ctx_.spec);
      if (forgive) {
        Say(hs->name + (o.ok() ? ": its failure record is forgiven (an entry with who and when is on the host)"
                               : ": its failure record could not be forgiven: " + o.Reason()));
        if (!o.ok()) forgive_failed = true;
        v.forgiven = o.ok();
      }
      if (!o.ok() && v.error.empty()) v.error = o.Reason();
      if (ctx_.options.hosts_gpus) {
        ReadHostGpus(o.out, plan_.hosts[h].gpus, std::chrono::duration_cast<seconds>(ctx_.spec.health.xid_window), &v);
      }
      views[row[h]] = std::move(v);
    });
  }
  RunWhileProgressing(group, ctx_.spec.ssh.engine_timeout * 2 + seconds(30), [&] { return ctx_.interrupts > 0; });
  const bool all = !forgive_failed &&
                   std::all_of(views.begin(), views.end(), [](const HostView& v) { return v.error.empty(); });
  out->insert(out->end(), std::make_move_iterator(views.begin()), std::make_move_iterator(views.end()));
  return all ? 0 : kExitBargeFailure;
}

}  // namespace barge::runner::internal
