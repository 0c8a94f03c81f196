// Taking a job's holds on one host through its Docker Engine API.
#include "runner/remote/holds_api.h"

#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <set>

#include <nlohmann/json.hpp>

#include "ssh/quote.h"

namespace barge::runner {

namespace {

std::string LabelOf(const container::PsEntry& e, const std::string& key) {
  auto it = e.labels.find(key);
  return it == e.labels.end() ? std::string() : it->second;
}

}  // namespace

std::string HoldCreateBody(const HoldOwner& owner, const std::string& name, long long now) {
  std::string kind = "port";
  std::string gpus;
  if (name.rfind(std::string(kLeasePrefix), 0) == 0) {
    kind = "lease";
  } else if (name.size() >= 5 && name.compare(name.size() - 5, 5, "-host") == 0) {
    kind = "host";
    gpus = "all";
  } else if (const size_t g = name.find("-gpu-"); g != std::string::npos) {
    kind = "gpu";
    gpus = name.substr(name.rfind('-') + 1);
  }
  const long long lease = LeaseSeconds(owner.lease);
  nlohmann::json body;
  body["Image"] = std::string(kHoldImageRepo) + ":" + std::string(kHoldImageTag);
  body["Cmd"] = {"hold"};
  body["Labels"] = {
      {"barge.job", owner.job_id},
      {std::string(kHoldLabel), kind},
      {"barge.hold.name", owner.job_name},
      {"barge.hold.user", owner.user},
      {"barge.hold.machine", owner.machine},
      {"barge.hold.gpus", gpus},
      {"barge.hold.since", std::to_string(now)},
      {"barge.hold.expires", std::to_string(now + lease)},
      {"barge.hold.lease", std::to_string(lease)},
      {"barge.hold.v", std::to_string(kHoldFormat)},
  };
  body["HostConfig"] = {{"NetworkMode", "none"}};
  return body.dump();
}

bool IsHoldOrRecordEntry(const container::PsEntry& e) {
  return !LabelOf(e, std::string(kHoldLabel)).empty() || !LabelOf(e, std::string(kFaultLabel)).empty();
}

std::vector<Hold> HoldsOf(const std::vector<container::PsEntry>& listed) {
  std::vector<Hold> out;
  for (const container::PsEntry& e : listed) {
    Hold h;
    h.id = e.id;
    h.name = e.names.substr(0, e.names.find(','));
    h.job_id = LabelOf(e, "barge.job");
    h.job_name = LabelOf(e, "barge.hold.name");
    h.user = LabelOf(e, "barge.hold.user");
    h.machine = LabelOf(e, "barge.hold.machine");
    h.gpus = LabelOf(e, "barge.hold.gpus");
    h.since = NumberOr(LabelOf(e, "barge.hold.since"), 0);
    h.expires = NumberOr(LabelOf(e, "barge.hold.expires"), 0);
    h.lease = NumberOr(LabelOf(e, "barge.hold.lease"), 0);
    h.format = static_cast<int>(NumberOr(LabelOf(e, "barge.hold.v"), 1));
    h.fault_kind = LabelOf(e, "barge.fault");
    h.fault_job = LabelOf(e, "barge.fault.job");
    h.fault_serial = LabelOf(e, "barge.fault.serial");
    h.fault_detail = LabelOf(e, "barge.fault.detail");
    out.push_back(std::move(h));
  }
  ApplyEngineLeases(&out);
  return out;
}

std::optional<long long> ParseHttpDate(std::string_view date) {
  // IMF-fixdate: "Sun, 06 Nov 1994 08:49:37 GMT".
  static constexpr const char* kMonths[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                            "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  char wday[4] = {}, mon[4] = {}, zone[4] = {};
  int day = 0, year = 0, h = 0, m = 0, s = 0;
  const std::string text(date);
  if (std::sscanf(text.c_str(), "%3s, %d %3s %d %d:%d:%d %3s", wday, &day, mon, &year, &h, &m, &s, zone) != 8 ||
      std::string(zone) != "GMT") {
    return std::nullopt;
  }
  int month = -1;
  for (int i = 0; i < 12; ++i) {
    if (std::string(mon) == kMonths[i]) month = i;
  }
  if (month < 0 || day < 1 || day > 31 || year < 1970 || year > 9999 || h < 0 || h > 23 || m < 0 || m > 59 ||
      s < 0 || s > 60) {
    return std::nullopt;
  }
  tm t = {};
  t.tm_year = year - 1900;
  t.tm_mon = month;
  t.tm_mday = day;
  t.tm_hour = h;
  t.tm_min = m;
  t.tm_sec = s;
  return static_cast<long long>(timegm(&t));
}

namespace {

// The engine's answer to one request: its status and body, or why there
// was none (status 0).
struct Answer {
  int status = 0;
  std::string body;
  std::string why;
};

class Taker : public std::enable_shared_from_this<Taker> {
 public:
  Taker(CommandGroup* group, ApiHoldJob job, std::function<void(HoldReply, bool)> done)
      : group_(group), job_(std::move(job)), done_(std::move(done)) {
    reply_.now = job_.now;
  }

  void Start() {
    auto self = shared_from_this();
    // The listing first: where another job's ticket comes before this
    // job's place, it creates nothing (the queue) and the listing is its
    // answer.
    List([self](bool ok) {
      if (!ok) return self->Finish(true);
      if (QueuedBehindAnother(self->reply_.holds, self->reply_.now, self->job_.owner.job_id,
                              self->job_.owner.ticket_since)) {
        return self->Finish(false);
      }
      self->Take();
    });
  }

 private:
  void Take() {
    const HoldRequest& r = job_.request;
    if (!r.exclusive && r.gpu_count > 0) {
      // Choosing GPUs: the listing's lowest free indices (stale holds
      // removed and listed again).
      auto self = shared_from_this();
      return RemoveStale([self](bool removed) {
        if (!removed) return self->TakeGpus();
        self->List([self](bool again) {
          if (!again) return self->Finish(true);
          self->TakeGpus();
        });
      });
    }
    // The lease first (the stale rule), then the holds.
    std::vector<std::string> names = {LeaseName(job_.owner.job_id, job_.now)};
    if (r.exclusive) {
      names.push_back(HostHoldName());
    } else {
      for (int d : r.gpu_devices) names.push_back(GpuHoldName(d));
      for (int p : r.ports) names.push_back(PortHoldName(p));
    }
    auto self = shared_from_this();
    MakeAll(std::move(names), 0, [self] { self->ListAndSettle(); });
  }

  // The engine did not answer `what` within the bound, on every try.
  std::string Unanswered() const {
    return "the Docker engine did not answer within " +
           std::to_string(std::chrono::duration_cast<std::chrono::seconds>(job_.engine_timeout).count()) + " s, " +
           std::to_string(job_.engine_misses) + " time(s) in a row";
  }

  void Error(const std::string& line) { reply_.errors += (reply_.errors.empty() ? "" : "; ") + line; }

  void Finish(bool failed) {
    if (finished_) return;
    finished_ = true;
    done_(std::move(reply_), failed);
  }

  // `request` on the engine, bounded, tried again after a timeout.
  void Http(container::HttpRequest request, std::function<void(const Answer&)> then, int tries) {
    auto self = shared_from_this();
    auto answer = std::make_shared<Answer>();
    group_->Api(
        [self, request, answer](CommandGroup::Finish finish) {
          return self->job_.api->Request(
              request, nullptr, [answer, finish](container::Reply<container::DockerApi::Response> r) {
                if (r.ok()) {
                  answer->status = r.value->status;
                  answer->body = std::move(r.value->body);
                } else {
                  answer->why = r.value.status().message();
                }
                Outcome o;
                o.exit.code = 0;
                finish(o);
              });
        },
        [self, request, answer, then, tries](const Outcome& o) {
          if (o.timed_out()) {
            if (tries > 1) return self->Http(request, then, tries - 1);
            answer->why = self->Unanswered();
          } else if (!o.exit.known()) {
            answer->why = o.exit.error;
          }
          then(*answer);
        },
        job_.engine_timeout);
  }

  static std::string Said(const Answer& a) {
    if (a.status == 0) return a.why;
    return container::ApiErrorMessage(a.body) + " (HTTP " + std::to_string(a.status) + ")";
  }

  // Creates the hold `name`: `then(true)` when made; a name in use goes to
  // the conflicts; anything else is an error (the taking fails).
  void Make(const std::string& name, std::function<void(bool)> then, bool imported = false) {
    container::HttpRequest req;
    req.method = "POST";
    req.target = "/containers/create?name=" + container::UrlEncode(name);
    req.body = HoldCreateBody(job_.owner, name, reply_.now);
    req.content_type = "application/json";
    auto self = shared_from_this();
    Http(
        req,
        [self, name, then, imported](const Answer& a) {
          if (a.status == 201) {
            if (name.rfind(std::string(kLeasePrefix), 0) != 0) self->reply_.taken.push_back(name);
            return then(true);
          }
          if (a.status == 409) {
            self->conflicts_.push_back(name);
            return then(false);
          }
          if (a.status == 404 && !imported) {
            // The hold image is missing: imported once, then tried again.
            return self->ImportHoldImage([self, name, then](std::optional<std::string> why) {
              if (why) {
                self->Error("error: " + name + ": cannot make the hold image: " + *why);
                self->failed_ = true;
                return then(false);
              }
              self->Make(name, then, /*imported=*/true);
            });
          }
          self->Error("error: " + name + ": " + Said(a));
          self->failed_ = true;
          then(false);
        },
        job_.engine_misses);
  }

  // Makes `names[i...]` in turn, then `then`.
  void MakeAll(std::vector<std::string> names, size_t i, std::function<void()> then) {
    if (i >= names.size()) return then();
    auto self = shared_from_this();
    const std::string name = names[i];
    Make(name, [self, names = std::move(names), i, then](bool) mutable { self->MakeAll(std::move(names), i + 1, then); });
  }

  void ImportHoldImage(std::function<void(std::optional<std::string>)> then) {
    container::HttpRequest req;
    req.method = "POST";
    req.target = "/images/create?fromSrc=-&repo=" + container::UrlEncode(kHoldImageRepo) +
                 "&tag=" + std::string(kHoldImageTag);
    req.body = std::string(1024, '\0');  // a tar of two zero blocks: an empty image
    req.content_type = "application/x-tar";
    Http(
        req,
        [then](const Answer& a) {
          // The import reports progress as JSON lines; a failure as one
          // carrying "errorDetail", still with status 200.
          if (a.status / 100 != 2) return then(Said(a));
          if (a.body.find("\"errorDetail\"") != std::string::npos) return then(a.body);
          then(std::nullopt);
        },
        1);
  }

  // Lists the holds and leases into reply_.holds.
  void List(std::function<void(bool)> then) {
    container::HttpRequest req;
    req.target = "/containers/json?all=1&filters=" +
                 container::UrlEncode(nlohmann::json({{"name", {std::string(kRecordsNameFilter)}}}).dump());
    auto self = shared_from_this();
    Http(
        req,
        [self, then](const Answer& a) {
          if (a.status != 200) {
            self->Error("error: listing holds: " + Said(a));
            return then(false);
          }
          Result<std::vector<container::PsEntry>> listed = container::ParseContainerList(a.body);
          if (!listed.ok()) {
            self->Error("error: listing holds: " + listed.status().message());
            return then(false);
          }
          // Listed by name (kRecordsNameFilter): only what carries a
          // hold's or a record entry's label counts.
          std::erase_if(*listed, [](const container::PsEntry& e) { return !IsHoldOrRecordEntry(e); });
          self->reply_.holds = HoldsOf(*listed);
          then(true);
        },
        job_.engine_misses);
  }

  // Removes other jobs' stale holds (by ID); `then(true)` when one went.
  void RemoveStale(std::function<void(bool)> then) {
    std::vector<const Hold*> stale;
    for (const Hold& h : reply_.holds) {
      if (h.job_id != job_.owner.job_id && IsStale(h, reply_.now)) stale.push_back(&h);
    }
    if (stale.empty()) return then(false);
    struct Count {
      size_t left = 0;
      bool removed = false;
    };
    auto count = std::make_shared<Count>();
    count->left = stale.size();
    auto self = shared_from_this();
    for (const Hold* h : stale) {
      container::HttpRequest req;
      req.method = "DELETE";
      req.target = "/containers/" + container::UrlEncode(h->id) + "?force=1";
      const std::string what = h->name + " (job " + h->job_id + " " + h->job_name + ")";
      Http(
          req,
          [self, count, what, then](const Answer& a) {
            if (a.status / 100 == 2) {
              self->reply_.removed_stale.push_back(what);
              count->removed = true;
            }
            if (--count->left == 0) then(count->removed);
          },
          job_.engine_misses);
    }
  }

  // A GPU count: the lowest free indices in turn (a name taken since the
  // listing is not tried again), then the device and port holds.
  void TakeGpus() {
    const bool host_held = std::any_of(reply_.holds.begin(), reply_.holds.end(),
                                       [](const Hold& h) { return h.name == HostHoldName(); });
    auto self = shared_from_this();
    if (host_held) return ListAndSettle();  // no point taking GPUs under a host hold
    Make(LeaseName(job_.owner.job_id, job_.now), [self](bool) { self->TakeGpusLeased(); });
  }

  void TakeGpusLeased() {
    auto self = shared_from_this();
    NextGpu(0, 0, [self] {
      self->conflicts_.clear();
      std::vector<std::string> names;
      for (int d : self->job_.request.gpu_devices) names.push_back(GpuHoldName(d));
      for (int p : self->job_.request.ports) names.push_back(PortHoldName(p));
      self->MakeAll(std::move(names), 0, [self] { self->ListAndSettle(); });
    });
  }

  void NextGpu(int index, int got, std::function<void()> then) {
    if (index >= job_.request.gpu_total || got >= job_.request.gpu_count) return then();
    const std::string name = GpuHoldName(index);
    const Hold* listed = nullptr;
    for (const Hold& h : reply_.holds) {
      if (h.name == name) listed = &h;
    }
    if (listed && listed->job_id == job_.owner.job_id) {
      reply_.taken.push_back(name);
      return NextGpu(index + 1, got + 1, then);
    }
    if (listed) return NextGpu(index + 1, got, then);
    auto self = shared_from_this();
    Make(name, [self, index, got, then](bool took) { self->NextGpu(index + 1, got + (took ? 1 : 0), then); });
  }

  // The listing after taking; stale holds removed and the names that were
  // in use tried once more when one went; this job's own names held.
  void ListAndSettle() {
    auto self = shared_from_this();
    List([self](bool ok) {
      if (!ok) return self->Finish(true);
      // A name in use that the listing does not show yet: the engine
      // reserves a name before the container it names is listed, so a
      // racing job's create can be refused here and still missing there
      // (for as long as that create takes: long on a loaded host or a slow
      // storage driver). Created again (refused again, or ours now that it
      // went) and listed again, after a wait that doubles from 10 ms to
      // 500 ms, a bounded number of times (about 7.6 s in all).
      std::vector<std::string> unlisted;
      for (const std::string& n : self->conflicts_) {
        if (std::none_of(self->reply_.holds.begin(), self->reply_.holds.end(),
                         [&](const Hold& h) { return h.name == n; })) {
          unlisted.push_back(n);
        }
      }
      if (!unlisted.empty() && self->relists_ < kMaxRelists) {
        ++self->relists_;
        std::erase_if(self->conflicts_, [&](const std::string& n) {
          return std::find(unlisted.begin(), unlisted.end(), n) != unlisted.end();
        });
        const std::chrono::milliseconds wait(std::min(10 << std::min(self->relists_ - 1, 6), 500));
        return self->group_->After(wait, [self, unlisted = std::move(unlisted)]() mutable {
          self->MakeAll(std::move(unlisted), 0, [self] { self->ListAndSettle(); });
        });
      }
      self->RemoveStale([self](bool removed) {
        if (!removed || self->conflicts_.empty()) return self->Settle();
        std::vector<std::string> again = std::move(self->conflicts_);
        self->conflicts_.clear();
        self->MakeAll(std::move(again), 0, [self] {
          self->List([self](bool listed) {
            if (!listed) return self->Finish(true);
            self->Settle();
          });
        });
      });
    });
  }

  void Settle() {
    for (const std::string& n : conflicts_) {
      for (const Hold& h : reply_.holds) {
        if (h.name == n && h.job_id == job_.owner.job_id && !IsLease(h)) reply_.taken.push_back(n);
      }
    }
    Finish(failed_);
  }

  CommandGroup* group_;
  ApiHoldJob job_;
  std::function<void(HoldReply, bool)> done_;
  HoldReply reply_;
  std::vector<std::string> conflicts_;  // names in use when created
  bool failed_ = false;
  bool finished_ = false;
  static constexpr int kMaxRelists = 20;
  int relists_ = 0;  // listings taken again for an unlisted name in use
};

}  // namespace

void TakeHoldsWithApi(CommandGroup& group, const ApiHoldJob& job,
                      std::function<void(HoldReply reply, bool failed)> done) {
  std::make_shared<Taker>(&group, job, std::move(done))->Start();
}

}  // namespace barge::runner
