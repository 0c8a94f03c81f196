// push (image_pull: push): `docker save` here once, then the tar streamed
// into `docker load` on every host that lacks the image, with bounded memory.
#include <chrono>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "runner/controller/job_state.h"
#include "runner/controller/preflight.h"
#include "runner/remote/docker_commands.h"
#include "runner/store/state_dir.h"

namespace barge::runner::internal {

void Preflight::Push(const std::string& image, const std::vector<HostState*>& targets,
                      std::map<size_t, std::vector<std::string>>* errors) {
  // Save once to a file, then stream it to each host at the pace its channel
  // takes it, so memory stays bounded however big the image is.
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

  std::map<HostState*, Outcome> results = transfers_.StreamFile(
      file, targets, [](HostState& h) { return h.docker->Load(); }, Phase::kPush, "pushing " + image);
  for (HostState* t : targets) {
    auto it = results.find(t);
    if (it == results.end() || !it->second.ok()) {
      (*errors)[t->index].push_back("pushing " + image + " failed: " +
                                    (it == results.end() ? "interrupted or timed out" : it->second.Reason()));
    }
  }
  std::remove(file.c_str());
  // What the hosts now hold.
  for (HostState* hs : targets) {
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
  Say("pushed " + image + " in " + took + " s");
}

}  // namespace barge::runner::internal
