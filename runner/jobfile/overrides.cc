#include "runner/jobfile/overrides.h"

#include <nlohmann/json.hpp>

#include "base/shell_word.h"
#include "base/user_home.h"
#include "runner/jobfile/job_values.h"

namespace barge::runner {

std::string Override::Flag() const { return std::string(NameOf(kOverrideFlags, kind)); }

std::string Override::Argument() const {
  if (kind == Kind::kSet || kind == Kind::kEnv) return path + "=" + value;
  return value;
}

std::string Override::Name() const {
  if (kind == Kind::kSet || kind == Kind::kEnv) return Flag() + " " + path;
  return Flag();
}

std::string Override::KeyPath() const {
  switch (kind) {
    case Kind::kEnv:
      return "container.env." + path;
    case Kind::kHostsFile:
      return "hosts_file";
    case Kind::kName:
      return "name";
    case Kind::kSet:
      break;
  }
  std::string out;
  size_t start = 0;
  while (start <= path.size()) {
    size_t dot = path.find('.', start);
    if (dot == std::string::npos) dot = path.size();
    std::string segment = path.substr(start, dot - start);
    bool index = !segment.empty() && segment.find_first_not_of("0123456789") == std::string::npos;
    if (index && !out.empty()) {
      out += "[" + segment + "]";
    } else {
      out += (out.empty() ? "" : ".") + segment;
    }
    start = dot + 1;
  }
  return out;
}

Result<Override> ParseSetOverride(std::string_view arg) {
  size_t eq = arg.find('=');
  if (eq == std::string_view::npos) {
    return Status::Error("--set " + std::string(arg) +
                         ": expected KEY.PATH=VALUE, e.g. --set container.shm_size=8g");
  }
  std::string path(arg.substr(0, eq));
  bool ok = !path.empty() && path.front() != '.' && path.back() != '.' &&
            path.find("..") == std::string::npos;
  for (char c : path) {
    ok = ok && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                c == '_' || c == '-' || c == '.');
  }
  if (!ok) {
    return Status::Error("--set " + std::string(arg) +
                         ": invalid key path '" + path +
                         "' (dotted keys, list items by index: hosts.0.port)");
  }
  return Override{Override::Kind::kSet, path, std::string(arg.substr(eq + 1))};
}

Result<Override> ParseEnvOverride(std::string_view arg) {
  size_t eq = arg.find('=');
  if (eq == std::string_view::npos) {
    return Status::Error("--env " + std::string(arg) + ": expected NAME=VALUE, e.g. --env EPOCHS=5");
  }
  std::string name(arg.substr(0, eq));
  if (Status s = CheckEnvName(name); !s.ok()) return Status::Error("--env " + name + ": " + s.message());
  return Override{Override::Kind::kEnv, name, std::string(arg.substr(eq + 1))};
}

std::string DefaultConfigFile() {
  if (const std::string xdg = XdgDirFromEnv("XDG_CONFIG_HOME"); !xdg.empty()) return xdg + "/barge/config.yaml";
  if (const std::string home = UserHome(HomeRule::kXdg); !home.empty()) return home + "/.config/barge/config.yaml";
  return "";
}

}  // namespace barge::runner

namespace barge::runner {
std::string RunRequest::CommandLine() const {
  std::string out = "barge run " + ShellWord(file);
  for (const Override& o : overrides) out += " " + o.Flag() + " " + ShellWord(o.Argument());
  return out;
}

std::string RunRequestToJson(const RunRequest& r) {
  nlohmann::ordered_json j;
  j["file"] = r.file;
  j["text"] = r.text;
  j["overrides"] = nlohmann::ordered_json::array();
  for (const Override& o : r.overrides) {
    j["overrides"].push_back({{"flag", o.Flag()}, {"argument", o.Argument()}});
  }
  if (r.hosts_file) {
    j["hosts_file"] = {{"path", r.hosts_file->path}, {"text", r.hosts_file->text}};
  } else {
    j["hosts_file"] = nullptr;
  }
  if (!r.group_hosts_files.empty()) {
    j["group_hosts_files"] = nlohmann::ordered_json::array();
    for (const RecordedHostsFile& f : r.group_hosts_files) {
      j["group_hosts_files"].push_back({{"path", f.path}, {"text", f.text}});
    }
  }
  if (r.hosts_command) {
    j["hosts_command"] = {{"command", r.hosts_command->command}, {"output", r.hosts_command->output}};
  }
  if (r.member) {
    j["member"] = {{"array", r.member->array_id}, {"index", r.member->index}, {"hosts", r.member->hosts}};
  }
  return j.dump();
}

Result<RunRequest> RunRequestFromJson(std::string_view json) {
  nlohmann::json j = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
  auto bad = [](const std::string& why) { return Status::Error("recorded run request: " + why); };
  if (!j.is_object() || !j["file"].is_string() || !j["text"].is_string() ||
      !j["overrides"].is_array()) {
    return bad("not an object with file, text and overrides");
  }
  RunRequest r;
  r.file = j["file"].get<std::string>();
  r.text = j["text"].get<std::string>();
  for (const nlohmann::json& o : j["overrides"]) {
    if (!o.is_object() || !o["flag"].is_string() || !o["argument"].is_string()) {
      return bad("an override is not {flag, argument}");
    }
    const std::string flag = o["flag"].get<std::string>();
    const std::string arg = o["argument"].get<std::string>();
    Result<Override> parsed = Status::Error("unknown flag " + flag);
    if (std::optional<Override::Kind> kind = ValueOf(kOverrideFlags, flag)) {
      switch (*kind) {
        case Override::Kind::kSet: parsed = ParseSetOverride(arg); break;
        case Override::Kind::kEnv: parsed = ParseEnvOverride(arg); break;
        case Override::Kind::kHostsFile:
        case Override::Kind::kName: parsed = Override{*kind, "", arg}; break;
      }
    }
    if (!parsed.ok()) return bad(parsed.status().message());
    r.overrides.push_back(*parsed);
  }
  if (j.contains("hosts_file") && j["hosts_file"].is_object()) {
    const nlohmann::json& h = j["hosts_file"];
    if (!h["path"].is_string() || !h["text"].is_string()) return bad("hosts_file is not {path, text}");
    r.hosts_file = RecordedHostsFile{h["path"].get<std::string>(), h["text"].get<std::string>()};
  }
  if (j.contains("hosts_command") && j["hosts_command"].is_object()) {
    const nlohmann::json& h = j["hosts_command"];
    if (!h["command"].is_string() || !h["output"].is_string()) {
      return bad("hosts_command is not {command, output}");
    }
    r.hosts_command =
        RecordedHostsCommand{h["command"].get<std::string>(), h["output"].get<std::string>()};
  }
  if (j.contains("group_hosts_files")) {
    if (!j["group_hosts_files"].is_array()) return bad("group_hosts_files is not a list");
    for (nlohmann::json& h : j["group_hosts_files"]) {
      if (!h.is_object() || !h["path"].is_string() || !h["text"].is_string()) {
        return bad("a group hosts file is not {path, text}");
      }
      r.group_hosts_files.push_back(RecordedHostsFile{h["path"].get<std::string>(), h["text"].get<std::string>()});
    }
  }
  if (j.contains("member")) {
    nlohmann::json& m = j["member"];
    if (!m.is_object() || !m["array"].is_string() || !m["index"].is_number_unsigned() ||
        !m["hosts"].is_array()) {
      return bad("member is not {array, index, hosts}");
    }
    RunRequest::Member member;
    member.array_id = m["array"].get<std::string>();
    member.index = m["index"].get<int>();
    for (const nlohmann::json& h : m["hosts"]) {
      if (!h.is_number_unsigned()) return bad("member hosts are not host indices");
      member.hosts.push_back(h.get<size_t>());
    }
    r.member = std::move(member);
  }
  return r;
}

}  // namespace barge::runner
