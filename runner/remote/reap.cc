// What `barge reap` removes from one host and what it keeps.
#include "runner/remote/reap.h"

#include <algorithm>
#include <map>
#include <optional>

#include "cluster/plan.h"
#include "runner/remote/reservation.h"

namespace barge::runner::fleet {

namespace {

std::string ReapLabelOf(const container::PsEntry& e, const std::string& key) {
  auto it = e.labels.find(key);
  return it == e.labels.end() ? std::string() : it->second;
}

// A job's newest lease on the host, as its lease container labels it.
struct LeaseSeen {
  long long renewed = 0;
  long long lease = 0;
  std::string owner;  // user@machine
};

}  // namespace

std::string ReapListingLine(const DockerCommands& docker) {
  return "date +%s && " + docker.PsByLabel(cluster::kJobLabel);
}

Result<ReapListing> ParseReapListing(std::string_view out) {
  const size_t nl = out.find('\n');
  const std::string first(out.substr(0, nl));
  ReapListing listing;
  listing.now = NumberOr(first, -1);
  if (listing.now < 0) return Status::Error("the host did not say its clock: " + first);
  Result<std::vector<container::PsEntry>> entries =
      container::ParsePsLines(nl == std::string_view::npos ? std::string_view() : out.substr(nl + 1));
  if (!entries.ok()) return entries.status();
  listing.entries = std::move(*entries);
  return listing;
}

std::vector<ReapChoice> ChooseReaped(const std::vector<container::PsEntry>& listed, long long now,
                                     const std::function<bool(const std::string&)>& is_live) {
  std::map<std::string, LeaseSeen> leases;
  for (const container::PsEntry& e : listed) {
    const std::string name = e.names.substr(0, e.names.find(','));
    const std::string job = ReapLabelOf(e, std::string(cluster::kJobLabel));
    std::optional<long long> t = LeaseRenewedAt(name);
    if (!t || job.empty() || ReapLabelOf(e, std::string(kHoldLabel)) != "lease") continue;
    LeaseSeen seen{*t, NumberOr(ReapLabelOf(e, "barge.hold.lease"), 0),
                   ReapLabelOf(e, "barge.hold.user") + "@" + ReapLabelOf(e, "barge.hold.machine")};
    auto [it, fresh] = leases.emplace(job, seen);
    if (!fresh && seen.renewed > it->second.renewed) it->second = seen;
  }
  std::vector<ReapChoice> out;
  for (const container::PsEntry& e : listed) {
    ReapChoice c;
    c.id = e.id;
    c.name = e.names.substr(0, e.names.find(','));
    c.job_id = ReapLabelOf(e, std::string(cluster::kJobLabel));
    auto lease = leases.find(c.job_id);
    if (lease != leases.end() && lease->second.lease > 0 &&
        now <= lease->second.renewed + lease->second.lease + StaleGrace(lease->second.lease)) {
      c.keep = true;
      c.why = "job " + c.job_id + ", " + lease->second.owner + ", lease renewed " +
              ShortDuration(now - lease->second.renewed) + " ago";
    } else if (!c.job_id.empty() && is_live(c.job_id)) {
      c.keep = true;
      c.why = "job " + c.job_id + ", running from this store";
    } else {
      c.why = "job " + c.job_id + ", " + e.status +
              (lease != leases.end() ? ", lease lapsed " +
                                           ShortDuration(now - lease->second.renewed - lease->second.lease) + " ago"
                                     : std::string());
    }
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace barge::runner::fleet
