// `barge hosts`: asks every host of a job file (or of --hosts) for its holds
// and running barge containers, one command per host in parallel (the CLI
// prints them, every host group's too, in one table or JSON). Exit 0 when
// every host answered, 125 when one could not be asked.
#include <algorithm>
#include <cstdio>

#include "runner/console/exit_codes.h"
#include "runner/controller/host_verbs.h"
#include "runner/controller/job_state.h"
#include "runner/remote/hosts_view.h"

namespace barge::runner::internal {

int HostVerbs::ListHosts(const std::string& label, std::vector<HostView>* out) {
  if (!Prepare(/*with_store=*/false)) return kExitBargeFailure;
  UseEveryHost();
  (void)connections_.Connect();  // a host that cannot be reached gets its row
  CommandGroup group(&ctx_.loop, &ctx_.redact);
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
    std::string script = ListHoldsScript(*hs->docker, /*containers=*/true,
                                                std::chrono::duration_cast<seconds>(ctx_.spec.ssh.engine_timeout));
    if (ctx_.options.hosts_gpus) {
      // After the listing (which exits at once when it fails): the GPUs'
      // problems are their sections', not the command's.
      script += "(\n" + HostGpuLines(ctx_.spec.health.nvidia_smi, std::chrono::duration_cast<seconds>(
                                                                     std::clamp<milliseconds>(ctx_.spec.ssh.engine_timeout, seconds(5), seconds(30)))) +
                "\n)\n:\n";
    }
    group.Run(*hs->exec, script, [&, h = h, hs](const Outcome& o) {
      HostView v = ParseHostView(hs->name, o.out);
      v.host = views[row[h]].host;
      if (!o.ok() && v.error.empty()) v.error = o.Reason();
      if (ctx_.options.hosts_gpus) {
        ReadHostGpus(o.out, plan_.hosts[h].gpus, std::chrono::duration_cast<seconds>(ctx_.spec.health.xid_window), &v);
      }
      views[row[h]] = std::move(v);
    });
  }
  RunWhileProgressing(group, ctx_.spec.ssh.engine_timeout * 2 + seconds(30), [&] { return ctx_.interrupts > 0; });
  const bool all = std::all_of(views.begin(), views.end(), [](const HostView& v) { return v.error.empty(); });
  out->insert(out->end(), std::make_move_iterator(views.begin()), std::make_move_iterator(views.end()));
  return all ? 0 : kExitBargeFailure;
}

}  // namespace barge::runner::internal
