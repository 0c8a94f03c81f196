// FakeSlurm: Slurm's client commands where a slurm: job runs them (salloc,
// squeue, scontrol, scancel), scripted, for the unit tests of a slurm: job
// (runner/controller/slurm_allocation.h, slurm_run.h): one allocation, job
// 7, of nodes n1 and n2 (NodeAddr 10.0.0.1, 10.0.0.2). Every answer comes
// from the loop of the executor it ran on, at once (or, as scripted, later
// or never).
//
// For tests only; the loop's thread only.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ssh/event_loop.h"
#include "ssh/executor.h"

namespace barge::runner {

class FakeSlurm {
 public:
  using TimePoint = ssh::EventLoop::Clock::time_point;

  // How long salloc waits in the queue before Slurm grants the allocation.
  std::chrono::milliseconds grant_after{0};
  int running_squeues = 1000;           // squeue says RUNNING this many times, then
  std::string end_state = "CANCELLED";  // the job is gone, ended so
  // squeue never answers (a Slurm controller that hangs).
  bool squeue_hangs = false;
  // Whose Now() stamps each squeue (unset: the loop it ran on).
  ssh::EventLoop* clock = nullptr;
  std::function<void()> on_scancel;
  // Bytes of padding after `scontrol -o show job`'s record (a broken or
  // hostile login host).
  size_t show_job_padding = 0;
  // Bytes salloc writes to stderr a second after its "Pending" line.
  size_t salloc_padding = 0;

  std::vector<std::string> lines;     // every command line, in order
  std::vector<TimePoint> squeue_at;   // when each squeue ran
  TimePoint salloc_at{}, scancel_at{};  // on the loop each ran on

  // An executor whose commands this Slurm answers, on `loop`.
  std::unique_ptr<ssh::Executor> On(ssh::EventLoop* loop);

 private:
  class Exec;
  bool Ended() const { return squeues_ > running_squeues || cancelled_; }
  void Answer(const std::string& line, ssh::EventLoop* loop, std::optional<int>* code, std::string* out,
              std::string* err);

  int squeues_ = 0;
  bool granted_ = false;
  bool cancelled_ = false;
};

}  // namespace barge::runner
