// The blocks of a job file as they are read (internal to
// runner/jobfile/): the drafts that collect a block's values, and the
// readers and key tables of each block family, one file each:
// container_block.cc (container), host_entry_block.cc (one entry of hosts
// or spare_hosts), role_blocks.cc (roles: head with its readiness probe,
// worker), ssh_block.cc, rendezvous_block.cc, teardown_block.cc,
// host_blocks.cc (hosts, spares, hosts_file, hosts_command, host groups),
// job_blocks.cc (restart, array, preemption, workdir, files, artifacts,
// forward), secret_blocks.cc (secrets, registry), slurm_block.cc (slurm),
// job_rules.cc (mpi, the top-level keys, cross-block checks, ReadJob),
// yaml_document.cc (the guarded YAML parse), job_file.cc (layers,
// config.yaml, the public API). The key table itself is key_table.h, the
// readers of single values value_readers.h.
#pragma once

#include "runner/jobfile/key_table.h"
#include "runner/jobfile/value_readers.h"

namespace barge::runner::jobfile {


// A host entry, with where its values were written for the checks that
// compare hosts.
struct HostDraft {
  cluster::Host host;
  Entry entry;  // the list element
  std::optional<Entry> address;
  std::optional<Entry> role;
  std::optional<Entry> nodes;
  std::vector<Entry> ssh_settings;  // user, port, identity_file, proxy_jump
};


struct ReadyDraft {
  cluster::ReadinessProbe probe;
  std::vector<Entry> kinds;  // tcp_port, log, command as written
};


struct RoleDraft {
  bool present = false;
  cluster::RoleSpec role;
  std::optional<Entry> image;
  std::optional<Entry> command;  // as written
  std::optional<Entry> count;  // as written, when valid
};


struct TeardownDraft {
  TeardownHooks hooks;
  std::vector<Entry> commands;  // for the placeholder checks
};


// `host_groups:` (runner/array/): NAME: {hosts: [...] | hosts_file: PATH,
// ssh: {...}}. Each group is read like the job's own inventory; its `ssh:`
// takes the job's `ssh:` keys, laid over the job's settings once the config
// file is applied (LayGroupSsh).
struct GroupDraft {
  HostGroup group;
  Entry entry;  // the NAME key
  std::deque<Source>* sources = nullptr;  // the job's: a hosts_file's Source lives there
  // The layers' recorded group hosts files (read the one of the same path,
  // not the disk), and this group's hosts file as read.
  std::span<const RecordedHostsFile> recorded_hosts;
  std::optional<RecordedHostsFile> hosts_read;
  std::vector<HostDraft> hosts;
  bool host_errors = false;
  std::set<std::string> ssh_keys;
};


// The whole job while it is read: the spec plus what the checks across
// blocks need.
struct JobDraft {
  JobSpec spec;
  std::deque<Source> sources;  // a hosts_file's Source; a deque keeps addresses stable
  std::vector<HostDraft> hosts;
  std::vector<HostDraft> spares;
  bool image_written = false;  // `image:` is there, if perhaps wrong
  bool hosts_given = false;    // `hosts:` or `hosts_file:` was read
  bool host_errors = false;    // some host entry is wrong: node counts are unknown
  RoleDraft head;
  RoleDraft worker;
  TeardownDraft teardown;
  std::vector<Entry> secret_keys;  // the NAME key of each of spec.secrets
  std::set<std::string> ssh_keys;  // the keys of `ssh:` the job file sets
  std::set<std::string> health_keys;  // the keys of `health:` the job file sets
  std::optional<Entry> mpi;        // the `mpi:` key, when given
  std::optional<Entry> slurm;      // the `slurm:` key, when given
  const RecordedHostsFile* recorded_hosts = nullptr;  // rerun: read this, not the disk
  std::optional<RecordedHostsFile> hosts_read;        // the hosts file as read
  // Host groups' hosts files: as recorded (rerun, a member job's down,
  // exec, attach: read these, not the disk), and as read.
  std::span<const RecordedHostsFile> recorded_group_hosts;
  std::vector<RecordedHostsFile> group_hosts_read;
  // hosts_command: its recorded output (down, exec, attach, rerun: read
  // this, never run the command), and what it printed.
  const RecordedHostsCommand* recorded_command = nullptr;
  bool may_run_command = true;  // JobLayers::run_hosts_command
  std::optional<RecordedHostsCommand> command_read;
  const Source* command_source = nullptr;  // where the hosts_command's hosts were read
  bool trust_hosts_command = false;        // `trust_hosts_command: true`
  std::vector<GroupDraft> groups;  // `host_groups:`, in file order
};


// A hosts_file named `written` at `e`, read (or taken from `recorded` when
// that names the same file) and parsed as a Source kept in `sources`;
// nullopt after an error reported at `e`.
struct LoadedHostsFile {
  std::string path;   // expanded
  std::string shown;  // as messages and the job record name it
  std::string text;
  const Source* src = nullptr;
  YAML::Node root;
};

// The key table of each block (for `barge schema` and the docs).
std::vector<KeyInfo> ArrayKeys();
std::vector<KeyInfo> ArtifactKeys();
std::vector<KeyInfo> ContainerKeys();
std::vector<KeyInfo> FileKeys();
std::vector<KeyInfo> ForwardKeys();
std::vector<KeyInfo> HeadKeys();
std::vector<KeyInfo> HostKeys();
std::vector<KeyInfo> HostGroupKeys();
std::vector<KeyInfo> JobKeys();
std::vector<KeyInfo> MpiKeys();
std::vector<KeyInfo> HealthKeys();
// config.yaml's `health:` (its host_failures and host_window; any other
// key is an error): the keys read into `h`.
SeenKeys ReadConfigHealth(const Entry& e, HealthSpec& h);
std::vector<KeyInfo> NetworkKeys();
std::vector<KeyInfo> OnFailureKeys();
std::vector<KeyInfo> PasswordKeys();
std::vector<KeyInfo> NotifyKeys();
std::vector<KeyInfo> SecretValueKeys();
std::vector<KeyInfo> StorageKeys();
std::vector<KeyInfo> PreemptionKeys();
std::vector<KeyInfo> ProgressKeys();
std::vector<KeyInfo> ReadyKeys();
std::vector<KeyInfo> RegistryKeys();
std::vector<KeyInfo> RendezvousKeys();
std::vector<KeyInfo> RestartKeys();
std::vector<KeyInfo> RoleKeys();
std::vector<KeyInfo> SecretKeys();
std::vector<KeyInfo> SlurmKeys();
std::vector<KeyInfo> SshKeys();
std::vector<KeyInfo> TeardownKeys();
std::vector<KeyInfo> WorkdirKeys();
std::vector<KeyInfo> WorkerKeys();

// Constants shared by several tables.
inline constexpr auto kRestartCauses = NamesOf(kRestartCauseNames);
inline constexpr auto kImagePull = NamesOf(kImagePullNames);
inline constexpr auto kGpuHealthLevel = NamesOf(kGpuHealthLevelNames);
inline constexpr auto kRdmaUse = NamesOf(kRdmaUseNames);
inline constexpr auto kOnWorkerExit = NamesOf(kOnWorkerExitNames);
inline constexpr auto kOnHang = NamesOf(kOnHangNames);

// What CountExpandedNodes found.
struct Expansion {
  long long count = 0;
  bool too_deep = false;
  bool exceeded() const { return too_deep || count > kMaxNodes; }
};

// container_block.cc
void ReadContainer(const Entry& e, ContainerOptions& out);
// host_entry_block.cc
SeenKeys ReadHostEntry(const Entry& e, HostDraft& h);
// role_blocks.cc
SeenKeys ReadRoles(const Entry& e, JobDraft& d);
SeenKeys ReadHead(const Entry& e, RoleDraft& r);
SeenKeys ReadWorker(const Entry& e, RoleDraft& r);
// ssh_block.cc
SeenKeys ReadSsh(const Entry& e, SshSettings& s);
// rendezvous_block.cc
SeenKeys ReadRendezvous(const Entry& e, cluster::RendezvousOptions& r);
// teardown_block.cc
SeenKeys ReadTeardown(const Entry& e, TeardownDraft& t);
// host_blocks.cc
void ReadHostList(const Entry& e, JobDraft& d);
void ReadSpareHosts(const Entry& e, JobDraft& d);
void ReadHostsFile(const Entry& e, JobDraft& d);
void ReadHostsCommand(const Entry& e, JobDraft& d);
void ReadHostGroups(const Entry& e, JobDraft& d);
// job_blocks.cc
SeenKeys ReadArrayBlock(const Entry& e, ArraySpec& a);
SeenKeys ReadRestart(const Entry& e, RestartPolicy& r);
SeenKeys ReadPreemption(const Entry& e, PreemptionSpec& p);
// `progress:`, checked whole: a signal at least, `pattern` and `within` together.
void ReadProgress(const Entry& e, JobSpec& spec);
// on_failure_block.cc: `on_failure:`, which needs `keep`.
void ReadOnFailure(const Entry& e, JobSpec& spec);
void ReadWorkdir(const Entry& e, JobDraft& d);
void ReadFiles(const Entry& e, JobDraft& d);
void ReadArtifacts(const Entry& e, JobDraft& d);
void ReadForward(const Entry& e, JobDraft& d);
// secret_blocks.cc
void ReadSecrets(const Entry& e, JobDraft& d);
void ReadRegistry(const Entry& e, JobDraft& d);
// A value read from {file: PATH} or {env: VARIABLE} (secret_blocks.cc),
// without trailing line breaks; nullopt after an error. `what` names it.
std::optional<std::string> ReadSecretValue(const Entry& e, std::string_view what);
// `notify:` (notify_block.cc).
void ReadNotify(const Entry& e, JobDraft& d);
// `storage:` and s3:// destinations (storage_block.cc). CheckS3Destination:
// s3://BUCKET/PREFIX with only the placeholders {job}, {name}, {rank},
// {host}. CheckS3NeedsStorage: an s3:// destination without `storage:` is
// an error at its `to:`.
void ReadStorage(const Entry& e, JobDraft& d);
Status CheckS3Destination(std::string_view to);
void CheckS3NeedsStorage(const JobDraft& d, const SeenKeys& seen);
void CheckSecretsAgainstEnv(const JobDraft& d);
// job_rules.cc: reads the whole document `root` of `src` into `d`.
void ReadJob(const Source& src, const YAML::Node& root, JobDraft& d);
// slurm_block.cc: `slurm:`; once every key is read, CheckSlurm sets it
// against the other ways to name hosts and puts its placeholder hosts in
// d.hosts.
void ReadSlurm(const Entry& e, JobDraft& d);
void CheckSlurm(JobDraft& d, const SeenKeys& seen);
// yaml_document.cc
// Counts nodes as a reader would visit them, aliases expanded.
void CountExpandedNodes(const YAML::Node& n, Expansion* e, int depth = 0);
std::string ExpansionMessage(const Expansion& e);
// Parses `text` as one YAML document with the size and nesting caps;
// nullopt after reporting its errors in `src`.
std::optional<YAML::Node> ParseDocument(const Source& src, std::string_view text, std::string_view what);
// Reads at most the job file's cap of `path` into `out`; false with `error`.
bool ReadFileCapped(const std::string& path, std::string* out, std::string* error);
// Sorts errors by file (in the order first seen), line, column.
void SortErrors(std::vector<JobFileError>* errors);

}  // namespace barge::runner::jobfile
