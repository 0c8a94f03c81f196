// Injection, through the real CLI on a namespace host of the test bed.
//
// The property: any valid UTF-8 value without NUL that a job file gives as
// an environment value, a command argument or a label (run_options) reaches
// the container byte-exact, through the remote shell that runs `docker run`,
// and nothing planted in it (`$(touch MARKER)`, backticks, `; touch`, broken
// quotes, newlines) runs anywhere: not on the controller, not on the host,
// not in the container. Values are random, biased toward shell syntax and
// awkward Unicode, from 0 to 64 KiB (64 KiB of single quotes quotes to
// 256 KiB, past Linux's 128 KiB limit on one argument and sshd's 256 KiB
// packet: those lines reach the host through ssh::SshExecutor's script).
//
// Seeded (tests/test_seed.h): the test prints its seed; BARGE_INJECTION_SEED=N
// (or BARGE_TEST_SEED=N) reruns the same cases, without either the seed is
// fixed (CI), BARGE_TEST_SEED=random picks a fresh one; BARGE_INJECTION_CASES=K runs K random cases (default 20) and
// BARGE_INJECTION_CASE=I only case I.
//
// And the other half: what Docker's API cannot carry (NUL, invalid UTF-8)
// and what would be dangerous where it is used (host addresses, volume
// paths) is refused when the job file is read, with the file, line, key and
// reason, before anything connects.
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "runner/jobfile/job_file.h"
#include "ssh/quote.h"
#include "tests/support/bed_job.h"
#include "tests/test_seed.h"

namespace fs = std::filesystem;
using barge::ssh::ShellQuote;
using barge::testing::BedHost;
using barge::testing::BedHostsYaml;
using barge::testing::CliOutcome;
using barge::testing::GetBed;
using barge::testing::JobDir;
using barge::testing::OnHost;
using barge::testing::ReadWholeFile;
using barge::testing::RunShell;

namespace {

constexpr size_t k64KiB = 64 * 1024;
constexpr const char* kLabelKey = "inject.value";

// The planted command's target: one path, checked on the controller, on the
// host and in the container.
const std::string& Marker() {
  static const std::string marker = "/tmp/barge-inject-pwned-" + std::to_string(getpid()) + "-" +
                                    std::to_string(std::time(nullptr));
  return marker;
}

// Seed and counts, from the environment when set there.
uint64_t EnvNumber(const char* name, uint64_t fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  return std::strtoull(v, nullptr, 10);
}

void AppendUtf8(std::string* out, char32_t cp) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::string Utf8(char32_t cp) {
  std::string s;
  AppendUtf8(&s, cp);
  return s;
}

// Commands that, were any layer to run a value as shell text, would create
// the marker.
std::vector<std::string> Payloads() {
  const std::string& m = Marker();
  return {"$(touch " + m + ")",
          "`touch " + m + "`",
          "; touch " + m,
          "&& touch " + m,
          "|| touch " + m + " ||",
          "| touch " + m,
          "'; touch " + m + "; '",
          "\"; touch " + m + "; \"",
          "\ntouch " + m + "\n",
          "\r\ntouch " + m + "\r\n",
          "$(touch${IFS}" + m + ")",
          "x' && touch " + m + " && echo '",
          "\\'; touch " + m + " #",
          "'$(touch " + m + ")'",
          "\"$(touch " + m + ")\"",
          "'\\''$(touch " + m + ")'\\''",
          "\\\ntouch " + m + "\n",
          "$V",
          "$1",
          "$@",
          "${PATH}",
          "$0",
          "%s%n%x"};
}

// Random valid UTF-8 without NUL of exactly `size` bytes, biased toward
// shell syntax, planted commands and Unicode that trips up encoders.
std::string HostileValue(std::mt19937_64& rng, size_t size) {
  static const std::string kMeta = "'\"\\$`();&|<>*?[]{}~#!\n\t\r =%^,-";
  static const std::vector<std::string> kPayloads = Payloads();
  static const std::vector<char32_t> kAwkward3 = {0x2028, 0x2029, 0xFEFF, 0xFFFD, 0xFFFE,
                                                  0xFFFF, 0x200B, 0x200D, 0x202E, 0x3000};
  static const std::vector<std::string> kEmoji = {
      "🚀", "😀", "👍🏽", "🏳️‍🌈", "👨‍👩‍👧‍👦", "𝕏", "🀄"};
  static const std::vector<char32_t> kCombining = {0x0301, 0x0336, 0x20DD, 0x0345, 0x0489};
  auto pick = [&](size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng); };
  auto in = [&](char32_t lo, char32_t hi) {
    return std::uniform_int_distribution<char32_t>(lo, hi)(rng);
  };
  std::string s;
  while (s.size() < size) {
    std::string piece;
    const size_t kind = pick(100);
    if (kind < 30) {
      piece = std::string(1, kMeta[pick(kMeta.size())]);
    } else if (kind < 42) {
      piece = std::string(1, static_cast<char>(in(0x20, 0x7E)));
    } else if (kind < 46) {
      char32_t c = in(0x01, 0x20);
      piece = std::string(1, static_cast<char>(c == 0x20 ? 0x7F : c));  // C0 controls, DEL
    } else if (kind < 56) {
      piece = kPayloads[pick(kPayloads.size())];
    } else if (kind < 63) {
      piece = Utf8(in(0x80, 0x7FF));  // 2 bytes, the C1 controls and NEL among them
    } else if (kind < 72) {
      char32_t cp = pick(3) == 0 ? kAwkward3[pick(kAwkward3.size())] : in(0x800, 0xFFFF);
      if (cp >= 0xD800 && cp <= 0xDFFF) cp = 0x20AC;  // no surrogates
      piece = Utf8(cp);
    } else if (kind < 82) {
      piece = pick(2) == 0 ? kEmoji[pick(kEmoji.size())] : Utf8(in(0x10000, 0x10FFFF));
    } else if (kind < 90) {
      piece = Utf8(kCombining[pick(kCombining.size())]);  // lone combining marks
    } else {
      static const std::vector<std::string> kPairs = {"\r\n", "\\\n", "'\\''", "\"'\"", "\\\\",
                                                      "''", "``", "$$"};
      piece = kPairs[pick(kPairs.size())];
    }
    // Exactly `size` bytes: a piece that would overshoot becomes one
    // single-byte character.
    if (s.size() + piece.size() > size) piece = std::string(1, kMeta[pick(kMeta.size())]);
    s += piece;
  }
  return s;
}

size_t RandomLength(std::mt19937_64& rng) {
  switch (std::uniform_int_distribution<int>(0, 9)(rng)) {
    case 0:
      return 0;
    case 1:
    case 2:
      return k64KiB;
    case 3:
    case 4:
      return std::uniform_int_distribution<size_t>(1, 64)(rng);
    case 5:
    case 6:
      return std::uniform_int_distribution<size_t>(65, 4096)(rng);
    default:
      return std::uniform_int_distribution<size_t>(4097, k64KiB)(rng);
  }
}

// `value` (valid UTF-8, no NUL) as a YAML double-quoted scalar on one line,
// which a YAML parser reads back as exactly `value`: " and \ escaped, C0
// controls and DEL as \t \n \r \xHH, and as \uHHHH the characters a YAML
// reader may treat as line breaks or byte order marks or refuse as not
// printable (the C1 controls with NEL, U+2028, U+2029, U+FEFF, U+FFFE,
// U+FFFF). Everything else, multi-byte characters included, is written as
// it is. ParseBack checks the result with barge's own parser.
std::string YamlQuoted(std::string_view v) {
  std::string out = "\"";
  char buf[16];
  for (size_t i = 0; i < v.size();) {
    const auto c = static_cast<unsigned char>(v[i]);
    if (c < 0x80) {
      ++i;
      if (c == '"') {
        out += "\\\"";
      } else if (c == '\\') {
        out += "\\\\";
      } else if (c == '\n') {
        out += "\\n";
      } else if (c == '\t') {
        out += "\\t";
      } else if (c == '\r') {
        out += "\\r";
      } else if (c < 0x20 || c == 0x7F) {
        std::snprintf(buf, sizeof buf, "\\x%02X", c);
        out += buf;
      } else {
        out += static_cast<char>(c);
      }
      continue;
    }
    const size_t len = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
    char32_t cp = c & (len == 2 ? 0x1F : len == 3 ? 0x0F : 0x07);
    for (size_t k = 1; k < len; ++k) cp = (cp << 6) | (static_cast<unsigned char>(v[i + k]) & 0x3F);
    if (cp <= 0x9F || cp == 0x2028 || cp == 0x2029 || cp == 0xFEFF || cp == 0xFFFE ||
        cp == 0xFFFF) {
      std::snprintf(buf, sizeof buf, "\\u%04X", static_cast<unsigned>(cp));
      out += buf;
    } else {
      out.append(v.substr(i, len));
    }
    i += len;
  }
  return out + "\"";
}

// Where two strings first differ, with the bytes around it in hex.
std::string Difference(const std::string& want, const std::string& got) {
  size_t at = 0;
  while (at < want.size() && at < got.size() && want[at] == got[at]) ++at;
  auto hex = [&](const std::string& s) {
    std::string out;
    char buf[4];
    for (size_t i = at; i < s.size() && i < at + 16; ++i) {
      std::snprintf(buf, sizeof buf, "%02x ", static_cast<unsigned char>(s[i]));
      out += buf;
    }
    return out;
  };
  return "want " + std::to_string(want.size()) + " bytes, got " + std::to_string(got.size()) +
         "; first difference at byte " + std::to_string(at) + ": want [" + hex(want) + "] got [" +
         hex(got) + "]";
}

std::string Sha256(const fs::path& dir, const std::string& value) {
  const fs::path file = dir / "sha-input";
  std::ofstream(file, std::ios::binary) << value;
  std::string out = RunShell("sha256sum < " + ShellQuote(file.string()));
  return out.substr(0, 64);
}

// The 64 hex digits after `tag` in `out`, or "" (not reported).
std::string Reported(const std::string& out, const std::string& tag) {
  size_t at = out.find(tag);
  if (at == std::string::npos || at + tag.size() + 64 > out.size()) return "";
  return out.substr(at + tag.size(), 64);
}

std::string Docker(const BedHost& h, const std::string& args, int* code = nullptr) {
  return RunShell("DOCKER_HOST=" + ShellQuote(h.docker_host) + " timeout 30 docker " + args +
                      " 2>&1",
                  code);
}

// A `barge run` in the background, polled without being reaped early.
struct Background {
  pid_t pid = -1;
  bool exited = false;
  int status = 0;

  bool Exited() {
    if (!exited && waitpid(pid, &status, WNOHANG) == pid) exited = true;
    return exited;
  }
  // Waits up to `limit`, then kills it (it alone) and reaps it.
  int Finish(std::chrono::seconds limit) {
    const auto end = std::chrono::steady_clock::now() + limit;
    while (!Exited() && std::chrono::steady_clock::now() < end) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    if (!exited) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      exited = true;
      return -1;
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
};

struct Case {
  std::string env;    // container.env.V
  std::string arg;    // the command's last argument
  std::string label;  // the value of label inject.value
};

// The container's script: reports the hashes of $V and $1, whether the
// marker exists in the container, then waits for the test's go (at most
// 2 minutes) so that the test can inspect the running container.
std::string ContainerScript() {
  return "printf 'inject-env %s\\n' \"$(printf %s \"$V\" | sha256sum)\"; "
         "printf 'inject-arg %s\\n' \"$(printf %s \"$1\" | sha256sum)\"; "
         "if [ -e " + ShellQuote(Marker()) + " ]; then echo inject-pwned-in-container; fi; "
         "echo inject-ready; "
         "i=0; while [ ! -e /tmp/inject-go ] && [ $i -lt 1200 ]; do sleep 0.1; i=$((i+1)); done";
}

std::string JobText(const Case& c, const std::string& tag) {
  return "name: inject\nimage: " + GetBed().image + "\n" + BedHostsYaml(0, 1) +
         "container:\n"
         "  env:\n"
         "    V: " + YamlQuoted(c.env) + "\n"
         "  run_options: [\"--label\", " + YamlQuoted(std::string(kLabelKey) + "=" + c.label) +
         ", \"--label\", \"inject.case=" + tag + "\"]\n"
         "command: [\"sh\", \"-c\", " + YamlQuoted(ContainerScript()) + ", \"x\", " +
         YamlQuoted(c.arg) + "]\n";
}

// The job text read back by barge's own parser carries the case's values
// exactly: the YAML encoding above is right.
void ExpectParsesBack(const std::string& text, const Case& c, const fs::path& dir) {
  barge::runner::LoadedJob loaded = barge::runner::ParseJobText(text, "job.yaml", dir.string());
  ASSERT_TRUE(loaded.errors.empty()) << loaded.errors.front().ToString();
  const auto& spec = *loaded.spec;
  ASSERT_TRUE(spec.container.env.has_value());
  ASSERT_EQ(spec.container.env->size(), 1u);
  EXPECT_EQ(spec.container.env->front().first, "V");
  EXPECT_TRUE(spec.container.env->front().second == c.env)
      << "env: " << Difference(c.env, spec.container.env->front().second);
  ASSERT_TRUE(spec.command.has_value());
  ASSERT_EQ(spec.command->size(), 5u);
  EXPECT_TRUE(spec.command->back() == c.arg) << "arg: " << Difference(c.arg, spec.command->back());
  ASSERT_TRUE(spec.container.run_options.has_value());
  ASSERT_EQ(spec.container.run_options->size(), 4u);
  const std::string label = std::string(kLabelKey) + "=" + c.label;
  EXPECT_TRUE((*spec.container.run_options)[1] == label)
      << "label: " << Difference(label, (*spec.container.run_options)[1]);
}

// About how long the `docker run` command line of a case is: its quoted
// values and script, plus what barge adds (names, labels, flags).
size_t DockerRunLineSize(const Case& c) {
  return ShellQuote(c.env).size() + ShellQuote(c.arg).size() +
         ShellQuote(std::string(kLabelKey) + "=" + c.label).size() +
         ShellQuote(ContainerScript()).size() + 300;
}

// Runs one case on host h1: every check, with `tag` naming the case.
void RunCase(const Case& c, const std::string& tag, size_t line_size) {
  const auto& bed = GetBed();
  const BedHost& host = bed.hosts.at(0);
  JobDir job("injection-" + tag);
  const std::string text = JobText(c, tag);
  ASSERT_NO_FATAL_FAILURE(ExpectParsesBack(text, c, job.path()));
  job.Write(text);

  const auto started = std::chrono::steady_clock::now();
  Background barge{job.Start("run job.yaml")};
  const auto ready_by = started + std::chrono::seconds(90);
  while (ReadWholeFile(job.path() / "out.txt").find("inject-ready") == std::string::npos &&
         !barge.Exited() && std::chrono::steady_clock::now() < ready_by) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }

  // While the container runs: what Docker recorded for it.
  std::string id = Docker(host, "ps -q --filter label=inject.case=" + tag);
  while (!id.empty() && id.back() == '\n') id.pop_back();
  bool inspected = false;
  if (!id.empty() && id.find('\n') == std::string::npos) {
    int code = -1;
    const std::string json = Docker(host, "inspect --type container " + id, &code);
    nlohmann::json doc = nlohmann::json::parse(json, nullptr, /*allow_exceptions=*/false);
    if (code == 0 && doc.is_array() && doc.size() == 1) {
      inspected = true;
      const nlohmann::json& config = doc[0]["Config"];
      const std::string label = config["Labels"].value(kLabelKey, std::string("(missing)"));
      EXPECT_TRUE(label == c.label) << "label in Docker: " << Difference(c.label, label);
      std::optional<std::string> env;
      for (const auto& e : config["Env"]) {
        const std::string kv = e.get<std::string>();
        if (kv.rfind("V=", 0) == 0) env = kv.substr(2);
      }
      // (No ASSERT here: the container must still get its go below.)
      EXPECT_TRUE(env.has_value()) << "no V in the container's environment";
      if (env) {
        EXPECT_TRUE(*env == c.env) << "env in Docker: " << Difference(c.env, *env);
      }
      const nlohmann::json& args = doc[0]["Args"];
      const std::string arg = args.empty() ? "(no arguments)" : args.back().get<std::string>();
      EXPECT_TRUE(arg == c.arg) << "argument in Docker: " << Difference(c.arg, arg);
    } else {
      ADD_FAILURE() << "docker inspect " << id << " failed: " << json.substr(0, 500);
    }
    Docker(host, "exec " + id + " touch /tmp/inject-go");
  }
  const int code = barge.Finish(std::chrono::seconds(60));
  const std::string out = ReadWholeFile(job.path() / "out.txt");
  const std::string err = ReadWholeFile(job.path() / "err.txt");
  EXPECT_TRUE(inspected) << "the container was never seen running (container id '" << id
                         << "'); barge's stderr:\n" << err.substr(0, 2000);
  const bool removed_by_others = err.find("No such container") != std::string::npos ||
                                 err.find("marked for removal") != std::string::npos;
  EXPECT_EQ(code, 0) << "barge run failed; stderr:\n"
                     << err.substr(0, 2000)
                     << (removed_by_others ? "\n(the container vanished under barge: did another "
                                             "test on the shared bed remove every barge container?)"
                                           : "");

  // Inside the container: the hashes of what arrived.
  EXPECT_EQ(Reported(out, "inject-env "), Sha256(job.path(), c.env)) << "env value changed";
  EXPECT_EQ(Reported(out, "inject-arg "), Sha256(job.path(), c.arg)) << "argument changed";

  // Nothing ran: not in the container, not on the host, not here.
  EXPECT_EQ(out.find("inject-pwned-in-container"), std::string::npos) << "a payload ran in the container";
  int present = -1;
  OnHost(host, "test -e " + ShellQuote(Marker()), &present);
  EXPECT_NE(present, 0) << "a payload ran on " << host.name;
  EXPECT_FALSE(fs::exists(Marker())) << "a payload ran on the controller";
  // So that the next case is judged on its own.
  if (present == 0) OnHost(host, "rm -f " + ShellQuote(Marker()));
  if (fs::exists(Marker())) fs::remove(Marker());

  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  std::printf("injection case %s: env %zu B, arg %zu B, label %zu B; docker run line ~%zu KiB "
              "(%s); %.1f s\n",
              tag.c_str(), c.env.size(), c.arg.size(), c.label.size(), line_size / 1024,
              line_size > k64KiB ? "over 64 KiB: through the script" : "in the exec request",
              seconds);
  std::fflush(stdout);
}

TEST(Injection, HostileValuesArriveByteExactThroughEnvArgumentsAndLabelsAndNothingRuns) {
  // BARGE_INJECTION_SEED, else BARGE_TEST_SEED, else a fixed seed (CI).
  const uint64_t seed = barge::testing::TestSeed(20261124, "BARGE_INJECTION_SEED");
  const uint64_t cases = EnvNumber("BARGE_INJECTION_CASES", 20);
  const char* only = std::getenv("BARGE_INJECTION_CASE");
  std::printf("injection seed: %llu (rerun with BARGE_INJECTION_SEED=%llu), %llu random cases, "
              "marker %s\n",
              static_cast<unsigned long long>(seed), static_cast<unsigned long long>(seed),
              static_cast<unsigned long long>(cases), Marker().c_str());
  std::fflush(stdout);
  ASSERT_FALSE(fs::exists(Marker()));

  // Fixed cases first: empty values, quoting's worst case, every payload.
  std::vector<Case> fixed;
  fixed.push_back({"", "", ""});
  fixed.push_back({std::string(k64KiB, '\''), std::string(k64KiB, '\''), std::string(k64KiB, '\'')});
  std::string all;
  for (const std::string& p : Payloads()) all += p;
  fixed.push_back({all, all, all});

  const auto started = std::chrono::steady_clock::now();
  int ran = 0, long_lines = 0;
  const uint64_t total = fixed.size() + cases;
  for (uint64_t i = 0; i < total; ++i) {
    if (only != nullptr && *only != '\0' && std::to_string(i) != only) continue;
    Case c;
    if (i < fixed.size()) {
      c = fixed[i];
    } else {
      // Each case from its own generator: one case can be rerun alone.
      std::mt19937_64 rng(seed * 1000003 + i);
      c.env = HostileValue(rng, RandomLength(rng));
      c.arg = HostileValue(rng, RandomLength(rng));
      c.label = HostileValue(rng, RandomLength(rng));
    }
    const std::string tag = std::to_string(seed) + "-" + std::to_string(i) + "-" +
                            std::to_string(getpid());
    SCOPED_TRACE("seed " + std::to_string(seed) + ", case " + std::to_string(i));
    const size_t line_size = DockerRunLineSize(c);
    RunCase(c, tag, line_size);
    ++ran;
    if (line_size > k64KiB) ++long_lines;
    if (HasFatalFailure()) break;
  }
  std::printf("injection: seed %llu, %d case(s), %d with a docker run line over 64 KiB, in %.1f s\n",
              static_cast<unsigned long long>(seed), ran, long_lines,
              std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
}

// ---------------------------------------------------------------------------
// Refused at validation, before anything connects.

struct Refused {
  std::string what;      // for messages
  std::string yaml;      // the job's lines after name, image and hosts
  std::string message;   // expected in barge's stderr
};

// `barge run` on a job made of `body` (raw bytes allowed) on host h1: it
// must exit 125 with `message` and "nothing was started", having connected
// to nothing and run nothing.
void ExpectRefused(const std::string& hosts_yaml, const Refused& r) {
  SCOPED_TRACE(r.what);
  JobDir job("injection-refused");
  job.Write("name: refused\nimage: " + GetBed().image + "\n" + hosts_yaml + r.yaml);
  CliOutcome o = job.Barge("run job.yaml");
  EXPECT_EQ(o.code, 125) << o.err;
  // Every error names the file, line and column first.
  EXPECT_EQ(o.err.rfind("job.yaml:", 0), 0u) << o.err;
  EXPECT_NE(o.err.find(r.message), std::string::npos) << "want '" << r.message << "' in:\n" << o.err;
  EXPECT_NE(o.err.find("nothing was started"), std::string::npos) << o.err;
  EXPECT_EQ(o.err.find("connecting"), std::string::npos) << o.err;
  EXPECT_EQ(o.out, "");
  EXPECT_FALSE(fs::exists(Marker()));
}

TEST(Injection, NulAndInvalidUtf8AreRefusedWithTheKeyAndTheReason) {
  const std::string hosts = BedHostsYaml(0, 1);
  const std::string m = Marker();
  // The line the job's body starts on, after name, image and hosts.
  const std::string body_line = std::to_string(3 + std::count(hosts.begin(), hosts.end(), '\n'));
  const std::vector<Refused> cases = {
      {"NUL escape in env", "container: {env: {V: \"a\\0$(touch " + m + ")\"}}\n",
       "job.yaml:" + body_line + ":22: container.env.V: NUL character in the value (Docker and "
       "shells cannot carry it)"},
      {"\\x00 escape in env", "container: {env: {V: \"a\\x00b\"}}\n",
       "container.env.V: NUL character in the value"},
      {"\\u0000 escape in env", "container: {env: {V: \"a\\u0000b\"}}\n",
       "container.env.V: NUL character in the value"},
      {"\\U00000000 escape in a command argument",
       "command: [\"sh\", \"-c\", \"true\", \"a\\U00000000b\"]\n",
       "command[3]: NUL character in the value"},
      {"NUL escape in a label", "container: {run_options: [\"--label\", \"k=\\0\"]}\n",
       "container.run_options[1]: NUL character in the value"},
      {"NUL escape in a volume", "container: {volumes: [\"/a\\0b:/x\"]}\n",
       "container.volumes[0]: NUL character in the value"},
      {"a raw NUL byte", std::string("command: [\"echo\", \"a") + '\0' + "b\"]\n",
       "NUL byte in the file; a job file must be UTF-8 text"},
      {"byte 0xFF", "container: {env: {V: \"a\xFF\"}}\n", "invalid UTF-8 (byte 0xFF)"},
      {"a lone continuation byte", "container: {env: {V: \"a\x80\"}}\n",
       "invalid UTF-8 (byte 0x80)"},
      {"an overlong '/'", "command: [\"echo\", \"\xC0\xAF\"]\n", "invalid UTF-8 (byte 0xC0)"},
      {"a surrogate encoded in UTF-8", "container: {run_options: [\"--label\", \"k=\xED\xA0\x80\"]}\n",
       "invalid UTF-8 (byte 0xED)"},
      {"a code point past U+10FFFF", "container: {env: {V: \"\xF4\x90\x80\x80\"}}\n",
       "invalid UTF-8 (byte 0xF4)"},
      {"a truncated sequence", "container: {env: {V: \"\xE2\x82\"}}\n", "invalid UTF-8 (byte 0xE2)"},
      {"a lone surrogate escape", "container: {env: {V: \"a\\uD800b\"}}\n", "invalid unicode"},
      {"an escape past U+10FFFF", "container: {env: {V: \"a\\U00110000\"}}\n", "invalid unicode"},
  };
  for (const Refused& r : cases) ExpectRefused(hosts, r);
}

TEST(Injection, HostileHostAddressesAndVolumePathsAreRefusedBeforeAnythingConnects) {
  const std::string m = Marker();
  const std::string ssh = BedHostsYaml(0, 1).substr(BedHostsYaml(0, 1).find("ssh:"));
  auto host = [&](const std::string& entry) { return "hosts:\n  - " + entry + "\n" + ssh; };
  const std::vector<std::pair<std::string, Refused>> cases = {
      {host("\"10.77.0.2; touch " + m + "\""),
       {"';' in an address", "", "hosts[0]: invalid host address '10.77.0.2; touch"}},
      {host("\"-oProxyCommand=touch " + m + "\""),
       {"an ssh option as an address", "", "hosts[0]: invalid host address '-oProxyCommand"}},
      {host("\"$(touch " + m + ")\""), {"$() in an address", "", "'$' is not allowed in a host name"}},
      {host("\"h1`touch " + m + "`\""), {"backticks in an address", "", "'`' is not allowed"}},
      {host("\"10.77.0.2\\ntouch " + m + "\""),
       {"a newline in an address", "", "byte 0x0A is not allowed in a host name"}},
      {host("{address: 10.77.0.2, internal_address: \"10.0.0.1 && touch " + m + "\"}"),
       {"an internal address", "", "hosts[0].internal_address: invalid host address"}},
      {host("\"user@10.77.0.2\""), {"a user in the address", "", "'@' is not allowed"}},
      {host("\"[10.77.0.2]:22\""), {"a port in brackets", "", "hosts[0]: invalid host address"}},
      {host("\"é.example\""), {"a non-ASCII name", "", "a non-ASCII character is not allowed"}},
      {host("10.77.0.256"), {"a bad IPv4 address", "", "not a valid IPv4 address"}},
      {host("{address: 10.77.0.2, user: \"root; touch " + m + "\"}"),
       {"a user with ';'", "", "hosts[0].user: invalid user name"}},
      {host("{address: 10.77.0.2, docker_command: \"docker; touch " + m + "\"}"),
       {"a docker_command with ';'", "", "hosts[0].docker_command: docker_command \""}},
  };
  for (const auto& [hosts, r] : cases) ExpectRefused(hosts, r);

  const std::string hosts = BedHostsYaml(0, 1);
  const std::string long_path = "/" + std::string(4096, 'a');
  const std::vector<Refused> volumes = {
      {"a relative host path", "container: {volumes: [\"./src:/x\"]}\n",
       "container.volumes[0]: invalid volume './src:/x': host side './src' must be an absolute "
       "path or a volume name"},
      {"a relative container path", "container: {volumes: [\"/src:x\"]}\n",
       "container path 'x' is not an absolute path"},
      {"':' inside a path", "container: {volumes: [\"/data/a:b:/data:ro\"]}\n",
       "too many ':' (a path may not contain ':')"},
      {"a mode with a command", "container: {volumes: [\"/a:/x:ro;touch " + m + "\"]}\n",
       "unknown mode 'ro;touch"},
      {"a host path of PATH_MAX bytes", "container: {volumes: [\"" + long_path + ":/x\"]}\n",
       "host path is 4097 bytes long; the limit is 4095"},
      {"a container path of PATH_MAX bytes", "container: {volumes: [\"/x:" + long_path + "\"]}\n",
       "container path is 4097 bytes long; the limit is 4095"},
      {"an option as a volume name", "container: {volumes: [\"-v:/x\"]}\n",
       "host side '-v' must be an absolute path or a volume name"},
      {"no container path", "container: {volumes: [\"/a\"]}\n",
       "expected HOST_PATH:CONTAINER_PATH[:MODE]"},
  };
  for (const Refused& r : volumes) ExpectRefused(hosts, r);
}

}  // namespace
