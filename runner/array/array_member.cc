// A job array member's spec: hosts, environment and {array.COLUMN}.
#include "runner/array/array_member.h"

#include <algorithm>
#include <map>

#include "base/shell_word.h"
#include "runner/jobfile/job_values.h"

namespace barge::runner::array {
namespace {

bool ReadByShell(const std::vector<std::string>& command) {
  if (command.size() < 3 || command[1] != "-c") return false;
  const std::string& sh = command[0];
  return sh == "sh" || sh == "bash" || sh == "/bin/sh" || sh == "/bin/bash" || sh == "/usr/bin/bash";
}

Status SubstituteCommand(std::optional<std::vector<std::string>>* command, const ArrayParams& params,
                         size_t row, const std::string& where) {
  if (!*command) return Status::Ok();
  const bool shell = ReadByShell(**command);
  for (size_t i = 0; i < (*command)->size(); ++i) {
    std::string& word = (**command)[i];
    Result<std::string> s = SubstituteArray(word, params, row, shell && i == 2, where);
    if (!s.ok()) return s.status();
    word = *s;
  }
  return Status::Ok();
}

Status SubstituteEnv(std::optional<container::KeyValues>* env, const ArrayParams& params, size_t row,
                     const std::string& where) {
  if (!*env) return Status::Ok();
  for (auto& [name, value] : **env) {
    Result<std::string> s = SubstituteArray(value, params, row, false, where + "." + name);
    if (!s.ok()) return s.status();
    value = *s;
  }
  return Status::Ok();
}

Status SubstituteImage(std::optional<std::string>* image, const ArrayParams& params, size_t row,
                       const std::string& where) {
  if (!*image) return Status::Ok();
  Result<std::string> s = SubstituteArray(**image, params, row, false, where);
  if (!s.ok()) return s.status();
  if (Status c = CheckImageReference(*s); !c.ok()) {
    return Status::Error(where + " of member " + std::to_string(row) + ": " + c.message());
  }
  *image = *s;
  return Status::Ok();
}

}  // namespace

Result<std::string> SubstituteArray(std::string_view text, const ArrayParams& params, size_t row,
                                    bool for_shell, const std::string& where) {
  static constexpr std::string_view kOpen = "{array.";
  std::string out;
  size_t at = 0;
  for (size_t open = text.find(kOpen); open != std::string_view::npos; open = text.find(kOpen, at)) {
    size_t close = text.find('}', open);
    if (close == std::string_view::npos) break;
    const std::string name(text.substr(open + kOpen.size(), close - open - kOpen.size()));
    auto column = std::find(params.columns.begin(), params.columns.end(), name);
    if (column == params.columns.end()) {
      std::string known;
      for (const std::string& c : params.columns) known += (known.empty() ? "" : ", ") + c;
      return Status::Error(where + ": {array." + name + "} names no column of " + params.source +
                           " (its columns: " + known + ")");
    }
    const std::string& value = params.rows.at(row)[column - params.columns.begin()];
    out.append(text.substr(at, open - at));
    // Quoted even when plain: the shell sees exactly one word either way.
    out += for_shell ? (value.empty() ? "''" : ShellWord(value)) : value;
    at = close + 1;
  }
  out.append(text.substr(at));
  return out;
}

size_t HostsPerMember(const JobSpec& spec) { return HostsPerMember(spec, spec.hosts); }

size_t HostsPerMember(const JobSpec& spec, const std::vector<cluster::Host>& pool) {
  if (spec.hosts_per_member) return static_cast<size_t>(*spec.hosts_per_member);
  auto worker = spec.roles.find(cluster::kWorkerRole);
  if (worker == spec.roles.end() || !worker->second.count) return 1;
  int per_host = 1 << 30;
  for (const cluster::Host& h : pool) per_host = std::min(per_host, std::max(h.nodes, 1));
  if (pool.empty()) per_host = 1;
  const int needed = *worker->second.count + 1;
  return static_cast<size_t>((needed + per_host - 1) / per_host);
}

Result<std::optional<size_t>> MemberGroup(const JobSpec& spec, const ArrayParams& params, size_t row) {
  auto column = std::find(params.columns.begin(), params.columns.end(), kHostGroupColumn);
  if (column == params.columns.end()) return std::optional<size_t>();
  const std::string& name = params.rows.at(row)[column - params.columns.begin()];
  if (name.empty()) return std::optional<size_t>();
  for (size_t g = 0; g < spec.host_groups.size(); ++g) {
    if (spec.host_groups[g].name == name) return std::optional<size_t>(g);
  }
  std::string known;
  for (const HostGroup& g : spec.host_groups) known += (known.empty() ? "" : ", ") + g.name;
  return Status::Error(params.source + ", row " + std::to_string(row) + " (member " + std::to_string(row) +
                       "): host_group " + QuoteValue(name) + " is not a group of " +
                       (known.empty() ? spec.file + " (it has no host_groups)"
                                      : spec.file + "'s host_groups (" + known + ")"));
}

namespace {

// The hosts-per-member and pool size of each pool the rows use: the job's
// own (nullopt) and each named group.
std::map<std::optional<size_t>, std::pair<size_t, size_t>> PoolsUsed(const JobSpec& spec,
                                                                      const ArrayParams& params) {
  std::map<std::optional<size_t>, std::pair<size_t, size_t>> pools;
  for (size_t row = 0; row < params.rows.size(); ++row) {
    Result<std::optional<size_t>> g = MemberGroup(spec, params, row);
    if (!g.ok() || pools.contains(*g)) continue;
    const std::vector<cluster::Host>& hosts = *g ? spec.host_groups[**g].hosts : spec.hosts;
    pools[*g] = {HostsPerMember(spec, hosts), std::max<size_t>(hosts.size(), 1)};
  }
  return pools;
}

size_t CapAtOnce(const JobSpec& spec, size_t fits) {
  fits = std::max<size_t>(fits, 1);
  if (!spec.parallel) return fits;
  return std::clamp<size_t>(static_cast<size_t>(*spec.parallel), 1, fits);
}

}  // namespace

size_t MembersAtOnce(const JobSpec& spec) {
  const size_t pool = std::max<size_t>(spec.hosts.size(), 1);
  return CapAtOnce(spec, pool / std::max<size_t>(HostsPerMember(spec), 1));
}

size_t MembersAtOnce(const JobSpec& spec, const ArrayParams& params) {
  // Through Slurm each member asks for an allocation of its own: as many at
  // once as there are members (Slurm's queue decides who runs), or parallel:.
  if (spec.slurm) return CapAtOnce(spec, params.rows.size());
  size_t fits = 0;
  for (const auto& [group, need_and_size] : PoolsUsed(spec, params)) {
    fits += need_and_size.second / std::max<size_t>(need_and_size.first, 1);
  }
  if (fits == 0) return MembersAtOnce(spec);  // no rows
  return CapAtOnce(spec, fits);
}

Result<JobSpec> MemberSpec(const JobSpec& base, const ArrayParams& params, size_t row,
                           const std::string& array_id, std::vector<cluster::Host> hosts) {
  JobSpec m = base;
  m.array.reset();
  m.parallel.reset();
  m.array_retries = 0;
  m.hosts_per_member.reset();
  m.spare_hosts.clear();
  // A slurm: member's hosts are those of its own allocation: the job's
  // placeholders until it is granted.
  m.hosts = base.slurm ? base.hosts : std::move(hosts);
  Result<std::optional<size_t>> group = MemberGroup(base, params, row);
  if (!group.ok()) return group.status();
  m.host_groups.clear();
  if (*group) {
    const HostGroup& g = base.host_groups[**group];
    m.ssh = g.ssh;
    m.hosts_file = g.hosts_file;
    m.hosts_command.clear();
    m.hosts_command_ran = false;
  }
  const std::string suffix = "-" + std::to_string(row);
  m.name = base.name.substr(0, 63 - suffix.size()) + suffix;

  std::optional<std::string> image = m.image.empty() ? std::nullopt : std::optional(m.image);
  if (Status s = SubstituteImage(&image, params, row, "image"); !s.ok()) return s;
  if (image) m.image = *image;
  if (Status s = SubstituteCommand(&m.command, params, row, "command"); !s.ok()) return s;
  if (Status s = SubstituteEnv(&m.container.env, params, row, "container.env"); !s.ok()) return s;
  for (auto& [name, role] : m.roles) {
    const std::string where = "roles." + name;
    if (Status s = SubstituteImage(&role.image, params, row, where + ".image"); !s.ok()) return s;
    if (Status s = SubstituteCommand(&role.command, params, row, where + ".command"); !s.ok()) return s;
    if (Status s = SubstituteEnv(&role.container.env, params, row, where + ".container.env"); !s.ok()) return s;
  }
  for (size_t i = 0; i < m.hosts.size(); ++i) {
    const std::string where = "hosts[" + std::to_string(i) + "].container.env";
    if (Status s = SubstituteEnv(&m.hosts[i].container.env, params, row, where); !s.ok()) return s;
  }

  // The member's own variables, after the job's env (a column wins over a
  // job-wide env of the same name; barge's names are reserved).
  container::KeyValues env = m.container.env.value_or(container::KeyValues{});
  auto set = [&env](const std::string& name, const std::string& value) {
    auto it = std::find_if(env.begin(), env.end(), [&](const auto& kv) { return kv.first == name; });
    if (it != env.end()) {
      it->second = value;
    } else {
      env.emplace_back(name, value);
    }
  };
  set("BARGE_ARRAY_JOB_ID", array_id);
  set("BARGE_ARRAY_INDEX", std::to_string(row));
  set("BARGE_ARRAY_SIZE", std::to_string(params.rows.size()));
  set("AWS_BATCH_JOB_ARRAY_INDEX", std::to_string(row));
  for (size_t c = 0; c < params.columns.size(); ++c) {
    if (params.columns[c] != kHostGroupColumn) set(params.columns[c], params.rows[row][c]);
  }
  if (*group) set("BARGE_HOST_GROUP", base.host_groups[**group].name);
  m.container.env = std::move(env);
  return m;
}

Status CheckArray(const JobSpec& base, const ArrayParams& params) {
  for (size_t row = 0; row < params.rows.size(); ++row) {
    if (Result<std::optional<size_t>> g = MemberGroup(base, params, row); !g.ok()) return g.status();
  }
  for (const auto& [group, need_and_size] : PoolsUsed(base, params)) {
    const auto [need, pool] = need_and_size;
    if (need > pool) {
      return Status::Error("each member of the array needs " + std::to_string(need) + " host(s), but " +
                           (group ? "host group '" + base.host_groups[*group].name + "'"
                                  : std::string("the inventory")) +
                           " has " + std::to_string(pool));
    }
  }
  for (size_t row = 0; row < params.rows.size(); ++row) {
    const std::optional<size_t> group = *MemberGroup(base, params, row);
    const std::vector<cluster::Host>& pool = group ? base.host_groups[*group].hosts : base.hosts;
    const size_t need = HostsPerMember(base, pool);
    std::vector<cluster::Host> hosts(pool.begin(), pool.begin() + std::min(need, pool.size()));
    Result<JobSpec> m = MemberSpec(base, params, row, "check", hosts);
    if (!m.ok()) return m.status();
  }
  return Status::Ok();
}

}  // namespace barge::runner::array
