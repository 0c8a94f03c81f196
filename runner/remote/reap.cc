// What `barge reap` removes from one host and what it keeps.
#include "runner/remote/reap.h"

#include <map>

#include "cluster/plan.h"
#include "runner/remote/holds_api.h"
#include "runner/remote/reservation.h"

namespace barge::runner {

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
  // Each job's newest lease (reservation.h's rule, HoldsOf's reading); only
  // a container labelled barge.hold=lease counts as one.
  std::vector<container::PsEntry> lease_entries;
  for (const container::PsEntry& e : listed) {
    auto kind = e.labels.find(std::string(kHoldLabel));
    if (kind != e.labels.end() && kind->second == "lease") lease_entries.push_back(e);
  }
  // (HoldsOf gives every lease its job's newest renewal: any one will do.)
  std::map<std::string, Hold> leases;
  for (Hold& h : HoldsOf(lease_entries)) {
    if (IsLease(h) && !h.job_id.empty()) leases.emplace(h.job_id, std::move(h));
  }
  const std::vector<Hold> all = HoldsOf(listed);
  std::vector<ReapChoice> out;
  for (size_t i = 0; i < all.size(); ++i) {
    ReapChoice c;
    c.id = all[i].id;
    c.name = all[i].name;
    c.job_id = all[i].job_id;
    auto lease = leases.find(c.job_id);
    const std::string& status = listed[i].status;
    if (lease != leases.end() && lease->second.lease_renewed && !IsStale(lease->second, now)) {
      c.keep = true;
      c.why = "job " + c.job_id + ", " + lease->second.user + "@" + lease->second.machine + ", lease renewed " +
              ShortDuration(now - *lease->second.lease_renewed) + " ago";
    } else if (!c.job_id.empty() && is_live(c.job_id)) {
      c.keep = true;
      c.why = "job " + c.job_id + ", running from this store";
    } else {
      c.why = "job " + c.job_id + ", " + status;
      if (lease != leases.end() && lease->second.lease_renewed) {
        c.why += ", lease lapsed " + ShortDuration(now - *lease->second.lease_renewed - lease->second.lease) + " ago";
      }
    }
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace barge::runner
