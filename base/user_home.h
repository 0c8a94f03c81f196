// The home directory every path barge resolves for SSH starts from.
#pragma once

#include <pwd.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

namespace barge {

// The home directory of the user barge runs as, as the passwd database has
// it: OpenSSH's rule, which libssh (~ in ssh config values, the default
// identities and known_hosts) and the OpenSSH client for jump hosts follow
// too, so that one run never looks in two homes. $HOME is not consulted,
// except when the user has no passwd entry. Empty when neither exists.
// Unit tests may set UserHomeForTesting() to a scratch directory instead.
inline std::string& UserHomeForTesting() {
  static std::string home;
  return home;
}

inline std::string UserHome() {
  if (!UserHomeForTesting().empty()) return UserHomeForTesting();
  struct passwd pw, *found = nullptr;
  char buffer[4096];
  if (getpwuid_r(getuid(), &pw, buffer, sizeof buffer, &found) == 0 && found && found->pw_dir &&
      found->pw_dir[0] != '\0') {
    return found->pw_dir;
  }
  const char* home = std::getenv("HOME");
  return home && *home ? home : "";
}

}  // namespace barge
