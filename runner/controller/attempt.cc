// One launch of the job as the controller holds it (attempt.h).
#include "runner/controller/attempt.h"

#include "runner/controller/job_state.h"

namespace barge::runner::internal {

Attempt::Attempt(ssh::EventLoop* loop, const Redactor* redact) : commands(loop, redact) {}
Attempt::~Attempt() = default;

}  // namespace barge::runner::internal
