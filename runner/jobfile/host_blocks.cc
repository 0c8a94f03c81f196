// Where the hosts come from: hosts, spare_hosts, hosts_file, hosts_command, host_groups.
#include "runner/jobfile/blocks.h"

#include <algorithm>
#include <span>

namespace barge::runner::jobfile {

// Host entries of `e` (a list) into `out`.
void ReadHostEntries(const Entry& e, std::vector<HostDraft>& out) {
  if (ExpectList(e, "hosts")) {
    for (size_t i = 0; i < e.value.size(); ++i) {
      HostDraft h;
      h.entry = e.Element(e.value[i], i);
      const YAML::Node& item = e.value[i];
      if (item.IsScalar()) {
        h.address = h.entry;
        if (auto a = ReadChecked(h.entry, CheckHostAddress)) h.host.address = *a;
      } else if (item.IsMap()) {
        ReadHostEntry(h.entry, h);
        if (!h.address) {
          e.src->Error(item.Mark(), h.entry.path + ".address",
                       "missing; every host needs an address ('local' for the local engine)");
        }
      } else {
        h.entry.Error("expected a host address or a mapping with 'address:', got " +
                      TypeName(item));
        continue;
      }
      h.host.line = h.entry.key.Mark().line + 1;
      out.push_back(std::move(h));
    }
  }
}

// The list of hosts, from `hosts:` or from a hosts_file's root.
void ReadHostList(const Entry& e, JobDraft& d) {
  d.hosts_given = true;
  const size_t errors_before = e.src->errors->size();
  if (e.value.IsNull() || (e.value.IsSequence() && e.value.size() == 0)) {
    e.Error("no hosts; remove 'hosts:' to run on the local Docker engine, or list at least one");
  } else {
    ReadHostEntries(e, d.hosts);
  }
  if (e.src->errors->size() != errors_before) d.host_errors = true;
}

// `spare_hosts:` — entries like hosts', without the keys that place nodes
// (a spare takes over the nodes of the host it replaces).
void ReadSpareHosts(const Entry& e, JobDraft& d) {
  if (e.value.IsNull()) return;
  const size_t first = d.spares.size();
  ReadHostEntries(e, d.spares);
  for (size_t i = first; i < d.spares.size(); ++i) {
    HostDraft& h = d.spares[i];
    if (h.role) h.role->KeyError("not for a spare host (it takes the role of the host it replaces)");
    h.role.reset();
    if (h.nodes) h.nodes->KeyError("not for a spare host (it takes the nodes of the host it replaces)");
    if (h.address && h.host.is_local()) {
      h.address->Error("the local engine cannot be a spare host (it is never lost)");
    }
  }
}


std::optional<LoadedHostsFile> LoadHostsFile(const Entry& e, const std::string& written,
                                             std::span<const RecordedHostsFile> recorded,
                                             std::deque<Source>& sources) {
  std::optional<std::string> path = ExpandPath(e, written);
  if (!path) return std::nullopt;
  LoadedHostsFile f;
  f.path = *path;
  // Shown joined to the job file's directory as given, so that the name
  // means the same file from where the user stands.
  f.shown = written[0] == '~' ? *path
                              : (fs::path(e.src->name).parent_path() / written).lexically_normal().string();
  std::string error;
  auto same = std::find_if(recorded.begin(), recorded.end(),
                           [&](const RecordedHostsFile& r) { return r.path == *path; });
  if (same != recorded.end()) {
    f.text = same->text;
  } else if (!ReadFileCapped(*path, &f.text, &error)) {
    e.Error("cannot read hosts file " + QuoteValue(written) + ": " + error);
    return std::nullopt;
  }
  f.src = &sources.emplace_back(Source{f.shown, fs::path(*path).parent_path().string(), e.src->errors});
  std::optional<YAML::Node> root = ParseDocument(*f.src, f.text, "hosts file");
  if (!root) return std::nullopt;
  f.root = *root;
  return f;
}

void ReadHostsFile(const Entry& e, JobDraft& d) {
  if (d.hosts_given) return;  // `hosts:` came first: an error, reported once both are seen
  d.hosts_given = true;
  std::optional<std::string> written = ReadNonEmpty(e, "a path");
  if (!written) {
    d.host_errors = true;
    return;
  }
  std::span<const RecordedHostsFile> recorded;
  if (d.recorded_hosts != nullptr) recorded = std::span(d.recorded_hosts, 1);
  std::optional<LoadedHostsFile> file = LoadHostsFile(e, *written, recorded, d.sources);
  if (!file) {
    d.host_errors = true;
    return;
  }
  d.hosts_read = RecordedHostsFile{file->path, file->text};
  d.spec.hosts_file = file->shown;
  ReadHostList(Entry{file->src, file->root, file->root, "hosts"}, d);
}

// `hosts_command:` — the inventory as a command on this machine prints it
// (runner/jobfile/hosts_command.h), run once here unless recorded.
void ReadHostsCommand(const Entry& e, JobDraft& d) {
  if (d.hosts_given) return;  // `hosts:` or `hosts_file:` came first: reported once all are seen
  d.hosts_given = true;
  std::optional<std::string> command = ReadNonEmpty(e, "a shell command");
  if (!command) {
    d.host_errors = true;
    return;
  }
  std::string output;
  if (d.recorded_command != nullptr && d.recorded_command->command == *command) {
    output = d.recorded_command->output;
  } else if (!d.may_run_command) {
    e.Error("hosts_command `" + *command + "`: its output was not recorded with the job, and it is "
            "not run again here");
    d.host_errors = true;
    return;
  } else {
    Result<std::string> ran = RunHostsCommand(*command, e.src->base_dir);
    if (!ran.ok()) {
      e.Error(ran.status().message());
      d.host_errors = true;
      return;
    }
    output = std::move(ran).value();
    d.spec.hosts_command_ran = true;
  }
  d.command_read = RecordedHostsCommand{*command, output};
  d.spec.hosts_command = *command;
  const Source& out_src = d.sources.emplace_back(
      Source{"output of hosts_command (" + e.src->name + ":" + std::to_string(e.key.Mark().line + 1) + ")",
             e.src->base_dir, e.src->errors});
  const std::string yaml = HostsCommandOutputAsYaml(output);
  if (yaml.find_first_not_of(" \t\r\n") == std::string::npos) {
    e.Error("hosts_command `" + *command + "` printed no hosts (only blank lines and # comments)");
    d.host_errors = true;
    return;
  }
  std::optional<YAML::Node> root = ParseDocument(out_src, yaml, "hosts_command output");
  if (!root) {
    d.host_errors = true;
    return;
  }
  if (root->IsNull() || (root->IsSequence() && root->size() == 0)) {
    e.Error("hosts_command `" + *command + "` printed no hosts (" +
            (root->IsNull() ? "only blank lines and # comments" : "an empty list") + ")");
    d.host_errors = true;
    return;
  }
  if (!root->IsSequence()) {
    out_src.Error(root->Mark(), "hosts",
                  "expected one address per line, or a JSON list of host entries");
    d.host_errors = true;
    return;
  }
  d.command_source = &out_src;
  ReadHostList(Entry{&out_src, *root, *root, "hosts"}, d);
}

// A group's hosts_file: a YAML list of host entries, as the job's
// hosts_file. Read from the layers' record of the same path when there is
// one (rerun, a member job's down, exec, attach), else from disk.
void ReadGroupHostsFile(const Entry& e, GroupDraft& g) {
  std::optional<std::string> written = ReadNonEmpty(e, "a path");
  std::optional<LoadedHostsFile> file =
      written ? LoadHostsFile(e, *written, g.recorded_hosts, *g.sources) : std::nullopt;
  if (!file) {
    g.host_errors = true;
    return;
  }
  g.hosts_read = RecordedHostsFile{file->path, file->text};
  g.group.hosts_file = file->shown;
  const YAML::Node& root = file->root;
  const Entry list{file->src, root, root, g.entry.path + ".hosts"};
  if (root.IsNull() || (root.IsSequence() && root.size() == 0)) {
    list.Error("no hosts; a host group needs at least one");
    g.host_errors = true;
    return;
  }
  const size_t errors_before = e.src->errors->size();
  ReadHostEntries(list, g.hosts);
  if (e.src->errors->size() != errors_before) g.host_errors = true;
}

constexpr KeyRule<GroupDraft> kHostGroupRules[] = {
    {"hosts",
     {.type = KeyType::kBlockList, .description = "The group's hosts: addresses, or mappings with address (as the job's hosts)", .keys = HostKeys, .scalar_too = true},
     [](const Entry& e, GroupDraft& g) {
       const size_t errors_before = e.src->errors->size();
       if (e.value.IsNull() || (e.value.IsSequence() && e.value.size() == 0)) {
         e.Error("no hosts; a host group needs at least one");
       } else {
         ReadHostEntries(e, g.hosts);
       }
       if (e.src->errors->size() != errors_before) g.host_errors = true;
     }},
    {"hosts_file",
     {.type = KeyType::kString, .description = "A YAML file holding the group's list of hosts (instead of hosts)"},
     ReadGroupHostsFile},
    {"ssh",
     {.type = KeyType::kBlock, .description = "SSH settings for the group's hosts, over the job's ssh: (a key set here wins; the others are the job's)", .keys = SshKeys},
     [](const Entry& e, GroupDraft& g) {
       for (const auto& [key, entry] : ReadSsh(e, g.group.ssh)) g.ssh_keys.insert(key);
     }},
};
std::vector<KeyInfo> HostGroupKeys() { return Describe(kHostGroupRules); }

void ReadHostGroups(const Entry& e, JobDraft& d) {
  if (!e.value.IsMap() || e.value.size() == 0) {
    e.Error("expected a mapping of NAME: {hosts: [...] | hosts_file: PATH, ssh: {...}}, got " +
            (e.value.IsMap() ? std::string("an empty mapping") : TypeName(e.value)));
    return;
  }
  for (auto it = e.value.begin(); it != e.value.end(); ++it) {
    if (!it->first.IsScalar()) {
      e.src->Error(it->first.Mark(), e.path, "a group name must be a plain word, not " + TypeName(it->first));
      continue;
    }
    GroupDraft g;
    g.entry = e.Child(it->first, it->second);
    g.sources = &d.sources;
    g.recorded_hosts = d.recorded_group_hosts;
    g.group.name = it->first.Scalar();
    if (Status s = CheckJobName(g.group.name); !s.ok()) {
      g.entry.KeyError("invalid group name " + QuoteValue(g.group.name) +
                       " (letters, digits, '_', '.', '-'; starting with a letter or digit; at most 63)");
      continue;
    }
    if (!it->second.IsMap()) {
      g.entry.Error("expected a mapping with hosts: or hosts_file: (and ssh:), got " + TypeName(it->second));
      continue;
    }
    SeenKeys seen = ReadMapping(g.entry, kHostGroupRules, g);
    if (seen.contains("hosts") && seen.contains("hosts_file")) {
      seen.at("hosts_file").KeyError("give either 'hosts' or 'hosts_file', not both");
      g.host_errors = true;
    } else if (!seen.contains("hosts") && !seen.contains("hosts_file")) {
      g.entry.KeyError("the group has no hosts; give 'hosts:' or 'hosts_file:'");
      g.host_errors = true;
    }
    d.groups.push_back(std::move(g));
  }
}


}  // namespace barge::runner::jobfile
