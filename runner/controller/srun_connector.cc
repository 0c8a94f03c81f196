#include "runner/controller/srun_connector.h"

#include <utility>

#include "runner/remote/slurm.h"
#include "ssh/local_executor.h"

namespace barge::runner {

namespace {

// One node's command lines as job steps, started through `submit`.
class SrunExecutor : public ssh::Executor {
 public:
  SrunExecutor(std::shared_ptr<ssh::Executor> submit, std::string slurm_id, std::string node)
      : submit_(std::move(submit)), slurm_id_(std::move(slurm_id)), node_(std::move(node)) {}

  // The step's command line holds no part of `command_line`: it goes first
  // on the step's stdin (slurm::SrunLine), ahead of whatever the caller
  // writes there.
  Result<std::unique_ptr<ssh::Command>> Start(const std::string& command_line,
                                              ssh::CommandCallbacks callbacks) override {
    if (command_line.find('\0') != std::string::npos) {
      return Status::Error(label() + ": the command line contains a NUL byte");
    }
    Result<std::unique_ptr<ssh::Command>> step =
        submit_->Start(slurm::SrunLine(slurm_id_, node_), std::move(callbacks));
    if (step.ok()) (*step)->WriteStdin(slurm::SrunStdinLine(command_line));
    return step;
  }
  std::string label() const override { return node_ + " (Slurm job " + slurm_id_ + " steps)"; }
  Status health() const override { return submit_->health(); }

 private:
  std::shared_ptr<ssh::Executor> submit_;
  std::string slurm_id_;
  std::string node_;
};

}  // namespace

SrunHostConnector::SrunHostConnector(ssh::EventLoop* loop, JobSpec spec, std::string slurm_id)
    : loop_(loop), spec_(std::move(spec)), slurm_id_(std::move(slurm_id)) {}

Result<std::unique_ptr<ssh::Executor>> ConnectSubmitHost(const JobSpec& spec, ssh::EventLoop* loop) {
  SshHostConnector connector(loop);
  if (spec.slurm->login.empty()) return connector.Local();
  cluster::Host login;
  login.address = spec.slurm->login;
  login.user = spec.slurm->login_user;
  login.port = spec.slurm->login_port;
  HostTarget target;
  target.host = login;
  target.ssh = SessionOptionsFor(spec, login);
  auto connected = connector.Connect({target}, 1);
  if (!connected[0].ok()) {
    return Status::Error("cannot reach the Slurm login host " + spec.slurm->login + ": " +
                         connected[0].status().message());
  }
  return std::move(connected[0]).value();
}

Result<std::shared_ptr<ssh::Executor>> SrunHostConnector::Submit() {
  if (submit_) return submit_;
  Result<std::unique_ptr<ssh::Executor>> connected = ConnectSubmitHost(spec_, loop_);
  if (!connected.ok()) return connected.status();
  submit_ = std::shared_ptr<ssh::Executor>(std::move(connected).value());
  return submit_;
}

std::vector<Result<std::unique_ptr<ssh::Executor>>> SrunHostConnector::Connect(
    const std::vector<HostTarget>& targets, int parallelism) {
  (void)parallelism;  // a job step needs no handshake of its own
  std::vector<Result<std::unique_ptr<ssh::Executor>>> out;
  Result<std::shared_ptr<ssh::Executor>> submit = Submit();
  for (const HostTarget& t : targets) {
    auto node = t.host.vars.find("SLURM_NODE");
    if (!submit.ok()) {
      out.emplace_back(submit.status());
    } else if (node == t.host.vars.end()) {
      out.emplace_back(Status::Error(t.host.address + " is not a node of Slurm job " + slurm_id_));
    } else {
      out.emplace_back(std::unique_ptr<ssh::Executor>(std::make_unique<SrunExecutor>(*submit, slurm_id_, node->second)));
    }
  }
  return out;
}

std::unique_ptr<ssh::Executor> SrunHostConnector::Local() { return std::make_unique<ssh::LocalExecutor>(loop_); }

}  // namespace barge::runner
