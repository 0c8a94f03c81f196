// The transport the Engine API client (docker_api.h) needs: a byte stream
// to a unix socket on the engine's host. container/ defines it and knows no
// transport; runner/remote/engine_streams.h adapts an ssh::Executor (an SSH
// direct-streamlocal channel, or a local socket) to it.
//
// Threading: the event loop's thread only; callbacks run from its Poll.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "base/status.h"

namespace barge::container {

// One open stream. May be destroyed at any time, also from inside its own
// callbacks: that closes it and drops later callbacks.
class ByteStream {
 public:
  virtual ~ByteStream() = default;
  // Queues bytes to send; written as the transport allows.
  virtual void Write(std::string_view bytes) = 0;
};

struct ByteStreamCallbacks {
  std::function<void(std::string_view)> on_bytes;  // any chunking
  // Exactly once, after the last on_bytes: `error` is empty when the peer
  // closed the stream, else what went wrong (the transport was lost...).
  std::function<void(const std::string& error)> on_closed;
};

class StreamOpener {
 public:
  virtual ~StreamOpener() = default;
  // Opens a stream to the unix socket `socket_path` on the host. Returns at
  // once; fails only when it cannot even be attempted.
  [[nodiscard]] virtual Result<std::unique_ptr<ByteStream>> OpenStream(const std::string& socket_path,
                                                                       ByteStreamCallbacks callbacks) = 0;
  // What to call the host in messages ("root@10.77.0.1:22", "local").
  virtual std::string label() const = 0;
};

}  // namespace barge::container
