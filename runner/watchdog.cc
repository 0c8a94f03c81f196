#include "runner/watchdog.h"

#include "ssh/quote.h"

namespace barge::runner {

std::string HostJobDir(const std::string& job_id) { return "/tmp/barge-" + job_id; }

std::string ArmWatchdogCommand(const WatchdogParams& p) {
  using ssh::ShellQuote;
  const std::string dir = HostJobDir(p.job_id);
  std::string docker = ssh::ShellJoin(p.docker);
  // The loop, with every value quoted into it. `timeout` bounds each docker
  // call where it exists (a frozen dockerd hangs the CLI forever).
  std::string script =
      "D=" + ShellQuote(dir) + "; J=" + ShellQuote(p.job_id) +
      "; LEASE=" + std::to_string(p.lease.count()) + "; GRACE=" + std::to_string(p.grace.count()) +
      "; DEADLINE=" + std::to_string(p.deadline) + "; HEAD=" + ShellQuote(p.head_container) +
      "; HOOK=" + ShellQuote(p.host_hook) +
      "; T=; command -v timeout >/dev/null 2>&1 && T='timeout 30'"
      "; while sleep 2; do"
      " [ -d \"$D\" ] || exit 0;"
      " now=$(date +%s); m=$(stat -c %Y \"$D/lease\" 2>/dev/null || echo 0); age=$((now - m)); why=;"
      " [ \"$age\" -gt \"$LEASE\" ] && why='lease expired';"
      " [ \"$DEADLINE\" -gt 0 ] && [ \"$now\" -ge \"$DEADLINE\" ] && why='timeout';"
      " if [ -n \"$HEAD\" ] && [ \"$age\" -gt \"$GRACE\" ]; then"
      " r=$($T " + docker + " inspect --format '{{.State.Running}}' \"$HEAD\" 2>/dev/null);"
      " [ \"$r\" = false ] && why='head exited'; fi;"
      " if [ -n \"$why\" ]; then"
      " echo \"$(date) barge watchdog: $why; removing job $J\" >> \"$D/watchdog.log\";"
      " ids=$($T " + docker + " ps -aq --filter \"label=barge.job=$J\");"
      " [ -n \"$ids\" ] && $T " + docker + " rm -f $ids >/dev/null 2>&1;"
      " [ -n \"$HOOK\" ] && sh -c \"$HOOK\" >/dev/null 2>&1;"
      " rm -rf \"$D\"; exit 0; fi; done";
  return "mkdir -m 700 -p " + ShellQuote(dir) + " && touch " + ShellQuote(dir + "/lease") +
         " && (nohup setsid sh -c " + ShellQuote(script) + " " +
         ShellQuote("barge-watchdog-" + p.job_id) +
         " >/dev/null 2>&1 </dev/null & echo $! > " + ShellQuote(dir + "/watchdog.pid") + ")";
}

std::string RenewLeaseCommand(const std::string& job_id) {
  return "touch " + ssh::ShellQuote(HostJobDir(job_id) + "/lease");
}

std::string DisarmWatchdogCommand(const std::string& job_id) {
  const std::string dir = ssh::ShellQuote(HostJobDir(job_id));
  return "if [ -f " + dir + "/watchdog.pid ]; then kill $(cat " + dir +
         "/watchdog.pid) 2>/dev/null; fi; rm -rf " + dir;
}

}  // namespace barge::runner
