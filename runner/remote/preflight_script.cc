// A host's preflight as one remote script, and the reading of its reply.
#include "runner/remote/preflight_script.h"

#include "runner/remote/rdma.h"

#include <algorithm>

#include "container/docker_args.h"
#include "runner/remote/host_address.h"
#include "runner/remote/rdma.h"

namespace barge::runner {

namespace {

constexpr std::string_view kBegin = "@@barge{ ";
constexpr std::string_view kEnd = "@@barge} ";

std::string TrimNewlines(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
  return s;
}

}  // namespace

std::string SectionMarkers() {
  // The empty line ends a last line that has no newline.
  return "bs() { echo \"" + std::string(kBegin) + "$1\"; }\nbe() { echo; echo \"" + std::string(kEnd) +
         "$1 $2\"; }\n";
}

std::string PreflightScript(const DockerCommands& docker, const PreflightChecks& c) {
  const long long secs = std::max<long long>(1, (c.engine_timeout.count() + 999) / 1000);
  const int tries = std::max(1, c.engine_misses);
  std::string s;
  // The probe comes first: a login shell that is not POSIX fails on it.
  s += PosixShellProbe() + "\n";
  // bd: a Docker CLI call bounded by the engine timeout, tried again after
  // a timeout (137), `tries` times in all. bs/be: a section's markers (the
  // empty line ends a last line that has no newline).
  s += "T=; command -v timeout >/dev/null 2>&1 && T='timeout -s KILL " + std::to_string(secs) + "'\n";
  s += "bd() { n=0; while :; do $T \"$@\"; r=$?; n=$((n+1)); if [ $r -ne 137 ] || [ $n -ge " +
       std::to_string(tries) + " ]; then return $r; fi; done; }\n";
  s += SectionMarkers();
  const bool host = c.part != PreflightPart::kEngine;
  const bool engine = c.part != PreflightPart::kHost;
  // The watchdog first: it needs no engine, and it is armed before anything
  // can start.
  if (host) s += "bs watchdog; { " + c.arm_watchdog + "; } 2>&1; be watchdog $?\n";
  // The job's holds next (runner/remote/reservation.h): the watchdog that
  // releases them when the lease lapses is armed.
  if (engine && !c.hold.empty()) s += "bs hold; (\n" + c.hold + "\n) 2>&1; be hold $?\n";
  s += "F=0; G=\n";
  if (engine && c.pull_always) s += "F=1\n";
  for (size_t i = 0; engine && i < c.images.size() && !c.pull_always; ++i) {
    const std::string name = "image" + std::to_string(i);
    s += "bs " + name + "; o=$(bd " + docker.Line(container::ImageStorageInspectArgs(c.images[i])) +
         " 2>&1); r=$?; printf '%s\\n' \"$o\"; be " + name + " $r\n";
    s += "[ $r -eq 0 ] || F=1; [ -n \"$G\" ] || case \"$o\" in *' /'*) G=${o#* } ;; esac\n";
  }
  if (engine) s += "if [ $F -ne 0 ]; then bs engine; bd " + docker.Version() + " 2>&1; be engine $?; fi\n";
  // The job's directory (/tmp) and the engine's storage: room for both.
  const std::string disk = c.part == PreflightPart::kAll    ? "/tmp \"${G:-/}\""
                           : c.part == PreflightPart::kHost ? "/tmp"
                                                            : "\"${G:-/}\"";
  s += "bs disk; df -Pk " + disk + " 2>&1; be disk $?\n";
  if (host && c.tcp_tables) s += "bs ports; " + HostTcpTables() + " 2>&1; be ports $?\n";
  if (host && c.gpu_probe) s += "bs gpu; " + *c.gpu_probe + " 2>&1; be gpu $?\n";
  if (host && !c.gpu_health.empty()) s += c.gpu_health;
  if (host && c.interfaces) s += "bs iface; " + InterfacesCommand() + "; be iface 0\n";
  if (host && c.rdma) s += "bs ib; " + rdma::RdmaCommand() + "; be ib 0\n";
  // The CLI's engine: DOCKER_HOST's socket, or the default one; a context
  // (DOCKER_CONTEXT, or a currentContext in the CLI's config) is not read.
  if (host && c.engine_socket) {
    s += "bs socket; C=${DOCKER_CONFIG:-$HOME/.docker}/config.json; "
         "if [ -n \"${DOCKER_CONTEXT:-}\" ]; then echo context; "
         "elif [ -f \"$C\" ] && grep -q currentContext \"$C\" 2>/dev/null; then echo context; "
         "else case ${DOCKER_HOST:-} in '') echo /var/run/docker.sock;; unix://*) echo \"${DOCKER_HOST#unix://}\";; "
         "*) echo \"other $DOCKER_HOST\";; esac; fi; be socket 0\n";
  }
  return s;
}

std::optional<std::string> EngineSocketOf(std::string_view text) {
  std::string path = TrimNewlines(std::string(text.substr(text.rfind('\n') + 1)));
  if (path.empty() || path[0] != '/') return std::nullopt;
  return path;
}

const PreflightSection* PreflightReply::Find(std::string_view name) const {
  auto it = sections.find(name);
  return it == sections.end() ? nullptr : &it->second;
}

PreflightReply ParsePreflightReply(std::string_view out) {
  PreflightReply reply;
  std::optional<std::string> open;  // the section being read
  std::string text;
  bool first = true;
  size_t pos = 0;
  while (pos < out.size()) {
    size_t nl = out.find('\n', pos);
    std::string_view line = out.substr(pos, nl == std::string_view::npos ? out.size() - pos : nl - pos);
    pos = nl == std::string_view::npos ? out.size() : nl + 1;
    if (first) {
      first = false;
      reply.first_line = TrimNewlines(std::string(line));
      reply.posix_shell = reply.first_line == kPosixShellAnswer;
      continue;
    }
    if (line.substr(0, kBegin.size()) == kBegin) {
      open = std::string(line.substr(kBegin.size()));
      text.clear();
      continue;
    }
    if (open && line.substr(0, kEnd.size()) == kEnd) {
      std::string_view rest = line.substr(kEnd.size());
      const size_t sp = rest.rfind(' ');
      if (sp != std::string_view::npos && rest.substr(0, sp) == *open) {
        PreflightSection section;
        try {
          section.exit = std::stoi(std::string(rest.substr(sp + 1)));
        } catch (...) {
          section.exit = -1;
        }
        section.text = TrimNewlines(text);
        reply.sections[*open] = std::move(section);
        open.reset();
        continue;
      }
    }
    if (open) {
      text += line;
      text += '\n';
    }
  }
  return reply;
}

std::string ImageIdOf(std::string_view section_text) {
  // The last line: a try that timed out before it left a shell's "Killed".
  std::string_view last = section_text.substr(section_text.rfind('\n') + 1);
  return std::string(last.substr(0, last.find(' ')));
}

}  // namespace barge::runner
