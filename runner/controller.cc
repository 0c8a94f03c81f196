#include "runner/controller.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <list>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include <unistd.h>

#include "container/docker_args.h"
#include "container/inspect.h"
#include "container/log_line.h"
#include "container/proc_net.h"
#include "runner/docker_commands.h"
#include "runner/job_store.h"
#include "runner/log_sink.h"
#include "runner/progress.h"
#include "runner/redact.h"
#include "runner/signals.h"
#include "runner/state_dir.h"
#include "runner/teardown_hooks.h"
#include "runner/watchdog.h"
#include "ssh/event_loop.h"
#include "ssh/local_executor.h"
#include "ssh/quote.h"
#include "ssh/session.h"
#include "ssh/ssh_executor.h"

namespace barge::runner {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using std::chrono::seconds;

cluster::PlanInput MakePlanInput(const JobSpec& spec, const std::string& job_id) {
  cluster::PlanInput in;
  in.job_id = job_id;
  in.job_name = spec.name;
  in.image = spec.image;
  in.command = spec.command;
  in.container = spec.container;
  in.hosts = spec.hosts;
  if (in.hosts.empty()) {
    cluster::Host local;
    local.address = cluster::kLocalAddress;
    in.hosts.push_back(local);
  }
  in.roles = spec.roles;
  in.rendezvous = spec.rendezvous;
  // workdir: and files: are mounted from the host's job directory into every
  // container, whatever volumes a role or host block sets.
  std::vector<std::string> mounts;
  if (spec.workdir) mounts.push_back(HostJobDir(job_id) + "/workdir:" + spec.workdir->mount);
  for (size_t i = 0; i < spec.files.size(); ++i) {
    mounts.push_back(HostJobDir(job_id) + "/files/" + std::to_string(i) + ":" + spec.files[i].to + ":ro");
  }
  // secrets: each one a read-only file at /run/secrets/NAME; those given as
  // environment come from an env file on the host (docker run --env-file),
  // so that no value is ever on a command line.
  for (const SecretSpec& secret : spec.secrets) {
    mounts.push_back(SecretsDir(job_id) + "/" + secret.name + ":/run/secrets/" + secret.name + ":ro");
  }
  if (!mounts.empty()) {
    auto add = [&](container::ContainerOptions& o, bool always) {
      if (!o.volumes && !always) return;
      if (!o.volumes) o.volumes.emplace();
      o.volumes->insert(o.volumes->end(), mounts.begin(), mounts.end());
    };
    add(in.container, true);
    for (auto& [name, role] : in.roles) add(role.container, false);
    for (auto& host : in.hosts) add(host.container, false);
  }
  if (std::any_of(spec.secrets.begin(), spec.secrets.end(),
                  [](const SecretSpec& s) { return s.as_env; })) {
    const std::vector<std::string> env_file = {"--env-file", SecretEnvFile(job_id)};
    auto add = [&](container::ContainerOptions& o, bool always) {
      if (!o.run_options && !always) return;
      if (!o.run_options) o.run_options.emplace();
      o.run_options->insert(o.run_options->begin(), env_file.begin(), env_file.end());
    };
    add(in.container, true);
    for (auto& [name, role] : in.roles) add(role.container, false);
    for (auto& host : in.hosts) add(host.container, false);
  }
  return in;
}

std::vector<std::string> DockerCommandOf(const JobSpec& spec, const cluster::Host& host,
                                         const std::string& job_id) {
  const std::string& text = host.docker_command ? *host.docker_command : spec.docker_command;
  Result<std::vector<std::string>> split = container::SplitDockerCommand(text);
  // Validated at parse time: the fallback is not reached.
  std::vector<std::string> words = split.ok() ? *split : std::vector<std::string>{"docker"};
  if (spec.registry && !job_id.empty()) {
    words.push_back("--config");
    words.push_back(DockerConfigDir(job_id));
  }
  return words;
}

namespace {

std::string HostName(const cluster::Host& h) { return h.address; }

// What a finished command produced.
struct Outcome {
  ssh::ExitStatus exit;
  std::string out;
  std::string err;
  // Masks secret values in Reason() (set by Controller::Exec); not owned.
  const Redactor* redact = nullptr;

  bool ok() const { return exit.known() && exit.code == 0; }
  // The most useful one-line reason for a failure.
  std::string Reason() const {
    if (!exit.known()) return redact ? (*redact)(exit.error) : exit.error;
    std::string text = err.empty() ? out : err;
    while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
    if (text.empty()) return "exit code " + std::to_string(exit.code);
    return redact ? (*redact)(text) : text;
  }
};

constexpr char kNotPosix[] = "the login shell is not a POSIX shell";

// Free space below this on the job directory's (/tmp) or the engine's
// filesystem fails preflight: a job cannot start on a full disk.
constexpr long long kMinFreeKib = 256 * 1024;

// Problems in `df -Pk` output: each filesystem with less than kMinFreeKib.
std::vector<std::string> LowDiskSpace(const std::string& df) {
  std::vector<std::string> problems;
  std::istringstream lines(df);
  std::string line;
  std::set<std::string> seen;
  while (std::getline(lines, line)) {
    std::istringstream fields(line);
    std::string fs, blocks, used, avail, capacity, mount;
    if (!(fields >> fs >> blocks >> used >> avail >> capacity >> mount) || fs == "Filesystem") continue;
    long long kib = 0;
    try {
      kib = std::stoll(avail);
    } catch (...) {
      continue;
    }
    if (kib >= kMinFreeKib || !seen.insert(mount).second) continue;
    problems.push_back("disk full: " + std::to_string(kib / 1024) + " MiB free on " + mount +
                       " (barge needs " + std::to_string(kMinFreeKib / 1024) + " MiB there)");
  }
  return problems;
}

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  size_t i = 0;
  while (i < s.size() && s[i] == ' ') ++i;
  return s.substr(i);
}

struct HostState {
  size_t index = 0;
  std::string name;  // as in messages and log prefixes
  cluster::Host inventory;  // its entry (a spare's, once it took a lost host's place)
  // A spare took its place: the job's teardown hooks still run for it.
  bool superseded = false;
  std::unique_ptr<ssh::Executor> exec;
  std::unique_ptr<DockerCommands> docker;
  std::map<std::string, std::string> image_ids;  // image reference → ID
  bool watchdog_armed = false;
  // registry: a login was tried, so the job's Docker client config there
  // may hold the credential until Logout.
  bool login_tried = false;
  // The session died, or the engine stopped answering: nothing more is
  // sent there, and teardown does not wait on it.
  bool lost = false;
  // Lost or preempted: at a restart a spare takes its place (or it is
  // checked again before it is reused).
  bool replace = false;
  bool probing = false;     // an engine probe is in flight
  bool polling = false;     // a preemption check is in flight
  // Commands in flight or finished; reaped by the loop, never from callbacks.
  std::vector<std::unique_ptr<ssh::Command>> commands;
};

// kLost: its host was lost while it ran; how it ended is unknown.
enum class NodePhase { kPending, kStarting, kRunning, kExited, kLost };

struct NodeState {
  const cluster::NodePlan* plan = nullptr;
  HostState* host = nullptr;
  NodePhase phase = NodePhase::kPending;
  bool run_attempted = false;  // a container may exist on the host
  std::string container_id;
  std::optional<int> exit_code;
  std::string end_reason;  // "exit code 3", "OOMKilled (exit code 137)", ...
  // Of an attempt that has ended (a restart made new nodes): callbacks
  // still in flight for it do nothing.
  bool retired = false;
  bool logs_open = false;
  // attach: lines stamped at or before this were already kept; drop them.
  std::optional<int64_t> skip_through_ns;
  std::unique_ptr<container::LineSplitter> out_lines;
  std::unique_ptr<container::LineSplitter> err_lines;
};

class Controller {
 public:
  Controller(const JobSpec& spec, const cluster::PlanInput& input, const ControllerOptions& options)
      : spec_(spec), input_(input), options_(options),
        progress_(std::make_unique<Progress>(stderr, isatty(fileno(stderr)) != 0)) {}

  int Run();
  // `barge down` of a job whose controller is gone: connects to the job's
  // hosts, removes every container labelled with the job, runs the teardown
  // hooks, and records the job as cancelled.
  int TearDownOrphan();
  // `barge reap`: on every host of the job, removes each barge-labelled
  // container whose job `is_live` says is not running; prints each.
  int Reap(const std::function<bool(const std::string&)>& is_live);
  // `barge exec`: runs `argv` in the container of node `rank` (docker exec),
  // streaming its output; returns its exit code.
  int ExecInNode(int rank, const std::vector<std::string>& argv);
  // `barge attach` to a job whose controller is gone: streams every node's
  // output from the hosts again, from the last line its log file kept
  // (`kept_through_ns` by rank; none = from the start), appending to the
  // files, until every node's stream ends or an interrupt. No line is
  // repeated: Docker's timestamps at or before the kept one are dropped.
  int AttachOrphan(const std::map<int, int64_t>& kept_through_ns);

 private:
  // The job after its record exists: everything from connect to teardown.
  int Execute();
  // Prints `message`, keeps it for the job's final record, returns `code`.
  int Fail(const std::string& message, int code) {
    Say(message);
    final_detail_ = redact_(message);
    return code;
  }
  // Store writes never fail the job: a failed write is a warning.
  void Record(const Status& s) {
    if (!s.ok()) Say("warning: job store: " + s.message());
  }
  void RecordNode(const NodeState& node);
  // Makes the plan (and opens the store when `with_store`); false after
  // printing why not.
  bool Prepare(bool with_store);
  // Watchdog timing (watchdog.h): renewal period and the head-exit grace.
  seconds RenewEvery() const {
    auto lease = std::chrono::duration_cast<seconds>(spec_.lease);
    return std::clamp<seconds>(lease / 4, seconds(1), seconds(30));
  }
  // Artifacts: copies `a` out of node `n`'s container (docker cp NAME:PATH -,
  // a tar stream on the host's session) into runs/<id>/artifacts/<rank>/,
  // unpacked by a local tar. `done` runs when it has finished.
  void CopyArtifact(NodeState& n, const ArtifactSpec& a, std::function<void()> done);
  std::vector<NodeState*> ArtifactNodes(const ArtifactSpec& a);
  void ScheduleArtifacts();
  // Copies every artifact of every node once more and waits (bounded).
  void FinalArtifacts();
  // The watchdog of `host` (armed by Preflight).
  WatchdogParams WatchdogFor(const HostState& host) const;
  void RenewLeases();
  void DisarmWatchdogs();
  // Starts `line` on `host`; `done` runs from the loop once it has exited.
  // Returns the command (owned by `host`, valid until reaped after it is
  // done) for writing its stdin; nullptr when it could not start. Stdin is
  // closed at once unless `keep_stdin`.
  ssh::Command* Exec(HostState& host, const std::string& line,
                     std::function<void(const Outcome&)> done, bool keep_stdin = false);
  // Polls the loop until `finished()` or `deadline`. Returns false on deadline.
  bool RunUntil(const std::function<bool()>& finished, Clock::time_point deadline);
  void ReapCommands();
  static void ReapCommandsOf(HostState& host);

  // Connects to the hosts of `which` (host indices of the plan), each with a
  // new HostState in hosts_ (a previous one is kept in retired_).
  Status Connect(const std::vector<size_t>& which);
  Status Connect() { return Connect(plan_.used_hosts); }
  // Engine, images, GPUs, rendezvous port and the watchdog on `targets`.
  Status Preflight(const std::vector<HostState*>& targets);
  std::vector<HostState*> AllHosts();
  // Hosts whose session is open.
  std::vector<HostState*> ConnectedHosts();
  // Why Connect could not reach a host, by host index (for preflight's table).
  std::map<size_t, std::string> connect_errors_;
  // One launch of the job (an attempt) on the current hosts: plans again
  // (with the restart count), starts the head, waits for it, starts the
  // workers, and runs until the head exits, a fault, an interrupt or the
  // timeout. Returns a failure only when the launch itself failed.
  Status Launch();
  // At a restart: a spare host in place of every host marked `replace`, or
  // the same host checked again (reconnected, preflighted, leftovers of the
  // job removed, no preemption notice). Fails when a host has neither.
  Status ReplaceHosts();
  // Faults. The first one of an attempt ends it (fault_); later ones are
  // only recorded. Nothing is a fault once teardown has begun.
  enum class Cause { kHostLost, kNodeFailed, kPreempted };
  struct Fault {
    Cause cause;
    std::string host;
    std::string detail;
    int exit_code = 0;  // kNodeFailed: the node's code
    int rank = -1;      // kNodeFailed: which node
  };
  void NoteFault(Fault fault);
  void OnHostLost(HostState& host, const std::string& why);
  void OnPreempted(HostState& host, const std::string& notice);
  bool Restartable(const Fault& f) const;
  // Periodic checks while an attempt runs: an engine probe per host (a
  // frozen dockerd), the preemption command per host. `generation_` stops
  // the previous attempt's.
  void StartMonitors();
  // `line` on a host, killed after `limit` (closing a channel does not end a
  // remote command; a frozen dockerd would hang it forever).
  static std::string Bounded(const std::string& line, std::chrono::milliseconds limit);
  // Removes every container labelled with the job on `host` (leftovers).
  std::string RemoveJobContainersLine(HostState& host) const;
  Status StartNodes(const std::vector<NodeState*>& nodes);
  Status WaitReady(NodeState& head);
  // image_pull: push. Streams the local `docker save IMAGE` into `docker
  // load` on every target host in parallel, then records each host's image
  // ID; failures go to `errors` by host.
  void Push(const std::string& image, const std::vector<HostState*>& targets,
            std::map<size_t, std::vector<std::string>>* errors);
  // Streams a local file into `command(host)`'s stdin on every target, in
  // parallel with bounded memory; the outcome per host (missing when
  // interrupted or timed out).
  std::map<HostState*, Outcome> StreamFile(const std::string& file,
                                           const std::vector<HostState*>& targets,
                                           const std::function<std::string(HostState&)>& command,
                                           const std::string& phase);
  // secrets:, workdir: and files: into every host's job directory (after
  // the watchdog made it, before any container starts).
  Status Upload(const std::vector<HostState*>& targets);
  // secrets: each value written from memory to the command's stdin, into
  // DIR/secrets/NAME (mode 0600), plus the env file of those given as
  // environment; in parallel on every target.
  Status ShipSecrets(const std::vector<HostState*>& targets);
  // registry: `docker login --password-stdin` on every connected target (the
  // password written to the command's stdin), into the job's own client
  // config (DockerConfigDir), which every later docker command of the job
  // on that host uses. Runs right after Connect, before Preflight checks or
  // pulls images. Fails, naming each host and the registry's reason, when a
  // login fails.
  Status Login(const std::vector<HostState*>& targets);
  // `docker logout` on every reachable host where a login was tried, and the
  // client config removed. A lost host's watchdog removes it with the job's
  // directory.
  void Logout();
  void RunTeardownHooks();
  void StreamLogs(NodeState& node);
  // The head's readiness regex (roles.head.ready.log) finds a match in `text`.
  bool ReadyLineMatches(std::string_view text) const;
  void WatchExit(NodeState& node);
  // Stops and removes the attempt's containers on every reachable host,
  // with a last copy of the artifacts. `final`: the job is over, so the
  // teardown hooks run too.
  void Teardown(bool graceful, bool final = true);

  // barge's own messages, on stderr, around the status line; secret values
  // are masked.
  void Say(const std::string& message) { progress_->Print("barge: " + redact_(message)); }

  const JobSpec& spec_;
  const Redactor redact_{spec_};  // what Say, Fail and the store never show
  cluster::PlanInput input_;
  ControllerOptions options_;
  std::unique_ptr<Progress> progress_;
  cluster::Plan plan_;
  ssh::EventLoop loop_;
  std::map<size_t, std::unique_ptr<HostState>> hosts_;  // by host index
  std::vector<std::unique_ptr<NodeState>> nodes_;       // by rank
  std::unique_ptr<LogSink> sink_;
  int interrupts_ = 0;
  bool tearing_down_ = false;  // exits from now on are barge's doing
  std::optional<std::regex> ready_regex_;  // head readiness by log line
  bool head_logged_ready_ = false;
  std::optional<Fault> fault_;  // what ended the current attempt
  int restart_count_ = 0;
  size_t next_spare_ = 0;       // spec_.spare_hosts taken so far
  int generation_ = 0;          // of the current attempt's monitors
  // Replaced hosts, earlier attempts' plans, nodes and sinks: kept alive for
  // callbacks still in flight (a frozen engine's docker wait).
  std::vector<std::unique_ptr<HostState>> retired_;
  std::list<cluster::Plan> old_plans_;
  std::vector<std::shared_ptr<std::function<void()>>> monitors_;
  std::vector<std::unique_ptr<NodeState>> old_nodes_;
  std::vector<std::unique_ptr<LogSink>> old_sinks_;
  std::unique_ptr<JobStore> store_;
  std::string final_detail_;
  const Clock::time_point started_ = Clock::now();
  bool renewing_ = false;
  std::function<void()> renew_tick_;  // renews every lease, then re-arms itself
  HostState local_;                    // this machine: local tar for artifacts
  std::vector<std::shared_ptr<std::function<void()>>> artifact_ticks_;
  std::set<std::pair<int, size_t>> copying_;  // (rank, artifact index) in flight
  bool timed_out_ = false;
};

ssh::Command* Controller::Exec(HostState& host, const std::string& line,
                               std::function<void(const Outcome&)> done, bool keep_stdin) {
  auto outcome = std::make_shared<Outcome>();
  outcome->redact = &redact_;
  auto finish = std::make_shared<std::function<void(const Outcome&)>>(std::move(done));
  ssh::CommandCallbacks cb;
  cb.on_stdout = [outcome](std::string_view d) { outcome->out.append(d); };
  cb.on_stderr = [outcome](std::string_view d) { outcome->err.append(d); };
  cb.on_exit = [outcome, finish](const ssh::ExitStatus& st) {
    outcome->exit = st;
    (*finish)(*outcome);
  };
  spdlog::debug("Remote command: start. [host: {}, command: {}]", host.name, redact_(line));
  Result<std::unique_ptr<ssh::Command>> cmd = host.exec->Start(line, std::move(cb));
  if (!cmd.ok()) {
    // Deliver the failure from the loop, like any other outcome.
    outcome->exit.error = cmd.status().message();
    loop_.AddTimer(Clock::now(), [outcome, finish] { (*finish)(*outcome); });
    return nullptr;
  }
  if (!keep_stdin) (*cmd)->CloseStdin();
  host.commands.push_back(std::move(cmd).value());
  return host.commands.back().get();
}

void Controller::ReapCommandsOf(HostState& host) {
  auto& cmds = host.commands;
  cmds.erase(std::remove_if(cmds.begin(), cmds.end(), [](const auto& c) { return c->done(); }),
             cmds.end());
}

void Controller::ReapCommands() {
  for (auto& [index, host] : hosts_) ReapCommandsOf(*host);
  ReapCommandsOf(local_);
}

bool Controller::RunUntil(const std::function<bool()>& finished, Clock::time_point deadline) {
  while (!finished()) {
    auto now = Clock::now();
    if (now >= deadline) return false;
    auto wait = std::min<milliseconds>(milliseconds(200),
                                       std::chrono::duration_cast<milliseconds>(deadline - now));
    loop_.Poll(std::max(wait, milliseconds(1)));
    ReapCommands();
  }
  return true;
}

Status Controller::Connect(const std::vector<size_t>& which) {
  std::vector<ssh::SessionOptions> remote;
  std::vector<size_t> remote_index;
  for (size_t h : which) connect_errors_.erase(h);
  for (size_t h : which) {
    const cluster::Host& host = plan_.hosts[h];
    if (auto old = hosts_.find(h); old != hosts_.end()) retired_.push_back(std::move(old->second));
    auto state = std::make_unique<HostState>();
    state->index = h;
    state->name = HostName(host);
    state->inventory = host;
    state->docker = std::make_unique<DockerCommands>(DockerCommandOf(spec_, host));
    if (host.is_local()) {
      state->exec = std::make_unique<ssh::LocalExecutor>(&loop_);
    } else {
      ssh::SessionOptions o;
      o.host = host.address;
      o.port = host.port ? host.port : spec_.ssh.port;
      o.user = host.user ? host.user : spec_.ssh.user;
      o.identity_file = host.identity_file ? host.identity_file : spec_.ssh.identity_file;
      o.known_hosts_file = spec_.ssh.known_hosts;
      o.config_file = spec_.ssh.config_file;
      o.host_key_checking = spec_.ssh.host_key_checking;
      o.connect_timeout = spec_.ssh.connect_timeout;
      remote.push_back(o);
      remote_index.push_back(h);
    }
    hosts_[h] = std::move(state);
  }
  if (spec_.ssh.host_key_checking == ssh::HostKeyChecking::kOff && !remote.empty()) {
    Say("warning: host_key_checking is off: host keys are not verified, an impostor host would be trusted");
  }
  if (remote.empty()) return Status::Ok();
  Say("connecting to " + std::to_string(remote.size()) + " host(s)");
  auto sessions = ssh::ConnectAll(remote, 32);
  std::vector<std::string> errors;
  for (size_t i = 0; i < sessions.size(); ++i) {
    HostState& state = *hosts_[remote_index[i]];
    if (!sessions[i].ok()) {
      errors.push_back(sessions[i].status().message());
      connect_errors_[remote_index[i]] = sessions[i].status().message();
      continue;
    }
    auto exec = std::make_unique<ssh::SshExecutor>(std::move(sessions[i]).value(), &loop_);
    exec->set_dead_after(spec_.ssh.dead_after);
    HostState* hs = &state;
    exec->set_on_connection_lost([this, hs](const Status& why) { OnHostLost(*hs, why.message()); });
    state.exec = std::move(exec);
  }
  if (!errors.empty()) {
    std::string msg = "cannot connect:";
    for (const auto& e : errors) msg += "\n  " + e;
    return Status::Error(msg);
  }
  return Status::Ok();
}

std::vector<HostState*> Controller::AllHosts() {
  std::vector<HostState*> out;
  for (auto& [h, host] : hosts_) out.push_back(host.get());
  return out;
}

std::vector<HostState*> Controller::ConnectedHosts() {
  std::vector<HostState*> out;
  for (auto& [h, host] : hosts_) {
    if (host->exec) out.push_back(host.get());
  }
  return out;
}

std::string Controller::Bounded(const std::string& line, std::chrono::milliseconds limit) {
  const long long secs = std::max<long long>(1, (limit.count() + 999) / 1000);
  return "timeout -s KILL " + std::to_string(secs) + " sh -c " + ssh::ShellQuote(line);
}

Status Controller::Preflight(const std::vector<HostState*>& targets) {
  // Per host, in parallel: the engine answers; every image the host's nodes
  // need is there (pulled when missing and image_pull allows); GPUs work
  // where asked for; the watchdog is armed. All in one round trip.
  std::map<size_t, std::vector<std::string>> errors;  // by host
  std::map<std::string, std::vector<HostState*>> to_push;  // image → hosts lacking it
  int pending = 0;
  std::map<HostState*, int> open;  // checks in flight, by host
  progress_->Begin("preflight", static_cast<int>(targets.size()));
  // Runs one check; the host is done (progress) when its last one is.
  std::function<void(HostState*, const std::string&, std::function<void(const Outcome&)>)> check =
      [&](HostState* hs, const std::string& line, std::function<void(const Outcome&)> cb) {
        ++pending;
        ++open[hs];
        Exec(*hs, line, [&, hs, cb = std::move(cb)](const Outcome& o) {
          cb(o);
          --pending;
          if (--open[hs] > 0) return;
          auto it = errors.find(hs->index);
          if (it == errors.end()) {
            progress_->Done(hs->name, true);
          } else {
            progress_->Done(hs->name, false, it->second.front());
          }
        });
      };
  for (HostState* hs : targets) {
    const size_t h = hs->index;
    std::set<std::string> images;
    const container::ContainerSpec* gpu_spec = nullptr;
    for (const auto& n : plan_.nodes) {
      if (n.host_index != h) continue;
      images.insert(n.container.image);
      if (n.container.options.gpus && !gpu_spec) gpu_spec = &n.container;
    }
    check(hs, Bounded(hs->docker->Version(), spec_.ssh.dead_after), [&, hs](const Outcome& o) {
      if (o.exit.known() && o.exit.code == 137 && o.err.empty()) {
        errors[hs->index].push_back("the Docker engine did not answer within " +
                                    std::to_string(spec_.ssh.dead_after.count() / 1000) +
                                    " s (ssh.dead_after)");
      } else if (!o.ok()) {
        errors[hs->index].push_back("docker is not reachable: " + o.Reason());
      }
    });
    for (const std::string& image : images) {
      if (spec_.image_pull == ImagePull::kAlways) {
        check(hs, hs->docker->Pull(image) + " >/dev/null && " + hs->docker->ImageId(image),
              [&, hs, image](const Outcome& o) {
                if (o.ok()) {
                  hs->image_ids[image] = Trim(o.out);
                } else {
                  errors[hs->index].push_back("cannot pull " + image + " (image_pull: always): " +
                                              o.Reason());
                }
              });
        continue;
      }
      check(hs, hs->docker->ImageId(image), [&, hs, image](const Outcome& o) {
        if (o.ok()) {
          hs->image_ids[image] = Trim(o.out);
        } else if (spec_.image_pull == ImagePull::kPush) {
          to_push[image].push_back(hs);
        } else if (spec_.image_pull == ImagePull::kNever) {
          errors[hs->index].push_back("image " + image + " is not present (image_pull: never): " +
                                      o.Reason());
        } else {
          Say(hs->name + ": pulling " + image);
          check(hs, hs->docker->Pull(image), [&, hs, image](const Outcome& pulled) {
            if (!pulled.ok()) {
              errors[hs->index].push_back("image " + image + " is missing and cannot be pulled: " +
                                          pulled.Reason());
              return;
            }
            check(hs, hs->docker->ImageId(image), [&, hs, image](const Outcome& again) {
              if (again.ok()) {
                hs->image_ids[image] = Trim(again.out);
              } else {
                errors[hs->index].push_back("image " + image + ": " + again.Reason());
              }
            });
          });
        }
      });
    }
    if (gpu_spec) {
      check(hs, hs->docker->GpuProbe(*gpu_spec), [&, hs](const Outcome& o) {
        if (!o.ok()) {
          errors[hs->index].push_back("GPUs requested but unavailable: " + o.Reason());
          return;
        }
        int count = 0;
        std::istringstream lines(o.out);
        std::string line;
        while (std::getline(lines, line)) count += line.rfind("GPU ", 0) == 0;
        input_.detected_gpus[hs->index] = count;
      });
    }
    // barge's command lines are POSIX sh: the login shell that sshd runs
    // them with must be one.
    check(hs, "echo barge-posix-$((6*7))", [&, hs](const Outcome& o) {
      if (!o.exit.known() || Trim(o.out) == "barge-posix-42") return;
      std::string said = Trim(o.err.empty() ? o.out : o.err);
      errors[hs->index].push_back(
          kNotPosix + std::string(" (it answered ") +
          (said.empty() ? "nothing" : "'" + said.substr(0, 120) + "'") +
          " to `echo barge-posix-$((6*7))`); barge's commands need sh syntax: make the user's "
          "shell /bin/sh or /bin/bash (chsh -s /bin/bash USER)");
    });
    // Room for the job's directory and the engine's containers.
    check(hs, "df -Pk /tmp \"$(" + hs->docker->Line({"info", "--format", "{{.DockerRootDir}}"}) +
                  " 2>/dev/null || echo /)\" 2>/dev/null",
          [&, hs](const Outcome& o) {
            if (!o.exit.known()) return;
            for (const std::string& problem : LowDiskSpace(o.out)) errors[hs->index].push_back(problem);
          });
    // The watchdog is armed before anything starts.
    // Armed or not, disarming removes whatever part of it was made (a full
    // disk can leave the directory without the watchdog).
    hs->watchdog_armed = true;
    check(hs, ArmWatchdogCommand(WatchdogFor(*hs)), [&, hs](const Outcome& o) {
      if (!o.ok()) {
        errors[hs->index].push_back("cannot arm the watchdog: " + o.Reason());
      }
    });
  }
  // The rendezvous port must be free on the head's host when the head
  // shares the host's network (otherwise it lives in the container's own).
  const cluster::NodePlan& head = plan_.nodes[0];
  HostState* head_host = hosts_[head.host_index].get();
  if (head.container.options.network && *head.container.options.network == "host" &&
      std::find(targets.begin(), targets.end(), head_host) != targets.end()) {
    const int port = spec_.rendezvous.port;
    check(head_host, "cat /proc/net/tcp /proc/net/tcp6", [&, head_host, port](const Outcome& o) {
      if (container::ParseListeningPorts(o.out).count(port)) {
        errors[head_host->index].push_back("rendezvous port " + std::to_string(port) +
                                           " is already in use on the head's host (rendezvous.port)");
      }
    });
  }
  bool done = RunUntil([&] { return pending == 0 || interrupts_ > 0; },
                       Clock::now() + spec_.ssh.connect_timeout + seconds(120));
  progress_->End();
  if (interrupts_ > 0) return Status::Error("interrupted during preflight");
  RenewLeases();
  if (!done) return Status::Error("preflight did not finish in time");
  for (const auto& [h, why] : connect_errors_) {
    errors[h].insert(errors[h].begin(), why);
  }
  // On a host whose login shell is not POSIX every other check failed
  // because of it: report only the cause.
  for (auto& [h, list] : errors) {
    auto shell = std::find_if(list.begin(), list.end(), [](const std::string& e) {
      return e.rfind(kNotPosix, 0) == 0;
    });
    if (shell != list.end()) list = {*shell};
  }
  for (const auto& [image, push_targets] : to_push) {
    if (!errors.empty()) break;  // don't push to a job that cannot start
    Push(image, push_targets, &errors);
  }
  // One stale tag on one node is a classic silent failure: every host must
  // run the same image ID for the same reference.
  std::map<std::string, std::map<std::string, std::vector<std::string>>> ids;  // image → id → hosts
  for (auto& [h, host] : hosts_) {
    for (const auto& [image, id] : host->image_ids) ids[image][id].push_back(host->name);
  }
  for (const auto& [image, by_id] : ids) {
    if (by_id.size() > 1) {
      std::string msg = "image " + image + " differs between hosts:";
      for (const auto& [id, names] : by_id) {
        msg += " " + id.substr(0, 19) + " on";
        for (const auto& n : names) msg += " " + n;
        msg += ";";
      }
      msg.pop_back();
      errors[hosts_.begin()->first].push_back(msg);
    } else if (!by_id.empty()) {
      Say("image " + image + " is " + by_id.begin()->first.substr(0, 19) + " on " +
          std::to_string(by_id.begin()->second.size()) + " host(s)");
    }
  }
  if (errors.empty()) return Status::Ok();
  // One table: every problem of every host, the host named on each row.
  size_t width = 4;
  for (const auto& [h, list] : errors) width = std::max(width, hosts_[h]->name.size());
  std::string msg = "preflight failed on " + std::to_string(errors.size()) + " of " +
                    std::to_string(hosts_.size()) + " host(s); nothing was started:\n  " +
                    std::string("HOST") + std::string(width - 4 + 2, ' ') + "PROBLEM";
  for (const auto& [h, list] : errors) {
    for (const auto& e : list) {
      msg += "\n  " + hosts_[h]->name + std::string(width - hosts_[h]->name.size() + 2, ' ') + e;
    }
  }
  return Status::Error(msg);
}

bool Controller::ReadyLineMatches(std::string_view text) const {
  // std::regex recurses per character matched: a long line with a pattern
  // like ".*ready" would overflow the stack. Readiness lines are short; only
  // their first kReadyScan bytes are searched.
  constexpr size_t kReadyScan = 4096;
  std::string_view head = text.substr(0, kReadyScan);
  return std::regex_search(head.begin(), head.end(), *ready_regex_);
}

void Controller::StreamLogs(NodeState& node) {
  const int rank = node.plan->rank;
  NodeState* self = &node;
  LogSink* sink = sink_.get();  // this attempt's (kept alive after it)
  auto on_line = [this, rank, self, sink](Stream stream) {
    return [this, rank, self, sink, stream](std::string_view line, bool continuation) {
      if (continuation) {
        sink->Line(rank, stream, "", line);
        return;
      }
      Result<container::TimestampedLine> parsed = container::ParseTimestampedLine(line);
      if (parsed.ok() && self->skip_through_ns && parsed->ns <= *self->skip_through_ns) return;
      std::string_view text = parsed.ok() ? parsed->text : line;
      sink->Line(rank, stream, parsed.ok() ? parsed->timestamp : "", text);
      if (self->retired) return;
      if (rank == 0 && ready_regex_ && !head_logged_ready_ &&
          ReadyLineMatches(text)) {
        head_logged_ready_ = true;
      }
    };
  };
  node.out_lines = std::make_unique<container::LineSplitter>(on_line(Stream::kStdout));
  node.err_lines = std::make_unique<container::LineSplitter>(on_line(Stream::kStderr));
  node.logs_open = true;
  ssh::CommandCallbacks cb;
  NodeState* n = &node;
  cb.on_stdout = [n](std::string_view d) { n->out_lines->Feed(d); };
  cb.on_stderr = [n](std::string_view d) { n->err_lines->Feed(d); };
  cb.on_exit = [this, n](const ssh::ExitStatus& st) {
    n->out_lines->Flush();
    n->err_lines->Flush();
    n->logs_open = false;
    if (!st.known() && !n->retired && !n->host->lost) {
      Say(n->host->name + ": log stream of node " + std::to_string(n->plan->rank) + " lost: " + st.error);
    }
  };
  const std::string line =
      node.skip_through_ns
          ? node.host->docker->LogsSince(node.plan->container.name,
                                         container::FormatTimestamp(*node.skip_through_ns))
          : node.host->docker->Logs(node.plan->container.name);
  Result<std::unique_ptr<ssh::Command>> cmd = node.host->exec->Start(line, std::move(cb));
  if (!cmd.ok()) {
    node.logs_open = false;
    Say(node.host->name + ": cannot stream logs: " + cmd.status().message());
    return;
  }
  (*cmd)->CloseStdin();
  node.host->commands.push_back(std::move(cmd).value());
}

// How a container ended, from `docker inspect`: "OOMKilled (exit code
// 137)", "killed by SIGKILL (exit code 137)", "exit code 3".
std::string EndReason(const container::ContainerState& st) {
  std::string code = "exit code " + std::to_string(st.exit_code);
  std::string reason;
  if (st.oom_killed) {
    reason = "OOMKilled (" + code + ")";
  } else if (st.exit_code > 128 && st.exit_code < 128 + 65) {
    const int sig = st.exit_code - 128;
    const char* name = sig == 9 ? "SIGKILL" : sig == 15 ? "SIGTERM" : sig == 6 ? "SIGABRT"
                     : sig == 11 ? "SIGSEGV" : sig == 2 ? "SIGINT" : nullptr;
    reason = std::string("killed by ") + (name ? name : "signal " + std::to_string(sig)) + " (" + code + ")";
  } else {
    reason = code;
  }
  if (!st.error.empty()) reason += ": " + st.error;
  return reason;
}

void Controller::WatchExit(NodeState& node) {
  NodeState* n = &node;
  // `docker wait` returns as soon as the container exits; inspect then says
  // how (OOM kill, signal, code).
  const std::string& name = node.plan->container.name;
  const std::string line = node.host->docker->Wait(name) + " >/dev/null; " +
                           node.host->docker->Line(container::InspectArgs({name}));
  Exec(*node.host, line, [this, n](const Outcome& o) {
    if (n->retired) return;
    if (!o.exit.known() || n->host->lost) {
      // The host's session died under it: the host is lost (OnHostLost),
      // how the node ended is unknown.
      n->phase = NodePhase::kLost;
      return;
    }
    n->phase = NodePhase::kExited;
    Result<std::vector<container::ContainerState>> st = container::ParseContainerInspect(o.out);
    if (o.ok() && st.ok() && st->size() == 1) {
      n->exit_code = (*st)[0].exit_code;
      n->end_reason = EndReason((*st)[0]);
    } else {
      n->exit_code.reset();
      n->end_reason = "unknown: " + (o.ok() ? st.status().message() : o.Reason());
      Say(n->host->name + ": cannot learn how node " + std::to_string(n->plan->rank) +
          " ended: " + n->end_reason);
    }
    const std::string rank = std::to_string(n->plan->rank);
    RecordNode(*n);
    Record(store_->AddEvent(plan_.job_id, event::kNodeExited, n->host->name,
                            redact_("rank " + rank + " (" + n->plan->role + ") ended: " + n->end_reason)));
    const bool failed = !n->exit_code || *n->exit_code != 0;
    if (n->plan->rank == 0) {
      Say("head ended: " + n->end_reason);
      // A head that fails is a node failure the restart policy may cover;
      // otherwise its code is the job's.
      if (failed && !tearing_down_ && !fault_ && spec_.restart &&
          restart_count_ < spec_.restart->max_restarts && spec_.restart->on_node_failed) {
        NoteFault({Cause::kNodeFailed, n->host->name, "node 0 (head) on " + n->host->name +
                   " ended: " + n->end_reason, n->exit_code.value_or(kExitBargeFailure), 0});
      }
      return;
    }
    if (tearing_down_) return;
    if (failed && spec_.on_worker_exit == OnWorkerExit::kFail) {
      NoteFault({Cause::kNodeFailed, n->host->name,
                 "node " + rank + " (" + n->plan->role + ") on " + n->host->name + " ended: " + n->end_reason,
                 n->exit_code.value_or(kExitBargeFailure), n->plan->rank});
    } else {
      Say("node " + rank + " (" + n->plan->role + ") on " + n->host->name + " ended: " + n->end_reason);
    }
  });
}

Status Controller::StartNodes(const std::vector<NodeState*>& nodes) {
  std::vector<std::string> errors;
  int pending = 0;
  const bool head = nodes.size() == 1 && nodes[0]->plan->rank == 0;
  progress_->Begin(head ? "starting the head" : "starting workers", static_cast<int>(nodes.size()));
  for (NodeState* n : nodes) {
    n->phase = NodePhase::kStarting;
    n->run_attempted = true;
    ++pending;
    Exec(*n->host, n->host->docker->Run(n->plan->container), [&, n](const Outcome& o) {
      --pending;
      const std::string node = std::to_string(n->plan->rank) + " on " + n->host->name;
      if (!o.ok()) {
        errors.push_back("node " + std::to_string(n->plan->rank) + " (" + n->plan->role + ") on " +
                         n->host->name + " did not start: " + o.Reason());
        n->phase = NodePhase::kExited;
        progress_->Done(node, false, o.Reason());
        return;
      }
      progress_->Done(node, true);
      n->phase = NodePhase::kRunning;
      n->container_id = Trim(o.out);
      RecordNode(*n);
      StreamLogs(*n);
      WatchExit(*n);
    });
  }
  bool done = RunUntil([&] { return pending == 0; }, Clock::now() + seconds(300));
  progress_->End();
  if (!done) errors.push_back("starting containers did not finish in time");
  if (errors.empty()) return Status::Ok();
  std::string msg;
  for (const auto& e : errors) msg += (msg.empty() ? "" : "\n  ") + e;
  return Status::Error(msg);
}

std::map<HostState*, Outcome> Controller::StreamFile(
    const std::string& file, const std::vector<HostState*>& targets,
    const std::function<std::string(HostState&)>& command, const std::string& phase) {
  struct Target {
    HostState* host = nullptr;
    ssh::Command* cmd = nullptr;
    FILE* in = nullptr;
    bool sent_all = false;
    std::optional<Outcome> result;
  };
  std::vector<Target> streams(targets.size());
  progress_->Begin(phase, static_cast<int>(targets.size()));
  for (size_t i = 0; i < targets.size(); ++i) {
    Target& t = streams[i];
    t.host = targets[i];
    t.in = std::fopen(file.c_str(), "rb");
    Target* tp = &t;
    t.cmd = Exec(*t.host, command(*t.host),
                 [this, tp](const Outcome& o) {
                   tp->result = o;
                   progress_->Done(tp->host->name, o.ok(), o.ok() ? "" : o.Reason());
                 },
                 /*keep_stdin=*/true);
    if (!t.in && t.cmd) t.cmd->CloseStdin();
  }
  // Each host takes the stream at its own pace; at most kWindow bytes wait
  // in memory per host.
  constexpr size_t kWindow = 8 << 20;
  std::vector<char> buf(1 << 20);
  auto pump = [&] {
    for (Target& t : streams) {
      if (t.result || t.sent_all || !t.cmd || !t.in) continue;
      while (t.cmd->stdin_pending() < kWindow) {
        size_t n = std::fread(buf.data(), 1, buf.size(), t.in);
        if (n > 0) t.cmd->WriteStdin(std::string_view(buf.data(), n));
        if (n < buf.size()) {
          t.sent_all = true;
          t.cmd->CloseStdin();
          break;
        }
      }
    }
  };
  auto deadline = Clock::now() + seconds(3600);
  while (Clock::now() < deadline && interrupts_ == 0 &&
         !std::all_of(streams.begin(), streams.end(),
                      [](const Target& t) { return t.result.has_value(); })) {
    pump();
    loop_.Poll(milliseconds(5));
    ReapCommands();
  }
  progress_->End();
  std::map<HostState*, Outcome> out;
  for (Target& t : streams) {
    if (t.in) std::fclose(t.in);
    if (t.result) out[t.host] = *t.result;
  }
  return out;
}

Status Controller::ShipSecrets(const std::vector<HostState*>& targets) {
  if (spec_.secrets.empty() || targets.empty()) return Status::Ok();
  std::vector<std::pair<std::string, const std::string*>> files;  // path on the host, content
  std::string env_file;  // NAME=VALUE lines, as docker run --env-file reads them
  std::string names;
  for (const SecretSpec& secret : spec_.secrets) {
    files.push_back({SecretsDir(plan_.job_id) + "/" + secret.name, &secret.value});
    if (secret.as_env) env_file += secret.name + "=" + EnvValueOf(secret) + "\n";
    names += (names.empty() ? "" : ", ") + secret.name;
  }
  if (!env_file.empty()) files.push_back({SecretEnvFile(plan_.job_id), &env_file});
  // Shared with the callbacks, which may outlive this call on a timeout.
  struct Shipping {
    int pending = 0;
    bool ended = false;
    std::map<HostState*, int> open;
    std::map<HostState*, std::string> errors;
  };
  auto st = std::make_shared<Shipping>();
  progress_->Begin("writing secrets", static_cast<int>(targets.size()));
  for (HostState* hs : targets) {
    for (const auto& [path, content] : files) {
      ++st->pending;
      ++st->open[hs];
      ssh::Command* cmd = Exec(*hs, WriteSecretCommand(path), [this, st, hs](const Outcome& o) {
        --st->pending;
        if (!o.ok() && !st->errors.count(hs)) st->errors[hs] = o.Reason();
        if (--st->open[hs] > 0 || st->ended) return;
        auto failed = st->errors.find(hs);
        progress_->Done(hs->name, failed == st->errors.end(),
                        failed == st->errors.end() ? "" : failed->second);
      }, /*keep_stdin=*/true);
      if (cmd != nullptr) {
        cmd->WriteStdin(*content);
        cmd->CloseStdin();
      }
    }
  }
  const bool done = RunUntil([&] { return st->pending == 0 || interrupts_ > 0; },
                             Clock::now() + spec_.ssh.connect_timeout + seconds(60));
  st->ended = true;
  progress_->End();
  if (interrupts_ > 0) return Status::Error("interrupted while writing secrets");
  if (!done) return Status::Error("writing secrets to the hosts did not finish in time");
  if (!st->errors.empty()) {
    std::string msg = "writing secrets failed:";
    for (const auto& [hs, why] : st->errors) msg += "\n  " + hs->name + ": " + why;
    return Status::Error(msg);
  }
  Say("secrets " + names + " written to " + std::to_string(targets.size()) + " host(s) (" +
      SecretsDir(plan_.job_id) + ", mode 0600)");
  return Status::Ok();
}

Status Controller::Login(const std::vector<HostState*>& targets) {
  if (!spec_.registry) return Status::Ok();
  const RegistrySpec& registry = *spec_.registry;
  const std::string config = DockerConfigDir(plan_.job_id);
  const auto limit = seconds(120);
  struct Logins {
    int pending = 0;
    bool ended = false;
    std::vector<std::string> errors;
  };
  auto st = std::make_shared<Logins>();
  std::vector<HostState*> connected;
  for (HostState* hs : targets) {
    if (hs->exec) connected.push_back(hs);  // the others are reported by preflight
  }
  if (connected.empty()) return Status::Ok();
  progress_->Begin("logging in to " + registry.server, static_cast<int>(connected.size()));
  for (HostState* hs : connected) {
    // From now on every docker command of the job on this host uses the
    // job's own client config.
    hs->docker = std::make_unique<DockerCommands>(
        DockerCommandOf(spec_, plan_.hosts[hs->index], plan_.job_id));
    hs->login_tried = true;
    ++st->pending;
    ssh::Command* cmd = Exec(
        *hs, Bounded(hs->docker->Login(config, registry.server, registry.username), limit),
        [this, st, hs, limit](const Outcome& o) {
          --st->pending;
          if (st->ended) return;
          std::string why;
          if (!o.ok()) {
            why = o.exit.known() && o.exit.code == 137 && o.err.empty()
                      ? "docker login did not finish within " + std::to_string(limit.count()) + " s"
                      : o.Reason();
            st->errors.push_back(hs->name + ": " + why);
          }
          progress_->Done(hs->name, o.ok(), why);
        },
        /*keep_stdin=*/true);
    if (cmd != nullptr) {
      cmd->WriteStdin(registry.password);
      cmd->CloseStdin();
    }
  }
  const bool done = RunUntil([&] { return st->pending == 0 || interrupts_ > 0; },
                             Clock::now() + limit + seconds(10));
  st->ended = true;
  progress_->End();
  if (interrupts_ > 0) return Status::Error("interrupted while logging in to " + registry.server);
  if (!done) st->errors.push_back("docker login did not finish in time");
  if (st->errors.empty()) {
    Say("logged in to " + registry.server + " as " + registry.username + " on " +
        std::to_string(connected.size()) + " host(s)");
    return Status::Ok();
  }
  std::string msg = "registry login to " + registry.server + " as " + registry.username +
                    " failed; nothing was started:";
  for (const std::string& e : st->errors) msg += "\n  " + e;
  return Status::Error(msg);
}

void Controller::Logout() {
  if (!spec_.registry) return;
  auto pending = std::make_shared<int>(0);
  for (auto& [h, host] : hosts_) {
    if (!host->login_tried || host->lost || !host->exec) continue;
    HostState* hs = host.get();
    ++*pending;
    Exec(*hs,
         Bounded(hs->docker->Logout(DockerConfigDir(plan_.job_id), spec_.registry->server), seconds(30)),
         [this, pending, hs](const Outcome& o) {
           --*pending;
           hs->login_tried = false;
           if (!o.ok()) Say(hs->name + ": docker logout failed: " + o.Reason());
         });
  }
  if (!RunUntil([&] { return *pending == 0; }, Clock::now() + seconds(40))) {
    Say("docker logout did not finish on every host; the job's directory, credential included, "
        "is removed with the watchdog");
  }
}

Status Controller::Upload(const std::vector<HostState*>& targets) {
  if (Status s = ShipSecrets(targets); !s.ok()) return s;
  if (!spec_.workdir && spec_.files.empty()) return Status::Ok();
  const std::string dir = HostJobDir(plan_.job_id);
  const std::string tmp = options_.state_dir + "/tmp";
  if (Status s = MakeDirs(tmp); !s.ok()) return s;
  auto check = [&](const std::map<HostState*, Outcome>& results, const std::string& what) {
    for (HostState* t : targets) {
      auto it = results.find(t);
      if (it == results.end() || !it->second.ok()) {
        return Status::Error(t->name + ": shipping " + what + " failed: " +
                             (it == results.end() ? "interrupted or timed out" : it->second.Reason()));
      }
    }
    return Status::Ok();
  };
  if (spec_.workdir) {
    // tar the directory once, locally, then stream it to every host.
    const std::string file = tmp + "/workdir-" + plan_.job_id + ".tar";
    std::vector<std::string> argv = {"tar", "-C", spec_.workdir->path};
    for (const auto& pattern : spec_.workdir->exclude) argv.push_back("--exclude=" + pattern);
    argv.insert(argv.end(), {"-cf", file, "."});
    std::optional<Outcome> made;
    if (!local_.exec) {
      local_.name = "local";
      local_.exec = std::make_unique<ssh::LocalExecutor>(&loop_);
    }
    Exec(local_, ssh::ShellJoin(argv), [&](const Outcome& o) { made = o; });
    RunUntil([&] { return made.has_value(); }, Clock::now() + seconds(600));
    if (!made || !made->ok()) {
      std::remove(file.c_str());
      return Status::Error("cannot pack workdir " + spec_.workdir->path + ": " +
                           (made ? made->Reason() : "timed out"));
    }
    Say("shipping workdir " + spec_.workdir->path + " to " + std::to_string(targets.size()) + " host(s)");
    auto results = StreamFile(file, targets, [&](HostState&) {
      return "mkdir -p " + ssh::ShellQuote(dir + "/workdir") + " && tar -x --no-same-owner -C " +
             ssh::ShellQuote(dir + "/workdir");
    }, "shipping the workdir");
    std::remove(file.c_str());
    if (Status s = check(results, "the workdir"); !s.ok()) return s;
  }
  for (size_t i = 0; i < spec_.files.size(); ++i) {
    const std::string remote = dir + "/files/" + std::to_string(i);
    auto results = StreamFile(spec_.files[i].from, targets, [&](HostState&) {
      return "mkdir -p " + ssh::ShellQuote(dir + "/files") + " && cat > " + ssh::ShellQuote(remote);
    }, "shipping " + spec_.files[i].from);
    if (Status s = check(results, spec_.files[i].from); !s.ok()) return s;
  }
  return Status::Ok();
}

void Controller::Push(const std::string& image, const std::vector<HostState*>& targets,
                      std::map<size_t, std::vector<std::string>>* errors) {
  // Save once to a file, then stream it to each host at the pace its channel
  // takes it, so memory stays bounded however big the image is.
  const std::string dir = options_.state_dir + "/tmp";
  if (Status s = MakeDirs(dir); !s.ok()) {
    for (HostState* t : targets) (*errors)[t->index].push_back(s.message());
    return;
  }
  const std::string file = dir + "/push-" + plan_.job_id + ".tar";
  Say("pushing " + image + " to " + std::to_string(targets.size()) + " host(s) (docker save | docker load)");
  Record(store_->SetStatus(plan_.job_id, JobStatus::kPushing, std::nullopt,
                           image + " to " + std::to_string(targets.size()) + " host(s)"));
  const auto started = Clock::now();
  HostState local;
  local.name = "local";
  local.exec = std::make_unique<ssh::LocalExecutor>(&loop_);
  DockerCommands local_docker({"docker"});
  std::optional<Outcome> saved;
  Exec(local, local_docker.Line({"save", "-o", file, image}), [&](const Outcome& o) { saved = o; });
  RunUntil([&] {
    ReapCommandsOf(local);
    return saved.has_value() || interrupts_ > 0;
  }, Clock::now() + seconds(1800));
  if (!saved || !saved->ok()) {
    std::string why = saved ? saved->Reason() : "interrupted or timed out";
    for (HostState* t : targets) {
      (*errors)[t->index].push_back("cannot push " + image + ": local docker save failed: " + why);
    }
    std::remove(file.c_str());
    return;
  }

  std::map<HostState*, Outcome> results =
      StreamFile(file, targets, [](HostState& h) { return h.docker->Load(); }, "pushing " + image);
  for (HostState* t : targets) {
    auto it = results.find(t);
    if (it == results.end() || !it->second.ok()) {
      (*errors)[t->index].push_back("pushing " + image + " failed: " +
                                    (it == results.end() ? "interrupted or timed out" : it->second.Reason()));
    }
  }
  std::remove(file.c_str());
  // What the hosts now hold.
  int pending = 0;
  for (HostState* hs : targets) {
    auto it = results.find(hs);
    if (it == results.end() || !it->second.ok()) continue;
    ++pending;
    Exec(*hs, hs->docker->ImageId(image), [&, hs](const Outcome& o) {
      --pending;
      if (o.ok()) {
        hs->image_ids[image] = Trim(o.out);
      } else {
        (*errors)[hs->index].push_back("image " + image + " still missing after push: " + o.Reason());
      }
    });
  }
  RunUntil([&] { return pending == 0; }, Clock::now() + seconds(120));
  double secs = std::chrono::duration<double>(Clock::now() - started).count();
  char took[32];
  std::snprintf(took, sizeof took, "%.1f", secs);
  Say("pushed " + image + " in " + took + " s");
}

Status Controller::WaitReady(NodeState& head) {
  using Kind = cluster::ReadinessProbe::Kind;
  const cluster::ReadinessProbe& probe = plan_.head_ready;
  if (probe.kind == Kind::kRunning) return Status::Ok();
  std::string what = probe.kind == Kind::kTcpPort ? "port " + std::to_string(probe.tcp_port) + " open"
                     : probe.kind == Kind::kLog   ? "a log line matching /" + probe.log_regex + "/"
                                                  : "`" + probe.command + "` succeeding";
  Say("waiting for the head to be ready (" + what + ")");

  // Shared with in-flight probe commands and timers, which may outlive this
  // call; `stop` silences them.
  struct ProbeState {
    bool ready = false;
    bool stop = false;
  };
  auto state = std::make_shared<ProbeState>();
  std::function<void()> probe_once;
  auto schedule = [this, state, &probe_once] {
    if (state->stop) return;
    loop_.AddTimer(Clock::now() + milliseconds(250), [state, &probe_once] {
      if (!state->stop) probe_once();
    });
  };
  probe_once = [&, state] {
    if (state->stop || head.phase != NodePhase::kRunning) return;
    std::string line = probe.kind == Kind::kTcpPort
                           ? head.host->docker->ListeningPorts(head.plan->container.name)
                           : head.host->docker->ExecShell(head.plan->container.name, probe.command);
    Exec(*head.host, line, [&, state](const Outcome& o) {
      if (state->stop) return;
      if (probe.kind == Kind::kTcpPort) {
        if (container::ParseListeningPorts(o.out).count(probe.tcp_port)) state->ready = true;
      } else if (o.ok()) {
        state->ready = true;
      }
      if (!state->ready) schedule();
    });
  };
  if (probe.kind != Kind::kLog) probe_once();
  bool finished = RunUntil(
      [&] {
        return state->ready || head_logged_ready_ || head.phase != NodePhase::kRunning ||
               interrupts_ > 0 || fault_.has_value();
      },
      Clock::now() + probe.timeout);
  state->stop = true;
  if (interrupts_ > 0) return Status::Error("interrupted while waiting for the head");
  if (state->ready || head_logged_ready_) {
    Say("head is ready");
    Record(store_->AddEvent(plan_.job_id, event::kHeadReady, head.host->name, what));
    return Status::Ok();
  }
  // It finished (the job completes), or a fault ends the attempt.
  if (head.phase != NodePhase::kRunning || fault_) return Status::Ok();
  (void)finished;
  std::string msg = "the head was not ready after " +
                    std::to_string(std::chrono::duration_cast<milliseconds>(probe.timeout).count() / 1000.0).substr(0, 5) +
                    " s (waiting for " + what + ")";
  std::vector<std::string> tail = sink_->Tail(0, 10);
  msg += tail.empty() ? "; it printed nothing" : "; its last lines:";
  for (const auto& l : tail) msg += "\n  | " + l;
  return Status::Error(msg);
}

void Controller::RunTeardownHooks() {
  if (!spec_.teardown.host_command && !spec_.teardown.local_command) return;
  std::unique_ptr<ssh::LocalExecutor> local;
  if (spec_.teardown.local_command) local = std::make_unique<ssh::LocalExecutor>(&loop_);
  HostState local_host;
  local_host.name = "local";
  int pending = 0;
  auto run = [&](HostState& where, const std::string& kind, const std::string& hook,
                 const cluster::Host& host, const std::string& for_host) {
    Result<std::string> line = SubstituteHook(hook, host, plan_.job_id);
    if (!line.ok()) {
      Say("teardown " + kind + " for " + for_host + " not run: " + line.status().message());
      return;
    }
    ++pending;
    Exec(where, *line, [&, kind, for_host](const Outcome& o) {
      --pending;
      if (o.ok()) {
        Say("teardown " + kind + " for " + for_host + ": ok");
      } else {
        Say("teardown " + kind + " for " + for_host + " failed: " + o.Reason());
      }
    });
  };
  if (local) local_host.exec = std::move(local);
  // Every host the job used: the current ones and those spares replaced (a
  // lost VM is still worth its terminate call).
  std::vector<HostState*> used = AllHosts();
  for (auto& old : retired_) {
    if (old->superseded) used.push_back(old.get());
  }
  for (HostState* host : used) {
    const cluster::Host& inventory = host->inventory;
    if (spec_.teardown.host_command && host->lost) {
      Say("teardown host_command for " + host->name + " not run: the host is lost (its watchdog runs it)");
    } else if (spec_.teardown.host_command) {
      run(*host, "host_command", *spec_.teardown.host_command, inventory, host->name);
    }
    if (spec_.teardown.local_command) {
      run(local_host, "local_command", *spec_.teardown.local_command, inventory, host->name);
    }
  }
  if (!RunUntil(
          [&] {
            ReapCommandsOf(local_host);
            return pending == 0;
          },
          Clock::now() + seconds(300))) {
    Say("teardown hooks did not finish within 300 s");
  }
}

std::vector<NodeState*> Controller::ArtifactNodes(const ArtifactSpec& a) {
  std::vector<NodeState*> out;
  for (auto& n : nodes_) {
    if (a.all_nodes || n->plan->rank == a.rank.value_or(0)) out.push_back(n.get());
  }
  return out;
}

void Controller::CopyArtifact(NodeState& n, const ArtifactSpec& a, std::function<void()> done) {
  const std::string dest = options_.state_dir + "/runs/" + plan_.job_id + "/artifacts/" +
                           std::to_string(n.plan->rank);
  if (Status s = MakeDirs(dest); !s.ok()) {
    Say(s.message());
    done();
    return;
  }
  if (!local_.exec) {
    local_.name = "local";
    local_.exec = std::make_unique<ssh::LocalExecutor>(&loop_);
  }
  // The local tar reads the stream on its stdin as it arrives.
  auto finished = std::make_shared<int>(0);
  auto done_shared = std::make_shared<std::function<void()>>(std::move(done));
  ssh::Command* untar = Exec(local_, ssh::ShellJoin({"tar", "-x", "--no-same-owner", "-C", dest}),
                             [this, finished, done_shared, rank = n.plan->rank](const Outcome& o) {
                               if (!o.ok()) Say("artifacts of node " + std::to_string(rank) + ": tar: " + o.Reason());
                               if (++*finished == 2) (*done_shared)();
                             },
                             /*keep_stdin=*/true);
  ssh::CommandCallbacks cb;
  cb.on_stdout = [untar](std::string_view d) {
    if (untar) untar->WriteStdin(d);
  };
  auto err = std::make_shared<std::string>();
  cb.on_stderr = [err](std::string_view d) { err->append(d); };
  cb.on_exit = [this, untar, err, finished, done_shared, rank = n.plan->rank,
                path = a.path](const ssh::ExitStatus& st) {
    if (untar) untar->CloseStdin();
    if (!st.known() || st.code != 0) {
      std::string why = st.known() ? *err : st.error;
      while (!why.empty() && why.back() == '\n') why.pop_back();
      spdlog::debug("Artifacts: copy failed. [rank: {}, path: {}, reason: {}]", rank, path, redact_(why));
    }
    if (++*finished == 2) (*done_shared)();
  };
  const std::string line = n.host->docker->Line({"cp", n.plan->container.name + ":" + a.path, "-"});
  Result<std::unique_ptr<ssh::Command>> cmd = n.host->exec->Start(line, std::move(cb));
  if (!cmd.ok()) {
    if (untar) untar->CloseStdin();
    if (++*finished == 2) (*done_shared)();
    return;
  }
  (*cmd)->CloseStdin();
  n.host->commands.push_back(std::move(cmd).value());
}

void Controller::ScheduleArtifacts() {
  for (size_t i = 0; i < spec_.artifacts.size(); ++i) {
    const ArtifactSpec& a = spec_.artifacts[i];
    if (!a.every) continue;
    auto tick = std::make_shared<std::function<void()>>();
    *tick = [this, i, tick_weak = std::weak_ptr<std::function<void()>>(tick)] {
      if (tearing_down_) return;
      const ArtifactSpec& art = spec_.artifacts[i];
      for (NodeState* n : ArtifactNodes(art)) {
        if (n->phase != NodePhase::kRunning || copying_.count({n->plan->rank, i})) continue;
        copying_.insert({n->plan->rank, i});
        CopyArtifact(*n, art, [this, i, rank = n->plan->rank] { copying_.erase({rank, i}); });
      }
      if (auto t = tick_weak.lock()) loop_.AddTimer(Clock::now() + *art.every, [t] { (*t)(); });
    };
    artifact_ticks_.push_back(tick);
    loop_.AddTimer(Clock::now() + *a.every, [tick] { (*tick)(); });
  }
}

void Controller::FinalArtifacts() {
  if (spec_.artifacts.empty()) return;
  int pending = 0;
  for (const ArtifactSpec& a : spec_.artifacts) {
    for (NodeState* n : ArtifactNodes(a)) {
      if (!n->run_attempted || n->container_id.empty() || n->host->lost) continue;
      ++pending;
      CopyArtifact(*n, a, [&pending] { --pending; });
    }
  }
  if (!RunUntil([&] {
        ReapCommandsOf(local_);
        return pending == 0;
      }, Clock::now() + seconds(600))) {
    Say("copying artifacts did not finish within 600 s");
  } else if (pending == 0) {
    Say("artifacts copied to " + options_.state_dir + "/runs/" + plan_.job_id + "/artifacts");
  }
}

WatchdogParams Controller::WatchdogFor(const HostState& host) const {
  WatchdogParams p;
  p.job_id = plan_.job_id;
  p.docker = DockerCommandOf(spec_, plan_.hosts[host.index], plan_.job_id);
  if (plan_.nodes[0].host_index == host.index) p.head_container = plan_.nodes[0].container.name;
  p.lease = std::chrono::duration_cast<seconds>(spec_.lease);
  p.grace = std::max<seconds>(RenewEvery() * 3, seconds(5));
  if (spec_.timeout) {
    auto wall_deadline = std::chrono::system_clock::now() + *spec_.timeout + p.grace;
    p.deadline = std::chrono::duration_cast<seconds>(wall_deadline.time_since_epoch()).count();
  }
  if (spec_.teardown.host_command) {
    Result<std::string> hook =
        SubstituteHook(*spec_.teardown.host_command, plan_.hosts[host.index], plan_.job_id);
    if (hook.ok()) p.host_hook = *hook;
  }
  return p;
}

void Controller::RenewLeases() {
  if (renewing_) return;
  renewing_ = true;
  renew_tick_ = [this] {
    if (!renewing_) return;
    for (auto& [h, host] : hosts_) {
      if (host->watchdog_armed && !host->lost) {
        Exec(*host, RenewLeaseCommand(plan_.job_id), [](const Outcome&) {});
      }
    }
    loop_.AddTimer(Clock::now() + RenewEvery(), [this] { renew_tick_(); });
  };
  loop_.AddTimer(Clock::now() + RenewEvery(), [this] { renew_tick_(); });
}

void Controller::DisarmWatchdogs() {
  renewing_ = false;
  int pending = 0;
  for (auto& [h, host] : hosts_) {
    if (!host->watchdog_armed || host->lost) continue;
    ++pending;
    HostState* hs = host.get();
    Exec(*host, DisarmWatchdogCommand(plan_.job_id), [&, hs](const Outcome& o) {
      --pending;
      hs->watchdog_armed = false;
      if (!o.ok()) Say(hs->name + ": disarming the watchdog failed: " + o.Reason());
    });
  }
  if (!RunUntil([&] { return pending == 0; }, Clock::now() + seconds(30))) {
    Say("disarming the watchdogs did not finish; they end by themselves when the lease expires");
  }
}

void Controller::Teardown(bool graceful, bool final) {
  // Stop what still runs, let output drain, then remove every container of
  // the job that may exist, host by host in parallel. A lost host is left
  // alone: its watchdog removes what it holds once the lease lapses (or
  // `barge reap` does when it comes back).
  tearing_down_ = true;
  ++generation_;  // the monitors stop
  Record(store_->SetStatus(plan_.job_id, JobStatus::kCompleting));
  std::map<HostState*, std::vector<std::string>> running, attempted;
  for (auto& n : nodes_) {
    if (!n->run_attempted || n->host->lost) continue;
    attempted[n->host].push_back(n->plan->container.name);
    if (n->phase == NodePhase::kRunning) running[n->host].push_back(n->plan->container.name);
  }
  const int grace = static_cast<int>(
      std::chrono::duration_cast<seconds>(spec_.stop_grace).count());
  if (!running.empty()) {
    size_t count = 0;
    for (auto& [host, names] : running) count += names.size();
    Say(std::string(graceful ? "stopping " : "killing ") + std::to_string(count) + " container(s)");
    for (auto& [host, names] : running) {
      Exec(*host, graceful ? host->docker->Stop(names, grace) : host->docker->Kill(names),
           [](const Outcome&) {});
    }
  }
  auto drained = [&] {
    return std::all_of(nodes_.begin(), nodes_.end(), [](const auto& n) {
      return !n->run_attempted || n->host->lost ||
             (n->phase != NodePhase::kRunning && !n->logs_open);
    });
  };
  int interrupts_before = interrupts_;
  RunUntil([&] { return drained() || (graceful && interrupts_ > interrupts_before); },
           Clock::now() + spec_.stop_grace + seconds(15));
  // Last copy of the artifacts: the containers have stopped but exist.
  FinalArtifacts();
  int pending = 0;
  for (auto& [host, names] : attempted) {
    ++pending;
    HostState* hs = host;
    Exec(*host, host->docker->Remove(names), [&, hs](const Outcome& o) {
      --pending;
      if (!o.ok()) Say(hs->name + ": removing containers failed: " + o.Reason());
    });
  }
  if (!RunUntil([&] { return pending == 0; }, Clock::now() + seconds(60))) {
    Say("removing containers did not finish in time; run `docker ps -a --filter label=barge.job=" +
        plan_.job_id + "` on the hosts");
  }
  if (final) RunTeardownHooks();
  Record(store_->AddEvent(plan_.job_id, event::kTornDown, std::nullopt, final ? "" : "before a restart"));
}

const char* CauseName(int cause) {
  static const char* const kNames[] = {event::kHostLost, event::kNodeFailed, event::kPreempted};
  return kNames[cause];
}

void Controller::NoteFault(Fault fault) {
  const char* kind = CauseName(static_cast<int>(fault.cause));
  Record(store_->AddEvent(plan_.job_id, kind, fault.host, redact_(fault.detail)));
  if (tearing_down_ || fault_) {
    Say(std::string(kind) + ": " + fault.detail);
    return;
  }
  Say(std::string(kind) + ": " + fault.detail);
  fault_ = std::move(fault);
}

bool Controller::Restartable(const Fault& f) const {
  if (!spec_.restart || restart_count_ >= spec_.restart->max_restarts) return false;
  switch (f.cause) {
    case Cause::kHostLost: return spec_.restart->on_host_lost;
    case Cause::kNodeFailed: return spec_.restart->on_node_failed;
    case Cause::kPreempted: return spec_.restart->on_preempted;
  }
  return false;
}

void Controller::OnHostLost(HostState& host, const std::string& why) {
  if (host.lost) return;
  host.lost = true;
  host.replace = true;
  for (auto& n : nodes_) {
    if (n->host == &host && (n->phase == NodePhase::kRunning || n->phase == NodePhase::kStarting)) {
      n->phase = NodePhase::kLost;
    }
  }
  if (tearing_down_) {
    Say(host.name + ": lost during teardown: " + why);
    return;
  }
  NoteFault({Cause::kHostLost, host.name, host.name + " is lost: " + why});
}

void Controller::OnPreempted(HostState& host, const std::string& notice) {
  if (tearing_down_ || host.lost) return;
  host.replace = true;
  // SIGTERM first, so the job can checkpoint; the teardown's docker stop
  // then gives it stop_grace before the kill.
  std::vector<std::string> names;
  for (auto& n : nodes_) {
    if (n->host == &host && n->phase == NodePhase::kRunning) names.push_back(n->plan->container.name);
  }
  if (!names.empty()) {
    Exec(host, host.docker->Line(container::KillArgs(names, "TERM")), [](const Outcome&) {});
  }
  NoteFault({Cause::kPreempted, host.name,
             host.name + " is being preempted" + (notice.empty() ? "" : ": " + notice) +
                 "; SIGTERM sent to " + std::to_string(names.size()) + " container(s)"});
}

void Controller::StartMonitors() {
  const int gen = ++generation_;
  // The engine: a bounded probe every 2 s catches a dockerd that stopped
  // answering (the docker wait on it would hang silently).
  const auto probe_every = std::clamp<milliseconds>(
      std::chrono::duration_cast<milliseconds>(spec_.ssh.dead_after / 2), milliseconds(1000),
      milliseconds(5000));
  for (auto& [h, host] : hosts_) {
    HostState* hs = host.get();
    auto tick = std::make_shared<std::function<void()>>();
    *tick = [this, hs, gen, probe_every, weak = std::weak_ptr<std::function<void()>>(tick)] {
      if (gen != generation_ || hs->lost) return;
      auto again = [this, gen, probe_every, weak] {
        if (auto t = weak.lock(); t && gen == generation_) loop_.AddTimer(Clock::now() + probe_every, [t] { (*t)(); });
      };
      if (hs->probing) return again();
      hs->probing = true;
      const auto started = Clock::now();
      Exec(*hs, Bounded(hs->docker->Version(), spec_.ssh.dead_after),
           [this, hs, gen, started, again](const Outcome& o) {
             hs->probing = false;
             if (gen != generation_ || hs->lost) return;
             if (!o.exit.known()) return;  // the session itself: OnHostLost
             if (!o.ok()) {
               const double took = std::chrono::duration<double>(Clock::now() - started).count();
               char buf[32];
               std::snprintf(buf, sizeof buf, "%.1f", took);
               std::string why = o.exit.code == 137 && o.err.empty()
                                     ? std::string("the Docker engine did not answer for ") + buf + " s (ssh.dead_after)"
                                     : "the Docker engine fails: " + o.Reason();
               hs->lost = true;
               hs->replace = true;
               for (auto& n : nodes_) {
                 if (n->host == hs && n->phase == NodePhase::kRunning) n->phase = NodePhase::kLost;
               }
               if (!tearing_down_) NoteFault({Cause::kHostLost, hs->name, hs->name + " is lost: " + why});
               return;
             }
             again();
           });
    };
    monitors_.push_back(tick);
    loop_.AddTimer(Clock::now() + probe_every, [tick] { (*tick)(); });
  }
  if (!spec_.preemption) return;
  const PreemptionSpec& pre = *spec_.preemption;
  for (auto& [h, host] : hosts_) {
    HostState* hs = host.get();
    auto tick = std::make_shared<std::function<void()>>();
    *tick = [this, hs, gen, &pre, weak = std::weak_ptr<std::function<void()>>(tick)] {
      if (gen != generation_ || hs->lost) return;
      auto again = [this, gen, &pre, weak] {
        if (auto t = weak.lock(); t && gen == generation_) loop_.AddTimer(Clock::now() + pre.every, [t] { (*t)(); });
      };
      if (hs->polling) return again();
      hs->polling = true;
      Exec(*hs, Bounded(pre.command, std::max<milliseconds>(pre.every, seconds(10))),
           [this, hs, gen, again](const Outcome& o) {
             hs->polling = false;
             if (gen != generation_) return;
             if (o.ok()) return OnPreempted(*hs, Trim(o.out).substr(0, 200));
             again();
           });
    };
    monitors_.push_back(tick);
    loop_.AddTimer(Clock::now() + pre.every, [tick] { (*tick)(); });
  }
}

std::string Controller::RemoveJobContainersLine(HostState& hs) const {
  const std::string filter = std::string(cluster::kJobLabel) + "=" + plan_.job_id;
  return "ids=$(" + hs.docker->Line({"ps", "-aq", "--filter", "label=" + filter}) +
         ") && if [ -n \"$ids\" ]; then " + hs.docker->Line({"rm", "-f"}) + " $ids; fi";
}

Status Controller::ReplaceHosts() {
  for (auto& [h_key, host_ptr] : hosts_) {
    const size_t h = h_key;
    if (!host_ptr->replace) continue;
    const std::string old_name = host_ptr->name;
    const cluster::Host old_inventory = input_.hosts[h];
    HostState* old_state = host_ptr.get();
    if (!old_state->lost) {
      // Still reachable (preempted): its watchdog is not needed any more.
      Exec(*old_state, DisarmWatchdogCommand(plan_.job_id), [](const Outcome&) {});
    }
    bool placed = false;
    // A spare in its place: connected, preflighted, given the workdir.
    while (!placed && next_spare_ < spec_.spare_hosts.size() && interrupts_ == 0) {
      cluster::Host spare = spec_.spare_hosts[next_spare_++];
      spare.nodes = old_inventory.nodes;
      spare.role = old_inventory.role;
      spare.line = old_inventory.line;
      input_.hosts[h] = spare;
      plan_.hosts[h] = spare;
      Say("replacing " + old_name + " with spare host " + spare.address);
      Status s = Connect({h});
      if (s.ok()) s = Login({hosts_[h].get()});
      if (s.ok()) s = Preflight({hosts_[h].get()});
      if (s.ok()) s = Upload({hosts_[h].get()});
      if (s.ok()) {
        Record(store_->AddEvent(plan_.job_id, event::kRestarting, spare.address,
                                "spare host " + spare.address + " takes the place of " + old_name));
        old_state->superseded = true;
        placed = true;
      } else {
        Say("spare host " + spare.address + " cannot be used: " + s.message());
      }
    }
    if (placed) continue;
    // No spare left: the same host, checked again.
    input_.hosts[h] = old_inventory;
    plan_.hosts[h] = old_inventory;
    const bool was_lost = old_state->lost;
    Say("no spare host left; checking " + old_name + " again");
    Status s = Status::Ok();
    if (was_lost) {
      s = Connect({h});
      if (s.ok()) s = Login({hosts_[h].get()});
      if (s.ok()) s = Preflight({hosts_[h].get()});
      // Its watchdog may have removed the job's directory meanwhile.
      if (s.ok()) s = Upload({hosts_[h].get()});
    }
    HostState& hs = *hosts_[h];
    std::optional<Outcome> checked;
    if (s.ok()) {
      std::string line = RemoveJobContainersLine(hs);
      if (spec_.preemption && !was_lost) {
        line = "if " + Bounded(spec_.preemption->command, seconds(10)) +
               " >/dev/null 2>&1; then echo 'a preemption notice is still up' >&2; exit 3; fi; " + line;
      }
      Exec(hs, line, [&](const Outcome& o) { checked = o; });
      RunUntil([&] { return checked.has_value(); }, Clock::now() + spec_.ssh.dead_after + seconds(60));
      if (!checked || !checked->ok()) {
        s = Status::Error(checked ? checked->Reason() : "no answer");
      }
    }
    if (!s.ok()) {
      return Status::Error(old_name + " cannot be used again and no spare host is left: " + s.message());
    }
    hs.replace = false;
    Say(old_name + " checked again: it is used for the restart");
  }
  return Status::Ok();
}

Status Controller::Launch() {
  // Plan this attempt (the restart count and replaced hosts change it).
  input_.restart_count = restart_count_;
  Result<cluster::Plan> plan = cluster::MakePlan(input_);
  if (!plan.ok()) return plan.status();
  for (auto& n : nodes_) n->retired = true;
  for (auto& n : nodes_) old_nodes_.push_back(std::move(n));
  nodes_.clear();
  if (sink_) old_sinks_.push_back(std::move(sink_));
  old_plans_.push_back(std::move(plan_));
  plan_ = std::move(plan).value();
  fault_.reset();
  tearing_down_ = false;
  head_logged_ready_ = false;

  const std::string run_dir = options_.state_dir + "/runs/" + plan_.job_id;
  std::vector<LogSink::Node> sink_nodes;
  for (const auto& n : plan_.nodes) {
    sink_nodes.push_back({n.rank, n.role, HostName(plan_.hosts[n.host_index])});
    auto state = std::make_unique<NodeState>();
    state->plan = &n;
    state->host = hosts_[n.host_index].get();
    nodes_.push_back(std::move(state));
  }
  Result<std::unique_ptr<LogSink>> sink = LogSink::Open(run_dir, sink_nodes, options_.echo);
  if (!sink.ok()) return sink.status();
  sink_ = std::move(sink).value();
  sink_->set_echo_guard([this] { progress_->Clear(); }, [this] { progress_->Redraw(); });
  if (restart_count_ == 0) {
    Say("job " + plan_.job_id + " (" + plan_.job_name + "): " + std::to_string(nodes_.size()) +
        " node(s); logs in " + run_dir);
  }

  // The head first; workers only once it is ready.
  NodeState& head = *nodes_[0];
  Record(store_->SetStatus(plan_.job_id, JobStatus::kStarting));
  StartMonitors();
  if (Status s = StartNodes({&head}); !s.ok()) return s;
  if (Status s = WaitReady(head); !s.ok()) return s;
  std::vector<NodeState*> workers;
  for (size_t i = 1; i < nodes_.size(); ++i) workers.push_back(nodes_[i].get());
  if (!workers.empty() && head.phase == NodePhase::kRunning && interrupts_ == 0 && !fault_) {
    if (Status s = StartNodes(workers); !s.ok()) return s;
  }
  Record(store_->SetStatus(plan_.job_id, JobStatus::kRunning, std::nullopt,
                           std::to_string(nodes_.size()) + " node(s)" +
                               (restart_count_ ? ", restart " + std::to_string(restart_count_) : "")));
  if (restart_count_ == 0) ScheduleArtifacts();

  // Running: until the head's main process exits, a fault, an interrupt or
  // the timeout.
  const Clock::time_point deadline =
      spec_.timeout ? started_ + *spec_.timeout : Clock::time_point::max();
  bool ended = RunUntil(
      [&] {
        return head.phase == NodePhase::kExited || head.phase == NodePhase::kLost ||
               fault_.has_value() || interrupts_ > 0;
      },
      deadline);
  if (!ended) timed_out_ = true;
  return Status::Ok();
}

int Controller::Execute() {
  SignalWatcher signals(&loop_, [this](int signo) {
    ++interrupts_;
    Say(std::string(interrupts_ == 1 ? "interrupted (signal " : "interrupted again (signal ") +
        std::to_string(signo) + (interrupts_ == 1 ? "): stopping the job" : "): killing the job"));
  });

  // Hosts that cannot be reached are reported with the other hosts'
  // preflight problems, in one table.
  if (Status s = Connect(); !s.ok() && connect_errors_.empty()) return Fail(s.message(), kExitBargeFailure);
  loop_.Poll(milliseconds(0));  // deliver a signal that came during the connects
  if (interrupts_ > 0) return kExitInterrupted;
  // registry: every host logs in before preflight checks or pulls images.
  if (Status s = Login(AllHosts()); !s.ok()) {
    return Fail(s.message(), interrupts_ > 0 ? kExitInterrupted : kExitBargeFailure);
  }
  if (Status s = Preflight(ConnectedHosts()); !s.ok()) {
    return Fail(s.message(), interrupts_ > 0 ? kExitInterrupted : kExitBargeFailure);
  }
  const std::string run_dir = options_.state_dir + "/runs/" + plan_.job_id;
  if (Status s = MakeDirs(run_dir); !s.ok()) return Fail(s.message(), kExitBargeFailure);
  if (plan_.head_ready.kind == cluster::ReadinessProbe::Kind::kLog) {
    try {
      ready_regex_.emplace(plan_.head_ready.log_regex, std::regex::ECMAScript);
    } catch (const std::regex_error& e) {
      return Fail("roles.head.ready.log: invalid regex: " + std::string(e.what()),
                  kExitBargeFailure);
    }
  }
  if (Status s = Upload(AllHosts()); !s.ok()) return Fail(s.message(), kExitBargeFailure);

  for (;;) {
    // Live hosts may have filled in GPU counts; restarts change hosts: the
    // plan is made again for every attempt.
    if (Status s = Launch(); !s.ok()) {
      // No partial launch: whatever started is removed.
      Fail(s.message(), interrupts_ > 0 ? kExitInterrupted : kExitBargeFailure);
      Teardown(interrupts_ < 2);
      return interrupts_ > 0 ? kExitInterrupted : kExitBargeFailure;
    }
    if (timed_out_) {
      Fail("the job reached its timeout (" +
               std::to_string(std::chrono::duration_cast<seconds>(*spec_.timeout).count()) +
               " s): stopping it",
           kExitTimedOut);
      Teardown(interrupts_ < 2);
      return interrupts_ > 0 ? kExitInterrupted : kExitTimedOut;
    }
    if (interrupts_ > 0) {
      Teardown(interrupts_ < 2);
      return kExitInterrupted;
    }
    NodeState& head = *nodes_[0];
    if (!fault_ && head.phase == NodePhase::kExited) {
      Teardown(true);
      if (!head.exit_code) return Fail("the head's exit code is unknown", kExitBargeFailure);
      return *head.exit_code;
    }
    // A fault ended the attempt.
    const Fault fault = fault_.value_or(Fault{Cause::kHostLost, head.host->name, "the head's host is lost"});
    const bool again = Restartable(fault);
    Teardown(/*graceful=*/interrupts_ < 2, /*final=*/!again);
    if (!again) {
      if (fault.cause == Cause::kNodeFailed && fault.rank == 0) {
        Fail("job failed: " + fault.detail, fault.exit_code);
        return fault.exit_code;
      }
      std::string msg = "job failed: " + fault.detail;
      if (spec_.restart) {
        msg += restart_count_ >= spec_.restart->max_restarts
                   ? " (no restarts left: max_restarts " + std::to_string(spec_.restart->max_restarts) + ")"
                   : std::string(" (restart.on does not list ") + CauseName(static_cast<int>(fault.cause)) + ")";
      }
      return Fail(msg, kExitBargeFailure);
    }
    ++restart_count_;
    const std::string why = std::string(CauseName(static_cast<int>(fault.cause))) + ": " + fault.detail;
    Record(store_->NoteRestart(plan_.job_id, redact_("restart " + std::to_string(restart_count_) + " of " +
                                                 std::to_string(spec_.restart->max_restarts) + " after " + why)));
    Say("restarting the job (restart " + std::to_string(restart_count_) + " of " +
        std::to_string(spec_.restart->max_restarts) + ") in " +
        std::to_string(std::chrono::duration_cast<milliseconds>(spec_.restart->backoff).count() / 1000.0).substr(0, 4) +
        " s");
    RunUntil([&] { return interrupts_ > 0; }, Clock::now() + spec_.restart->backoff);
    if (interrupts_ == 0) {
      if (Status s = ReplaceHosts(); !s.ok()) {
        tearing_down_ = true;
        RunTeardownHooks();
        return Fail("job failed: " + why + "; cannot restart: " + s.message(), kExitBargeFailure);
      }
    }
    if (interrupts_ > 0) {
      RunTeardownHooks();
      return kExitInterrupted;
    }
  }
}

void Controller::RecordNode(const NodeState& node) {
  NodeRecord r;
  r.job_id = plan_.job_id;
  r.rank = node.plan->rank;
  r.role = node.plan->role;
  r.host = node.host->name;
  r.container_name = node.plan->container.name;
  r.container_id = node.container_id;
  auto id = node.host->image_ids.find(node.plan->container.image);
  if (id != node.host->image_ids.end()) r.image_id = id->second;
  r.exit_code = node.exit_code;
  r.log_path = sink_ ? sink_->path(node.plan->rank) : "";
  Record(store_->UpsertNode(r));
}

bool Controller::Prepare(bool with_store) {
  Result<cluster::Plan> plan = cluster::MakePlan(input_);
  if (!plan.ok()) {
    Say(plan.status().message());
    return false;
  }
  plan_ = std::move(plan).value();
  if (!with_store) return true;
  Result<std::unique_ptr<JobStore>> store = JobStore::Open(options_.state_dir);
  if (!store.ok()) {
    Say(store.status().message());
    return false;
  }
  store_ = std::move(store).value();
  return true;
}

int Controller::Run() {
  if (!Prepare(/*with_store=*/true)) return kExitBargeFailure;
  JobRecord job;
  job.id = plan_.job_id;
  job.name = plan_.job_name;
  // The job file never holds a secret's value (they come from files and
  // the environment); masked all the same.
  job.spec = redact_(options_.spec_text);
  job.status = JobStatus::kPreflight;
  job.created = WallNow();
  job.controller_pid = static_cast<int>(getpid());
  job.nodes = static_cast<int>(plan_.nodes.size());
  job.run_dir = options_.state_dir + "/runs/" + plan_.job_id;
  if (Status s = store_->CreateJob(job); !s.ok()) {
    Say(s.message());
    return kExitBargeFailure;
  }

  const int code = Execute();
  Logout();
  DisarmWatchdogs();

  JobStatus final_status = JobStatus::kFailed;
  std::string detail = final_detail_;
  if (code == kExitInterrupted && interrupts_ > 0) {
    final_status = JobStatus::kCancelled;
    detail = "interrupted";
  } else if (timed_out_) {
    final_status = JobStatus::kTimedOut;
  } else if (code == 0 && final_detail_.empty()) {
    final_status = JobStatus::kSucceeded;
  } else if (final_detail_.empty()) {
    detail = "head exited with code " + std::to_string(code);
  }
  Record(store_->SetStatus(plan_.job_id, final_status, code, redact_(detail)));
  return code;
}

int Controller::TearDownOrphan() {
  if (!Prepare(/*with_store=*/true)) return kExitBargeFailure;
  if (Status s = Connect(); !s.ok()) {
    Say(s.message());
    return kExitBargeFailure;
  }
  int pending = 0;
  bool failed = false;
  for (auto& [h, host] : hosts_) {
    HostState* hs = host.get();
    ++pending;
    Exec(*hs, RemoveJobContainersLine(*hs), [&, hs](const Outcome& o) {
      --pending;
      if (!o.ok()) {
        failed = true;
        Say(hs->name + ": removing the job's containers failed: " + o.Reason());
      } else {
        int n = 0;
        for (char c : o.out) n += c == '\n';
        Say(hs->name + ": removed " + std::to_string(n) + " container(s)");
      }
    });
  }
  RunUntil([&] { return pending == 0; }, Clock::now() + seconds(120));
  RunTeardownHooks();
  for (auto& [h, host] : hosts_) host->watchdog_armed = true;  // whatever is left of it
  DisarmWatchdogs();
  Record(store_->SetStatus(plan_.job_id, JobStatus::kCancelled, kExitBargeFailure,
                           "torn down by barge down (its controller was gone)"));
  return failed || pending ? kExitBargeFailure : 0;
}

int Controller::Reap(const std::function<bool(const std::string&)>& is_live) {
  if (!Prepare(/*with_store=*/false)) return kExitBargeFailure;
  // Every listed host, not only those this job's plan would use.
  plan_.used_hosts.clear();
  for (size_t h = 0; h < plan_.hosts.size(); ++h) plan_.used_hosts.push_back(h);
  if (Status s = Connect(); !s.ok()) {
    Say(s.message());
    return kExitBargeFailure;
  }
  int pending = 0;
  bool failed = false;
  size_t removed = 0, kept = 0;
  for (auto& [h, host] : hosts_) {
    HostState* hs = host.get();
    ++pending;
    Exec(*hs, hs->docker->Line(container::PsByLabelArgs(cluster::kJobLabel)),
         [&, hs](const Outcome& o) {
           Result<std::vector<container::PsEntry>> list = container::ParsePsLines(o.out);
           if (!o.ok() || !list.ok()) {
             --pending;
             failed = true;
             Say(hs->name + ": cannot list containers: " +
                 (o.ok() ? list.status().message() : o.Reason()));
             return;
           }
           std::vector<std::string> orphans;
           for (const auto& c : *list) {
             auto job = c.labels.find(cluster::kJobLabel);
             const std::string job_id = job == c.labels.end() ? "" : job->second;
             if (!job_id.empty() && is_live(job_id)) {
               ++kept;
               continue;
             }
             orphans.push_back(c.id);
             std::printf("%s: removing %s (job %s, %s)\n", hs->name.c_str(), c.names.c_str(),
                         job_id.c_str(), c.status.c_str());
           }
           if (orphans.empty()) {
             --pending;
             return;
           }
           Exec(*hs, hs->docker->Remove(orphans), [&, hs, n = orphans.size()](const Outcome& r) {
             --pending;
             if (r.ok()) {
               removed += n;
             } else {
               failed = true;
               Say(hs->name + ": removing failed: " + r.Reason());
             }
           });
         });
  }
  RunUntil([&] { return pending == 0; }, Clock::now() + seconds(120));
  std::printf("removed %zu container(s); kept %zu of running jobs\n", removed, kept);
  return failed || pending ? kExitBargeFailure : 0;
}

int Controller::ExecInNode(int rank, const std::vector<std::string>& argv) {
  if (!Prepare(/*with_store=*/false)) return kExitBargeFailure;
  if (rank < 0 || static_cast<size_t>(rank) >= plan_.nodes.size()) {
    Say("the job has no node " + std::to_string(rank) + " (ranks 0.." +
        std::to_string(plan_.nodes.size() - 1) + ")");
    return kExitBargeFailure;
  }
  const cluster::NodePlan& node = plan_.nodes[rank];
  plan_.used_hosts = {node.host_index};
  if (Status s = Connect(); !s.ok()) {
    Say(s.message());
    return kExitBargeFailure;
  }
  HostState& host = *hosts_[node.host_index];
  std::vector<std::string> args = {"exec", node.container.name};
  args.insert(args.end(), argv.begin(), argv.end());
  std::optional<ssh::ExitStatus> result;
  ssh::CommandCallbacks cb;
  cb.on_stdout = [](std::string_view d) {
    std::fwrite(d.data(), 1, d.size(), stdout);
    std::fflush(stdout);
  };
  cb.on_stderr = [](std::string_view d) {
    std::fwrite(d.data(), 1, d.size(), stderr);
    std::fflush(stderr);
  };
  cb.on_exit = [&](const ssh::ExitStatus& st) { result = st; };
  Result<std::unique_ptr<ssh::Command>> cmd = host.exec->Start(host.docker->Line(args), std::move(cb));
  if (!cmd.ok()) {
    Say(cmd.status().message());
    return kExitBargeFailure;
  }
  (*cmd)->CloseStdin();
  SignalWatcher signals(&loop_, [this](int) { ++interrupts_; });
  RunUntil([&] { return result.has_value() || interrupts_ > 0; }, Clock::time_point::max());
  if (!result) return kExitInterrupted;
  if (!result->known()) {
    Say(result->error);
    return kExitBargeFailure;
  }
  return result->code;
}

int Controller::AttachOrphan(const std::map<int, int64_t>& kept_through_ns) {
  if (!Prepare(/*with_store=*/false)) return kExitBargeFailure;
  if (Status s = Connect(); !s.ok()) {
    Say(s.message());
    return kExitBargeFailure;
  }
  std::vector<LogSink::Node> sink_nodes;
  for (const auto& n : plan_.nodes) {
    sink_nodes.push_back({n.rank, n.role, HostName(plan_.hosts[n.host_index])});
    auto state = std::make_unique<NodeState>();
    state->plan = &n;
    state->host = hosts_[n.host_index].get();
    auto kept = kept_through_ns.find(n.rank);
    if (kept != kept_through_ns.end()) state->skip_through_ns = kept->second;
    nodes_.push_back(std::move(state));
  }
  Result<std::unique_ptr<LogSink>> sink =
      LogSink::Open(options_.state_dir + "/runs/" + plan_.job_id, sink_nodes, options_.echo);
  if (!sink.ok()) {
    Say(sink.status().message());
    return kExitBargeFailure;
  }
  sink_ = std::move(sink).value();
  SignalWatcher signals(&loop_, [this](int) { ++interrupts_; });
  for (auto& n : nodes_) StreamLogs(*n);
  RunUntil(
      [&] {
        return interrupts_ > 0 || std::none_of(nodes_.begin(), nodes_.end(),
                                               [](const auto& n) { return n->logs_open; });
      },
      Clock::time_point::max());
  return interrupts_ > 0 ? kExitInterrupted : 0;
}

}  // namespace

int AttachToOrphan(const JobSpec& spec, const cluster::PlanInput& input,
                   const ControllerOptions& options, const std::map<int, int64_t>& kept_through_ns) {
  Controller controller(spec, input, options);
  return controller.AttachOrphan(kept_through_ns);
}

int ReapJobHosts(const JobSpec& spec, const cluster::PlanInput& input,
                 const ControllerOptions& options,
                 const std::function<bool(const std::string&)>& is_live) {
  Controller controller(spec, input, options);
  return controller.Reap(is_live);
}

int ExecInJobNode(const JobSpec& spec, const cluster::PlanInput& input,
                  const ControllerOptions& options, int rank, const std::vector<std::string>& argv) {
  Controller controller(spec, input, options);
  return controller.ExecInNode(rank, argv);
}

int TearDownJob(const JobSpec& spec, const cluster::PlanInput& input,
                const ControllerOptions& options) {
  Controller controller(spec, input, options);
  return controller.TearDownOrphan();
}

int RunJob(const JobSpec& spec, const cluster::PlanInput& input, const ControllerOptions& options) {
  Controller controller(spec, input, options);
  return controller.Run();
}

}  // namespace barge::runner
