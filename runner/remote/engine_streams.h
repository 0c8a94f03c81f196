// EngineStreams: the Engine API client's transport (container/byte_stream.h)
// over an ssh::Executor's unix-socket streams: a direct-streamlocal channel
// on the host's SSH session, or a local socket for the local engine. No
// process runs on the host.
//
// Threading: the event loop's thread only. `executor` must outlive this
// object and every stream it opened.
#pragma once

#include <memory>
#include <string>

#include "container/byte_stream.h"
#include "ssh/executor.h"

namespace barge::runner {

class EngineStreams : public container::StreamOpener {
 public:
  explicit EngineStreams(ssh::Executor* executor) : executor_(executor) {}
  [[nodiscard]] Result<std::unique_ptr<container::ByteStream>> OpenStream(
      const std::string& socket_path, container::ByteStreamCallbacks callbacks) override;
  std::string label() const override { return executor_->label(); }

 private:
  ssh::Executor* executor_;
};

}  // namespace barge::runner
