// CommandGroup: start, reap and cancel the commands of one phase.
#include "runner/remote/command_group.h"

#include <spdlog/spdlog.h>

#include <utility>

#include "runner/jobfile/redact.h"

namespace barge::runner {

std::string Outcome::Reason() const {
  if (!exit.known()) return redact ? (*redact)(exit.error) : exit.error;
  std::string text = err.empty() ? out : err;
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  if (text.empty()) return "exit code " + std::to_string(exit.code);
  return redact ? (*redact)(text) : text;
}

ssh::Command* CommandGroup::Run(ssh::Executor& exec, const std::string& line, Done done,
                                bool keep_stdin) {
  auto outcome = std::make_shared<Outcome>();
  outcome->redact = redact_;
  ssh::CommandCallbacks cb;
  // Bounded: what passes max_output_ on either stream is dropped, and the
  // command then fails (a broken or hostile host must not fill the
  // controller's memory).
  auto overflow = std::make_shared<std::string>();
  auto keep = [overflow, max = max_output_](std::string& into, std::string_view d, const char* stream) {
    if (into.size() + d.size() <= max) {
      into.append(d);
      return;
    }
    into.append(d.substr(0, max - into.size()));
    if (overflow->empty()) overflow->assign(stream);
  };
  cb.on_stdout = [outcome, keep](std::string_view d) { keep(outcome->out, d, "stdout"); };
  cb.on_stderr = [outcome, keep](std::string_view d) { keep(outcome->err, d, "stderr"); };
  cb.on_exit = [outcome, overflow, max = max_output_, done = std::move(done)](const ssh::ExitStatus& st) {
    outcome->exit = st;
    if (!overflow->empty()) {
      outcome->exit.code = -1;
      outcome->exit.error = "its " + *overflow + " passed the " + std::to_string(max) +
                            " bytes barge reads from a host command; the rest was dropped";
    }
    done(*outcome);
  };
  return Stream(exec, line, std::move(cb), keep_stdin);
}

ssh::Command* CommandGroup::Stream(ssh::Executor& exec, const std::string& line,
                                   ssh::CommandCallbacks callbacks, bool keep_stdin) {
  Reap();
  const uint64_t id = next_id_++;
  ++pending_;
  // on_exit: counted and reaped by the group, and only while it lives.
  auto on_exit = std::make_shared<std::function<void(const ssh::ExitStatus&)>>(
      std::move(callbacks.on_exit));
  std::weak_ptr<bool> alive = alive_;
  callbacks.on_exit = [this, alive, id, on_exit](const ssh::ExitStatus& st) {
    auto a = alive.lock();
    if (!a || !*a) return;
    --pending_;
    ++finished_;
    ended_.push_back(id);
    if (*on_exit) (*on_exit)(st);
  };
  if (spdlog::should_log(spdlog::level::debug)) {
    spdlog::debug("Remote command: start. [host: {}, command: {}]", exec.label(),
                  redact_ ? (*redact_)(line) : line);
  }
  Result<std::unique_ptr<ssh::Command>> cmd = exec.Start(line, callbacks);
  if (!cmd.ok()) {
    // Delivered from the loop, like any other outcome; dropped on Cancel.
    ssh::ExitStatus failed;
    failed.error = cmd.status().message();
    auto deliver = std::move(callbacks.on_exit);
    timers_.push_back(loop_->AddTimer(loop_->Now(),
                                      [deliver, failed] { deliver(failed); }));
    return nullptr;
  }
  if (!keep_stdin) (*cmd)->CloseStdin();
  ssh::Command* raw = cmd->get();
  commands_.emplace(id, std::move(cmd).value());
  return raw;
}

void CommandGroup::Api(const std::function<Result<ApiCall>(Finish)>& start, Done done,
                       std::chrono::milliseconds limit) {
  Reap();
  const uint64_t id = next_id_++;
  ++pending_;
  std::weak_ptr<bool> alive = alive_;
  const Redactor* redact = redact_;
  // Once: the call's own end or its limit, whichever comes first.
  auto ended = std::make_shared<bool>(false);
  auto finish = [this, alive, id, redact, done, ended](const Outcome& o) {
    auto a = alive.lock();
    if (!a || !*a || *ended) return;
    *ended = true;
    --pending_;
    ++finished_;
    ended_.push_back(id);
    Outcome out = o;
    out.redact = redact;
    done(out);
  };
  Result<ApiCall> call = start(finish);
  if (!call.ok()) {
    Outcome failed;
    failed.exit.error = call.status().message();
    timers_.push_back(loop_->AddTimer(loop_->Now(), [finish, failed] { finish(failed); }));
    return;
  }
  calls_.emplace(id, std::move(call).value());
  if (limit.count() > 0) {
    timers_.push_back(loop_->AddTimer(loop_->Now() + limit, [this, alive, id, ended, finish] {
      auto a = alive.lock();
      if (!a || !*a || *ended) return;
      // Abandoned: destroying the call closes its stream, and no callback
      // of it runs after that.
      calls_.erase(id);
      Outcome timed_out;
      timed_out.exit.code = 137;
      finish(timed_out);
    }));
  }
}

void CommandGroup::After(std::chrono::milliseconds delay, std::function<void()> fn) {
  ++pending_;
  std::weak_ptr<bool> alive = alive_;
  timers_.push_back(loop_->AddTimer(loop_->Now() + delay, [this, alive, fn = std::move(fn)] {
    auto a = alive.lock();
    if (!a || !*a) return;
    --pending_;
    ++finished_;
    fn();
  }));
}

void CommandGroup::Reap() {
  for (uint64_t id : ended_) {
    commands_.erase(id);
    calls_.erase(id);
  }
  ended_.clear();
}

void CommandGroup::Cancel() {
  *alive_ = false;
  alive_ = std::make_shared<bool>(true);
  for (ssh::EventLoop::TimerId t : timers_) loop_->CancelTimer(t);
  timers_.clear();
  commands_.clear();
  calls_.clear();
  ended_.clear();
  pending_ = 0;
}

}  // namespace barge::runner
