// ArtifactStream (artifact_stream.h): the host's side of a streamed copy,
// driven from the loop.
#include "runner/controller/artifact_stream.h"

#include <spdlog/spdlog.h>

namespace barge::runner::internal {

namespace {

constexpr auto kCheckEvery = std::chrono::milliseconds(20);

// "/ckpt/step-2/" of "/ckpt/step-2/model.bin" (and of ".../model.bin/").
std::string ParentOf(std::string path) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  return path.substr(0, path.rfind('/') + 1);
}

std::string Trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

}  // namespace

ArtifactStream::ArtifactStream(ssh::EventLoop* loop, ssh::Executor* exec, const DockerCommands* docker,
                               std::string container, std::string path, Target target, ArtifactUploads* uploads,
                               std::function<void(const std::string&)> say, std::function<void()> done)
    : loop_(*loop),
      exec_(*exec),
      docker_(*docker),
      container_(std::move(container)),
      path_(std::move(path)),
      target_(std::move(target)),
      uploads_(*uploads),
      say_(std::move(say)),
      done_(std::move(done)) {}

ArtifactStream::~ArtifactStream() {
  if (timer_ != 0) loop_.CancelTimer(timer_);
  // The files not read yet are not wanted by anyone now.
  for (const auto& pipe : pipes_) pipe->Close(Status::Error("the copy was dropped"));
}

void ArtifactStream::Start() {
  ssh::CommandCallbacks cb;
  cb.on_stdout = [this](std::string_view d) { listing_.append(d); };
  cb.on_stderr = [this](std::string_view d) {
    if (errors_.size() < 4096) errors_.append(d);
  };
  cb.on_exit = [this](const ssh::ExitStatus& exit) { Listed(exit); };
  Result<std::unique_ptr<ssh::Command>> c =
      exec_.Start(ArtifactListingCommand(docker_, container_, path_, target_.part_size), std::move(cb));
  if (!c.ok()) {
    say_("artifact " + path_ + " of node " + std::to_string(target_.rank) + " not streamed: " + c.status().message());
    return Finish();
  }
  command_ = std::move(c).value();
}

void ArtifactStream::Listed(const ssh::ExitStatus& exit) {
  const std::string where = "artifact " + path_ + " of node " + std::to_string(target_.rank) + " (" + target_.host + ")";
  if (!exit.known() || exit.code != 0) {
    say_(where + " not streamed: listing its files failed: " +
         (exit.known() ? "exit " + std::to_string(exit.code) + ": " + Trimmed(errors_) : exit.error));
    return Finish();
  }
  Result<std::vector<ListedFile>> files = ParseArtifactListing(listing_);
  if (!files.ok()) {
    say_(where + " not streamed: " + files.status().message());
    return Finish();
  }
  files_ = std::move(files).value();
  const std::string parent = ParentOf(path_);
  for (const ListedFile& f : files_) {
    auto pipe = std::make_shared<BytePipe>(kPipeHighMark);
    pipes_.push_back(pipe);
    uploads_.QueueStream(target_.tag, target_.host + ":" + parent + f.name, pipe, f, target_.to, target_.job,
                         target_.rank, target_.host);
  }
  spdlog::debug("Artifacts: streaming. [rank: {}, path: {}, files: {}]", target_.rank, path_, files_.size());
  // Not from inside the listing's own callback: its command is dropped here.
  timer_ = loop_.AddTimer(loop_.Now(), [this] {
    timer_ = 0;
    NextFile();
  });
}

void ArtifactStream::NextFile() {
  command_.reset();
  reading_ = nullptr;
  while (next_ < files_.size() && pipes_[next_]->Abandoned()) ++next_;  // not wanted (already there)
  if (next_ >= files_.size()) return Finish();
  const size_t i = next_++;
  const std::string parent = ParentOf(path_);
  reading_ = pipes_[i];
  paused_ = false;
  ended_ = false;
  errors_.clear();
  ssh::CommandCallbacks cb;
  cb.on_stdout = [this](std::string_view d) {
    reading_->Push(d);
    if (!paused_ && reading_->Full()) {
      paused_ = true;
      command_->PauseOutput(true);
    }
  };
  cb.on_stderr = [this](std::string_view d) {
    if (errors_.size() < 4096) errors_.append(d);
  };
  cb.on_exit = [this](const ssh::ExitStatus& exit) {
    ended_ = true;
    if (exit.known() && exit.code == 0) {
      reading_->Close(Status::Ok());
    } else {
      reading_->Close(Status::Error(exit.known() ? "exit " + std::to_string(exit.code) + ": " + Trimmed(errors_)
                                                 : exit.error));
    }
  };
  Result<std::unique_ptr<ssh::Command>> c =
      exec_.Start(ArtifactFileCommand(docker_, container_, parent + files_[i].name), std::move(cb));
  if (!c.ok()) {
    reading_->Close(c.status());
    ended_ = true;
  } else {
    command_ = std::move(c).value();
  }
  timer_ = loop_.AddTimer(loop_.Now() + kCheckEvery, [this] {
    timer_ = 0;
    Check();
  });
}

void ArtifactStream::Check() {
  if (reading_->Abandoned() || (ended_ && reading_->Consumed())) return NextFile();
  if (paused_ && !reading_->Full() && command_) {
    paused_ = false;
    command_->PauseOutput(false);
  }
  timer_ = loop_.AddTimer(loop_.Now() + kCheckEvery, [this] {
    timer_ = 0;
    Check();
  });
}

void ArtifactStream::Finish() {
  command_.reset();
  reading_ = nullptr;
  if (done_) {
    auto done = std::move(done_);
    done_ = nullptr;
    done();  // may destroy this stream: the last statement
  }
}

}  // namespace barge::runner::internal
