// A host's whole preflight as one remote shell script, and the reading of
// its reply: one SSH channel, one login shell and as few Docker CLI calls as
// the checks need (one `image inspect` per image; `docker version` only when
// an inspect failed, to tell "no engine" from "no image").
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runner/remote/docker_commands.h"

namespace barge::runner {

// Which of a host's checks one script runs. kAll: every check in one round
// trip (the Docker CLI's way). Where the Engine API may answer instead, the
// host's own checks come first (kHost: the watchdog, the disk the job's
// directory is on, ports, GPUs, the socket) and the engine's afterwards,
// through the API; kEngine is the script for the engine's part where the
// API cannot be reached (the hold, the images, the engine, the disk of the
// engine's storage).
enum class PreflightPart { kAll, kHost, kEngine };

// What one host's preflight checks.
struct PreflightChecks {
  PreflightPart part = PreflightPart::kAll;
  std::vector<std::string> images;  // `image inspect`ed, in this order
  // image_pull: always: the images are pulled afterwards, one command each;
  // the script then only checks that the engine answers.
  bool pull_always = false;
  std::optional<std::string> gpu_probe;  // a command line (DockerCommands::GpuProbe)
  // The GPU health gate's sections (gpu::GpuHealthLines); "" = none.
  std::string gpu_health;
  // The host's IPv4 interfaces (section "iface", InterfacesCommand): a node
  // there is on the host's network.
  bool interfaces = false;
  // The host's RDMA devices and HCA ports (section "ib", rdma::RdmaCommand).
  bool rdma = false;
  bool tcp_tables = false;               // /proc/net/tcp{,6} (the head's host)
  std::string arm_watchdog;              // a command line (ArmWatchdogCommand)
  // The job's holds on the host (TakeHoldsScript); empty = none.
  std::string hold;
  // Each Docker CLI call runs under `timeout -s KILL engine_timeout` (where
  // the host has `timeout`) and is tried again after a timeout, up to
  // engine_misses tries in all.
  std::chrono::milliseconds engine_timeout{std::chrono::seconds(20)};
  int engine_misses = 3;
  // Where the Docker CLI's engine listens, for the Engine API (section
  // "socket"): only meaningful when the job's docker command is plain
  // `docker`.
  bool engine_socket = false;
};

// The engine's unix socket path from a "socket" section's text; nullopt
// when the CLI's engine is not a plain unix socket (a tcp:// or ssh://
// DOCKER_HOST, a Docker context), so the CLI must be used.
std::optional<std::string> EngineSocketOf(std::string_view section_text);

// The script: POSIX sh, run by the login shell. Its first output line is
// the POSIX-shell probe's answer; then one section per check, each
// "@@barge{ NAME", the check's merged stdout and stderr, and
// "@@barge} NAME EXIT". Section names: "watchdog", "hold" (with a hold
// script, run in a subshell), "image0", "image1", ...,
// "engine" (only when an image inspect failed, or with pull_always),
// "disk" (`df -Pk` of /tmp and of the first image's storage directory, or
// of / when no image is there), "ports", "gpu", the GPU health gate's
// "gpuq", "gpurm", "gpuxid" (runner/remote/gpu_health.h), "iface", "ib"
// (runner/remote/rdma.h), "socket". kHost leaves out
// the hold, the images and the engine, and its disk is /tmp's alone; kEngine
// has only those, and its disk is the storage directory's alone.
std::string PreflightScript(const DockerCommands& docker, const PreflightChecks& checks);

// The shell functions `bs NAME` and `be NAME EXIT` that open and close a
// section ParsePreflightReply reads; for every script whose reply is read
// that way (the preflight script, a hold taking, `barge hosts --gpus`).
std::string SectionMarkers();

struct PreflightSection {
  int exit = -1;
  std::string text;  // trailing newlines removed
  // Killed by its `timeout` on its last try (exit 137).
  bool timed_out() const { return exit == 137; }
};

struct PreflightReply {
  // The first line was the POSIX-shell probe's answer.
  bool posix_shell = false;
  std::string first_line;
  // Every section that ended (a section cut off by a dropped session is
  // missing).
  std::map<std::string, PreflightSection, std::less<>> sections;
  const PreflightSection* Find(std::string_view name) const;
};

PreflightReply ParsePreflightReply(std::string_view out);

// The image ID in a successful "image" section's text ("sha256:...
// /var/lib/docker/overlay2/.../diff": the first word of the last line; an
// earlier try that timed out may have left a line before it).
std::string ImageIdOf(std::string_view section_text);

}  // namespace barge::runner
