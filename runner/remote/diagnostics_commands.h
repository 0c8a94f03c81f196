// The diagnostics bundle's questions to a host (runner/controller/
// diagnostics.h collects them when an attempt failed, before its teardown)
// and the reading of the answers. Each script prints its sections under
// "=== TITLE" lines, every step under its own timeout (where the host has
// timeout(1)) and every section cut at its byte cap on the host, so that
// one hung or verbose step neither holds up nor crowds out the others.
//
// Per node (ContainerDiagnosticsScript), on the node's host:
//   "docker inspect"  the container's state and exit, as the engine has it
//   "processes"       `docker top C -eo pid,stat,wchan:32,etime,args`: each
//                     process of the container (host PIDs) with its state
//                     (D: uninterruptible, the usual hang) and the kernel
//                     function it waits in
//   "kernel stacks"   /proc/PID/stack of the first kMaxStackPids of them,
//                     where the SSH user may read it (root), else a line
//                     saying it is not readable
// Per host (HostDiagnosticsScript):
//   "kernel log"      the kernel's lines since the job began (dmesg with the
//                     boot-relative stamps compared to /proc/uptime, else
//                     the kernel journal since then), the last
//                     kKernelLogLines; "unreadable: WHY" where the SSH user
//                     may not read it (dmesg_restrict); "(no kernel line
//                     since then)" where there is none
//   "nvidia-smi -q"   only where the job has GPUs on that host
//   "disk"            `df -h` of the engine's root directory and of the
//                     job's directory there (its parent while it is not made)
//   "memory"          `free -m`, then /proc/pressure/{cpu,memory,io} where
//                     the kernel has them
// Nothing here changes anything on the host.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "runner/remote/docker_commands.h"

namespace barge::runner::diagnostics {

// Host-side caps, in bytes: one section's output, one process's kernel
// stack; how many processes get their stack read; kernel-log lines kept.
inline constexpr size_t kSectionCap = 64 * 1024;
inline constexpr size_t kStackCap = 4 * 1024;
inline constexpr int kMaxStackPids = 16;
inline constexpr int kKernelLogLines = 1000;
// The section headers' prefix.
inline constexpr std::string_view kSectionPrefix = "=== ";

// The node's questions about its container `name`; each step killed after
// `step` (at least 1 s).
std::string ContainerDiagnosticsScript(const DockerCommands& docker, const std::string& name,
                                       std::chrono::seconds step);

// The host's questions. `since_epoch_s`: when the job began (the
// controller's clock, in seconds since the epoch; the host compares it to
// its own, so the caller gives some slack for clock skew). `job_dir`: the
// job's directory there ("" when not known: then /tmp's disk). `gpus`:
// whether the job has GPUs on the host (nvidia-smi -q is asked only then).
std::string HostDiagnosticsScript(const DockerCommands& docker, const std::string& job_dir,
                                  int64_t since_epoch_s, bool gpus, std::chrono::seconds step);

// `text` with every line in the NVIDIA driver's Xid format (gpu_health.h's
// kXidLinePattern: what the host's kernel log section holds) prefixed by
// kXidMark; `*count` (when given) gets how many.
inline constexpr std::string_view kXidMark = "XID>> ";
std::string MarkXidLines(std::string_view text, int* count = nullptr);

// From a ContainerDiagnosticsScript answer: its processes that are stopped
// (state T: SIGSTOP, a debugger), in uninterruptible sleep (D: the kernel,
// a driver, a dead file system) or zombies (Z), one line each ("pid 4242
// stopped (T): python3 train.py"): where a hang is to be looked for first.
std::vector<std::string> StuckProcesses(std::string_view answer);

// `text` cut to at most `cap` bytes (the cut taken back to a line's end
// where one is in the last quarter), with a last line saying how much was
// left out; `text` itself when it fits.
std::string CapText(std::string text, size_t cap);

// A host's or a node's name as a file name: what is not [A-Za-z0-9._-]
// becomes '_'.
std::string FileNamePart(std::string_view name);

}  // namespace barge::runner::diagnostics
