// What each job-file key takes: its type, default and description, declared
// once beside the key's reader in runner/jobfile/job_file.cc's key tables, and read
// from there by `barge schema` (runner/jobfile/job_schema.h).
#pragma once

#include <span>
#include <string_view>
#include <vector>

namespace barge::runner {

// The shape of a key's value as barge reads it. yaml-cpp hands barge every
// scalar as text, so a number or a boolean is read as what it spells:
// `port: "22"` is port 22 and `name: 7` is the name "7".
enum class KeyType {
  kString,      // any scalar
  kInteger,     // a whole number, or a string of one
  kBoolean,     // true or false
  kEnum,        // one of `choices`
  kSize,        // 512m, 2g, or a number of bytes
  kDuration,    // 10s, 5m, 1h30m, ...
  kCommand,     // a list of strings, or one string run with sh -c
  kStringList,  // a list of scalars
  kEnumList,    // a list of `choices`
  kStringMap,   // NAME: scalar (`choices`, when given, are the only names)
  kBlock,       // a mapping of the keys in `keys`
  kBlockList,   // a list of such mappings
  kBlockMap,    // NAME: mapping of the keys in `keys`
  kJson,        // anything else: `schema` is the value's JSON Schema
};

struct KeyInfo;
// The keys of a nested block.
using KeyTableFn = std::vector<KeyInfo> (*)();

struct KeyDoc {
  KeyType type = KeyType::kString;
  std::string_view description;
  std::string_view default_value = {};  // as written in a job file; "" = no default
  std::span<const std::string_view> choices = {};
  KeyTableFn keys = nullptr;  // kBlock, kBlockList, kBlockMap
  // kBlock or kBlockList: a lone scalar stands for the block's first key
  // (a host's address, workdir's path).
  bool scalar_too = false;
  bool required = false;        // the enclosing block needs this key
  std::string_view schema = {};  // kJson: JSON Schema text
};

struct KeyInfo {
  std::string_view key;
  KeyDoc doc;
};

// The keys of a job file's top level, in the order the tables list them.
std::vector<KeyInfo> JobFileKeys();

}  // namespace barge::runner
