// HostConnector: how the controller gets one executor per host. The seam
// between the controller's logic and the transport, like ninja's
// CommandRunner: the real one opens SSH sessions (and the local engine's
// executor); a fake one (fake_hosts.h) scripts outcomes for unit tests.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "cluster/inventory.h"
#include "runner/jobfile/job_spec.h"
#include "ssh/event_loop.h"
#include "ssh/executor.h"
#include "ssh/session_options.h"

namespace barge::runner {

// One host to connect to.
struct HostTarget {
  cluster::Host host;
  ssh::SessionOptions ssh;  // for a remote host (not host.is_local())
  // How long the host may stay silent before its connection counts as dead
  // (ssh.dead_after); zero turns the check off.
  std::chrono::milliseconds dead_after{0};
  // Runs from the loop, once, when the connection dies after Connect
  // returned it (never for a host that could not be reached).
  std::function<void(const Status&)> on_lost;
};

// How `spec` reaches `host` over SSH: the host's own settings where it has
// them, else the job's ssh: block.
ssh::SessionOptions SessionOptionsFor(const JobSpec& spec, const cluster::Host& host);

class HostConnector {
 public:
  virtual ~HostConnector() = default;
  // Connects to every target, at most `parallelism` handshakes at once, and
  // returns one executor (or the reason none could be had) per target, in
  // order. Blocks until every attempt has ended; the executors are driven by
  // the connector's event loop from then on.
  [[nodiscard]] virtual std::vector<Result<std::unique_ptr<ssh::Executor>>> Connect(
      const std::vector<HostTarget>& targets, int parallelism) = 0;
  // An executor for commands on the controller's own machine (local tar,
  // docker save, teardown.local_command).
  [[nodiscard]] virtual std::unique_ptr<ssh::Executor> Local() = 0;
};

// The real connector: libssh sessions (ssh::ConnectAll on `loop`, then one
// SshExecutor each on it) and ssh::LocalExecutor for the local engine.
class SshHostConnector : public HostConnector {
 public:
  explicit SshHostConnector(ssh::EventLoop* loop) : loop_(loop) {}
  std::vector<Result<std::unique_ptr<ssh::Executor>>> Connect(const std::vector<HostTarget>& targets,
                                                              int parallelism) override;
  std::unique_ptr<ssh::Executor> Local() override;

 private:
  ssh::EventLoop* loop_;
};

}  // namespace barge::runner
