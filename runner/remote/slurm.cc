#include "runner/remote/slurm.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <sstream>

#include "container/create_body.h"
#include "runner/jobfile/job_values.h"
#include "ssh/quote.h"

namespace barge::runner::slurm {

using ssh::ShellQuote;

std::string TimeLimit(std::chrono::milliseconds limit) {
  const long long minutes = (limit.count() + 60'000 - 1) / 60'000;
  char out[64];
  std::snprintf(out, sizeof out, "%lld-%02lld:%02lld:00", minutes / (24 * 60), (minutes / 60) % 24, minutes % 60);
  return out;
}

std::string AllocationName(const std::string& job_id, const std::string& job_name) {
  return "barge-" + job_id + "-" + job_name;
}

std::string SallocLine(const SlurmSpec& spec, const std::string& job_id, const std::string& job_name) {
  std::string line = "salloc --no-shell --job-name=" + ShellQuote(AllocationName(job_id, job_name)) +
                     " --nodes=" + std::to_string(spec.nodes) + " --ntasks-per-node=1 --time=" +
                     TimeLimit(spec.time);
  if (!spec.partition.empty()) line += " --partition=" + ShellQuote(spec.partition);
  if (!spec.account.empty()) line += " --account=" + ShellQuote(spec.account);
  if (!spec.qos.empty()) line += " --qos=" + ShellQuote(spec.qos);
  if (spec.gpus_per_node && *spec.gpus_per_node > 0) {
    line += " --gpus-per-node=" + std::to_string(*spec.gpus_per_node);
  }
  if (spec.cpus_per_node) line += " --cpus-per-task=" + std::to_string(*spec.cpus_per_node);
  if (spec.mem_per_node) {
    const std::optional<int64_t> bytes = container::SizeInBytes(*spec.mem_per_node);
    if (bytes) line += " --mem=" + std::to_string((*bytes + (1 << 20) - 1) >> 20) + "M";
  }
  if (spec.exclusive) line += " --exclusive";
  for (const std::string& option : spec.extra) line += " " + ShellQuote(option);
  return line;
}

std::optional<std::string> JobIdInSalloc(std::string_view text) {
  static constexpr std::string_view kMark = "job allocation ";
  for (size_t at = text.find(kMark); at != std::string_view::npos; at = text.find(kMark, at + 1)) {
    size_t begin = at + kMark.size(), end = begin;
    while (end < text.size() && std::isdigit(static_cast<unsigned char>(text[end]))) ++end;
    if (end > begin) return std::string(text.substr(begin, end - begin));
  }
  return std::nullopt;
}

std::string SqueueLine(const std::string& id) {
  return "squeue -h -j " + ShellQuote(id) + " -o '%T|%r'";
}

namespace {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// The whitespace-separated KEY=VALUE words of scontrol's one-line form, in
// order (a key may repeat: -d's per-node details).
std::vector<std::pair<std::string, std::string>> Fields(std::string_view line) {
  std::vector<std::pair<std::string, std::string>> out;
  std::istringstream in{std::string(line)};
  std::string word;
  while (in >> word) {
    const size_t eq = word.find('=');
    if (eq == std::string::npos || eq == 0) {
      // A value with spaces (Reason=..., Comment=...): part of the last one.
      if (!out.empty()) out.back().second += " " + word;
      continue;
    }
    out.emplace_back(word.substr(0, eq), word.substr(eq + 1));
  }
  return out;
}

// "0-1,3" -> 0 1 3.
bool ParseIndexList(std::string_view text, std::vector<int>& out) {
  std::stringstream in{std::string(text)};
  std::string part;
  while (std::getline(in, part, ',')) {
    const size_t dash = part.find('-');
    try {
      const int first = std::stoi(part.substr(0, dash));
      const int last = dash == std::string::npos ? first : std::stoi(part.substr(dash + 1));
      if (last < first || last - first > 4096) return false;
      for (int i = first; i <= last; ++i) out.push_back(i);
    } catch (...) {
      return false;
    }
  }
  return true;
}

// The GPU indices in a GRES detail: "gpu:2(IDX:0-1)", "gpu:a100:1(IDX:3)",
// several types comma-separated.
std::vector<int> GpuIndices(std::string_view gres) {
  std::vector<int> out;
  size_t at = 0;
  while ((at = gres.find("gpu", at)) != std::string_view::npos) {
    const size_t idx = gres.find("(IDX:", at);
    if (idx == std::string_view::npos) break;
    const size_t close = gres.find(')', idx);
    if (close == std::string_view::npos) break;
    ParseIndexList(gres.substr(idx + 5, close - idx - 5), out);
    at = close;
  }
  return out;
}

}  // namespace

Result<QueueState> ParseSqueue(std::string_view output) {
  const std::string_view line = Trim(output.substr(0, output.find('\n')));
  if (line.empty()) return QueueState{};
  const size_t bar = line.find('|');
  if (bar == std::string_view::npos) {
    return Status::Error("unexpected squeue answer: " + QuoteValue(line));
  }
  return QueueState{std::string(Trim(line.substr(0, bar))), std::string(Trim(line.substr(bar + 1)))};
}

std::string ShowJobLine(const std::string& id) { return "scontrol -o show job -d " + ShellQuote(id); }

Result<JobInfo> ParseShowJob(std::string_view output) {
  const std::string_view line = Trim(output.substr(0, output.find('\n')));
  JobInfo info;
  bool seen_id = false;
  // -d's per-node details: "Nodes=h[1-2] CPU_IDs=0-1 Mem=0 GRES=gpu:2(IDX:0-1)",
  // one group per set of nodes that got the same; at most kMaxHostlistNames
  // names in all (as in one hostlist: a broken slurmctld must not fill the
  // controller's memory).
  std::vector<std::pair<std::vector<std::string>, JobNode>> details;
  size_t detail_names = 0;
  for (const auto& [key, value] : Fields(line)) {
    if (key == "JobId") seen_id = true;
    if (key == "JobState") info.state = value;
    if (key == "Reason") info.reason = value;
    if (key == "Partition") info.partition = value;
    if (key == "NodeList") info.node_list = value;
    if (key == "Nodes") {
      Result<std::vector<std::string>> names = ExpandHostlist(value);
      if (!names.ok()) return names.status();
      detail_names += names->size();
      if (detail_names > kMaxHostlistNames) {
        return Status::Error("unexpected scontrol answer: more than " + std::to_string(kMaxHostlistNames) +
                             " names in its per-node details");
      }
      details.emplace_back(std::move(*names), JobNode{});
      continue;
    }
    if (details.empty()) continue;
    JobNode& got = details.back().second;
    if (key == "GRES") got.gpus = GpuIndices(value);
    if (key == "CPU_IDs") {
      std::vector<int> ids;
      if (ParseIndexList(value, ids)) got.cpus = static_cast<int>(ids.size());
    }
    if (key == "Mem") {
      try {
        got.mem_mb = std::stoll(value);
      } catch (...) {
        got.mem_mb = 0;
      }
    }
  }
  if (!seen_id) return Status::Error("unexpected scontrol answer: " + QuoteValue(line));
  if (!info.node_list.empty() && info.node_list != "(null)") {
    Result<std::vector<std::string>> names = ExpandHostlist(info.node_list);
    if (!names.ok()) return names.status();
    // Each node's details, by name (the last group naming it), looked up
    // once per node: a NodeList and details of 100000 names each must not
    // cost 10^10 comparisons.
    std::map<std::string_view, const JobNode*> got_by_name;
    for (const auto& [group, got] : details) {
      for (const std::string& name : group) got_by_name[name] = &got;
    }
    for (const std::string& name : *names) {
      auto it = got_by_name.find(name);
      JobNode node = it == got_by_name.end() ? JobNode{} : *it->second;
      node.name = name;
      info.nodes.push_back(std::move(node));
    }
  }
  return info;
}

std::string ShowNodesLine(const std::string& names) { return "scontrol -o show node " + ShellQuote(names); }

Result<std::map<std::string, std::string>> ParseNodeAddresses(std::string_view output) {
  std::map<std::string, std::string> out;
  std::istringstream in{std::string(output)};
  std::string line;
  while (std::getline(in, line)) {
    if (Trim(line).empty()) continue;
    std::string name, addr;
    for (const auto& [key, value] : Fields(line)) {
      if (key == "NodeName" && name.empty()) name = value;
      if (key == "NodeAddr" && addr.empty()) addr = value;
    }
    if (name.empty() || addr.empty()) {
      return Status::Error("unexpected scontrol answer: " + QuoteValue(line));
    }
    out[name] = addr;
  }
  return out;
}

std::string SrunLine(const std::string& id, const std::string& node) {
  return "srun --jobid=" + ShellQuote(id) + " --overlap --nodes=1 --ntasks=1 --nodelist=" + ShellQuote(node) +
         " --chdir=/ --unbuffered --quiet /bin/sh -c " + ShellQuote(kSrunStepProgram);
}

std::string SrunStdinLine(std::string_view line) {
  std::string out;
  out.reserve(line.size() + 1);
  for (const char ch : line) {
    const auto byte = static_cast<unsigned char>(ch);
    if (byte >= 0x20 && byte < 0x7f && byte != '\\') {
      out += ch;
      continue;
    }
    char escaped[8];
    std::snprintf(escaped, sizeof escaped, "\\0%03o", static_cast<unsigned>(byte));
    out += escaped;
  }
  out += '\n';
  return out;
}

std::string ScancelLine(const std::string& id) { return "scancel " + ShellQuote(id); }

std::string DrainCommand(const std::string& node, const std::string& reason) {
  return "scontrol update nodename=" + ShellQuote(node) + " state=drain reason=" + ShellQuote(reason);
}

Result<std::vector<std::string>> ExpandHostlist(std::string_view list) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < list.size()) {
    // One item: up to a comma outside brackets.
    size_t end = i;
    int depth = 0;
    while (end < list.size() && (depth > 0 || list[end] != ',')) {
      if (list[end] == '[') ++depth;
      if (list[end] == ']') --depth;
      if (depth < 0 || depth > 1) return Status::Error("cannot read hostlist " + QuoteValue(list));
      ++end;
    }
    if (depth != 0) return Status::Error("cannot read hostlist " + QuoteValue(list) + ": a '[' does not close");
    const std::string_view item = list.substr(i, end - i);
    const size_t open = item.find('[');
    if (open == std::string_view::npos) {
      if (out.size() >= kMaxHostlistNames) {
        return Status::Error("cannot read hostlist: more than " + std::to_string(kMaxHostlistNames) + " names");
      }
      if (!item.empty()) out.emplace_back(item);
    } else {
      const size_t close = item.find(']', open);
      const std::string prefix(item.substr(0, open));
      const std::string suffix(item.substr(close + 1));
      if (suffix.find('[') != std::string::npos) {
        return Status::Error("cannot read hostlist " + QuoteValue(list) + ": one bracket per name only");
      }
      std::stringstream ranges{std::string(item.substr(open + 1, close - open - 1))};
      std::string range;
      while (std::getline(ranges, range, ',')) {
        const size_t dash = range.find('-');
        const std::string first = range.substr(0, dash);
        const std::string last = dash == std::string::npos ? first : range.substr(dash + 1);
        auto digits = [](const std::string& s) {
          return !s.empty() && s.size() < 10 &&
                 std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c); });
        };
        if (!digits(first) || !digits(last)) {
          return Status::Error("cannot read hostlist " + QuoteValue(list) + ": bad range " + QuoteValue(range));
        }
        const long a = std::stol(first), b = std::stol(last);
        if (b < a || b - a > 100000) {
          return Status::Error("cannot read hostlist " + QuoteValue(list) + ": bad range " + QuoteValue(range));
        }
        if (out.size() + static_cast<size_t>(b - a + 1) > kMaxHostlistNames) {
          return Status::Error("cannot read hostlist " + QuoteValue(list) + ": more than " +
                               std::to_string(kMaxHostlistNames) + " names");
        }
        const size_t width = first.size();
        for (long n = a; n <= b; ++n) {
          std::string number = std::to_string(n);
          if (number.size() < width) number.insert(0, width - number.size(), '0');
          out.push_back(prefix + number + suffix);
        }
      }
    }
    i = end + 1;
  }
  return out;
}

}  // namespace barge::runner::slurm
