// Fuzz target for what Slurm's client commands answer (runner/remote/slurm.h):
// ParseSqueue, ParseShowJob (`scontrol -o show job -d`), ParseNodeAddresses
// (`scontrol -o show node`), JobIdInSalloc and ExpandHostlist, every one on
// every input (the whole input is the command's output; ExpandHostlist
// reads its first line), so that the real outputs in tests/data/slurm-22.05
// seed them all unedited.
//
// Checks, besides "never crashes" and the sanitizers:
//   - squeue: state and reason are trimmed, on one line, the state without
//     '|'; "STATE|REASON" written back reads the same;
//   - scontrol show job: at most kMaxHostlistNames nodes; up to 1000, they
//     are NodeList expanded, in order, CPU counts and GPU indices not
//     negative;
//   - scontrol show node: every name and address is there, on one line;
//   - salloc: the job id is digits that follow "job allocation ";
//   - hostlists: at most kMaxHostlistNames names, none empty or holding
//     ',', '[' or ']'; the names joined by ',' expand to themselves (up to
//     1000 names, to keep each run short); and a
//     hostlist built from the input's bytes (prefixes, zero-padded ranges,
//     suffixes) expands to exactly the names it stands for;
//   - every refusal's message is short and has no control bytes.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runner/remote/slurm.h"
#include "tests/fuzz/fuzz_checks.h"

namespace {

namespace slurm = barge::runner::slurm;

constexpr char kTarget[] = "slurm_text_fuzz";
// The longest refusal: two values quoted (QuoteValue: 60 bytes shown, a
// control byte as \xNN).
constexpr size_t kMaxMessage = 600;

void Check(bool ok, const char* what, std::string_view detail = {}) {
  if (!ok) barge::fuzz::Fail(kTarget, what, detail);
}

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

bool Trimmed(std::string_view s) { return s.empty() || (!IsSpace(s.front()) && !IsSpace(s.back())); }

bool OneLine(std::string_view s) { return s.find('\n') == std::string_view::npos; }

void CheckSqueue(std::string_view text) {
  auto parsed = slurm::ParseSqueue(text);
  if (!parsed.ok()) return barge::fuzz::CheckMessage(kTarget, parsed.status().message(), kMaxMessage);
  const slurm::QueueState& q = *parsed;
  Check(Trimmed(q.state) && Trimmed(q.reason), "squeue: a field not trimmed", q.state + "|" + q.reason);
  Check(q.state.find('|') == std::string::npos, "squeue: a state holding '|'", q.state);
  Check(q.state.find('\n') == std::string::npos && q.reason.find('\n') == std::string::npos,
        "squeue: a field holding a newline");
  if (q.state.empty() && q.reason.empty()) return;
  auto again = slurm::ParseSqueue(q.state + "|" + q.reason + "\n");
  Check(again.ok() && again->state == q.state && again->reason == q.reason, "squeue: reads back otherwise",
        q.state + "|" + q.reason);
}

void CheckShowJob(std::string_view text) {
  auto parsed = slurm::ParseShowJob(text);
  if (!parsed.ok()) return barge::fuzz::CheckMessage(kTarget, parsed.status().message(), kMaxMessage);
  const slurm::JobInfo& info = *parsed;
  Check(info.nodes.size() <= slurm::kMaxHostlistNames, "show job: too many nodes");
  if (info.nodes.size() > 1000) return;  // the checks below, for lists that cost little
  std::vector<std::string> expected;
  if (!info.node_list.empty() && info.node_list != "(null)") {
    auto names = slurm::ExpandHostlist(info.node_list);
    Check(names.ok(), "show job: a NodeList that does not expand alone", info.node_list);
    expected = *names;
  }
  Check(info.nodes.size() == expected.size(), "show job: not one node per NodeList name", info.node_list);
  for (size_t i = 0; i < info.nodes.size(); ++i) {
    const slurm::JobNode& n = info.nodes[i];
    Check(n.name == expected[i], "show job: the nodes are not NodeList's, in order", n.name);
    Check(n.cpus >= 0, "show job: a negative CPU count");
    for (int g : n.gpus) Check(g >= 0, "show job: a negative GPU index");
  }
}

void CheckNodeAddresses(std::string_view text) {
  auto parsed = slurm::ParseNodeAddresses(text);
  if (!parsed.ok()) return barge::fuzz::CheckMessage(kTarget, parsed.status().message(), kMaxMessage);
  // (Not one word each: like every value of scontrol's one-line form, a
  // NodeAddr takes in the words without '=' that follow it.)
  for (const auto& [name, address] : *parsed) {
    Check(!name.empty() && OneLine(name), "show node: an empty name or one on two lines", name);
    Check(!address.empty() && OneLine(address), "show node: an empty address or one on two lines", address);
  }
}

void CheckSalloc(std::string_view text) {
  const std::optional<std::string> id = slurm::JobIdInSalloc(text);
  if (!id) return;
  Check(!id->empty() && std::all_of(id->begin(), id->end(), [](char c) { return c >= '0' && c <= '9'; }),
        "salloc: a job id that is not digits", *id);
  Check(text.find("job allocation " + *id) != std::string_view::npos, "salloc: an id salloc did not say", *id);
}

void CheckHostlist(std::string_view list) {
  auto names = slurm::ExpandHostlist(list);
  if (!names.ok()) return barge::fuzz::CheckMessage(kTarget, names.status().message(), kMaxMessage);
  Check(names->size() <= slurm::kMaxHostlistNames, "hostlist: too many names");
  if (names->size() > 1000) return;  // the round trip below, for lists that cost little
  std::string joined;
  for (const std::string& n : *names) {
    Check(!n.empty() && n.find_first_of(",[]") == std::string::npos, "hostlist: a bad name", n);
    joined += (joined.empty() ? "" : ",") + n;
  }
  auto again = slurm::ExpandHostlist(joined);
  Check(again.ok() && *again == *names, "hostlist: the names do not expand to themselves", joined);
}

// Bytes in turn, 0 once they run out.
struct Bytes {
  const uint8_t* p;
  size_t n;
  unsigned Next() {
    if (n == 0) return 0;
    --n;
    return *p++;
  }
};

std::string Padded(long n, size_t width) {
  std::string s = std::to_string(n);
  if (s.size() < width) s.insert(0, width - s.size(), '0');
  return s;
}

// A hostlist built from `bytes` and the names it stands for.
void CheckBuiltHostlist(Bytes bytes) {
  static constexpr char kNameChars[] = "abn-._7";
  std::string list;
  std::vector<std::string> expected;
  const unsigned items = 1 + bytes.Next() % 3;
  for (unsigned i = 0; i < items; ++i) {
    std::string prefix;
    for (unsigned c = 1 + bytes.Next() % 3; c > 0; --c) prefix += kNameChars[bytes.Next() % (sizeof kNameChars - 1)];
    list += (i ? "," : "") + prefix;
    if (bytes.Next() % 2 == 0) {
      expected.push_back(prefix);
      continue;
    }
    const size_t width = 1 + bytes.Next() % 4;
    const std::string suffix = bytes.Next() % 2 ? "-ib" : "";
    std::string ranges;
    for (unsigned r = 1 + bytes.Next() % 3; r > 0; --r) {
      const long a = bytes.Next() % 120, b = a + bytes.Next() % 6;
      const std::string first = Padded(a, width);
      ranges += (ranges.empty() ? "" : ",") + first + (a == b ? "" : "-" + Padded(b, width));
      for (long n = a; n <= b; ++n) expected.push_back(prefix + Padded(n, first.size()) + suffix);
    }
    list += "[" + ranges + "]" + suffix;
  }
  auto names = slurm::ExpandHostlist(list);
  Check(names.ok(), "hostlist: a well-formed list is refused", list);
  Check(*names == expected, "hostlist: a well-formed list expands to other names", list);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  CheckSqueue(text);
  CheckShowJob(text);
  CheckNodeAddresses(text);
  CheckSalloc(text);
  CheckHostlist(text.substr(0, text.find('\n')));
  CheckBuiltHostlist(Bytes{data, size});
  return 0;
}
