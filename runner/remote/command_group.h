// CommandGroup: the remote commands one phase of a job started (a
// preflight check per host, a `docker run` per node, the log streams of an
// attempt), owned together, like ninja's SubprocessSet.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "container/docker_api.h"
#include "ssh/event_loop.h"
#include "ssh/executor.h"

namespace barge::runner {

class Redactor;

// What a finished command produced.
struct Outcome {
  ssh::ExitStatus exit;
  std::string out;
  std::string err;
  // Masks secret values in Reason(); not owned (set by the group, which
  // must not outlive it).
  const Redactor* redact = nullptr;

  bool ok() const { return exit.known() && exit.code == 0; }
  // A `timeout -s KILL` around the command fired (exit 137, nothing said).
  bool timed_out() const { return exit.known() && exit.code == 137 && err.empty(); }
  // The most useful one-line reason for a failure.
  std::string Reason() const;
};

// An Engine API reply as a command's outcome: exit 0 on success; exit 1
// with the engine's error in `err` when it answered with one; an unknown
// exit (exit.error) when the transport failed.
template <typename T>
Outcome ApiOutcome(const container::Reply<T>& r) {
  Outcome o;
  if (r.ok()) {
    o.exit.code = 0;
  } else if (r.http_status == 0) {
    o.exit.error = r.value.status().message();
  } else {
    o.exit.code = 1;
    o.err = r.value.status().message();
  }
  return o;
}

// Owns every command started through it. Destroying the group (or Cancel)
// destroys its commands, which closes their channels (a remote process is
// not promised to stop: bound it with `timeout` where that matters) and
// drops every callback that has not run yet, including failures still to be
// delivered. So a callback never outlives the group, and a phase that keeps
// its group on its stack frame may capture that frame's locals by reference:
// when the phase returns early (an interrupt, a deadline), nothing can call
// back into the dead frame.
//
// Callbacks run from EventLoop::Poll, never from Start. A callback may start
// more commands in the same group, but must not destroy the group.
//
// Threading: the loop's thread only. `loop` must outlive the group.
class CommandGroup {
 public:
  using Done = std::function<void(const Outcome&)>;

  // What Run keeps of a command's stdout, and of its stderr: enough for
  // any listing, GPU or Slurm answer of a thousand-container host.
  static constexpr size_t kMaxOutputBytes = size_t{16} << 20;

  // `max_output`: see Run.
  explicit CommandGroup(ssh::EventLoop* loop, const Redactor* redact = nullptr,
                        size_t max_output = kMaxOutputBytes)
      : loop_(loop), redact_(redact), max_output_(max_output) {}
  ~CommandGroup() { Cancel(); }
  CommandGroup(const CommandGroup&) = delete;
  CommandGroup& operator=(const CommandGroup&) = delete;

  // Starts `line` on `exec`; `done` runs once it has ended (a command that
  // cannot even start ends with the reason in exit.error). Returns the
  // command, for its stdin, valid until `done` has run; nullptr when it
  // could not start. Stdin is closed at once unless `keep_stdin`. The
  // outcome keeps at most `max_output` bytes of stdout and of stderr: a
  // command that writes more fails (exit unknown, exit.error says which
  // stream passed the bound), whatever its exit code.
  ssh::Command* Run(ssh::Executor& exec, const std::string& line, Done done,
                    bool keep_stdin = false);
  // Starts `line` with raw callbacks (streams); on_exit runs as for Run.
  // Returns nullptr, after delivering the failure to on_exit from the loop,
  // when it could not start.
  ssh::Command* Stream(ssh::Executor& exec, const std::string& line, ssh::CommandCallbacks callbacks,
                       bool keep_stdin = false);

  // An Engine API call (container/docker_api.h) owned, counted and dropped
  // like a command: `start` begins it, handing it `finish` to call once
  // with its outcome (see ApiOutcome), and returns the call; or an error
  // when nothing could be attempted, delivered to `done` from the loop.
  // With a `limit`, a call still running then is abandoned (destroyed) and
  // ends as a command killed by `timeout` would: exit 137, nothing said
  // (Outcome::timed_out()).
  using ApiCall = container::DockerApi::CallPtr;
  using Finish = std::function<void(const Outcome&)>;
  void Api(const std::function<Result<ApiCall>(Finish)>& start, Done done,
           std::chrono::milliseconds limit = std::chrono::milliseconds(0));

  // Runs `fn` from the loop once `delay` has passed, counted like a command
  // (the group is not idle meanwhile, and it counts as finished after);
  // dropped by Cancel and with the group.
  void After(std::chrono::milliseconds delay, std::function<void()> fn);

  // Commands started and not yet ended.
  int pending() const { return pending_; }
  bool idle() const { return pending_ == 0; }
  // Commands that have ended since the group was made (a measure of
  // progress: see Controller::RunWhileProgressing).
  uint64_t finished() const { return finished_; }

  // Destroys every command and drops every callback not yet run; the group
  // may be used again afterwards.
  void Cancel();

 private:
  // Destroys the commands whose callbacks have all run.
  void Reap();

  ssh::EventLoop* loop_;
  const Redactor* redact_;
  size_t max_output_;
  // Shared with callbacks, which check it before touching the group: false
  // once the group is gone or cancelled.
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
  uint64_t next_id_ = 1;
  std::map<uint64_t, std::unique_ptr<ssh::Command>> commands_;
  std::map<uint64_t, ApiCall> calls_;
  std::vector<uint64_t> ended_;  // ids whose on_exit ran: destroyed by Reap
  std::vector<ssh::EventLoop::TimerId> timers_;  // failures still to deliver, After's
  int pending_ = 0;
  uint64_t finished_ = 0;
};

}  // namespace barge::runner
