// push (image_pull: push, push-direct): `docker save` here once, then the
// tar relayed from host to host (ImageRelay: this machine sends it once)
// and, where the relay did not deliver it or with push-direct, streamed
// into `docker load` on each host that lacks the image, with bounded
// memory.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <sys/stat.h>
#include <vector>

#include "runner/controller/image_relay.h"
#include "runner/controller/job_state.h"
#include "runner/controller/preflight.h"
#include "runner/remote/docker_commands.h"
#include "runner/store/state_dir.h"

namespace barge::runner::internal {
namespace {

// "1.02": `sent` in images of `size` bytes.
std::string Images(uint64_t sent, long long size) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", size > 0 ? static_cast<double>(sent) / static_cast<double>(size) : 0.0);
  return buf;
}

long long FileSize(const std::string& file) {
  struct stat st {};
  return ::stat(file.c_str(), &st) == 0 ? static_cast<long long>(st.st_size) : -1;
}

}  // namespace

void Preflight::Push(const std::string& image, const std::vector<HostState*>& targets,
                      std::map<size_t, std::vector<std::string>>* errors) {
  // Save once to a file, then stream it at the pace each channel takes it,
  // so memory stays bounded however big the image is.
  const std::string dir = ctx_.options.state_dir + "/tmp";
  if (Status s = MakeDirs(dir); !s.ok()) {
    for (HostState* t : targets) (*errors)[t->index].push_back(s.message());
    return;
  }
  const std::string file = dir + "/push-" + plan_.job_id + ".tar";
  Say("pushing " + image + " to " + std::to_string(targets.size()) + " host(s) (docker save | docker load)");
  SetStatus(JobStatus::kPushing, image + " to " + std::to_string(targets.size()) + " host(s)");
  const auto started = Now();
  CommandGroup group(&ctx_.loop, &ctx_.redact);
  const DockerCommands local_docker({"docker"});
  std::optional<Outcome> saved;
  group.Run(Local(), local_docker.Line({"save", "-o", file, image}), [&](const Outcome& o) { saved = o; });
  RunUntil([&] { return saved.has_value() || ctx_.interrupts > 0; }, Now() + seconds(1800));
  if (!saved || !saved->ok()) {
    std::string why = saved ? saved->Reason() : "interrupted or timed out";
    for (HostState* t : targets) {
      (*errors)[t->index].push_back("cannot push " + image + ": local docker save failed: " + why);
    }
    std::remove(file.c_str());
    return;
  }

  // The relay first; then this machine sends to every host it did not reach.
  uint64_t sent = 0;
  std::vector<HostState*> direct = targets;
  size_t relayed = 0;
  if (ctx_.spec.image_pull == ImagePull::kPush) {
    ImageRelay relay(&ctx_, &transfers_);
    const std::vector<HostState*> members = relay.Members(targets);
    if (!members.empty()) {
      ImageRelay::Delivery d = relay.Send(file, image, members);
      sent += d.bytes_sent;
      relayed = d.ids.size();
      for (const auto& [hs, id] : d.ids) hs->images.ids[image] = id;
      direct.clear();
      for (HostState* t : targets) {
        if (d.ids.count(t)) continue;
        direct.push_back(t);
        if (auto why = d.missed.find(t); why != d.missed.end()) {
          Say(t->name + ": the relay did not deliver " + image + " (" + why->second +
              "); this machine sends it directly");
        }
      }
    }
  }
  std::map<HostState*, Outcome> results;
  if (!direct.empty() && ctx_.interrupts == 0) {
    results = transfers_.StreamFile(
        file, direct, [](HostState& h) { return h.docker->Load(); }, Phase::kPush, "pushing " + image, &sent);
  }
  for (HostState* t : direct) {
    auto it = results.find(t);
    if (it == results.end() || !it->second.ok()) {
      (*errors)[t->index].push_back("pushing " + image + " failed: " +
                                    (it == results.end() ? "interrupted or timed out" : it->second.Reason()));
    }
  }
  const long long size = FileSize(file);
  std::remove(file.c_str());
  // What the hosts sent to directly now hold.
  for (HostState* hs : direct) {
    auto it = results.find(hs);
    if (it == results.end() || !it->second.ok()) continue;
    group.Run(*hs->exec, hs->docker->ImageId(image), [&, hs](const Outcome& o) {
      if (o.ok()) {
        hs->images.ids[image] = Trim(o.out);
      } else {
        (*errors)[hs->index].push_back("image " + image + " still missing after push: " + o.Reason());
      }
    });
  }
  RunUntil([&] { return group.idle(); }, Now() + seconds(120));
  double secs = std::chrono::duration<double>(Now() - started).count();
  char took[32];
  std::snprintf(took, sizeof took, "%.1f", secs);
  Say("pushed " + image + " to " + std::to_string(targets.size()) + " host(s) in " + took +
      " s; this machine sent " + std::to_string(sent) + " bytes of it (" + Images(sent, size) +
      " x the image's " + std::to_string(size) + "): " + std::to_string(relayed) + " host(s) by relay, " +
      std::to_string(direct.size()) + " directly");
}

}  // namespace barge::runner::internal
