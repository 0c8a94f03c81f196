// ImageRelay (image_relay.h): the tar once into the tree's root, each host
// passing it on; then what each member holds.
#include "runner/controller/image_relay.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "runner/controller/job_state.h"
#include "ssh/keygen.h"
#include "ssh/session.h"

namespace barge::runner::internal {

std::vector<HostState*> ImageRelay::Members(const std::vector<HostState*>& targets) {
  std::vector<HostState*> members;
  if (ctx_.spec.ssh.host_key_checking == ssh::HostKeyChecking::kOff) return members;
  for (HostState* hs : targets) {
    if (!hs->exec || hs->job_dir.empty() || hs->exec->reached_address().empty()) continue;
    Result<ssh::SessionLogin> login = ssh::LoginOf(hs->exec->channel_session());
    if (!login.ok()) continue;
    RelayPeer peer;
    peer.index = hs->index;
    peer.address = hs->exec->reached_address();
    peer.port = login->port;
    peer.user = login->user;
    peer.host_key = login->host_key;
    peers_[hs] = std::move(peer);
    members.push_back(hs);
  }
  if (members.size() < 2) members.clear();
  // In plan order: the same hosts make the same tree whatever order
  // preflight found them missing the image in.
  std::sort(members.begin(), members.end(), [](HostState* a, HostState* b) { return a->index < b->index; });
  return members;
}

Status ImageRelay::SetUp(const std::vector<HostState*>& members, const std::vector<std::vector<size_t>>& children,
                         std::map<HostState*, std::string>* missed) {
  // Owned here; WriteFiles takes pointers to them.
  std::map<HostState*, std::string> scripts, keys, known, authorized;
  for (size_t pos = 0; pos < members.size(); ++pos) {
    HostState* hs = members[pos];
    std::vector<RelayPeer> kids;
    for (size_t c : children[pos]) kids.push_back(peers_.at(members[c]));
    scripts[hs] = RelayScript(hs->job_dir, *hs->docker, kids);
    if (kids.empty()) continue;
    // One key pair per sending host: its private key goes there alone.
    Result<ssh::KeyPair> pair = ssh::GenerateEd25519();
    if (!pair.ok()) return pair.status();
    keys[hs] = pair->private_key;
    known[hs] = RelayKnownHosts(kids);
    for (size_t c : children[pos]) {
      HostState* child = members[c];
      authorized[child] = RelayAuthorizedKey(child->job_dir, peers_.at(hs).address, pair->public_key);
    }
  }
  std::map<HostState*, std::vector<std::pair<std::string, const std::string*>>> writes;
  for (HostState* hs : members) {
    writes[hs].push_back({RelayScriptFile(hs->job_dir), &scripts[hs]});
    if (keys.count(hs)) {
      writes[hs].push_back({RelayKeyFile(hs->job_dir), &keys[hs]});
      writes[hs].push_back({RelayKnownHostsFile(hs->job_dir), &known[hs]});
    }
  }
  if (Status s = transfers_.WriteFiles(writes, "the image relay's keys and scripts"); !s.ok()) return s;
  CommandGroup group(&ctx_.loop, &ctx_.redact);
  for (const auto& [hs, line] : authorized) {
    HostState* host = hs;
    ssh::Command* cmd = group.Run(*hs->exec, RelayAuthorizeCommand(hs->job_dir), [missed, host](const Outcome& o) {
      if (!o.ok()) (*missed)[host] = "cannot authorize the relay's key there: " + o.Reason();
    }, /*keep_stdin=*/true);
    if (cmd != nullptr) {
      cmd->WriteStdin(line);
      cmd->CloseStdin();
    }
  }
  RunUntil([&] { return group.idle() || ctx_.interrupts > 0; },
           Now() + ctx_.spec.ssh.connect_timeout + seconds(60));
  if (ctx_.interrupts > 0) return Status::Error("interrupted");
  if (!group.idle()) return Status::Error("authorizing the relay's keys did not finish in time");
  return Status::Ok();
}

ImageRelay::Delivery ImageRelay::Send(const std::string& file, const std::string& image,
                                      const std::vector<HostState*>& members) {
  Delivery d;
  if (members.empty()) return d;
  const std::vector<std::vector<size_t>> children = RelayChildren(members.size(), kRelayFanOut);
  if (Status s = SetUp(members, children, &d.missed); !s.ok()) {
    for (HostState* hs : members) d.missed[hs] = "the relay could not be set up: " + s.message();
    CleanUp(members);
    return d;
  }
  Say("relaying " + image + " through " + std::to_string(members.size()) +
      " host(s): this machine sends it to " + members[0]->name + ", each host passes it on to up to " +
      std::to_string(kRelayFanOut) + " others over SSH");
  ctx_.observer.StepBegan(Phase::kPush, "relaying " + image, static_cast<int>(members.size()));
  for (HostState* hs : members) Began(hs->PhaseOf(Phase::kPush));
  HostState* root = members[0];
  std::map<HostState*, Outcome> rooted = transfers_.StreamFile(
      file, {root}, [](HostState& h) { return RelayRunCommand(h.job_dir); }, Phase::kPush,
      "relaying " + image, &d.bytes_sent, /*report=*/false);
  std::string root_failure;
  std::map<size_t, std::string> hop_failures;
  if (auto it = rooted.find(root); it == rooted.end()) {
    root_failure = ctx_.interrupts > 0 ? "interrupted" : "timed out";
  } else {
    hop_failures = ParseRelayFailures(it->second.err);
    if (!it->second.ok()) root_failure = it->second.Reason();
  }
  if (ctx_.interrupts == 0) ReadIds(image, members, hop_failures, root_failure, &d);
  for (HostState* hs : members) {
    auto missed = d.missed.find(hs);
    if (missed == d.missed.end() && !d.ids.count(hs)) {
      missed = d.missed.emplace(hs, ctx_.interrupts > 0 ? "interrupted" : "not delivered").first;
    }
    if (missed == d.missed.end()) {
      Ended(hs->PhaseOf(Phase::kPush), true, "relayed");
    } else {
      Ended(hs->PhaseOf(Phase::kPush), false, "not relayed: " + missed->second);
    }
  }
  ctx_.observer.StepEnded(Phase::kPush);
  CleanUp(members);
  return d;
}

void ImageRelay::ReadIds(const std::string& image, const std::vector<HostState*>& members,
                         const std::map<size_t, std::string>& hop_failures, const std::string& root_failure,
                         Delivery* d) {
  const std::vector<std::vector<size_t>> children = RelayChildren(members.size(), kRelayFanOut);
  std::map<HostState*, HostState*> parent;
  for (size_t pos = 0; pos < members.size(); ++pos) {
    for (size_t c : children[pos]) parent[members[c]] = members[pos];
  }
  CommandGroup group(&ctx_.loop, &ctx_.redact);
  for (HostState* hs : members) {
    group.Run(*hs->exec, hs->docker->ImageId(image), [&, hs](const Outcome& o) {
      if (o.ok() && !Trim(o.out).empty()) {
        d->ids[hs] = Trim(o.out);
        d->missed.erase(hs);  // an earlier problem there did not stop it
        return;
      }
      if (d->missed.count(hs)) return;
      // Why: its own hop's report, its own load (the root), or a host
      // above it that did not pass the image on.
      std::string why;
      if (auto f = hop_failures.find(hs->index); f != hop_failures.end()) {
        why = f->second;
      } else if (hs == members[0] && !root_failure.empty()) {
        why = root_failure;
      } else if (auto p = parent.find(hs); p != parent.end()) {
        why = "the relay did not reach it: " + p->second->name + " did not pass the image on";
      } else {
        why = "not there after the relay: " + o.Reason();
      }
      d->missed[hs] = why;
    });
  }
  RunUntil([&] { return group.idle() || ctx_.interrupts > 0; }, Now() + seconds(120));
}

void ImageRelay::CleanUp(const std::vector<HostState*>& members) {
  CommandGroup group(&ctx_.loop, &ctx_.redact);
  std::map<HostState*, std::string> failed;
  for (HostState* hs : members) {
    group.Run(*hs->exec, RelayCleanupCommand(hs->job_dir), [&, hs](const Outcome& o) {
      if (!o.ok()) failed[hs] = o.Reason();
    });
  }
  const bool done = RunUntil([&] { return group.idle(); }, Now() + ctx_.spec.ssh.connect_timeout + seconds(30));
  for (const auto& [hs, why] : failed) {
    Say("warning: " + hs->name + ": removing the image relay's key and files failed: " + why);
  }
  if (!done) Say("warning: removing the image relay's keys and files did not finish on every host");
}

}  // namespace barge::runner::internal
