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

namespace barge::runner::fleet {
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
  a.run_dir = state_dir + "/runs/" + array_id;
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
  // The store's connection is closed before each fork and opened again
  // after (see launch): SQLite's per-process state (the WAL index mapping
  // and the lock bookkeeping it shares between a process's connections)
  // must not cross a fork. A member that inherited it held no lock of its
  // own on the WAL index: once the array controller died, the next `barge`
  // to open the store took it for unused and reset it, and every later
  // write of the member (its job's outcome) was lost.
  std::unique_ptr<ArrayStore> store = std::move(opened).value();
  auto reopen = [&]() -> ArrayStore* {
    if (store) return store.get();
    Result<std::unique_ptr<ArrayStore>> again = ArrayStore::Open(options.state_dir);
    if (!again.ok()) {
      std::fprintf(stderr, "barge: warning: %s\n", again.status().message().c_str());
      return nullptr;
    }
    store = std::move(again).value();
    return store.get();
  };
  Result<ArrayRecord> array = store->GetArray(array_id);
  Result<std::vector<MemberRecord>> loaded = array.ok() ? store->GetMembers(array_id) : array.status();
  if (!loaded.ok()) {
    std::fprintf(stderr, "barge: %s\n", loaded.status().message().c_str());
    return kExitBargeFailure;
  }
  std::vector<MemberRecord> members = std::move(loaded).value();
  auto record = [&](const MemberRecord& m) {
    ArrayStore* s = reopen();
    if (s == nullptr) return;
    if (Status st = s->UpdateMember(m); !st.ok()) std::fprintf(stderr, "barge: warning: %s\n", st.message().c_str());
  };
  array->status = "running";
  array->controller_pid = static_cast<int>(getpid());
  array->ended.reset();
  array->exit_code.reset();
  (void)store->UpdateArray(*array);

  // One pool per host group (a row's host_group column), after the job's
  // own: pool 0 is the job's hosts, pool g + 1 host group g.
  const size_t at_once = MembersAtOnce(spec, params);
  // Through Slurm (slurm:) each member asks for an allocation of its own:
  // the pool is then one slot per member at once, none of them a host.
  std::vector<cluster::Host> slurm_slots;
  if (spec.slurm) {
    cluster::Host slot;
    slot.address = "slurm";
    slurm_slots.assign(at_once, slot);
  }
  std::vector<const std::vector<cluster::Host>*> pool_hosts = {spec.slurm ? &slurm_slots : &spec.hosts};
  for (const HostGroup& g : spec.host_groups) pool_hosts.push_back(&g.hosts);
  std::vector<HostPool> pools;
  std::vector<size_t> needs;
  for (const auto* hosts : pool_hosts) {
    pools.emplace_back(std::max<size_t>(hosts->size(), 1));
    needs.push_back(spec.slurm ? 1 : HostsPerMember(spec, *hosts));
  }
  std::vector<size_t> pool_of(members.size(), 0);
  for (size_t i = 0; i < members.size() && i < params.rows.size(); ++i) {
    Result<std::optional<size_t>> g = MemberGroup(spec, params, i);
    if (g.ok() && *g) pool_of[i] = **g + 1;
  }
  // "2 host(s) each", or with host groups "host(s) each: 1 of the job's
  // hosts, 1 of group a's 2, 1 of group b's 1".
  std::string each = spec.slurm ? "a Slurm allocation of " + std::to_string(spec.slurm->nodes) + " node(s) each"
                                : std::to_string(needs[0]) + " host(s) each";
  if (!spec.host_groups.empty()) {
    each = "host(s) each: " + std::to_string(needs[0]) + " of the job's hosts";
    for (size_t g = 0; g < spec.host_groups.size(); ++g) {
      each += ", " + std::to_string(needs[g + 1]) + " of group " + spec.host_groups[g].name + "'s " +
              std::to_string(spec.host_groups[g].hosts.size());
    }
  }
  std::deque<int> waiting;
  for (const MemberRecord& m : members) {
    if (m.status == MemberStatus::kWaiting) waiting.push_back(m.index);
  }
  std::fprintf(stderr, "barge: array %s (%s): %zu member(s), %zu to run, at most %zu at once, %s; logs in %s\n",
               array_id.c_str(), spec.name.c_str(), members.size(), waiting.size(), at_once, each.c_str(),
               (options.state_dir + "/runs/<member job id>").c_str());
  ArrayEventStream events(options.events, array_id);
  events.ArrayStarted(static_cast<int>(members.size()), static_cast<int>(waiting.size()), static_cast<int>(at_once),
                      WallNow());
  const bool echo_out = options.echo && options.events != stdout;
  std::FILE* summary_to = options.events == stdout ? stderr : stdout;
  std::string last_counts;
  auto status_line = [&] {
    const std::string counts = CountsText(members);
    if (counts == last_counts) return;
    last_counts = counts;
    std::fprintf(stderr, "barge: array %s: %s\n", array_id.c_str(), counts.c_str());
    std::fflush(stderr);
  };
  // What running members wait for (hosts other jobs hold: their jobs'
  // status `waiting` and its detail), said when it changes; asked from the
  // store every 2 s.
  std::string last_waiting;
  auto next_waiting_look = std::chrono::steady_clock::now();
  bool stopping = false;
  std::map<int, std::set<size_t>> waited_on;  // pool hosts each member waited for, by index
  auto waiting_line = [&](std::map<pid_t, Running>& running) {
    if (std::chrono::steady_clock::now() < next_waiting_look) return;
    next_waiting_look = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    Result<std::unique_ptr<JobStore>> jobs = JobStore::Open(options.state_dir);
    if (!jobs.ok()) return;
    std::map<int, std::string> waits;  // by index
    for (const auto& [pid, r] : running) {
      Result<JobRecord> job = (*jobs)->GetJob(r.job_id);
      if (!job.ok() || job->status != JobStatus::kWaiting) continue;
      Result<std::vector<EventRecord>> evs = (*jobs)->GetEvents(r.job_id);
      if (!evs.ok()) continue;
      for (auto it = evs->rbegin(); it != evs->rend(); ++it) {
        if (it->kind == ToString(JobStatus::kWaiting)) {
          if (!it->detail.empty()) waits[r.index] = it->detail;  // (none yet: said once it has one)
          break;
        }
      }
    }
    // A member that waits while enough other hosts of its pool are free
    // moves there: it is stopped (its controller gives up its place and
    // holds) and runs again, preferring hosts other than those it waited
    // for. Never to hosts it already waited for (two hosts other jobs hold
    // would otherwise see it go back and forth), and one member per look,
    // so two never go for the same hosts.
    for (auto& [pid, r] : running) {
      // (Not through Slurm: there a member waits in Slurm's queue.)
      if (!waits.contains(r.index) || r.moving || stopping || spec.slurm) continue;
      if (!pools[r.pool].NoteWaitAndCanMove(r.hosts, needs[r.pool], &waited_on[r.index])) continue;
      r.moving = true;
      std::fprintf(stderr, "barge: member %d moves to free hosts of its pool (it waited: %s)\n", r.index,
                   waits[r.index].c_str());
      kill(pid, SIGTERM);
      break;
    }
    std::string text;
    for (const auto& [index, what] : waits) {
      text += (text.empty() ? "" : "; ") + std::string("member ") + std::to_string(index) + " " + what;
    }
    if (text == last_waiting) return;
    last_waiting = text;
    if (!text.empty()) {
      std::fprintf(stderr, "barge: array %s: waiting %zu: %s\n", array_id.c_str(), waits.size(), text.c_str());
      std::fflush(stderr);
    }
  };

  // One event loop: the members' output and the signals (one watcher, as
  // every barge process has).
  ssh::EventLoop loop;
  std::deque<int> signals_in;  // delivered, not yet handled
  SignalWatcher signals(&loop, [&signals_in](int signo) { signals_in.push_back(signo); });
  std::map<pid_t, Running> running;
  std::map<int, int> tries;  // attempts in this run, by index (a rerun starts again at 0)
  // Retries move off a failing host: the pool hosts (by index) a member's
  // last failure came from, which its next attempt takes only when no
  // other host is free; and the hosts set aside, for the summary.
  std::map<int, std::set<size_t>> avoid;
  std::vector<std::string> set_aside;

  auto launch = [&](int index, size_t pool_index, std::vector<size_t> hosts) {
    MemberRecord& m = members[static_cast<size_t>(index)];
    HostPool& pool = pools[pool_index];
    const std::vector<cluster::Host>& inventory = *pool_hosts[pool_index];
    std::vector<cluster::Host> member_hosts;
    std::string names;
    for (size_t h : hosts) {
      if (h >= inventory.size()) continue;  // the local engine
      member_hosts.push_back(inventory[h]);
      names += (names.empty() ? "" : ",") + inventory[h].address;
    }
    if (pool_index > 0) names += " (group " + spec.host_groups[pool_index - 1].name + ")";
    Result<JobSpec> member = MemberSpec(spec, params, static_cast<size_t>(index), array_id, member_hosts);
    Running r;
    r.index = index;
    r.pool = pool_index;
    r.hosts = hosts;
    r.job_id = NewJobId();
    ++m.attempts;
    ++tries[index];
    m.job_ids.push_back(r.job_id);
    m.hosts = names.empty() ? "local" : names;
    m.started = WallNow();
    m.ended.reset();
    m.exit_code.reset();
    int out[2], err[2];
    if (!member.ok() || pipe2(out, O_CLOEXEC) != 0) {
      std::fprintf(stderr, "barge: member %d: %s\n", index,
                   member.ok() ? std::strerror(errno) : member.status().message().c_str());
      m.status = MemberStatus::kFailed;
      m.exit_code = kExitBargeFailure;
      m.ended = WallNow();
      pool.Release(hosts);
      record(m);
      return;
    }
    if (pipe2(err, O_CLOEXEC) != 0) {
      close(out[0]);
      close(out[1]);
      m.status = MemberStatus::kFailed;
      pool.Release(hosts);
      record(m);
      return;
    }
    m.status = MemberStatus::kRunning;
    record(m);
    // What the member resolved (its hosts in its pool), for a later down,
    // exec or attach of its job (member_record.h).
    if (Status s = RecordMemberRun(options.state_dir, array_id, index, hosts, r.job_id); !s.ok()) {
      std::fprintf(stderr, "barge: warning: member %d: %s\n", index, s.message().c_str());
    }
    std::fflush(nullptr);
    store.reset();  // no SQLite connection across the fork (see above)
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
      o.state_dir = options.state_dir;
      o.spec_text = options.spec_text;
      // Hosts another job holds are waited for, not failed on: without the
      // job's `wait:` for as long as it takes (a busy host never costs a
      // member an attempt).
      o.wait = true;
      o.wait_unbounded = true;
      std::_Exit(RunJob(*member, MakePlanInput(*member, r.job_id), o));
    }
    sigprocmask(SIG_SETMASK, &before, nullptr);
    close(out[1]);
    close(err[1]);
    if (pid < 0) {
      close(out[0]);
      close(err[0]);
      m.status = MemberStatus::kFailed;
      pool.Release(hosts);
      record(m);
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
    events.MemberStarted(index, r.job_id, m.attempts, m.hosts, *m.started);
    auto placed = running.emplace(pid, std::move(r)).first;
    // Each pipe is read as it fills, and closed at its end (the member
    // closed it, or died).
    Running* run = &placed->second;
    for (const bool is_out : {true, false}) {
      loop.WatchFd(is_out ? run->out_fd : run->err_fd, POLLIN, [&, run, is_out](short) {
        int& fd = is_out ? run->out_fd : run->err_fd;
        if (fd < 0) return;
        if (!Drain(fd, is_out ? *run->out : *run->err, is_out ? stdout : stderr,
                   is_out ? echo_out : options.echo)) {
          loop.UnwatchFd(fd);
          close(fd);
          fd = -1;
        }
      });
    }
  };

  auto finish = [&](Running& r, int code) {
    MemberRecord& m = members[static_cast<size_t>(r.index)];
    pools[r.pool].Release(r.hosts);
    m.exit_code = code;
    m.ended = WallNow();
    bool succeeded = false;
    std::map<std::string, std::string> caused;  // by address: what the host did
    std::set<std::string> unavailable;          // by address: unhealthy, not busy
    if (Result<std::unique_ptr<JobStore>> jobs = JobStore::Open(options.state_dir); jobs.ok()) {
      Result<JobRecord> job = (*jobs)->GetJob(r.job_id);
      succeeded = job.ok() && job->status == JobStatus::kSucceeded && code == 0;
      Result<std::vector<EventRecord>> events = (*jobs)->GetEvents(r.job_id);
      Result<std::vector<PhaseRecord>> phases = (*jobs)->GetPhases(r.job_id);
      // Through Slurm a member's next attempt gets other nodes anyway: no
      // slot is set aside for what one allocation's node did.
      if (!succeeded && events.ok() && phases.ok() && !spec.slurm) {
        caused = HostCausedFailures(*events, *phases);
        unavailable = UnavailableHosts(*events);
      }
    }
    const std::vector<cluster::Host>& inventory = *pool_hosts[r.pool];
    std::set<size_t> caused_here;
    std::set<size_t> unavailable_here;
    for (size_t h : r.hosts) {
      if (h < inventory.size() && caused.contains(inventory[h].address)) caused_here.insert(h);
      if (h < inventory.size() && unavailable.contains(inventory[h].address)) unavailable_here.insert(h);
    }
    for (size_t h : pools[r.pool].NoteAttempt(r.hosts, caused_here, unavailable_here)) {
      std::string name = inventory[h].address;
      if (r.pool > 0) name += " (group " + spec.host_groups[r.pool - 1].name + ")";
      const std::string why = caused.at(inventory[h].address);
      if (unavailable_here.contains(h)) {
        std::fprintf(stderr, "barge: %s is set aside for the rest of the array: it is unavailable, not busy (%s); "
                     "no member waits for it\n", name.c_str(), why.c_str());
      } else {
        std::fprintf(stderr, "barge: %s is set aside for the rest of the array: two attempts in a row failed "
                     "because of it (last: %s)\n", name.c_str(), why.c_str());
      }
      set_aside.push_back(name + ": " + why);
    }
    avoid[r.index] = caused_here;
    // An attempt that an unavailable host stopped before anything started
    // (the health gate's exit 125) does not count against the retries: the
    // member runs again on other hosts.
    const bool uncounted = !succeeded && !stopping && !unavailable_here.empty() && code == kExitBargeFailure;
    if (uncounted) --tries[r.index];
    // A member moved off hosts it waited for: they are the ones it avoids.
    const bool moved = r.moving && !succeeded && !stopping;
    if (moved) {
      --tries[r.index];
      --m.attempts;  // a busy host never costs a member an attempt
      avoid[r.index] = waited_on[r.index];
    }
    if (succeeded) {
      m.status = MemberStatus::kSucceeded;
    } else if (stopping) {
      m.status = MemberStatus::kCancelled;
    } else if (moved) {
      m.status = MemberStatus::kWaiting;
      waiting.push_front(r.index);
    } else if (uncounted) {
      m.status = MemberStatus::kWaiting;
      waiting.push_back(r.index);
      std::fprintf(stderr, "barge: member %d could not start: host(s) unavailable (unhealthy); it runs on other "
                   "hosts, and this attempt does not count against array_retries\n", r.index);
    } else if (tries[r.index] <= spec.array_retries) {
      m.status = MemberStatus::kWaiting;
      waiting.push_back(r.index);
      std::fprintf(stderr, "barge: member %d failed (exit %d): running it again (attempt %d of %d)\n",
                   r.index, code, tries[r.index] + 1, spec.array_retries + 1);
    } else {
      m.status = MemberStatus::kFailed;
      std::fprintf(stderr, "barge: member %d failed (exit %d)\n", r.index, code);
    }
    record(m);
    const bool retrying = m.status == MemberStatus::kWaiting;
    events.MemberEnded(r.index, r.job_id, m.attempts, code, retrying ? "retrying" : ToString(m.status),
                       tries[r.index] - 1, *m.ended);
  };

  for (;;) {
    while (!signals_in.empty()) {
      const int signo = signals_in.front();
      signals_in.pop_front();
      if (!stopping) {
        std::fprintf(stderr, "barge: interrupted (signal %d): stopping the array's members\n", signo);
      }
      stopping = true;
      for (int index : waiting) {
        members[static_cast<size_t>(index)].status = MemberStatus::kCancelled;
        record(members[static_cast<size_t>(index)]);
      }
      waiting.clear();
      for (auto& [pid, r] : running) kill(pid, signo);
    }
    // The first waiting member whose pool has free hosts starts: a member
    // waiting for a busy group does not hold back the members of another.
    // A member whose pool has too few hosts left that are not set aside
    // can never start: it fails now, rather than wait for ever.
    for (auto it = waiting.begin(); !stopping && it != waiting.end();) {
      const size_t p = pool_of[static_cast<size_t>(*it)];
      if (pools[p].usable_count() >= needs[p]) {
        ++it;
        continue;
      }
      MemberRecord& m = members[static_cast<size_t>(*it)];
      m.status = MemberStatus::kFailed;
      if (!m.exit_code) m.exit_code = kExitBargeFailure;
      m.ended = WallNow();
      std::fprintf(stderr, "barge: member %d cannot run: its pool has %zu host(s) not set aside, it needs %zu\n", *it,
                   pools[p].usable_count(), needs[p]);
      record(m);
      it = waiting.erase(it);
    }
    for (auto it = waiting.begin(); !stopping && running.size() < at_once && it != waiting.end();) {
      const size_t p = pool_of[static_cast<size_t>(*it)];
      std::optional<std::vector<size_t>> hosts = pools[p].TakeFreeHosts(needs[p], avoid[*it]);
      if (!hosts) {
        ++it;
        continue;
      }
      const int index = *it;
      it = waiting.erase(it);
      launch(index, p, std::move(*hosts));
    }
    status_line();
    waiting_line(running);
    if (running.empty() && (waiting.empty() || stopping)) break;
    if (running.empty()) {  // nothing runs and nothing can start: cannot happen with a checked pool
      std::fprintf(stderr, "barge: no waiting member can get its host(s) from its pool%s\n",
                   set_aside.empty() ? "" : " (hosts were set aside)");
      break;
    }

    // The members' output as it comes (each pipe is watched from its
    // member's start: watch), signals, or 200 ms for the exits below.
    loop.Poll(std::chrono::milliseconds(200));
    for (auto it = running.begin(); it != running.end();) {
      int wstatus = 0;
      if (waitpid(it->first, &wstatus, WNOHANG) != it->first) {
        ++it;
        continue;
      }
      Running& r = it->second;
      for (int* fd : {&r.out_fd, &r.err_fd}) {
        if (*fd < 0) continue;
        loop.UnwatchFd(*fd);
        (void)Drain(*fd, fd == &r.out_fd ? *r.out : *r.err, fd == &r.out_fd ? stdout : stderr,
                    fd == &r.out_fd ? echo_out : options.echo);
        close(*fd);
        *fd = -1;
      }
      const int code = WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 128 + WTERMSIG(wstatus);
      finish(r, code);
      it = running.erase(it);
    }
  }

  for (MemberRecord& m : members) {
    if (m.status == MemberStatus::kWaiting || m.status == MemberStatus::kRunning) {
      m.status = MemberStatus::kCancelled;
      record(m);
    }
  }
  status_line();
  bool all_ok = true;
  for (const MemberRecord& m : members) all_ok = all_ok && m.status == MemberStatus::kSucceeded;
  const int code = all_ok ? 0 : stopping ? kExitInterrupted : kExitBargeFailure;
  std::fflush(stderr);
  std::string aside_lines;
  for (const std::string& a : set_aside) aside_lines += "set aside: " + a + "\n";
  Write(summary_to, "\n" + SummaryTable(members, WallNow()) + aside_lines);
  array->status = all_ok ? "succeeded" : stopping ? "cancelled" : "failed";
  array->ended = WallNow();
  array->exit_code = code;
  if (ArrayStore* s = reopen(); s != nullptr) {
    if (Status st = s->UpdateArray(*array); !st.ok()) std::fprintf(stderr, "barge: warning: %s\n", st.message().c_str());
  }
  events.ArrayEnded(array->status, code, CountsText(members), *array->ended);
  return code;
}

}  // namespace barge::runner::fleet
