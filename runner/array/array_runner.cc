// The array controller: a process per running member, hosts from a pool,
// retries, the members' output prefixed, and the summary.
#include "runner/array/array_runner.h"

#include <fcntl.h>
#include <signal.h>
#include <poll.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <algorithm>
#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <set>

#include "runner/console/exit_codes.h"
#include "runner/controller/entry_points.h"
#include "runner/array/array_events.h"
#include "runner/array/array_member.h"
#include "runner/store/array_store.h"
#include "runner/array/array_summary.h"
#include "runner/array/host_pool.h"
#include "runner/array/member_output.h"
#include "runner/array/member_record.h"
#include "runner/store/job_store.h"
#include "runner/store/state_dir.h"
#include "runner/console/signals.h"
#include "ssh/event_loop.h"

namespace barge::runner::array {
namespace {

// Closes every file descriptor from `first` on (a forked member's
// inheritance).
void CloseFdsFrom(int first) {
  if (syscall(SYS_close_range, first, ~0U, 0) == 0) return;
  const long max = sysconf(_SC_OPEN_MAX);
  for (long fd = first; fd < (max > 0 ? max : 65536); ++fd) close(static_cast<int>(fd));
}

// One running member attempt.
struct Running {
  int index = 0;
  pid_t pid = -1;
  size_t pool = 0;  // 0: the job's hosts; g + 1: host group g
  std::vector<size_t> hosts;
  std::string job_id;
  // Stopped (SIGTERM) while it waited for hosts other jobs hold, because
  // enough others of its pool were free: it runs again there.
  bool moving = false;
  int out_fd = -1, err_fd = -1;
  std::unique_ptr<MemberOutput> out, err;
};

void Write(std::FILE* f, const std::string& text) {
  if (text.empty()) return;
  std::fwrite(text.data(), 1, text.size(), f);
  std::fflush(f);
}

// Reads what `fd` has (non-blocking); false at end of file or error.
bool Drain(int fd, MemberOutput& lines, std::FILE* to, bool echo) {
  char buf[16384];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n > 0) {
      std::string text = lines.Add(std::string_view(buf, static_cast<size_t>(n)));
      if (echo) Write(to, text);
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return true;
    if (echo) Write(to, lines.Flush());
    return false;
  }
}

// One run of an array's waiting members (RunArray's loop): owns the store
// connection (closed across each fork, opened again on the next write), the
// host pools, the running members' processes and their output pipes, and
// the event loop that watches those pipes and the signals. Single-threaded;
// one per process at a time (it installs the signal handlers). Neither
// copied nor moved: the loop's callbacks point into it.
class ArrayRun {
 public:
  // `store` is open on options.state_dir; `array` and `members` are the
  // array's records as read from it. Nothing happens until Run.
  ArrayRun(const JobSpec& spec, const ArrayParams& params, const std::string& array_id,
           const ArrayRunOptions& options, std::unique_ptr<ArrayStore> store, ArrayRecord array,
           std::vector<MemberRecord> members)
      : spec_(spec), params_(params), array_id_(array_id), options_(options), store_(std::move(store)),
        array_(std::move(array)), members_(std::move(members)), events_(options.events, array_id) {}
  ArrayRun(const ArrayRun&) = delete;
  ArrayRun& operator=(const ArrayRun&) = delete;

  // RunArray's contract: every waiting member run until all have ended, the
  // summary printed, the array's outcome recorded; its exit code.
  int Run();

 private:
  // What a member attempt's job recorded about how it ended.
  struct AttemptOutcome {
    bool succeeded = false;
    std::map<std::string, std::string> caused;  // by address: what the host did
    std::set<std::string> unavailable;          // by address: unhealthy, not busy
  };

  ArrayStore* Store();
  void Record(const MemberRecord& m);
  void MarkArrayRunning();
  void BuildPools();
  std::string HostsEachText() const;
  void Announce();
  void SayCounts();
  void LookAtWaits();
  std::map<int, std::string> WaitsOfRunning(JobStore& jobs) const;
  void MoveOneWaitingMember(const std::map<int, std::string>& waits);
  void HandleSignals();
  void FailUnplaceable();
  void StartWhatFits();
  void Launch(int index, size_t pool_index, std::vector<size_t> hosts);
  Running BeginAttempt(int index, size_t pool_index, const std::vector<size_t>& hosts, const std::string& names);
  void LaunchFailed(MemberRecord& m, size_t pool_index, const std::vector<size_t>& hosts);
  std::string HostNames(size_t pool_index, const std::vector<size_t>& hosts,
                        std::vector<cluster::Host>* member_hosts) const;
  pid_t ForkMember(const JobSpec& member, const std::string& job_id, const int out[2], const int err[2]);
  void WatchOutput(Running* run);
  void ReapExited();
  void Finish(Running& r, int code);
  AttemptOutcome ReadAttemptOutcome(const Running& r, int code) const;
  std::set<size_t> NoteAttemptHosts(const Running& r, const AttemptOutcome& outcome);
  void SetNextStatus(const Running& r, MemberRecord& m, int code, bool succeeded, bool host_unavailable);
  int Conclude();

  const JobSpec& spec_;
  const ArrayParams& params_;
  const std::string& array_id_;
  const ArrayRunOptions& options_;
  // The store's connection is closed before each fork and opened again
  // after (see Launch): SQLite's per-process state (the WAL index mapping
  // and the lock bookkeeping it shares between a process's connections)
  // must not cross a fork. A member that inherited it held no lock of its
  // own on the WAL index: once the array controller died, the next `barge`
  // to open the store took it for unused and reset it, and every later
  // write of the member (its job's outcome) was lost.
  std::unique_ptr<ArrayStore> store_;
  ArrayRecord array_;
  std::vector<MemberRecord> members_;
  // One pool per host group (a row's host_group column), after the job's
  // own: pool 0 is the job's hosts, pool g + 1 host group g.
  size_t at_once_ = 0;
  // Through Slurm (slurm:) each member asks for an allocation of its own:
  // the pool is then one slot per member at once, none of them a host.
  std::vector<cluster::Host> slurm_slots_;
  std::vector<const std::vector<cluster::Host>*> pool_hosts_;
  std::vector<HostPool> pools_;
  std::vector<size_t> needs_;    // hosts per member, by pool
  std::vector<size_t> pool_of_;  // by member index
  std::deque<int> waiting_;
  ArrayEventStream events_;
  bool echo_out_ = true;
  std::FILE* summary_to_ = stdout;
  std::string last_counts_;
  // What running members wait for (hosts other jobs hold: their jobs'
  // status `waiting` and its detail), said when it changes; asked from the
  // store every 2 s.
  std::string last_waiting_;
  std::chrono::steady_clock::time_point next_waiting_look_;
  bool stopping_ = false;
  std::map<int, std::set<size_t>> waited_on_;  // pool hosts each member waited for, by index
  // One event loop: the members' output and the signals (one watcher, as
  // every barge process has).
  ssh::EventLoop loop_;
  std::deque<int> signals_in_;  // delivered, not yet handled
  std::optional<SignalWatcher> signals_;
  std::map<pid_t, Running> running_;
  std::map<int, int> tries_;  // attempts in this run, by index (a rerun starts again at 0)
  // Retries move off a failing host: the pool hosts (by index) a member's
  // last failure came from, which its next attempt takes only when no
  // other host is free; and the hosts set aside, for the summary.
  std::map<int, std::set<size_t>> avoid_;
  std::vector<std::string> set_aside_;
};

int ArrayRun::Run() {
  MarkArrayRunning();
  BuildPools();
  Announce();
  signals_.emplace(&loop_, [this](int signo) { signals_in_.push_back(signo); });
  for (;;) {
    HandleSignals();
    FailUnplaceable();
    StartWhatFits();
    SayCounts();
    LookAtWaits();
    if (running_.empty() && (waiting_.empty() || stopping_)) break;
    if (running_.empty()) {  // nothing runs and nothing can start: cannot happen with a checked pool
      std::fprintf(stderr, "barge: no waiting member can get its host(s) from its pool%s\n",
                   set_aside_.empty() ? "" : " (hosts were set aside)");
      break;
    }
    // The members' output as it comes (each pipe is watched from its
    // member's start: WatchOutput), signals, or 200 ms for the exits below.
    loop_.Poll(std::chrono::milliseconds(200));
    ReapExited();
  }
  return Conclude();
}

// The store, opened again if a fork closed it; null (after a warning) when
// it cannot be.
ArrayStore* ArrayRun::Store() {
  if (store_) return store_.get();
  Result<std::unique_ptr<ArrayStore>> again = ArrayStore::Open(options_.state_dir);
  if (!again.ok()) {
    std::fprintf(stderr, "barge: warning: %s\n", again.status().message().c_str());
    return nullptr;
  }
  store_ = std::move(again).value();
  return store_.get();
}

// Writes member `m`'s record; a failure is a warning.
void ArrayRun::Record(const MemberRecord& m) {
  ArrayStore* s = Store();
  if (s == nullptr) return;
  if (Status st = s->UpdateMember(m); !st.ok()) std::fprintf(stderr, "barge: warning: %s\n", st.message().c_str());
}

void ArrayRun::MarkArrayRunning() {
  array_.status = "running";
  array_.controller_pid = static_cast<int>(getpid());
  array_.ended.reset();
  array_.exit_code.reset();
  (void)store_->UpdateArray(array_);
}

// The pools (the job's hosts, or Slurm slots, then each host group's), the
// hosts a member takes from each, and each member's pool.
void ArrayRun::BuildPools() {
  at_once_ = MembersAtOnce(spec_, params_);
  if (spec_.slurm) {
    cluster::Host slot;
    slot.address = "slurm";
    slurm_slots_.assign(at_once_, slot);
  }
  pool_hosts_ = {spec_.slurm ? &slurm_slots_ : &spec_.hosts};
  for (const HostGroup& g : spec_.host_groups) pool_hosts_.push_back(&g.hosts);
  for (const auto* hosts : pool_hosts_) {
    pools_.emplace_back(std::max<size_t>(hosts->size(), 1));
    needs_.push_back(spec_.slurm ? 1 : HostsPerMember(spec_, *hosts));
  }
  pool_of_.assign(members_.size(), 0);
  for (size_t i = 0; i < members_.size() && i < params_.rows.size(); ++i) {
    Result<std::optional<size_t>> g = MemberGroup(spec_, params_, i);
    if (g.ok() && *g) pool_of_[i] = **g + 1;
  }
}

// "2 host(s) each", or with host groups "host(s) each: 1 of the job's
// hosts, 1 of group a's 2, 1 of group b's 1".
std::string ArrayRun::HostsEachText() const {
  std::string each = spec_.slurm ? "a Slurm allocation of " + std::to_string(spec_.slurm->nodes) + " node(s) each"
                                 : std::to_string(needs_[0]) + " host(s) each";
  if (!spec_.host_groups.empty()) {
    each = "host(s) each: " + std::to_string(needs_[0]) + " of the job's hosts";
    for (size_t g = 0; g < spec_.host_groups.size(); ++g) {
      each += ", " + std::to_string(needs_[g + 1]) + " of group " + spec_.host_groups[g].name + "'s " +
              std::to_string(spec_.host_groups[g].hosts.size());
    }
  }
  return each;
}

// Queues the waiting members and says what is to run (a line on stderr,
// the array_started event).
void ArrayRun::Announce() {
  const std::string each = HostsEachText();
  for (const MemberRecord& m : members_) {
    if (m.status == MemberStatus::kWaiting) waiting_.push_back(m.index);
  }
  std::fprintf(stderr, "barge: array %s (%s): %zu member(s), %zu to run, at most %zu at once, %s; logs in %s\n",
               array_id_.c_str(), spec_.name.c_str(), members_.size(), waiting_.size(), at_once_, each.c_str(),
               RunDir(options_.state_dir, "<member job id>").c_str());
  events_.ArrayStarted(static_cast<int>(members_.size()), static_cast<int>(waiting_.size()),
                       static_cast<int>(at_once_), WallNow());
  echo_out_ = options_.echo && options_.events != stdout;
  summary_to_ = options_.events == stdout ? stderr : stdout;
  next_waiting_look_ = std::chrono::steady_clock::now();
}

// The members' counts by status, said when they changed.
void ArrayRun::SayCounts() {
  const std::string counts = CountsText(members_);
  if (counts == last_counts_) return;
  last_counts_ = counts;
  std::fprintf(stderr, "barge: array %s: %s\n", array_id_.c_str(), counts.c_str());
  std::fflush(stderr);
}

// Every 2 s: what the running members wait for, a member moved off hosts
// it waits for where it can be, and the waits said when they changed.
void ArrayRun::LookAtWaits() {
  if (std::chrono::steady_clock::now() < next_waiting_look_) return;
  next_waiting_look_ = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  Result<std::unique_ptr<JobStore>> jobs = JobStore::Open(options_.state_dir);
  if (!jobs.ok()) return;
  std::map<int, std::string> waits = WaitsOfRunning(**jobs);
  MoveOneWaitingMember(waits);
  std::string text;
  for (const auto& [index, what] : waits) {
    text += (text.empty() ? "" : "; ") + std::string("member ") + std::to_string(index) + " " + what;
  }
  if (text == last_waiting_) return;
  last_waiting_ = text;
  if (!text.empty()) {
    std::fprintf(stderr, "barge: array %s: waiting %zu: %s\n", array_id_.c_str(), waits.size(), text.c_str());
    std::fflush(stderr);
  }
}

// By member index: what each running member whose job waits says it waits
// for (none yet: said once it has one).
std::map<int, std::string> ArrayRun::WaitsOfRunning(JobStore& jobs) const {
  std::map<int, std::string> waits;
  for (const auto& [pid, r] : running_) {
    Result<JobRecord> job = jobs.GetJob(r.job_id);
    if (!job.ok() || job->status != JobStatus::kWaiting) continue;
    Result<std::vector<EventRecord>> evs = jobs.GetEvents(r.job_id);
    if (!evs.ok()) continue;
    for (auto it = evs->rbegin(); it != evs->rend(); ++it) {
      if (it->kind == ToString(JobStatus::kWaiting)) {
        if (!it->detail.empty()) waits[r.index] = it->detail;
        break;
      }
    }
  }
  return waits;
}

// A member that waits while enough other hosts of its pool are free
// moves there: it is stopped (its controller gives up its place and
// holds) and runs again, preferring hosts other than those it waited
// for. Never to hosts it already waited for (two hosts other jobs hold
// would otherwise see it go back and forth), and one member per look,
// so two never go for the same hosts.
void ArrayRun::MoveOneWaitingMember(const std::map<int, std::string>& waits) {
  for (auto& [pid, r] : running_) {
    // (Not through Slurm: there a member waits in Slurm's queue.)
    if (!waits.contains(r.index) || r.moving || stopping_ || spec_.slurm) continue;
    if (!pools_[r.pool].NoteWaitAndCanMove(r.hosts, needs_[r.pool], &waited_on_[r.index])) continue;
    r.moving = true;
    std::fprintf(stderr, "barge: member %d moves to free hosts of its pool (it waited: %s)\n", r.index,
                 waits.at(r.index).c_str());
    kill(pid, SIGTERM);
    break;
  }
}

// The signals delivered since the last look: the first stops the array
// (the waiting members cancelled); each is passed on to every running member.
void ArrayRun::HandleSignals() {
  while (!signals_in_.empty()) {
    const int signo = signals_in_.front();
    signals_in_.pop_front();
    if (!stopping_) {
      std::fprintf(stderr, "barge: interrupted (signal %d): stopping the array's members\n", signo);
    }
    stopping_ = true;
    for (int index : waiting_) {
      members_[static_cast<size_t>(index)].status = MemberStatus::kCancelled;
      Record(members_[static_cast<size_t>(index)]);
    }
    waiting_.clear();
    for (auto& [pid, r] : running_) kill(pid, signo);
  }
}

// A member whose pool has too few hosts left that are not set aside can
// never start: it fails now, rather than wait for ever.
void ArrayRun::FailUnplaceable() {
  for (auto it = waiting_.begin(); !stopping_ && it != waiting_.end();) {
    const size_t p = pool_of_[static_cast<size_t>(*it)];
    if (pools_[p].usable_count() >= needs_[p]) {
      ++it;
      continue;
    }
    MemberRecord& m = members_[static_cast<size_t>(*it)];
    m.status = MemberStatus::kFailed;
    if (!m.exit_code) m.exit_code = kExitBargeFailure;
    m.ended = WallNow();
    std::fprintf(stderr, "barge: member %d cannot run: its pool has %zu host(s) not set aside, it needs %zu\n", *it,
                 pools_[p].usable_count(), needs_[p]);
    Record(m);
    it = waiting_.erase(it);
  }
}

// Starts waiting members while fewer than `at_once` run: the first waiting
// member whose pool has free hosts starts (a member waiting for a busy
// group does not hold back the members of another).
void ArrayRun::StartWhatFits() {
  for (auto it = waiting_.begin(); !stopping_ && running_.size() < at_once_ && it != waiting_.end();) {
    const size_t p = pool_of_[static_cast<size_t>(*it)];
    std::optional<std::vector<size_t>> hosts = pools_[p].TakeFreeHosts(needs_[p], avoid_[*it]);
    if (!hosts) {
      ++it;
      continue;
    }
    const int index = *it;
    it = waiting_.erase(it);
    Launch(index, p, std::move(*hosts));
  }
}

// Starts an attempt of member `index` on `hosts`, taken from pool
// `pool_index`: records it running, forks its job controller and watches
// its output. When it cannot start, the member is recorded failed and the
// hosts go back to the pool.
void ArrayRun::Launch(int index, size_t pool_index, std::vector<size_t> hosts) {
  MemberRecord& m = members_[static_cast<size_t>(index)];
  std::vector<cluster::Host> member_hosts;
  const std::string names = HostNames(pool_index, hosts, &member_hosts);
  Result<JobSpec> member = MemberSpec(spec_, params_, static_cast<size_t>(index), array_id_, member_hosts);
  Running r = BeginAttempt(index, pool_index, hosts, names);
  int out[2], err[2];
  if (!member.ok() || pipe2(out, O_CLOEXEC) != 0) {
    std::fprintf(stderr, "barge: member %d: %s\n", index,
                 member.ok() ? std::strerror(errno) : member.status().message().c_str());
    m.exit_code = kExitBargeFailure;
    m.ended = WallNow();
    LaunchFailed(m, pool_index, hosts);
    return;
  }
  if (pipe2(err, O_CLOEXEC) != 0) {
    close(out[0]);
    close(out[1]);
    LaunchFailed(m, pool_index, hosts);
    return;
  }
  m.status = MemberStatus::kRunning;
  Record(m);
  // What the member resolved (its hosts in its pool), for a later down,
  // exec or attach of its job (member_record.h).
  if (Status s = RecordMemberRun(options_.state_dir, array_id_, index, hosts, r.job_id); !s.ok()) {
    std::fprintf(stderr, "barge: warning: member %d: %s\n", index, s.message().c_str());
  }
  const pid_t pid = ForkMember(*member, r.job_id, out, err);
  if (pid < 0) {
    close(out[0]);
    close(err[0]);
    LaunchFailed(m, pool_index, hosts);
    return;
  }
  fcntl(out[0], F_SETFL, O_NONBLOCK);
  fcntl(err[0], F_SETFL, O_NONBLOCK);
  r.pid = pid;
  r.out_fd = out[0];
  r.err_fd = err[0];
  r.out = std::make_unique<MemberOutput>(index, true);
  r.err = std::make_unique<MemberOutput>(index, false);
  std::fprintf(stderr, "barge: member %d (%s) attempt %d: job %s on %s\n", index, m.params.c_str(),
               m.attempts, r.job_id.c_str(), m.hosts.c_str());
  events_.MemberStarted(index, r.job_id, m.attempts, m.hosts, *m.started);
  WatchOutput(&running_.emplace(pid, std::move(r)).first->second);
}

// A new attempt of member `index` on `hosts` of pool `pool_index`
// (`names`: their addresses): a new job id, the attempt counted, its start
// noted in the member's record (not yet written).
Running ArrayRun::BeginAttempt(int index, size_t pool_index, const std::vector<size_t>& hosts,
                               const std::string& names) {
  MemberRecord& m = members_[static_cast<size_t>(index)];
  Running r;
  r.index = index;
  r.pool = pool_index;
  r.hosts = hosts;
  r.job_id = NewJobId();
  ++m.attempts;
  ++tries_[index];
  m.job_ids.push_back(r.job_id);
  m.hosts = names.empty() ? "local" : names;
  m.started = WallNow();
  m.ended.reset();
  m.exit_code.reset();
  return r;
}

// An attempt that could not start: member `m` recorded failed, its hosts
// given back to pool `pool_index`.
void ArrayRun::LaunchFailed(MemberRecord& m, size_t pool_index, const std::vector<size_t>& hosts) {
  m.status = MemberStatus::kFailed;
  pools_[pool_index].Release(hosts);
  Record(m);
}

// The hosts of pool `pool_index` at `hosts` (into `member_hosts`) and their
// addresses for the record, "a,b (group g)"; the local engine's index (past
// the inventory) adds none.
std::string ArrayRun::HostNames(size_t pool_index, const std::vector<size_t>& hosts,
                                std::vector<cluster::Host>* member_hosts) const {
  const std::vector<cluster::Host>& inventory = *pool_hosts_[pool_index];
  std::string names;
  for (size_t h : hosts) {
    if (h >= inventory.size()) continue;  // the local engine
    member_hosts->push_back(inventory[h]);
    names += (names.empty() ? "" : ",") + inventory[h].address;
  }
  if (pool_index > 0) names += " (group " + spec_.host_groups[pool_index - 1].name + ")";
  return names;
}

// Forks the member's process: an ordinary job controller for `member`
// (job `job_id`) in its own process group, writing to the pipes' write
// ends, which this process then closes. The store is closed first (no
// SQLite connection across the fork). The child's pid, or -1 when fork failed.
pid_t ArrayRun::ForkMember(const JobSpec& member, const std::string& job_id, const int out[2],
                           const int err[2]) {
  std::fflush(nullptr);
  store_.reset();  // no SQLite connection across the fork (see store_)
  // Signals wait until the member has its own handlers: one delivered in
  // between would run the watcher's handler in the member, which writes
  // to the array controller's signal pipe.
  sigset_t block, before;
  sigemptyset(&block);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&block, sig);
  sigprocmask(SIG_BLOCK, &block, &before);
  pid_t pid = fork();
  if (pid == 0) {
    // The member: an ordinary job controller, in its own process group.
    setpgid(0, 0);
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaction(sig, &dfl, nullptr);
    sigprocmask(SIG_SETMASK, &before, nullptr);
    dup2(out[1], STDOUT_FILENO);
    dup2(err[1], STDERR_FILENO);
    // Nothing of the array controller's stays open in the member: only the
    // array controller reads a member's output (were a member to keep the
    // read ends, its own or another member's, or the event loop's copies of
    // them, writes would block on a full pipe instead of failing once the
    // array controller is gone), and its signal pipe is its own.
    CloseFdsFrom(3);
    ControllerOptions o;
    o.state_dir = options_.state_dir;
    o.spec_text = options_.spec_text;
    // Hosts another job holds are waited for, not failed on: without the
    // job's `wait:` for as long as it takes (a busy host never costs a
    // member an attempt).
    o.wait = true;
    o.wait_unbounded = true;
    std::_Exit(RunJob(member, MakePlanInput(member, job_id), o));
  }
  sigprocmask(SIG_SETMASK, &before, nullptr);
  close(out[1]);
  close(err[1]);
  return pid;
}

// Each of `run`'s pipes is read as it fills, and closed at its end (the
// member closed it, or died).
void ArrayRun::WatchOutput(Running* run) {
  for (const bool is_out : {true, false}) {
    loop_.WatchFd(is_out ? run->out_fd : run->err_fd, POLLIN, [this, run, is_out](short) {
      int& fd = is_out ? run->out_fd : run->err_fd;
      if (fd < 0) return;
      if (!Drain(fd, is_out ? *run->out : *run->err, is_out ? stdout : stderr,
                 is_out ? echo_out_ : options_.echo)) {
        loop_.UnwatchFd(fd);
        close(fd);
        fd = -1;
      }
    });
  }
}

// The members that exited: the rest of their output read, their pipes
// closed, their attempts finished.
void ArrayRun::ReapExited() {
  for (auto it = running_.begin(); it != running_.end();) {
    int wstatus = 0;
    if (waitpid(it->first, &wstatus, WNOHANG) != it->first) {
      ++it;
      continue;
    }
    Running& r = it->second;
    for (int* fd : {&r.out_fd, &r.err_fd}) {
      if (*fd < 0) continue;
      loop_.UnwatchFd(*fd);
      (void)Drain(*fd, fd == &r.out_fd ? *r.out : *r.err, fd == &r.out_fd ? stdout : stderr,
                  fd == &r.out_fd ? echo_out_ : options_.echo);
      close(*fd);
      *fd = -1;
    }
    const int code = WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 128 + WTERMSIG(wstatus);
    Finish(r, code);
    it = running_.erase(it);
  }
}

// Member attempt `r` ended with `code`: its hosts go back (or aside), and
// the member is recorded succeeded, cancelled, failed, or waiting again.
void ArrayRun::Finish(Running& r, int code) {
  MemberRecord& m = members_[static_cast<size_t>(r.index)];
  pools_[r.pool].Release(r.hosts);
  m.exit_code = code;
  m.ended = WallNow();
  const AttemptOutcome outcome = ReadAttemptOutcome(r, code);
  const std::set<size_t> unavailable_here = NoteAttemptHosts(r, outcome);
  SetNextStatus(r, m, code, outcome.succeeded, !unavailable_here.empty());
  Record(m);
  const bool retrying = m.status == MemberStatus::kWaiting;
  events_.MemberEnded(r.index, r.job_id, m.attempts, code, retrying ? "retrying" : ToString(m.status),
                      tries_[r.index] - 1, *m.ended);
}

// Whether attempt `r` succeeded (its job's record and `code`) and, if it
// failed, which hosts caused it or were unavailable (from its job's events
// and phases).
ArrayRun::AttemptOutcome ArrayRun::ReadAttemptOutcome(const Running& r, int code) const {
  AttemptOutcome outcome;
  if (Result<std::unique_ptr<JobStore>> jobs = JobStore::Open(options_.state_dir); jobs.ok()) {
    Result<JobRecord> job = (*jobs)->GetJob(r.job_id);
    outcome.succeeded = job.ok() && job->status == JobStatus::kSucceeded && code == 0;
    Result<std::vector<EventRecord>> events = (*jobs)->GetEvents(r.job_id);
    Result<std::vector<PhaseRecord>> phases = (*jobs)->GetPhases(r.job_id);
    // Through Slurm a member's next attempt gets other nodes anyway: no
    // slot is set aside for what one allocation's node did.
    if (!outcome.succeeded && events.ok() && phases.ok() && !spec_.slurm) {
      outcome.caused = HostCausedFailures(*events, *phases);
      outcome.unavailable = UnavailableHosts(*events);
    }
  }
  return outcome;
}

// Tells `r`'s pool which of its hosts caused the failure or were
// unavailable, says which it sets aside, and has the member's next attempt
// avoid those that caused it. The hosts of `r` that were unavailable.
std::set<size_t> ArrayRun::NoteAttemptHosts(const Running& r, const AttemptOutcome& outcome) {
  const std::vector<cluster::Host>& inventory = *pool_hosts_[r.pool];
  std::set<size_t> caused_here;
  std::set<size_t> unavailable_here;
  for (size_t h : r.hosts) {
    if (h < inventory.size() && outcome.caused.contains(inventory[h].address)) caused_here.insert(h);
    if (h < inventory.size() && outcome.unavailable.contains(inventory[h].address)) unavailable_here.insert(h);
  }
  for (size_t h : pools_[r.pool].NoteAttempt(r.hosts, caused_here, unavailable_here)) {
    std::string name = inventory[h].address;
    if (r.pool > 0) name += " (group " + spec_.host_groups[r.pool - 1].name + ")";
    const std::string why = outcome.caused.at(inventory[h].address);
    if (unavailable_here.contains(h)) {
      std::fprintf(stderr, "barge: %s is set aside for the rest of the array: it is unavailable, not busy (%s); "
                   "no member waits for it\n", name.c_str(), why.c_str());
    } else {
      std::fprintf(stderr, "barge: %s is set aside for the rest of the array: two attempts in a row failed "
                   "because of it (last: %s)\n", name.c_str(), why.c_str());
    }
    set_aside_.push_back(name + ": " + why);
  }
  avoid_[r.index] = caused_here;
  return unavailable_here;
}

// The member's status after attempt `r` (`host_unavailable`: one of its
// hosts was): succeeded, cancelled (the array stops), waiting again (moved
// off hosts it waited for, stopped by an unavailable host, or a retry
// left), else failed. Moves and unavailable hosts cost no retry.
void ArrayRun::SetNextStatus(const Running& r, MemberRecord& m, int code, bool succeeded, bool host_unavailable) {
  // An attempt that an unavailable host stopped before anything started
  // (the health gate's exit 125) does not count against the retries: the
  // member runs again on other hosts.
  const bool uncounted = !succeeded && !stopping_ && host_unavailable && code == kExitBargeFailure;
  if (uncounted) --tries_[r.index];
  // A member moved off hosts it waited for: they are the ones it avoids.
  const bool moved = r.moving && !succeeded && !stopping_;
  if (moved) {
    --tries_[r.index];
    --m.attempts;  // a busy host never costs a member an attempt
    avoid_[r.index] = waited_on_[r.index];
  }
  if (succeeded) {
    m.status = MemberStatus::kSucceeded;
  } else if (stopping_) {
    m.status = MemberStatus::kCancelled;
  } else if (moved) {
    m.status = MemberStatus::kWaiting;
    waiting_.push_front(r.index);
  } else if (uncounted) {
    m.status = MemberStatus::kWaiting;
    waiting_.push_back(r.index);
    std::fprintf(stderr, "barge: member %d could not start: host(s) unavailable (unhealthy); it runs on other "
                 "hosts, and this attempt does not count against array_retries\n", r.index);
  } else if (tries_[r.index] <= spec_.array_retries) {
    m.status = MemberStatus::kWaiting;
    waiting_.push_back(r.index);
    std::fprintf(stderr, "barge: member %d failed (exit %d): running it again (attempt %d of %d)\n",
                 r.index, code, tries_[r.index] + 1, spec_.array_retries + 1);
  } else {
    m.status = MemberStatus::kFailed;
    std::fprintf(stderr, "barge: member %d failed (exit %d)\n", r.index, code);
  }
}

// After the loop: members that did not end are cancelled, the summary table
// printed, the array's outcome recorded and sent; the exit code.
int ArrayRun::Conclude() {
  for (MemberRecord& m : members_) {
    if (m.status == MemberStatus::kWaiting || m.status == MemberStatus::kRunning) {
      m.status = MemberStatus::kCancelled;
      Record(m);
    }
  }
  SayCounts();
  bool all_ok = true;
  for (const MemberRecord& m : members_) all_ok = all_ok && m.status == MemberStatus::kSucceeded;
  const int code = all_ok ? 0 : stopping_ ? kExitInterrupted : kExitBargeFailure;
  std::fflush(stderr);
  std::string aside_lines;
  for (const std::string& a : set_aside_) aside_lines += "set aside: " + a + "\n";
  Write(summary_to_, "\n" + SummaryTable(members_, WallNow()) + aside_lines);
  array_.status = all_ok ? "succeeded" : stopping_ ? "cancelled" : "failed";
  array_.ended = WallNow();
  array_.exit_code = code;
  if (ArrayStore* s = Store(); s != nullptr) {
    if (Status st = s->UpdateArray(array_); !st.ok()) std::fprintf(stderr, "barge: warning: %s\n", st.message().c_str());
  }
  events_.ArrayEnded(array_.status, code, CountsText(members_), *array_.ended);
  return code;
}

}  // namespace

Status CreateArrayRecord(const std::string& state_dir, const JobSpec& spec, const ArrayParams& params,
                         const std::string& array_id) {
  Result<std::unique_ptr<ArrayStore>> store = ArrayStore::Open(state_dir);
  if (!store.ok()) return store.status();
  ArrayRecord a;
  a.id = array_id;
  a.name = spec.name;
  a.size = static_cast<int>(params.rows.size());
  a.parallel = static_cast<int>(MembersAtOnce(spec, params));
  a.retries = spec.array_retries;
  a.params_json = ParamsToJson(params);
  a.created = WallNow();
  a.controller_pid = static_cast<int>(getpid());
  a.run_dir = RunDir(state_dir, array_id);
  std::vector<MemberRecord> members;
  for (size_t i = 0; i < params.rows.size(); ++i) {
    MemberRecord m;
    m.array_id = array_id;
    m.index = static_cast<int>(i);
    m.params = ParamsText(params, i);
    members.push_back(std::move(m));
  }
  return (*store)->CreateArray(a, members);
}

int RunArray(const JobSpec& spec, const ArrayParams& params, const std::string& array_id,
             const ArrayRunOptions& options) {
  Result<std::unique_ptr<ArrayStore>> opened = ArrayStore::Open(options.state_dir);
  if (!opened.ok()) {
    std::fprintf(stderr, "barge: %s\n", opened.status().message().c_str());
    return kExitBargeFailure;
  }
  std::unique_ptr<ArrayStore> store = std::move(opened).value();
  Result<ArrayRecord> array = store->GetArray(array_id);
  Result<std::vector<MemberRecord>> loaded = array.ok() ? store->GetMembers(array_id) : array.status();
  if (!loaded.ok()) {
    std::fprintf(stderr, "barge: %s\n", loaded.status().message().c_str());
    return kExitBargeFailure;
  }
  ArrayRun run(spec, params, array_id, options, std::move(store), std::move(array).value(),
               std::move(loaded).value());
  return run.Run();
}

}  // namespace barge::runner::array
