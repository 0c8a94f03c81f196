// Many SSH connects at once, all driven by the one event loop on the
// calling thread: no thread per connect.
#pragma once

#include <memory>
#include <vector>

#include "base/status.h"
#include "ssh/event_loop.h"
#include "ssh/session.h"
#include "ssh/session_options.h"

namespace barge::ssh {

// Connects to every host (Session::Connect's handshake, each a
// SessionHandshake) with at most `parallelism` (at least one) handshakes
// in flight at once, the others queued in input order, and returns one
// result per input, in input order. Each handshake is bounded by its own
// options.connect_timeout, as Session::Connect's, with the same messages.
//
// Runs on the calling thread and starts no thread: it waits by calling
// loop->Poll until every attempt has ended, so the loop's other timers,
// watches and hooks keep running meanwhile. Must not be called from inside
// one of the loop's callbacks. `loop` must be a real loop (its clock the
// steady clock): the deadlines are on that clock.
[[nodiscard]] std::vector<Result<std::unique_ptr<Session>>> ConnectAll(
    const std::vector<SessionOptions>& options, int parallelism, EventLoop* loop);

}  // namespace barge::ssh
