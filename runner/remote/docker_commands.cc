#include "runner/remote/docker_commands.h"

#include <algorithm>
#include <iterator>

#include "container/docker_args.h"
#include "runner/remote/shared_lists.h"
#include "runner/remote/watchdog.h"
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
  // A large job's env names every node several times: spell each list once.
  std::vector<std::string> argv = docker_;
  std::vector<std::string> args = container::RunArgs(spec);
  argv.insert(argv.end(), std::make_move_iterator(args.begin()), std::make_move_iterator(args.end()));
  return ShellJoinSharingLists(argv);
}

std::string DockerCommands::Create(const container::ContainerSpec& spec) const {
  std::vector<std::string> argv = docker_;
  std::vector<std::string> args = container::RunArgs(spec);
  // RunArgs begins {"run", "-d", ...}: the same container, made only.
  args.erase(args.begin(), args.begin() + 2);
  argv.push_back("create");
  argv.insert(argv.end(), std::make_move_iterator(args.begin()), std::make_move_iterator(args.end()));
  return ShellJoinSharingLists(argv);
}

std::string DockerCommands::Logs(const std::string& name) const {
  return Line(container::LogsArgs(name, /*follow=*/true, std::nullopt));
}

std::string DockerCommands::LogsSince(const std::string& name, const std::string& since) const {
  return Line(container::LogsArgs(name, /*follow=*/true, since));
}

std::string DockerCommands::LogsRest(const std::string& name, const std::optional<std::string>& since) const {
  return Line(container::LogsArgs(name, /*follow=*/false, since));
}

std::string DockerCommands::Wait(const std::string& name) const {
  return Line(container::WaitArgs(name));
}

std::string DockerCommands::FollowUntilExit(const std::string& name,
                                            const std::optional<std::string>& since,
                                            const std::string& marker) const {
  const std::string inspect = Line(container::InspectArgs({name}));
  // Ended by SIGKILL with no OOM kill marked: the engine may mark one a
  // moment after the exit (its OOM event comes apart from the exit's).
  return Line(container::LogsArgs(name, /*follow=*/true, since)) + "; s=$(" + inspect +
         " 2>&1); c=$?; case $s in *'\"Running\": true'*|*'\"Running\":true'*) " +
         Line(container::WaitArgs(name)) + " >/dev/null 2>&1; s=$(" + inspect +
         " 2>&1); c=$?;; esac; case $s in *'\"OOMKilled\": false'*'\"ExitCode\": 137'*) sleep 0.3; s=$(" + inspect +
         " 2>&1); c=$?;; esac; printf '%s %d\\n%s\\n' " + ssh::ShellQuote(marker) + " \"$c\" \"$s\"";
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

std::string DockerCommands::Login(const std::string& config_dir, const std::string& server,
                                  const std::string& username) const {
  // config_dir is the job directory's docker/ (DockerConfigDir). The login
  // comes before preflight arms the watchdog: it may make the directory.
  const size_t slash = config_dir.rfind('/');
  const std::string job_dir = slash == std::string::npos ? "." : config_dir.substr(0, slash);
  return MakeOwnDir(job_dir) + " && umask 077 && mkdir -p " + ssh::ShellQuote(config_dir) + " && " +
         Line({"login", "--username=" + username, "--password-stdin", server});
}

std::string DockerCommands::Logout(const std::string& config_dir, const std::string& server) const {
  const std::string dir = ssh::ShellQuote(config_dir);
  return Line({"logout", server}) + "; s=$?; rm -rf " + dir + "; rmdir \"$(dirname " + dir +
         ")\" 2>/dev/null; exit $s";
}

std::string DockerCommands::DiskFree() const {
  return "df -Pk /tmp \"$(" + Line({"info", "--format", "{{.DockerRootDir}}"}) +
         " 2>/dev/null || echo /)\" 2>/dev/null";
}

std::string DockerCommands::FileTimes(const std::vector<std::string>& names, const std::string& path) const {
  std::string line = "n=$(date +%s); for c in";
  for (const std::string& name : names) line += " " + ssh::ShellQuote(name);
  return line + "; do t=$(" + Line({"exec"}) + " \"$c\" stat -c %Y " + ssh::ShellQuote(path) +
         " 2>/dev/null) || t=-; echo \"$c $n ${t:--}\"; done";
}

std::string DockerCommands::Signal(const std::vector<std::string>& names,
                                   const std::string& signal) const {
  return Line(container::KillArgs(names, signal));
}

std::string DockerCommands::PsByLabel(const std::string& label) const {
  return Line(container::PsByLabelArgs(label));
}

std::string DockerCommands::RemoveLabelled(const std::string& label, const std::string& value) const {
  return "ids=$(" + Line({"ps", "-aq", "--filter", "label=" + label + "=" + value}) +
         ") && if [ -n \"$ids\" ]; then " + Line({"rm", "-f"}) + " $ids; fi";
}

std::string DockerCommands::CopyOut(const std::string& name, const std::string& path) const {
  return Line({"cp", name + ":" + path, "-"});
}

std::string DockerCommands::ImageUserId(const std::string& image,
                                        const std::string& required_executable) const {
  std::string script = "id -u";
  if (!required_executable.empty()) {
    script = "test -x " + ssh::ShellQuote(required_executable) + " || exit 1; " + script;
  }
  return Line({"run", "--rm", "--network", "none", "--entrypoint", "/bin/sh", image, "-c", script});
}

std::string DockerCommands::ExecInteractive(const std::string& name,
                                            const std::vector<std::string>& argv, bool tty) const {
  std::vector<std::string> args = {"exec", "-i"};
  if (tty) args.push_back("-t");
  args.push_back(name);
  args.insert(args.end(), argv.begin(), argv.end());
  return Line(args);
}

std::string DockerCommands::ContainerAddress(const std::string& name) const {
  return Line({"inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}} {{end}}", name});
}

std::string DockerCommands::Stats(const std::vector<std::string>& names) const {
  std::vector<std::string> args = {"stats", "--no-stream", "--no-trunc", "--format", "{{json .}}"};
  args.insert(args.end(), names.begin(), names.end());
  return Line(args);
}

std::string GpuStatsLine() {
  return "if command -v nvidia-smi >/dev/null 2>&1; then nvidia-smi "
         "--query-gpu=index,uuid,utilization.gpu,memory.used,memory.total "
         "--format=csv,noheader,nounits; fi";
}

std::string DockerCommands::Exec(const std::string& name, const std::vector<std::string>& argv) const {
  std::vector<std::string> args = {"exec", name};
  args.insert(args.end(), argv.begin(), argv.end());
  return Line(args);
}

std::string BoundedLine(const std::string& line, std::chrono::milliseconds limit) {
  const long long secs = std::max<long long>(1, (limit.count() + 999) / 1000);
  return "timeout -s KILL " + std::to_string(secs) + " sh -c " + ssh::ShellQuote(line);
}

std::string BoundedCommand(const std::string& simple_command, std::chrono::milliseconds limit) {
  const long long secs = std::max<long long>(1, (limit.count() + 999) / 1000);
  return "timeout -s KILL " + std::to_string(secs) + " " + simple_command;
}

std::string PosixShellProbe() { return "echo barge-posix-$((6*7))"; }

std::string HostTcpTables() { return "cat /proc/net/tcp /proc/net/tcp6"; }

std::string SecretsDir(const std::string& job_dir) { return job_dir + "/secrets"; }

std::string SecretEnvFile(const std::string& job_dir) { return SecretsDir(job_dir) + "/.env"; }

std::string DockerConfigDir(const std::string& job_dir) { return job_dir + "/docker"; }

std::string MpiFilesDir(const std::string& job_dir) { return job_dir + "/mpi"; }

std::string WriteSecretCommand(const std::string& job_dir, const std::string& path) {
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash);
  return OwnDirGuard(job_dir) + " && umask 077 && mkdir -p " + ssh::ShellQuote(dir) + " && cat > " +
         ssh::ShellQuote(path);
}

std::string ReceiveWorkdirCommand(const std::string& job_dir) {
  const std::string dir = job_dir + "/workdir";
  return OwnDirGuard(job_dir) + " && mkdir -p " + ssh::ShellQuote(dir) + " && tar -x --no-same-owner -C " +
         ssh::ShellQuote(dir);
}

std::string ReceiveFileCommand(const std::string& job_dir, size_t index) {
  const std::string dir = job_dir + "/files";
  return OwnDirGuard(job_dir) + " && mkdir -p " + ssh::ShellQuote(dir) + " && cat > " +
         ssh::ShellQuote(dir + "/" + std::to_string(index));
}

}  // namespace barge::runner
