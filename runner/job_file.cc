#include "runner/job_file.h"

#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <deque>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <regex>
#include <set>
#include <span>
#include <sstream>
#include <tuple>
#include <utility>

#include "base/user_home.h"
#include "runner/fleet/hosts_command.h"
#include "runner/fleet/proxy_jump.h"
#include "runner/job_keys.h"
#include "runner/job_text.h"
#include "runner/job_values.h"
#include "runner/suggest.h"
#include "runner/units.h"
#include "runner/window/forward_spec.h"

namespace barge::runner {

std::string JobFileError::ToString() const {
  std::string out = file;
  if (line > 0) out += ":" + std::to_string(line) + ":" + std::to_string(column);
  out += ": ";
  if (!key.empty()) out += key + ": ";
  return out + message;
}

namespace {

namespace fs = std::filesystem;
using container::ContainerOptions;
using container::KeyValues;

// More nodes than this is refused: first as written (before yaml-cpp builds
// a tree of them), then with aliases expanded (an alias bomb). 1000 hosts of
// 30 values each fit.
constexpr long long kMaxNodes = 100000;

// One file being read: the name its errors carry and the directory its
// relative paths resolve against. Owned by ParseJobText (the job file) or
// by JobDraft (a hosts_file); outlives every Entry that points at it.
struct Source {
  std::string name;
  std::string base_dir;
  std::vector<JobFileError>* errors;
  bool read_secrets = true;  // SecretValues::kRead

  void Error(int line, int column, std::string key, std::string message) const {
    errors->push_back(JobFileError{name, line, column, std::move(key), std::move(message)});
  }
  void Error(const YAML::Mark& at, std::string key, std::string message) const {
    Error(at.line + 1, at.column + 1, std::move(key), std::move(message));
  }
};

// A value being read, with everything an error about it needs.
struct Entry {
  const Source* src;
  YAML::Node key;  // the key node; for a list element, the element itself
  YAML::Node value;
  std::string path;  // "hosts[1].port"

  // An error about the value: placed at the value, or at the key when the
  // value is empty (yaml-cpp places an empty value at the next token, often
  // on the next line).
  void Error(std::string message) const {
    const YAML::Node& at = value.IsNull() ? key : value;
    src->Error(at.Mark(), path, std::move(message));
  }
  // An error about the key itself: unknown, misplaced, missing parts.
  void KeyError(std::string message) const { src->Error(key.Mark(), path, std::move(message)); }

  Entry Element(const YAML::Node& element, size_t index) const {
    return Entry{src, element, element, path + "[" + std::to_string(index) + "]"};
  }
  Entry Child(const YAML::Node& child_key, const YAML::Node& child_value) const {
    std::string name = child_key.Scalar();
    return Entry{src, child_key, child_value, path.empty() ? name : path + "." + name};
  }
};

std::string TypeName(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Scalar:
      return "a string (" + QuoteValue(n.Scalar()) + ")";
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Map:
      return "a mapping";
    default:
      return "nothing";
  }
}

std::string JoinWords(std::span<const std::string_view> words, std::string_view last_sep) {
  std::string out;
  for (size_t i = 0; i < words.size(); ++i) {
    if (i > 0) out += i + 1 == words.size() ? last_sep : std::string_view(", ");
    out += words[i];
  }
  return out;
}

// ---------------------------------------------------------------------------
// Reading single values. Each reports its own errors and returns nullopt
// (or false) after one.

std::optional<std::string> ReadScalar(const Entry& e, std::string_view expected = "a string") {
  if (e.value.IsNull()) {
    e.Error("missing value (expected " + std::string(expected) + ")");
    return std::nullopt;
  }
  if (!e.value.IsScalar()) {
    e.Error("expected " + std::string(expected) + ", got " + TypeName(e.value));
    return std::nullopt;
  }
  const std::string& s = e.value.Scalar();
  // The text was checked for NUL bytes; an escape ("\0") can still make one.
  if (s.find('\0') != std::string::npos) {
    e.Error("NUL character in the value (Docker and shells cannot carry it)");
    return std::nullopt;
  }
  return s;
}

std::optional<std::string> ReadNonEmpty(const Entry& e, std::string_view expected = "a string") {
  std::optional<std::string> s = ReadScalar(e, expected);
  if (s && s->empty()) {
    e.Error("empty value (expected " + std::string(expected) + ")");
    return std::nullopt;
  }
  return s;
}

// A string that `check` accepts.
std::optional<std::string> ReadChecked(const Entry& e, Status (*check)(std::string_view)) {
  std::optional<std::string> s = ReadScalar(e);
  if (!s) return std::nullopt;
  if (Status status = check(*s); !status.ok()) {
    e.Error(status.message());
    return std::nullopt;
  }
  return s;
}

// An image reference, in which a job array's {array.COLUMN} placeholders
// stand for any valid part (each member's image is checked again once they
// are filled in, runner/fleet/array_member.h).
Status CheckImageOrArrayTemplate(std::string_view image) {
  std::string shown(image);
  for (size_t open = shown.find("{array."); open != std::string::npos; open = shown.find("{array.", open + 1)) {
    size_t close = shown.find('}', open);
    if (close == std::string::npos) break;
    if (!CheckEnvName(std::string_view(shown).substr(open + 7, close - open - 7)).ok()) continue;
    shown.replace(open, close - open + 1, "x");
  }
  if (shown == image) return CheckImageReference(image);
  if (Status s = CheckImageReference(shown); !s.ok()) return CheckImageReference(image);
  return Status::Ok();
}

std::optional<long long> ReadInteger(const Entry& e, long long min, long long max,
                                     std::string_view what = "an integer") {
  std::string expected =
      std::string(what) + " from " + std::to_string(min) + " to " + std::to_string(max);
  if (max == LLONG_MAX) expected = std::string(what) + " of at least " + std::to_string(min);
  std::optional<std::string> s = ReadScalar(e, expected);
  if (!s) return std::nullopt;
  long long value;
  if (!ParseInteger(*s, &value) || value < min || value > max) {
    e.Error("expected " + expected + ", got " + QuoteValue(*s));
    return std::nullopt;
  }
  return value;
}

std::optional<int> ReadPort(const Entry& e) {
  std::optional<long long> port = ReadInteger(e, 1, 65535, "a port number");
  if (!port) return std::nullopt;
  return static_cast<int>(*port);
}

std::optional<std::string> ReadEnum(const Entry& e, std::span<const std::string_view> values) {
  std::string expected = JoinWords(values, " or ");
  std::optional<std::string> s = ReadScalar(e, expected);
  if (!s) return std::nullopt;
  for (std::string_view v : values) {
    if (v == *s) return s;
  }
  std::string message = "invalid value " + QuoteValue(*s) + " (expected " + expected + ")";
  if (auto close = ClosestMatch(*s, values)) message += "; did you mean '" + *close + "'?";
  e.Error(message);
  return std::nullopt;
}

// The same, for a key whose choices are an enum's names: its value.
template <typename E, size_t N>
std::optional<E> ReadEnum(const Entry& e, const EnumTable<E, N>& table) {
  const std::array<std::string_view, N> names = NamesOf(table);
  std::optional<std::string> name = ReadEnum(e, names);
  if (!name) return std::nullopt;
  return ValueOf(table, *name);
}

std::optional<std::string> ReadSize(const Entry& e) {
  std::optional<std::string> s = ReadScalar(e, "a size, e.g. 512m or 2g");
  if (!s) return std::nullopt;
  if (!IsSize(*s)) {
    e.Error(InvalidSizeMessage(*s));
    return std::nullopt;
  }
  return s;
}

std::optional<std::chrono::milliseconds> ReadDuration(const Entry& e, bool allow_zero) {
  std::optional<std::string> s = ReadScalar(e, "a duration, e.g. 10s");
  if (!s) return std::nullopt;
  Result<std::chrono::milliseconds> d = ParseDuration(*s);
  if (!d.ok()) {
    e.Error(d.status().message());
    return std::nullopt;
  }
  if (!allow_zero && d->count() == 0) {
    e.Error("must be longer than zero");
    return std::nullopt;
  }
  return *d;
}

// False (after an error) unless the value is a list. A lone value where a
// list belongs gets the fix spelled out.
bool ExpectList(const Entry& e, std::string_view of_what) {
  if (e.value.IsSequence()) return true;
  std::string message = "expected a list of " + std::string(of_what) + ", got " + TypeName(e.value);
  if (e.value.IsScalar()) message += "; write [" + e.value.Scalar() + "]";
  e.Error(message);
  return false;
}

// A list of strings, each accepted by `check` (when given).
std::optional<std::vector<std::string>> ReadStringList(const Entry& e,
                                                       Status (*check)(std::string_view)) {
  if (!ExpectList(e, "strings")) return std::nullopt;
  std::vector<std::string> out;
  bool ok = true;
  for (size_t i = 0; i < e.value.size(); ++i) {
    Entry item = e.Element(e.value[i], i);
    std::optional<std::string> s = check ? ReadChecked(item, check) : ReadScalar(item);
    if (s) {
      out.push_back(*s);
    } else {
      ok = false;
    }
  }
  if (!ok) return std::nullopt;
  return out;
}

// "~" and "~/..." expand to the user's home directory (the passwd entry's,
// base/user_home.h, not $HOME); other relative paths
// resolve against the directory of the file that names them.
std::optional<std::string> ExpandPath(const Entry& e, const std::string& written) {
  if (written.empty()) {
    e.Error("empty path");
    return std::nullopt;
  }
  if (written[0] == '~') {
    if (written.size() > 1 && written[1] != '/') {
      e.Error("only '~' and '~/' are expanded, not " + QuoteValue(written));
      return std::nullopt;
    }
    // OpenSSH's rule (base/user_home.h), as for every path barge resolves
    // for SSH: the same home as libssh and the jump hosts' ssh use.
    const std::string home = UserHome();
    if (home.empty()) {
      e.Error("cannot expand '~': the user has no home directory in the passwd database and "
              "HOME is not set");
      return std::nullopt;
    }
    return home + written.substr(1);
  }
  if (written[0] == '/') return written;
  return (fs::path(e.src->base_dir) / written).lexically_normal().string();
}

std::optional<std::string> ReadPath(const Entry& e) {
  std::optional<std::string> written = ReadScalar(e, "a path");
  if (!written) return std::nullopt;
  return ExpandPath(e, *written);
}

// Opens `path` for reading to see that it can be read: "" or why not.
std::string Unreadable(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::strerror(errno);
  struct stat st;
  std::string why;
  if (fstat(fd, &st) != 0) {
    why = std::strerror(errno);
  } else if (S_ISDIR(st.st_mode)) {
    why = "it is a directory";
  }
  close(fd);
  return why;
}

// A path to a local file that must be readable now (a local check: nothing
// is read from it).
std::optional<std::string> ReadReadableFile(const Entry& e, std::string_view what) {
  std::optional<std::string> written = ReadScalar(e, "a path");
  if (!written) return std::nullopt;
  std::optional<std::string> path = ExpandPath(e, *written);
  if (!path) return std::nullopt;
  if (std::string why = Unreadable(*path); !why.empty()) {
    e.Error("cannot read " + std::string(what) + " " + QuoteValue(*written) + ": " + why);
    return std::nullopt;
  }
  return path;
}

// A list of strings, or one string meaning ["sh", "-c", STRING].
std::optional<std::vector<std::string>> ReadCommand(const Entry& e) {
  const std::string kEmpty = "empty command; remove 'command:' to run the image's CMD";
  if (e.value.IsSequence()) {
    if (e.value.size() == 0) {
      e.Error(kEmpty);
      return std::nullopt;
    }
    return ReadStringList(e, nullptr);
  }
  std::optional<std::string> s = ReadScalar(e, "a list of strings, or a string to run with sh -c");
  if (!s) return std::nullopt;
  if (s->empty()) {
    e.Error(kEmpty);
    return std::nullopt;
  }
  return std::vector<std::string>{"sh", "-c", *s};
}

// ---------------------------------------------------------------------------
// Reading mappings through a table of known keys per block. Adding a key to
// a block is one line in its table.

template <typename Out>
struct KeyRule {
  std::string_view key;
  KeyDoc doc;  // what the key takes, for `barge schema`; empty when misplaced
  void (*read)(const Entry& e, Out& out);
  // With read == nullptr the key is known but belongs elsewhere; this says
  // where, as the error's message.
  std::string_view misplaced = {};
};

// The documented keys of a table (a misplaced key is not one of its keys).
template <typename Out, size_t N>
std::vector<KeyInfo> Describe(const KeyRule<Out> (&rules)[N]) {
  std::vector<KeyInfo> keys;
  for (const KeyRule<Out>& rule : rules) {
    if (rule.read != nullptr) keys.push_back({rule.key, rule.doc});
  }
  return keys;
}

// The first entry of each key present in a mapping.
using SeenKeys = std::map<std::string, Entry>;

std::string UnknownMessage(const std::string& name, std::span<const std::string_view> known,
                           std::string_view noun) {
  std::string message = "unknown " + std::string(noun);
  if (auto close = ClosestMatch(name, known)) return message + "; did you mean '" + *close + "'?";
  return message + " (expected " + JoinWords(known, " or ") + ")";
}

// Reads the mapping `block.value` through `rules`. An empty value (`key:`
// with nothing after it) is an empty block. Unknown keys are errors, with a
// suggestion when one is close; `noun` names what the keys are ("key",
// "role").
template <typename Out, size_t N>
SeenKeys ReadMapping(const Entry& block, const KeyRule<Out> (&rules)[N], Out& out,
                     std::string_view noun = "key") {
  SeenKeys seen;
  if (block.value.IsNull()) return seen;
  if (!block.value.IsMap()) {
    block.Error("expected a mapping, got " + TypeName(block.value));
    return seen;
  }
  std::vector<std::string_view> known;
  for (const KeyRule<Out>& rule : rules) {
    if (rule.read != nullptr) known.push_back(rule.key);
  }
  for (auto it = block.value.begin(); it != block.value.end(); ++it) {
    if (!it->first.IsScalar()) {
      block.src->Error(it->first.Mark(), block.path,
                       "a key must be a plain word, not " + TypeName(it->first));
      continue;
    }
    Entry e = block.Child(it->first, it->second);
    const std::string& name = it->first.Scalar();
    if (name == "<<") {
      e.KeyError("merge keys ('<<') are not supported; repeat the keys, or alias the whole block");
      continue;
    }
    const KeyRule<Out>* rule = nullptr;
    for (const KeyRule<Out>& r : rules) {
      if (r.key == name) rule = &r;
    }
    if (rule == nullptr) {
      e.KeyError(UnknownMessage(name, known, noun));
      continue;
    }
    if (rule->read == nullptr) {
      e.KeyError(std::string(rule->misplaced));
      continue;
    }
    seen.emplace(name, e);
    rule->read(e, out);
  }
  return seen;
}

// A mapping NAME -> scalar whose names `check_name` accepts; values are
// kept exactly as written (`3` stays "3", `true` stays "true"). Returns
// nullopt after any error.
std::optional<KeyValues> ReadKeyValues(
    const Entry& e, const std::function<bool(const Entry&)>& check_name,
    const std::function<bool(const Entry&, const std::string&)>& check_value) {
  if (e.value.IsNull()) return KeyValues{};
  if (!e.value.IsMap()) {
    e.Error("expected a mapping of NAME: value, got " + TypeName(e.value));
    return std::nullopt;
  }
  KeyValues out;
  bool ok = true;
  for (auto it = e.value.begin(); it != e.value.end(); ++it) {
    if (!it->first.IsScalar()) {
      e.src->Error(it->first.Mark(), e.path,
                   "a name must be a plain word, not " + TypeName(it->first));
      ok = false;
      continue;
    }
    Entry item = e.Child(it->first, it->second);
    if (!check_name(item)) {
      ok = false;
      continue;
    }
    if (item.value.IsNull()) {
      item.Error("missing value (write \"\" for an empty one)");
      ok = false;
      continue;
    }
    std::optional<std::string> value = ReadScalar(item, "a string, number or boolean");
    if (!value || !check_value(item, *value)) {
      ok = false;
      continue;
    }
    out.emplace_back(it->first.Scalar(), *value);
  }
  if (!ok) return std::nullopt;
  return out;
}

bool IsIdentifier(std::string_view s) { return CheckEnvName(s).ok(); }

std::optional<KeyValues> ReadEnv(const Entry& e) {
  return ReadKeyValues(
      e,
      [](const Entry& item) {
        if (Status s = CheckEnvName(item.key.Scalar()); !s.ok()) {
          item.KeyError(s.message());
          return false;
        }
        return true;
      },
      [](const Entry&, const std::string&) { return true; });
}

std::optional<KeyValues> ReadUlimits(const Entry& e) {
  return ReadKeyValues(
      e,
      [](const Entry& item) {
        const std::string& name = item.key.Scalar();
        for (std::string_view known : UlimitNames()) {
          if (known == name) return true;
        }
        item.KeyError(UnknownMessage(name, UlimitNames(), "ulimit"));
        return false;
      },
      [](const Entry& item, const std::string& value) {
        if (Status s = CheckUlimitValue(value); !s.ok()) {
          item.Error(s.message());
          return false;
        }
        return true;
      });
}

// gpus: all | COUNT | [ID, ...], as Docker's --gpus value: "all", "2",
// "\"device=0,1\"" (the double quotes belong to the value: Docker's --gpus
// parses it as CSV, where a bare comma would split the device list).
std::optional<std::string> ReadGpus(const Entry& e) {
  const std::string kExpected = "'all', a count, or a list of device ids like [0, 1]";
  if (e.value.IsSequence()) {
    if (e.value.size() == 0) {
      e.Error("empty list of GPU devices (expected " + kExpected + ")");
      return std::nullopt;
    }
    std::optional<std::vector<std::string>> ids = ReadStringList(e, CheckGpuDeviceId);
    if (!ids) return std::nullopt;
    std::string joined;
    for (const std::string& id : *ids) joined += (joined.empty() ? "" : ",") + id;
    return "\"device=" + joined + "\"";
  }
  std::optional<std::string> s = ReadScalar(e, kExpected);
  if (!s) return std::nullopt;
  if (*s == "all") return s;
  long long count;
  if (ParseInteger(*s, &count)) {
    if (count < 1 || count > 1024) {
      e.Error("a GPU count must be from 1 to 1024 (remove 'gpus' for none), got " + QuoteValue(*s));
      return std::nullopt;
    }
    return std::to_string(count);
  }
  e.Error("invalid gpus " + QuoteValue(*s) + " (expected " + kExpected + ")");
  return std::nullopt;
}

// ssh.proxy_jump / hosts[i].proxy_jump: "[user@]host[:port],..."
// (runner/fleet/proxy_jump.h).
std::optional<std::vector<std::string>> ReadProxyJump(const Entry& e) {
  std::optional<std::string> s = ReadNonEmpty(e, "jump hosts [user@]host[:port],...");
  if (!s) return std::nullopt;
  Result<std::vector<std::string>> hops = ParseProxyJump(*s);
  if (!hops.ok()) {
    e.Error(hops.status().message());
    return std::nullopt;
  }
  return *hops;
}

// ---------------------------------------------------------------------------
// The blocks.

constexpr KeyRule<ContainerOptions> kContainerRules[] = {
    {"shm_size",
     {.type = KeyType::kSize, .description = "Size of the container's /dev/shm (docker run --shm-size)"}, [](const Entry& e, ContainerOptions& o) { o.shm_size = ReadSize(e); }},
    {"cap_add",
     {.type = KeyType::kStringList, .description = "Linux capabilities to add (docker run --cap-add), e.g. [SYS_ADMIN]"},
     [](const Entry& e, ContainerOptions& o) { o.cap_add = ReadStringList(e, CheckCapability); }},
    {"gpus",
     {.type = KeyType::kJson, .description = "GPUs for the container: all, a count, or a list of device ids (docker run --gpus)", .schema = R"({"anyOf": [{"type": "string"}, {"type": "integer", "minimum": 1, "maximum": 1024}, {"type": "array", "minItems": 1, "items": {"type": ["string", "integer"]}}]})"}, [](const Entry& e, ContainerOptions& o) { o.gpus = ReadGpus(e); }},
    {"ipc",
     {.type = KeyType::kString, .description = "IPC namespace mode (docker run --ipc): host, private, shareable, container:NAME"}, [](const Entry& e, ContainerOptions& o) { o.ipc = ReadChecked(e, CheckIpcMode); }},
    {"network",
     {.type = KeyType::kString, .description = "Network mode (docker run --network): host, bridge, none, or a network name"},
     [](const Entry& e, ContainerOptions& o) { o.network = ReadChecked(e, CheckNetworkMode); }},
    {"memory",
     {.type = KeyType::kSize, .description = "Memory limit (docker run --memory)"}, [](const Entry& e, ContainerOptions& o) { o.memory = ReadSize(e); }},
    {"ulimits",
     {.type = KeyType::kStringMap, .description = "ulimits by name (docker run --ulimit NAME=VALUE), e.g. memlock: -1"}, [](const Entry& e, ContainerOptions& o) { o.ulimits = ReadUlimits(e); }},
    {"devices",
     {.type = KeyType::kStringList, .description = "Host devices to add (docker run --device), e.g. /dev/fuse"},
     [](const Entry& e, ContainerOptions& o) { o.devices = ReadStringList(e, CheckDeviceSpec); }},
    {"volumes",
     {.type = KeyType::kStringList, .description = "Bind mounts HOST_PATH:CONTAINER_PATH[:ro] (absolute paths)"},
     [](const Entry& e, ContainerOptions& o) { o.volumes = ReadStringList(e, CheckVolumeSpec); }},
    {"env",
     {.type = KeyType::kStringMap, .description = "Environment variables NAME: value"}, [](const Entry& e, ContainerOptions& o) { o.env = ReadEnv(e); }},
    {"run_options",
     {.type = KeyType::kStringList, .description = "Extra docker run arguments, passed as given"},
     [](const Entry& e, ContainerOptions& o) { o.run_options = ReadStringList(e, nullptr); }},
};
constexpr KeyTableFn kContainerKeys = [] { return Describe(kContainerRules); };

void ReadContainer(const Entry& e, ContainerOptions& out) { ReadMapping(e, kContainerRules, out); }

// A host entry, with where its values were written for the checks that
// compare hosts.
struct HostDraft {
  cluster::Host host;
  Entry entry;  // the list element
  std::optional<Entry> address;
  std::optional<Entry> role;
  std::optional<Entry> nodes;
  std::vector<Entry> ssh_settings;  // user, port, identity_file, proxy_jump
};

constexpr std::string_view kHeadOnly[] = {"head"};

constexpr KeyRule<HostDraft> kHostRules[] = {
    {"address",
     {.type = KeyType::kString, .description = "Host name or IP address to reach over SSH, or local for the local Docker engine", .required = true},
     [](const Entry& e, HostDraft& h) {
       h.address = e;
       if (auto a = ReadChecked(e, CheckHostAddress)) h.host.address = *a;
     }},
    {"internal_address",
     {.type = KeyType::kString, .description = "The address other nodes are told for this host (MASTER_ADDR, BARGE_NODE_IPS, ...). Default: address when it is an IP address; for an ssh config alias or DNS name, the IP address its SSH connection reached, settled at run time"},
     [](const Entry& e, HostDraft& h) {
       std::optional<std::string> a = ReadChecked(e, CheckHostAddress);
       if (a && *a == cluster::kLocalAddress) {
         e.Error("'local' is not an address other nodes can reach");
       } else if (a) {
         h.host.internal_address = *a;
       }
     }},
    {"user",
     {.type = KeyType::kString, .description = "SSH user (default: ssh.user, config.yaml, ~/.ssh/config)"},
     [](const Entry& e, HostDraft& h) {
       h.ssh_settings.push_back(e);
       h.host.user = ReadChecked(e, CheckUserName);
     }},
    {"port",
     {.type = KeyType::kInteger, .description = "SSH port (default: ssh.port, config.yaml, ~/.ssh/config, 22)"},
     [](const Entry& e, HostDraft& h) {
       h.ssh_settings.push_back(e);
       h.host.port = ReadPort(e);
     }},
    {"identity_file",
     {.type = KeyType::kString, .description = "SSH private key file"},
     [](const Entry& e, HostDraft& h) {
       h.ssh_settings.push_back(e);
       h.host.identity_file = ReadReadableFile(e, "identity file");
     }},
    {"proxy_jump",
     {.type = KeyType::kString, .description = "Jump hosts to reach this host through, as ssh -J takes them: [user@]host[:port],... (default: ssh.proxy_jump, else the ssh config's ProxyJump)"},
     [](const Entry& e, HostDraft& h) {
       h.ssh_settings.push_back(e);
       h.host.proxy_jump = ReadProxyJump(e);
     }},
    {"gpus",
     {.type = KeyType::kInteger, .description = "Number of GPUs on the host (default: asked at preflight). A node asking for a GPU count here gets free devices of its own (--gpus '\"device=0,1\"')"},
     [](const Entry& e, HostDraft& h) {
       if (auto n = ReadInteger(e, 0, 1024, "a GPU count")) h.host.gpus = static_cast<int>(*n);
     }},
    {"nodes",
     {.type = KeyType::kInteger, .description = "Containers (nodes) to run on this host", .default_value = "1"},
     [](const Entry& e, HostDraft& h) {
       h.nodes = e;
       if (auto n = ReadInteger(e, 1, 1024, "a number of nodes"))
         h.host.nodes = static_cast<int>(*n);
     }},
    {"docker_command",
     {.type = KeyType::kString, .description = "The docker command on this host (default: the job's docker_command)"},
     [](const Entry& e, HostDraft& h) {
       h.host.docker_command = ReadChecked(e, CheckDockerCommand);
     }},
    {"role",
     {.type = KeyType::kEnum, .description = "head: this host carries the head (rank 0)", .choices = kHeadOnly},
     [](const Entry& e, HostDraft& h) {
       std::optional<std::string> role = ReadScalar(e, "'head'");
       if (role && *role != cluster::kHeadRole) {
         e.Error("invalid role " + QuoteValue(*role) +
                 ": only 'head' can be set here (the other hosts carry the workers)");
       } else if (role) {
         h.role = e;
         h.host.role = *role;
       }
     }},
    {"container",
     {.type = KeyType::kBlock, .description = "Container options for this host's nodes", .keys = kContainerKeys}, [](const Entry& e, HostDraft& h) { ReadContainer(e, h.host.container); }},
    {"vars",
     {.type = KeyType::kStringMap, .description = "Per-host variables for teardown hooks ({host.vars.NAME})"},
     [](const Entry& e, HostDraft& h) {
       std::optional<KeyValues> vars = ReadKeyValues(
           e,
           [](const Entry& item) {
             if (!IsIdentifier(item.key.Scalar())) {
               item.KeyError("invalid variable name " + QuoteValue(item.key.Scalar()) +
                             " (letters, digits and '_', not starting with a digit)");
               return false;
             }
             return true;
           },
           [](const Entry&, const std::string&) { return true; });
       if (vars) h.host.vars.insert(vars->begin(), vars->end());
     }},
};
constexpr KeyTableFn kHostKeys = [] { return Describe(kHostRules); };

struct ReadyDraft {
  cluster::ReadinessProbe probe;
  std::vector<Entry> kinds;  // tcp_port, log, command as written
};

constexpr KeyRule<ReadyDraft> kReadyRules[] = {
    {"tcp_port",
     {.type = KeyType::kInteger, .description = "Ready once this TCP port accepts connections"},
     [](const Entry& e, ReadyDraft& r) {
       r.kinds.push_back(e);
       r.probe.kind = cluster::ReadinessProbe::Kind::kTcpPort;
       if (auto port = ReadPort(e)) r.probe.tcp_port = *port;
     }},
    {"log",
     {.type = KeyType::kString, .description = "Ready once a log line matches this regular expression"},
     [](const Entry& e, ReadyDraft& r) {
       r.kinds.push_back(e);
       r.probe.kind = cluster::ReadinessProbe::Kind::kLog;
       std::optional<std::string> pattern = ReadNonEmpty(e, "a regular expression");
       if (!pattern) return;
       if (pattern->size() > 1000) {
         e.Error("regular expression longer than 1000 characters");
         return;
       }
       try {
         std::regex compiled(*pattern, std::regex::ECMAScript);
         r.probe.log_regex = *pattern;
       } catch (const std::regex_error& error) {
         e.Error("invalid regular expression " + QuoteValue(*pattern) + ": " + error.what());
       }
     }},
    {"command",
     {.type = KeyType::kString, .description = "Ready once this shell command, run in the container, exits 0"},
     [](const Entry& e, ReadyDraft& r) {
       r.kinds.push_back(e);
       r.probe.kind = cluster::ReadinessProbe::Kind::kCommand;
       if (auto command = ReadNonEmpty(e, "a shell command")) r.probe.command = *command;
     }},
    {"timeout",
     {.type = KeyType::kDuration, .description = "How long to wait for readiness", .default_value = "120s"},
     [](const Entry& e, ReadyDraft& r) {
       if (auto d = ReadDuration(e, /*allow_zero=*/false)) r.probe.timeout = *d;
     }},
};
constexpr KeyTableFn kReadyKeys = [] { return Describe(kReadyRules); };

void ReadReady(const Entry& e, cluster::ReadinessProbe& out) {
  ReadyDraft draft;
  ReadMapping(e, kReadyRules, draft);
  if (draft.kinds.size() > 1) {
    std::string names;
    for (const Entry& k : draft.kinds) names += (names.empty() ? "" : " and ") + k.key.Scalar();
    draft.kinds[1].KeyError("give one of tcp_port, log or command, not " + names);
    return;
  }
  if (draft.kinds.empty() && e.value.IsMap()) {
    e.KeyError(
        "give one of tcp_port, log or command (without 'ready:' the head is ready once "
        "its container runs)");
    return;
  }
  out = draft.probe;
}

struct RoleDraft {
  bool present = false;
  cluster::RoleSpec role;
  std::optional<Entry> image;
  std::optional<Entry> command;  // as written
  std::optional<Entry> count;  // as written, when valid
};

constexpr KeyRule<RoleDraft> kHeadRules[] = {
    {"image",
     {.type = KeyType::kString, .description = "Image of the head (default: the job's image)"},
     [](const Entry& e, RoleDraft& r) {
       r.image = e;
       r.role.image = ReadChecked(e, CheckImageOrArrayTemplate);
     }},
    {"command",
     {.type = KeyType::kCommand, .description = "Command of the head (default: the job's command)"}, [](const Entry& e, RoleDraft& r) { r.role.command = ReadCommand(e); }},
    {"container",
     {.type = KeyType::kBlock, .description = "Container options of the head", .keys = kContainerKeys}, [](const Entry& e, RoleDraft& r) { ReadContainer(e, r.role.container); }},
    {"ready",
     {.type = KeyType::kBlock, .description = "Readiness probe: the workers start once the head is ready (one of tcp_port, log, command)", .keys = kReadyKeys}, [](const Entry& e, RoleDraft& r) { ReadReady(e, r.role.ready); }},
    {"count", {}, nullptr, "only role 'worker' has a count; there is always exactly one head"},
};
constexpr KeyTableFn kHeadKeys = [] { return Describe(kHeadRules); };

constexpr KeyRule<RoleDraft> kWorkerRules[] = {
    {"image",
     {.type = KeyType::kString, .description = "Image of the workers (default: the job's image)"},
     [](const Entry& e, RoleDraft& r) {
       r.image = e;
       r.role.image = ReadChecked(e, CheckImageOrArrayTemplate);
     }},
    {"command",
     {.type = KeyType::kCommand, .description = "Command of the workers (default: the job's command)"},
     [](const Entry& e, RoleDraft& r) {
       r.command = e;
       r.role.command = ReadCommand(e);
     }},
    {"container",
     {.type = KeyType::kBlock, .description = "Container options of the workers", .keys = kContainerKeys}, [](const Entry& e, RoleDraft& r) { ReadContainer(e, r.role.container); }},
    {"count",
     {.type = KeyType::kJson, .description = "Number of workers, or rest (every node but the head)", .default_value = "rest", .schema = R"({"anyOf": [{"type": "integer", "minimum": 0, "maximum": 100000}, {"type": "string"}]})"},
     [](const Entry& e, RoleDraft& r) {
       if (e.value.IsScalar() && e.value.Scalar() == "rest") return;  // count stays nullopt
       std::optional<std::string> s = ReadScalar(e, "a number of workers or 'rest'");
       long long n;
       if (s && (!ParseInteger(*s, &n) || n < 0 || n > 100000)) {
         e.Error("expected a number of workers (0 or more) or 'rest', got " + QuoteValue(*s));
       } else if (s) {
         r.role.count = static_cast<int>(n);
         r.count = e;
       }
     }},
    {"ready", {}, nullptr, "only the head has a readiness probe ('ready')"},
};
constexpr KeyTableFn kWorkerKeys = [] { return Describe(kWorkerRules); };

constexpr auto kHostKeyChecking = NamesOf(ssh::kHostKeyCheckingNames);


constexpr KeyRule<SshSettings> kSshRules[] = {
    {"known_hosts",
     {.type = KeyType::kString, .description = "known_hosts file (default: ~/.ssh/known_hosts)"},
     [](const Entry& e, SshSettings& s) {
       if (auto path = ReadPath(e)) s.known_hosts = *path;
     }},
    {"config_file",
     {.type = KeyType::kString, .description = "ssh config file (default: ~/.ssh/config)"},
     [](const Entry& e, SshSettings& s) {
       if (auto path = ReadReadableFile(e, "ssh config file")) s.config_file = *path;
     }},
    {"host_key_checking",
     {.type = KeyType::kEnum, .description = "How unknown host keys are treated", .default_value = NameOf(ssh::kHostKeyCheckingNames, ssh::HostKeyChecking::kStrict), .choices = kHostKeyChecking},
     [](const Entry& e, SshSettings& s) {
       if (auto v = ReadEnum(e, ssh::kHostKeyCheckingNames)) s.host_key_checking = *v;
     }},
    {"connect_timeout",
     {.type = KeyType::kDuration, .description = "Time allowed to connect and log in", .default_value = "10s"},
     [](const Entry& e, SshSettings& s) {
       if (auto d = ReadDuration(e, /*allow_zero=*/false)) s.connect_timeout = *d;
     }},
    {"dead_after",
     {.type = KeyType::kDuration, .description = "A host that answers nothing for this long is lost", .default_value = "10s"},
     [](const Entry& e, SshSettings& s) {
       if (auto d = ReadDuration(e, /*allow_zero=*/false)) s.dead_after = *d;
     }},
    {"engine_timeout",
     {.type = KeyType::kDuration, .description = "Bound on each Docker engine call (preflight, probes)", .default_value = "20s"},
     [](const Entry& e, SshSettings& s) {
       if (auto d = ReadDuration(e, /*allow_zero=*/false)) s.engine_timeout = *d;
     }},
    {"engine_misses",
     {.type = KeyType::kInteger, .description = "Engine calls in a row with no answer before a host is lost, 1 to 100", .default_value = "3"},
     [](const Entry& e, SshSettings& s) {
       if (auto n = ReadInteger(e, 1, 100, "a number of engine calls")) s.engine_misses = static_cast<int>(*n);
     }},
    {"user",
     {.type = KeyType::kString, .description = "SSH user for hosts that set none"}, [](const Entry& e, SshSettings& s) { s.user = ReadChecked(e, CheckUserName); }},
    {"port",
     {.type = KeyType::kInteger, .description = "SSH port for hosts that set none"}, [](const Entry& e, SshSettings& s) { s.port = ReadPort(e); }},
    {"identity_file",
     {.type = KeyType::kString, .description = "SSH private key for hosts that set none"},
     [](const Entry& e, SshSettings& s) {
       s.identity_file = ReadReadableFile(e, "identity file");
     }},
    {"proxy_jump",
     {.type = KeyType::kString, .description = "Jump hosts for hosts that set none, as ssh -J takes them: [user@]host[:port],... (replaces the ssh config's ProxyJump)"},
     [](const Entry& e, SshSettings& s) {
       if (auto hops = ReadProxyJump(e)) s.proxy_jump = *hops;
     }},
    {"parallel_connects",
     {.type = KeyType::kInteger, .description = "SSH handshakes at once, 1 to 4096", .default_value = "32"},
     [](const Entry& e, SshSettings& s) {
       if (auto n = ReadInteger(e, 1, 4096, "a number of SSH handshakes at once"))
         s.parallel_connects = static_cast<int>(*n);
     }},
};
constexpr KeyTableFn kSshKeys = [] { return Describe(kSshRules); };

using cluster::kConventions;

constexpr KeyRule<cluster::RendezvousOptions> kRendezvousRules[] = {
    {"port",
     {.type = KeyType::kInteger, .description = "The head's rendezvous port (MASTER_PORT, ...)", .default_value = "29500"},
     [](const Entry& e, cluster::RendezvousOptions& r) {
       if (auto port = ReadPort(e)) r.port = *port;
     }},
    {"env",
     {.type = KeyType::kEnumList, .description = "Rendezvous variable conventions to set (default: all)", .choices = kConventions},
     [](const Entry& e, cluster::RendezvousOptions& r) {
       if (!ExpectList(e, "conventions (" + JoinWords(kConventions, " or ") + ")")) return;
       std::vector<std::string> conventions;
       for (size_t i = 0; i < e.value.size(); ++i) {
         Entry item = e.Element(e.value[i], i);
         std::optional<std::string> c = ReadEnum(item, kConventions);
         if (!c) continue;
         if (std::find(conventions.begin(), conventions.end(), *c) != conventions.end()) {
           item.Error(QuoteValue(*c) + " is listed twice");
           continue;
         }
         conventions.push_back(*c);
       }
       r.conventions = conventions;
     }},
};
constexpr KeyTableFn kRendezvousKeys = [] { return Describe(kRendezvousRules); };

struct TeardownDraft {
  TeardownHooks hooks;
  std::vector<Entry> commands;  // for the placeholder checks
};

constexpr KeyRule<TeardownDraft> kTeardownRules[] = {
    {"host_command",
     {.type = KeyType::kString, .description = "Shell command run on each host over SSH at teardown"},
     [](const Entry& e, TeardownDraft& t) {
       t.hooks.host_command = ReadNonEmpty(e, "a shell command");
       if (t.hooks.host_command) t.commands.push_back(e);
     }},
    {"local_command",
     {.type = KeyType::kString, .description = "Shell command run here, once per host, at teardown"},
     [](const Entry& e, TeardownDraft& t) {
       t.hooks.local_command = ReadNonEmpty(e, "a shell command");
       if (t.hooks.local_command) t.commands.push_back(e);
     }},
};
constexpr KeyTableFn kTeardownKeys = [] { return Describe(kTeardownRules); };

struct GroupDraft;  // a `host_groups:` entry while it is read; below

// The whole job while it is read: the spec plus what the checks across
// blocks need.
struct JobDraft {
  JobSpec spec;
  std::deque<Source> sources;  // a hosts_file's Source; a deque keeps addresses stable
  std::vector<HostDraft> hosts;
  std::vector<HostDraft> spares;
  bool image_written = false;  // `image:` is there, if perhaps wrong
  bool hosts_given = false;    // `hosts:` or `hosts_file:` was read
  bool host_errors = false;    // some host entry is wrong: node counts are unknown
  RoleDraft head;
  RoleDraft worker;
  TeardownDraft teardown;
  std::vector<Entry> secret_keys;  // the NAME key of each of spec.secrets
  std::set<std::string> ssh_keys;  // the keys of `ssh:` the job file sets
  std::optional<Entry> mpi;        // the `mpi:` key, when given
  const RecordedHostsFile* recorded_hosts = nullptr;  // rerun: read this, not the disk
  std::optional<RecordedHostsFile> hosts_read;        // the hosts file as read
  // hosts_command: its recorded output (down, exec, attach, rerun: read
  // this, never run the command), and what it printed.
  const RecordedHostsCommand* recorded_command = nullptr;
  bool may_run_command = true;  // JobLayers::run_hosts_command
  std::optional<RecordedHostsCommand> command_read;
  std::vector<GroupDraft> groups;  // `host_groups:`, in file order
};

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
        ReadMapping(h.entry, kHostRules, h);
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

constexpr auto kRestartCauses = NamesOf(kRestartCauseNames);

constexpr KeyRule<RestartPolicy> kRestartRules[] = {
    {"max_restarts",
     {.type = KeyType::kInteger, .description = "Whole-job restarts allowed", .default_value = "0"},
     [](const Entry& e, RestartPolicy& r) {
       if (auto n = ReadInteger(e, 0, 1000, "a number of restarts")) r.max_restarts = static_cast<int>(*n);
     }},
    {"on",
     {.type = KeyType::kEnumList, .description = "Causes that restart the job (default: all three)", .choices = kRestartCauses},
     [](const Entry& e, RestartPolicy& r) {
       if (!ExpectList(e, "causes (" + JoinWords(kRestartCauses, " or ") + ")")) return;
       r.on_host_lost = r.on_node_failed = r.on_preempted = false;
       for (size_t i = 0; i < e.value.size(); ++i) {
         Entry item = e.Element(e.value[i], i);
         std::optional<RestartCause> c = ReadEnum(item, kRestartCauseNames);
         if (!c) continue;
         bool& flag = *c == RestartCause::kHostLost     ? r.on_host_lost
                      : *c == RestartCause::kNodeFailed ? r.on_node_failed
                                                        : r.on_preempted;
         if (flag) item.Error(QuoteValue(NameOf(kRestartCauseNames, *c)) + " is listed twice");
         flag = true;
       }
     }},
    {"backoff",
     {.type = KeyType::kDuration, .description = "Wait before a restart", .default_value = "10s"},
     [](const Entry& e, RestartPolicy& r) {
       if (auto d = ReadDuration(e, /*allow_zero=*/true)) r.backoff = *d;
     }},
};
constexpr KeyTableFn kRestartKeys = [] { return Describe(kRestartRules); };

// `array:` (runner/fleet/): the rows come from a file or a matrix.
void ReadArrayMatrix(const Entry& e, ArraySpec& a) {
  if (!e.value.IsMap() || e.value.size() == 0) {
    e.Error("expected a mapping of COLUMN: [values], e.g. {lr: [0.1, 0.01], seed: [1, 2]}, got " +
            TypeName(e.value));
    return;
  }
  for (auto it = e.value.begin(); it != e.value.end(); ++it) {
    if (!it->first.IsScalar()) {
      e.Error("a column must be a plain word, not " + TypeName(it->first));
      continue;
    }
    Entry column = e.Child(it->first, it->second);
    if (Status s = CheckEnvName(it->first.Scalar()); !s.ok()) {
      column.KeyError("column " + QuoteValue(it->first.Scalar()) +
                      " is not an environment variable name ([A-Za-z_][A-Za-z0-9_]*)");
      continue;
    }
    std::optional<std::vector<std::string>> values = ReadStringList(column, nullptr);
    if (!values) continue;
    if (values->empty()) {
      column.Error("empty list: a matrix column needs at least one value");
      continue;
    }
    a.matrix.emplace_back(it->first.Scalar(), std::move(*values));
  }
}

constexpr KeyRule<ArraySpec> kArrayRules[] = {
    {"file",
     {.type = KeyType::kString, .description = "A CSV file (a header line of column names) or a JSON-lines file (.jsonl: one object per line); one member per row"},
     [](const Entry& e, ArraySpec& a) {
       if (auto path = ReadReadableFile(e, "the array's file")) a.file = *path;
     }},
    {"matrix",
     {.type = KeyType::kJson, .description = "COLUMN: [values]; one member per combination (the first column varies slowest)", .schema = R"({"type": "object", "additionalProperties": {"type": "array", "minItems": 1, "items": {"type": ["string", "number", "boolean"]}}})"},
     ReadArrayMatrix},
};
constexpr KeyTableFn kArrayKeys = [] { return Describe(kArrayRules); };

constexpr KeyRule<PreemptionSpec> kPreemptionRules[] = {
    {"command",
     {.type = KeyType::kString, .description = "Shell command polled on every host; exit 0 means the host is going away", .required = true},
     [](const Entry& e, PreemptionSpec& p) {
       if (auto c = ReadNonEmpty(e, "a shell command")) p.command = *c;
     }},
    {"every",
     {.type = KeyType::kDuration, .description = "How often the command runs", .default_value = "5s"},
     [](const Entry& e, PreemptionSpec& p) {
       if (auto d = ReadDuration(e, /*allow_zero=*/false)) p.every = *d;
     }},
};
constexpr KeyTableFn kPreemptionKeys = [] { return Describe(kPreemptionRules); };

std::optional<YAML::Node> ParseDocument(const Source& src, std::string_view text,
                                        std::string_view what);
bool ReadFileCapped(const std::string& path, std::string* out, std::string* error);

// A hosts_file named `written` at `e`, read (or taken from `recorded` when
// that names the same file) and parsed as a Source kept in `sources`;
// nullopt after an error reported at `e`.
struct LoadedHostsFile {
  std::string path;   // expanded
  std::string shown;  // as messages and the job record name it
  std::string text;
  const Source* src = nullptr;
  YAML::Node root;
};
std::optional<LoadedHostsFile> LoadHostsFile(const Entry& e, const std::string& written,
                                             const RecordedHostsFile* recorded, std::deque<Source>& sources) {
  std::optional<std::string> path = ExpandPath(e, written);
  if (!path) return std::nullopt;
  LoadedHostsFile f;
  f.path = *path;
  // Shown joined to the job file's directory as given, so that the name
  // means the same file from where the user stands.
  f.shown = written[0] == '~' ? *path
                              : (fs::path(e.src->name).parent_path() / written).lexically_normal().string();
  std::string error;
  if (recorded != nullptr && recorded->path == *path) {
    f.text = recorded->text;
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
  std::optional<LoadedHostsFile> file = LoadHostsFile(e, *written, d.recorded_hosts, d.sources);
  if (!file) {
    d.host_errors = true;
    return;
  }
  d.hosts_read = RecordedHostsFile{file->path, file->text};
  d.spec.hosts_file = file->shown;
  ReadHostList(Entry{file->src, file->root, file->root, "hosts"}, d);
}

// `hosts_command:` — the inventory as a command on this machine prints it
// (runner/fleet/hosts_command.h), run once here unless recorded.
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
  ReadHostList(Entry{&out_src, *root, *root, "hosts"}, d);
}

// `host_groups:` (runner/fleet/): NAME: {hosts: [...] | hosts_file: PATH,
// ssh: {...}}. Each group is read like the job's own inventory; its `ssh:`
// takes the job's `ssh:` keys, laid over the job's settings once the config
// file is applied (LayGroupSsh).
struct GroupDraft {
  HostGroup group;
  Entry entry;  // the NAME key
  std::deque<Source>* sources = nullptr;  // the job's: a hosts_file's Source lives there
  std::vector<HostDraft> hosts;
  bool host_errors = false;
  std::set<std::string> ssh_keys;
};

// A group's hosts_file: a YAML list of host entries, as the job's
// hosts_file. Read from disk each time (a rerun reads it again).
void ReadGroupHostsFile(const Entry& e, GroupDraft& g) {
  std::optional<std::string> written = ReadNonEmpty(e, "a path");
  std::optional<LoadedHostsFile> file =
      written ? LoadHostsFile(e, *written, /*recorded=*/nullptr, *g.sources) : std::nullopt;
  if (!file) {
    g.host_errors = true;
    return;
  }
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
     {.type = KeyType::kBlockList, .description = "The group's hosts: addresses, or mappings with address (as the job's hosts)", .keys = kHostKeys, .scalar_too = true},
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
     {.type = KeyType::kBlock, .description = "SSH settings for the group's hosts, over the job's ssh: (a key set here wins; the others are the job's)", .keys = kSshKeys},
     [](const Entry& e, GroupDraft& g) {
       for (const auto& [key, entry] : ReadMapping(e, kSshRules, g.group.ssh)) g.ssh_keys.insert(key);
     }},
};
constexpr KeyTableFn kHostGroupKeys = [] { return Describe(kHostGroupRules); };

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

constexpr auto kImagePull = NamesOf(kImagePullNames);
constexpr auto kOnWorkerExit = NamesOf(kOnWorkerExitNames);

constexpr KeyRule<JobDraft> kRoleRules[] = {
    {"head",
     {.type = KeyType::kBlock, .description = "The head (rank 0)", .keys = kHeadKeys},
     [](const Entry& e, JobDraft& d) {
       d.head.present = true;
       ReadMapping(e, kHeadRules, d.head);
     }},
    {"worker",
     {.type = KeyType::kBlock, .description = "The workers (every other node)", .keys = kWorkerKeys},
     [](const Entry& e, JobDraft& d) {
       d.worker.present = true;
       ReadMapping(e, kWorkerRules, d.worker);
     }},
};
constexpr KeyTableFn kRoleKeys = [] { return Describe(kRoleRules); };

std::optional<std::string> ReadLocalPath(const Entry& e, bool directory) {
  std::optional<std::string> written = ReadNonEmpty(e, directory ? "a local directory" : "a local file");
  if (!written) return std::nullopt;
  std::optional<std::string> path = ExpandPath(e, *written);
  if (!path) return std::nullopt;
  std::error_code ec;
  bool ok = directory ? std::filesystem::is_directory(*path, ec)
                      : std::filesystem::is_regular_file(*path, ec);
  if (!ok) {
    e.Error(std::string(directory ? "not a directory: " : "not a readable file: ") + *path);
    return std::nullopt;
  }
  return path;
}

std::optional<std::string> ReadContainerPath(const Entry& e) {
  std::optional<std::string> v = ReadNonEmpty(e, "an absolute path in the container");
  if (!v) return std::nullopt;
  if ((*v)[0] != '/' || v->find(':') != std::string::npos || v->size() >= 4096) {
    e.Error("expected an absolute path in the container without ':', got " + QuoteValue(*v));
    return std::nullopt;
  }
  return v;
}

constexpr KeyRule<WorkdirSpec> kWorkdirRules[] = {
    {"path",
     {.type = KeyType::kString, .description = "Local directory to ship to every host", .required = true},
     [](const Entry& e, WorkdirSpec& w) {
       if (auto p = ReadLocalPath(e, /*directory=*/true)) w.path = *p;
     }},
    {"mount",
     {.type = KeyType::kString, .description = "Where containers see it", .default_value = "/workspace"},
     [](const Entry& e, WorkdirSpec& w) {
       if (auto p = ReadContainerPath(e)) w.mount = *p;
     }},
    {"exclude",
     {.type = KeyType::kStringList, .description = "tar --exclude patterns"},
     [](const Entry& e, WorkdirSpec& w) {
       if (auto l = ReadStringList(e, nullptr)) w.exclude = *l;
     }},
};
constexpr KeyTableFn kWorkdirKeys = [] { return Describe(kWorkdirRules); };

void ReadWorkdir(const Entry& e, JobDraft& d) {
  WorkdirSpec w;
  if (e.value.IsScalar()) {
    if (auto p = ReadLocalPath(e, /*directory=*/true)) w.path = *p;
  } else if (e.value.IsMap()) {
    ReadMapping(e, kWorkdirRules, w);
    if (w.path.empty()) {
      e.KeyError("missing 'path' (the local directory to ship)");
      return;
    }
  } else {
    e.Error("expected a directory or a mapping with path, mount and exclude, got " +
            TypeName(e.value));
    return;
  }
  if (!w.path.empty()) d.spec.workdir = w;
}

constexpr KeyRule<FileSpec> kFileRules[] = {
    {"from",
     {.type = KeyType::kString, .description = "Local file to ship", .required = true},
     [](const Entry& e, FileSpec& f) {
       if (auto p = ReadLocalPath(e, /*directory=*/false)) f.from = *p;
     }},
    {"to",
     {.type = KeyType::kString, .description = "Absolute path in the container (mounted read-only)", .required = true},
     [](const Entry& e, FileSpec& f) {
       if (auto p = ReadContainerPath(e)) f.to = *p;
     }},
};
constexpr KeyTableFn kFileKeys = [] { return Describe(kFileRules); };

void ReadFiles(const Entry& e, JobDraft& d) {
  if (!ExpectList(e, "files")) return;
  for (size_t i = 0; i < e.value.size(); ++i) {
    Entry item = e.Element(e.value[i], i);
    if (!e.value[i].IsMap()) {
      item.Error("expected a mapping with from and to, got " + TypeName(e.value[i]));
      continue;
    }
    FileSpec f;
    ReadMapping(item, kFileRules, f);
    if (f.from.empty() || f.to.empty()) {
      if (!e.value[i]["from"] || !e.value[i]["to"]) {
        e.src->Error(e.value[i].Mark(), item.path, "needs both 'from' and 'to'");
      }
      continue;
    }
    d.spec.files.push_back(f);
  }
}

constexpr KeyRule<ArtifactSpec> kArtifactRules[] = {
    {"node",
     {.type = KeyType::kJson, .description = "Which node: head, all, or a rank", .default_value = "head", .schema = R"({"anyOf": [{"type": "string"}, {"type": "integer", "minimum": 0}]})"},
     [](const Entry& e, ArtifactSpec& a) {
       std::optional<std::string> v = ReadNonEmpty(e, "head, all or a rank");
       if (!v) return;
       long long rank;
       if (*v == "head") {
         a.rank = 0;
       } else if (*v == "all") {
         a.all_nodes = true;
       } else if (ParseInteger(*v, &rank) && rank >= 0 && rank < 100000) {
         a.rank = static_cast<int>(rank);
       } else {
         e.Error("expected head, all or a rank, got " + QuoteValue(*v));
       }
     }},
    {"path",
     {.type = KeyType::kString, .description = "Absolute path in the container to copy back", .required = true},
     [](const Entry& e, ArtifactSpec& a) {
       std::optional<std::string> v = ReadNonEmpty(e, "an absolute path in the container");
       if (!v) return;
       if ((*v)[0] != '/') {
         e.Error("expected an absolute path in the container, got " + QuoteValue(*v));
         return;
       }
       a.path = *v;
     }},
    {"every",
     {.type = KeyType::kDuration, .description = "Copy this often while the job runs (default: only before teardown)"},
     [](const Entry& e, ArtifactSpec& a) {
       if (auto d = ReadDuration(e, /*allow_zero=*/false)) a.every = *d;
     }},
};
constexpr KeyTableFn kArtifactKeys = [] { return Describe(kArtifactRules); };

void ReadArtifacts(const Entry& e, JobDraft& d) {
  if (!ExpectList(e, "artifacts")) return;
  for (size_t i = 0; i < e.value.size(); ++i) {
    Entry item = e.Element(e.value[i], i);
    if (!e.value[i].IsMap()) {
      item.Error("expected a mapping with node, path and every, got " + TypeName(e.value[i]));
      continue;
    }
    ArtifactSpec a;
    ReadMapping(item, kArtifactRules, a);
    if (a.path.empty()) {
      e.src->Error(e.value[i].Mark(), item.path + ".path", "missing; which path to copy back");
      continue;
    }
    d.spec.artifacts.push_back(a);
  }
}

constexpr KeyRule<ForwardSpec> kForwardRules[] = {
    {"port",
     {.type = KeyType::kString, .description = "[LOCAL:]REMOTE: the node's port, reached at 127.0.0.1:LOCAL (default LOCAL = REMOTE)", .required = true},
     [](const Entry& e, ForwardSpec& f) {
       std::optional<std::string> v = ReadNonEmpty(e, "[LOCAL:]REMOTE, e.g. 8265 or \"16006:6006\"");
       if (!v) return;
       Result<window::ForwardPorts> ports = window::ParseForwardPorts(*v);
       if (!ports.ok()) {
         e.Error(ports.status().message());
         return;
       }
       f.local_port = ports->local_port;
       f.remote_port = ports->remote_port;
     }},
    {"node",
     {.type = KeyType::kInteger, .description = "The node's rank", .default_value = "0"},
     [](const Entry& e, ForwardSpec& f) {
       std::optional<std::string> v = ReadNonEmpty(e, "a rank");
       long long rank;
       if (!v) return;
       if (!ParseInteger(*v, &rank) || rank < 0 || rank >= 100000) {
         e.Error("expected a rank (0, 1, ...), got " + QuoteValue(*v));
         return;
       }
       f.rank = static_cast<int>(rank);
     }},
};
constexpr KeyTableFn kForwardKeys = [] { return Describe(kForwardRules); };

void ReadForward(const Entry& e, JobDraft& d) {
  if (!ExpectList(e, "forward")) return;
  std::map<int, std::string> taken;  // local port -> where
  for (size_t i = 0; i < e.value.size(); ++i) {
    Entry item = e.Element(e.value[i], i);
    ForwardSpec f;
    if (e.value[i].IsScalar()) {
      kForwardRules[0].read(item, f);
    } else if (e.value[i].IsMap()) {
      ReadMapping(item, kForwardRules, f);
      if (!e.value[i]["port"]) {
        e.src->Error(e.value[i].Mark(), item.path + ".port", "missing; which port of the node to forward");
        continue;
      }
    } else {
      item.Error("expected a port ([LOCAL:]REMOTE) or a mapping with port and node, got " + TypeName(e.value[i]));
      continue;
    }
    if (f.remote_port == 0) continue;  // reported above
    auto [at, fresh] = taken.emplace(f.local_port, item.path);
    if (!fresh) {
      item.Error("local port " + std::to_string(f.local_port) + " is already forwarded by " + at->second);
      continue;
    }
    d.spec.forward.push_back(f);
  }
}

// ---------------------------------------------------------------------------
// Secrets and registry credentials. Their values are read here, once, and
// no message ever quotes one: a value written in the job file by mistake is
// refused without being echoed.

// What a node is, without quoting a scalar (it may be a secret).
std::string ShapeName(const YAML::Node& n) {
  return n.IsScalar() ? "a string" : TypeName(n);
}

// `{file: PATH}` or `{env: VARIABLE}` (and for a secret, `as_env:`).
struct SecretSourceDraft {
  std::vector<Entry> kinds;  // file, env as written
  bool as_env = true;
  std::string source;  // "file PATH", "env VARIABLE"
  std::string value;
  bool read = false;  // `value` was read (or, with kSkip, the source is well-formed)
};

void ReadSecretFile(const Entry& e, SecretSourceDraft& d) {
  d.kinds.push_back(e);
  if (d.kinds.size() > 1) return;  // both given: an error, reported once
  std::optional<std::string> written = ReadNonEmpty(e, "a path");
  if (!written) return;
  std::optional<std::string> path = ExpandPath(e, *written);
  if (!path) return;
  d.source = "file " + *written;
  if (!e.src->read_secrets) {
    d.read = true;
    return;
  }
  // A regular file only: a FIFO or a device (/dev/stdin) could block or
  // never end.
  struct stat st;
  if (stat(path->c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    e.Error(QuoteValue(*written) + " is not a regular file");
    return;
  }
  std::string text, why;
  if (!ReadFileCapped(*path, &text, &why)) {
    e.Error("cannot read " + QuoteValue(*written) + ": " + why);
    return;
  }
  if (text.size() > kMaxJobFileBytes) {
    e.Error(QuoteValue(*written) + " is larger than 1 MiB; a secret is small (ship big files with 'files:')");
    return;
  }
  if (text.empty()) {
    e.Error(QuoteValue(*written) + " is empty");
    return;
  }
  d.value = std::move(text);
  d.read = true;
}

void ReadSecretEnv(const Entry& e, SecretSourceDraft& d) {
  d.kinds.push_back(e);
  if (d.kinds.size() > 1) return;  // both given: an error, reported once
  std::optional<std::string> name = ReadChecked(e, CheckEnvName);
  if (!name) return;
  d.source = "env " + *name;
  if (!e.src->read_secrets) {
    d.read = true;
    return;
  }
  const char* value = std::getenv(name->c_str());
  if (value == nullptr) {
    e.Error("environment variable " + *name + " is not set (barge reads it when it validates the job file)");
    return;
  }
  if (*value == '\0') {
    e.Error("environment variable " + *name + " is empty");
    return;
  }
  d.value = value;
  d.read = true;
}

constexpr std::string_view kBooleans[] = {"true", "false"};

constexpr KeyRule<SecretSourceDraft> kSecretRules[] = {
    {"file",
     {.type = KeyType::kString, .description = "Local file holding the value"}, ReadSecretFile},
    {"env",
     {.type = KeyType::kString, .description = "barge's environment variable holding the value"}, ReadSecretEnv},
    {"as_env",
     {.type = KeyType::kBoolean, .description = "Also give it as the environment variable NAME (else only /run/secrets/NAME)", .default_value = "true"},
     [](const Entry& e, SecretSourceDraft& d) {
       if (auto v = ReadEnum(e, kBooleans)) d.as_env = *v == "true";
     }},
};
constexpr KeyTableFn kSecretKeys = [] { return Describe(kSecretRules); };

constexpr KeyRule<SecretSourceDraft> kPasswordRules[] = {
    {"file",
     {.type = KeyType::kString, .description = "Local file holding the password"}, ReadSecretFile},
    {"env",
     {.type = KeyType::kString, .description = "barge's environment variable holding the password"}, ReadSecretEnv},
    {"as_env", {}, nullptr, "only a secret goes into the environment; the password goes to docker login alone"},
};
constexpr KeyTableFn kPasswordKeys = [] { return Describe(kPasswordRules); };

// Reads `e` through `rules`; false after an error. `what` names the value
// in messages ("a secret's value", "the password").
template <size_t N>
bool ReadSecretSource(const Entry& e, const KeyRule<SecretSourceDraft> (&rules)[N],
                      std::string_view what, SecretSourceDraft& d) {
  if (!e.value.IsMap()) {
    std::string message = "expected {file: PATH} or {env: VARIABLE}, got " + ShapeName(e.value);
    if (e.value.IsScalar()) message += "; " + std::string(what) + " is never written in the job file";
    e.Error(message);
    return false;
  }
  const size_t errors_before = e.src->errors->size();
  ReadMapping(e, rules, d);
  if (d.kinds.size() > 1) {
    d.kinds[1].KeyError("give one of file or env, not both");
    return false;
  }
  if (d.kinds.empty()) {
    if (e.src->errors->size() == errors_before) {
      e.KeyError("give file: PATH or env: VARIABLE (where " + std::string(what) + " is read from)");
    }
    return false;
  }
  return d.read && e.src->errors->size() == errors_before;
}

void ReadSecrets(const Entry& e, JobDraft& d) {
  if (e.value.IsNull()) return;
  if (!e.value.IsMap()) {
    e.Error("expected a mapping of NAME: {file: PATH} or {env: VARIABLE}, got " + ShapeName(e.value));
    return;
  }
  for (auto it = e.value.begin(); it != e.value.end(); ++it) {
    if (!it->first.IsScalar()) {
      e.src->Error(it->first.Mark(), e.path, "a secret's name must be a plain word, not " + TypeName(it->first));
      continue;
    }
    Entry item = e.Child(it->first, it->second);
    const std::string& name = it->first.Scalar();
    if (Status s = CheckEnvName(name); !s.ok()) {
      item.KeyError("invalid secret name " + QuoteValue(name) +
                    " (it names an environment variable and a file: letters, digits and '_', not "
                    "starting with a digit)");
      continue;
    }
    if (name.size() > 255) {
      item.KeyError("a secret's name is at most 255 characters (it names a file)");
      continue;
    }
    if (item.value.IsNull()) {
      item.Error("missing value (expected {file: PATH} or {env: VARIABLE})");
      continue;
    }
    SecretSourceDraft source;
    if (!ReadSecretSource(item, kSecretRules, "a secret's value", source)) continue;
    SecretSpec secret{name, source.source, source.as_env, std::move(source.value)};
    if (secret.as_env && !secret.value.empty()) {
      const std::string env = EnvValueOf(secret);
      const std::string fix = "; add 'as_env: false' to give it only as the file /run/secrets/" + name;
      if (env.empty()) {
        item.KeyError("the value holds nothing but line breaks");
        continue;
      }
      if (env.find_first_of("\n\r") != std::string::npos) {
        item.KeyError("the value holds a line break, which an environment variable given with "
                      "docker run --env-file cannot" + fix);
        continue;
      }
      if (env.find('\0') != std::string::npos) {
        item.KeyError("the value holds a NUL byte, which no environment variable can" + fix);
        continue;
      }
      if (FindInvalidUtf8(env) != std::string_view::npos) {
        item.KeyError("the value is not valid UTF-8, which Docker refuses in the environment" + fix);
        continue;
      }
    }
    d.spec.secrets.push_back(std::move(secret));
    d.secret_keys.push_back(item);
  }
}

// A registry as `docker login` takes it: a host name with an optional port
// and path, or a URL ("https://index.docker.io/v1/").
Status CheckRegistryServer(std::string_view server) {
  bool ok = !server.empty() && server.size() <= 255 && server[0] != '-' && server[0] != '/';
  for (char c : server) {
    ok = ok && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                std::string_view("._-:/[]").find(c) != std::string_view::npos);
  }
  if (!ok) {
    return Status::Error("invalid registry server " + QuoteValue(server) +
                         " (expected a host name with an optional port and path, e.g. "
                         "ghcr.io or registry.example.com:5000)");
  }
  return Status::Ok();
}

struct RegistryDraft {
  RegistrySpec registry;
  bool password_ok = false;
};

constexpr KeyRule<RegistryDraft> kRegistryRules[] = {
    {"server",
     {.type = KeyType::kString, .description = "Registry for docker login, e.g. ghcr.io", .required = true},
     [](const Entry& e, RegistryDraft& r) {
       if (auto s = ReadChecked(e, CheckRegistryServer)) r.registry.server = *s;
     }},
    {"username",
     {.type = KeyType::kString, .description = "User name for docker login", .required = true},
     [](const Entry& e, RegistryDraft& r) {
       std::optional<std::string> u = ReadNonEmpty(e, "a user name");
       if (!u) return;
       bool ok = u->size() <= 255;
       for (char c : *u) ok = ok && static_cast<unsigned char>(c) >= 0x20 && c != 0x7f;
       if (!ok) {
         e.Error("invalid user name " + QuoteValue(*u) + " (at most 255 characters, no control characters)");
         return;
       }
       r.registry.username = *u;
     }},
    {"password",
     {.type = KeyType::kBlock, .description = "Where the password is read from: {file: PATH} or {env: VARIABLE}", .keys = kPasswordKeys, .required = true},
     [](const Entry& e, RegistryDraft& r) {
       SecretSourceDraft source;
       if (!ReadSecretSource(e, kPasswordRules, "the password", source)) return;
       std::string password = std::move(source.value);
       while (!password.empty() && (password.back() == '\n' || password.back() == '\r')) {
         password.pop_back();
       }
       if (e.src->read_secrets && password.empty()) {
         e.Error("the password holds nothing but line breaks");
         return;
       }
       if (password.find_first_of("\n\r") != std::string::npos) {
         e.Error("the password holds a line break (docker login --password-stdin takes one line)");
         return;
       }
       r.registry.password_source = source.source;
       r.registry.password = std::move(password);
       r.password_ok = true;
     }},
};
constexpr KeyTableFn kRegistryKeys = [] { return Describe(kRegistryRules); };

void ReadRegistry(const Entry& e, JobDraft& d) {
  if (!e.value.IsMap()) {
    e.Error("expected a mapping with server, username and password, got " + ShapeName(e.value));
    return;
  }
  RegistryDraft r;
  const size_t errors_before = e.src->errors->size();
  SeenKeys seen = ReadMapping(e, kRegistryRules, r);
  for (std::string_view key : {"server", "username", "password"}) {
    if (!seen.contains(std::string(key))) {
      e.KeyError("missing '" + std::string(key) + "'" +
                 (key == "password" ? " ({file: PATH} or {env: VARIABLE})" : ""));
    }
  }
  if (e.src->errors->size() == errors_before && r.password_ok) d.spec.registry = r.registry;
}

// A secret given as an environment variable must not also be set by a
// container block: the container would get only one of the two.
void CheckSecretsAgainstEnv(const JobDraft& d) {
  std::vector<std::pair<std::string, const ContainerOptions*>> blocks = {
      {"container.env", &d.spec.container}};
  if (d.head.present) blocks.push_back({"roles.head.container.env", &d.head.role.container});
  if (d.worker.present) blocks.push_back({"roles.worker.container.env", &d.worker.role.container});
  for (size_t i = 0; i < d.hosts.size(); ++i) {
    blocks.push_back({"hosts[" + std::to_string(i) + "].container.env", &d.hosts[i].host.container});
  }
  for (size_t i = 0; i < d.spares.size(); ++i) {
    blocks.push_back({"spare_hosts[" + std::to_string(i) + "].container.env", &d.spares[i].host.container});
  }
  for (size_t i = 0; i < d.spec.secrets.size(); ++i) {
    const SecretSpec& secret = d.spec.secrets[i];
    if (!secret.as_env) continue;
    for (const auto& [where, options] : blocks) {
      if (!options->env) continue;
      for (const auto& [key, value] : *options->env) {
        if (key != secret.name) continue;
        d.secret_keys[i].KeyError("also set in " + where +
                                  "; the container would get only one of the two (remove one, or "
                                  "add 'as_env: false' to the secret)");
      }
    }
  }
}

constexpr KeyRule<cluster::MpiOptions> kMpiRules[] = {
    {"slots_per_node",
     {.type = KeyType::kInteger, .description = "Slots per node in the hostfile (default: the node's GPU count, else 1)"},
     [](const Entry& e, cluster::MpiOptions& m) {
       if (auto n = ReadInteger(e, 1, 1024, "a number of slots (1 to 1024)"))
         m.slots_per_node = static_cast<int>(*n);
     }},
    {"port",
     {.type = KeyType::kInteger, .description = "Port of the workers' in-container sshd; a host's further nodes take the next ports", .default_value = "2222"},
     [](const Entry& e, cluster::MpiOptions& m) {
       if (auto port = ReadPort(e)) m.port = *port;
     }},
};
constexpr KeyTableFn kMpiKeys = [] { return Describe(kMpiRules); };

constexpr KeyRule<JobDraft> kJobRules[] = {
    {"name",
     {.type = KeyType::kString, .description = "The job's name: letters, digits, _ . - (at most 63)", .required = true},
     [](const Entry& e, JobDraft& d) {
       if (auto name = ReadChecked(e, CheckJobName)) d.spec.name = *name;
     }},
    {"image",
     {.type = KeyType::kString, .description = "Image every node runs (a role may set its own)"},
     [](const Entry& e, JobDraft& d) {
       d.image_written = true;
       if (auto image = ReadChecked(e, CheckImageOrArrayTemplate)) {
         d.spec.image = *image;
         d.spec.image_written_at[*image] = e.src->name + ":" + std::to_string(e.key.Mark().line + 1) + ": " + e.path;
       }
     }},
    {"command",
     {.type = KeyType::kCommand, .description = "Command every node runs (default: the image's CMD); a string runs with sh -c"}, [](const Entry& e, JobDraft& d) { d.spec.command = ReadCommand(e); }},
    {"container",
     {.type = KeyType::kBlock, .description = "Container options for every node", .keys = kContainerKeys}, [](const Entry& e, JobDraft& d) { ReadContainer(e, d.spec.container); }},
    {"hosts",
     {.type = KeyType::kBlockList, .description = "Hosts to run on: addresses, or mappings with address (default: the local engine)", .keys = kHostKeys, .scalar_too = true},
     [](const Entry& e, JobDraft& d) {
       if (!d.hosts_given) ReadHostList(e, d);  // else: both given, an error
     }},
    {"hosts_file",
     {.type = KeyType::kString, .description = "A YAML file holding the list of hosts (instead of hosts)"}, ReadHostsFile},
    {"hosts_command",
     {.type = KeyType::kString, .description = "A shell command run here at validation (at most 60 s) that prints the hosts: one address per line, or a JSON list of host entries (instead of hosts); recorded with the job, never run again by down, exec, attach or rerun"},
     ReadHostsCommand},
    {"docker_command",
     {.type = KeyType::kString, .description = "The docker command on the hosts", .default_value = "docker"},
     [](const Entry& e, JobDraft& d) {
       if (auto c = ReadChecked(e, CheckDockerCommand)) d.spec.docker_command = *c;
     }},
    {"ssh",
     {.type = KeyType::kBlock, .description = "SSH settings for every host", .keys = kSshKeys}, [](const Entry& e, JobDraft& d) {
       for (const auto& [key, entry] : ReadMapping(e, kSshRules, d.spec.ssh)) d.ssh_keys.insert(key);
     }},
    {"roles",
     {.type = KeyType::kBlock, .description = "Per-role settings: head and worker", .keys = kRoleKeys}, [](const Entry& e, JobDraft& d) { ReadMapping(e, kRoleRules, d, "role"); }},
    {"rendezvous",
     {.type = KeyType::kBlock, .description = "Rendezvous environment (MASTER_ADDR, RANK, WORLD_SIZE, ...)", .keys = kRendezvousKeys},
     [](const Entry& e, JobDraft& d) { ReadMapping(e, kRendezvousRules, d.spec.rendezvous); }},
    {"image_pull",
     {.type = KeyType::kEnum, .description = "When hosts pull the image; push copies it from here", .default_value = NameOf(kImagePullNames, ImagePull::kMissing), .choices = kImagePull},
     [](const Entry& e, JobDraft& d) {
       if (auto v = ReadEnum(e, kImagePullNames)) d.spec.image_pull = *v;
     }},
    {"on_worker_exit",
     {.type = KeyType::kEnum, .description = "Whether a worker that exits non-zero fails the job", .default_value = NameOf(kOnWorkerExitNames, OnWorkerExit::kFail), .choices = kOnWorkerExit},
     [](const Entry& e, JobDraft& d) {
       if (auto v = ReadEnum(e, kOnWorkerExitNames)) d.spec.on_worker_exit = *v;
     }},
    {"stop_grace",
     {.type = KeyType::kDuration, .description = "Time between the stop signal and SIGKILL", .default_value = "10s"},
     [](const Entry& e, JobDraft& d) {
       if (auto grace = ReadDuration(e, /*allow_zero=*/true)) d.spec.stop_grace = *grace;
     }},
    {"timeout",
     {.type = KeyType::kDuration, .description = "The job ends as timed_out after running this long (default: no limit)"},
     [](const Entry& e, JobDraft& d) {
       if (auto t = ReadDuration(e, /*allow_zero=*/false)) d.spec.timeout = *t;
     }},
    {"lease",
     {.type = KeyType::kDuration, .description = "Hosts' watchdogs tear the job down when barge has not renewed it for this long", .default_value = "10m"},
     [](const Entry& e, JobDraft& d) {
       if (auto t = ReadDuration(e, /*allow_zero=*/false)) d.spec.lease = *t;
     }},
    {"wait",
     {.type = KeyType::kDuration, .description = "Wait this long at most for hosts held by other jobs instead of failing (default: fail at once)"},
     [](const Entry& e, JobDraft& d) {
       if (auto t = ReadDuration(e, /*allow_zero=*/false)) d.spec.wait = *t;
     }},
    {"artifacts",
     {.type = KeyType::kBlockList, .description = "Paths copied back from containers", .keys = kArtifactKeys}, ReadArtifacts},
    {"forward",
     {.type = KeyType::kBlockList, .description = "Ports of nodes reached at 127.0.0.1 while the job is attached: 8265, \"16006:6006\" or {port: 8888, node: 1}", .keys = kForwardKeys, .scalar_too = true}, ReadForward},
    {"workdir",
     {.type = KeyType::kBlock, .description = "A local directory shipped to every host and mounted in every container", .keys = kWorkdirKeys, .scalar_too = true}, ReadWorkdir},
    {"files",
     {.type = KeyType::kBlockList, .description = "Local files shipped to every host, mounted read-only", .keys = kFileKeys}, ReadFiles},
    {"teardown",
     {.type = KeyType::kBlock, .description = "Hooks run at teardown", .keys = kTeardownKeys}, [](const Entry& e, JobDraft& d) { ReadMapping(e, kTeardownRules, d.teardown); }},
    {"restart",
     {.type = KeyType::kBlock, .description = "Whole-job restarts after a fault", .keys = kRestartKeys},
     [](const Entry& e, JobDraft& d) {
       RestartPolicy policy;
       ReadMapping(e, kRestartRules, policy);
       d.spec.restart = policy;
     }},
    {"spare_hosts",
     {.type = KeyType::kBlockList, .description = "Hosts that take a lost host's place at a restart", .keys = kHostKeys, .scalar_too = true}, ReadSpareHosts},
    {"preemption",
     {.type = KeyType::kBlock, .description = "A command that says a host is going away", .keys = kPreemptionKeys},
     [](const Entry& e, JobDraft& d) {
       PreemptionSpec p;
       SeenKeys seen = ReadMapping(e, kPreemptionRules, p);
       if (!seen.contains("command")) {
         e.KeyError("needs 'command': a shell command whose success means the host is going away");
         return;
       }
       if (!p.command.empty()) d.spec.preemption = p;
     }},
    {"secrets",
     {.type = KeyType::kBlockMap, .description = "Secrets NAME: {file: PATH} or {env: VARIABLE}; never written to the store or the plan", .keys = kSecretKeys}, ReadSecrets},
    {"registry",
     {.type = KeyType::kBlock, .description = "Registry to log in to before pulling", .keys = kRegistryKeys}, ReadRegistry},
    {"mpi",
     {.type = KeyType::kBlock, .description = "An MPI job: workers run the image's sshd and start first, then the head runs command (mpirun, horovodrun, deepspeed) and reaches them over SSH with the job's own keys", .keys = kMpiKeys},
     [](const Entry& e, JobDraft& d) {
       cluster::MpiOptions mpi;
       ReadMapping(e, kMpiRules, mpi);
       d.mpi = e;
       d.spec.mpi = mpi;
     }},
    {"array",
     {.type = KeyType::kBlock, .description = "A job array: one member job per row of a file or per combination of a matrix, each on its own hosts from the inventory (barge run --array FILE does the same)", .keys = kArrayKeys},
     [](const Entry& e, JobDraft& d) {
       ArraySpec a;
       SeenKeys seen = ReadMapping(e, kArrayRules, a);
       if (seen.contains("file") == seen.contains("matrix")) {
         e.KeyError("give either 'file' or 'matrix'");
         return;
       }
       d.spec.array = a;
     }},
    {"parallel",
     {.type = KeyType::kInteger, .description = "A job array: at most this many members at once (default: as many as the hosts fit)"},
     [](const Entry& e, JobDraft& d) {
       if (auto n = ReadInteger(e, 1, 100000, "a number of members")) d.spec.parallel = static_cast<int>(*n);
     }},
    {"array_retries",
     {.type = KeyType::kInteger, .description = "A job array: how often a failed member runs again", .default_value = "0"},
     [](const Entry& e, JobDraft& d) {
       if (auto n = ReadInteger(e, 0, 100, "a number of retries")) d.spec.array_retries = static_cast<int>(*n);
     }},
    {"hosts_per_member",
     {.type = KeyType::kInteger, .description = "A job array: hosts each member takes from the inventory (default: as many as its roles need)"},
     [](const Entry& e, JobDraft& d) {
       if (auto n = ReadInteger(e, 1, 100000, "a number of hosts")) d.spec.hosts_per_member = static_cast<int>(*n);
     }},
    {"host_groups",
     {.type = KeyType::kBlockMap, .description = "A job array: named pools of hosts, each with its own ssh settings; a row's host_group column picks the pool its member draws from (rows without one use the job's hosts)", .keys = kHostGroupKeys},
     ReadHostGroups},
};
constexpr KeyTableFn kJobKeys = [] { return Describe(kJobRules); };

// ---------------------------------------------------------------------------
// Checks across blocks, once everything is read.

void CheckHosts(JobDraft& d) {
  std::map<std::pair<std::string, int>, const HostDraft*> seen;
  const HostDraft* head = nullptr;
  std::vector<const HostDraft*> all;
  for (const HostDraft& h : d.hosts) all.push_back(&h);
  for (const HostDraft& h : d.spares) all.push_back(&h);
  for (const HostDraft* hp : all) {
    const HostDraft& h = *hp;
    if (h.host.is_local()) {
      for (const Entry& e : h.ssh_settings) {
        e.KeyError("not used with address 'local' (the local engine needs no SSH)");
      }
    }
    if (h.address && !h.host.address.empty()) {
      std::string address = h.host.address;
      std::transform(address.begin(), address.end(), address.begin(),
                     [](unsigned char c) { return std::tolower(c); });
      int port = h.host.is_local() ? 0 : h.host.port.value_or(d.spec.ssh.port.value_or(22));
      auto [it, inserted] = seen.emplace(std::make_pair(address, port), &h);
      if (!inserted) {
        const std::string first = "line " + std::to_string(it->second->host.line);
        if (h.host.is_local()) {
          h.address->Error("the local engine is listed twice (first at " + first +
                           "); use 'nodes:' to run several containers on it");
        } else {
          h.address->Error("host '" + h.host.address + "' port " + std::to_string(port) +
                           " is listed twice (first at " + first +
                           "); use 'nodes:' to run several containers on one host");
        }
      }
    }
    if (h.role) {
      if (head != nullptr) {
        h.role->Error("a second head; " + head->entry.path + " (line " +
                      std::to_string(head->host.line) + ") is the head already");
      } else {
        head = &h;
      }
    }
  }
}

// Host groups: SSH hosts only, one head at most per group, no host in two
// groups (or in a group and the job's hosts: two pools would hand it to two
// members at once), and enough hosts in each for one member.
void CheckHostGroups(JobDraft& d) {
  struct Where {
    std::string pool;  // "group 'a'" or "hosts"
    std::string file;
    int line = 0;
  };
  std::map<std::pair<std::string, int>, Where> seen;
  auto key_of = [](const cluster::Host& h, std::optional<int> default_port) {
    std::string address = h.address;
    std::transform(address.begin(), address.end(), address.begin(),
                   [](unsigned char c) { return std::tolower(c); });
    return std::make_pair(address, h.port.value_or(default_port.value_or(22)));
  };
  for (const HostDraft& h : d.hosts) {
    if (h.host.is_local() || h.host.address.empty()) continue;
    seen.emplace(key_of(h.host, d.spec.ssh.port), Where{"hosts", h.entry.src->name, h.host.line});
  }
  const int workers = d.worker.role.count.value_or(-1);
  for (GroupDraft& g : d.groups) {
    const std::string pool = "group '" + g.group.name + "'";
    const std::optional<int> port = g.ssh_keys.contains("port") ? g.group.ssh.port : d.spec.ssh.port;
    const HostDraft* head = nullptr;
    int nodes = 0;
    for (const HostDraft& h : g.hosts) {
      nodes += h.host.nodes;
      if (h.address && h.host.is_local()) {
        h.address->Error("the local engine cannot be in a host group (rows without a host_group "
                         "use the job's own hosts)");
        g.host_errors = true;
        continue;
      }
      if (h.role) {
        if (head != nullptr) {
          h.role->Error("a second head in " + pool + "; " + head->entry.path + " (line " +
                        std::to_string(head->host.line) + ") is its head already");
        } else {
          head = &h;
        }
      }
      if (!h.address || h.host.address.empty()) continue;
      const auto key = key_of(h.host, port);
      auto [it, inserted] = seen.emplace(key, Where{pool, h.entry.src->name, h.host.line});
      if (!inserted) {
        h.address->Error("host '" + h.host.address + "' port " + std::to_string(key.second) +
                         " is in " + it->second.pool + " already (" + it->second.file + " line " +
                         std::to_string(it->second.line) + "); a host belongs to one pool");
      }
    }
    if (g.host_errors || g.hosts.empty()) continue;
    if (d.spec.hosts_per_member &&
        static_cast<size_t>(*d.spec.hosts_per_member) > g.hosts.size()) {
      g.entry.KeyError(pool + " has " + std::to_string(g.hosts.size()) +
                       " host(s), but each member takes hosts_per_member: " +
                       std::to_string(*d.spec.hosts_per_member));
    } else if (!d.spec.hosts_per_member && workers >= 0 && nodes < workers + 1) {
      g.entry.KeyError(pool + " provides " + std::to_string(nodes) + " node(s), but a member's head and " +
                       std::to_string(workers) + " worker(s) need " + std::to_string(workers + 1) +
                       " (add hosts to the group, or raise a host's 'nodes:')");
    }
  }
}

// The image of every role that will run, and enough nodes for the workers.
void CheckRolesAgainstNodes(JobDraft& d, const Entry& root) {
  // A host entry with errors counts as its default single node; the count
  // check then stays silent, as it could only guess.
  int total = 0;
  for (const HostDraft& h : d.hosts) total += h.host.nodes;
  if (!d.hosts_given) total = 1;  // the local engine
  const int workers = d.worker.role.count.value_or(std::max(total - 1, 0));
  if (d.worker.count && workers > total - 1 && !d.host_errors) {
    d.worker.count->Error(std::to_string(workers) + " workers and the head need " +
                          std::to_string(workers + 1) + " nodes, but the hosts provide " +
                          std::to_string(total) +
                          " (add hosts, raise a host's 'nodes:', or use count: rest)");
  }
  if (d.image_written) return;  // right, or wrong and reported already
  std::vector<std::string_view> missing;
  if (!d.head.role.image && !d.head.image) missing.push_back("roles.head");
  if (workers > 0 && !d.worker.role.image && !d.worker.image) missing.push_back("roles.worker");
  if (missing.empty()) return;
  std::string message = "missing; set 'image:' at the top";
  if (d.head.present || d.worker.present) {
    message += " or in " + JoinWords(missing, " and ");
  }
  root.src->Error(root.key.Mark(), "image", message + " (e.g. image: debian:12)");
}

// An MPI job: host network everywhere (each worker's sshd listens on its
// host's address, and the ranks talk across hosts), no worker command (the
// workers run sshd), no spare hosts (the head's known_hosts names every
// worker's address).
void CheckMpi(JobDraft& d) {
  if (!d.mpi) return;
  const Entry& mpi = *d.mpi;
  if (d.worker.command) {
    d.worker.command->KeyError(
        "an MPI job's workers run only their sshd, which barge starts; the job's command "
        "runs on the head (e.g. mpirun --hostfile $BARGE_MPI_HOSTFILE ...) and starts the ranks on the "
        "workers itself");
  }
  if (!d.spec.spare_hosts.empty() || !d.spares.empty()) {
    mpi.KeyError("spare_hosts cannot be used with mpi: yet (the head's hostfile and known_hosts "
                 "name every worker)");
  }
  auto network_of = [&](const HostDraft* h, const RoleDraft& role) -> std::string {
    if (h && h->host.container.network) return *h->host.container.network;
    if (role.role.container.network) return *role.role.container.network;
    return d.spec.container.network.value_or("bridge (Docker's default)");
  };
  std::vector<std::string> wrong;
  auto check = [&](const HostDraft* h, const RoleDraft& role, const std::string& where) {
    const std::string net = network_of(h, role);
    if (net != "host") wrong.push_back(where + (where == "the workers" ? " have" : " has") + " network " + net);
  };
  check(nullptr, d.head, "the head");
  check(nullptr, d.worker, "the workers");
  for (const HostDraft& h : d.hosts) {
    if (h.host.container.network) check(&h, d.head, h.entry.path);
  }
  if (!wrong.empty()) {
    std::string why;
    for (const std::string& w : wrong) why += (why.empty() ? "" : "; ") + w;
    mpi.KeyError("an MPI job needs container.network: host (each worker's sshd listens on its "
                 "host's address and the ranks reach each other across hosts): " + why);
  }
}

// Teardown hooks may use {host.address}, {host.internal_address},
// {host.vars.NAME} and {job.id}; other braces are left alone.
void CheckTeardownPlaceholders(const JobDraft& d) {
  static constexpr std::string_view kPlaceholders[] = {"{host.address}", "{host.internal_address}",
                                                       "{host.vars.NAME}", "{job.id}"};
  for (const Entry& e : d.teardown.commands) {
    const std::string& command = e.value.Scalar();
    for (size_t open = command.find('{'); open != std::string::npos;
         open = command.find('{', open + 1)) {
      size_t close = command.find('}', open);
      if (close == std::string::npos) break;
      std::string placeholder = command.substr(open, close - open + 1);
      std::string_view inner = std::string_view(placeholder).substr(1, placeholder.size() - 2);
      if (!inner.starts_with("host.") && !inner.starts_with("job.")) continue;
      if (placeholder == "{host.address}" || placeholder == "{host.internal_address}" ||
          placeholder == "{job.id}") {
        continue;
      }
      if (inner.starts_with("host.vars.") && IsIdentifier(inner.substr(10))) {
        std::string name(inner.substr(10));
        if (!d.hosts_given) {
          e.Error(placeholder + " needs hosts with 'vars:' (this job runs on the local engine)");
          break;
        }
        for (const HostDraft& h : d.hosts) {
          if (!h.host.vars.contains(name)) {
            e.Error(placeholder + " is not set in " + h.entry.path + ".vars (line " +
                    std::to_string(h.host.line) + ")");
            break;
          }
        }
        continue;
      }
      std::string message = "unknown placeholder " + placeholder + " (expected " +
                            JoinWords(kPlaceholders, " or ") + ")";
      if (auto close_match = ClosestMatch(placeholder, kPlaceholders)) {
        message += "; did you mean " + *close_match + "?";
      } else if (inner.starts_with("host.") && IsIdentifier(inner.substr(5))) {
        // {host.instance_id}: a per-host value lives under vars.
        message += "; did you mean {host.vars." + std::string(inner.substr(5)) + "}?";
      }
      e.Error(message);
    }
  }
}

void ReadJob(const Source& src, const YAML::Node& root, JobDraft& d) {
  const Entry top{&src, root, root, ""};
  if (!root.IsMap()) {
    top.Error("expected a mapping of job keys (name:, image:, hosts:, ...), got " + TypeName(root));
    return;
  }
  SeenKeys seen = ReadMapping(top, kJobRules, d);
  if (!seen.contains("name")) {
    src.Error(root.Mark(), "name", "missing; every job needs a name (e.g. name: train)");
  }
  if (seen.contains("hosts") && seen.contains("hosts_file")) {
    seen.at("hosts_file").KeyError("give either 'hosts' or 'hosts_file', not both");
    d.host_errors = true;
  }
  if (seen.contains("hosts_command")) {
    for (const char* other : {"hosts", "hosts_file"}) {
      if (seen.contains(other)) {
        seen.at("hosts_command").KeyError(std::string("give either '") + other +
                                          "' or 'hosts_command', not both");
        d.host_errors = true;
      }
    }
  }
  CheckHosts(d);
  CheckHostGroups(d);
  CheckRolesAgainstNodes(d, top);
  CheckTeardownPlaceholders(d);
  CheckSecretsAgainstEnv(d);
  CheckMpi(d);
  if (d.head.present) d.spec.roles[cluster::kHeadRole] = d.head.role;
  if (d.worker.present) d.spec.roles[cluster::kWorkerRole] = d.worker.role;
  for (const RoleDraft* r : {&d.head, &d.worker}) {
    if (r->image && r->role.image) {
      d.spec.image_written_at[*r->role.image] =
          r->image->src->name + ":" + std::to_string(r->image->key.Mark().line + 1) + ": " + r->image->path;
    }
  }
  for (HostDraft& h : d.hosts) d.spec.hosts.push_back(std::move(h.host));
  for (HostDraft& h : d.spares) d.spec.spare_hosts.push_back(std::move(h.host));
  for (GroupDraft& g : d.groups) {
    for (HostDraft& h : g.hosts) g.group.hosts.push_back(std::move(h.host));
    for (const KeyInfo& k : kSshKeys()) {
      if (g.ssh_keys.contains(std::string(k.key))) g.group.ssh_keys.emplace_back(k.key);
    }
    d.spec.host_groups.push_back(std::move(g.group));
  }
  d.spec.teardown = d.teardown.hooks;
}

// ---------------------------------------------------------------------------
// From text to one YAML document.

// Aliases expanded, a document may nest deeper than its text does (an
// alias inside the very node it names even nests forever); deeper than this
// is refused.
constexpr int kMaxExpandedDepth = 256;

// What CountExpandedNodes found.
struct Expansion {
  long long count = 0;
  bool too_deep = false;
  bool exceeded() const { return too_deep || count > kMaxNodes; }
};

// Counts nodes as a reader would visit them, aliases expanded, stopping as
// soon as the count passes kMaxNodes or the depth kMaxExpandedDepth.
void CountExpandedNodes(const YAML::Node& n, Expansion* e, int depth = 0) {
  if (depth > kMaxExpandedDepth) {
    e->too_deep = true;
    return;
  }
  if (++e->count > kMaxNodes) return;
  if (n.IsSequence()) {
    for (const YAML::Node& child : n) {
      CountExpandedNodes(child, e, depth + 1);
      if (e->exceeded()) return;
    }
  } else if (n.IsMap()) {
    for (auto it = n.begin(); it != n.end(); ++it) {
      CountExpandedNodes(it->first, e, depth + 1);
      CountExpandedNodes(it->second, e, depth + 1);
      if (e->exceeded()) return;
    }
  }
}

// The message for an Expansion that exceeded a limit.
std::string ExpansionMessage(const Expansion& e) {
  if (e.too_deep) {
    return "aliases nest deeper than " + std::to_string(kMaxExpandedDepth) +
           " levels once expanded (an alias inside the node it names refers to itself); "
           "refusing it";
  }
  return "aliases expand to more than " + std::to_string(kMaxNodes) +
         " YAML nodes; refusing what looks like an alias bomb "
         "('billion laughs'); aliases are fine, but not that many";
}

// Finds what yaml-cpp 0.7 accepts silently: duplicate keys (it keeps both)
// and unterminated quotes (it swallows the rest of the file). Each node is
// visited once, aliases included.
class StructureCheck {
 public:
  StructureCheck(const Source& src, std::string_view text) : src_(src), text_(text) {}

  void Walk(const YAML::Node& n, const std::string& path) {
    if (!n.IsDefined() || n.IsNull()) return;
    if (!visited_.insert({n.Mark().pos, static_cast<int>(n.Type())}).second) return;
    if (n.IsScalar()) {
      CheckQuote(n, path);
    } else if (n.IsSequence()) {
      for (size_t i = 0; i < n.size(); ++i) Walk(n[i], path + "[" + std::to_string(i) + "]");
    } else if (n.IsMap()) {
      std::map<std::string, int> first_line;
      for (auto it = n.begin(); it != n.end(); ++it) {
        if (!it->first.IsScalar()) {
          Walk(it->first, path);
          Walk(it->second, path);
          continue;
        }
        const std::string& name = it->first.Scalar();
        std::string child = path.empty() ? name : path + "." + name;
        CheckQuote(it->first, child);
        auto [seen, inserted] = first_line.emplace(name, it->first.Mark().line + 1);
        if (!inserted) {
          duplicates_.push_back(
              {src_.name, it->first.Mark().line + 1, it->first.Mark().column + 1, child,
               "duplicate key; first set at line " + std::to_string(seen->second)});
        }
        Walk(it->second, child);
      }
    }
  }

  std::vector<JobFileError>& unterminated() { return unterminated_; }
  std::vector<JobFileError>& duplicates() { return duplicates_; }

 private:
  void CheckQuote(const YAML::Node& n, const std::string& path) {
    if (n.Tag() != "!") return;  // only quoted and block scalars carry "!"
    size_t pos = n.Mark().pos;
    if (pos >= text_.size() || (text_[pos] != '"' && text_[pos] != '\'')) return;
    if (QuotedScalarIsClosed(text_, pos)) return;
    unterminated_.push_back({src_.name, n.Mark().line + 1, n.Mark().column + 1, path,
                             UnclosedQuoteMessage(text_[pos])});
  }

  const Source& src_;
  std::string_view text_;
  std::set<std::pair<size_t, int>> visited_;
  std::vector<JobFileError> unterminated_;
  std::vector<JobFileError> duplicates_;
};

// Sees where documents start without building them. yaml-cpp 0.7's LoadAll
// never returns on some malformed text (a stray ',' or ']' it neither
// places nor consumes yields one empty document after another), so
// documents are counted with this, a bounded number of times, and only the
// first is built with YAML::Load.
//
// It also holds nesting to kMaxNestingDepth exactly as yaml-cpp reads it
// (collections open at once). The text scan before it (CheckRawText) is an
// estimate that yaml-cpp's reading of scalars' extents can get past (see
// FindDeepNesting); this pass cannot be, and it is safe to run on such text
// because yaml-cpp's own recursion stops at its depth guard (2000).
class DocumentProbe : public YAML::EventHandler {
 public:
  // Thrown from an event (yaml-cpp is exception-safe C++) to stop parsing
  // as soon as the text holds more nodes than a job file ever needs.
  struct TooManyNodes {
    YAML::Mark at;
  };
  // Thrown when a collection opens kMaxNestingDepth + 1 levels deep.
  struct TooDeep {
    YAML::Mark at;
  };

  const std::vector<YAML::Mark>& starts() const { return starts_; }

  void OnDocumentStart(const YAML::Mark& mark) override { starts_.push_back(mark); }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& mark, YAML::anchor_t) override { Count(mark); }
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t) override { Count(mark); }
  void OnScalar(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                const std::string&) override {
    Count(mark);
  }
  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {
    Count(mark);
    Open(mark);
  }
  void OnSequenceEnd() override { --depth_; }
  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {
    Count(mark);
    Open(mark);
  }
  void OnMapEnd() override { --depth_; }

 private:
  void Count(const YAML::Mark& mark) {
    if (++nodes_ > kMaxNodes) throw TooManyNodes{mark};
  }
  void Open(const YAML::Mark& mark) {
    if (++depth_ > kMaxNestingDepth) throw TooDeep{mark};
  }

  std::vector<YAML::Mark> starts_;
  long long nodes_ = 0;
  int depth_ = 0;
};

// A plain-words reading of yaml-cpp's commonest syntax messages, or "".
std::string SyntaxHint(const std::string& yaml_message) {
  static const std::pair<std::string_view, std::string_view> kHints[] = {
      {"illegal map value",
       " (a ':' where no key can start: check the indentation, or quote a value that holds ': ')"},
      {"illegal block entry", " (a '- ' where no list can start: check the indentation)"},
      {"end of map not found", " (check the indentation of the lines around here)"},
      {"end of sequence not found", " (check the indentation of the lines around here)"},
      {"illegal map key", " (check the indentation, or quote a key)"},
  };
  for (const auto& [message, hint] : kHints) {
    if (yaml_message == message) return std::string(hint);
  }
  return "";
}

// Checks and parses one YAML document, reporting every problem to `src`.
// nullopt when nothing more can be read from it; a document with
// duplicate keys is returned (its readers report more) with those errors.
std::optional<YAML::Node> ParseDocument(const Source& src, std::string_view text,
                                        std::string_view what) {
  const std::string kWhat(what);
  if (text.size() > kMaxJobFileBytes) {
    src.Error(1, 1, "", kWhat + " is larger than 1 MiB; barge refuses to parse it");
    return std::nullopt;
  }
  if (text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);  // a UTF-8 byte order mark
  std::vector<TextProblem> problems = CheckRawText(text);
  for (const TextProblem& p : problems) src.Error(p.line, p.column, "", p.message);
  if (!problems.empty()) return std::nullopt;
  if (IsBlank(text)) {
    src.Error(1, 1, "", "empty " + kWhat);
    return std::nullopt;
  }
  const std::string owned(text);
  YAML::Node root;
  try {
    // How many documents and nodes, before building one: at most three
    // documents are looked at.
    DocumentProbe probe;
    std::istringstream in(owned);
    YAML::Parser parser(in);
    for (int i = 0; i < 3 && parser.HandleNextDocument(probe); ++i) {
    }
    const std::vector<YAML::Mark>& starts = probe.starts();
    for (size_t i = 1; i < starts.size(); ++i) {
      if (starts[i].pos == starts[i - 1].pos) {
        // A token yaml-cpp cannot place and does not consume: it would
        // yield empty documents here forever.
        const size_t pos = static_cast<size_t>(starts[i].pos);
        const char c = pos < text.size() ? text[pos] : ' ';
        src.Error(starts[i], "", std::string("YAML syntax error: unexpected '") + c + "'");
        return std::nullopt;
      }
    }
    if (starts.size() > 1) {
      src.Error(starts[1].line + 1, 1, "",
                "a second YAML document starts here; a " + kWhat + " holds exactly one");
      return std::nullopt;
    }
    root = YAML::Load(owned);
  } catch (const DocumentProbe::TooDeep& too_deep) {
    if (too_deep.at.is_null()) {
      src.Error(1, 1, "", NestedTooDeepMessage(kMaxNestingDepth));
    } else {
      src.Error(too_deep.at, "", NestedTooDeepMessage(kMaxNestingDepth));
    }
    return std::nullopt;
  } catch (const DocumentProbe::TooManyNodes& too_many) {
    src.Error(too_many.at, "",
              "more than " + std::to_string(kMaxNodes) +
                  " YAML values; barge refuses to build them (a job file needs a few hundred)");
    return std::nullopt;
  } catch (const YAML::Exception& e) {
    int line = e.mark.line + 1;
    int column = e.mark.column + 1;
    if (int tab = TabIndentColumn(text, line); tab > 0) {
      src.Error(line, tab, "",
                "tab character used for indentation (YAML indents with spaces only)");
    } else if (std::optional<TextProblem> quote = FindUnclosedQuote(text)) {
      // yaml-cpp reports these where it gave up, often the end of the file,
      // nowhere near the cause.
      src.Error(quote->line, quote->column, "", quote->message);
    } else if (std::optional<TextProblem> flow = FindUnclosedFlow(text)) {
      src.Error(flow->line, flow->column, "", flow->message);
    } else if (e.mark.is_null()) {
      src.Error(1, 1, "", "YAML syntax error: " + e.msg + SyntaxHint(e.msg));
    } else {
      src.Error(line, column, "", "YAML syntax error: " + e.msg + SyntaxHint(e.msg));
    }
    return std::nullopt;
  }
  if (root.IsNull()) {
    src.Error(1, 1, "", "empty " + kWhat + " (nothing but comments)");
    return std::nullopt;
  }
  Expansion expansion;
  if (root.IsMap()) {
    for (auto it = root.begin(); it != root.end(); ++it) {
      CountExpandedNodes(it->second, &expansion);
      if (expansion.exceeded()) {
        src.Error(it->first.Mark(), it->first.Scalar(), ExpansionMessage(expansion));
        return std::nullopt;
      }
    }
  } else {
    CountExpandedNodes(root, &expansion);
    if (expansion.exceeded()) {
      src.Error(root.Mark(), "", ExpansionMessage(expansion));
      return std::nullopt;
    }
  }
  StructureCheck structure(src, text);
  structure.Walk(root, "");
  if (!structure.unterminated().empty()) {
    // Everything after the quote was swallowed into it: nothing else in the
    // file can be trusted, so nothing else is reported.
    for (JobFileError& e : structure.unterminated()) src.errors->push_back(std::move(e));
    return std::nullopt;
  }
  for (JobFileError& e : structure.duplicates()) src.errors->push_back(std::move(e));
  return root;
}

// Reads at most kMaxJobFileBytes + 1 bytes of `path`: enough for the size
// check to see that a file is too big, without reading all of it.
bool ReadFileCapped(const std::string& path, std::string* out, std::string* error) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    *error = std::strerror(errno);
    return false;
  }
  struct stat st;
  if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
    close(fd);
    *error = "it is a directory";
    return false;
  }
  out->clear();
  char buf[65536];
  while (out->size() <= kMaxJobFileBytes) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      *error = std::strerror(errno);
      close(fd);
      return false;
    }
    if (n == 0) break;
    out->append(buf, static_cast<size_t>(n));
  }
  close(fd);
  if (out->size() > kMaxJobFileBytes + 1) out->resize(kMaxJobFileBytes + 1);
  return true;
}

// Orders errors by file (in order of first appearance), then position, and
// drops exact repeats (a block reached through two aliases).
void SortErrors(std::vector<JobFileError>* errors) {
  std::vector<std::string> files;
  for (const JobFileError& e : *errors) {
    if (std::find(files.begin(), files.end(), e.file) == files.end()) files.push_back(e.file);
  }
  auto rank = [&](const JobFileError& e) {
    return std::find(files.begin(), files.end(), e.file) - files.begin();
  };
  std::stable_sort(errors->begin(), errors->end(),
                   [&](const JobFileError& a, const JobFileError& b) {
                     return std::make_tuple(rank(a), a.line, a.column) <
                            std::make_tuple(rank(b), b.line, b.column);
                   });
  std::set<std::tuple<std::string, int, int, std::string>> seen;
  std::erase_if(*errors, [&](const JobFileError& e) {
    return !seen.insert({e.file, e.line, e.column, e.message}).second;
  });
}


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
};

constexpr KeyRule<ConfigDraft> kConfigRules[] = {
    {"ssh",
     {.type = KeyType::kBlock, .description = "Defaults for every job file's ssh: block",
      .keys = kSshKeys},
     [](const Entry& e, ConfigDraft& c) {
       for (const auto& [key, entry] : ReadMapping(e, kSshRules, c.ssh)) c.ssh_keys.insert(key);
     }},
};

// Reads `path` (absent: nothing to do) and fills in the ssh settings the
// job file left unset.
void ApplyConfigFile(const std::string& path, std::vector<JobFileError>* errors, JobSpec& spec,
                     const std::set<std::string>& job_ssh_keys) {
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
}

// Each host group's ssh: the job's, with the group's own keys over it.
void LayGroupSsh(JobSpec& spec) {
  for (HostGroup& g : spec.host_groups) {
    SshSettings merged = spec.ssh;
    CopySshKeys(g.ssh, std::set<std::string>(g.ssh_keys.begin(), g.ssh_keys.end()), merged);
    g.ssh = std::move(merged);
  }
}

}  // namespace

std::vector<KeyInfo> JobFileKeys() { return kJobKeys(); }

LoadedJob ParseJobText(std::string_view text, const std::string& file_name,
                       const std::string& base_dir, SecretValues secrets,
                       const JobLayers& layers) {
  LoadedJob result;
  Source src{file_name, base_dir, &result.errors, secrets == SecretValues::kRead};
  auto draft = std::make_unique<JobDraft>();
  draft->spec.file = file_name;
  draft->spec.base_dir = base_dir;
  if (layers.hosts_file) draft->recorded_hosts = &*layers.hosts_file;
  if (layers.hosts_command) draft->recorded_command = &*layers.hosts_command;
  draft->may_run_command = layers.run_hosts_command;
  try {
    if (std::optional<YAML::Node> root = ParseDocument(src, text, "job file")) {
      const std::set<std::string> secret_names = SecretNames(*root);
      bool applied = true;
      for (const Override& o : layers.overrides) {
        applied = ApplyOverride(src, *root, o, secret_names) && applied;
      }
      if (applied) {
        ReadJob(src, *root, *draft);
        NameOverrides(file_name, layers.overrides, &result.errors);
        ApplyConfigFile(layers.config_file, &result.errors, draft->spec, draft->ssh_keys);
        LayGroupSsh(draft->spec);
      }
    }
  } catch (const YAML::Exception& e) {
    // Not expected (values are read as scalars, which does not throw); an
    // error value all the same, as promised.
    src.Error(e.mark.line + 1, e.mark.column + 1, "", "YAML error: " + e.msg);
  } catch (const std::exception& e) {
    src.Error(1, 1, "", std::string("internal error while reading the job file: ") + e.what());
  }
  SortErrors(&result.errors);
  if (result.errors.empty()) {
    result.spec = std::move(draft->spec);
    result.hosts_file = std::move(draft->hosts_read);
    result.hosts_command = std::move(draft->command_read);
  }
  return result;
}

LoadedJob LoadJobFile(const std::string& path, SecretValues secrets, const JobLayers& layers) {
  std::string text, error;
  if (!ReadFileCapped(path, &text, &error)) {
    LoadedJob result;
    result.errors.push_back({path, 0, 0, "", "cannot read job file: " + error});
    return result;
  }
  std::error_code ec;
  fs::path absolute = fs::absolute(path, ec);
  std::string base_dir = ec ? fs::path(path).parent_path().string()
                            : absolute.lexically_normal().parent_path().string();
  return ParseJobText(text, path, base_dir, secrets, layers);
}

}  // namespace barge::runner
