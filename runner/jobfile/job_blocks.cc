// The job-level blocks: restart, array, preemption, workdir, files, artifacts, forward.
#include "runner/jobfile/blocks.h"

#include <charconv>
#include <regex>

namespace barge::runner::jobfile {

constexpr KeyRule<RestartPolicy> kRestartRules[] = {
    {"max_restarts",
     {.type = KeyType::kInteger, .description = "Whole-job restarts allowed", .default_value = "0"},
     [](const Entry& e, RestartPolicy& r) {
       if (auto n = ReadInteger(e, 0, 1000, "a number of restarts")) r.max_restarts = static_cast<int>(*n);
     }},
    {"on",
     {.type = KeyType::kEnumList, .description = "Causes that restart the job (default: all five; a hang only with progress.on_hang: restart)", .choices = kRestartCauses},
     [](const Entry& e, RestartPolicy& r) {
       if (!ExpectList(e, "causes (" + JoinWords(kRestartCauses, " or ") + ")")) return;
       r.on_host_lost = r.on_node_failed = r.on_preempted = r.on_hang = r.on_gpu_unhealthy = false;
       for (size_t i = 0; i < e.value.size(); ++i) {
         Entry item = e.Element(e.value[i], i);
         std::optional<RestartCause> c = ReadEnum(item, kRestartCauseNames);
         if (!c) continue;
         bool& flag = *c == RestartCause::kHostLost     ? r.on_host_lost
                      : *c == RestartCause::kNodeFailed ? r.on_node_failed
                      : *c == RestartCause::kPreempted  ? r.on_preempted
                      : *c == RestartCause::kHang       ? r.on_hang
                                                        : r.on_gpu_unhealthy;
         if (flag) item.Error(QuoteValue(NameOf(kRestartCauseNames, *c)) + " is listed twice");
         flag = true;
       }
     }},
    {"backoff",
     {.type = KeyType::kDuration, .description = "Wait before a restart", .default_value = "10s"},
     [](const Entry& e, RestartPolicy& r) {
       if (auto d = ReadDuration(e, /*allow_zero=*/true)) r.backoff = *d;
     }},
};
std::vector<KeyInfo> RestartKeys() { return Describe(kRestartRules); }

// `array:` (runner/array/): the rows come from a file or a matrix.
void ReadArrayMatrix(const Entry& e, ArraySpec& a) {
  if (!e.value.IsMap() || e.value.size() == 0) {
    e.Error("expected a mapping of COLUMN: [values], e.g. {lr: [0.1, 0.01], seed: [1, 2]}, got " +
            TypeName(e.value));
    return;
  }
  for (auto it = e.value.begin(); it != e.value.end(); ++it) {
    if (!it->first.IsScalar()) {
      e.Error("a column must be a plain word, not " + TypeName(it->first));
      continue;
    }
    Entry column = e.Child(it->first, it->second);
    if (Status s = CheckArrayColumnName(it->first.Scalar()); !s.ok()) {
      column.KeyError(s.message());
      continue;
    }
    std::optional<std::vector<std::string>> values = ReadStringList(column, nullptr);
    if (!values) continue;
    if (values->empty()) {
      column.Error("empty list: a matrix column needs at least one value");
      continue;
    }
    a.matrix.emplace_back(it->first.Scalar(), std::move(*values));
  }
}

constexpr KeyRule<ArraySpec> kArrayRules[] = {
    {"file",
     {.type = KeyType::kString, .description = "A CSV file (a header line of column names) or a JSON-lines file (.jsonl: one object per line); one member per row"},
     [](const Entry& e, ArraySpec& a) {
       if (auto path = ReadReadableFile(e, "the array's file")) a.file = *path;
     }},
    {"matrix",
     {.type = KeyType::kJson, .description = "COLUMN: [values]; one member per combination (the first column varies slowest)", .schema = R"({"type": "object", "additionalProperties": {"type": "array", "minItems": 1, "items": {"type": ["string", "number", "boolean"]}}})"},
     ReadArrayMatrix},
};
std::vector<KeyInfo> ArrayKeys() { return Describe(kArrayRules); }

constexpr KeyRule<PreemptionSpec> kPreemptionRules[] = {
    {"command",
     {.type = KeyType::kString, .description = "Shell command polled on every host; exit 0 means the host is going away", .required = true},
     [](const Entry& e, PreemptionSpec& p) {
       if (auto c = ReadNonEmpty(e, "a shell command")) p.command = *c;
     }},
    {"every",
     {.type = KeyType::kDuration, .description = "How often the command runs", .default_value = "5s"},
     [](const Entry& e, PreemptionSpec& p) {
       if (auto d = ReadDuration(e, /*allow_zero=*/false)) p.every = *d;
     }},
};
std::vector<KeyInfo> PreemptionKeys() { return Describe(kPreemptionRules); }

// An ECMAScript regular expression that compiles, of at most 1000
// characters; with `groups`, one with at least that many groups.
std::optional<std::string> ReadRegex(const Entry& e, size_t groups = 0) {
  std::optional<std::string> pattern = ReadNonEmpty(e, "a regular expression");
  if (!pattern) return std::nullopt;
  if (pattern->size() > 1000) {
    e.Error("regular expression longer than 1000 characters");
    return std::nullopt;
  }
  try {
    std::regex compiled(*pattern, std::regex::ECMAScript);
    if (compiled.mark_count() < groups) {
      e.Error("regular expression " + QuoteValue(*pattern) + " has no group (...) around the number");
      return std::nullopt;
    }
  } catch (const std::regex_error& error) {
    e.Error("invalid regular expression " + QuoteValue(*pattern) + ": " + error.what());
    return std::nullopt;
  }
  return pattern;
}

constexpr KeyRule<HeartbeatSpec> kHeartbeatRules[] = {
    {"file",
     {.type = KeyType::kString, .description = "A file each rank touches as it makes progress (an absolute path in the container)"},
     [](const Entry& e, HeartbeatSpec& h) {
       std::optional<std::string> file = ReadNonEmpty(e, "an absolute path in the container");
       if (!file) return;
       if (file->front() != '/' || file->find_first_of("\n\r") != std::string::npos) {
         e.Error("expected an absolute path in the container, got " + QuoteValue(*file));
         return;
       }
       h.file = *file;
     }},
    {"within",
     {.type = KeyType::kDuration, .description = "A hang: no rank's file was modified for this long"},
     [](const Entry& e, HeartbeatSpec& h) {
       if (auto d = ReadDuration(e, /*allow_zero=*/false)) h.within = *d;
     }},
};
std::vector<KeyInfo> HeartbeatKeys() { return Describe(kHeartbeatRules); }

constexpr KeyRule<StragglerSpec> kStragglerRules[] = {
    {"factor",
     {.type = KeyType::kString, .description = "A straggler's steps each took more than this many times the median rank's (a number above 1)", .default_value = "1.5"},
     [](const Entry& e, StragglerSpec& s) {
       std::optional<std::string> text = ReadNonEmpty(e, "a number above 1");
       if (!text) return;
       double value = 0;
       const auto [end, ec] = std::from_chars(text->data(), text->data() + text->size(), value);
       if (ec != std::errc() || end != text->data() + text->size() || !(value > 1.0) || value > 1000) {
         e.Error("expected a number above 1 (and at most 1000), got " + QuoteValue(*text));
         return;
       }
       s.factor = value;
     }},
    {"steps",
     {.type = KeyType::kInteger, .description = "How many steps in a row a straggler is that slow", .default_value = "5"},
     [](const Entry& e, StragglerSpec& s) {
       if (auto n = ReadInteger(e, 1, 1000, "a number of steps")) s.steps = static_cast<int>(*n);
     }},
    {"time",
     {.type = KeyType::kString, .description = "A line that gives a step's time: its first group (...) is the seconds (default: the time between two lines matching pattern)"},
     [](const Entry& e, StragglerSpec& s) {
       if (auto time = ReadRegex(e, 1)) s.time = *time;
     }},
};
std::vector<KeyInfo> StragglerKeys() { return Describe(kStragglerRules); }
namespace {

// progress.gpu_util (runner/controller/gpu_watch.h): both keys required.
constexpr KeyRule<GpuUtilSpec> kGpuUtilRules[] = {
    {"below",
     {.type = KeyType::kInteger, .description = "A hang: every GPU of a node below this utilisation (percent, nvidia-smi's utilization.gpu)", .required = true},
     [](const Entry& e, GpuUtilSpec& g) {
       if (auto n = ReadInteger(e, 1, 100, "a percentage")) g.below = static_cast<int>(*n);
     }},
    {"for",
     {.type = KeyType::kDuration, .description = "... for this long", .required = true},
     [](const Entry& e, GpuUtilSpec& g) {
       if (auto d = ReadDuration(e, /*allow_zero=*/false)) g.for_ = *d;
     }},
};
std::vector<KeyInfo> GpuUtilKeys() { return Describe(kGpuUtilRules); }

}  // namespace

constexpr KeyRule<ProgressSpec> kProgressRules[] = {
    {"gpu_util",
     {.type = KeyType::kBlock, .description = "A hang: every GPU of a node below a utilisation for a duration (sampled every every with nvidia-smi on the job's hosts)", .keys = GpuUtilKeys},
     [](const Entry& e, ProgressSpec& p) {
       GpuUtilSpec g;
       SeenKeys seen = ReadMapping(e, kGpuUtilRules, g);
       if (!seen.contains("below") || !seen.contains("for")) {
         e.KeyError("needs 'below' (a percentage) and 'for' (a duration): every GPU of a node below it for that long is a hang");
         return;
       }
       if (g.below > 0 && g.for_.count() > 0) p.gpu_util = g;
     }},
    {"silence",
     {.type = KeyType::kDuration, .description = "A hang: no rank printed anything for this long"},
     [](const Entry& e, ProgressSpec& p) {
       if (auto d = ReadDuration(e, /*allow_zero=*/false)) p.silence = *d;
     }},
    {"pattern",
     {.type = KeyType::kString, .description = "A line that shows progress (a regular expression, e.g. a step counter); with within"},
     [](const Entry& e, ProgressSpec& p) {
       if (auto pattern = ReadRegex(e)) p.pattern = *pattern;
     }},
    {"within",
     {.type = KeyType::kDuration, .description = "A hang: no rank printed a line matching pattern for this long"},
     [](const Entry& e, ProgressSpec& p) {
       if (auto d = ReadDuration(e, /*allow_zero=*/false)) p.within = *d;
     }},
    {"heartbeat",
     {.type = KeyType::kBlock, .description = "A hang: no rank touched its heartbeat file for within", .keys = HeartbeatKeys},
     [](const Entry& e, ProgressSpec& p) {
       HeartbeatSpec h;
       SeenKeys seen = ReadMapping(e, kHeartbeatRules, h);
       if (!seen.contains("file") || !seen.contains("within")) {
         e.KeyError("needs 'file' and 'within': no rank touching file for within is a hang");
         return;
       }
       p.heartbeat = h;
     }},
    {"stragglers",
     {.type = KeyType::kBlock, .description = "Report ranks whose steps are slower than the median rank's (the job goes on)", .keys = StragglerKeys},
     [](const Entry& e, ProgressSpec& p) {
       StragglerSpec s;
       SeenKeys seen = ReadMapping(e, kStragglerRules, s);
       if (seen.contains("time") && !s.time) return;  // said already
       p.stragglers = s;
     }},
    {"every",
     {.type = KeyType::kDuration, .description = "How often barge checks for a hang", .default_value = "10s"},
     [](const Entry& e, ProgressSpec& p) {
       if (auto d = ReadDuration(e, /*allow_zero=*/false)) p.every = *d;
     }},
    {"on_hang",
     {.type = KeyType::kEnum, .description = "What a hang does: stop the job (exit 123), or restart it as restart: allows", .default_value = "stop", .choices = kOnHang},
     [](const Entry& e, ProgressSpec& p) {
       if (auto v = ReadEnum(e, kOnHangNames)) p.on_hang = *v;
     }},
};
std::vector<KeyInfo> ProgressKeys() { return Describe(kProgressRules); }

void ReadProgress(const Entry& e, JobSpec& spec) {
  ProgressSpec p;
  SeenKeys seen = ReadMapping(e, kProgressRules, p);
  if (!seen.contains("silence") && !seen.contains("pattern") && !seen.contains("heartbeat") &&
      !seen.contains("stragglers") && !seen.contains("gpu_util")) {
    e.KeyError("needs 'silence', 'pattern' (with 'within'), 'heartbeat', 'gpu_util' or 'stragglers': what to watch");
    return;
  }
  if (seen.contains("pattern") != seen.contains("within") && !(seen.contains("pattern") && seen.contains("stragglers"))) {
    e.KeyError("'pattern' and 'within' go together: no line matching pattern for within is a hang");
    return;
  }
  if (seen.contains("stragglers") && !seen.contains("pattern") && p.stragglers && !p.stragglers->time) {
    e.KeyError("'stragglers' needs 'pattern' (a step is the time between two lines matching it) or its own 'time'");
    return;
  }
  spec.progress = p;
}

std::optional<std::string> ReadLocalPath(const Entry& e, bool directory) {
  std::optional<std::string> written = ReadNonEmpty(e, directory ? "a local directory" : "a local file");
  if (!written) return std::nullopt;
  std::optional<std::string> path = ExpandPath(e, *written);
  if (!path) return std::nullopt;
  std::error_code ec;
  bool ok = directory ? std::filesystem::is_directory(*path, ec)
                      : std::filesystem::is_regular_file(*path, ec);
  if (!ok) {
    e.Error(std::string(directory ? "not a directory: " : "not a readable file: ") + *path);
    return std::nullopt;
  }
  return path;
}

std::optional<std::string> ReadContainerPath(const Entry& e) {
  std::optional<std::string> v = ReadNonEmpty(e, "an absolute path in the container");
  if (!v) return std::nullopt;
  if ((*v)[0] != '/' || v->find(':') != std::string::npos || v->size() >= 4096) {
    e.Error("expected an absolute path in the container without ':', got " + QuoteValue(*v));
    return std::nullopt;
  }
  return v;
}

constexpr KeyRule<WorkdirSpec> kWorkdirRules[] = {
    {"path",
     {.type = KeyType::kString, .description = "Local directory to ship to every host", .required = true},
     [](const Entry& e, WorkdirSpec& w) {
       if (auto p = ReadLocalPath(e, /*directory=*/true)) w.path = *p;
     }},
    {"mount",
     {.type = KeyType::kString, .description = "Where containers see it", .default_value = "/workspace"},
     [](const Entry& e, WorkdirSpec& w) {
       if (auto p = ReadContainerPath(e)) w.mount = *p;
     }},
    {"exclude",
     {.type = KeyType::kStringList, .description = "tar --exclude patterns"},
     [](const Entry& e, WorkdirSpec& w) {
       if (auto l = ReadStringList(e, nullptr)) w.exclude = *l;
     }},
};
std::vector<KeyInfo> WorkdirKeys() { return Describe(kWorkdirRules); }

void ReadWorkdir(const Entry& e, JobDraft& d) {
  WorkdirSpec w;
  if (e.value.IsScalar()) {
    if (auto p = ReadLocalPath(e, /*directory=*/true)) w.path = *p;
  } else if (e.value.IsMap()) {
    ReadMapping(e, kWorkdirRules, w);
    if (w.path.empty()) {
      e.KeyError("missing 'path' (the local directory to ship)");
      return;
    }
  } else {
    e.Error("expected a directory or a mapping with path, mount and exclude, got " +
            TypeName(e.value));
    return;
  }
  if (!w.path.empty()) d.spec.workdir = w;
}

constexpr KeyRule<FileSpec> kFileRules[] = {
    {"from",
     {.type = KeyType::kString, .description = "Local file to ship", .required = true},
     [](const Entry& e, FileSpec& f) {
       if (auto p = ReadLocalPath(e, /*directory=*/false)) f.from = *p;
     }},
    {"to",
     {.type = KeyType::kString, .description = "Absolute path in the container (mounted read-only)", .required = true},
     [](const Entry& e, FileSpec& f) {
       if (auto p = ReadContainerPath(e)) f.to = *p;
     }},
};
std::vector<KeyInfo> FileKeys() { return Describe(kFileRules); }

void ReadFiles(const Entry& e, JobDraft& d) {
  if (!ExpectList(e, "files")) return;
  for (size_t i = 0; i < e.value.size(); ++i) {
    Entry item = e.Element(e.value[i], i);
    if (!e.value[i].IsMap()) {
      item.Error("expected a mapping with from and to, got " + TypeName(e.value[i]));
      continue;
    }
    FileSpec f;
    ReadMapping(item, kFileRules, f);
    if (f.from.empty() || f.to.empty()) {
      if (!e.value[i]["from"] || !e.value[i]["to"]) {
        e.src->Error(e.value[i].Mark(), item.path, "needs both 'from' and 'to'");
      }
      continue;
    }
    d.spec.files.push_back(f);
  }
}

constexpr KeyRule<ArtifactSpec> kArtifactRules[] = {
    {"node",
     {.type = KeyType::kJson, .description = "Which node: head, all, or a rank", .default_value = "head", .schema = R"({"anyOf": [{"type": "string"}, {"type": "integer", "minimum": 0}]})"},
     [](const Entry& e, ArtifactSpec& a) {
       std::optional<std::string> v = ReadNonEmpty(e, "head, all or a rank");
       if (!v) return;
       long long rank;
       if (*v == "head") {
         a.rank = 0;
       } else if (*v == "all") {
         a.all_nodes = true;
       } else if (ParseInteger(*v, &rank) && rank >= 0 && rank < 100000) {
         a.rank = static_cast<int>(rank);
       } else {
         e.Error("expected head, all or a rank, got " + QuoteValue(*v));
       }
     }},
    {"path",
     {.type = KeyType::kString, .description = "Absolute path in the container to copy back", .required = true},
     [](const Entry& e, ArtifactSpec& a) {
       std::optional<std::string> v = ReadNonEmpty(e, "an absolute path in the container");
       if (!v) return;
       if ((*v)[0] != '/') {
         e.Error("expected an absolute path in the container, got " + QuoteValue(*v));
         return;
       }
       a.path = *v;
     }},
    {"every",
     {.type = KeyType::kDuration, .description = "Copy this often while the job runs (default: only before teardown)"},
     [](const Entry& e, ArtifactSpec& a) {
       if (auto d = ReadDuration(e, /*allow_zero=*/false)) a.every = *d;
     }},
    {"to",
     {.type = KeyType::kString, .description = "Also send the copies to s3://BUCKET/PREFIX ({job}, {name}, {rank}, {host}; needs storage:)"},
     [](const Entry& e, ArtifactSpec& a) {
       if (auto to = ReadChecked(e, CheckS3Destination)) a.to = *to;
     }},
    {"local",
     {.type = KeyType::kBoolean, .description = "Keep a copy on the controller (false: stream each file from its host to `to` with no copy on the controller's disk; needs to:)", .default_value = "true"},
     [](const Entry& e, ArtifactSpec& a) {
       if (auto v = ReadEnum(e, kBooleans)) a.local = *v == "true";
     }},
};
std::vector<KeyInfo> ArtifactKeys() { return Describe(kArtifactRules); }

void ReadArtifacts(const Entry& e, JobDraft& d) {
  if (!ExpectList(e, "artifacts")) return;
  for (size_t i = 0; i < e.value.size(); ++i) {
    Entry item = e.Element(e.value[i], i);
    if (!e.value[i].IsMap()) {
      item.Error("expected a mapping with node, path and every, got " + TypeName(e.value[i]));
      continue;
    }
    ArtifactSpec a;
    ReadMapping(item, kArtifactRules, a);
    if (a.path.empty()) {
      e.src->Error(e.value[i].Mark(), item.path + ".path", "missing; which path to copy back");
      continue;
    }
    if (!a.local && a.to.empty()) {
      e.src->Error(e.value[i]["local"].Mark(), item.path + ".local",
                   "false needs to: s3://BUCKET/PREFIX (with no copy on the controller, the files must go somewhere)");
      continue;
    }
    d.spec.artifacts.push_back(a);
  }
}

constexpr KeyRule<ForwardSpec> kForwardRules[] = {
    {"port",
     {.type = KeyType::kString, .description = "[LOCAL:]REMOTE: the node's port, reached at 127.0.0.1:LOCAL (default LOCAL = REMOTE)", .required = true},
     [](const Entry& e, ForwardSpec& f) {
       std::optional<std::string> v = ReadNonEmpty(e, "[LOCAL:]REMOTE, e.g. 8265 or \"16006:6006\"");
       if (!v) return;
       Result<ForwardPorts> ports = ParseForwardPorts(*v);
       if (!ports.ok()) {
         e.Error(ports.status().message());
         return;
       }
       f.local_port = ports->local_port;
       f.remote_port = ports->remote_port;
     }},
    {"node",
     {.type = KeyType::kInteger, .description = "The node's rank", .default_value = "0"},
     [](const Entry& e, ForwardSpec& f) {
       std::optional<std::string> v = ReadNonEmpty(e, "a rank");
       long long rank;
       if (!v) return;
       if (!ParseInteger(*v, &rank) || rank < 0 || rank >= 100000) {
         e.Error("expected a rank (0, 1, ...), got " + QuoteValue(*v));
         return;
       }
       f.rank = static_cast<int>(rank);
     }},
};
std::vector<KeyInfo> ForwardKeys() { return Describe(kForwardRules); }

void ReadForward(const Entry& e, JobDraft& d) {
  if (!ExpectList(e, "forward")) return;
  std::map<int, std::string> taken;  // local port -> where
  for (size_t i = 0; i < e.value.size(); ++i) {
    Entry item = e.Element(e.value[i], i);
    ForwardSpec f;
    if (e.value[i].IsScalar()) {
      kForwardRules[0].read(item, f);
    } else if (e.value[i].IsMap()) {
      ReadMapping(item, kForwardRules, f);
      if (!e.value[i]["port"]) {
        e.src->Error(e.value[i].Mark(), item.path + ".port", "missing; which port of the node to forward");
        continue;
      }
    } else {
      item.Error("expected a port ([LOCAL:]REMOTE) or a mapping with port and node, got " + TypeName(e.value[i]));
      continue;
    }
    if (f.remote_port == 0) continue;  // reported above
    auto [at, fresh] = taken.emplace(f.local_port, item.path);
    if (!fresh) {
      item.Error("local port " + std::to_string(f.local_port) + " is already forwarded by " + at->second);
      continue;
    }
    d.spec.forward.push_back(f);
  }
}

SeenKeys ReadArrayBlock(const Entry& e, ArraySpec& a) { return ReadMapping(e, kArrayRules, a); }

SeenKeys ReadRestart(const Entry& e, RestartPolicy& r) { return ReadMapping(e, kRestartRules, r); }
SeenKeys ReadPreemption(const Entry& e, PreemptionSpec& p) { return ReadMapping(e, kPreemptionRules, p); }

}  // namespace barge::runner::jobfile
