// RegistryLogin: the registry login on every host (the password on the
// command's stdin) into the job's own Docker client config, and the logout
// at the end.
#pragma once

#include <vector>

#include "runner/controller/host_set.h"
#include "runner/controller/job_context.h"

namespace barge::runner::internal {

// registry: a login was tried on the host, so the job's Docker client
// config there may hold the credential until Logout.
struct HostLogin {
  bool tried = false;
};

class RegistryLogin : private JobPart {
 public:
  RegistryLogin(JobContext* ctx, HostSet* hosts, const cluster::Plan* plan)
      : JobPart(ctx), hosts_(*hosts), plan_(*plan) {}

  // registry: `docker login --password-stdin` on every connected target (the
  // password written to the command's stdin), into the job's own client
  // config (DockerConfigDir), which every later docker command of the job
  // on that host uses. Runs right after Connect, before Preflight checks or
  // pulls images. Fails, naming each host and the registry's reason, when a
  // login fails.
  Status Login(const std::vector<HostState*>& targets);
  // `docker logout` on every reachable host where a login was tried, and the
  // client config removed. A lost host's watchdog removes it with the job's
  // directory.
  void Logout();

 private:
  HostSet& hosts_;
  const cluster::Plan& plan_;  // the current plan (the Controller makes it)
};

}  // namespace barge::runner::internal
