// Forwarding: the job's local ports forwarded to its nodes' ports
// (forwards.h's JobForwards) over the node's host session: `forward:`
// served by a running job's controller, and `barge forward`.
//
// Threading: the loop's thread only.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "cluster/plan.h"
#include "runner/controller/forwards.h"
#include "runner/controller/host_set.h"
#include "runner/controller/job_context.h"
#include "runner/remote/command_group.h"

namespace barge::runner::internal {

class Forwarding : private JobPart {
 public:
  Forwarding(JobContext* ctx, HostSet* hosts, const cluster::Plan* plan)
      : JobPart(ctx), hosts_(*hosts), plan_(*plan) {}

  // Binds every local port of `forwards`; fails on a rank the plan lacks or
  // a busy port, naming the entry (`what`[i]).
  Status Bind(const std::vector<ForwardSpec>& forwards, const std::string& what);
  // Serves every bound forward over its node's host session, in `group`
  // (the container's address is asked for where the network is not the
  // host's); prints "forwarding http://127.0.0.1:L -> rank R port P" as each
  // starts. `on_fatal` runs when one cannot go on.
  void Serve(CommandGroup& group, std::function<void(const Status&)> on_fatal);
  // Stops serving; the ports stay bound until Close or the destructor.
  void Stop();
  void Close() { forwards_.reset(); }

 private:
  HostSet& hosts_;
  const cluster::Plan& plan_;
  std::unique_ptr<JobForwards> forwards_;
};

}  // namespace barge::runner::internal
