// The job model: one job file, parsed and validated. A JobSpec is complete and
// consistent (see job_file.h); nothing in it has been checked against a live
// host yet.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "cluster/inventory.h"
#include "cluster/roles.h"
#include "container/container_spec.h"
#include "ssh/session_options.h"

namespace barge::runner {

struct SshSettings {
  // Expanded, absolute paths; empty = ssh's defaults (~/.ssh/known_hosts,
  // ~/.ssh/config), as ssh::SessionOptions takes them.
  std::string known_hosts;
  std::string config_file;
  ssh::HostKeyChecking host_key_checking = ssh::HostKeyChecking::kStrict;
  std::chrono::milliseconds connect_timeout{std::chrono::seconds(10)};
  // Job-wide defaults for hosts that do not set their own.
  std::optional<std::string> user;
  std::optional<int> port;
  std::optional<std::string> identity_file;
};

enum class ImagePull { kAlways, kMissing, kNever, kPush };
enum class OnWorkerExit { kFail, kIgnore };

struct TeardownHooks {
  std::optional<std::string> host_command;   // run on each host over SSH
  std::optional<std::string> local_command;  // run on the controller, once per host
};

// `artifacts:` entry: files copied from containers back to
// STATE/runs/<job-id>/artifacts/<rank>/ periodically and before teardown.
struct ArtifactSpec {
  std::optional<int> rank;  // nullopt with all_nodes false = the head
  bool all_nodes = false;
  std::string path;  // absolute, inside the container
  std::optional<std::chrono::milliseconds> every;  // nullopt = only before teardown
};

// `workdir:` — a local directory shipped to every host's per-job directory
// (a tar stream over the open session) and mounted into every container.
struct WorkdirSpec {
  std::string path;                       // local directory, expanded
  std::string mount = "/workspace";       // where containers see it
  std::vector<std::string> exclude;       // tar --exclude patterns
};

// `files:` entry: one local file shipped likewise, mounted read-only at `to`.
struct FileSpec {
  std::string from;  // local file, expanded
  std::string to;    // absolute path in the container
};

struct JobSpec {
  std::string file;      // the job file's path as given
  std::string base_dir;  // directory of the job file; relative paths resolve here
  std::string name;      // [A-Za-z0-9][A-Za-z0-9_.-]*, at most 63 chars
  std::string image;     // job-wide image; a role may override
  std::optional<std::vector<std::string>> command;  // nullopt = image CMD
  container::ContainerOptions container;
  // Empty = one local host (the local Docker engine). Host::line counts in
  // hosts_file when that is set. Host::internal_address is left empty when
  // the file does not set it (cluster::InternalAddress supplies the default).
  std::vector<cluster::Host> hosts;
  // The file the hosts were read from, as error messages name it (joined to
  // the job file's directory as given); empty = listed in the job file.
  std::string hosts_file;
  std::string docker_command = "docker";  // job-wide; a host may override
  SshSettings ssh;
  // Keys "head" and/or "worker". Empty = every node runs the job's command,
  // rank 0 being the head.
  std::map<std::string, cluster::RoleSpec> roles;
  cluster::RendezvousOptions rendezvous;
  ImagePull image_pull = ImagePull::kMissing;
  OnWorkerExit on_worker_exit = OnWorkerExit::kFail;
  std::chrono::milliseconds stop_grace{std::chrono::seconds(10)};
  // The job ends as `timed_out` (graceful stop, teardown) once it has run
  // this long, counted from `barge run`'s start. nullopt = no limit.
  std::optional<std::chrono::milliseconds> timeout;
  // The hosts' watchdogs tear the job down when the controller has not
  // renewed its lease for this long (see runner/watchdog.h).
  std::chrono::milliseconds lease{std::chrono::minutes(10)};
  std::vector<ArtifactSpec> artifacts;
  std::optional<WorkdirSpec> workdir;
  std::vector<FileSpec> files;
  TeardownHooks teardown;
};

}  // namespace barge::runner
