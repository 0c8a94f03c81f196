#include "runner/remote/shared_lists.h"

#include <map>

#include "ssh/quote.h"

namespace barge::runner {
namespace {

// The elements of a comma list, or nothing when `v` is not one (see the
// header): what the shell's field splitting on IFS=, gives back exactly.
bool SplitCommaList(const std::string& v, std::vector<std::string>* out) {
  out->clear();
  size_t start = 0;
  while (true) {
    size_t end = v.find(',', start);
    std::string item = v.substr(start, end == std::string::npos ? std::string::npos : end - start);
    if (item.empty() || item.find_first_of("\"\\\n") != std::string::npos) return false;
    out->push_back(std::move(item));
    if (end == std::string::npos) return true;
    start = end + 1;
  }
}

std::string JoinNewlines(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& i : items) out += (out.empty() ? "" : "\n") + i;
  return out;
}

std::string JsonList(const std::vector<std::string>& items) {
  std::string out = "[";
  for (size_t i = 0; i < items.size(); ++i) out += (i ? ",\"" : "\"") + items[i] + "\"";
  return out + "]";
}

struct Base {
  std::string comma, newlines, json;
  int uses = 0;
  bool derived = false;  // the newline or JSON form is used
};

}  // namespace

std::string ShellJoinSharingLists(const std::vector<std::string>& argv, size_t min_size) {
  // Which argv words are long -e values, and how often each value occurs.
  std::map<std::string, int> count;
  for (size_t i = 1; i < argv.size(); ++i) {
    if (argv[i - 1] != "-e") continue;
    size_t eq = argv[i].find('=');
    if (eq == std::string::npos || argv[i].size() - eq - 1 < min_size) continue;
    ++count[argv[i].substr(eq + 1)];
  }
  if (count.empty()) return ssh::ShellJoin(argv);

  std::vector<Base> bases;
  std::vector<std::string> items;
  for (const auto& [value, n] : count) {
    if (SplitCommaList(value, &items)) bases.push_back({value, JoinNewlines(items), JsonList(items)});
  }
  // A value's spelling: "$barge_lK" (the list), "$barge_nK" (newlines),
  // "$barge_jK" (JSON) or "$barge_vK" (any other repeated value).
  std::map<std::string, std::string> ref;
  std::map<std::string, std::string> others;  // value -> variable
  for (const auto& [value, n] : count) {
    bool found = false;
    for (size_t k = 0; k < bases.size() && !found; ++k) {
      Base& b = bases[k];
      const std::string id = std::to_string(k + 1);
      if (value == b.comma) ref[value] = "barge_l" + id;
      else if (value == b.newlines) ref[value] = "barge_n" + id, b.derived = true;
      else if (value == b.json) ref[value] = "barge_j" + id, b.derived = true;
      else continue;
      b.uses += n;
      found = true;
    }
    if (!found && n > 1) {
      ref[value] = others[value] = "barge_v" + std::to_string(others.size() + 1);
    }
  }
  // A list spelled once stays inline: a variable would not save anything.
  for (size_t k = 0; k < bases.size(); ++k) {
    if (bases[k].uses < 2) {
      for (const std::string* v : {&bases[k].comma, &bases[k].newlines, &bases[k].json}) ref.erase(*v);
      bases[k].uses = 0;
    }
  }
  if (ref.empty()) return ssh::ShellJoin(argv);

  std::string line;
  bool derives = false;
  for (size_t k = 0; k < bases.size(); ++k) {
    if (bases[k].uses == 0) continue;
    line += "barge_l" + std::to_string(k + 1) + "=" + ssh::ShellQuote(bases[k].comma) + "; ";
    derives |= bases[k].derived;
  }
  for (const auto& [value, var] : others) line += var + "=" + ssh::ShellQuote(value) + "; ";
  if (derives) {
    // Field splitting on commas (no globbing) gives the elements back; the
    // loops join them again. Only shell builtins: no process is started.
    line += "barge_nl='\n'; set -f; ";
    for (size_t k = 0; k < bases.size(); ++k) {
      if (bases[k].uses == 0 || !bases[k].derived) continue;
      const std::string id = std::to_string(k + 1);
      const std::string n = "barge_n" + id, j = "barge_j" + id;
      line += "IFS=,; set -- $barge_l" + id + "; unset IFS; " + n + "=; " + j + "=; for barge_a; do " +
              n + "=\"$" + n + "${" + n + ":+$barge_nl}$barge_a\"; " + j + "=\"$" + j + "${" + j +
              ":+,}\\\"$barge_a\\\"\"; done; " + j + "=\"[$" + j + "]\"; ";
    }
    line += "set +f; set --; ";
  }
  for (size_t i = 0; i < argv.size(); ++i) {
    if (i) line += ' ';
    if (i == 0) {
      line += ssh::ShellJoin({argv[0]});
      continue;
    }
    size_t eq = argv[i].find('=');
    auto r = argv[i - 1] == "-e" && eq != std::string::npos ? ref.find(argv[i].substr(eq + 1)) : ref.end();
    if (r == ref.end()) {
      line += ssh::ShellQuote(argv[i]);
    } else {
      line += ssh::ShellQuote(argv[i].substr(0, eq + 1)) + "\"$" + r->second + "\"";
    }
  }
  return line;
}

}  // namespace barge::runner
