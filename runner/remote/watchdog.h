// The teardown guarantee that needs no controller: before any container of
// a job starts, barge arms on every host a watchdog, a plain POSIX shell loop
// started with setsid (nothing is installed), that removes the host's
// containers of the job, runs the host teardown hook and removes the job's
// per-host directory when
//   (a) on the head's host, the head container has exited and the controller
//       has not renewed its lease for a grace period;
//   (b) the job's `timeout:` has passed (plus the same grace, so the
//       controller acts first when it is alive), judged on the host's own
//       clock: the controller sends how long is left (a duration, never a
//       time of its own clock), the host adds it to its clock when the
//       watchdog is first armed in DIR and keeps the result in
//       DIR/deadline, which arming again there keeps;
//   (c) the controller has not renewed the lease for `lease:` (default 10m);
//   (d) a failed job kept for a look (`on_failure: {keep: D}`,
//       KeepUntilCommand): the host's clock reached DIR/keep, its deadline
//       on the host's clock, which the loop reads at every tick; while it
//       is there, (a) and (b) do not apply (the head has exited on purpose,
//       and the keep may outlast the timeout), (c) still does.
// Whatever the reason, it also removes the image relay's authorized_keys
// lines of DIR (RelayCleanupOf), which a controller killed during
// `image_pull: push` leaves in ~/.ssh.
// The controller renews the lease (touches DIR/lease) on every host
// periodically over its open sessions; normal teardown disarms the watchdog
// (kills it and removes DIR). The watchdog then exits by itself too, since
// it ends whenever DIR is gone.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace barge::runner {

struct WatchdogParams {
  std::string job_id;
  std::string dir;                  // the job's directory on the host (NewHostJobDir)
  std::vector<std::string> docker;  // the host's docker command words
  std::string head_container;       // on the head's host; empty elsewhere
  std::chrono::seconds lease{600};
  std::chrono::seconds grace{30};
  // The `timeout:` deadline, as the time left until it from when the line
  // reaches the host (the job's timeout left, plus the grace); 0 = none.
  // The host sets DIR/deadline to its own clock plus this at the first
  // arming in DIR; arming again there keeps it.
  std::chrono::seconds deadline_after{0};
  std::string host_hook;  // substituted host teardown hook, or empty
};

// A job's directory on a host: /tmp/barge-<job id>.<12 random [a-z0-9]>,
// a new name each time the controller sets a host up (every connect of a
// host, a spare's, a lost host's again). The name is drawn here and shown
// to no one before barge makes the directory on the host, so another user
// of the host cannot make it first (a fixed name, known from the job id in
// `ps` or another host's /tmp, could be: then every later step refused
// the host). The controller keeps each host's (HostState::job_dir).
std::string NewHostJobDir(const std::string& job_id);
// How `barge plan` shows it (no host is contacted, no name is drawn):
// /tmp/barge-<job id>.XXXXXXXXXXXX.
std::string HostJobDirShown(const std::string& job_id);

// A shell test, true when `dir` is a directory (not a symlink) owned by the
// user running it, mode 0700: what each step checks before it writes in a
// job's host directory (that it is still the one barge made).
std::string OwnDirTest(const std::string& dir);
// The same for a shell word that names the directory (a quoted path, or
// "$d" where the caller's command sets d).
std::string OwnDirTestOfWord(const std::string& word);
// The same as a guard for a command chain (`GUARD && ...`): false, with an
// error naming `dir` on stderr, when the test fails.
std::string OwnDirGuard(const std::string& dir);
// Makes `dir` (mode 0700), or, when the name exists, checks it as
// OwnDirGuard does: for the first step that needs the job's directory on
// a host (arming the watchdog; the registry login, which comes before).
std::string MakeOwnDir(const std::string& dir);

// How often the watchdog looks (a look runs two small programs: `sleep` and
// `stat`). On the head's host, which also watches the head's exit: half
// the shorter of lease and grace, from 1 to 10 s. On every other host,
// which only has the lease, the timeout and the keep to judge: half the
// shorter of the lease and the time left to the timeout's deadline, from 1
// to 60 s (60 s with the default lease), so a fleet's
// watchdogs cost its hosts a sixth of what a 10 s look would; a killed
// controller's workers then go at most one such look after their lease
// or deadline.
std::chrono::seconds WatchdogTick(const WatchdogParams& p);

// A command line that creates the per-host directory (0700), the lease and
// (with p.deadline_after) DIR/deadline unless it holds one already, and
// starts the watchdog detached from the session; prints nothing. A
// directory of that name that is not the SSH user's own 0700 one (another
// user made it first) fails it, naming the path, and nothing is written.
std::string ArmWatchdogCommand(const WatchdogParams& p);

// The job failed and is kept for a look (`on_failure: {keep: D}`): its
// watchdog in `job_dir` removes it when the host's clock passes its own
// now plus `keep_after` (what is left of the keep, plus the grace: a
// duration, as the timeout's), or when the lease lapses, and no longer for
// the head's exit or the timeout. Writes DIR/keep (aside, then moved into
// place) only in the job's own directory.
std::string KeepUntilCommand(const std::string& job_dir, std::chrono::seconds keep_after);

// Renews the lease (only in the job's own directory `job_dir`).
std::string RenewLeaseCommand(const std::string& job_dir);

// Stops the watchdog and everything it started (its process group, once
// the PID read back is checked to be the watchdog ArmWatchdogCommand
// started: ours, leading its group, with the start time written beside
// it), removes the image relay's authorized_keys lines of `job_dir` where
// it has any (RelayCleanupOf: they are in ~/.ssh, not under the
// directory) and the per-host directory `job_dir`. Exits 0; runs in a
// subshell; the usual end runs two programs (stat, rm).
std::string DisarmWatchdogCommand(const std::string& job_dir);
// The same for every directory of job `job_id` on the host that is the SSH
// user's own (OwnDirTest), whatever its random part: for a job whose
// controller is gone (`barge down`), which does not know the names. The
// relay's authorized_keys lines of every directory of the job go too, also
// where the directory itself is gone (a host whose /tmp was cleared).
std::string DisarmJobWatchdogsCommand(const std::string& job_id);

}  // namespace barge::runner
