#include "runner/remote/watchdog.h"

#include <algorithm>
#include <random>

#include "runner/remote/image_relay.h"
#include "ssh/quote.h"

namespace barge::runner {

std::string NewHostJobDir(const std::string& job_id) {
  // 12 characters of [a-z0-9] (62 bits), from the kernel's random source.
  static constexpr char kAlphabet[] = "abcdefghijklmnopqrstuvwxyz0123456789";
  std::random_device random;
  std::string token;
  for (int i = 0; i < 12; ++i) token += kAlphabet[random() % 36];
  return "/tmp/barge-" + job_id + "." + token;
}

std::string HostJobDirShown(const std::string& job_id) { return "/tmp/barge-" + job_id + ".XXXXXXXXXXXX"; }

namespace {

// OwnDirTest of a shell word (a quoted path, or "$d").
std::string OwnDirTestOf(const std::string& d) {
  return "{ [ -d " + d + " ] && [ ! -L " + d + " ] && [ -O " + d + " ] && [ \"$(stat -c %a " + d +
         " 2>/dev/null)\" = 700 ]; }";
}

// The relay's cleanup (RelayCleanupOf) of a shell word, where it can have
// something to do: unless the word is the user's own directory, not a link,
// with no relay/ in it. RelayAuthorizeCommand makes relay/ before it adds a
// line to authorized_keys, and RelayCleanupOf removes the lines before
// relay/; so a directory of ours without relay/ has no lines left, and a
// job that pushed no image by relay runs no program for it here.
std::string RelayCleanupIfAnyOf(const std::string& dir) {
  return "{ { [ -d " + dir + " ] && [ ! -L " + dir + " ] && [ -O " + dir + " ] && [ ! -e " + dir + "/relay ] && [ ! -L " +
         dir + "/relay ]; } || " + RelayCleanupOf(dir) + "; }";
}

// DisarmWatchdogCommand of a shell word (a quoted path, or "$d").
std::string DisarmOf(const std::string& dir) {
  // The PID read back is signalled only when watchdog.pid holds two
  // numbers, the PID and its start time (field 22 of /proc/PID/stat, which
  // ArmWatchdogCommand wrote beside it), and /proc shows that PID as ours,
  // leading its own process group (the watchdog runs under setsid), with
  // that start time: a PID reused since is another process. Then the whole
  // group is ended, so the loop's `sleep` (and a hook it runs) go with it.
  // Only shell builtins read /proc.
  //
  // `kill` does not wait: a watchdog still finishing its tick can write
  // $D/now into a directory that `rm -rf` is emptying, which then stays,
  // with that one file; `rm -rf` then fails. Only then does the disarm wait
  // for /proc to show the watchdog gone or a zombie (a loop of builtins)
  // and remove it again. Where nothing was signalled (not ours, no start
  // time: a watchdog armed by an older barge, or one already gone), or the
  // second removal fails too, the directory is first moved into a fresh
  // directory of our own (mktemp -d: no other user can have made it,
  // unlike a fixed name): after the move nothing can be created under the
  // old path, and a watchdog still running ends by itself on its next tick
  // ($D is gone). All in a subshell: callers chain this after their own
  // variables. The usual end runs two programs: the mode's `stat` and `rm`.
  //
  // Nothing is moved, read or removed unless the directory is this user's
  // own, mode 0700, not a link (OwnDirTestOf): another user's directory of
  // that name is left as it is. Checked before the move; once checked, the
  // name cannot be swapped (the user's own entry in a sticky /tmp, or in
  // the user's own directory).
  const std::string tmpl = dir + "'.gone.XXXXXX'";
  return "(" + RelayCleanupIfAnyOf(dir) + "; " + OwnDirTestOf(dir) + " || exit 0; k=0;"
         " p=; t=; { read -r p t < " + dir + "/watchdog.pid; } 2>/dev/null;"
         " case \"$p:$t\" in *[!0-9:]*|:*|*:) ;; *)"
         " if [ -O \"/proc/$p\" ]; then s=; { read -r s < \"/proc/$p/stat\"; } 2>/dev/null;"
         " s=${s##*) }; set -- $s;"
         " [ \"${3:-}\" = \"$p\" ] && [ \"${20:-}\" = \"$t\" ] && kill -TERM \"-$p\" 2>/dev/null && k=1;"
         " fi ;; esac;"
         " if [ $k = 1 ]; then rm -rf " + dir + " 2>/dev/null && exit 0;"
         " i=0; while [ $i -lt 5000 ]; do s=; { read -r s < \"/proc/$p/stat\"; } 2>/dev/null;"
         " case $s in ''|*\") Z \"*) break ;; esac; i=$((i + 1)); done;"
         " rm -rf " + dir + " 2>/dev/null && exit 0; fi;"
         " g=$(mktemp -d " + tmpl + " 2>/dev/null) && mv " + dir + " \"$g/d\" 2>/dev/null && d=\"$g/d\" || d=" + dir +
         "; rm -rf \"$d\" ${g:+\"$g\"}; exit 0)";
}

}  // namespace

std::string OwnDirTest(const std::string& dir) { return OwnDirTestOf(ssh::ShellQuote(dir)); }

std::string OwnDirTestOfWord(const std::string& word) { return OwnDirTestOf(word); }

std::string OwnDirGuard(const std::string& dir) {
  return "{ " + OwnDirTest(dir) + " || { echo " +
         ssh::ShellQuote("barge: " + dir +
                         " is not a directory of this user with mode 0700 (another user may have made it "
                         "first): not using it") +
         " >&2; false; }; }";
}

std::string MakeOwnDir(const std::string& dir) {
  return "{ mkdir -m 700 " + ssh::ShellQuote(dir) + " 2>/dev/null || " + OwnDirGuard(dir) + "; }";
}

std::chrono::seconds WatchdogTick(const WatchdogParams& p) {
  using std::chrono::seconds;
  if (!p.head_container.empty()) return std::clamp<seconds>(std::min(p.lease, p.grace) / 2, seconds(1), seconds(10));
  const seconds judged = p.deadline_after.count() > 0 ? std::min(p.lease, p.deadline_after) : p.lease;
  return std::clamp<seconds>(judged / 2, seconds(1), seconds(60));
}

namespace {

// " && (sets DIR/deadline)" for a job with a `timeout:`; "" without. The
// deadline is the host's clock now plus the time left, unless DIR/deadline
// holds one already (this directory was armed before, on this host's
// clock): arming again keeps the job's deadline instead of starting its
// timeout again. DIR is the user's own 0700 directory (MakeOwnDir checked
// it just before), so nobody else can have written or linked the file; what
// is read back is used only when it is all digits.
std::string DeadlineLine(const WatchdogParams& p) {
  if (p.deadline_after.count() <= 0) return "";
  const std::string file = ssh::ShellQuote(p.dir + "/deadline");
  return " && (t=; { read -r t < " + file + "; } 2>/dev/null; case $t in ''|*[!0-9]*) echo \"$(($(date +%s) + " +
         std::to_string(p.deadline_after.count()) + "))\" > " + file + " ;; esac)";
}

}  // namespace

std::string ArmWatchdogCommand(const WatchdogParams& p) {
  using ssh::ShellQuote;
  const std::string& dir = p.dir;
  std::string docker = ssh::ShellJoin(p.docker);
  // The loop, with every value quoted into it. `timeout` bounds each docker
  // call where it exists (a frozen dockerd hangs the CLI forever). A tick
  // costs two programs (sleep, stat): `: > $D/now` stamps the time without
  // one, and one stat reads it with the lease's; docker is asked only on
  // the head's host, and only once the lease is older than the grace.
  std::string script =
      "D=" + ShellQuote(dir) + "; J=" + ShellQuote(p.job_id) +
      "; LEASE=" + std::to_string(p.lease.count()) + "; GRACE=" + std::to_string(p.grace.count()) +
      "; DEADLINE=0; { read -r DEADLINE < \"$D/deadline\"; } 2>/dev/null"
      "; case $DEADLINE in ''|*[!0-9]*) DEADLINE=0 ;; esac; HEAD=" + ShellQuote(p.head_container) +
      "; HOOK=" + ShellQuote(p.host_hook) + "; TICK=" + std::to_string(WatchdogTick(p).count()) +
      "; T=; command -v timeout >/dev/null 2>&1 && T='timeout 30'"
      "; while sleep $TICK; do"
      " [ -d \"$D\" ] || exit 0;"
      " if : > \"$D/now\" 2>/dev/null; then set -- $(stat -c %Y \"$D/now\" \"$D/lease\" 2>/dev/null);"
      " now=${1:-0}; m=${2:-0}; else now=$(date +%s); m=$(stat -c %Y \"$D/lease\" 2>/dev/null || echo 0); fi;"
      " age=$((now - m)); why=;"
      " [ \"$age\" -gt \"$LEASE\" ] && why='lease expired';"
      // DIR/keep (KeepUntilCommand), read each tick without a program: the
      // job failed and is kept for a look until then, which replaces the
      // timeout and the head's exit as reasons.
      " K=0; { read -r K < \"$D/keep\"; } 2>/dev/null; case $K in ''|*[!0-9]*) K=0 ;; esac;"
      " if [ \"$K\" -gt 0 ]; then [ \"$now\" -ge \"$K\" ] && why='kept for inspection until its end';"
      " else [ \"$DEADLINE\" -gt 0 ] && [ \"$now\" -ge \"$DEADLINE\" ] && why='timeout';"
      " if [ -n \"$HEAD\" ] && [ \"$age\" -gt \"$GRACE\" ]; then"
      " r=$($T " + docker + " inspect --format '{{.State.Running}}' \"$HEAD\" 2>/dev/null);"
      " [ \"$r\" = false ] && why='head exited'; fi; fi;"
      " if [ -n \"$why\" ]; then"
      " echo \"$(date) barge watchdog: $why; removing job $J\" >> \"$D/watchdog.log\";"
      " ids=$($T " + docker + " ps -aq --filter \"label=barge.job=$J\");"
      " [ -n \"$ids\" ] && $T " + docker + " rm -f $ids >/dev/null 2>&1;"
      " [ -n \"$HOOK\" ] && sh -c \"$HOOK\" >/dev/null 2>&1; " +
      RelayCleanupOf("\"$D\"") + ";"
      " rm -rf \"$D\"; exit 0; fi; done";
  // The lease is stamped by the shell itself (`: >` marks the file
  // modified, as `touch` does, without a program); setsid alone detaches
  // the loop (no terminal: nothing sends it a hangup). watchdog.pid holds
  // its PID and that process's start time (field 22 of /proc/PID/stat, set
  // at the fork, read by a builtin), which DisarmOf checks before it
  // signals: setsid, not a group leader here, does not fork again.
  return MakeOwnDir(dir) + " && : > " + ShellQuote(dir + "/lease") + DeadlineLine(p) +
         " && (setsid sh -c " + ShellQuote(script) + " " +
         ShellQuote("barge-watchdog-" + p.job_id) +
         " >/dev/null 2>&1 </dev/null & p=$!; s=; { read -r s < \"/proc/$p/stat\"; } 2>/dev/null; s=${s##*) };"
         " set -- $s; echo \"$p ${20:-}\" > " + ShellQuote(dir + "/watchdog.pid") + ")";
}

std::string KeepUntilCommand(const std::string& job_dir, std::chrono::seconds keep_after) {
  // Written aside and moved into place: the loop never reads half a file.
  const std::string file = ssh::ShellQuote(job_dir + "/keep");
  const std::string next = ssh::ShellQuote(job_dir + "/keep.next");
  return OwnDirTest(job_dir) + " && echo \"$(($(date +%s) + " +
         std::to_string(std::max<long long>(1, keep_after.count())) + "))\" > " + next + " && mv -f " + next + " " + file;
}

std::string RenewLeaseCommand(const std::string& job_dir) {
  return OwnDirTest(job_dir) + " && : > " + ssh::ShellQuote(job_dir + "/lease");
}

std::string DisarmWatchdogCommand(const std::string& job_dir) {
  return DisarmOf(ssh::ShellQuote(job_dir));
}

std::string DisarmJobWatchdogsCommand(const std::string& job_id) {
  // Each directory of the job's name pattern that is ours (another user's
  // is skipped, never read), disarmed as above; `for` gets the pattern
  // itself when nothing matches, which is not a directory of ours.
  const std::string prefix = "/tmp/barge-" + job_id + ".";
  return "(for d in " + ssh::ShellQuote(prefix) + "????????????; do " + OwnDirTestOf("\"$d\"") +
         " || continue; " + DisarmOf("\"$d\"") + "; done; " + RelayLinesCleanupCommand(prefix) + "; exit 0)";
}

}  // namespace barge::runner
