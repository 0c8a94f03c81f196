// FakeSlurm (fake_slurm.h).
#include "tests/support/fake_slurm.h"

#include <utility>

namespace barge::runner {

using std::chrono::milliseconds;
using std::chrono::seconds;

namespace {

struct Cmd : ssh::Command {
  std::shared_ptr<bool> done_ = std::make_shared<bool>(false);
  std::shared_ptr<bool> alive = std::make_shared<bool>(true);
  ~Cmd() override { *alive = false; }
  void WriteStdin(std::string_view) override {}
  void CloseStdin() override {}
  bool done() const override { return *done_; }
  size_t stdin_pending() const override { return 0; }
  void PauseOutput(bool) override {}  // its answers are short
};

}  // namespace

class FakeSlurm::Exec : public ssh::Executor {
 public:
  Exec(FakeSlurm* slurm, ssh::EventLoop* loop) : slurm_(slurm), loop_(loop) {}
  Result<std::unique_ptr<ssh::Command>> Start(const std::string& line, ssh::CommandCallbacks cb) override {
    auto cmd = std::make_unique<Cmd>();
    std::optional<int> code = 0;
    std::string out, err;
    slurm_->Answer(line, loop_, &code, &out, &err);
    auto say = [alive = cmd->alive, done = cmd->done_, cb](std::string out, std::string err,
                                                          std::optional<int> code) {
      if (!*alive) return;
      if (!out.empty() && cb.on_stdout) cb.on_stdout(out);
      if (!err.empty() && cb.on_stderr) cb.on_stderr(err);
      if (!code) return;  // still running
      *done = true;
      if (cb.on_exit) cb.on_exit(ssh::ExitStatus{*code, "", ""});
    };
    if (line.starts_with("salloc ") && slurm_->grant_after > milliseconds(0)) {
      // Pending now, granted (if still asked for) later.
      loop_->AddTimer(loop_->Now(), [say, err] { say("", err, std::nullopt); });
      if (slurm_->salloc_padding > 0) {
        loop_->AddTimer(loop_->Now() + seconds(1), [say, n = slurm_->salloc_padding] {
          say("", std::string(n, 'x'), std::nullopt);
        });
      }
      loop_->AddTimer(loop_->Now() + slurm_->grant_after, [say, slurm = slurm_] {
        if (slurm->cancelled_) return;
        slurm->granted_ = true;
        say("", "salloc: Granted job allocation 7\n", 0);
      });
    } else if (line.starts_with("squeue ") && slurm_->squeue_hangs) {
      // Never answers.
    } else {
      loop_->AddTimer(loop_->Now(), [say, out, err, code] { say(out, err, code); });
    }
    return std::unique_ptr<ssh::Command>(std::move(cmd));
  }
  std::string label() const override { return "slurm"; }

 private:
  FakeSlurm* slurm_;
  ssh::EventLoop* loop_;
};

std::unique_ptr<ssh::Executor> FakeSlurm::On(ssh::EventLoop* loop) { return std::make_unique<Exec>(this, loop); }

void FakeSlurm::Answer(const std::string& line, ssh::EventLoop* loop, std::optional<int>* code, std::string* out,
                       std::string* err) {
  lines.push_back(line);
  if (line.starts_with("salloc ")) {
    salloc_at = loop->Now();
    *err = "salloc: Pending job allocation 7\n";
    granted_ = grant_after == milliseconds(0);
    if (granted_) *err += "salloc: Granted job allocation 7\n";
  } else if (line.starts_with("squeue ")) {
    squeue_at.push_back((clock ? clock : loop)->Now());
    if (granted_) ++squeues_;
    *out = !granted_ ? "PENDING|Priority\n" : Ended() ? "" : "RUNNING|None\n";
  } else if (line.starts_with("scontrol -o show job")) {
    *out = "JobId=7 JobName=barge-x JobState=" + std::string(Ended() ? end_state : "RUNNING") +
           " Reason=None Partition=gpu NodeList=n[1-2] Nodes=n[1-2] CPU_IDs=0-1 Mem=0 GRES=\n";
    out->append(show_job_padding, 'x');
  } else if (line.starts_with("scontrol -o show node")) {
    *out = "NodeName=n1 NodeAddr=10.0.0.1 State=ALLOCATED\nNodeName=n2 NodeAddr=10.0.0.2 State=ALLOCATED\n";
  } else if (line.starts_with("scancel ")) {
    scancel_at = loop->Now();
    cancelled_ = true;
    if (on_scancel) on_scancel();
  } else {
    *code = 127;
  }
}

}  // namespace barge::runner
