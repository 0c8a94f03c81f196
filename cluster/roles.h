// Roles of a Ray-like job: one head (rank 0) and workers.
#pragma once

#include "cluster/conventions.h"

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "container/container_spec.h"

namespace barge::cluster {

inline constexpr const char* kHeadRole = "head";
inline constexpr const char* kWorkerRole = "worker";

// How barge decides that the head is ready for workers to start.
struct ReadinessProbe {
  enum class Kind { kRunning, kTcpPort, kLog, kCommand };
  Kind kind = Kind::kRunning;
  int tcp_port = 0;         // kTcpPort
  std::string log_regex;    // kLog: ECMAScript regex matched against each line
  std::string command;      // kCommand: run inside the head container; ready on exit 0
  std::chrono::milliseconds timeout{std::chrono::seconds(120)};
  // What messages say is awaited; empty: told from the kind and its value.
  std::string description;
};

struct RoleSpec {
  std::optional<std::string> image;                  // overrides the job's image
  std::optional<std::vector<std::string>> command;   // overrides the job's command
  container::ContainerOptions container;             // merged over the job's
  // Workers only: how many; nullopt = "rest" (every node left after the head).
  std::optional<int> count;
  ReadinessProbe ready;  // head only
};

struct RendezvousOptions {
  int port = 29500;
  // Conventions whose variable names are injected; default: all of them.
  std::vector<std::string> conventions = AllConventions();
};

}  // namespace barge::cluster
