// SshHostConnector: parallel libssh handshakes, then one SshExecutor per
// session on the loop; the local engine through ssh::LocalExecutor.
#include "runner/controller/host_connector.h"

#include "ssh/local_executor.h"
#include "ssh/session.h"
#include "ssh/ssh_executor.h"

namespace barge::runner {

std::vector<Result<std::unique_ptr<ssh::Executor>>> SshHostConnector::Connect(
    const std::vector<HostTarget>& targets, int parallelism) {
  std::vector<Result<std::unique_ptr<ssh::Executor>>> out;
  std::vector<ssh::SessionOptions> remote;
  std::vector<size_t> remote_index;
  out.reserve(targets.size());
  for (size_t i = 0; i < targets.size(); ++i) {
    if (targets[i].host.is_local()) {
      out.emplace_back(std::unique_ptr<ssh::Executor>(std::make_unique<ssh::LocalExecutor>(loop_)));
    } else {
      out.emplace_back(Status::Error("not connected"));
      remote.push_back(targets[i].ssh);
      remote_index.push_back(i);
    }
  }
  if (remote.empty()) return out;
  auto sessions = ssh::ConnectAll(remote, parallelism);
  for (size_t r = 0; r < sessions.size(); ++r) {
    const size_t i = remote_index[r];
    if (!sessions[r].ok()) {
      out[i] = sessions[r].status();
      continue;
    }
    auto exec = std::make_unique<ssh::SshExecutor>(std::move(sessions[r]).value(), loop_);
    exec->set_dead_after(targets[i].dead_after);
    if (targets[i].on_lost) exec->set_on_connection_lost(targets[i].on_lost);
    out[i] = std::unique_ptr<ssh::Executor>(std::move(exec));
  }
  return out;
}

std::unique_ptr<ssh::Executor> SshHostConnector::Local() {
  return std::make_unique<ssh::LocalExecutor>(loop_);
}

}  // namespace barge::runner
