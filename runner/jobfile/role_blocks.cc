// `roles:`: the head (with its readiness probe, `ready:`) and the workers.
#include "runner/jobfile/blocks.h"

#include <regex>

namespace barge::runner::jobfile {

constexpr KeyRule<ReadyDraft> kReadyRules[] = {
    {"tcp_port",
     {.type = KeyType::kInteger, .description = "Ready once this TCP port accepts connections"},
     [](const Entry& e, ReadyDraft& r) {
       r.kinds.push_back(e);
       r.probe.kind = cluster::ReadinessProbe::Kind::kTcpPort;
       if (auto port = ReadPort(e)) r.probe.tcp_port = *port;
     }},
    {"log",
     {.type = KeyType::kString, .description = "Ready once a log line matches this regular expression"},
     [](const Entry& e, ReadyDraft& r) {
       r.kinds.push_back(e);
       r.probe.kind = cluster::ReadinessProbe::Kind::kLog;
       std::optional<std::string> pattern = ReadNonEmpty(e, "a regular expression");
       if (!pattern) return;
       if (pattern->size() > 1000) {
         e.Error("regular expression longer than 1000 characters");
         return;
       }
       try {
         std::regex compiled(*pattern, std::regex::ECMAScript);
         r.probe.log_regex = *pattern;
       } catch (const std::regex_error& error) {
         e.Error("invalid regular expression " + QuoteValue(*pattern) + ": " + error.what());
       }
     }},
    {"command",
     {.type = KeyType::kString, .description = "Ready once this shell command, run in the container, exits 0"},
     [](const Entry& e, ReadyDraft& r) {
       r.kinds.push_back(e);
       r.probe.kind = cluster::ReadinessProbe::Kind::kCommand;
       if (auto command = ReadNonEmpty(e, "a shell command")) r.probe.command = *command;
     }},
    {"timeout",
     {.type = KeyType::kDuration, .description = "How long to wait for readiness", .default_value = "120s"},
     [](const Entry& e, ReadyDraft& r) {
       if (auto d = ReadDuration(e, /*allow_zero=*/false)) r.probe.timeout = *d;
     }},
};
std::vector<KeyInfo> ReadyKeys() { return Describe(kReadyRules); }

void ReadReady(const Entry& e, cluster::ReadinessProbe& out) {
  ReadyDraft draft;
  ReadMapping(e, kReadyRules, draft);
  if (draft.kinds.size() > 1) {
    std::string names;
    for (const Entry& k : draft.kinds) names += (names.empty() ? "" : " and ") + k.key.Scalar();
    draft.kinds[1].KeyError("give one of tcp_port, log or command, not " + names);
    return;
  }
  if (draft.kinds.empty() && e.value.IsMap()) {
    e.KeyError(
        "give one of tcp_port, log or command (without 'ready:' the head is ready once "
        "its container runs)");
    return;
  }
  out = draft.probe;
}

constexpr KeyRule<RoleDraft> kHeadRules[] = {
    {"image",
     {.type = KeyType::kString, .description = "Image of the head (default: the job's image)"},
     [](const Entry& e, RoleDraft& r) {
       r.image = e;
       r.role.image = ReadChecked(e, CheckImageOrArrayTemplate);
     }},
    {"command",
     {.type = KeyType::kCommand, .description = "Command of the head (default: the job's command)"}, [](const Entry& e, RoleDraft& r) { r.role.command = ReadCommand(e); }},
    {"container",
     {.type = KeyType::kBlock, .description = "Container options of the head", .keys = ContainerKeys}, [](const Entry& e, RoleDraft& r) { ReadContainer(e, r.role.container); }},
    {"ready",
     {.type = KeyType::kBlock, .description = "Readiness probe: the workers start once the head is ready (one of tcp_port, log, command)", .keys = ReadyKeys}, [](const Entry& e, RoleDraft& r) { ReadReady(e, r.role.ready); }},
    {"count", {}, nullptr, "only role 'worker' has a count; there is always exactly one head"},
};
std::vector<KeyInfo> HeadKeys() { return Describe(kHeadRules); }

constexpr KeyRule<RoleDraft> kWorkerRules[] = {
    {"image",
     {.type = KeyType::kString, .description = "Image of the workers (default: the job's image)"},
     [](const Entry& e, RoleDraft& r) {
       r.image = e;
       r.role.image = ReadChecked(e, CheckImageOrArrayTemplate);
     }},
    {"command",
     {.type = KeyType::kCommand, .description = "Command of the workers (default: the job's command)"},
     [](const Entry& e, RoleDraft& r) {
       r.command = e;
       r.role.command = ReadCommand(e);
     }},
    {"container",
     {.type = KeyType::kBlock, .description = "Container options of the workers", .keys = ContainerKeys}, [](const Entry& e, RoleDraft& r) { ReadContainer(e, r.role.container); }},
    {"count",
     {.type = KeyType::kJson, .description = "Number of workers, or rest (every node but the head)", .default_value = "rest", .schema = R"({"anyOf": [{"type": "integer", "minimum": 0, "maximum": 100000}, {"type": "string"}]})"},
     [](const Entry& e, RoleDraft& r) {
       if (e.value.IsScalar() && e.value.Scalar() == "rest") return;  // count stays nullopt
       std::optional<std::string> s = ReadScalar(e, "a number of workers or 'rest'");
       long long n;
       if (s && (!ParseInteger(*s, &n) || n < 0 || n > 100000)) {
         e.Error("expected a number of workers (0 or more) or 'rest', got " + QuoteValue(*s));
       } else if (s) {
         r.role.count = static_cast<int>(n);
         r.count = e;
       }
     }},
    {"ready", {}, nullptr, "only the head has a readiness probe ('ready')"},
};
std::vector<KeyInfo> WorkerKeys() { return Describe(kWorkerRules); }

constexpr KeyRule<JobDraft> kRoleRules[] = {
    {"head",
     {.type = KeyType::kBlock, .description = "The head (rank 0)", .keys = HeadKeys},
     [](const Entry& e, JobDraft& d) {
       d.head.present = true;
       ReadHead(e, d.head);
     }},
    {"worker",
     {.type = KeyType::kBlock, .description = "The workers (every other node)", .keys = WorkerKeys},
     [](const Entry& e, JobDraft& d) {
       d.worker.present = true;
       ReadWorker(e, d.worker);
     }},
};
std::vector<KeyInfo> RoleKeys() { return Describe(kRoleRules); }

SeenKeys ReadHead(const Entry& e, RoleDraft& r) { return ReadMapping(e, kHeadRules, r); }
SeenKeys ReadWorker(const Entry& e, RoleDraft& r) { return ReadMapping(e, kWorkerRules, r); }
SeenKeys ReadRoles(const Entry& e, JobDraft& d) { return ReadMapping(e, kRoleRules, d, "role"); }

}  // namespace barge::runner::jobfile
