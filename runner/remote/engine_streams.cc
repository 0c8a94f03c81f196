#include "runner/remote/engine_streams.h"

#include <utility>

namespace barge::runner {

namespace {

// A stream is the executor's Command on the socket: its stdin is what is
// sent, its stdout what comes back.
class CommandStream : public container::ByteStream {
 public:
  explicit CommandStream(std::unique_ptr<ssh::Command> command) : command_(std::move(command)) {}
  void Write(std::string_view bytes) override { command_->WriteStdin(bytes); }

 private:
  std::unique_ptr<ssh::Command> command_;
};

}  // namespace

Result<std::unique_ptr<container::ByteStream>> EngineStreams::OpenStream(
    const std::string& socket_path, container::ByteStreamCallbacks callbacks) {
  ssh::CommandCallbacks cb;
  cb.on_stdout = std::move(callbacks.on_bytes);
  auto on_closed = std::move(callbacks.on_closed);
  cb.on_exit = [on_closed = std::move(on_closed)](const ssh::ExitStatus& e) {
    if (on_closed) on_closed(e.known() ? std::string() : e.error);
  };
  Result<std::unique_ptr<ssh::Command>> command = executor_->OpenUnixStream(socket_path, std::move(cb));
  if (!command.ok()) return command.status();
  return std::unique_ptr<container::ByteStream>(std::make_unique<CommandStream>(std::move(command).value()));
}

}  // namespace barge::runner
