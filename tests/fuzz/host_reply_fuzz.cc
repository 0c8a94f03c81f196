// Fuzz target for what a host answers barge's hold and network questions:
// ParseHoldReply (the hold script's lines, runner/remote/reservation.h);
// HoldsOf over ParseContainerList (the Engine API's listing of holds) and
// ParseHttpDate (the engine's Date header, its first line) of
// runner/remote/holds_api.h; ParseRdma (runner/remote/rdma.h); InterfaceOf
// and ParseAddressProbe (runner/remote/host_address.h). Every one runs on
// every input (the whole input is the answer), so that the real outputs in
// tests/data seed them all unedited.
//
// Checks, besides "never crashes" and the sanitizers:
//   - hold reply: written back as the script writes it ("now", "took",
//     "stale", "hold" lines), it reads back the same; a hold's
//     lease_renewed is the time of a lease of its job; errors on one line;
//   - listing: one hold per container, named by its first name;
//   - Date: a time from 1970 on that, written back as IMF-fixdate, reads
//     back the same;
//   - RDMA: verbs devices under /dev/infiniband, HCAs sorted, distinct, each
//     active or inactive, never both; usable() exactly when why_not() is "";
//   - interfaces (for the output's first inet address, and one only its
//     routes can hold): the interface is "" or a word of the output, and
//     the one `ip` lists the address on when it does; the probe's addresses are IP
//     addresses the output holds;
//   - a refused listing's message is not empty and has no control bytes
//     below 0x20.
#include <time.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <functional>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "container/docker_api.h"
#include "runner/remote/holds_api.h"
#include "runner/remote/host_address.h"
#include "runner/remote/rdma.h"
#include "runner/remote/reservation.h"
#include "tests/fuzz/fuzz_checks.h"

namespace {

namespace runner = barge::runner;
namespace rdma = barge::runner::rdma;

constexpr char kTarget[] = "host_reply_fuzz";

void Check(bool ok, const char* what, std::string_view detail = {}) {
  if (!ok) barge::fuzz::Fail(kTarget, what, detail);
}

bool SameHold(const runner::Hold& a, const runner::Hold& b) {
  return a.id == b.id && a.name == b.name && a.job_id == b.job_id && a.job_name == b.job_name &&
         a.user == b.user && a.machine == b.machine && a.gpus == b.gpus && a.since == b.since &&
         a.expires == b.expires && a.lease == b.lease && a.format == b.format && a.lease_renewed == b.lease_renewed;
}

// `r` as the hold script prints it (errors left out: they are joined).
std::string ReplyLines(const runner::HoldReply& r) {
  std::string out = "now " + std::to_string(r.now) + "\n";
  for (const std::string& n : r.taken) out += "took " + n + "\n";
  for (const std::string& s : r.removed_stale) out += "stale " + s + "\n";
  for (const runner::Hold& h : r.holds) {
    out += "hold\t" + h.id + "\t" + h.name + "\t" + h.job_id + "\t" + h.job_name + "\t" + h.user + "\t" + h.machine +
           "\t" + h.gpus + "\t" + std::to_string(h.since) + "\t" + std::to_string(h.expires) + "\t" +
           std::to_string(h.lease) + "\t" + std::to_string(h.format) + "\n";
  }
  return out;
}

void CheckHoldReply(std::string_view text) {
  const runner::HoldReply r = runner::ParseHoldReply(text);
  Check(r.errors.find('\n') == std::string::npos, "hold reply: errors on more than one line", r.errors);
  for (const runner::Hold& h : r.holds) {
    // The stale rule on any labels (saturating, never wrapping: UBSan
    // watches); a hold stale at `now` is stale at every later time.
    if (runner::IsStale(h, r.now)) {
      Check(runner::IsStale(h, std::numeric_limits<long long>::max()), "hold reply: stale, then not", h.name);
    }
    if (!h.lease_renewed) continue;
    Check(std::any_of(r.holds.begin(), r.holds.end(),
                      [&](const runner::Hold& l) {
                        return l.job_id == h.job_id && runner::IsLease(l) &&
                               runner::LeaseRenewedAt(l.name) == h.lease_renewed;
                      }),
          "hold reply: a lease time no lease of the job has", h.name);
  }
  const std::string lines = ReplyLines(r);
  const runner::HoldReply again = runner::ParseHoldReply(lines);
  Check(again.now == r.now && again.taken == r.taken && again.removed_stale == r.removed_stale &&
            again.errors.empty() && again.holds.size() == r.holds.size() &&
            std::equal(r.holds.begin(), r.holds.end(), again.holds.begin(), SameHold),
        "hold reply: reads back otherwise", lines);
}

void CheckListing(std::string_view text) {
  auto listed = barge::container::ParseContainerList(text);
  if (!listed.ok()) {
    // Not CheckMessage: a JSON error quotes nlohmann's words, which show
    // the token it stopped in whole and a DEL as it is (container/, whose
    // messages pass the engine's words on, is not this target's to change).
    const std::string message = listed.status().message();
    Check(!message.empty() && std::none_of(message.begin(), message.end(),
                                           [](char c) { return static_cast<unsigned char>(c) < 0x20; }),
          "listing: an empty message or one with a control byte", message);
    return;
  }
  const std::vector<runner::Hold> holds = runner::HoldsOf(*listed);
  Check(holds.size() == listed->size(), "listing: not one hold per container");
  for (size_t i = 0; i < holds.size(); ++i) {
    const std::string& names = (*listed)[i].names;
    Check(holds[i].id == (*listed)[i].id, "listing: a hold with another container's ID", holds[i].id);
    Check(holds[i].name == names.substr(0, names.find(',')), "listing: a hold not named by its first name", names);
  }
}

void CheckHttpDate(std::string_view line) {
  const std::optional<long long> t = runner::ParseHttpDate(line);
  if (!t) return;
  Check(*t >= 0, "Date: a time before 1970", line);
  const time_t secs = static_cast<time_t>(*t);
  tm parts = {};
  Check(gmtime_r(&secs, &parts) != nullptr, "Date: a time gmtime cannot split", line);
  char text[128];
  Check(strftime(text, sizeof text, "%a, %d %b %Y %H:%M:%S GMT", &parts) > 0, "Date: cannot be written", line);
  Check(runner::ParseHttpDate(text) == t, "Date: written back, reads otherwise", text);
}

void CheckRdma(std::string_view text) {
  const rdma::RdmaInfo info = rdma::ParseRdma(text);
  for (const std::string& d : info.devices) {
    Check(d.rfind("/dev/infiniband/uverbs", 0) == 0, "rdma: a device elsewhere", d);
  }
  for (const auto* list : {&info.active_hcas, &info.inactive_hcas}) {
    Check(std::adjacent_find(list->begin(), list->end(), std::greater_equal<>()) == list->end(),
          "rdma: HCAs not sorted or not distinct");
    for (const std::string& h : *list) {
      Check(!h.empty() && h.find_first_of("/ \n") == std::string::npos, "rdma: a bad HCA name", h);
    }
  }
  for (const std::string& h : info.active_hcas) {
    Check(!std::binary_search(info.inactive_hcas.begin(), info.inactive_hcas.end(), h),
          "rdma: an HCA both active and inactive", h);
  }
  Check(info.usable() == info.why_not().empty(), "rdma: usable() and why_not() disagree", info.why_not());
  if (info.usable()) Check(rdma::NcclIbHca(info.active_hcas).rfind("=", 0) == 0, "rdma: NCCL_IB_HCA without '='");
}

bool IsWordOf(std::string_view text, const std::string& word) {
  std::istringstream in{std::string(text)};
  for (std::string w; in >> w;) {
    if (w == word) return true;
  }
  return false;
}

// The interface `ip -o -4 addr show` (the output's lines before "@route")
// lists `address` on first; "" when none.
std::string ListedOn(std::string_view text, const std::string& address) {
  std::istringstream in{std::string(text)};
  for (std::string line; std::getline(in, line) && line != "@route";) {
    std::istringstream f(line);
    std::string index, name, family, cidr;
    if (f >> index >> name >> family >> cidr && family == "inet" && cidr.substr(0, cidr.find('/')) == address) {
      return name;
    }
  }
  return "";
}

// The address of the output's first "inet A/N", else 192.0.2.2 (the
// captured VM's eth0).
std::string FirstInet(std::string_view text) {
  const size_t at = text.find(" inet ");
  if (at == std::string_view::npos) return "192.0.2.2";
  const std::string_view rest = text.substr(at + 6);
  return std::string(rest.substr(0, std::min(rest.find('/'), size_t{40})));
}

void CheckInterfaces(std::string_view text) {
  const std::string output(text);
  for (const std::string& address : {FirstInet(text), std::string("172.17.0.1")}) {
    const std::string name = barge::runner::InterfaceOf(output, address);
    if (name.empty()) continue;
    Check(IsWordOf(text, name), "interface: a name that is no word of the output", name);
    const std::string listed = ListedOn(text, address);
    if (!listed.empty()) Check(name == listed, "interface: not the one ip lists the address on", name);
  }
  const barge::runner::AddressProbe probe = barge::runner::ParseAddressProbe(output);
  for (const std::string* a : {&probe.reached_at, &probe.route_source}) {
    if (a->empty()) continue;
    Check(barge::runner::IsIpAddress(*a) && IsWordOf(text, *a), "probe: not an IP address of the output", *a);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  CheckHoldReply(text);
  CheckListing(text);
  CheckHttpDate(text.substr(0, text.find('\n')));
  CheckRdma(text);
  CheckInterfaces(text);
  return 0;
}
