// The exact command lines barge sends to one host for the Docker engine
// there. `barge plan` prints these and `barge run` executes them, so the two
// cannot drift apart. Every argument is quoted by ssh::ShellQuote.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "container/container_spec.h"

namespace barge::runner {

class DockerCommands {
 public:
  // `docker` is the split docker_command, e.g. {"docker"} or {"sudo","-n","docker"}.
  explicit DockerCommands(std::vector<std::string> docker) : docker_(std::move(docker)) {}
  // Whether the command is the plain Docker CLI (`docker`, no wrapper such
  // as sudo or a stand-in engine): then its engine may be reached through
  // the Engine API instead (container/docker_api.h).
  bool plain() const { return docker_.size() == 1 && docker_[0] == "docker"; }

  std::string Version() const;
  std::string ImageId(const std::string& image) const;
  std::string Pull(const std::string& image) const;
  // Fails with Docker's own reason on a host without the NVIDIA runtime;
  // prints one line per GPU where it has one.
  std::string GpuProbe(const container::ContainerSpec& spec) const;
  std::string Run(const container::ContainerSpec& spec) const;
  // `docker create` with Run's arguments but -d: the container made, not
  // started (its ID on stdout). On an Engine API host the controller then
  // attaches to it and starts it through the API (node_streams_api.cc), so that
  // its output is streamed live from its first byte, not read back from
  // the log driver.
  std::string Create(const container::ContainerSpec& spec) const;
  std::string Logs(const std::string& name) const;
  // Follows the logs from `since` (Docker's RFC 3339 time) on, inclusive.
  std::string LogsSince(const std::string& name, const std::string& since) const;
  // The logs from `since` (inclusive; all with nullopt) to their end, not
  // following: what a follow that ended early missed.
  std::string LogsRest(const std::string& name, const std::optional<std::string>& since) const;
  std::string Wait(const std::string& name) const;
  // Follows the logs (from `since` when given) until the container stops,
  // then reports how it ended, in one command (one Docker CLI process fewer
  // per node than a separate `docker wait`): after the log stream, stdout
  // carries `marker` + " " + inspect's exit code + "\n", then inspect's
  // output (or its error). Since `docker logs -f` can end a moment before
  // the engine marks the container exited, a report that still says
  // "Running": true is taken again after `docker wait`.
  std::string FollowUntilExit(const std::string& name, const std::optional<std::string>& since,
                              const std::string& marker) const;
  std::string Stop(const std::vector<std::string>& names, int grace_seconds) const;
  std::string Kill(const std::vector<std::string>& names) const;
  std::string Remove(const std::vector<std::string>& names) const;
  // The container's TCP tables (/proc/PID/net/tcp, tcp6) read on the host:
  // container::ParseListeningPorts of the output.
  std::string ListeningPorts(const std::string& name) const;
  // `docker load`, reading an image tar stream on stdin.
  std::string Load() const;
  // Free space (`df -Pk`) of /tmp (the job's directory) and of the
  // engine's root directory (/ when the engine cannot say).
  std::string DiskFree() const;
  // progress.heartbeat: one line per container of `names`, "NAME NOW MTIME":
  // the host's clock and `path`'s modification time in that container
  // (seconds since the epoch; "-" where the file is missing or the
  // container cannot be asked). Asked with the image's `stat` (coreutils or
  // busybox) through docker exec: the process ends with its answer.
  std::string FileTimes(const std::vector<std::string>& names, const std::string& path) const;
  // `docker kill --signal SIGNAL NAMES...` (e.g. "TERM" at a preemption).
  std::string Signal(const std::vector<std::string>& names, const std::string& signal) const;
  // Lists every container labelled `label` (id, names, status, labels):
  // container::ParsePsLines of the output.
  std::string PsByLabel(const std::string& label) const;
  // Removes every container, running or not, whose label `label` has
  // `value`; prints the removed ids.
  std::string RemoveLabelled(const std::string& label, const std::string& value) const;
  // `docker cp NAME:PATH -`: the path as a tar stream on stdout.
  std::string CopyOut(const std::string& name, const std::string& path) const;
  // The uid IMAGE's processes run as (its USER), printed by `docker run
  // --rm --network none --entrypoint /bin/sh IMAGE -c 'id -u'`; with a
  // non-empty `required_executable`, the script first exits 1 when IMAGE
  // has no such executable (`test -x PATH || exit 1; id -u`).
  std::string ImageUserId(const std::string& image, const std::string& required_executable) const;
  // `docker exec NAME ARGV...`.
  std::string Exec(const std::string& name, const std::vector<std::string>& argv) const;
  // `docker exec -i [-t] NAME ARGV...` (barge exec -i / -it).
  std::string ExecInteractive(const std::string& name, const std::vector<std::string>& argv,
                              bool tty) const;
  // The container's addresses on its networks, space-separated ("" on the
  // host network).
  std::string ContainerAddress(const std::string& name) const;
  // One `docker stats --no-stream` sample of `names`, one JSON object a line
  // (container::ParseStats... see runner/remote/stats.h).
  std::string Stats(const std::vector<std::string>& names) const;
  // docker_command followed by `args`, quoted.
  std::string Line(const std::vector<std::string>& args) const;
  // `docker exec NAME sh -c COMMAND`.
  std::string ExecShell(const std::string& name, const std::string& command) const;
  // registry: creates the job's Docker client config directory (mode 0700)
  // and logs in there: `umask 077 && mkdir -p CONFIG && docker login
  // --username=USER --password-stdin SERVER`. The password goes to the
  // command's stdin, never on its line. The docker command words must
  // already carry `--config CONFIG` (DockerCommandOf with a job id).
  std::string Login(const std::string& config_dir, const std::string& server,
                    const std::string& username) const;
  // `docker logout SERVER`, then the client config directory removed (and
  // the job's directory, when nothing else is left in it).
  std::string Logout(const std::string& config_dir, const std::string& server) const;

 private:
  std::vector<std::string> docker_;
};

// `line` run by `sh -c`, killed after `limit` (at least 1 s): closing a
// channel does not end a remote command, and a frozen dockerd would hang it
// forever.
std::string BoundedLine(const std::string& line, std::chrono::milliseconds limit);
// The same for a simple command (one program and its arguments, as
// DockerCommands builds them): no `sh -c` in between, one process fewer.
std::string BoundedCommand(const std::string& simple_command, std::chrono::milliseconds limit);

// Every GPU of the host, one CSV line each (index, uuid, utilization %,
// memory used MiB, memory total MiB), where the host has nvidia-smi;
// nothing (and exit 0) where it has not.
std::string GpuStatsLine();

// Proves the login shell reads POSIX sh: prints kPosixShellAnswer there.
std::string PosixShellProbe();
inline constexpr char kPosixShellAnswer[] = "barge-posix-42";

// The host's own TCP tables (container::ParseListeningPorts of the output).
std::string HostTcpTables();

// Where a job keeps things on a host: inside its per-host directory DIR
// (`job_dir`: NewHostJobDir, mode 0700, removed at teardown and by the
// watchdog).
//   DIR/secrets/NAME   one file per secret, mode 0600, mounted read-only at
//                      /run/secrets/NAME
//   DIR/secrets/.env   NAME=VALUE lines of the secrets given as environment,
//                      mode 0600, for `docker run --env-file` (a name
//                      cannot hold '.', so no secret is called ".env")
//   DIR/docker         the job's own Docker client config (registry:)
std::string SecretsDir(const std::string& job_dir);
std::string SecretEnvFile(const std::string& job_dir);
std::string DockerConfigDir(const std::string& job_dir);
// mpi: DIR/mpi/RANK, one directory per node of the host (keys, hostfile,
// client config), each file mode 0600, mounted read-only at /run/barge.
std::string MpiFilesDir(const std::string& job_dir);

// Writes the command's stdin to `path` (under the job's directory
// `job_dir`) with mode 0600 (umask 077), making its directory (0700)
// first: the value never appears on the line. Only in the job's own
// directory (OwnDirGuard).
std::string WriteSecretCommand(const std::string& job_dir, const std::string& path);
// Unpacks a tar on stdin into the job directory's workdir/, and writes stdin
// to its files/INDEX: `workdir:` and `files:` shipped up. Only in the job's
// own directory.
std::string ReceiveWorkdirCommand(const std::string& job_dir);
std::string ReceiveFileCommand(const std::string& job_dir, size_t index);

}  // namespace barge::runner
