// The home directory of the user barge runs as: the one place that reads the
// passwd database and $HOME for it, and the XDG Base Directory variables.
#pragma once

#include <pwd.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

namespace barge {

// Which of the two places a home directory is known wins.
enum class HomeRule {
  // The passwd entry's home, else (no entry) $HOME: OpenSSH's rule, which
  // libssh (~ in ssh config values, the default identities and known_hosts)
  // and the OpenSSH client for jump hosts follow too, so that one run never
  // looks in two homes. For ~ in job files and everything SSH reads.
  kOpenSsh,
  // $HOME, else (unset or empty) the passwd entry's home: the XDG Base
  // Directory spec's rule, for the defaults under it (the state directory's
  // ~/.local/state, config.yaml's ~/.config).
  kXdg,
};

// Unit tests may set UserHomeForTesting() to a scratch directory: it then
// stands in for the passwd entry's home under both rules.
inline std::string& UserHomeForTesting() {
  static std::string home;
  return home;
}

// The home directory by `rule`; empty when neither place has one.
inline std::string UserHome(HomeRule rule = HomeRule::kOpenSsh) {
  const char* env = std::getenv("HOME");
  const std::string env_home = env && *env ? env : "";
  if (rule == HomeRule::kXdg && !env_home.empty()) return env_home;
  if (!UserHomeForTesting().empty()) return UserHomeForTesting();
  struct passwd pw, *found = nullptr;
  char buffer[4096];
  if (getpwuid_r(getuid(), &pw, buffer, sizeof buffer, &found) == 0 && found && found->pw_dir &&
      found->pw_dir[0] != '\0') {
    return found->pw_dir;
  }
  return env_home;
}

// The value of the XDG Base Directory variable `name` (XDG_STATE_HOME,
// XDG_CONFIG_HOME) when it is an absolute path; empty when it is unset,
// empty or relative (the spec: a relative path is invalid and is ignored,
// the default used instead).
inline std::string XdgDirFromEnv(const char* name) {
  const char* value = std::getenv(name);
  return value && value[0] == '/' ? value : "";
}

}  // namespace barge
