// The diagnostics bundle's host scripts and the reading of their answers
// (diagnostics_commands.h).
#include "runner/remote/diagnostics_commands.h"

#include <sstream>

#include <algorithm>
#include <regex>

#include "runner/remote/gpu_health.h"
#include "ssh/quote.h"

namespace barge::runner::diagnostics {
namespace {

std::string Num(long long n) { return std::to_string(n); }

// Every script's first line: D_T runs a step under the step's timeout where
// the host has timeout(1).
std::string Prelude(std::chrono::seconds step) {
  return "D_T=; command -v timeout >/dev/null 2>&1 && D_T='timeout -s KILL " +
         Num(std::max<long long>(1, step.count())) + "'\n";
}

std::string Section(std::string_view title) {
  return "echo " + ssh::ShellQuote(std::string(kSectionPrefix) + std::string(title)) + "\n";
}

std::string Cap(size_t bytes) { return " | head -c " + Num(static_cast<long long>(bytes)); }

}  // namespace

std::string ContainerDiagnosticsScript(const DockerCommands& docker, const std::string& name,
                                       std::chrono::seconds step) {
  const std::string cap = Cap(kSectionCap);
  std::string s = Prelude(step);
  s += Section("docker inspect " + name);
  s += "$D_T " + docker.Line({"inspect", name}) + " 2>&1" + cap + "\n";
  // The process list, kept for the stacks' PIDs (host PIDs: docker top
  // runs ps on the host and keeps the container's processes).
  s += Section("processes (docker top: host PID, state, wait channel, elapsed, command)");
  s += "D_p=$($D_T " + docker.Line({"top", name, "-eo", "pid,stat,wchan:32,etime,args"}) +
       " 2>&1); printf '%s\\n' \"$D_p\"" + cap + "\n";
  s += Section("kernel stacks (/proc/PID/stack)");
  s += "D_n=0; for D_i in $(printf '%s\\n' \"$D_p\" | awk 'NR > 1 && $1 ~ /^[0-9]+$/ { print $1 }'); do "
       "D_n=$((D_n + 1)); if [ \"$D_n\" -gt " + Num(kMaxStackPids) + " ]; then echo '(only the first " +
       Num(kMaxStackPids) + " processes)'; break; fi; echo \"-- pid $D_i\"; "
       "if D_s=$(head -c " + Num(static_cast<long long>(kStackCap)) + " \"/proc/$D_i/stack\" 2>/dev/null) && "
       "[ -n \"$D_s\" ]; then printf '%s\\n' \"$D_s\"; else echo '(not readable: kernel stacks need root)'; fi; "
       "done; [ \"$D_n\" -gt 0 ] || echo '(no process: the container does not run)'\n";
  return s;
}

std::vector<std::string> StuckProcesses(std::string_view answer) {
  std::vector<std::string> out;
  bool in_processes = false;
  bool header = false;
  while (!answer.empty()) {
    const size_t eol = std::min(answer.find('\n'), answer.size());
    const std::string_view line = answer.substr(0, eol);
    answer.remove_prefix(std::min(eol + 1, answer.size()));
    if (line.starts_with(kSectionPrefix)) {
      in_processes = line.substr(kSectionPrefix.size()).starts_with("processes");
      header = in_processes;
      continue;
    }
    if (!in_processes) continue;
    if (header) {  // PID STAT WCHAN ELAPSED COMMAND
      header = false;
      continue;
    }
    std::istringstream fields{std::string(line)};
    std::string pid, stat, wchan, elapsed;
    if (!(fields >> pid >> stat >> wchan >> elapsed) || pid.find_first_not_of("0123456789") != std::string::npos) continue;
    const char state = stat[0];
    const char* what = state == 'T' || state == 't' ? "stopped" : state == 'D' ? "in uninterruptible sleep"
                       : state == 'Z'                  ? "a zombie"
                                                       : nullptr;
    if (!what) continue;
    std::string command;
    std::getline(fields >> std::ws, command);
    out.push_back("pid " + pid + " " + what + " (" + stat + (wchan == "-" ? "" : ", in " + wchan) + "): " +
                  command.substr(0, 120));
  }
  return out;
}

std::string HostDiagnosticsScript(const DockerCommands& docker, const std::string& job_dir,
                                  int64_t since_epoch_s, bool gpus, std::chrono::seconds step) {
  const std::string cap = Cap(kSectionCap);
  const std::string began = Num(since_epoch_s);
  const std::string keep = " | tail -n " + Num(kKernelLogLines) + cap;
  std::string s = Prelude(step);
  // The kernel log since the job began: dmesg's stamps are seconds since
  // boot, so the job's start is turned into that (a line without a stamp
  // goes with the line before it); else the kernel journal, which takes
  // the epoch itself.
  s += Section("kernel log since the job began (Xid lines marked " + std::string(kXidMark) + ")");
  s += "D_u=0; read -r D_u D_x </proc/uptime 2>/dev/null; D_now=$(date +%s); "
       "D_s=$(awk -v u=\"${D_u:-0}\" -v n=\"$D_now\" -v b=" + began +
       " 'BEGIN { s = u - (n - b); if (s < 0) s = 0; printf \"%d\", s }'); "
       "if D_k=$($D_T dmesg 2>&1); then echo \"(dmesg, from ${D_s} s after boot)\"; "
       "printf '%s\\n' \"$D_k\" | awk -v s=\"$D_s\" '{ if (match($0, /^\\[ *[0-9]+\\.[0-9]+\\]/)) "
       "keep = (substr($0, 2, RLENGTH - 2) + 0 >= s); if (keep) { print; n++ } } "
       "END { if (!n) print \"(no kernel line since then)\" }'" + keep + "; "
       "elif command -v journalctl >/dev/null 2>&1 && D_j=$($D_T journalctl -k --since @" + began +
       " --no-pager -o short-monotonic 2>&1) && case $D_j in *'insufficient permissions'*|*'not seeing messages'*) "
       "false;; *) :;; esac; then echo '(kernel journal)'; printf '%s\\n' \"$D_j\"" + keep + "; "
       "else printf 'unreadable: %s\\n' \"$(printf '%s' \"$D_k\" | head -n 1)\"; fi\n";
  if (gpus) {
    s += Section("nvidia-smi -q");
    s += "if command -v nvidia-smi >/dev/null 2>&1; then $D_T nvidia-smi -q 2>&1" + cap +
         "; else echo 'nvidia-smi: not found'; fi\n";
  }
  s += Section("disk (df -h: the engine's root directory, the job's directory)");
  s += "D_r=$($D_T " + docker.Line({"info", "--format", "{{.DockerRootDir}}"}) + " 2>/dev/null) || D_r=; " +
       "D_j=" + ssh::ShellQuote(job_dir.empty() ? "/tmp" : job_dir) +
       "; while [ ! -d \"$D_j\" ]; do D_j=$(dirname \"$D_j\"); done; $D_T df -h ${D_r:+\"$D_r\"} \"$D_j\" 2>&1" + cap + "\n";
  s += Section("memory (free -m, /proc/pressure)");
  s += "if command -v free >/dev/null 2>&1; then free -m 2>&1" + cap +
       "; else head -n 5 /proc/meminfo; fi; for D_f in /proc/pressure/cpu /proc/pressure/memory /proc/pressure/io; "
       "do if [ -r \"$D_f\" ]; then echo \"-- $D_f\"; head -c 1024 \"$D_f\"; fi; done\n";
  return s;
}

std::string MarkXidLines(std::string_view text, int* count) {
  static const std::regex kLine(std::string(gpu::kXidLinePattern), std::regex::extended);
  std::string out;
  out.reserve(text.size());
  int n = 0;
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find('\n', at);
    const size_t next = end == std::string_view::npos ? text.size() : end + 1;
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = text.substr(at, end - at);
    // Anchored, as the GPU gate reads them: only on lines that can match.
    if (line.find("NVRM: Xid ") != std::string_view::npos &&
        std::regex_search(line.begin(), line.end(), kLine, std::regex_constants::match_continuous)) {
      out += kXidMark;
      ++n;
    }
    out += text.substr(at, next - at);
    at = next;
  }
  if (count) *count = n;
  return out;
}

std::string CapText(std::string text, size_t cap) {
  if (text.size() <= cap) return text;
  // Room for the note.
  constexpr size_t kRoom = 80;
  size_t keep = cap > kRoom ? cap - kRoom : 0;
  const size_t eol = text.rfind('\n', keep);
  if (eol != std::string::npos && eol + 1 >= keep - keep / 4) keep = eol + 1;
  const size_t left = text.size() - keep;
  text.resize(keep);
  if (!text.empty() && text.back() != '\n') text += '\n';
  text += "(cut at " + Num(static_cast<long long>(cap)) + " bytes: " + Num(static_cast<long long>(left)) +
          " more left out)\n";
  return text;
}

std::string FileNamePart(std::string_view name) {
  std::string out(name);
  for (char& c : out) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                    c == '_' || c == '-';
    if (!ok) c = '_';
  }
  if (out.empty() || out == "." || out == "..") out = "_" + out;
  return out;
}

}  // namespace barge::runner::diagnostics
