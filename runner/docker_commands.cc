#include "runner/docker_commands.h"

#include "container/docker_args.h"
#include "ssh/quote.h"

namespace barge::runner {

std::string DockerCommands::Line(const std::vector<std::string>& args) const {
  std::vector<std::string> argv = docker_;
  argv.insert(argv.end(), args.begin(), args.end());
  return ssh::ShellJoin(argv);
}

std::string DockerCommands::Version() const { return Line(container::VersionArgs()); }

std::string DockerCommands::ImageId(const std::string& image) const {
  return Line(container::ImageInspectArgs(image));
}

std::string DockerCommands::Pull(const std::string& image) const {
  return Line(container::PullArgs(image));
}

std::string DockerCommands::GpuProbe(const container::ContainerSpec& spec) const {
  return Line(container::GpuProbeArgs(spec));
}

std::string DockerCommands::Run(const container::ContainerSpec& spec) const {
  return Line(container::RunArgs(spec));
}

std::string DockerCommands::Logs(const std::string& name) const {
  return Line(container::LogsArgs(name, /*follow=*/true, std::nullopt));
}

std::string DockerCommands::LogsSince(const std::string& name, const std::string& since) const {
  return Line(container::LogsArgs(name, /*follow=*/true, since));
}

std::string DockerCommands::Wait(const std::string& name) const {
  return Line(container::WaitArgs(name));
}

std::string DockerCommands::Stop(const std::vector<std::string>& names, int grace_seconds) const {
  return Line(container::StopArgs(names, grace_seconds));
}

std::string DockerCommands::Kill(const std::vector<std::string>& names) const {
  return Line(container::KillArgs(names, "KILL"));
}

std::string DockerCommands::Remove(const std::vector<std::string>& names) const {
  return Line(container::RemoveArgs(names, /*force=*/true));
}

std::string DockerCommands::ListeningPorts(const std::string& name) const {
  return "pid=$(" + Line({"inspect", "--format", "{{.State.Pid}}", name}) +
         ") && cat /proc/$pid/net/tcp /proc/$pid/net/tcp6";
}

std::string DockerCommands::Load() const { return Line(container::LoadArgs()); }

std::string DockerCommands::ExecShell(const std::string& name, const std::string& command) const {
  return Line({"exec", name, "sh", "-c", command});
}

}  // namespace barge::runner
