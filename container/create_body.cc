// A ContainerSpec as the body of the Engine API's POST /containers/create.
#include "container/create_body.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <set>
#include <vector>

#include <nlohmann/json.hpp>

namespace barge::container {
namespace {

using nlohmann::json;

std::vector<std::string> SplitOn(std::string_view s, char sep) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (true) {
    const size_t at = s.find(sep, pos);
    out.emplace_back(s.substr(pos, at == std::string_view::npos ? std::string_view::npos : at - pos));
    if (at == std::string_view::npos) return out;
    pos = at + 1;
  }
}

std::optional<int64_t> Integer(std::string_view s) {
  int64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || s.empty()) return std::nullopt;
  return v;
}

// Docker's --ulimit value "soft[:hard]" (go-units ParseUlimit): hard
// defaults to soft.
std::optional<json> Ulimit(const std::string& name, const std::string& value) {
  const std::vector<std::string> parts = SplitOn(value, ':');
  if (parts.size() > 2) return std::nullopt;
  const std::optional<int64_t> soft = Integer(parts[0]);
  const std::optional<int64_t> hard = parts.size() == 2 ? Integer(parts[1]) : soft;
  if (!soft || !hard) return std::nullopt;
  return json{{"Name", name}, {"Hard", *hard}, {"Soft", *soft}};
}

// The CLI's ValidDeviceMode: r, w and m, each at most once.
bool DeviceMode(std::string_view s) {
  if (s.empty() || s.size() > 3) return false;
  std::set<char> seen;
  for (char c : s) {
    if ((c != 'r' && c != 'w' && c != 'm') || !seen.insert(c).second) return false;
  }
  return true;
}

// The CLI's ParseDevice (Linux): HOST[:CONTAINER][:PERMISSIONS].
std::optional<json> Device(std::string_view spec) {
  const std::vector<std::string> a = SplitOn(spec, ':');
  if (a.size() > 3) return std::nullopt;
  std::string dst;
  std::string perms = "rwm";
  if (a.size() == 3) perms = a[2];
  if (a.size() >= 2) {
    if (DeviceMode(a[1])) {
      perms = a[1];
    } else {
      dst = a[1];
    }
  }
  const std::string& src = a[0];
  if (dst.empty()) dst = src;
  return json{{"PathOnHost", src}, {"PathInContainer", dst}, {"CgroupPermissions", perms}};
}

// --gpus as barge writes it (ReadGpus, the GPU slices): all, a count, or
// "device=ID,..." (in double quotes, for the CLI's CSV reading), as the
// CLI's GpuOpts makes a device request of it.
std::optional<json> GpuRequest(std::string value) {
  if (value.size() >= 2 && value.front() == '"' && value.back() == '"') value = value.substr(1, value.size() - 2);
  json req = {{"Driver", ""}, {"Count", 0}, {"DeviceIDs", nullptr}, {"Capabilities", {{"gpu"}}},
              {"Options", json::object()}};
  if (value == "all") {
    req["Count"] = -1;
  } else if (std::optional<int64_t> n = Integer(value); n && *n >= 0) {
    req["Count"] = *n;
  } else if (value.rfind("device=", 0) == 0 && value.size() > 7 && value.find('"') == std::string::npos) {
    req["DeviceIDs"] = SplitOn(std::string_view(value).substr(7), ',');
  } else {
    return std::nullopt;
  }
  return req;
}

// As the current CLI sends them (NormalizeCapability, then sorted): upper
// case, CAP_ prefixed but ALL, each once. (The 20.10 CLI sends them as
// written; the engine normalizes them the same way when it starts the
// container, so both mean the same.)
std::vector<std::string> Capabilities(const std::vector<std::string>& names) {
  std::set<std::string> caps;
  for (std::string c : names) {
    std::transform(c.begin(), c.end(), c.begin(), [](unsigned char ch) { return std::toupper(ch); });
    if (c != "ALL" && c.rfind("CAP_", 0) != 0) c = "CAP_" + c;
    caps.insert(c);
  }
  return {caps.begin(), caps.end()};
}

// Network modes the engine knows without a network of that name.
bool BuiltinNetwork(const std::string& mode) {
  return mode == "default" || mode == "bridge" || mode == "host" || mode == "none" ||
         mode.rfind("container:", 0) == 0;
}

}  // namespace

std::optional<int64_t> SizeInBytes(std::string_view text) {
  // NUMBER: digits, optionally "." digits.
  size_t i = 0;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) ++i;
  if (i == 0) return std::nullopt;
  if (i < text.size() && text[i] == '.') {
    const size_t f = ++i;
    while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) ++i;
    if (i == f) return std::nullopt;
  }
  const std::string number(text.substr(0, i));
  if (i < text.size() && text[i] == ' ') ++i;
  double mult = 1;
  if (i < text.size()) {
    const char u = static_cast<char>(std::tolower(static_cast<unsigned char>(text[i])));
    const std::string_view units = "kmgtp";
    if (const size_t k = units.find(u); k != std::string_view::npos) {
      mult = std::pow(1024.0, static_cast<double>(k + 1));
      ++i;
    }
  }
  if (i < text.size() && (text[i] == 'i' || text[i] == 'I')) ++i;
  if (i < text.size() && (text[i] == 'b' || text[i] == 'B')) ++i;
  if (i != text.size()) return std::nullopt;
  return static_cast<int64_t>(std::stod(number) * mult);
}

Result<std::string> CreateBody(const ContainerSpec& spec) {
  const ContainerOptions& o = spec.options;
  if (o.run_options && !o.run_options->empty()) {
    return Status::Error("free-form run_options are given only on the docker command line");
  }
  json config;
  config["Image"] = spec.image;
  if (spec.command) config["Cmd"] = *spec.command;
  // The CLI reads -e into a map: a name given twice keeps its last value
  // (and the order it sends is the map's, which varies from run to run).
  json env = json::array();
  std::set<std::string> named;
  for (auto it = spec.env.rbegin(); it != spec.env.rend(); ++it) {
    if (named.insert(it->first).second) env.insert(env.begin(), it->first + "=" + it->second);
  }
  config["Env"] = env;
  json labels = json::object();
  for (const auto& [k, v] : spec.labels) labels[k] = v;
  config["Labels"] = labels;
  // `docker create` without -a attaches stdout and stderr.
  config["AttachStdout"] = true;
  config["AttachStderr"] = true;

  json host;
  host["NetworkMode"] = o.network.value_or("default");
  host["RestartPolicy"] = {{"Name", "no"}, {"MaximumRetryCount", 0}};
  if (o.volumes && !o.volumes->empty()) host["Binds"] = *o.volumes;
  if (o.cap_add && !o.cap_add->empty()) host["CapAdd"] = Capabilities(*o.cap_add);
  if (o.ipc) host["IpcMode"] = *o.ipc;
  if (o.shm_size) {
    std::optional<int64_t> n = SizeInBytes(*o.shm_size);
    if (!n) return Status::Error("shm_size '" + *o.shm_size + "' is not a size the API body takes");
    host["ShmSize"] = *n;
  }
  if (o.memory) {
    std::optional<int64_t> n = SizeInBytes(*o.memory);
    if (!n) return Status::Error("memory '" + *o.memory + "' is not a size the API body takes");
    host["Memory"] = *n;
  }
  if (o.cpus) {
    std::optional<int64_t> n = NanoCpus(*o.cpus);
    if (!n) return Status::Error("cpus '" + *o.cpus + "' is not a number of CPUs the API body takes");
    host["NanoCpus"] = *n;
  }
  if (o.ulimits && !o.ulimits->empty()) {
    json ulimits = json::array();
    for (const auto& [name, value] : *o.ulimits) {
      std::optional<json> u = Ulimit(name, value);
      if (!u) return Status::Error("ulimit " + name + "=" + value + " is not one the API body takes");
      ulimits.push_back(*u);
    }
    host["Ulimits"] = ulimits;
  }
  if (o.devices && !o.devices->empty()) {
    json devices = json::array();
    for (const std::string& d : *o.devices) {
      std::optional<json> dev = Device(d);
      if (!dev) return Status::Error("device '" + d + "' is not one the API body takes");
      devices.push_back(*dev);
    }
    host["Devices"] = devices;
  }
  if (o.gpus) {
    std::optional<json> req = GpuRequest(*o.gpus);
    if (!req) return Status::Error("gpus '" + *o.gpus + "' is not a value the API body takes");
    host["DeviceRequests"] = json::array({*req});
  }

  json body = config;
  body["HostConfig"] = host;
  if (o.network && !BuiltinNetwork(*o.network)) {
    body["NetworkingConfig"] = {{"EndpointsConfig", {{*o.network, json::object()}}}};
  }
  return body.dump();
}

}  // namespace barge::container
