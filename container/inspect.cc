#include "container/inspect.h"

#include <charconv>
#include <limits>

#include <nlohmann/json.hpp>

#include "base/json_depth.h"
#include "container/timestamp.h"

namespace barge::container {
namespace {

using nlohmann::json;

// Parses `text` as one JSON document; the error names `what` (the command
// whose output this is) and carries the parser's position.
Result<json> ParseJson(std::string_view text, std::string_view what) {
  if (!JsonNestingWithin(text)) {
    return Status::Error(std::string(what) + ": output nests deeper than " + std::to_string(kMaxJsonNesting) +
                         " levels");
  }
  try {
    return json::parse(text.begin(), text.end());
  } catch (const json::exception& e) {
    return Status::Error(std::string(what) + ": output is not valid JSON (" + e.what() + ")");
  }
}

// Reads typed fields of one JSON object, recording the first problem.
// A field that is absent or null keeps its default unless it is required.
class FieldReader {
 public:
  // `where` prefixes messages, e.g. "docker inspect: container 1".
  FieldReader(const json& object, std::string where)
      : object_(object), where_(std::move(where)) {}

  void String(const char* key, std::string* out, bool required = false) {
    const json* v = Find(key, required);
    if (v == nullptr) return;
    if (!v->is_string()) return Fail(key, "is not a string");
    *out = v->get<std::string>();
  }

  void Bool(const char* key, bool* out, bool required = false) {
    const json* v = Find(key, required);
    if (v == nullptr) return;
    if (!v->is_boolean()) return Fail(key, "is not true or false");
    *out = v->get<bool>();
  }

  void Int(const char* key, int* out, bool required = false) {
    const json* v = Find(key, required);
    if (v == nullptr) return;
    if (!v->is_number_integer()) return Fail(key, "is not an integer");
    const int64_t n = v->get<int64_t>();
    if (n < std::numeric_limits<int>::min() || n > std::numeric_limits<int>::max()) {
      return Fail(key, "is out of range");
    }
    *out = static_cast<int>(n);
  }

  // A string→string object; each value must be a string.
  void StringMap(const char* key, Labels* out) {
    const json* v = Find(key, false);
    if (v == nullptr) return;
    if (!v->is_object()) return Fail(key, "is not an object");
    for (const auto& [k, value] : v->items()) {
      if (!value.is_string()) return Fail(key, "has a value that is not a string");
      (*out)[k] = value.get<std::string>();
    }
  }

  // An RFC 3339 time; Docker's zero time reads as nullopt.
  void Time(const char* key, std::optional<int64_t>* out) {
    std::string text;
    String(key, &text);
    if (!ok() || text.empty() || text == kDockerZeroTime) return;
    Result<int64_t> ns = ParseTimestamp(text);
    if (!ns.ok()) return Fail(key, "is not a valid time (" + ns.status().message() + ")");
    *out = *ns;
  }

  // A nested object; nullptr (and, when required, a failure) when absent.
  const json* Object(const char* key, bool required) {
    const json* v = Find(key, required);
    if (v == nullptr) return nullptr;
    if (!v->is_object()) {
      Fail(key, "is not an object");
      return nullptr;
    }
    return v;
  }

  // Records a problem found by the caller.
  void Fail(std::string_view key, std::string_view why) {
    if (status_.ok()) {
      status_ = Status::Error(where_ + ": field " + prefix_ + std::string(key) + " " +
                              std::string(why));
    }
  }

  // Reads the fields of a nested object through the same reader, so that
  // messages say "State.ExitCode".
  FieldReader Nested(const json& object, const char* key) const {
    FieldReader nested(object, where_);
    nested.prefix_ = prefix_ + key + ".";
    return nested;
  }

  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }

 private:
  const json* Find(const char* key, bool required) {
    auto it = object_.find(key);
    if (it == object_.end() || it->is_null()) {
      if (required) Fail(key, "is missing");
      return nullptr;
    }
    return &*it;
  }

  const json& object_;
  std::string where_;
  std::string prefix_;
  Status status_;
};

// `where` prefixes messages, e.g. "docker inspect: container 0".
Result<ContainerState> ParseOneContainer(const json& object, std::string where) {
  if (!object.is_object()) return Status::Error(where + " is not a JSON object");
  // Name the container in messages when its name is readable.
  if (auto name = object.find("Name"); name != object.end() && name->is_string()) {
    std::string n = name->get<std::string>();
    if (!n.empty() && n.front() == '/') n.erase(0, 1);
    where += " (" + n + ")";
  }
  ContainerState c;
  FieldReader r(object, where);
  r.String("Id", &c.id, /*required=*/true);
  r.String("Name", &c.name, /*required=*/true);
  if (!c.name.empty() && c.name.front() == '/') c.name.erase(0, 1);
  r.String("Image", &c.image_id);
  if (const json* state = r.Object("State", /*required=*/true)) {
    FieldReader s = r.Nested(*state, "State");
    s.String("Status", &c.status, /*required=*/true);
    s.Bool("Running", &c.running, /*required=*/true);
    s.Int("ExitCode", &c.exit_code, /*required=*/true);
    s.Bool("OOMKilled", &c.oom_killed);
    s.String("Error", &c.error);
    s.Time("StartedAt", &c.started_at_ns);
    s.Time("FinishedAt", &c.finished_at_ns);
    if (!s.ok()) return s.status();
  }
  if (const json* config = r.Object("Config", /*required=*/false)) {
    FieldReader cfg = r.Nested(*config, "Config");
    cfg.StringMap("Labels", &c.labels);
    if (!cfg.ok()) return cfg.status();
  }
  if (!r.ok()) return r.status();
  return c;
}

bool IsBlank(std::string_view s) {
  return s.find_first_not_of(" \t\r\n") == std::string_view::npos;
}

std::string_view TrimNewline(std::string_view s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

}  // namespace

Result<std::vector<ContainerState>> ParseContainerInspect(std::string_view text) {
  if (IsBlank(text)) return Status::Error("docker inspect: no output");
  Result<json> doc = ParseJson(text, "docker inspect");
  if (!doc.ok()) return doc.status();
  if (!doc->is_array()) return Status::Error("docker inspect: output is not a JSON array");
  std::vector<ContainerState> containers;
  containers.reserve(doc->size());
  for (size_t i = 0; i < doc->size(); ++i) {
    Result<ContainerState> c =
        ParseOneContainer((*doc)[i], "docker inspect: container " + std::to_string(i));
    if (!c.ok()) return c.status();
    containers.push_back(std::move(c).value());
  }
  return containers;
}

Result<ContainerState> ParseContainerObject(std::string_view text) {
  constexpr std::string_view kWhat = "engine API: container";
  if (IsBlank(text)) return Status::Error(std::string(kWhat) + ": empty response");
  Result<json> doc = ParseJson(text, kWhat);
  if (!doc.ok()) return doc.status();
  return ParseOneContainer(*doc, std::string(kWhat));
}

Result<ServerVersion> ParseVersion(std::string_view text) {
  if (IsBlank(text)) return Status::Error("docker version: no output");
  Result<json> doc = ParseJson(text, "docker version");
  if (!doc.ok()) return doc.status();
  if (!doc->is_object()) return Status::Error("docker version: output is not a JSON object");
  ServerVersion v;
  FieldReader r(*doc, "docker version");
  if (const json* client = r.Object("Client", /*required=*/false)) {
    FieldReader c = r.Nested(*client, "Client");
    c.String("Version", &v.client_version);
    c.String("ApiVersion", &v.client_api_version);
    if (!c.ok()) return c.status();
  }
  const json* server = r.Object("Server", /*required=*/false);
  if (!r.ok()) return r.status();
  if (server == nullptr) {
    return Status::Error("the Docker daemon is unreachable (docker version has no Server part)");
  }
  FieldReader s = r.Nested(*server, "Server");
  s.String("Version", &v.server_version, /*required=*/true);
  s.String("ApiVersion", &v.server_api_version, /*required=*/true);
  s.String("Os", &v.server_os);
  s.String("Arch", &v.server_arch);
  if (!s.ok()) return s.status();
  return v;
}

Labels ParsePsLabels(std::string_view text) {
  Labels labels;
  std::string* last = nullptr;  // value of the previous label
  while (!text.empty()) {
    const size_t comma = text.find(',');
    const std::string_view piece = text.substr(0, comma);
    const size_t eq = piece.find('=');
    if (eq == std::string_view::npos && last != nullptr) {
      *last += ',';
      *last += piece;
    } else if (eq == std::string_view::npos) {
      if (!piece.empty()) last = &(labels[std::string(piece)] = "");
    } else {
      std::string& value = labels[std::string(piece.substr(0, eq))];
      value = std::string(piece.substr(eq + 1));
      last = &value;
    }
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  return labels;
}

Result<std::vector<PsEntry>> ParsePsLines(std::string_view text) {
  std::vector<PsEntry> entries;
  size_t line_number = 0;
  while (!text.empty()) {
    const size_t newline = text.find('\n');
    const std::string_view line = text.substr(0, newline);
    text.remove_prefix(newline == std::string_view::npos ? text.size() : newline + 1);
    ++line_number;
    if (IsBlank(line)) continue;
    const std::string where = "docker ps: line " + std::to_string(line_number);
    Result<json> doc = ParseJson(line, where);
    if (!doc.ok()) return doc.status();
    if (!doc->is_object()) return Status::Error(where + " is not a JSON object");
    PsEntry e;
    std::string labels;
    FieldReader r(*doc, where);
    r.String("ID", &e.id, /*required=*/true);
    r.String("Names", &e.names, /*required=*/true);
    r.String("Image", &e.image);
    r.String("State", &e.state);
    r.String("Status", &e.status);
    r.String("Labels", &labels);
    if (!r.ok()) return r.status();
    e.labels = ParsePsLabels(labels);
    entries.push_back(std::move(e));
  }
  return entries;
}

Result<int> ParseWaitOutput(std::string_view text) {
  const std::string_view number = TrimNewline(text);
  int code = 0;
  const auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), code);
  if (number.empty() || ec != std::errc() || end != number.data() + number.size()) {
    return Status::Error("docker wait: expected an exit code, got \"" + std::string(number) + "\"");
  }
  return code;
}

Result<std::string> ParseImageId(std::string_view text) {
  const std::string_view id = TrimNewline(text);
  constexpr std::string_view kPrefix = "sha256:";
  bool ok = id.size() == kPrefix.size() + 64 && id.substr(0, kPrefix.size()) == kPrefix;
  for (size_t i = kPrefix.size(); ok && i < id.size(); ++i) {
    const char c = id[i];
    ok = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
  }
  if (!ok) {
    return Status::Error("docker image inspect: expected an image ID (sha256:<64 hex digits>), "
                         "got \"" + std::string(id) + "\"");
  }
  return std::string(id);
}

}  // namespace barge::container
