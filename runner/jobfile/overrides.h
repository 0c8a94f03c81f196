// What is laid over a job file without copying it: the command line's
// overrides on top (`--set`, `--env`, `--hosts-file`, `--name`), the user's
// config.yaml defaults underneath (see runner/user_config.h), and, for
// `barge rerun`, the hosts file as it was recorded.
//
// Precedence: command-line overrides, then the job file, then config.yaml,
// then ~/.ssh/config (which only libssh reads, at connect time).
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/enum_names.h"
#include "base/status.h"

namespace barge::runner {

struct Override {
  enum class Kind { kSet, kEnv, kHostsFile, kName };
  Kind kind = Kind::kSet;
  // kSet: the dotted key path ("container.shm_size", "hosts.0.port");
  // kEnv: the variable's name; empty for the others.
  std::string path;
  // kSet: a YAML flow value as given ("8g", "[SYS_ADMIN]", "3"); kEnv: the
  // variable's value, taken as it is; kHostsFile: an absolute path; kName:
  // the name.
  std::string value;

  // The flag and its argument as a user types them: "--set", "a.b=c".
  std::string Flag() const;
  std::string Argument() const;
  // How errors name the override: "--set container.shm_sise", "--env EPOCHS",
  // "--hosts-file", "--name".
  std::string Name() const;
  // The job-file key path it replaces, as errors spell it ("hosts[0].port").
  std::string KeyPath() const;
};
// Each kind's flag (Override::Flag, and a recorded run request's "flag").
inline constexpr auto kOverrideFlags = std::to_array<EnumName<Override::Kind>>(
    {{Override::Kind::kSet, "--set"}, {Override::Kind::kEnv, "--env"},
     {Override::Kind::kHostsFile, "--hosts-file"}, {Override::Kind::kName, "--name"}});
static_assert(ListsEveryValueInOrder(kOverrideFlags));

// "PATH=VALUE" for --set (PATH dotted, not empty; VALUE may be empty).
[[nodiscard]] Result<Override> ParseSetOverride(std::string_view arg);
// "NAME=VALUE" for --env.
[[nodiscard]] Result<Override> ParseEnvOverride(std::string_view arg);

// The hosts file as read when the job ran: rerun reads the inventory from
// here, not from the disk where it may have changed since.
struct RecordedHostsFile {
  std::string path;  // expanded, as the job file (or --hosts-file) named it
  std::string text;
};

// What a job's hosts_command printed when the job ran
// (runner/jobfile/hosts_command.h): down, exec, attach and rerun read the
// inventory from here and never run the command again.
struct RecordedHostsCommand {
  std::string command;  // as the job file (or an override) wrote it
  std::string output;   // its stdout
};

struct JobLayers {
  std::vector<Override> overrides;  // applied in order, the last one wins
  std::string config_file;          // "" = none; a missing file is no error
  std::optional<RecordedHostsFile> hosts_file;
  // Host groups' hosts files as recorded: each read from here, not the
  // disk, when its path matches.
  std::vector<RecordedHostsFile> group_hosts_files;
  std::optional<RecordedHostsCommand> hosts_command;
  // False: a hosts_command without its recorded output above is an error
  // instead of being run (acting on a recorded job; the fuzzer).
  bool run_hosts_command = true;
};

// The user's config file: $XDG_CONFIG_HOME/barge/config.yaml when
// XDG_CONFIG_HOME is an absolute path (a relative one is ignored, as the XDG
// Base Directory spec says), else ~/.config/barge/config.yaml with ~ as the
// spec takes it: $HOME, else the passwd entry's home (base/user_home.h,
// HomeRule::kXdg); "" when there is no home either.
std::string DefaultConfigFile();

}  // namespace barge::runner

namespace barge::runner {

// How a job was run, as the job store records it for `barge show` and
// `barge rerun`: the job file's path and text, the overrides, and the hosts
// file as read. Holds no secret value (secrets are read again at rerun).
struct RunRequest {
  std::string file;  // absolute path of the job file
  std::string text;  // the job file's text as run
  std::vector<Override> overrides;
  std::optional<RecordedHostsFile> hosts_file;
  std::vector<RecordedHostsFile> group_hosts_files;  // host groups' hosts files as read
  std::optional<RecordedHostsCommand> hosts_command;
  // A job array's member job: which member of which array it ran, and on
  // which hosts of its pool (the job's hosts, or its row's host group's),
  // by index (runner/array/member_record.h).
  struct Member {
    std::string array_id;
    int index = 0;
    std::vector<size_t> hosts;
  };
  std::optional<Member> member;

  // `barge run FILE --set ...`, quoted for a POSIX shell where needed.
  std::string CommandLine() const;
};

// {"file": ..., "text": ..., "overrides": [{"flag": "--set", "argument":
// "a.b=c"}, ...], "hosts_file": {"path": ..., "text": ...} | null,
// "group_hosts_files": [{"path": ..., "text": ...}, ...],
// "hosts_command": {"command": ..., "output": ...},
// "member": {"array": ..., "index": N, "hosts": [I, ...]}} (the last three
// only when there are any)
std::string RunRequestToJson(const RunRequest& request);
[[nodiscard]] Result<RunRequest> RunRequestFromJson(std::string_view json);

}  // namespace barge::runner
