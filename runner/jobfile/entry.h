// What the job file's readers read (internal to runner/jobfile/): the
// source a value comes from and the entry (key, value, path) an error about
// it names, and the cap on the nodes of one document.
#pragma once

#include <yaml-cpp/yaml.h>

#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "runner/jobfile/job_file.h"
#include "runner/jobfile/job_values.h"

namespace barge::runner::jobfile {

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

inline std::string TypeName(const YAML::Node& n) {
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

inline std::string JoinWords(std::span<const std::string_view> words, std::string_view last_sep) {
  std::string out;
  for (size_t i = 0; i < words.size(); ++i) {
    if (i > 0) out += i + 1 == words.size() ? last_sep : std::string_view(", ");
    out += words[i];
  }
  return out;
}

}  // namespace barge::runner::jobfile
