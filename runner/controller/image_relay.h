// ImageRelay (image_pull: push): an image tar sent once from this machine
// and passed on from host to host along a tree (runner/remote/image_relay.h
// has every line that runs there and how each hop is authenticated), so
// that this machine's link carries about one image, not one per host.
// What the relay did not deliver, the caller (Preflight::Push) sends
// directly.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "runner/controller/job_context.h"
#include "runner/controller/transfers.h"
#include "runner/remote/image_relay.h"

namespace barge::runner::internal {

class ImageRelay : private JobPart {
 public:
  // `transfers` must outlive the relay. Threading: the loop's thread only.
  ImageRelay(JobContext* ctx, Transfers* transfers) : JobPart(ctx), transfers_(*transfers) {}

  // What one Send did.
  struct Delivery {
    std::map<HostState*, std::string> ids;     // hosts that hold the image now: its ID there
    std::map<HostState*, std::string> missed;  // every other member: why not
    uint64_t bytes_sent = 0;                   // of the tar, from this machine
  };

  // The hosts of `targets` a relay can take, in plan order: reached
  // over a direct TCP connection (not through jump hosts or a
  // ProxyCommand: another host could not reach them the same way) whose
  // host key barge checked (not host_key_checking: off). None when that
  // leaves fewer than two.
  std::vector<HostState*> Members(const std::vector<HostState*>& targets);

  // Sends `file` (the `docker save` of `image`) into the first member and
  // along a tree of RelayChildren(members, kRelayFanOut), then reads the
  // image's ID on every member. Each member's push phase begins and ends
  // here (failed, with the reason, where it was not delivered). Everything
  // set up on the hosts (keys, authorized_keys lines, scripts) is removed
  // before it returns, whatever happened. `members` comes from Members.
  Delivery Send(const std::string& file, const std::string& image, const std::vector<HostState*>& members);

 private:
  // Keys, scripts and authorized_keys lines on every member; a host whose
  // line could not be added goes to `missed` (its hop will fail). An error
  // when the files could not be written at all.
  Status SetUp(const std::vector<HostState*>& members, const std::vector<std::vector<size_t>>& children,
               std::map<HostState*, std::string>* missed);
  // The image's ID on every member not yet in `d->missed`.
  void ReadIds(const std::string& image, const std::vector<HostState*>& members,
               const std::map<size_t, std::string>& hop_failures, const std::string& root_failure,
               Delivery* d);
  // RelayCleanupCommand on every member, waited for (bounded), interrupts
  // or not.
  void CleanUp(const std::vector<HostState*>& members);

  Transfers& transfers_;
  std::map<HostState*, RelayPeer> peers_;  // of Members' hosts
};

}  // namespace barge::runner::internal
