// Reservations held on the hosts: requests, the host script, its reply.
#include "runner/remote/reservation.h"

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <limits>
#include <map>

#include "runner/console/table.h"
#include "runner/console/time_format.h"
#include "ssh/quote.h"

namespace barge::runner {

using ssh::ShellQuote;

std::string HostHoldName() { return std::string(kHoldPrefix) + "host"; }
std::string GpuHoldName(int index) { return std::string(kHoldPrefix) + "gpu-" + std::to_string(index); }
std::string PortHoldName(int port) { return std::string(kHoldPrefix) + "port-" + std::to_string(port); }
std::string LeaseName(const std::string& job_id, long long renewed) {
  return std::string(kLeasePrefix) + job_id + "." + std::to_string(renewed);
}

std::string TicketName(const std::string& job_id) { return std::string(kTicketPrefix) + job_id; }

std::optional<long long> LeaseRenewedAt(std::string_view name) {
  if (name.substr(0, kLeasePrefix.size()) != kLeasePrefix) return std::nullopt;
  const size_t dot = name.rfind('.');
  if (dot == std::string_view::npos || dot <= kLeasePrefix.size() || dot + 1 == name.size() ||
      name.size() - dot > 19) {
    return std::nullopt;
  }
  const std::string_view t = name.substr(dot + 1);
  if (!std::all_of(t.begin(), t.end(), [](char c) { return c >= '0' && c <= '9'; })) return std::nullopt;
  return std::stoll(std::string(t));
}

bool IsLease(const Hold& h) { return h.name.rfind(std::string(kLeasePrefix), 0) == 0; }

bool IsTicket(const Hold& h) { return h.name.rfind(std::string(kTicketPrefix), 0) == 0; }

bool IsFault(const Hold& h) { return h.name.rfind(std::string(kFaultPrefix), 0) == 0; }

bool TicketBefore(const Hold& a, const Hold& b) {
  return a.since != b.since ? a.since < b.since : a.job_id < b.job_id;
}

std::vector<Hold> Queue(const std::vector<Hold>& holds, long long now) {
  std::vector<Hold> out;
  for (const Hold& h : holds) {
    if (IsTicket(h) && !IsStale(h, now)) out.push_back(h);
  }
  std::sort(out.begin(), out.end(), TicketBefore);
  return out;
}

long long PlaceInLine(const std::vector<std::pair<long long, std::vector<Hold>>>& seen,
                      const std::string& job_id) {
  long long place = 1;
  for (const auto& [host_now, holds] : seen) {
    place = std::max(place, host_now);
    for (const Hold& t : Queue(holds, host_now)) {
      if (t.job_id != job_id) place = std::max(place, t.since + 1);
    }
  }
  return place;
}

bool QueuedBehindAnother(const std::vector<Hold>& holds, long long now, const std::string& job_id,
                         std::optional<long long> since) {
  Hold mine;
  mine.job_id = job_id;
  mine.since = since.value_or(0);
  return std::any_of(holds.begin(), holds.end(), [&](const Hold& h) {
    return h.job_id != job_id && IsTicket(h) && !IsStale(h, now) && (!since || TicketBefore(h, mine));
  });
}

void ApplyEngineLeases(std::vector<Hold>* holds) {
  std::map<std::string, long long> newest;
  for (const Hold& h : *holds) {
    if (!IsLease(h) || h.job_id.empty()) continue;
    std::optional<long long> t = LeaseRenewedAt(h.name);
    if (!t) continue;
    auto [it, fresh] = newest.emplace(h.job_id, *t);
    if (!fresh) it->second = std::max(it->second, *t);
  }
  for (Hold& h : *holds) {
    auto it = newest.find(h.job_id);
    h.lease_renewed = it == newest.end() ? std::nullopt : std::optional<long long>(it->second);
  }
}

std::string LeaseIdOf(const std::vector<Hold>& holds, const std::string& job_id) {
  std::string id;
  long long best = -1;
  for (const Hold& h : holds) {
    if (h.job_id != job_id || !IsLease(h)) continue;
    std::optional<long long> t = LeaseRenewedAt(h.name);
    if (t && *t > best) {
      best = *t;
      id = h.id;
    }
  }
  return id;
}

namespace {

// "2" → 2; anything else (all, device=..., 0, junk) → nullopt.
std::optional<int> GpuCount(const std::string& v) {
  if (v.empty() || v.size() > 4 || !std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return std::nullopt;
  }
  const int n = std::stoi(v);
  return n > 0 ? std::optional<int>(n) : std::nullopt;
}

// "\"device=0,1\"" or "device=0,1" → {0, 1}; nullopt when not a list of
// indices (UUIDs hold the whole host).
std::optional<std::vector<int>> GpuDevices(std::string v) {
  if (v.size() >= 2 && v.front() == '"' && v.back() == '"') v = v.substr(1, v.size() - 2);
  if (v.rfind("device=", 0) != 0) return std::nullopt;
  v = v.substr(7);
  std::vector<int> out;
  size_t pos = 0;
  while (pos <= v.size()) {
    size_t comma = v.find(',', pos);
    std::string item = v.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    std::optional<int> n = item == "0" ? std::optional<int>(0) : GpuCount(item);
    if (!n) return std::nullopt;
    out.push_back(*n);
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return out;
}



std::string Secs(std::chrono::seconds s) { return std::to_string(LeaseSeconds(s)); }

// The shell helpers every host script starts with. h_dk: a docker call
// bounded by the engine timeout (one it killed prints "no answer from the
// engine within Ns"). h_ls: ONE `docker ps` of the holds and
// leases, read by the shell itself (parameter expansions, no program per
// line): it sets H_A to the "hold" lines and H_X to the other jobs' holds
// and leases that are stale by the rule in reservation.h ("ID<tab>what",
// one a line), judged at H_now when it is set; H_Q to 1 when another job's
// live ticket comes before the job's own place (H_TS, then H_J: TicketBefore)
// when H_now and H_TS are set; H_L holds the leases listed
// ("JOB.T" lines) and h_lr JOB sets h_m to that job's newest T. h_lt A B:
// A sorts before B byte by byte (as std::string's <). h_st
// removes the stale ones (by container ID, so never a fresh hold of the
// same name) and says "stale ..." for each; it succeeds when it removed one.
std::string Prelude(const DockerCommands& docker, std::chrono::seconds engine_timeout) {
  std::string s;
  s += "H_T=; command -v timeout >/dev/null 2>&1 && H_T='timeout -s KILL " + Secs(engine_timeout) + "'\n";
  // A call the timeout killed says so (it printed nothing of its own).
  s += "h_dk() { $H_T " + docker.Line({}) + " \"$@\"; h_rc=$?; [ $h_rc -eq 137 ] && [ -n \"$H_T\" ] && "
       "echo \"no answer from the engine within " + Secs(engine_timeout) + "s\"; return $h_rc; }\n";
  s += "H_NL='\n'\n";
  s += "h_lt() { [ \"$1\" != \"$2\" ] && [ \"$(printf '%s\\n%s\\n' \"$1\" \"$2\" | LC_ALL=C sort | head -n 1)\" = \"$1\" ]; }\n";
  s += "H_F='{{.ID}}\\t{{.Names}}\\t{{.Label \"barge.job\"}}\\t{{.Label \"barge.hold.name\"}}\\t"
       "{{.Label \"barge.hold.user\"}}\\t{{.Label \"barge.hold.machine\"}}\\t{{.Label \"barge.hold.gpus\"}}\\t"
       "{{.Label \"barge.hold.since\"}}\\t{{.Label \"barge.hold.expires\"}}\\t{{.Label \"barge.hold.lease\"}}\\t"
       "{{.Label \"barge.hold.v\"}}\\t{{.Label \"barge.fault\"}}\\t{{.Label \"barge.fault.job\"}}\\t"
       "{{.Label \"barge.fault.serial\"}}\\t{{.Label \"barge.fault.detail\"}}\\t"
       "{{.Label \"barge.hold\"}}{{.Label \"barge.fault\"}}'\n";
  s += "h_lr() { h_m=; IFS=$H_NL; for h_e in $H_L; do case $h_e in \"$1\".*) h_t=${h_e##*.}; "
       "{ [ -z \"$h_m\" ] || [ \"$h_t\" -gt \"$h_m\" ]; } && h_m=$h_t;; esac; done; IFS=$h_f; }\n";
  // Fields of a listed line: 1 ID, 2 name, 3 job, 4 job name, 5-7 user,
  // machine, GPUs, 8 since, 9 expires, 10 lease, 11 format, 12-15 a
  // failure record entry's kind, job, GPU serial and detail,
  // 16 the hold's or the entry's kind: a line without one (ending in a tab)
  // is a container only named like them, dropped first.
  s += "h_ls() { h_o=$(h_dk ps -a --filter " + ShellQuote("name=" + std::string(kRecordsNameFilter)) +
       " --format \"$H_F\" 2>&1) || "
       "{ H_A=\"error: listing holds: $h_o\"; return 1; }; H_A=; H_X=; H_L=; H_Q=; set -f; h_f=$IFS; IFS=$H_NL; "
       "h_k=; for h_l in $h_o; do case $h_l in *\"\t\") ;; *) h_k=\"$h_k${h_k:+$H_NL}$h_l\";; esac; done; h_o=$h_k; "
       "for h_l in $h_o; do h_r=${h_l#*\t}; h_n=${h_r%%\t*}; case $h_n in " + std::string(kLeasePrefix) +
       "*.*) h_t=${h_n##*.}; case $h_t in ''|*[!0-9]*) ;; *) H_L=\"$H_L$H_NL${h_n#" + std::string(kLeasePrefix) +
       "}\";; esac;; esac; done; "
       "for h_l in $h_o; do IFS=$h_f; "
       "h_r=${h_l#*\t}; h_n=${h_r%%\t*}; h_r=${h_r#*\t}; h_j=${h_r%%\t*}; h_r=${h_r#*\t}; h_jn=${h_r%%\t*}; "
       "h_r=${h_r#*\t}; h_r=${h_r#*\t}; h_r=${h_r#*\t}; h_r=${h_r#*\t}; h_s=${h_r%%\t*}; h_r=${h_r#*\t}; "
       "h_e=${h_r%%\t*}; h_r=${h_r#*\t}; h_le=${h_r%%\t*}; h_v=${h_r#*\t}; h_v=${h_v%%\t*}; "
       "h_sl=; if [ \"$h_j\" != \"$H_J\" ] && [ -n \"$H_now\" ] && [ -n \"$h_j\" ]; then "
       "case $h_le in ''|*[!0-9]*) h_le=0;; esac; case $h_s in ''|*[!0-9]*) h_s=0;; esac; "
       "case $h_e in ''|*[!0-9]*) h_e=0;; esac; "
       "if [ \"$h_le\" -gt 0 ]; then h_g=$h_le; [ \"$h_g\" -gt 60 ] && h_g=60; h_lr \"$h_j\"; "
       "if [ -n \"$h_m\" ]; then h_at=$((h_m + h_le + h_g)); elif [ \"$h_v\" = " + std::to_string(kHoldFormat) +
       " ]; then h_at=0; else h_at=$((h_e + h_g)); fi; "
       "[ \"$H_now\" -gt \"$h_at\" ] && { H_X=\"$H_X${H_X:+$H_NL}${h_l%%\t*}\t$h_n (job $h_j $h_jn)\"; h_sl=1; }; fi; "
       // Queue: another job's live ticket before the job's own place.
       "case $h_n in " + std::string(kTicketPrefix) + "*) if [ -z \"$h_sl\" ] && [ \"${H_TS:-0}\" -gt 0 ]; then "
       "if [ \"$h_s\" -lt \"$H_TS\" ] || { [ \"$h_s\" -eq \"$H_TS\" ] && h_lt \"$h_j\" \"$H_J\"; }; then H_Q=1; fi; "
       "fi;; esac; fi; "
       "H_A=\"$H_A${H_A:+$H_NL}hold\t$h_l\"; IFS=$H_NL; done; IFS=$h_f; set +f; }\n";
  s += "h_st() { [ -n \"$H_X\" ] || return 1; h_y=1; set -f; h_f=$IFS; IFS=$H_NL; for h_x in $H_X; do IFS=$h_f; "
       "h_dk rm -f \"${h_x%%\t*}\" >/dev/null 2>&1 && { echo \"stale ${h_x#*\t}\"; h_y=0; }; done; "
       "IFS=$h_f; set +f; H_X=; return $h_y; }\n";
  return s;
}

}  // namespace

long long NumberOr(const std::string& s, long long fallback) {
  try {
    size_t used = 0;
    const long long v = std::stoll(s, &used);
    return used == s.size() ? v : fallback;
  } catch (...) {
    return fallback;
  }
}

long long LeaseSeconds(std::chrono::seconds lease) { return std::max<long long>(1, lease.count()); }

std::vector<std::string> SplitTabs(std::string_view line) {
  std::vector<std::string> out;
  size_t pos = 0;
  for (;;) {
    size_t tab = line.find('\t', pos);
    out.emplace_back(line.substr(pos, tab == std::string_view::npos ? std::string_view::npos : tab - pos));
    if (tab == std::string_view::npos) break;
    pos = tab + 1;
  }
  return out;
}

HoldRequest RequestFor(const std::vector<HoldNode>& nodes, std::optional<int> gpu_total,
                       std::vector<int> ports) {
  HoldRequest r;
  if (nodes.empty() || !gpu_total || *gpu_total <= 0) return r;
  int count = 0;
  std::set<int> devices;
  for (const HoldNode& n : nodes) {
    if (!n.gpus) return r;
    if (std::optional<int> c = GpuCount(*n.gpus)) {
      count += *c;
    } else if (std::optional<std::vector<int>> d = GpuDevices(*n.gpus)) {
      devices.insert(d->begin(), d->end());
    } else {
      return r;  // "all", UUIDs: the whole host
    }
  }
  // Counts and device lists on one host: hold the whole host (the slices
  // could overlap the listed devices).
  if (count > 0 && !devices.empty()) return r;
  r.exclusive = false;
  r.gpu_total = *gpu_total;
  r.gpu_count = count;
  r.gpu_devices.assign(devices.begin(), devices.end());
  std::sort(ports.begin(), ports.end());
  ports.erase(std::unique(ports.begin(), ports.end()), ports.end());
  r.ports = std::move(ports);
  return r;
}

bool AsksAnything(const HoldRequest& r) {
  return r.exclusive || r.gpu_count > 0 || !r.gpu_devices.empty() || !r.ports.empty();
}

HoldRequest SharedRequestFor(const std::vector<HoldNode>& nodes, std::vector<int> ports) {
  HoldRequest r;
  r.exclusive = false;
  std::set<int> devices;
  for (const HoldNode& n : nodes) {
    if (!n.gpus) continue;
    if (std::optional<std::vector<int>> d = GpuDevices(*n.gpus)) devices.insert(d->begin(), d->end());
  }
  r.gpu_devices.assign(devices.begin(), devices.end());
  r.gpu_total = devices.empty() ? 0 : *devices.rbegin() + 1;
  std::sort(ports.begin(), ports.end());
  ports.erase(std::unique(ports.begin(), ports.end()), ports.end());
  r.ports = std::move(ports);
  return r;
}

std::vector<int> ChooseGpus(int total, const std::set<int>& held, int want) {
  std::vector<int> out;
  for (int i = 0; i < total && static_cast<int>(out.size()) < want; ++i) {
    if (!held.count(i)) out.push_back(i);
  }
  return out;
}

long long StaleGrace(long long lease_seconds) { return std::clamp<long long>(lease_seconds, 0, 60); }

namespace {

// a + b, held at the ends of long long: times and durations come from
// labels any barge user of the host can write.
long long SaturatingAdd(long long a, long long b) {
  long long sum = 0;
  if (!__builtin_add_overflow(a, b, &sum)) return sum;
  return b > 0 ? std::numeric_limits<long long>::max() : std::numeric_limits<long long>::min();
}

}  // namespace

std::optional<long long> StaleAt(const Hold& h) {
  if (h.job_id.empty() || h.lease <= 0) return std::nullopt;  // not barge's: left alone
  const long long grace = StaleGrace(h.lease);
  if (h.lease_renewed) return SaturatingAdd(SaturatingAdd(*h.lease_renewed, h.lease), grace);
  // No lease of its job on the engine: released, or its controller went
  // between the lease and the hold: stale since it was made. An older
  // barge's hold (no lease ever): at its labelled expiry.
  if (h.format >= kHoldFormat) return h.since;
  return SaturatingAdd(h.expires, grace);
}

bool IsStale(const Hold& h, long long now) {
  std::optional<long long> at = StaleAt(h);
  if (at && !h.lease_renewed && h.format >= kHoldFormat) return true;  // no lease: at once
  return at && now > *at;
}

HoldReply ParseHoldReply(std::string_view text) {
  HoldReply reply;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    std::string_view line = text.substr(pos, nl == std::string_view::npos ? text.size() - pos : nl - pos);
    pos = nl == std::string_view::npos ? text.size() : nl + 1;
    if (line.rfind("now ", 0) == 0) {
      reply.now = NumberOr(std::string(line.substr(4)), 0);
    } else if (line.rfind("took ", 0) == 0) {
      // The lease and the ticket are not holds: taken lists what the job holds.
      const std::string_view name = line.substr(5);
      if (name.rfind(kLeasePrefix, 0) != 0 && name.rfind(kTicketPrefix, 0) != 0) {
        reply.taken.emplace_back(name);
      }
    } else if (line.rfind("stale ", 0) == 0) {
      reply.removed_stale.emplace_back(line.substr(6));
    } else if (line.rfind("hold\t", 0) == 0) {
      std::vector<std::string> f = SplitTabs(line);
      if (f.size() < 12) continue;
      Hold h;
      h.id = f[1];
      h.name = f[2];
      h.job_id = f[3];
      h.job_name = f[4];
      h.user = f[5];
      h.machine = f[6];
      h.gpus = f[7];
      h.since = NumberOr(f[8], 0);
      h.expires = NumberOr(f[9], 0);
      h.lease = NumberOr(f[10], 0);
      h.format = static_cast<int>(NumberOr(f[11], 1));
      if (f.size() >= 16) {
        h.fault_kind = f[12];
        h.fault_job = f[13];
        h.fault_serial = f[14];
        h.fault_detail = f[15];
      }
      reply.holds.push_back(std::move(h));
    } else if (!line.empty()) {
      reply.errors += (reply.errors.empty() ? "" : "; ") + std::string(line);
    }
  }
  ApplyEngineLeases(&reply.holds);
  return reply;
}

std::vector<Hold> Conflicts(const HoldRequest& request, const HoldReply& reply, const std::string& job_id) {
  std::vector<Hold> out;
  const Hold* mine = nullptr;  // the job's own ticket: its place in the queue
  for (const Hold& h : reply.holds) {
    if (h.job_id == job_id && IsTicket(h)) mine = &h;
  }
  for (const Hold& h : reply.holds) {
    if (h.job_id == job_id || IsLease(h) || IsFault(h) || IsStale(h, reply.now)) continue;
    if (IsTicket(h)) {
      // First come, first served: a ticket before the job's own (or any,
      // when it has none here) stands in the way, whatever either asks.
      if (mine == nullptr || TicketBefore(h, *mine)) out.push_back(h);
      continue;
    }
    if (request.exclusive) {
      out.push_back(h);
      continue;
    }
    const bool wanted_port = h.name.rfind(std::string(kHoldPrefix) + "port-", 0) == 0 &&
                             std::any_of(request.ports.begin(), request.ports.end(),
                                         [&](int p) { return h.name == PortHoldName(p); });
    const bool wanted_device = std::any_of(request.gpu_devices.begin(), request.gpu_devices.end(),
                                           [&](int d) { return h.name == GpuHoldName(d); });
    if (h.name == HostHoldName() || wanted_port || wanted_device) out.push_back(h);
  }
  // Too few GPUs: every other job's GPU hold stands in the way.
  if (!request.exclusive && request.gpu_count > 0 &&
      static_cast<int>(HeldGpus(reply, job_id).size()) < request.gpu_count) {
    for (const Hold& h : reply.holds) {
      if (h.job_id == job_id || IsStale(h, reply.now) || h.name.rfind(std::string(kHoldPrefix) + "gpu-", 0) != 0) {
        continue;
      }
      if (std::none_of(out.begin(), out.end(), [&](const Hold& o) { return o.id == h.id; })) out.push_back(h);
    }
  }
  // Missing our own hold with nobody else in the way is a failure too, but
  // of the engine (HoldReply::errors), not a conflict.
  return out;
}

std::vector<int> HeldGpus(const HoldReply& reply, const std::string& job_id) {
  std::vector<int> out;
  const std::string prefix = std::string(kHoldPrefix) + "gpu-";
  for (const Hold& h : reply.holds) {
    if (h.job_id != job_id || h.name.rfind(prefix, 0) != 0) continue;
    const long long i = NumberOr(h.name.substr(prefix.size()), -1);
    if (i >= 0) out.push_back(static_cast<int>(i));
  }
  std::sort(out.begin(), out.end());
  return out;
}

bool HoldsAny(const HoldReply& reply, const std::string& job_id) {
  return std::any_of(reply.holds.begin(), reply.holds.end(), [&](const Hold& h) { return h.job_id == job_id; });
}

std::set<int> GpusNotHeld(int total, const std::vector<int>& ours) {
  std::set<int> out;
  const std::set<int> mine(ours.begin(), ours.end());
  for (int i = 0; i < total; ++i) {
    if (!mine.count(i)) out.insert(i);
  }
  return out;
}

namespace {

// The start of a script that makes containers for `owner` on one host:
// the prelude, the job's variables ("now T" said), h_here (the controller
// is still there), h_bye (it went: what the job made there goes) and h_mk
// (below). Exits at once when the job's directory is missing.
std::string OwnerScript(const DockerCommands& docker, const HoldOwner& owner, std::chrono::seconds engine_timeout) {
  std::string s = Prelude(docker, engine_timeout);
  const std::string lease_s = Secs(owner.lease);
  // A write to a closed channel fails instead of killing the script: it
  // must still be able to remove what it made.
  s += "trap '' PIPE\n";
  s += "H_J=" + ShellQuote(owner.job_id) + "; H_D=" + ShellQuote(owner.job_dir) +
       "; H_E=; H_C=; H_P='--pull never'; H_I=barge/hold:1; H_now=$(date +%s); H_TS=" +
       std::to_string(owner.ticket_since.value_or(0)) + "; echo \"now $H_now\"\n";
  // The controller is still there: its job's directory (made by the
  // watchdog just before, removed when it disarms the watchdog) exists, and
  // the channel to it is open (barge closes it when it cancels or exits:
  // writing then fails). Asked before anything is created and again after:
  // what was made for a controller that has gone is removed at once.
  s += "h_here() { [ -d \"$H_D\" ] && env printf '\\n' 2>/dev/null; }\n";
  s += "h_bye() { echo 'error: the controller or its job directory went away: the holds made are removed'; "
       "h_o=$(h_dk ps -aq --filter label=barge.hold --filter \"label=barge.job=$H_J\" 2>/dev/null); "
       "[ -z \"$h_o\" ] || h_dk rm -f $h_o >/dev/null 2>&1; exit 1; }\n";
  s += "[ -d \"$H_D\" ] || { echo \"error: the job's directory $H_D is missing: no hold is taken without it\"; exit 1; }\n";
  // h_mk NAME: creates the hold NAME (its kind and GPUs follow from the
  // name); "took NAME" when made; a name in use goes to H_C. The hold image
  // (empty: a tar of two zero blocks) is imported only when a create fails
  // and the engine lacks it.
  s += "h_mk() { h_sn=$H_now; case $1 in " + std::string(kLeasePrefix) + "*) h_k=lease; h_g=;; " +
       std::string(kTicketPrefix) + "*) h_k=ticket; h_g=; h_sn=$H_TS;; *-host) h_k=host; h_g=all;; *-gpu-*) h_k=gpu; h_g=${1##*-};; *) h_k=port; h_g=;; esac; "
       "h_try=0; while :; do H_o=$(h_dk create --name \"$1\" $H_P --network none --label \"barge.job=$H_J\" "
       "--label \"barge.hold=$h_k\" --label " + ShellQuote("barge.hold.name=" + owner.job_name) +
       " --label " + ShellQuote("barge.hold.user=" + owner.user) + " --label " +
       ShellQuote("barge.hold.machine=" + owner.machine) +
       " --label \"barge.hold.gpus=$h_g\" --label \"barge.hold.since=$h_sn\" --label barge.hold.v=" +
       std::to_string(kHoldFormat) + " "
       "--label \"barge.hold.expires=$((H_now + " + lease_s + "))\" --label barge.hold.lease=" + lease_s +
       " \"$H_I\" hold 2>&1); h_rc=$?; [ $h_rc -eq 0 ] && { echo \"took $1\"; return 0; }; "
       "case $H_o in *'already in use'*) H_C=\"$H_C $1\"; return 1;; esac; "
       "h_try=$((h_try + 1)); { [ $h_rc -ne 137 ] && [ $h_try -lt 3 ]; } || break; "
       "case $H_o in *'unknown flag'*) H_P=;; *) h_dk image inspect \"$H_I\" >/dev/null 2>&1 && break; "
       "h_o=$(dd if=/dev/zero bs=1024 count=1 2>/dev/null | h_dk import - \"$H_I\" 2>&1) || "
       "{ H_o=\"cannot make the hold image: $h_o\"; break; };; esac; done; "
       "printf 'error: %s: %s\\n' \"$1\" \"$H_o\"; H_E=1; return 1; }\n";
  return s;
}

// The job's lease on the engine, made before any hold (the stale rule),
// unless it is there already (a waiting job keeps it between tries); and a
// waiting job's ticket, unless it is there already.
std::string PlaceLines(const HoldOwner& owner) {
  std::string s = owner.has_lease ? "" : "h_mk \"" + std::string(kLeasePrefix) + "$H_J.$H_now\"\n";
  if (owner.ticket_since && !owner.has_ticket) s += "h_mk " + ShellQuote(TicketName(owner.job_id)) + "\n";
  return s;
}

}  // namespace

std::string TakeHoldsScript(const DockerCommands& docker, const HoldRequest& request, const HoldOwner& owner,
                            std::chrono::seconds engine_timeout) {
  std::string s = OwnerScript(docker, owner, engine_timeout);
  std::string lease = PlaceLines(owner);
  const std::string fail_listing = " || { printf '%s\\n' \"$H_A\"; exit 1; }";
  const bool waiting = owner.ticket_since.has_value();
  if (waiting) {
    // A waiting job lists first, its ticket made: where another job's live
    // ticket comes before its own place it creates no hold (the queue: it
    // would only be in the earlier waiter's way), and the listing is its
    // answer.
    s += "h_here || exit 1\n" + lease + "h_ls" + fail_listing + "\n";
    s += "if [ -n \"$H_Q\" ]; then printf '%s\\n' \"$H_A\"; [ -z \"$H_E\" ]; exit; fi\n";
    lease.clear();
  }
  if (!request.exclusive && request.gpu_count > 0) {
    // Choosing GPUs needs the listing first: the lowest free indices
    // (ChooseGpus' rule), stale holds removed; a name taken since the
    // listing fails its create and the next one is tried (and is not tried
    // again below: the count is made).
    if (!waiting) s += "h_ls" + fail_listing + "\n";
    s += "h_st && { h_ls" + fail_listing + "; }\n";
    s += "h_here || exit 1\n" + lease;
    // No point taking GPUs under another job's host hold.
    s += "case \"$H_A\" in *\"\t" + HostHoldName() + "\t\"*) ;; *)\n";
    std::string indices;
    for (int i = 0; i < request.gpu_total; ++i) {
      if (std::find(request.excluded_gpus.begin(), request.excluded_gpus.end(), i) == request.excluded_gpus.end()) {
        indices += " " + std::to_string(i);
      }
    }
    s += "H_g=0; for h_i in" + indices + "; do [ $H_g -ge " + std::to_string(request.gpu_count) +
         " ] && break; case \"$H_A\" in *\"\t" + std::string(kHoldPrefix) +
         "gpu-$h_i\t$H_J\t\"*) echo \"took " + std::string(kHoldPrefix) + "gpu-$h_i\"; H_g=$((H_g+1)); continue;; *\"\t" +
         std::string(kHoldPrefix) + "gpu-$h_i\t\"*) continue;; esac; h_mk " + std::string(kHoldPrefix) +
         "gpu-$h_i && H_g=$((H_g+1)); done; H_C=\n";
    for (int d : request.gpu_devices) s += "h_mk " + GpuHoldName(d) + "\n";
    for (int p : request.ports) s += "h_mk " + PortHoldName(p) + "\n";
    s += ";; esac\n";
  } else {
    // Create first, list after (the coexistence rule): on a free host one
    // create and one listing.
    s += "h_here || exit 1\n" + lease;
    if (request.exclusive) {
      s += "h_mk " + HostHoldName() + "\n";
    } else {
      for (int d : request.gpu_devices) s += "h_mk " + GpuHoldName(d) + "\n";
      for (int p : request.ports) s += "h_mk " + PortHoldName(p) + "\n";
    }
  }
  s += "h_here || h_bye\n";
  s += "h_ls" + fail_listing + "\n";
  // A name in use by a stale hold: the stale ones go, the names are tried
  // once more, and the listing is taken again.
  // So is a name in use at the create that nobody holds any more at the
  // listing (its holder released it in between).
  s += "h_st; h_sr=$?; h_gone=; for h_n in $H_C; do case \"$H_A\" in *\"\t$h_n\t\"*) ;; *) h_gone=1;; esac; done\n";
  s += "if { [ $h_sr -eq 0 ] || [ -n \"$h_gone\" ]; } && [ -n \"$H_C\" ]; then h_c=$H_C; H_C=; "
       "for h_n in $h_c; do h_mk \"$h_n\"; done; h_here || h_bye; h_ls" + fail_listing + "; fi\n";
  // A name in use by this job itself (an earlier try's): it holds it.
  s += "for h_n in $H_C; do case \"$H_A\" in *\"\t$h_n\t$H_J\t\"*) echo \"took $h_n\";; esac; done\n";
  s += "[ -z \"$H_A\" ] || printf '%s\\n' \"$H_A\"; [ -z \"$H_E\" ]\n";
  return s;
}

std::string JoinQueueScript(const DockerCommands& docker, const HoldOwner& owner, std::chrono::seconds engine_timeout) {
  std::string s = OwnerScript(docker, owner, engine_timeout);
  s += "h_here || exit 1\n" + PlaceLines(owner) + "h_here || h_bye\n";
  // Only now do its holds go: the host always shows its hold or its ticket.
  s += "( " + ReleaseHoldsKeepingPlaceCommand(docker, owner.job_id) + " ) || { echo 'error: its holds were not released'; H_E=1; }\n";
  s += "[ -z \"$H_E\" ]\n";
  return s;
}

std::string ListHoldsScript(const DockerCommands& docker, bool containers, std::chrono::seconds engine_timeout) {
  std::string s = Prelude(docker, engine_timeout);
  s += "H_J=; H_now=; echo \"now $(date +%s)\"; h_ls || { printf '%s\\n' \"$H_A\"; exit 1; }; "
       "[ -z \"$H_A\" ] || printf '%s\\n' \"$H_A\"\n";
  if (containers) {
    s += "H_o=$(h_dk ps --filter label=barge.job --format "
         "'{{.ID}}\\t{{.Names}}\\t{{.Label \"barge.job\"}}\\t{{.Label \"barge.role\"}}\\t{{.Label \"barge.rank\"}}\\t{{.Status}}' 2>&1) || "
         "{ printf 'error: %s\\n' \"$H_o\"; exit 1; }; printf '%s\\n' \"$H_o\" | while IFS= read -r h_l; do "
         "[ -n \"$h_l\" ] && printf 'ctr\\t%s\\n' \"$h_l\"; done; :\n";
  }
  return s;
}

std::string RenewEngineLeaseCommand(const DockerCommands& docker, const std::string& job_id,
                                    const std::string& lease_id, std::chrono::seconds engine_timeout) {
  // Renamed twice in one second: the name is already right.
  return "t=; command -v timeout >/dev/null 2>&1 && t='timeout -s KILL " + Secs(engine_timeout) + "'; o=$($t " +
         docker.Line({"rename", lease_id}) + " " + ShellQuote(std::string(kLeasePrefix) + job_id + ".") +
         "\"$(date +%s)\" 2>&1) || case $o in *'same name'*) ;; *) printf '%s\\n' \"$o\" >&2; false;; esac";
}

std::string ReleaseHoldsCommand(const DockerCommands& docker, const std::string& job_id) {
  return "ids=$(" + docker.Line({"ps", "-aq", "--filter", "label=" + std::string(kHoldLabel), "--filter", "label=barge.job=" + job_id}) +
         "); [ -z \"$ids\" ] || " + docker.Line({"rm", "-f"}) + " $ids >/dev/null";
}

std::string ReleaseHoldsKeepingPlaceCommand(const DockerCommands& docker, const std::string& job_id) {
  // Hosts, GPUs and ports: every kind but the lease and the ticket.
  return "ids=$(" +
         docker.Line({"ps", "-a", "--filter", "label=" + std::string(kHoldLabel), "--filter",
                      "label=barge.job=" + job_id, "--format", "{{.ID}} {{.Label \"barge.hold\"}}"}) +
         ") || exit 1; ids=$(printf '%s\\n' \"$ids\" | while read -r i k; do case $k in host|gpu|port) echo \"$i\";; "
         "esac; done); [ -z \"$ids\" ] || " + docker.Line({"rm", "-f"}) + " $ids >/dev/null";
}

std::string RemoveTicketCommand(const DockerCommands& docker, const std::string& job_id) {
  return docker.Line({"rm", "-f", TicketName(job_id)}) + " >/dev/null 2>&1 || :";
}

std::vector<std::string> HoldIdsOf(const HoldReply& reply, const std::string& job_id) {
  std::vector<std::string> ids;
  for (const Hold& h : reply.holds) {
    if (h.job_id == job_id && !h.id.empty()) ids.push_back(h.id);
  }
  return ids;
}

std::string RemoveWithHoldsCommand(const DockerCommands& docker, const std::vector<std::string>& names,
                                   const std::vector<std::string>& hold_ids, const std::string& job_id) {
  std::vector<std::string> all = names;
  all.insert(all.end(), hold_ids.begin(), hold_ids.end());
  return "{ " + docker.Remove(all) + " >/dev/null 2>&1 || { ids=$(" +
         docker.Line({"ps", "-aq", "--filter", "label=barge.job=" + job_id}) + ") && { [ -z \"$ids\" ] || " +
         docker.Line({"rm", "-f"}) + " $ids >/dev/null; }; }; }";
}

std::string ShortDuration(long long s) {
  if (s < 0) s = 0;
  char buf[32];
  if (s < 60) {
    std::snprintf(buf, sizeof buf, "%llds", s);
  } else if (s < 3600) {
    std::snprintf(buf, sizeof buf, "%lldm%02llds", s / 60, s % 60);
  } else {
    std::snprintf(buf, sizeof buf, "%lldh%02lldm", s / 3600, s % 3600 / 60);
  }
  return buf;
}

namespace {

std::string HeldBy(const Hold& h) {
  return h.job_id + " " + (h.job_name.empty() ? "?" : h.job_name) + " " + (h.user.empty() ? "?" : h.user) + "@" +
         (h.machine.empty() ? "?" : h.machine);
}

std::string UtcTime(long long t) { return FormatUtc(static_cast<std::time_t>(t), "%H:%M:%SZ"); }


}  // namespace

std::string BusyTable(const std::vector<BusyHost>& rows) {
  std::vector<std::vector<std::string>> cells = {{"HOST", "HELD BY (job id, name, user@machine)", "SINCE", "GPUS", "STALE"}};
  for (const BusyHost& b : rows) {
    // One row per holding job on the host: its GPUs (and ports) together.
    std::vector<Hold> jobs;
    std::map<std::string, std::string> gpus_of;
    for (const Hold& h : b.holds) {
      std::string what = h.gpus.empty() ? "" : h.gpus;
      if (h.name.rfind(std::string(kHoldPrefix) + "port-", 0) == 0) what = "port " + h.name.substr(h.name.rfind('-') + 1);
      if (!gpus_of.count(h.job_id)) jobs.push_back(h);
      std::string& list = gpus_of[h.job_id];
      if (!what.empty()) list = what + (list.empty() ? "" : "," + list);
    }
    for (const Hold& h : jobs) {
      std::optional<long long> at = StaleAt(h);
      std::string gpus = gpus_of[h.job_id].empty() ? "-" : gpus_of[h.job_id];
      if (IsTicket(h)) gpus = "queued";
      cells.push_back({b.host, HeldBy(h), UtcTime(h.since) + " (" + ShortDuration(b.now - h.since) + " ago)", gpus,
                       at ? "in " + ShortDuration(*at - b.now) + " unless renewed" : "never (its watchdog releases it)"});
    }
  }
  // Indented under the message that names the job.
  std::string out;
  const std::string table = FormatTable(cells);
  for (size_t start = 0, end; start < table.size(); start = end + 1) {
    end = table.find('\n', start);
    out += "  " + table.substr(start, end - start) + "\n";
  }
  return out;
}

std::string WaitingFor(const std::vector<BusyHost>& rows) {
  std::string out;
  std::set<std::string> seen;
  for (const BusyHost& b : rows) {
    for (const Hold& h : b.holds) {
      std::string item = b.host + (IsTicket(h) ? " (queued behind " : " (held by ") + HeldBy(h) + ")";
      if (!seen.insert(item).second) continue;
      out += (out.empty() ? "" : ", ") + item;
    }
  }
  return out;
}

}  // namespace barge::runner
