// The key table of a job file block (internal to runner/jobfile/): a block's
// known keys as a table of KeyRule (what each key takes, for `barge schema`,
// and how it is read), Describe for the docs, and ReadMapping, which reads a
// mapping through its table. Adding a key to a block is one line in its
// table; each block family's table lives in its own file (blocks.h lists
// them).
#pragma once

#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "runner/jobfile/entry.h"
#include "runner/jobfile/job_keys.h"
#include "runner/jobfile/suggest.h"

namespace barge::runner::jobfile {

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

inline std::string UnknownMessage(const std::string& name, std::span<const std::string_view> known,
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

}  // namespace barge::runner::jobfile
