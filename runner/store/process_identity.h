// Who a process is, beyond its pid. A pid names a process only while it
// runs: after it ends (or after a reboot) the kernel gives the number to
// another process, of this user or of anyone. A recorded pid is therefore
// kept with the identity of the process that had it when it was recorded,
// and a process that has the pid now is that process only if its identity
// matches.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace barge::runner::sql {
class Statement;
}  // namespace barge::runner::sql

namespace barge::runner {

struct ProcessIdentity {
  std::string boot_id;    // /proc/sys/kernel/random/boot_id ("" when unreadable)
  int64_t start_time = 0; // clock ticks after boot: field 22 of /proc/PID/stat
  int64_t uid = -1;       // the effective uid ("Uid:" of /proc/PID/status)
  bool operator==(const ProcessIdentity&) const = default;
};

// The identity of process `pid` now, read from /proc: nullopt when no such
// process exists, it has exited (a zombie, state Z or X), or /proc cannot
// be read. The stat and status files are read through one open /proc/PID
// directory, so both describe the same process even if the pid is reused
// meanwhile. The uid is taken from status, not from the owner of /proc/PID:
// a process that changed its uid (setuid, su) is not dumpable and its
// /proc/PID belongs to root.
std::optional<ProcessIdentity> ReadProcessIdentity(int pid);

// In the stores' tables an identity is three columns, boot id (TEXT),
// start time and uid (INTEGER), all NULL for none. Binds them to
// parameters `first`, `first` + 1 and `first` + 2.
void BindIdentity(sql::Statement& st, int first, const std::optional<ProcessIdentity>& identity);
// Reads them from columns `first` to `first` + 2 of the current row.
std::optional<ProcessIdentity> ReadIdentity(const sql::Statement& st, int first);

}  // namespace barge::runner
