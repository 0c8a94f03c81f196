// The exact command lines barge sends to one host for the Docker engine
// there. `barge plan` prints these and `barge run` executes them, so the two
// cannot drift apart. Every argument is quoted by ssh::ShellQuote.
#pragma once

#include <string>
#include <vector>

#include "container/container_spec.h"

namespace barge::runner {

class DockerCommands {
 public:
  // `docker` is the split docker_command, e.g. {"docker"} or {"sudo","-n","docker"}.
  explicit DockerCommands(std::vector<std::string> docker) : docker_(std::move(docker)) {}

  std::string Version() const;
  std::string ImageId(const std::string& image) const;
  std::string Pull(const std::string& image) const;
  // Fails with Docker's own reason on a host without the NVIDIA runtime;
  // prints one line per GPU where it has one.
  std::string GpuProbe(const container::ContainerSpec& spec) const;
  std::string Run(const container::ContainerSpec& spec) const;
  std::string Logs(const std::string& name) const;
  // Follows the logs from `since` (Docker's RFC 3339 time) on, inclusive.
  std::string LogsSince(const std::string& name, const std::string& since) const;
  std::string Wait(const std::string& name) const;
  std::string Stop(const std::vector<std::string>& names, int grace_seconds) const;
  std::string Kill(const std::vector<std::string>& names) const;
  std::string Remove(const std::vector<std::string>& names) const;
  // The container's TCP tables (/proc/PID/net/tcp, tcp6) read on the host:
  // container::ParseListeningPorts of the output.
  std::string ListeningPorts(const std::string& name) const;
  // `docker load`, reading an image tar stream on stdin.
  std::string Load() const;
  // docker_command followed by `args`, quoted.
  std::string Line(const std::vector<std::string>& args) const;
  // `docker exec NAME sh -c COMMAND`.
  std::string ExecShell(const std::string& name, const std::string& command) const;

 private:
  std::vector<std::string> docker_;
};

}  // namespace barge::runner
