#include "runner/jobfile/job_file.h"

#include "runner/jobfile/blocks.h"

namespace barge::runner {

std::string JobFileError::ToString() const {
  std::string out = file;
  if (line > 0) out += ":" + std::to_string(line) + ":" + std::to_string(column);
  out += ": ";
  if (!key.empty()) out += key + ": ";
  return out + message;
}


namespace jobfile {

// ---------------------------------------------------------------------------
// Layers: command-line overrides and the user's config file.

// The names `secrets:` declares, as written in the document.
std::set<std::string> SecretNames(const YAML::Node& root) {
  std::set<std::string> names;
  if (!root.IsMap()) return names;
  const YAML::Node secrets = root["secrets"];
  if (!secrets || !secrets.IsMap()) return names;
  for (auto it = secrets.begin(); it != secrets.end(); ++it) {
    if (it->first.IsScalar()) names.insert(it->first.Scalar());
  }
  return names;
}

// The first key under `n` (a mapping, at any depth) that names a secret.
std::optional<std::string> FindSecretKey(const YAML::Node& n, const std::set<std::string>& secrets,
                                         int depth = 0) {
  if (depth > 64) return std::nullopt;
  if (n.IsMap()) {
    for (auto it = n.begin(); it != n.end(); ++it) {
      if (it->first.IsScalar() && secrets.contains(it->first.Scalar())) return it->first.Scalar();
      if (auto found = FindSecretKey(it->second, secrets, depth + 1)) return found;
    }
  } else if (n.IsSequence()) {
    for (const YAML::Node& item : n) {
      if (auto found = FindSecretKey(item, secrets, depth + 1)) return found;
    }
  }
  return std::nullopt;
}

// Applies `o` to `root`; false after an error (named by the override).
bool ApplyOverride(const Source& src, YAML::Node& root, const Override& o,
                   const std::set<std::string>& secrets) {
  auto fail = [&](const std::string& message) {
    src.errors->push_back(JobFileError{o.Name(), 0, 0, "", message});
    return false;
  };
  const std::string kSecretMessage =
      " is declared in secrets:; a value given on the command line would land in the job "
      "store, the plan and process lists (give the secret's file or variable instead)";
  std::vector<std::string> segments;
  YAML::Node value;
  switch (o.kind) {
    case Override::Kind::kEnv:
      if (secrets.contains(o.path)) return fail(o.path + kSecretMessage);
      segments = {"container", "env", o.path};
      value = YAML::Node(o.value);
      break;
    case Override::Kind::kName:
      segments = {"name"};
      value = YAML::Node(o.value);
      break;
    case Override::Kind::kHostsFile:
      if (root.IsMap() && root["hosts"]) root.remove("hosts");
      if (root.IsMap() && root["hosts_command"]) root.remove("hosts_command");
      segments = {"hosts_file"};
      value = YAML::Node(o.value);
      break;
    case Override::Kind::kSet: {
      for (size_t start = 0; start <= o.path.size();) {
        size_t dot = std::min(o.path.find('.', start), o.path.size());
        segments.push_back(o.path.substr(start, dot - start));
        start = dot + 1;
      }
      if (segments[0] == "secrets") {
        return fail("secrets cannot be set on the command line (their values would land in "
                    "the job store, the plan and process lists)");
      }
      if (secrets.contains(segments.back())) return fail(segments.back() + kSecretMessage);
      if (segments.size() == 1 && root.IsMap()) {
        // One inventory: the one set replaces the others.
        for (const char* key : {"hosts", "hosts_file", "hosts_command"}) {
          if (segments[0] != key && (segments[0] == "hosts" || segments[0] == "hosts_file" ||
                                     segments[0] == "hosts_command") &&
              root[key]) {
            root.remove(key);
          }
        }
      }
      if (CheckRawText(o.value).size() > 0 || o.value.size() > 65536) {
        return fail("the value is not valid text for YAML (at most 64 KiB of UTF-8, no NUL)");
      }
      try {
        value = YAML::Load(o.value);
      } catch (const YAML::Exception& e) {
        return fail("invalid YAML value " + QuoteValue(o.value) + ": " + e.msg);
      }
      Expansion expansion;
      CountExpandedNodes(value, &expansion);
      if (expansion.exceeded()) return fail(ExpansionMessage(expansion));
      if (auto key = FindSecretKey(value, secrets)) return fail(*key + kSecretMessage);
      break;
    }
  }
  // Down to the parent of the last segment, making mappings where nothing is.
  YAML::Node at;
  at.reset(root);
  std::string walked;
  for (size_t i = 0; i < segments.size(); ++i) {
    const std::string& segment = segments[i];
    const bool last = i + 1 == segments.size();
    if (at.IsSequence()) {
      long long index;
      if (!ParseInteger(segment, &index) || index < 0 ||
          static_cast<size_t>(index) >= at.size()) {
        return fail("'" + walked + "' is a list of " + std::to_string(at.size()) +
                    " item(s); expected an index from 0 to " + std::to_string(at.size() - 1) +
                    ", got '" + segment + "'");
      }
      if (last) {
        at[static_cast<size_t>(index)] = value;
        return true;
      }
      YAML::Node next = at[static_cast<size_t>(index)];
      at.reset(next);
    } else if (at.IsMap() || at.IsNull() || !at.IsDefined()) {
      if (last) {
        at[segment] = value;
        return true;
      }
      YAML::Node next = at[segment];
      at.reset(next);
    } else {
      return fail("'" + walked + "' is a single value in the job file, not a mapping or a list");
    }
    walked += (walked.empty() ? "" : ".") + segment;
  }
  return true;
}

// An error about a value an override put there names the override, not a
// line of the job file.
void NameOverrides(const std::string& file, const std::vector<Override>& overrides,
                   std::vector<JobFileError>* errors) {
  for (JobFileError& e : *errors) {
    if (e.file != file || e.key.empty()) continue;
    for (auto o = overrides.rbegin(); o != overrides.rend(); ++o) {
      const std::string path = o->KeyPath();
      const bool under = e.key == path || (e.key.size() > path.size() &&
                                           e.key.compare(0, path.size(), path) == 0 &&
                                           (e.key[path.size()] == '.' || e.key[path.size()] == '['));
      if (!under) continue;
      e.file = o->Name();
      e.line = e.column = 0;
      if (e.key == path) e.key.clear();
      break;
    }
  }
}

// The `ssh:` settings named in `keys` from `from` into `to`.
void CopySshKeys(const SshSettings& from, const std::set<std::string>& keys, SshSettings& to) {
  auto set = [&](const char* key) { return keys.contains(key); };
  if (set("known_hosts")) to.known_hosts = from.known_hosts;
  if (set("config_file")) to.config_file = from.config_file;
  if (set("host_key_checking")) to.host_key_checking = from.host_key_checking;
  if (set("connect_timeout")) to.connect_timeout = from.connect_timeout;
  if (set("dead_after")) to.dead_after = from.dead_after;
  if (set("engine_timeout")) to.engine_timeout = from.engine_timeout;
  if (set("engine_misses")) to.engine_misses = from.engine_misses;
  if (set("parallel_connects")) to.parallel_connects = from.parallel_connects;
  if (set("user")) to.user = from.user;
  if (set("port")) to.port = from.port;
  if (set("identity_file")) to.identity_file = from.identity_file;
  if (set("proxy_jump")) to.proxy_jump = from.proxy_jump;
}

// The user's config file: defaults for the job file's `ssh:` block.
struct ConfigDraft {
  SshSettings ssh;
  std::set<std::string> ssh_keys;
  HealthSpec health;  // health.host_failures and health.host_window only
  std::set<std::string> health_keys;
};

constexpr KeyRule<ConfigDraft> kConfigRules[] = {
    {"ssh",
     {.type = KeyType::kBlock, .description = "Defaults for every job file's ssh: block",
      .keys = SshKeys},
     [](const Entry& e, ConfigDraft& c) {
       for (const auto& [key, entry] : ReadSsh(e, c.ssh)) c.ssh_keys.insert(key);
     }},
    {"health",
     {.type = KeyType::kBlock, .description = "Defaults for every job file's health.host_failures and health.host_window (the hosts' failure records)",
      .keys = HealthKeys},
     [](const Entry& e, ConfigDraft& c) {
       for (const auto& [key, entry] : ReadConfigHealth(e, c.health)) c.health_keys.insert(key);
     }},
};

// Reads `path` (absent: nothing to do) and fills in the ssh settings and
// the health.host_failures/host_window the job file left unset.
void ApplyConfigFile(const std::string& path, std::vector<JobFileError>* errors, JobSpec& spec,
                     const std::set<std::string>& job_ssh_keys, const std::set<std::string>& job_health_keys) {
  std::string text, why;
  std::error_code ec;
  if (path.empty() || !fs::exists(path, ec)) return;
  Source src{path, fs::path(path).parent_path().string(), errors};
  if (!ReadFileCapped(path, &text, &why)) {
    errors->push_back({path, 0, 0, "", "cannot read config file: " + why});
    return;
  }
  std::optional<YAML::Node> root = ParseDocument(src, text, "config file");
  if (!root) return;
  const Entry top{&src, *root, *root, ""};
  if (!root->IsMap()) {
    top.Error("expected a mapping (ssh:), got " + TypeName(*root));
    return;
  }
  ConfigDraft c;
  ReadMapping(top, kConfigRules, c);
  std::set<std::string> unset;
  for (const std::string& key : c.ssh_keys) {
    if (!job_ssh_keys.contains(key)) unset.insert(key);
  }
  CopySshKeys(c.ssh, unset, spec.ssh);
  if (c.health_keys.contains("host_failures") && !job_health_keys.contains("host_failures")) {
    spec.health.host_failures = c.health.host_failures;
  }
  if (c.health_keys.contains("host_window") && !job_health_keys.contains("host_window")) {
    spec.health.host_window = c.health.host_window;
  }
}

// Each host group's ssh: the job's, with the group's own keys over it.
void LayGroupSsh(JobSpec& spec) {
  for (HostGroup& g : spec.host_groups) {
    SshSettings merged = spec.ssh;
    CopySshKeys(g.ssh, std::set<std::string>(g.ssh_keys.begin(), g.ssh_keys.end()), merged);
    g.ssh = std::move(merged);
  }
}

}  // namespace jobfile


std::vector<KeyInfo> JobFileKeys() { return jobfile::JobKeys(); }

LoadedJob ParseJobText(std::string_view text, const std::string& file_name,
                       const std::string& base_dir, SecretValues secrets,
                       const JobLayers& layers) {
  LoadedJob result;
  jobfile::Source src{file_name, base_dir, &result.errors, secrets == SecretValues::kRead};
  auto draft = std::make_unique<jobfile::JobDraft>();
  draft->spec.file = file_name;
  draft->spec.base_dir = base_dir;
  if (layers.hosts_file) draft->recorded_hosts = &*layers.hosts_file;
  draft->recorded_group_hosts = layers.group_hosts_files;
  if (layers.hosts_command) draft->recorded_command = &*layers.hosts_command;
  draft->may_run_command = layers.run_hosts_command;
  try {
    if (std::optional<YAML::Node> root = jobfile::ParseDocument(src, text, "job file")) {
      const std::set<std::string> secret_names = jobfile::SecretNames(*root);
      bool applied = true;
      for (const Override& o : layers.overrides) {
        applied = jobfile::ApplyOverride(src, *root, o, secret_names) && applied;
      }
      if (applied) {
        jobfile::ReadJob(src, *root, *draft);
        jobfile::NameOverrides(file_name, layers.overrides, &result.errors);
        jobfile::ApplyConfigFile(layers.config_file, &result.errors, draft->spec, draft->ssh_keys,
                                 draft->health_keys);
        jobfile::LayGroupSsh(draft->spec);
      }
    }
  } catch (const YAML::Exception& e) {
    // Not expected (values are read as scalars, which does not throw); an
    // error value all the same, as promised.
    src.Error(e.mark.line + 1, e.mark.column + 1, "", "YAML error: " + e.msg);
  } catch (const std::exception& e) {
    src.Error(1, 1, "", std::string("internal error while reading the job file: ") + e.what());
  }
  jobfile::SortErrors(&result.errors);
  if (result.errors.empty()) {
    result.spec = std::move(draft->spec);
    result.hosts_file = std::move(draft->hosts_read);
    result.group_hosts_files = std::move(draft->group_hosts_read);
    result.hosts_command = std::move(draft->command_read);
  }
  return result;
}

LoadedJob LoadJobFile(const std::string& path, SecretValues secrets, const JobLayers& layers) {
  std::string text, error;
  if (!jobfile::ReadFileCapped(path, &text, &error)) {
    LoadedJob result;
    result.errors.push_back({path, 0, 0, "", "cannot read job file: " + error});
    return result;
  }
  std::error_code ec;
  std::filesystem::path absolute = std::filesystem::absolute(path, ec);
  std::string base_dir = ec ? std::filesystem::path(path).parent_path().string()
                            : absolute.lexically_normal().parent_path().string();
  return ParseJobText(text, path, base_dir, secrets, layers);
}

}  // namespace barge::runner
