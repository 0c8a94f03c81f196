// A host's failure record: its entries, the rule, the shell that writes it.
#include "runner/remote/host_record.h"

#include <algorithm>
#include <ctime>

#include "runner/console/time_format.h"
#include "ssh/quote.h"

namespace barge::runner {

using ssh::ShellQuote;

std::vector<FaultEntry> RecordOf(const std::vector<Hold>& listed) {
  std::vector<FaultEntry> out;
  for (const Hold& h : listed) {
    if (!IsFault(h)) continue;
    FaultEntry e;
    e.id = h.id;
    e.name = h.name;
    e.at = h.since;
    e.kind = h.fault_kind;
    e.job_id = h.fault_job;
    e.job_name = h.job_name;
    e.user = h.user;
    e.machine = h.machine;
    const long long gpu = NumberOr(h.gpus, -1);
    if (!h.gpus.empty() && gpu >= 0 && gpu < 1024) e.gpu = static_cast<int>(gpu);
    e.serial = h.fault_serial;
    e.detail = h.fault_detail;
    out.push_back(std::move(e));
  }
  std::sort(out.begin(), out.end(),
            [](const FaultEntry& a, const FaultEntry& b) { return a.at != b.at ? a.at > b.at : a.name > b.name; });
  return out;
}

RecordVerdict JudgeRecord(const std::vector<FaultEntry>& record, long long now, const RecordRule& rule,
                    const std::map<int, std::string>& serials) {
  RecordVerdict v;
  const long long window = std::clamp<long long>(rule.window.count(), 0, kRecordMaxAge);
  long long after = now - window;  // entries at or before this do not count
  for (const FaultEntry& e : record) {
    if (e.kind == kForgivenKind && (!v.forgiven || e.at > v.forgiven->at)) v.forgiven = e;
  }
  if (v.forgiven) after = std::max(after, v.forgiven->at);
  for (const FaultEntry& e : record) {
    if (e.kind == kForgivenKind || e.at <= after) continue;
    if (!e.gpu) {
      v.counted.push_back(e);
      continue;
    }
    // A GPU replaced since (another serial at that index) is not the one
    // that failed.
    auto now_serial = serials.find(*e.gpu);
    if (!e.serial.empty() && now_serial != serials.end() && !now_serial->second.empty() &&
        now_serial->second != e.serial) {
      continue;
    }
    v.gpus_out.emplace(*e.gpu, e);  // the newest first: kept
  }
  std::sort(v.counted.begin(), v.counted.end(),
            [](const FaultEntry& a, const FaultEntry& b) { return a.at > b.at; });
  v.host_out = static_cast<long long>(v.counted.size()) > std::max(0, rule.allowed);
  return v;
}

namespace {

std::string Said(const FaultEntry& e) {
  std::string who = e.user.empty() ? "?" : e.user;
  if (!e.machine.empty()) who += "@" + e.machine;
  return (e.kind.empty() ? std::string("failure") : e.kind) + " " +
         FormatUtc(static_cast<std::time_t>(e.at), "%Y-%m-%d %H:%M:%SZ") + " job " +
         (e.job_id.empty() ? "?" : e.job_id) + (e.job_name.empty() ? "" : " " + e.job_name) + " (" + who + ")" +
         (e.detail.empty() ? "" : ": " + e.detail);
}

std::string Window(std::chrono::seconds w) { return ShortDuration(w.count()); }

}  // namespace

std::string OutReason(const std::string& host, const RecordVerdict& v, const RecordRule& rule) {
  std::string s = "its failure record (on the host) has " + std::to_string(v.counted.size()) +
                  " host-caused failure(s) in the last " + Window(rule.window) + ", more than the " +
                  std::to_string(rule.allowed) + " allowed (health.host_failures): ";
  for (size_t i = 0; i < v.counted.size() && i < 3; ++i) s += (i ? "; " : "") + Said(v.counted[i]);
  if (v.counted.size() > 3) s += "; and " + std::to_string(v.counted.size() - 3) + " more";
  return s + "; `barge hosts --forgive " + host + "` clears it";
}

std::string GpuOutReason(const FaultEntry& e) { return "recorded on the host: " + Said(e); }

std::string FaultDetail(std::string_view text) {
  std::string out;
  for (char c : text) {
    const unsigned char u = static_cast<unsigned char>(c);
    out += u < 0x20 || u == 0x7f ? ' ' : c;
  }
  // Runs of spaces (newlines turned into spaces) as one.
  out.erase(std::unique(out.begin(), out.end(), [](char a, char b) { return a == ' ' && b == ' '; }), out.end());
  while (!out.empty() && out.back() == ' ') out.pop_back();
  while (!out.empty() && out.front() == ' ') out.erase(out.begin());
  if (out.size() <= kFaultDetailMax) return out;
  size_t cut = kFaultDetailMax;
  while (cut > 0 && (static_cast<unsigned char>(out[cut]) & 0xC0) == 0x80) --cut;  // a UTF-8 start
  return out.substr(0, cut);
}

std::optional<HostFaultKind> RecordedFailureOf(std::string_view phase, std::string_view outcome,
                                               bool reached_before) {
  if (outcome.empty() || outcome == "ok") return std::nullopt;
  if (phase == "connect") return reached_before ? std::optional(HostFaultKind::kConnect) : std::nullopt;
  if (phase != "preflight") return std::nullopt;
  // The engine's bound (preflight.cc), the holds' h_dk (reservation.cc),
  // preflight's own bound.
  static constexpr std::string_view kNoAnswer[] = {"the Docker engine did not answer within",
                                                   "no answer from the engine within", "preflight did not finish"};
  for (std::string_view k : kNoAnswer) {
    if (outcome.find(k) != std::string_view::npos) return HostFaultKind::kEngine;
  }
  return std::nullopt;
}

namespace {

// Letters, digits, _ . - only: a part of a container name.
std::string NamePart(const std::string& s) {
  std::string out;
  for (char c : s.substr(0, 40)) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                    c == '.' || c == '-';
    out += ok ? c : '_';
  }
  return out.empty() ? "x" : out;
}

// The shell functions and the round of creates: h_dk (a docker call
// bounded by the engine timeout), h_w NAME LABELS... (one create of an
// entry: "already in use" counts as made; the hold image is imported when
// missing; an old CLI without --pull is asked without it), h_round (every
// entry once: fails when one was not made) and h_cap (the cap, by count and
// age). h_now: the host's clock when the script began.
std::string WriterScript(const DockerCommands& docker, const std::vector<FaultEntry>& entries, int seq,
                         std::chrono::seconds engine_timeout) {
  std::string s;
  s += "H_T=; command -v timeout >/dev/null 2>&1 && H_T='timeout -s KILL " +
       std::to_string(std::max<long long>(1, engine_timeout.count())) + "'\n";
  s += "h_dk() { $H_T " + docker.Line({}) + " \"$@\"; }\n";
  s += "h_now=$(date +%s); H_I=barge/hold:1; H_P='--pull never'\n";
  s += "h_w() { h_n=$1; shift; h_try=0; while :; do h_o=$(h_dk create --name \"$h_n\" $H_P --network none \"$@\" "
       "\"$H_I\" hold 2>&1) && return 0; case $h_o in *'already in use'*) return 0;; esac; "
       "h_try=$((h_try + 1)); [ $h_try -lt 3 ] || return 1; case $h_o in *'unknown flag'*) H_P=;; *) "
       "h_dk image inspect \"$H_I\" >/dev/null 2>&1 && return 1; "
       "dd if=/dev/zero bs=1024 count=1 2>/dev/null | h_dk import - \"$H_I\" >/dev/null 2>&1 || return 1;; esac; "
       "done; }\n";
  s += "h_round() { h_r=0\n";
  for (size_t i = 0; i < entries.size(); ++i) {
    const FaultEntry& e = entries[i];
    const std::string name = std::string(kFaultPrefix) + "$h_now-" + NamePart(e.job_id.empty() ? e.user : e.job_id) +
                             "-" + std::to_string(seq) + "-" + std::to_string(i);
    s += "h_w \"" + name + "\" --label \"barge.hold.since=$h_now\" --label " +
         ShellQuote("barge.hold.name=" + FaultDetail(e.job_name)) + " --label " +
         ShellQuote("barge.hold.user=" + FaultDetail(e.user)) + " --label " +
         ShellQuote("barge.hold.machine=" + FaultDetail(e.machine)) + " --label " +
         ShellQuote("barge.hold.gpus=" + (e.gpu ? std::to_string(*e.gpu) : std::string())) + " --label " +
         ShellQuote("barge.fault=" + FaultDetail(e.kind)) + " --label " +
         ShellQuote("barge.fault.job=" + FaultDetail(e.job_id)) + " --label " +
         ShellQuote("barge.fault.serial=" + FaultDetail(e.serial)) + " --label " +
         ShellQuote("barge.fault.detail=" + FaultDetail(e.detail)) + " || h_r=1\n";
  }
  s += "return $h_r; }\n";
  // The newest kRecordCap, none older than kRecordMaxAge: the rest goes
  // (by container ID), in one rm.
  s += "h_cap() { h_o=$(h_dk ps -a --filter label=" + std::string(kFaultLabel) + " --format '{{.Label \"barge.hold.since\"}} {{.ID}}' "
       "2>/dev/null) || return 1; h_old=$((h_now - " + std::to_string(kRecordMaxAge) + ")); "
       "h_ids=$(printf '%s\\n' \"$h_o\" | sort -rn | { h_i=0; while read -r h_s h_id; do [ -n \"$h_id\" ] || continue; "
       "h_i=$((h_i + 1)); case $h_s in ''|*[!0-9]*) h_s=0;; esac; "
       "if [ $h_i -gt " + std::to_string(kRecordCap) + " ] || [ $h_s -lt $h_old ]; then echo \"$h_id\"; fi; done; }); "
       "[ -z \"$h_ids\" ] || h_dk rm -f $h_ids >/dev/null 2>&1; }\n";
  return s;
}

}  // namespace

std::string RecordFaultsCommand(const DockerCommands& docker, const std::vector<FaultEntry>& entries, int seq,
                                std::chrono::seconds engine_timeout, std::chrono::seconds give_up) {
  std::string inner = WriterScript(docker, entries, seq, engine_timeout);
  inner += "h_end=$((h_now + " + std::to_string(std::max<long long>(0, give_up.count())) +
           ")); until h_round; do [ \"$(date +%s)\" -lt $h_end ] || exit 1; sleep 10; done; h_cap\n";
  // Detached: the session may close (the job ends) while the engine is
  // still frozen; nothing of it writes to the channel.
  return "nohup sh -c " + ShellQuote(inner) + " >/dev/null 2>&1 </dev/null &";
}

std::string RecordFaultsNowCommand(const DockerCommands& docker, const std::vector<FaultEntry>& entries, int seq,
                                   std::chrono::seconds engine_timeout) {
  return WriterScript(docker, entries, seq, engine_timeout) +
         "h_round; h_rc=$?; h_cap; [ $h_rc -eq 0 ] || echo 'error: the record could not be written: '\"$h_o\"; "
         "exit $h_rc\n";
}

}  // namespace barge::runner
