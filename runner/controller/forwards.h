// The forwards of one job (`forward:` entries, or `barge forward`'s
// arguments): each local port bound before anything starts, and served,
// once its node is ready, over the session to that node's host.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "runner/jobfile/job_spec.h"
#include "ssh/event_loop.h"
#include "ssh/executor.h"
#include "ssh/port_forward.h"

namespace barge::runner {

// Where a node's port is reached from its host: 127.0.0.1 for a
// host-network container (the host's loopback is the container's), else the
// container's own address on its network (`docker inspect`), which reaches
// only services that listen on all addresses (0.0.0.0), not those bound to
// the container's 127.0.0.1. Empty `inspect_output` with a non-host network:
// the address is unknown.
[[nodiscard]] Result<std::string> ForwardTarget(const std::optional<std::string>& network,
                                                const std::string& inspect_output);

// The one line printed when a forward starts serving.
std::string ForwardingLine(const ForwardSpec& f);

// Owns one ssh::PortForward per spec. The loop's thread only; must be
// destroyed (or StopAll called) before the executors it serves through.
class JobForwards {
 public:
  // Binds every local port on 127.0.0.1 (or unix socket) now, in order;
  // the first that is busy fails it all, naming the port (and the entry,
  // `what(i)`). Only the user barge runs as may connect
  // (ssh/port_forward.h).
  [[nodiscard]] static Result<std::unique_ptr<JobForwards>> Bind(
      ssh::EventLoop* loop, const std::vector<ForwardSpec>& specs,
      const std::function<std::string(size_t)>& what);

  const std::vector<ForwardSpec>& specs() const { return specs_; }
  // Serves entry `i` through `via` to target_host:remote_port. `on_fatal`
  // runs once (from the loop) if the host refuses forwarding or the
  // connection dies; that entry then stops.
  void Serve(size_t i, ssh::Executor* via, const std::string& target_host,
             std::function<void(const Status&)> on_fatal);
  // Stops every entry (the ports stay bound, so a restart serves them again).
  void StopAll();
  ssh::PortForward& forward(size_t i) { return *forwards_[i]; }

 private:
  std::vector<ForwardSpec> specs_;
  std::vector<std::unique_ptr<ssh::PortForward>> forwards_;
};

}  // namespace barge::runner
