// slurm.transport: srun — the allocated nodes reached as Slurm job steps,
// behind the same HostConnector and ssh::Executor seams as SSH: every
// command line a host would run over SSH runs as a step `srun --jobid ID
// --overlap --nodelist NODE /bin/sh -c PROGRAM` (runner/remote/slurm.h),
// started where Slurm's commands run (this machine, or one SSH session to
// slurm.login). The line itself is the first line of the step's stdin,
// never on srun's argv, where other users of the submit host could read
// it; the caller's stdin follows it.
//
// What needs more than a command line does not go through a job step: no
// unix-socket streams (the controller then drives each engine with the
// docker CLI instead of its Engine API), no SSH channels (port forwards,
// exec -it).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "runner/controller/host_connector.h"
#include "runner/jobfile/job_spec.h"

namespace barge::runner {

// Where a slurm: job's Slurm commands run, on `loop`: this machine (a
// local executor), or one SSH session to slurm.login with the job's ssh:
// settings. Fails when the login host cannot be reached.
Result<std::unique_ptr<ssh::Executor>> ConnectSubmitHost(const JobSpec& spec, ssh::EventLoop* loop);

class SrunHostConnector : public HostConnector {
 public:
  // The nodes of allocation `slurm_id` of `spec` (a slurm: job); each
  // target names its node in host.vars["SLURM_NODE"] (PlaceOnSlurmNodes).
  SrunHostConnector(ssh::EventLoop* loop, JobSpec spec, std::string slurm_id);
  std::vector<Result<std::unique_ptr<ssh::Executor>>> Connect(const std::vector<HostTarget>& targets,
                                                              int parallelism) override;
  std::unique_ptr<ssh::Executor> Local() override;

 private:
  // Where the steps start: made at the first Connect, shared by the nodes'
  // executors.
  Result<std::shared_ptr<ssh::Executor>> Submit();

  ssh::EventLoop* loop_;
  JobSpec spec_;
  std::string slurm_id_;
  std::shared_ptr<ssh::Executor> submit_;
};

}  // namespace barge::runner
