#include "runner/store/process_identity.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <sstream>

#include "runner/store/sqlite.h"

namespace barge::runner {
namespace {

// The whole of file `name` under directory `dir`; nullopt when it cannot be
// read. /proc files report a size of 0: read until the end.
std::optional<std::string> ReadAt(int dir, const char* name) {
  const int fd = openat(dir, name, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::string text;
  char buf[4096];
  ssize_t n;
  while ((n = read(fd, buf, sizeof buf)) > 0) text.append(buf, static_cast<size_t>(n));
  close(fd);
  if (n < 0) return std::nullopt;
  return text;
}

std::string BootId() {
  const int proc = open("/proc/sys/kernel/random", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (proc < 0) return "";
  std::optional<std::string> id = ReadAt(proc, "boot_id");
  close(proc);
  if (!id) return "";
  while (!id->empty() && (id->back() == '\n' || id->back() == ' ')) id->pop_back();
  return *id;
}

// State and start time from /proc/PID/stat. The command name (field 2) is
// in parentheses and may hold spaces and ')': the fields are counted after
// the last ')'. Field 3 is the state, field 22 the start time.
bool ParseStat(const std::string& stat, char* state, int64_t* start_time) {
  const size_t paren = stat.rfind(')');
  if (paren == std::string::npos) return false;
  std::istringstream fields(stat.substr(paren + 1));
  std::string field;
  for (int i = 3; i <= 22; ++i) {
    if (!(fields >> field)) return false;
    if (i == 3) *state = field.empty() ? '?' : field[0];
  }
  char* end = nullptr;
  *start_time = std::strtoll(field.c_str(), &end, 10);
  return end != field.c_str() && *end == '\0';
}

// The effective uid: the second number of status's "Uid:" line.
bool ParseEffectiveUid(const std::string& status, int64_t* uid) {
  const size_t at = status.find("\nUid:");
  if (at == std::string::npos) return false;
  std::istringstream line(status.substr(at + 5));
  int64_t real = -1, effective = -1;
  if (!(line >> real >> effective)) return false;
  *uid = effective;
  return true;
}

}  // namespace

std::optional<ProcessIdentity> ReadProcessIdentity(int pid) {
  if (pid <= 0) return std::nullopt;
  const int dir = open(("/proc/" + std::to_string(pid)).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) return std::nullopt;
  std::optional<std::string> stat = ReadAt(dir, "stat");
  std::optional<std::string> status = ReadAt(dir, "status");
  close(dir);
  ProcessIdentity id;
  char state = '?';
  if (!stat || !status || !ParseStat(*stat, &state, &id.start_time) || !ParseEffectiveUid(*status, &id.uid)) {
    return std::nullopt;
  }
  if (state == 'Z' || state == 'X') return std::nullopt;
  id.boot_id = BootId();
  return id;
}

void BindIdentity(sql::Statement& st, int first, const std::optional<ProcessIdentity>& identity) {
  if (!identity) {
    st.BindNull(first).BindNull(first + 1).BindNull(first + 2);
    return;
  }
  st.Bind(first, identity->boot_id).Bind(first + 1, identity->start_time).Bind(first + 2, identity->uid);
}

std::optional<ProcessIdentity> ReadIdentity(const sql::Statement& st, int first) {
  std::optional<int64_t> start_time = st.OptInt(first + 1);
  std::optional<int64_t> uid = st.OptInt(first + 2);
  if (!start_time || !uid) return std::nullopt;
  return ProcessIdentity{.boot_id = st.OptText(first).value_or(""), .start_time = *start_time, .uid = *uid};
}

}  // namespace barge::runner
