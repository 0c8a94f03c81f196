// What the single values of a job file may look like: names, host
// addresses, Docker options. Each check returns OK, or an error whose
// message names the value and what was expected; the caller adds file, line
// and key. Values that reach a remote shell (addresses, user names, paths,
// docker_command) are checked here before they can reach any command line.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace barge::runner {

// `value` quoted for a message: 'value', with control characters escaped
// (\n, \t, \xNN) and, past 60 bytes, shortened to its start and "...".
std::string QuoteValue(std::string_view value);

// A strict decimal integer: optional "-", digits, no leading zeros, no
// "+", within long long. false otherwise.
[[nodiscard]] bool ParseInteger(std::string_view text, long long* out);

// [A-Za-z0-9][A-Za-z0-9_.-]*, at most 63 bytes (it becomes part of
// container names and labels).
[[nodiscard]] Status CheckJobName(std::string_view name);

// "local", a host name or ~/.ssh/config alias (labels of letters, digits,
// '_' and '-', not starting or ending with '-', separated by dots; at most
// 253 bytes), an IPv4 address, or an IPv6 address (without brackets,
// optionally with a %zone).
[[nodiscard]] Status CheckHostAddress(std::string_view address);

// A login name: letters, digits, '_', '.', '-' (not first), optionally
// ending in '$'; at most 64 bytes.
[[nodiscard]] Status CheckUserName(std::string_view user);

// A Docker image reference: [A-Za-z0-9][A-Za-z0-9._/:@-]*, at most 255
// bytes. Docker checks the finer grammar; this keeps out blanks, shell
// syntax and a leading '-'.
[[nodiscard]] Status CheckImageReference(std::string_view image);

// The one grammar of docker_command, used to check it and to build every
// command line.
// Splits a `docker_command` setting such as "sudo -n docker" into words:
// {"sudo", "-n", "docker"}. Words are separated by spaces or tabs and may
// hold only letters, digits and `-_./:=,+@%`: there is no quoting, and
// quotes, `$`, backticks, `~`, globs, redirections, `;`, `&`, `|`, control
// characters and non-ASCII are rejected (each word is quoted later, so a
// shell would never interpret them, and a user who wrote them meant
// something this cannot do). A first word with '=' ("DOCKER_HOST=x docker")
// is rejected with a hint to write "env DOCKER_HOST=x docker". Fails on an
// empty or blank value. Error messages name the setting and the value.
[[nodiscard]] Result<std::vector<std::string>> SplitDockerCommand(std::string_view docker_command);

// SplitDockerCommand succeeds and the first word does not start with '-'.
[[nodiscard]] Status CheckDockerCommand(std::string_view command);

// An environment variable name: [A-Za-z_][A-Za-z0-9_]*.
[[nodiscard]] Status CheckEnvName(std::string_view name);

// A job array's column name: it becomes an environment variable of every
// member and a {array.NAME} placeholder, so it must name no variable that a
// program, a launcher or barge itself reads: lower case only
// ([a-z_][a-z0-9_]*; every variable barge sets and every loader, shell,
// interpreter, MPI and NCCL variable is upper case), and not a proxy
// variable or one of zsh's PATH-like arrays. The error starts with
// "column 'NAME' ".
[[nodiscard]] Status CheckArrayColumnName(std::string_view name);

// A `docker run -v` spec: HOST:CONTAINER[:MODES]. HOST is an absolute path
// or a volume name ([A-Za-z0-9][A-Za-z0-9_.-]*); CONTAINER is an absolute
// path; no path holds ':' and each is shorter than PATH_MAX; MODES are
// comma-separated from ro, rw, z, Z, shared, rshared, slave, rslave,
// private, rprivate, nocopy, consistent, cached, delegated.
[[nodiscard]] Status CheckVolumeSpec(std::string_view spec);

// A `docker run --device` spec: HOST[:CONTAINER][:PERMISSIONS], absolute
// paths, PERMISSIONS made of r, w, m.
[[nodiscard]] Status CheckDeviceSpec(std::string_view spec);

// A Linux capability for --cap-add: [A-Za-z][A-Za-z_]* ("SYS_ADMIN", "ALL").
[[nodiscard]] Status CheckCapability(std::string_view capability);

// --cpus: what container::NanoCpus takes (a decimal above zero, at most 9
// digits either side of the point: "4", "1.5").
[[nodiscard]] Status CheckCpus(std::string_view cpus);

// --ipc: host, private, shareable, none, or container:NAME.
[[nodiscard]] Status CheckIpcMode(std::string_view mode);

// --network: host, bridge, none, container:NAME, or a network NAME.
[[nodiscard]] Status CheckNetworkMode(std::string_view mode);

// A GPU device id for --gpus device=...: an index or a UUID ([A-Za-z0-9-]+).
[[nodiscard]] Status CheckGpuDeviceId(std::string_view id);

// The resource names docker's --ulimit knows (core, cpu, ..., stack).
std::span<const std::string_view> UlimitNames();

// A --ulimit value: LIMIT or SOFT:HARD, each an integer >= -1 (-1 is
// unlimited), SOFT not above HARD.
[[nodiscard]] Status CheckUlimitValue(std::string_view value);

}  // namespace barge::runner
