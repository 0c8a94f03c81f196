// What one container should look like, in Docker's own vocabulary.
//
// ContainerOptions is the `container:` block of a job file as the user wrote
// it. Every field is optional so that blocks can be layered: job-wide, then
// per role, then per host (see Merge). ContainerSpec is the fully resolved
// container of one node.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace barge::container {

using KeyValues = std::vector<std::pair<std::string, std::string>>;

struct ContainerOptions {
  std::optional<std::string> shm_size;  // "1g", passed through as written
  std::optional<std::vector<std::string>> cap_add;
  // Docker's --gpus value as it goes on the command line: "all", "2",
  // or "\"device=0,1\"" (the double quotes are part of the value).
  std::optional<std::string> gpus;
  std::optional<std::string> ipc;
  std::optional<std::string> network;
  std::optional<std::string> memory;  // --memory, e.g. "512m"
  // --cpus: how many CPUs' worth of time the container may use, a decimal
  // as Docker takes it ("2", "1.5").
  std::optional<std::string> cpus;
  // name -> "soft[:hard]" as docker's --ulimit takes it, e.g. {"stack", "67108864"}.
  std::optional<KeyValues> ulimits;
  std::optional<std::vector<std::string>> devices;
  std::optional<std::vector<std::string>> volumes;
  std::optional<KeyValues> env;
  // Free-form extra `docker run` arguments, placed before the image.
  std::optional<std::vector<std::string>> run_options;
};

// ContainerOptions::cpus in billionths of a CPU (the Engine API's
// NanoCpus): digits, optionally "." and at most 9 more (Docker refuses
// finer ones), above zero: "1.5" = 1500000000. nullopt for anything else
// (the job file refuses it). Inline: the job file reader links no container
// library.
inline std::optional<int64_t> NanoCpus(std::string_view text) {
  const size_t dot = text.find('.');
  const std::string_view whole = text.substr(0, dot);
  const std::string_view frac = dot == std::string_view::npos ? std::string_view() : text.substr(dot + 1);
  auto digits = [](std::string_view s) {
    return !s.empty() && s.size() <= 9 && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
  };
  if (!digits(whole) || (dot != std::string_view::npos && !digits(frac))) return std::nullopt;
  int64_t n = std::stoll(std::string(whole)) * 1000000000LL;
  if (!frac.empty()) n += std::stoll(std::string(frac) + std::string(9 - frac.size(), '0'));
  if (n <= 0) return std::nullopt;
  return n;
}

// Layers `over` on top of `base`: scalars and lists in `over` replace those
// in `base`; the maps (env, ulimits) merge key by key, `over` winning.
ContainerOptions Merge(const ContainerOptions& base, const ContainerOptions& over);

struct ContainerSpec {
  std::string name;   // docker --name; unique per job and rank
  std::string image;  // reference as written in the job file
  KeyValues labels;   // barge.job, barge.role, barge.rank, ...
  // Full environment: rendezvous variables first, then the user's env.
  KeyValues env;
  ContainerOptions options;
  // Empty optional = the image's own CMD. The image's ENTRYPOINT is kept.
  std::optional<std::vector<std::string>> command;
};

}  // namespace barge::container
