// SshHostConnector: libssh handshakes driven by the job's loop, then one SshExecutor per
// session on the loop; the local engine through ssh::LocalExecutor.
#include "runner/controller/host_connector.h"

#include "ssh/connect_all.h"
#include "ssh/local_executor.h"
#include "ssh/session.h"
#include "ssh/ssh_executor.h"

namespace barge::runner {

ssh::SessionOptions SessionOptionsFor(const JobSpec& spec, const cluster::Host& host) {
  ssh::SessionOptions o;
  o.host = host.address;
  o.port = host.port ? host.port : spec.ssh.port;
  o.user = host.user ? host.user : spec.ssh.user;
  o.identity_file = host.identity_file ? host.identity_file : spec.ssh.identity_file;
  o.known_hosts_file = spec.ssh.known_hosts;
  o.config_file = spec.ssh.config_file;
  o.host_key_checking = spec.ssh.host_key_checking;
  o.connect_timeout = spec.ssh.connect_timeout;
  o.proxy_jump = host.proxy_jump ? *host.proxy_jump : spec.ssh.proxy_jump;
  return o;
}

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
  auto sessions = ssh::ConnectAll(remote, parallelism, loop_);
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
