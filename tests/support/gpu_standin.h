// The engine-side GPU stand-in (tests/bed/gpu-standin.sh) on one namespace
// bed host for a test's lifetime: while it lives, that host's real dockerd
// accepts `--gpus` and DeviceRequests as they are, and every GPU container
// it starts is recorded as the engine received it (its stored
// HostConfig.DeviceRequests, what `docker inspect` shows; the
// NVIDIA_VISIBLE_DEVICES the engine derived). Containers start without a
// GPU; a stand-in `nvidia-smi -L` inside lists the visible ones. Turning it
// on or off restarts that host's dockerd (about a second or two each) and
// refuses to start while the engine runs a container. Not thread-safe; one
// per host at a time. Header-only: tests/support/ targets need no change.
//
//   barge::testing::GpuStandin gpus(bed.hosts[0]);
//   ASSERT_EQ(gpus.error(), "");
//   ... run a job on bed.hosts[0] (no docker shim needed) ...
//   for (const auto& r : gpus.Requests()) r.container, r.device_requests ...
//   // the destructor restores the host's dockerd as it was, failure included
#pragma once

#include <sstream>
#include <string>
#include <vector>

#include "tests/support/bed_env.h"

namespace barge::testing {

// One GPU container the engine started while the stand-in was on.
struct GpuRequest {
  std::string container;        // its name (a probe's is Docker's own)
  std::string visible_devices;  // "1", "0,1", "all"
  std::string device_requests;  // HostConfig.DeviceRequests, the engine's JSON
};

class GpuStandin {
 public:
  // Turns the stand-in on for `host` (a namespace host, "h1"..) with `gpus`
  // GPUs for "all". error() says why not; the destructor undoes a partial
  // start too.
  explicit GpuStandin(const BedHost& host, int gpus = 2) : host_(host) {
    int code = -1;
    const std::string out = RunShell(Script() + " on " + host_.name + " " + std::to_string(gpus) + " 2>&1", &code);
    if (code != 0) error_ = out.empty() ? "gpu-standin.sh on failed" : out;
  }
  ~GpuStandin() { Off(); }
  GpuStandin(const GpuStandin&) = delete;
  GpuStandin& operator=(const GpuStandin&) = delete;

  const std::string& error() const { return error_; }

  // Restores the host's dockerd as it was; "" or what went wrong. Safe to
  // call again (the destructor does).
  std::string Off() {
    if (off_) return "";
    off_ = true;
    int code = -1;
    const std::string out = RunShell(Script() + " off " + host_.name + " 2>&1", &code);
    return code == 0 ? "" : out;
  }

  // Every GPU container the engine started so far, in order.
  std::vector<GpuRequest> Requests() const {
    std::vector<GpuRequest> out;
    std::istringstream in(RunShell(Script() + " requests " + host_.name));
    for (std::string line; std::getline(in, line);) {
      GpuRequest r;
      const size_t a = line.find('\t');
      const size_t b = a == std::string::npos ? a : line.find('\t', a + 1);
      if (b == std::string::npos) continue;
      r.container = line.substr(0, a);
      r.visible_devices = line.substr(a + 1, b - a - 1);
      r.device_requests = line.substr(b + 1);
      out.push_back(std::move(r));
    }
    return out;
  }

 private:
  // tests/bed/gpu-standin.sh beside the bed.sh that made the bed.
  std::string Script() const {
    const Bed& bed = GetBed();
    std::string bed_sh = bed.raw.at("BED_SCRIPT");
    return "BARGE_BED_DIR=" + bed.dir + " " + bed_sh.substr(0, bed_sh.rfind('/') + 1) + "gpu-standin.sh";
  }

  BedHost host_;
  std::string error_;
  bool off_ = false;
};

}  // namespace barge::testing
