// The readers of single values of a job file (internal to
// runner/jobfile/): scalars, numbers, sizes, durations, enums, paths,
// commands, lists and NAME: value mappings. Each reports its own errors at
// its Entry and returns nullopt (or false) after one.
#pragma once

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
#include "runner/jobfile/entry.h"
#include "runner/jobfile/job_file.h"
#include "runner/jobfile/hosts_command.h"
#include "runner/jobfile/proxy_jump.h"
#include "runner/jobfile/job_keys.h"
#include "runner/jobfile/job_text.h"
#include "runner/jobfile/job_values.h"
#include "runner/jobfile/shell_text.h"
#include "runner/jobfile/suggest.h"
#include "runner/jobfile/units.h"
#include "runner/jobfile/forward_spec.h"

namespace barge::runner::jobfile {

namespace fs = std::filesystem;
using container::ContainerOptions;
using container::KeyValues;

inline std::optional<std::string> ReadScalar(const Entry& e, std::string_view expected = "a string") {
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

inline std::optional<std::string> ReadNonEmpty(const Entry& e, std::string_view expected = "a string") {
  std::optional<std::string> s = ReadScalar(e, expected);
  if (s && s->empty()) {
    e.Error("empty value (expected " + std::string(expected) + ")");
    return std::nullopt;
  }
  return s;
}

// A string that `check` accepts.
inline std::optional<std::string> ReadChecked(const Entry& e, Status (*check)(std::string_view)) {
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
// are filled in, runner/array/array_member.h).
inline Status CheckImageOrArrayTemplate(std::string_view image) {
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

inline std::optional<long long> ReadInteger(const Entry& e, long long min, long long max,
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

inline std::optional<int> ReadPort(const Entry& e) {
  std::optional<long long> port = ReadInteger(e, 1, 65535, "a port number");
  if (!port) return std::nullopt;
  return static_cast<int>(*port);
}

// The values of a boolean key (KeyType::kBoolean), for ReadEnum.
inline constexpr std::string_view kBooleans[] = {"true", "false"};

// `note`, when given, follows the choices in an invalid value's message
// ("(expected a or b: NOTE)"): what the choices mean where their names
// alone do not say.
inline std::optional<std::string> ReadEnum(const Entry& e, std::span<const std::string_view> values,
                                           std::string_view note = {}) {
  std::string expected = JoinWords(values, " or ");
  std::optional<std::string> s = ReadScalar(e, expected);
  if (!s) return std::nullopt;
  for (std::string_view v : values) {
    if (v == *s) return s;
  }
  std::string message = "invalid value " + QuoteValue(*s) + " (expected " + expected +
                        (note.empty() ? "" : ": " + std::string(note)) + ")";
  if (auto close = ClosestMatch(*s, values)) message += "; did you mean '" + *close + "'?";
  e.Error(message);
  return std::nullopt;
}

// The same, for a key whose choices are an enum's names: its value.
template <typename E, size_t N>
std::optional<E> ReadEnum(const Entry& e, const EnumTable<E, N>& table, std::string_view note = {}) {
  const std::array<std::string_view, N> names = NamesOf(table);
  std::optional<std::string> name = ReadEnum(e, names, note);
  if (!name) return std::nullopt;
  return ValueOf(table, *name);
}

inline std::optional<std::string> ReadSize(const Entry& e) {
  std::optional<std::string> s = ReadScalar(e, "a size, e.g. 512m or 2g");
  if (!s) return std::nullopt;
  if (!IsSize(*s)) {
    e.Error(InvalidSizeMessage(*s));
    return std::nullopt;
  }
  return s;
}

inline std::optional<std::chrono::milliseconds> ReadDuration(const Entry& e, bool allow_zero) {
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
inline bool ExpectList(const Entry& e, std::string_view of_what) {
  if (e.value.IsSequence()) return true;
  std::string message = "expected a list of " + std::string(of_what) + ", got " + TypeName(e.value);
  if (e.value.IsScalar()) message += "; write [" + e.value.Scalar() + "]";
  e.Error(message);
  return false;
}

// A list of strings, each accepted by `check` (when given).
inline std::optional<std::vector<std::string>> ReadStringList(const Entry& e,
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
inline std::optional<std::string> ExpandPath(const Entry& e, const std::string& written) {
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

inline std::optional<std::string> ReadPath(const Entry& e) {
  std::optional<std::string> written = ReadScalar(e, "a path");
  if (!written) return std::nullopt;
  return ExpandPath(e, *written);
}

// Opens `path` for reading to see that it can be read: "" or why not.
inline std::string Unreadable(const std::string& path) {
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
inline std::optional<std::string> ReadReadableFile(const Entry& e, std::string_view what) {
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
inline std::optional<std::vector<std::string>> ReadCommand(const Entry& e) {
  const std::string kEmpty = "empty command; remove 'command:' to run the image's CMD";
  if (e.value.IsSequence()) {
    if (e.value.size() == 0) {
      e.Error(kEmpty);
      return std::nullopt;
    }
    std::optional<std::vector<std::string>> argv = ReadStringList(e, nullptr);
    if (argv) {
      if (std::string why = ArrayPlaceholderInShell(*argv, /*string_form=*/false); !why.empty()) {
        e.Error(why);
        return std::nullopt;
      }
    }
    return argv;
  }
  std::optional<std::string> s = ReadScalar(e, "a list of strings, or a string to run with sh -c");
  if (!s) return std::nullopt;
  if (s->empty()) {
    e.Error(kEmpty);
    return std::nullopt;
  }
  std::vector<std::string> argv{"sh", "-c", *s};
  if (std::string why = ArrayPlaceholderInShell(argv, /*string_form=*/true); !why.empty()) {
    e.Error(why);
    return std::nullopt;
  }
  return argv;
}

// A mapping NAME -> scalar whose names `check_name` accepts; values are
// kept exactly as written (`3` stays "3", `true` stays "true"). Returns
// nullopt after any error.
inline std::optional<KeyValues> ReadKeyValues(
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

inline bool IsIdentifier(std::string_view s) { return CheckEnvName(s).ok(); }

inline std::optional<KeyValues> ReadEnv(const Entry& e) {
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

inline std::optional<KeyValues> ReadUlimits(const Entry& e) {
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
inline std::optional<std::string> ReadGpus(const Entry& e) {
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
// (runner/jobfile/proxy_jump.h).
inline std::optional<std::vector<std::string>> ReadProxyJump(const Entry& e) {
  std::optional<std::string> s = ReadNonEmpty(e, "jump hosts [user@]host[:port],...");
  if (!s) return std::nullopt;
  Result<std::vector<std::string>> hops = ParseProxyJump(*s);
  if (!hops.ok()) {
    e.Error(hops.status().message());
    return std::nullopt;
  }
  return *hops;
}

}  // namespace barge::runner::jobfile
