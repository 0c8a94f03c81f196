// ArtifactStream: one copy of one node's artifact streamed from its host
// to object storage with no copy on the controller's disk
// (`artifacts[].local: false`).
//
// First the host lists the artifact's regular files with their part MD5s
// (runner/remote/artifact_listing.h); each file is then queued on
// ArtifactUploads with a BytePipe, and the files' bytes are read from the
// host one file at a time (`docker cp | tar -xO`) into their pipes. While
// a pipe holds its high mark the file's command is paused
// (Command::PauseOutput: the host's writer blocks, the controller holds at
// most the mark plus libssh's window); when the upload abandons a pipe
// (the same bytes are there already, cancelled, failed) the command is
// dropped; the next file starts once the upload has read the end of the
// last. `done` runs once every file was read or dropped, or the listing
// failed (said through `say`).
//
// Threading: the loop's thread; the uploads read the pipes on their worker.
// Destroying the stream drops its command and timer; `done` is not called
// then.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "runner/controller/artifact_uploads.h"
#include "runner/controller/byte_pipe.h"
#include "runner/remote/artifact_listing.h"
#include "runner/remote/docker_commands.h"
#include "ssh/event_loop.h"
#include "ssh/executor.h"

namespace barge::runner::internal {

class ArtifactStream {
 public:
  // Where the files go and what they are called (ArtifactUploads::QueueStream).
  struct Target {
    std::string tag;   // the batch, for ArtifactUploads::Busy
    std::string to;    // s3://BUCKET/KEY-TEMPLATE
    std::string job;
    int rank = 0;
    std::string host;  // the host's name, for {host} and messages
    uint64_t part_size = 0;
  };
  static constexpr size_t kPipeHighMark = 4 << 20;

  // `loop`, `exec`, `docker` and `uploads` outlive the stream.
  ArtifactStream(ssh::EventLoop* loop, ssh::Executor* exec, const DockerCommands* docker, std::string container,
                 std::string path, Target target, ArtifactUploads* uploads, std::function<void(const std::string&)> say,
                 std::function<void()> done);
  ~ArtifactStream();
  ArtifactStream(const ArtifactStream&) = delete;
  ArtifactStream& operator=(const ArtifactStream&) = delete;

  void Start();

 private:
  void Listed(const ssh::ExitStatus& exit);
  void NextFile();
  // Every 20 ms while a file is read: unpauses it once its pipe has room,
  // drops it once abandoned, and moves on once its end was read.
  void Check();
  void Finish();

  ssh::EventLoop& loop_;
  ssh::Executor& exec_;
  const DockerCommands& docker_;
  const std::string container_, path_;
  const Target target_;
  ArtifactUploads& uploads_;
  std::function<void(const std::string&)> say_;
  std::function<void()> done_;

  std::unique_ptr<ssh::Command> command_;  // the listing, then the file being read
  std::string listing_, errors_;
  std::vector<ListedFile> files_;
  std::vector<std::shared_ptr<BytePipe>> pipes_;
  size_t next_ = 0;                    // the next file to read
  std::shared_ptr<BytePipe> reading_;  // the pipe of the file being read
  bool paused_ = false;
  bool ended_ = false;  // the file command's exit came
  ssh::EventLoop::TimerId timer_ = 0;
};

}  // namespace barge::runner::internal
