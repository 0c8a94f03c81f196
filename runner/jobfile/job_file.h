// Job files: YAML text in, a complete and consistent JobSpec out, or every
// error in the file.
//
// Validation is total: the parser reports every error it finds, each with
// file, line and column (counted from 1; columns count bytes) and the dotted
// key path ("hosts[1].port", "roles.worker.count",
// "container.ulimits.memlock"), and returns a JobSpec only when there is
// none. It never throws: yaml-cpp's exceptions are caught here and become
// errors.
//
// Nothing here connects anywhere or runs Docker, and the only command run
// is a job's `hosts_command:` (runner/jobfile/hosts_command.h), unless the
// layers hold its recorded output. The only file system access
// is reading the job file, its hosts_file and its secret files (up to 1 MiB
// each), and checking that identity files (and an explicit ssh.config_file)
// are readable; the only environment read is the variables secrets name.
//
// Before the YAML parser sees a file it is refused when larger than 1 MiB,
// nested deeper than 64 levels, or holding NUL bytes or invalid UTF-8. After
// parsing, what yaml-cpp 0.7 silently accepts is refused too: duplicate
// keys, a quoted scalar left open until the end of the file, more than one
// document, and aliases expanding to more than 100000 nodes (a "billion
// laughs" bomb; aliases themselves are allowed).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runner/jobfile/job_spec.h"
#include "runner/jobfile/overrides.h"

namespace barge::runner {

struct JobFileError {
  // The job file as given to LoadJobFile / ParseJobText; for errors in a
  // hosts_file, that file's path (relative paths are joined to the job
  // file's directory as given, so "jobs/inventory.yaml").
  std::string file;
  int line = 0;    // 0 only when the file cannot be read at all
  int column = 0;  // 0 when line is 0
  // Dotted key path; empty for errors about the text itself (syntax, tabs,
  // encoding, size). Errors in a hosts_file use the job file's paths
  // ("hosts[1].port").
  std::string key;
  std::string message;

  // "job.yaml:21:3: container.shm_sise: unknown key; did you mean 'shm_size'?"
  // Without a key: "job.yaml:4:1: tab character used for indentation ..."
  // Without a line: "job.yaml: cannot read job file: No such file or directory"
  std::string ToString() const;
};

struct LoadedJob {
  std::optional<JobSpec> spec;       // set iff `errors` is empty
  std::vector<JobFileError> errors;  // each file's errors in line order
  // The hosts file as read (or as recorded, for a rerun), when the job
  // names one; what `barge rerun` needs to run on the same inventory.
  std::optional<RecordedHostsFile> hosts_file;
  // Each host group's hosts file as read (or as recorded), in group order:
  // what a rerun and a member job's down, exec and attach read instead of
  // the disk.
  std::vector<RecordedHostsFile> group_hosts_files;
  // What the job's hosts_command printed (or, with the layers' record of
  // the same command, that record): the inventory down, exec, attach and
  // rerun use without running the command again.
  std::optional<RecordedHostsCommand> hosts_command;
};

// Whether the values of `secrets:` and `registry.password` are read. kRead
// (for `barge run` and `barge plan`) reads each file and variable and
// refuses the job when one cannot be read. kSkip is for a job file recorded
// in the store and parsed again to act on a job's hosts (down, exec,
// attach), which needs no value while the files or variables may be gone:
// the entries are checked for their shape only and the values stay empty.
enum class SecretValues { kRead, kSkip };

// Reads the job file at `path` (no more than its first 1 MiB + 1 byte) and
// parses it; relative paths in it resolve against its directory.
//
// `layers` (runner/jobfile/overrides.h) are laid over the text: its overrides are
// applied to the parsed document before it is read, and validated the
// same way; an error they cause names the override instead of a line
// ("--set container.shm_sise: unknown key; did you mean 'shm_size'?"). A
// name declared in `secrets:` cannot be given by an override. The
// config file's `ssh:` keys fill in what the job file's `ssh:` leaves
// unset; its errors name the config file, line and key.
[[nodiscard]] LoadedJob LoadJobFile(const std::string& path,
                                    SecretValues secrets = SecretValues::kRead,
                                    const JobLayers& layers = {});

// Parses job file text. `file_name` is used in errors and kept in
// JobSpec::file; `base_dir` is the directory relative paths (hosts_file,
// identity files, ssh files, secret files) resolve against, and becomes
// JobSpec::base_dir. Reads the hosts_file, if one is named, from disk, and
// the secrets (see SecretValues). No error message holds a secret's value.
[[nodiscard]] LoadedJob ParseJobText(std::string_view text, const std::string& file_name,
                                     const std::string& base_dir,
                                     SecretValues secrets = SecretValues::kRead,
                                     const JobLayers& layers = {});

}  // namespace barge::runner
