// Reservations held on the hosts: what a job holds on one host, the shell
// that takes it on the host's own Docker engine, and the reading of what the
// host answered. Pure logic (no I/O); the controller's steps that run it are
// in runner/controller/holds.cc.
//
// A hold is a container that is created (`docker create`) and never started,
// named after what it holds, labelled with who holds it and until when:
//   barge-hold-host     the whole host (an exclusive job)
//   barge-hold-gpu-N    GPU index N (a job whose every node on the host asks
//                       for a GPU count or a device list)
//   barge-hold-port-P   TCP port P of the host's network (a rendezvous or MPI
//                       port on a host-network host, for a job that shares
//                       the host)
// Container names are atomic per engine: of two `docker create --name X`
// exactly one succeeds, whoever asks, through `sudo -n docker` too, and every
// user of the engine sees the holds (`docker ps -a --filter label=barge.hold`).
//
// Coexistence rule. An exclusive job creates barge-hold-host, a sharing job
// its barge-hold-gpu-N and barge-hold-port-P; each then lists every hold on
// the engine, and it has the host only when the listing shows no other job's
// hold that conflicts: for an exclusive job, any other job's hold at all; for
// a sharing job, another job's barge-hold-host (GPU and port names conflict
// by themselves, through the name). Both kinds create first and list after,
// so of an exclusive job E and a sharing job S racing, at least one sees the
// other's hold (if E listed before S created, S created after E did, so S's
// listing shows E's): never both go on; both may back off, and try again
// after a random pause when waiting.
//
// All or nothing: a job takes the holds on all its hosts at once (one round
// trip, in preflight); when any host is busy it releases every hold it got,
// on every host, before it fails or waits. A waiting job holds nothing
// between its tries.
//
// Leases on the engine. With its holds a job keeps a lease on each host's
// engine: a container `barge-lease-JOB.T`, made (never started) just before
// the holds and labelled like them (barge.hold=lease), whose name carries
// T, the host's clock when the controller last renewed it. The controller
// renews it by renaming it (`docker rename ID barge-lease-JOB.NOW`) with
// each renewal of the watchdog's lease file; it goes with the holds. Every
// user of the engine reads it in the same listing as the holds, and only
// users of the engine (trusted: root-equivalent) can make, rename or remove
// one: nothing another local user of the host can create counts.
//
// Stale rule. The holder's watchdog removes its holds and lease (they
// carry the job's barge.job label) when its lease lapses, so a killed
// controller blocks a host for at most `lease:` (+ one watchdog tick). If
// the watchdog is gone too (the host rebooted, the process was killed), the
// next job treats another job's hold as free once that job's newest lease
// on the host was renewed longer ago than its lease plus the grace,
// min(1 minute, lease), and removes it (and the lapsed lease). A hold whose
// job has no lease on the engine is stale at once (from the second after
// its `since`): a lease is made before any hold and removed with them, so
// such a hold's job has released it, or its controller went between the
// two. A hold made by a barge before leases lived on the engine (no
// barge.hold.v=2 label) is stale at its labelled expiry plus the grace.
// A controller that goes while its host script runs. Barge interrupted
// during preflight closes the script's channel and disarms the watchdog
// (removing the job's directory), but the script keeps running on the host,
// for instance blocked on a frozen engine. The script asks whether its
// controller is still there (the job's directory exists and a write to the
// channel succeeds) before it creates anything and again right after; when
// it has gone, it creates nothing, or removes the job's holds on that host
// at once (bounded by the engine timeout per docker call once the engine
// answers). What remains is the moment between that last check and the
// reply reaching the controller, or a create that the engine carries out
// after the script gave up on it: such a hold's lease is gone with the
// rest, so every other job treats it as stale at once and removes it.
//
// Queue (tickets). A job that waits for its hosts (--wait, `wait:`, an
// array member) keeps its lease on every host while it waits and leaves a
// ticket there: a container `barge-ticket-JOB`, labelled like a hold
// (barge.hold=ticket), whose barge.hold.since is the second the job began
// to wait, the same on every host: the latest of its hosts' clocks at its
// first try (each host script's "now", the Engine API's Date), never the
// controller's clock, which no host can check and a controller's wrong
// clock would have moved it ahead of earlier waiters (PlaceInLine). A
// ticket's place is (since, job id): one global order that every host
// agrees on.
// Another job's live ticket on a host stands in the way of every job with
// no ticket or a later one there, whatever they ask (first come, first
// served per host, no backfill: a host may stay idle while the first
// waiter waits for its other hosts). Of two multi-host waiters, the later
// never takes a host the earlier wants and the earlier ignores the later's
// tickets, so they never wait for each other. The ticket is made before the
// job says it waits, and before the holds of its first try go
// (JoinQueueScript): from that try on, each of its hosts shows its hold or
// its ticket. A job takes no hold at all where another job's live ticket
// comes before its place (QueuedBehindAnother): a waiter's try lists
// first, and so does every taking through the Engine API (a job with no
// place yet comes after every ticket); only the CLI script's first try
// (no place yet) creates and then lists, and lets go once it has seen the
// ticket. A ticket goes when its job
// has its holds, gives up or ends, and with its lease like a hold (the
// stale rule), so a dead waiter blocks nobody for longer than a hold would.
#pragma once

#include <chrono>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "runner/remote/docker_commands.h"

namespace barge::runner {

inline constexpr std::string_view kHoldPrefix = "barge-hold-";
// A job's lease on an engine: barge-lease-JOB.T (see above).
inline constexpr std::string_view kLeasePrefix = "barge-lease-";
// A waiting job's ticket: barge-ticket-JOB (see "Queue" above).
inline constexpr std::string_view kTicketPrefix = "barge-ticket-";
// An entry of the host's failure record (runner/remote/host_record.h),
// labelled barge.fault=KIND and never barge.hold: barge versions from before
// the record list holds by that label and would take an entry for a hold
// that never goes stale.
inline constexpr std::string_view kFaultPrefix = "barge-fault-";
// The label that marks an entry of the failure record; its value is the kind.
inline constexpr std::string_view kFaultLabel = "barge.fault";
// The holds' ONE listing (every job's preflight makes it) reads holds,
// leases, tickets and the failure record together. An engine ANDs label
// filters, so it lists by name instead: its name filter is a regular
// expression, matched with and without the leading '/'. What it lists is
// then kept only where it carries kHoldLabel or kFaultLabel,
// so that a user's container named like them is never taken for one.
inline constexpr std::string_view kRecordsNameFilter = "^/?barge-(hold|lease|ticket|fault)-";
// The hold format barge.hold.v labels: 2 = the job's lease is on the engine.
inline constexpr int kHoldFormat = 2;
// The label that marks a hold; its value is the hold's kind ("host", "gpu",
// "port").
inline constexpr std::string_view kHoldLabel = "barge.hold";

// The tab-separated fields of one line of a host script's listing (empty
// fields kept).
std::vector<std::string> SplitTabs(std::string_view line);

// A whole decimal number (a label's or a listing's field), or `fallback`
// when `s` is anything else.
long long NumberOr(const std::string& s, long long fallback);
// A lease as the hold labels and host scripts write it: whole seconds, at
// least 1.
long long LeaseSeconds(std::chrono::seconds lease);

std::string HostHoldName();
std::string GpuHoldName(int index);
std::string PortHoldName(int port);
// The name of `job_id`'s lease renewed at `renewed` (host clock).
std::string LeaseName(const std::string& job_id, long long renewed);
std::string TicketName(const std::string& job_id);
// T of a lease's name (barge-lease-JOB.T), nullopt when `name` is not one.
std::optional<long long> LeaseRenewedAt(std::string_view name);

// Who holds: the job and its controller.
struct HoldOwner {
  std::string job_id;
  std::string job_name;
  std::string user;     // on the controller's machine
  std::string machine;  // the controller's host name
  std::chrono::seconds lease{600};
  // The job's directory on the host the holds are taken on (NewHostJobDir):
  // TakeHoldsScript takes nothing without it.
  std::string job_dir;
  // The job's lease is on the host's engine already (kept while it waits):
  // TakeHoldsScript makes no new one.
  bool has_lease = false;
  // Waiting: the second it began to wait (its hosts' clocks: PlaceInLine),
  // its ticket's place in every host's line; TakeHoldsScript and
  // JoinQueueScript leave the ticket unless `has_ticket`.
  std::optional<long long> ticket_since;
  // The job's ticket is on the host's engine already.
  bool has_ticket = false;
};

// What a job holds on one host.
struct HoldRequest {
  // The whole host; otherwise GPUs and ports.
  bool exclusive = true;
  // Sharing: `gpu_count` GPUs from `gpu_candidates` (the lowest free ones),
  // or every index of `gpu_devices` (an explicit device list).
  int gpu_count = 0;
  int gpu_total = 0;
  std::vector<int> gpu_devices;
  std::vector<int> ports;  // host-network ports the job binds there
  // A GPU count is never taken from these (unhealthy: gpu_health.h).
  std::vector<int> excluded_gpus;
};

// One node of the job on a host, as the request is made from: its Docker
// --gpus value (nullopt = none) and whether it shares the host's network.
struct HoldNode {
  std::optional<std::string> gpus;
  bool host_network = false;
};

// The request for a host: exclusive unless every node there asks for a GPU
// count ("2") or a device list ("\"device=0,1\"") and the host's GPU count
// is known (`gpu_total`, from the inventory); "all" or no GPUs at all hold
// the whole host. `ports` are those the job binds on this host's network.
HoldRequest RequestFor(const std::vector<HoldNode>& nodes, std::optional<int> gpu_total,
                       std::vector<int> ports);

// Whether `r` asks for any hold at all (a shared Slurm node's CPU share
// asks for none: only the job's lease is made there).
bool AsksAnything(const HoldRequest& r);

// The request for a host another scheduler shares out (a Slurm node with
// exclusive: false): never the whole host, only the devices the nodes list
// ("\"device=0,1\""; a count or "all" adds none) and `ports`.
HoldRequest SharedRequestFor(const std::vector<HoldNode>& nodes, std::vector<int> ports);

// The lowest `want` indices below `total` not in `held`; fewer when fewer are
// free. (The lead merges this with cluster/gpu_slices' allocator: the host
// script applies the same rule, trying the free indices in this order.)
std::vector<int> ChooseGpus(int total, const std::set<int>& held, int want);

// A hold as a host listed it.
struct Hold {
  std::string id;       // container ID
  std::string name;     // barge-hold-...
  std::string job_id;
  std::string job_name;
  std::string user;
  std::string machine;
  std::string gpus;     // "all" (a host hold), "0,1", or "" (a port)
  long long since = 0;    // host clock, seconds since the epoch
  long long expires = 0;  // since + lease (as labelled at creation)
  long long lease = 0;    // seconds
  int format = 1;         // barge.hold.v (kHoldFormat), 1 when unlabelled
  // When the holder's newest lease on this engine was renewed (host
  // clock); nullopt when the listing shows none. Set by ApplyEngineLeases.
  std::optional<long long> lease_renewed;
  // An entry of the host's failure record (barge-fault-..., labelled
  // barge.fault and no barge.job: runner/remote/host_record.h): its
  // kind, the job it failed, the GPU's serial and what was seen. Empty for
  // holds, leases and tickets.
  std::string fault_kind;
  std::string fault_job;
  std::string fault_serial;
  std::string fault_detail;
};

// Whether `h` is a lease (barge-lease-...), not a hold.
bool IsLease(const Hold& h);
// Whether `h` is a ticket (barge-ticket-...), not a hold.
bool IsTicket(const Hold& h);
// Whether `h` is an entry of the host's failure record (barge-fault-...),
// not a hold: it stands in nobody's way and is never stale.
bool IsFault(const Hold& h);
// Whether ticket `a` comes before ticket `b` (since, then job id).
bool TicketBefore(const Hold& a, const Hold& b);
// The live tickets of `reply`'s listing (stale ones left out), first
// first: the host's queue.
std::vector<Hold> Queue(const std::vector<Hold>& holds, long long now);
// Whether another job's live ticket in `holds` comes before `job_id`'s
// place `since` (any live ticket of another job when `since` is nullopt: a
// job with no place yet comes after every waiter). Such a job takes no hold
// on the host: it would only be in the earlier waiter's way.
bool QueuedBehindAnother(const std::vector<Hold>& holds, long long now, const std::string& job_id,
                         std::optional<long long> since);
// The place in line of `job_id`, which begins to wait after its first try
// found `seen` (the listings of its hosts, each with that host's clock when
// it listed): the latest of those clocks, or one second after the latest
// live ticket of another job in them, whichever is later (at least 1). No
// clock of the controller's counts: a controller whose clock is behind
// would otherwise come before jobs that began to wait earlier, one ahead
// after later ones. Places are whole seconds and equal ones go by job id,
// so without the second after a waiter's ticket, a job that met it and
// joined the line in the same second could be placed before it.
long long PlaceInLine(const std::vector<std::pair<long long, std::vector<Hold>>>& seen,
                      const std::string& job_id);
// Sets every entry's lease_renewed from the newest lease of its job among
// `holds` (the leases' own too).
void ApplyEngineLeases(std::vector<Hold>* holds);
// The container ID of `job_id`'s newest lease in `reply`; empty when none.
std::string LeaseIdOf(const std::vector<Hold>& holds, const std::string& job_id);

// min(1 minute, lease).
long long StaleGrace(long long lease_seconds);
// When `h` becomes free by the stale rule (host clock); nullopt = never
// (not barge's: no job or lease label).
std::optional<long long> StaleAt(const Hold& h);
bool IsStale(const Hold& h, long long now);

// What one host answered to the hold script.
struct HoldReply {
  long long now = 0;                // the host's clock
  std::vector<std::string> taken;   // hold names this job holds there now
  // Every hold and lease listed after taking (ours too), leases applied.
  std::vector<Hold> holds;
  std::vector<std::string> removed_stale;  // "name (job ...)" removed as stale
  std::string errors;               // what failed, verbatim
};

HoldReply ParseHoldReply(std::string_view text);

// The other jobs' holds that keep `job_id` from having what `request` asks
// (stale ones do not count), and the other jobs' tickets before its own
// (all of them when it has none there: see "Queue"); empty when it has it
// all.
std::vector<Hold> Conflicts(const HoldRequest& request, const HoldReply& reply,
                            const std::string& job_id);
// The GPU indices `job_id` holds in `reply`, ascending.
std::vector<int> HeldGpus(const HoldReply& reply, const std::string& job_id);
// Whether `reply` lists a hold of `job_id` (taken now or by an earlier try).
bool HoldsAny(const HoldReply& reply, const std::string& job_id);
// The indices below `total` that are not in `ours`: fed to the plan as the
// GPUs other jobs hold (cluster::PlanInput::held_gpus), they make the plan's
// slices (cluster/gpu_slices.h, lowest free indices in rank order) give the
// job's nodes on that host consecutive devices of those it holds there, in
// rank order: the devices passed to `--gpus` are exactly the held ones.
std::set<int> GpusNotHeld(int total, const std::vector<int>& ours);

// The shell that takes `request` for `owner` on one host. On a free host
// it costs two docker calls: it creates the job's holds and lists the holds
// once (one `docker ps`); a GPU count lists first too, to choose the lowest
// free indices. Stale holds of other jobs are removed by container ID (never
// a fresh one of the same name); a name in use by a stale hold is tried once
// more after that, with a new listing. Prints "now T", "stale ...", "took
// NAME" and "hold <fields>" lines (ParseHoldReply). Each docker call is
// bounded by `engine_timeout`. Needs the hold image, which it imports (an
// empty image, a 1 KiB tar) only when a create fails and the engine lacks
// it. Needs the job's directory on the host (owner.job_dir, made by the
// watchdog's arming): without it, or once the channel to the controller is
// closed, it creates nothing and removes what it made (see above).
// A waiting job (owner.ticket_since) lists first, its ticket made: where
// another job's live ticket comes before its own place it creates no hold
// (so an earlier waiter never finds it in the way), and answers that
// listing.
std::string TakeHoldsScript(const DockerCommands& docker, const HoldRequest& request,
                            const HoldOwner& owner, std::chrono::seconds engine_timeout);
// The shell that puts a waiting job (owner.ticket_since) in the host's
// line: its lease (unless owner.has_lease) and ticket (unless
// owner.has_ticket) are made first, and only then do its holds there go, so
// that from its first try on the host always shows the job's hold or its
// ticket: no later job takes the host in between. Prints "now T" and "took
// NAME" lines; fails when a create or the release failed.
std::string JoinQueueScript(const DockerCommands& docker, const HoldOwner& owner, std::chrono::seconds engine_timeout);
// Lists the holds (the "hold" lines) and, with `containers`, the running
// barge containers ("ctr" lines, ParseBargeContainers).
std::string ListHoldsScript(const DockerCommands& docker, bool containers,
                            std::chrono::seconds engine_timeout);
// Renews `job_id`'s lease on the engine: renames `lease_id` (LeaseIdOf)
// to LeaseName(job_id, the host's clock now). Bounded by `engine_timeout`.
// (Through the Engine API the controller renames it itself, with the
// host's clock from the watchdog's renewal.)
std::string RenewEngineLeaseCommand(const DockerCommands& docker, const std::string& job_id,
                                    const std::string& lease_id, std::chrono::seconds engine_timeout);
// Removes every hold, the lease and the ticket of `job_id` on the host.
std::string ReleaseHoldsCommand(const DockerCommands& docker, const std::string& job_id);
// Removes `job_id`'s holds on the host and keeps its lease and ticket (a
// waiting job between its tries).
std::string ReleaseHoldsKeepingPlaceCommand(const DockerCommands& docker, const std::string& job_id);
// Removes `job_id`'s ticket on the host (it has its holds now).
std::string RemoveTicketCommand(const DockerCommands& docker, const std::string& job_id);
// The IDs of `job_id`'s holds in `reply`'s listing.
std::vector<std::string> HoldIdsOf(const HoldReply& reply, const std::string& job_id);
// A job's last removal on a host: its containers `names` and its holds
// `hold_ids` in ONE `docker rm -f` (each Docker CLI process costs the host
// ~0.1 s of CPU; listing the holds again and removing them apart took two
// more). When that fails (a hold already gone as stale, a container never
// made, an engine error), every container labelled with the job on the
// host goes by a listing instead; the command fails only when that fails.
std::string RemoveWithHoldsCommand(const DockerCommands& docker, const std::vector<std::string>& names,
                                   const std::vector<std::string>& hold_ids, const std::string& job_id);

// The table of a busy job: HOST | HELD BY (job id, name, user@machine) |
// SINCE | GPUS | STALE (when the hold goes stale unless renewed), one row
// per conflicting hold. `rows`: (host, host's clock, holds).
struct BusyHost {
  std::string host;
  long long now = 0;
  std::vector<Hold> holds;
};
std::string BusyTable(const std::vector<BusyHost>& rows);
// "h1 (held by 1a2b3c4d train alice@box)" for the status line; a ticket
// before the job's own: "h1 (queued behind 1a2b3c4d train alice@box)".
std::string WaitingFor(const std::vector<BusyHost>& rows);

// A duration for tables: "45s", "3m05s", "2h10m".
std::string ShortDuration(long long seconds);

}  // namespace barge::runner
