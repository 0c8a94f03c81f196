// The dashboard's front gate: the one listener on the dashboard's public
// address. It reads each new connection's first request head itself, on
// one thread of its own (an ssh::EventLoop: no thread per connection),
// under a deadline and a size cap, and passes the connection on to the
// HTTP server (cpp-httplib, listening on a unix socket in a directory only
// this user can enter) only when the head is allowed; from then on it
// copies bytes both ways. So an unauthenticated user (any other user of a
// shared machine, on loopback) can hold no server thread: the server's
// threads serve only connections whose first request carried the token.
//
// Limits, per connection and per peer (a loopback client is its socket's
// owner, the uid /proc/net/tcp names; any other client is its address):
//  - a head must be complete within `head_deadline` (else 408) and within
//    `max_head_bytes` (else 431); a malformed one gets 400;
//  - at most `max_unauthenticated_per_peer` of a peer's connections may be
//    waiting for their head, and `max_unauthenticated` of all peers';
//    at most `max_connections_per_peer` of a peer's may be open: a
//    connection past a limit gets 503 and is closed at once.
// The gate answers every refusal itself, with the bytes `respond` makes,
// and closes the connection.
//
// Threading: Start, port, Stop and the destructor from one thread; `check`
// and `respond` run on the gate's thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "base/status.h"
#include "runner/ui/request_head.h"

namespace barge::runner::ui {

struct GateLimits {
  std::chrono::milliseconds head_deadline{5000};
  size_t max_head_bytes = 16 * 1024;
  int max_unauthenticated_per_peer = 8;
  int max_unauthenticated = 256;
  int max_connections_per_peer = 64;
};

class Gate {
 public:
  struct Answer {
    int status;
    std::string message;
  };
  // nullopt: the request may reach the server.
  using Check = std::function<std::optional<Answer>(const RequestHead&)>;
  // The whole HTTP response (status line, fields, body) for a refusal; the
  // gate closes the connection after it.
  using Respond = std::function<std::string(int status, const std::string& message)>;

  // Binds `host`:`port` (0: any free port); accepts nothing before Serve.
  [[nodiscard]] static Result<std::unique_ptr<Gate>> Listen(const std::string& host, int port,
                                                            GateLimits limits);
  ~Gate();  // Stop()s
  Gate(const Gate&) = delete;
  Gate& operator=(const Gate&) = delete;

  // The bound port.
  int port() const;
  // Serves from a thread of its own; once. `upstream` is the unix socket
  // path of the server the allowed connections go to.
  void Serve(std::string upstream, Check check, Respond respond);
  // Stops listening, closes every connection (passed-on ones too), joins
  // the thread. Idempotent.
  void Stop();

 private:
  struct Impl;
  explicit Gate(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace barge::runner::ui
