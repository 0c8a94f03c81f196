// The array controller's JSON event lines.
#include "runner/array/array_events.h"

#include <nlohmann/json.hpp>

#include "runner/console/time_format.h"

namespace barge::runner::array {
namespace {

using Json = nlohmann::ordered_json;

void WriteLine(std::FILE* out, const Json& j) {
  const std::string line = j.dump(-1, ' ', false, Json::error_handler_t::replace) + "\n";
  std::fwrite(line.data(), 1, line.size(), out);
  std::fflush(out);
}

Json Envelope(TimePoint at, const std::string& kind, const std::string& detail) {
  return Json{{"at", IsoUtc(at)}, {"type", "event"}, {"kind", kind}, {"detail", detail}};
}

}  // namespace

void ArrayEventStream::ArrayStarted(int size, int to_run, int parallel, TimePoint at) {
  if (!out_) return;
  Json j = Envelope(at, "array_started",
                    std::to_string(to_run) + " of " + std::to_string(size) + " member(s) to run, at most " +
                        std::to_string(parallel) + " at once");
  j["array"] = array_id_;
  j["size"] = size;
  j["to_run"] = to_run;
  j["parallel"] = parallel;
  WriteLine(out_, j);
}

namespace {

// The fields every member event carries.
void AddMember(Json& j, const std::string& array_id, int index, const std::string& job_id, int attempt) {
  j["array"] = array_id;
  j["index"] = index;
  j["job"] = job_id;
  j["attempt"] = attempt;
}

}  // namespace

void ArrayEventStream::MemberStarted(int index, const std::string& job_id, int attempt, const std::string& hosts,
                                     TimePoint at) {
  if (!out_) return;
  Json j = Envelope(at, "member_started",
                    "member " + std::to_string(index) + " attempt " + std::to_string(attempt) + ": job " + job_id +
                        " on " + hosts);
  AddMember(j, array_id_, index, job_id, attempt);
  j["hosts"] = hosts;
  WriteLine(out_, j);
}

void ArrayEventStream::MemberEnded(int index, const std::string& job_id, int attempt, int exit_code,
                                   const std::string& status, int retries, TimePoint at) {
  if (!out_) return;
  Json j = Envelope(at, "member_ended",
                    "member " + std::to_string(index) + " " + status + " (exit " + std::to_string(exit_code) + ")");
  AddMember(j, array_id_, index, job_id, attempt);
  j["exit_code"] = exit_code;
  j["status"] = status;
  j["retries"] = retries;
  WriteLine(out_, j);
}

void ArrayEventStream::ArrayEnded(const std::string& status, int exit_code, const std::string& counts, TimePoint at) {
  if (!out_) return;
  Json j = Envelope(at, status, counts);
  j["array"] = array_id_;
  j["exit_code"] = exit_code;
  j["counts"] = counts;
  WriteLine(out_, j);
}

}  // namespace barge::runner::array
