// Parsing docker stats / nvidia-smi output, and top's table and JSON.
#include "runner/remote/stats.h"

#include "runner/console/table.h"

#include <cmath>
#include <cstdio>
#include <sstream>

namespace barge::runner {
namespace {

using Json = nlohmann::json;

std::string TrimSpaces(std::string s) {
  while (!s.empty() && (s.back() == ' ' || s.back() == '\r' || s.back() == '\n')) s.pop_back();
  size_t i = 0;
  while (i < s.size() && s[i] == ' ') ++i;
  return s.substr(i);
}

std::optional<double> ParseNumber(const std::string& text) {
  std::string t = TrimSpaces(text);
  if (t.empty()) return std::nullopt;
  char* end = nullptr;
  double v = std::strtod(t.c_str(), &end);
  if (end == t.c_str() || *end != '\0' || !std::isfinite(v)) return std::nullopt;
  return v;
}

// "A / B" → the two halves.
bool SplitPair(const std::string& text, std::string* a, std::string* b) {
  const size_t slash = text.find(" / ");
  if (slash == std::string::npos) return false;
  *a = TrimSpaces(text.substr(0, slash));
  *b = TrimSpaces(text.substr(slash + 3));
  return true;
}

std::string Size(uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f%s" : "%.1f%s", v, units[u]);
  return buf;
}

std::string Fixed(double v, int digits) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

template <typename T>
Json OptJson(const std::optional<T>& v) {
  return v ? Json(*v) : Json(nullptr);
}

}  // namespace

std::optional<uint64_t> ParseDockerSize(const std::string& text) {
  std::string t = TrimSpaces(text);
  size_t i = 0;
  while (i < t.size() && (std::isdigit(static_cast<unsigned char>(t[i])) || t[i] == '.')) ++i;
  if (i == 0) return std::nullopt;
  std::optional<double> number = ParseNumber(t.substr(0, i));
  if (!number) return std::nullopt;
  const std::string unit = t.substr(i);
  static const struct {
    const char* unit;
    double factor;
  } kUnits[] = {{"B", 1},           {"kB", 1e3},     {"KB", 1e3},     {"MB", 1e6},
                {"GB", 1e9},        {"TB", 1e12},    {"KiB", 1024.0}, {"MiB", 1048576.0},
                {"GiB", 1073741824.0}, {"TiB", 1099511627776.0}};
  for (const auto& u : kUnits) {
    if (unit == u.unit) return static_cast<uint64_t>(std::llround(*number * u.factor));
  }
  return std::nullopt;
}

Result<std::vector<ContainerStats>> ParseDockerStats(const std::string& output) {
  std::vector<ContainerStats> out;
  std::istringstream lines(output);
  for (std::string line; std::getline(lines, line);) {
    line = TrimSpaces(line);
    if (line.empty()) continue;
    Json j = Json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object() || !j["Name"].is_string() ||
        !j["CPUPerc"].is_string() || !j["MemUsage"].is_string() || !j["NetIO"].is_string()) {
      return Status::Error("docker stats printed an unexpected line: " + line.substr(0, 200));
    }
    ContainerStats s;
    s.name = j["Name"].get<std::string>();
    std::string cpu = j["CPUPerc"].get<std::string>();
    if (!cpu.empty() && cpu.back() == '%') cpu.pop_back();
    s.cpu_percent = ParseNumber(cpu).value_or(0);
    std::string used, limit;
    if (SplitPair(j["MemUsage"].get<std::string>(), &used, &limit)) {
      s.mem_used = ParseDockerSize(used).value_or(0);
      s.mem_limit = ParseDockerSize(limit).value_or(0);
    }
    std::string rx, tx;
    if (SplitPair(j["NetIO"].get<std::string>(), &rx, &tx)) {
      s.net_rx = ParseDockerSize(rx);
      s.net_tx = ParseDockerSize(tx);
    }
    out.push_back(s);
  }
  return out;
}

Result<std::vector<GpuStats>> ParseGpuStats(const std::string& output) {
  std::vector<GpuStats> out;
  std::istringstream lines(output);
  for (std::string line; std::getline(lines, line);) {
    line = TrimSpaces(line);
    if (line.empty()) continue;
    std::vector<std::string> f;
    std::istringstream fields(line);
    for (std::string x; std::getline(fields, x, ',');) f.push_back(TrimSpaces(x));
    std::optional<double> index = f.size() == 5 ? ParseNumber(f[0]) : std::nullopt;
    if (!index) return Status::Error("nvidia-smi printed an unexpected line: " + line.substr(0, 200));
    GpuStats g;
    g.index = static_cast<int>(*index);
    g.uuid = f[1];
    g.util_percent = ParseNumber(f[2]);
    if (auto v = ParseNumber(f[3])) g.mem_used_mib = static_cast<uint64_t>(*v);
    if (auto v = ParseNumber(f[4])) g.mem_total_mib = static_cast<uint64_t>(*v);
    out.push_back(g);
  }
  return out;
}

std::vector<GpuStats> NodeGpus(const std::optional<std::string>& gpus,
                               const std::vector<GpuStats>& host_gpus) {
  if (!gpus) return {};
  std::string v = *gpus;
  v.erase(std::remove(v.begin(), v.end(), '"'), v.end());
  if (v == "all") return host_gpus;
  if (v.rfind("device=", 0) == 0) {
    std::vector<GpuStats> out;
    std::istringstream ids(v.substr(7));
    for (std::string id; std::getline(ids, id, ',');) {
      for (const GpuStats& g : host_gpus) {
        if (id == g.uuid || id == std::to_string(g.index)) out.push_back(g);
      }
    }
    return out;
  }
  std::optional<double> n = ParseNumber(v);
  if (!n) return {};
  std::vector<GpuStats> out;
  for (const GpuStats& g : host_gpus) {
    if (static_cast<double>(out.size()) < *n) out.push_back(g);
  }
  return out;
}

std::string RenderTopTable(const std::string& job_id, const std::vector<NodeSample>& nodes) {
  std::vector<std::vector<std::string>> rows = {
      {"RANK", "ROLE", "HOST", "CPU%", "MEM USED / LIMIT", "NET I/O (RX / TX)", "GPU", "UTIL", "GPU MEM"}};
  bool any_host_net = false;
  for (const NodeSample& n : nodes) {
    std::vector<std::string> row = {std::to_string(n.rank), n.role, n.host};
    if (!n.stats) {
      row.insert(row.end(), {"-", "-", n.error.empty() ? "-" : "(" + n.error + ")", "-", "-", "-"});
      rows.push_back(row);
      continue;
    }
    const ContainerStats& s = *n.stats;
    row.push_back(Fixed(s.cpu_percent, 1));
    row.push_back(Size(s.mem_used) + " / " + Size(s.mem_limit));
    if (n.host_network) {
      any_host_net = true;
      row.push_back("- (host net)");
    } else if (s.net_rx && s.net_tx) {
      row.push_back(Size(*s.net_rx) + " / " + Size(*s.net_tx));
    } else {
      row.push_back("-");
    }
    if (n.gpus.empty()) {
      row.insert(row.end(), {"-", "-", "-"});
      rows.push_back(row);
      continue;
    }
    for (size_t i = 0; i < n.gpus.size(); ++i) {
      const GpuStats& g = n.gpus[i];
      std::vector<std::string> r = i == 0 ? row : std::vector<std::string>(6, "");
      r.push_back(std::to_string(g.index));
      r.push_back(g.util_percent ? Fixed(*g.util_percent, 0) + "%" : "-");
      r.push_back(g.mem_used_mib && g.mem_total_mib
                      ? std::to_string(*g.mem_used_mib) + " / " + std::to_string(*g.mem_total_mib) + " MiB"
                      : "-");
      rows.push_back(r);
    }
  }
  std::string out = "job " + job_id + "\n" + FormatTable(rows);
  if (any_host_net) {
    out += "(host network: Docker reports no network I/O for such containers)\n";
  }
  return out;
}

Json TopJson(const std::string& job_id, const std::string& at, const std::vector<NodeSample>& nodes) {
  Json list = Json::array();
  for (const NodeSample& n : nodes) {
    Json gpus = Json::array();
    for (const GpuStats& g : n.gpus) {
      gpus.push_back({{"index", g.index},
                      {"uuid", g.uuid},
                      {"util_percent", OptJson(g.util_percent)},
                      {"mem_used_mib", OptJson(g.mem_used_mib)},
                      {"mem_total_mib", OptJson(g.mem_total_mib)}});
    }
    Json node = {{"rank", n.rank},
                 {"role", n.role},
                 {"host", n.host},
                 {"container", n.container},
                 {"network", n.host_network ? "host" : "bridge"},
                 {"nvidia_smi", n.host_has_nvidia_smi},
                 {"gpus", gpus},
                 {"error", n.error.empty() ? Json(nullptr) : Json(n.error)}};
    if (n.stats) {
      node["cpu_percent"] = n.stats->cpu_percent;
      node["mem_used_bytes"] = n.stats->mem_used;
      node["mem_limit_bytes"] = n.stats->mem_limit;
      node["net_rx_bytes"] = n.host_network ? Json(nullptr) : OptJson(n.stats->net_rx);
      node["net_tx_bytes"] = n.host_network ? Json(nullptr) : OptJson(n.stats->net_tx);
    } else {
      for (const char* k : {"cpu_percent", "mem_used_bytes", "mem_limit_bytes", "net_rx_bytes",
                            "net_tx_bytes"}) {
        node[k] = nullptr;
      }
    }
    list.push_back(node);
  }
  return Json{{"job", job_id}, {"at", at}, {"nodes", list}};
}

}  // namespace barge::runner
