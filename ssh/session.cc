#include "ssh/session.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pwd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>

#include <spdlog/spdlog.h>

#include "base/user_home.h"
#include "ssh/config_host.h"
#include "ssh/jump_tunnel.h"
#include "ssh/known_hosts.h"

namespace barge::ssh {
namespace {

// libssh's default list with curve25519-sha256 first: it logs in in ~0.14 s
// here against ~0.22 s for the slower ones. An ssh config KexAlgorithms line
// still wins (this is set before the config file is read).
constexpr const char* kKeyExchange =
    "curve25519-sha256,curve25519-sha256@libssh.org,ecdh-sha2-nistp256,"
    "ecdh-sha2-nistp384,ecdh-sha2-nistp521,diffie-hellman-group18-sha512,"
    "diffie-hellman-group16-sha512,diffie-hellman-group-exchange-sha256,"
    "diffie-hellman-group14-sha256";

void EnsureLibsshInitialized() {
  static std::once_flag once;
  std::call_once(once, [] { ssh_init(); });
}

// OpenSSH's rule, as libssh's own: base/user_home.h.
std::string HomeDir() { return UserHome(); }

std::string LocalUserName() {
  struct passwd pw, *found = nullptr;
  char buffer[4096];
  if (getpwuid_r(getuid(), &pw, buffer, sizeof buffer, &found) == 0 && found) return pw.pw_name;
  return "";
}

bool PathExists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

// Reads a string option back from libssh; empty if unset.
std::string GetStringOption(ssh_session session, ssh_options_e option) {
  char* value = nullptr;
  if (ssh_options_get(session, option, &value) != SSH_OK || value == nullptr) return "";
  std::string out = value;
  ssh_string_free_char(value);
  return out;
}

class KeyOwner {
 public:
  KeyOwner() = default;
  ~KeyOwner() { ssh_key_free(key_); }
  KeyOwner(const KeyOwner&) = delete;
  KeyOwner& operator=(const KeyOwner&) = delete;
  ssh_key* out() { return &key_; }
  ssh_key get() const { return key_; }

 private:
  ssh_key key_ = nullptr;
};

}  // namespace

Result<SessionLogin> LoginOf(ssh_session session) {
  if (session == nullptr) return Status::Error("no SSH session");
  SessionLogin login;
  login.user = GetStringOption(session, SSH_OPTIONS_USER);
  if (ssh_options_get_port(session, &login.port) != SSH_OK || login.user.empty()) {
    return Status::Error("cannot read the session's user and port back from libssh");
  }
  KeyOwner server_key;
  char* base64 = nullptr;
  if (ssh_get_server_publickey(session, server_key.out()) != SSH_OK ||
      ssh_pki_export_pubkey_base64(server_key.get(), &base64) != SSH_OK || base64 == nullptr) {
    return Status::Error(std::string("cannot read the session's host key: ") + ssh_get_error(session));
  }
  login.host_key = std::string(ssh_key_type_to_char(ssh_key_type(server_key.get()))) + " " + base64;
  ssh_string_free_char(base64);
  return login;
}

namespace {

// `through_jump`: the host is reached through ProxyJump hops (ssh-keyscan
// from here cannot reach it).
Status VerifyHostKey(ssh_session session, const SessionOptions& options, const std::string& label,
                     const std::string& host, unsigned int port, bool through_jump) {
  KeyOwner server_key;
  if (ssh_get_server_publickey(session, server_key.out()) != SSH_OK) {
    return Status::Error(label + ": cannot get the host key: " + ssh_get_error(session));
  }
  const std::string key_type = ssh_key_type_to_char(ssh_key_type(server_key.get()));
  const std::string fingerprint = Sha256Fingerprint(server_key.get());
  const std::string presented = key_type + " key " + fingerprint;

  std::string known_hosts = GetStringOption(session, SSH_OPTIONS_KNOWNHOSTS);
  if (known_hosts.empty()) known_hosts = options.known_hosts_file;
  if (known_hosts.empty()) known_hosts = HomeDir() + "/.ssh/known_hosts";
  const std::string host_name = KnownHostsName(host, port);

  if (options.host_key_checking == HostKeyChecking::kOff) {
    spdlog::debug("Host key not checked (host_key_checking: off). [host: {}, key: {}]", label,
                  presented);
    return Status::Ok();
  }

  enum ssh_known_hosts_e state = ssh_session_is_known_server(session);
  switch (state) {
    case SSH_KNOWN_HOSTS_OK:
      spdlog::debug("Host key verified. [host: {}, key: {}]", label, presented);
      return Status::Ok();

    case SSH_KNOWN_HOSTS_CHANGED:
    case SSH_KNOWN_HOSTS_OTHER: {
      // libssh consulted the user's file and the global one: the old key
      // may be in either.
      std::vector<KnownHostsLine> old_lines = FindKnownHostsLines(known_hosts, host_name);
      std::string global = GetStringOption(session, SSH_OPTIONS_GLOBAL_KNOWNHOSTS);
      if (!global.empty() && global != known_hosts) {
        for (KnownHostsLine& line : FindKnownHostsLines(global, host_name)) {
          old_lines.push_back(std::move(line));
        }
      }
      return Status::Error(
          label + ": " +
          ChangedHostKeyMessage(host_name, key_type, fingerprint, old_lines, known_hosts));
    }

    case SSH_KNOWN_HOSTS_UNKNOWN:
    case SSH_KNOWN_HOSTS_NOT_FOUND:
      if (options.host_key_checking == HostKeyChecking::kAcceptNew) {
        if (ssh_session_update_known_hosts(session) != SSH_OK) {
          return Status::Error(label + ": cannot record the new host key " + fingerprint + " in " +
                               known_hosts + ": " + ssh_get_error(session));
        }
        spdlog::debug("New host key recorded (accept-new). [host: {}, key: {}, file: {}]", label,
                      presented, known_hosts);
        return Status::Ok();
      }
      return Status::Error(
          label + ": unknown host key: the host presents " + presented + ", and " + known_hosts +
          (PathExists(known_hosts) ? " has no key for " + host_name
                                   : std::string(" does not exist")) +
          ". Check the fingerprint with the host's administrator and add it (" +
          (through_jump
               ? "a line \"" + host_name + " KEYTYPE KEY\" in " + known_hosts
               : "ssh-keyscan -p " + std::to_string(port) + " " + host + " >> " + known_hosts) +
          "), or set host_key_checking: accept-new.");

    case SSH_KNOWN_HOSTS_ERROR:
    default:
      return Status::Error(label + ": cannot check the host key " + fingerprint + " against " +
                           known_hosts + ": " + ssh_get_error(session));
  }
}

// Reads identity_file's key `path` into *key before anything is offered,
// or says why it cannot be used.
Status ImportIdentity(const std::string& path, const std::string& label, ssh_key* key) {
  if (access(path.c_str(), R_OK) != 0) {
    return Status::Error(label + ": cannot read identity file " + path + ": " + std::strerror(errno));
  }
  if (ssh_pki_import_privkey_file(path.c_str(), nullptr, nullptr, nullptr, key) != SSH_OK) {
    return Status::Error(label + ": identity file " + path +
                         " is not a private key barge can use (unknown format, or protected "
                         "by a passphrase: load such keys into ssh-agent instead)");
  }
  return Status::Ok();
}

// What ssh_userauth_publickey's final `rc` (not SSH_AUTH_AGAIN) for the
// key in `path` means.
Status IdentityOutcome(ssh_session session, int rc, const std::string& path, const std::string& label) {
  if (rc == SSH_AUTH_SUCCESS) return Status::Ok();
  if (rc == SSH_AUTH_DENIED) {
    return Status::Error(label + ": permission denied: the host refused the key in " + path);
  }
  if (rc == SSH_AUTH_PARTIAL) {
    return Status::Error(label + ": the key in " + path +
                         " was accepted but the host asks for more authentication, which "
                         "barge does not do");
  }
  return Status::Error(label + ": authentication with " + path + " failed: " + ssh_get_error(session));
}

// What ssh_userauth_publickey_auto's final `rc` (not SSH_AUTH_AGAIN)
// means. That one call tries ssh-agent first (when SSH_AUTH_SOCK is set),
// then the config's IdentityFile entries and the default identities, so
// that a refused agent key is not offered twice (sshd counts every offer
// against MaxAuthTries).
Status AutoOutcome(ssh_session session, int rc, const std::string& label) {
  if (rc == SSH_AUTH_SUCCESS) return Status::Ok();
  if (rc == SSH_AUTH_PARTIAL) {
    return Status::Error(label +
                         ": a key was accepted but the host asks for more authentication, "
                         "which barge does not do");
  }
  if (rc == SSH_AUTH_DENIED) {
    return Status::Error(label + ": permission denied (publickey): tried " +
                         (std::getenv("SSH_AUTH_SOCK") ? "ssh-agent, " : "") +
                         "the ssh config's IdentityFile and the default identities (" + HomeDir() + "/.ssh/id_*); "
                         "set identity_file to choose a key");
  }
  return Status::Error(label + ": authentication failed: " + ssh_get_error(session));
}

std::string MakeLabel(const std::string& user, const std::string& host, unsigned int port,
                      const std::string& alias) {
  std::string label = (user.empty() ? "" : user + "@") + host + ":" + std::to_string(port);
  if (!alias.empty() && alias != host) label += " (" + alias + ")";
  return label;
}

// The numeric address of the peer of socket `fd`; empty when it is not a
// connected TCP/IP socket (a ProxyCommand's socketpair, for instance).
std::string PeerAddress(int fd) {
  if (fd < 0) return "";
  sockaddr_storage peer{};
  socklen_t length = sizeof peer;
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &length) != 0) return "";
  char text[INET6_ADDRSTRLEN] = {0};
  if (peer.ss_family == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(&peer);
    if (inet_ntop(AF_INET, &v4->sin_addr, text, sizeof text) == nullptr) return "";
    return text;
  }
  if (peer.ss_family == AF_INET6) {
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(&peer);
    if (IN6_IS_ADDR_V4MAPPED(&v6->sin6_addr)) {
      in_addr v4;
      std::memcpy(&v4, &v6->sin6_addr.s6_addr[12], sizeof v4);
      if (inet_ntop(AF_INET, &v4, text, sizeof text) == nullptr) return "";
      return text;
    }
    if (inet_ntop(AF_INET6, &v6->sin6_addr, text, sizeof text) == nullptr) return "";
    return text;
  }
  return "";
}

std::string FormatSeconds(long ms) {
  std::string out = std::to_string(ms / 1000);
  if (ms % 1000 != 0) {
    char frac[8];
    std::snprintf(frac, sizeof frac, ".%03ld", ms % 1000);
    std::string f = frac;
    while (f.back() == '0') f.pop_back();
    out += f;
  }
  return out + "s";
}

// Session::Connect's handshake, in the order it runs. Each step works on
// the unconnected (until ConnectBounded) `raw` session, and each error
// message starts with `label`, the host's label as known at that step.

// Sets one libssh option; the error names `what`.
Status SetSshOption(ssh_session raw, const std::string& label, ssh_options_e option,
                    const void* value, const char* what) {
  if (ssh_options_set(raw, option, value) != SSH_OK) {
    return Status::Error(label + ": invalid " + what + ": " + ssh_get_error(raw));
  }
  return Status::Ok();
}

// barge's own options, set before the config file is read: the host as
// given, the key exchange order (kKeyExchange) and TCP_NODELAY.
Status SetInitialOptions(ssh_session raw, const SessionOptions& options, const std::string& label) {
  Status st = SetSshOption(raw, label, SSH_OPTIONS_HOST, options.host.c_str(), "host");
  if (st.ok()) st = SetSshOption(raw, label, SSH_OPTIONS_KEY_EXCHANGE, kKeyExchange, "key exchange list");
  // Many small request/reply exchanges (channel open, exec, close): without
  // TCP_NODELAY each can wait ~40 ms for a delayed ACK.
  int nodelay = 1;
  if (st.ok()) st = SetSshOption(raw, label, SSH_OPTIONS_NODELAY, &nodelay, "option");
  return st;
}

// 1. The ssh config file `config` ("": none): read now, before the job's
// own options, because libssh lets the config overwrite options set
// earlier. Fails when the file does not exist or libssh cannot read it.
Status ReadSshConfig(ssh_session raw, const std::string& config, const std::string& label) {
  if (!config.empty() && !PathExists(config)) {
    return Status::Error(label + ": ssh config file " + config + " does not exist");
  }
  if (!config.empty() && ssh_options_parse_config(raw, config.c_str()) != SSH_OK) {
    return Status::Error(label + ": cannot read ssh config file " + config + ": " +
                         ssh_get_error(raw));
  }
  return Status::Ok();
}

// What OpenSSH's reading of the config (step 1b) settled.
struct OpenSshReading {
  bool used = false;  // it was read and applied over libssh's reading
  std::optional<std::vector<std::string>> jump_hops;  // its ProxyJump hops, if any
};

// The first value of `key` in OpenSSH's reading `g`; "" when it has none.
std::string FirstValue(const OpenSshConfig& g, const char* key) {
  auto it = g.find(key);
  return it == g.end() || it->second.empty() ? "" : it->second.front();
}

// Sets libssh's host, user, port, known_hosts file (the first listed) and
// the identity files other than the default ones from OpenSSH's reading
// `g`, each where it has a value. Stops at the first value libssh refuses.
Status SetFromOpenSsh(ssh_session raw, const std::string& label, const OpenSshConfig& g) {
  Status st;
  if (std::string v = FirstValue(g, "hostname"); !v.empty()) {
    st = SetSshOption(raw, label, SSH_OPTIONS_HOST, v.c_str(), "host");
  }
  if (std::string v = FirstValue(g, "user"); st.ok() && !v.empty()) {
    st = SetSshOption(raw, label, SSH_OPTIONS_USER, v.c_str(), "user");
  }
  if (std::string v = FirstValue(g, "port"); st.ok() && !v.empty()) {
    st = SetSshOption(raw, label, SSH_OPTIONS_PORT_STR, v.c_str(), "port");
  }
  if (std::string v = FirstValue(g, "userknownhostsfile"); st.ok() && !v.empty()) {
    v = v.substr(0, v.find(' '));  // the first of the list
    st = SetSshOption(raw, label, SSH_OPTIONS_KNOWNHOSTS, v.c_str(), "UserKnownHostsFile");
  }
  if (auto ids = g.find("identityfile"); st.ok() && ids != g.end()) {
    for (const std::string& id : ids->second) {
      // libssh tries the default identities anyway.
      if (id.rfind("~/.ssh/id_", 0) == 0 && id.find('/', 10) == std::string::npos) continue;
      st = SetSshOption(raw, label, SSH_OPTIONS_ADD_IDENTITY, id.c_str(), "IdentityFile");
      if (!st.ok()) break;
    }
  }
  return st;
}

// 1b. libssh 0.10 matches the Host blocks after a HostName line against
// that new name, OpenSSH (and the user) against the alias: for an alias
// (the config renamed options.host), OpenSSH's reading of the config
// (ssh -G) gives what those blocks set. Applies it over libssh's
// (SetFromOpenSsh), and its ProxyCommand ("none" without one) unless it
// has ProxyJump hops, which it returns. Where ssh -G cannot tell, logs why
// and returns used = false, libssh's reading standing. Fails only when
// libssh refuses a value.
Result<OpenSshReading> ApplyOpenSshReading(ssh_session raw, const SessionOptions& options,
                                           const std::string& config, const std::string& label) {
  OpenSshReading reading;
  const std::string named = GetStringOption(raw, SSH_OPTIONS_HOST);
  if (config.empty() || named.empty() || named == options.host) return reading;
  auto g = OpenSshConfigFor(config, options.host);
  if (!g.ok()) {
    spdlog::debug("OpenSSH's reading of the ssh config not used. [host: {}, why: {}]", label,
                  g.status().message());
    return reading;
  }
  reading.used = true;
  if (Status st = SetFromOpenSsh(raw, label, *g); !st.ok()) return st;
  ConfigHost found;
  ApplyOpenSshConfig(*g, &found);
  if (!found.jump_hops.empty()) {
    reading.jump_hops = found.jump_hops;
  } else {
    const std::string command = found.proxy_command ? FirstValue(*g, "proxycommand") : "none";
    if (Status st = SetSshOption(raw, label, SSH_OPTIONS_PROXYCOMMAND, command.c_str(), "ProxyCommand");
        !st.ok()) {
      return st;
    }
  }
  return reading;
}

// options.connect_timeout in milliseconds, at least 1.
long ConnectTimeoutMs(const SessionOptions& options) {
  return std::max<long>(1, static_cast<long>(options.connect_timeout.count()));
}

// 2. The job's own options win over the config: port, user, known_hosts
// file, and the timeout `timeout_ms` of each step of the handshake. 3.
// Then ssh_connect is kept from reading the config files again over them.
Status SetJobOptions(ssh_session raw, const SessionOptions& options, const std::string& label,
                     long timeout_ms) {
  Status st;
  if (options.port) {
    unsigned int port = static_cast<unsigned int>(*options.port);
    if (st = SetSshOption(raw, label, SSH_OPTIONS_PORT, &port, "port"); !st.ok()) return st;
  }
  if (options.user) {
    if (st = SetSshOption(raw, label, SSH_OPTIONS_USER, options.user->c_str(), "user"); !st.ok()) return st;
  }
  if (!options.known_hosts_file.empty()) {
    if (st = SetSshOption(raw, label, SSH_OPTIONS_KNOWNHOSTS, options.known_hosts_file.c_str(),
                          "known_hosts file");
        !st.ok()) {
      return st;
    }
  }
  long seconds = timeout_ms / 1000;
  long usec = (timeout_ms % 1000) * 1000;
  if (st = SetSshOption(raw, label, SSH_OPTIONS_TIMEOUT, &seconds, "timeout"); !st.ok()) return st;
  if (st = SetSshOption(raw, label, SSH_OPTIONS_TIMEOUT_USEC, &usec, "timeout"); !st.ok()) return st;
  bool process_config = false;
  return SetSshOption(raw, label, SSH_OPTIONS_PROCESS_CONFIG, &process_config, "option");
}

// Where the session goes, read back from libssh once every option is set.
struct ConnectTarget {
  std::string host;        // libssh's host, else options.host
  unsigned int port = 22;  // libssh's port, else 22
  std::string label;       // MakeLabel of them, the user (else the local one) and the alias
};

// The ConnectTarget libssh's options name now (after steps 1 to 3).
ConnectTarget ReadBackTarget(ssh_session raw, const SessionOptions& options) {
  ConnectTarget target;
  target.host = GetStringOption(raw, SSH_OPTIONS_HOST);
  if (target.host.empty()) target.host = options.host;
  std::string user = GetStringOption(raw, SSH_OPTIONS_USER);
  if (user.empty()) user = LocalUserName();
  if (ssh_options_get_port(raw, &target.port) != SSH_OK || target.port == 0) target.port = 22;
  target.label = MakeLabel(user, target.host, target.port, options.host);
  return target;
}

// 4. ProxyJump: the hops of OpenSSH's reading where it was used, else those
// of the ProxyCommand libssh made of the config's ProxyJump line; the job's
// own (options.proxy_jump, as ssh -J) win over both. With hops, makes
// barge's own command for OpenSSH's client (ssh/jump_tunnel.h), sets it as
// libssh's ProxyCommand, and sets *jump_known_hosts to the known_hosts file
// the hops check; without, returns null. Errors start with target.label.
Result<std::unique_ptr<JumpTunnel>> MakeJumpTunnelFor(ssh_session raw, const SessionOptions& options,
                                                      const std::string& config,
                                                      const OpenSshReading& reading,
                                                      const ConnectTarget& target,
                                                      std::string* jump_known_hosts) {
  auto hops = reading.used ? reading.jump_hops
                           : ProxyJumpHops(GetStringOption(raw, SSH_OPTIONS_PROXYCOMMAND));
  if (!options.proxy_jump.empty()) hops = options.proxy_jump;  // the job's own, as ssh -J
  if (!hops) return std::unique_ptr<JumpTunnel>();
  *jump_known_hosts = options.known_hosts_file;
  if (jump_known_hosts->empty()) {
    *jump_known_hosts = ExpandKnownHostsPath(GetStringOption(raw, SSH_OPTIONS_KNOWNHOSTS), HomeDir());
  }
  auto made = JumpTunnel::Make(*hops, target.host, target.port, options, *jump_known_hosts, config);
  if (!made.ok()) return made.status().Prefixed(target.label);
  std::unique_ptr<JumpTunnel> tunnel = std::move(made).value();
  if (Status st = SetSshOption(raw, target.label, SSH_OPTIONS_PROXYCOMMAND,
                               tunnel->proxy_command().c_str(), "ProxyJump");
      !st.ok()) {
    return st;
  }
  return tunnel;
}

}  // namespace

std::string Sha256Fingerprint(ssh_key key) {
  unsigned char* hash = nullptr;
  size_t length = 0;
  if (key == nullptr ||
      ssh_get_publickey_hash(key, SSH_PUBLICKEY_HASH_SHA256, &hash, &length) != SSH_OK) {
    return "";
  }
  char* text = ssh_get_fingerprint_hash(SSH_PUBLICKEY_HASH_SHA256, hash, length);
  ssh_clean_pubkey_hash(&hash);
  if (text == nullptr) return "";
  std::string out = text;
  ssh_string_free_char(text);
  return out;
}

Session::Session(ssh_session session, std::string label)
    : session_(session), label_(std::move(label)) {}

Session::~Session() {
  if (session_ == nullptr) return;
  if (ssh_is_connected(session_)) ssh_disconnect(session_);
  ssh_free(session_);
}

Result<std::unique_ptr<Session>> Session::Connect(const SessionOptions& options) {
  Result<std::unique_ptr<SessionHandshake>> started = SessionHandshake::Start(options);
  if (!started.ok()) return started.status();
  SessionHandshake& handshake = **started;
  while (!handshake.Advance()) {
    const auto left = handshake.deadline() - SessionHandshake::Clock::now();
    if (left <= SessionHandshake::Clock::duration::zero()) {
      handshake.Expire();
      break;
    }
    pollfd socket{handshake.fd(), handshake.events(), 0};
    const auto wait_ms = std::chrono::ceil<std::chrono::milliseconds>(left).count();
    if (poll(&socket, 1, static_cast<int>(std::min<long long>(wait_ms, INT_MAX))) < 0 && errno != EINTR) {
      return Status::Error(handshake.label() + ": cannot wait for the connection: " + std::strerror(errno));
    }
  }
  return handshake.TakeResult();
}

// The steps, in the order they run: Start (1 to 4), then from Advance the
// TCP connect (or the proxy's), banner and key exchange (5), the host key
// (6) and the authentication (7).
Result<std::unique_ptr<SessionHandshake>> SessionHandshake::Start(const SessionOptions& options) {
  EnsureLibsshInitialized();
  std::unique_ptr<SessionHandshake> h(new SessionHandshake());
  h->options_ = options;
  h->started_ = Clock::now();
  // A label for errors before the config file is read.
  std::string label = MakeLabel(options.user.value_or(""), options.host, options.port.value_or(22), "");
  if (options.host.empty()) return Status::Error("ssh: no host given");

  ssh_session raw = ssh_new();
  if (raw == nullptr) return Status::Error(label + ": cannot create an ssh session");
  // Owns `raw` until it is handed over by TakeResult.
  h->session_.reset(new Session(raw, label));

  // Resolve: barge's options, the ssh config file, OpenSSH's reading of it
  // for an alias, then the job's own options; then read back where to go.
  if (Status st = SetInitialOptions(raw, options, label); !st.ok()) return st;
  const std::string config = ConfigFileFor(options);
  if (Status st = ReadSshConfig(raw, config, label); !st.ok()) return st;
  Result<OpenSshReading> reading = ApplyOpenSshReading(raw, options, config, label);
  if (!reading.ok()) return reading.status();
  h->timeout_ms_ = ConnectTimeoutMs(options);
  if (Status st = SetJobOptions(raw, options, label, h->timeout_ms_); !st.ok()) return st;
  const ConnectTarget target = ReadBackTarget(raw, options);
  h->label_ = target.label;
  h->session_->label_ = target.label;
  h->host_ = target.host;
  h->port_ = target.port;

  Result<std::unique_ptr<JumpTunnel>> made =
      MakeJumpTunnelFor(raw, options, config, *reading, target, &h->jump_known_hosts_);
  if (!made.ok()) return made.status();
  h->tunnel_ = std::move(made).value();
  spdlog::debug("SSH connect: start. [host: {}, config: {}, timeout_ms: {}, proxy_jump: {}]", h->label_,
                config.empty() ? "none" : config, h->timeout_ms_, h->tunnel_ ? h->tunnel_->hops() : "none");
  h->through_jump_ = h->tunnel_ != nullptr;
  h->session_->through_proxy_ = h->through_jump_ || !GetStringOption(raw, SSH_OPTIONS_PROXYCOMMAND).empty();
  ssh_set_blocking(raw, 0);
  h->deadline_ = h->started_ + options.connect_timeout;
  return h;
}

SessionHandshake::~SessionHandshake() { ssh_key_free(identity_); }

int SessionHandshake::fd() const {
  return session_ ? static_cast<int>(ssh_get_fd(session_->raw())) : -1;
}

short SessionHandshake::events() const {
  short want = POLLIN;
  if (session_ && (ssh_get_poll_flags(session_->raw()) & SSH_WRITE_PENDING)) want |= POLLOUT;
  return want;
}

bool SessionHandshake::Fail(Status why) {
  failed_ = std::move(why);
  step_ = Step::kEnded;
  tunnel_.reset();
  return true;
}

bool SessionHandshake::Advance() {
  if (step_ == Step::kConnecting) {
    const int rc = ssh_connect(session_->raw());
    if (rc == SSH_AGAIN) {
      if (fd() < 0) return Fail(Status::Error(label_ + ": cannot connect: libssh has no socket"));
      return false;
    }
    // 5. The connection, 6. the host key (local), then the identity file.
    if (Status st = EndConnect(rc == SSH_OK, /*expired=*/false); !st.ok()) return Fail(st);
    if (Status st = VerifyHostKey(session_->raw(), options_, label_, host_, port_, through_jump_); !st.ok()) {
      return Fail(st);
    }
    if (Status st = PrepareAuthentication(); !st.ok()) return Fail(st);
  }
  if (step_ == Step::kAuthenticating) return Authenticate();
  return true;
}

// Ends step 5, successful or not: the jump hosts' ssh processes have read
// their config by now (the target answered through them, or the attempt is
// over), so the tunnel's directory goes. Fails with "LABEL: connection[
// through ProxyJump HOPS] timed out after Ns (why)" when the deadline
// passed (`expired`), libssh says it timed out or the attempt ran
// options.connect_timeout, else with "LABEL: cannot connect[ through
// ProxyJump HOPS]: why", where why is the hops' own failure
// (DescribeJumpFailure) when they wrote one.
Status SessionHandshake::EndConnect(bool connected, bool expired) {
  const std::string jump_errors = tunnel_ ? tunnel_->ErrorOutput() : "";
  const std::string via = tunnel_ ? " through ProxyJump " + tunnel_->hops() : "";
  tunnel_.reset();
  if (connected) return Status::Ok();
  std::string why = expired ? "Timeout connecting to " + host_ : ssh_get_error(session_->raw());
  if (!jump_errors.empty()) {
    // libssh only saw the proxy go away.
    why = DescribeJumpFailure(jump_errors, jump_known_hosts_);
  }
  const bool timed_out = expired || why.find("imeout") != std::string::npos ||
                         Clock::now() - started_ >= options_.connect_timeout;
  if (timed_out) {
    return Status::Error(label_ + ": connection" + via + " timed out after " + FormatSeconds(timeout_ms_) +
                         " (" + why + ")");
  }
  return Status::Error(label_ + ": cannot connect" + via + ": " + why);
}

// 7, first: with identity_file, that key only, read before anything is
// offered; otherwise libssh's automatic public key auth (AutoOutcome).
// The authentication gets a deadline of its own.
Status SessionHandshake::PrepareAuthentication() {
  step_ = Step::kAuthenticating;
  deadline_ = Clock::now() + options_.connect_timeout;
  if (!options_.identity_file) return Status::Ok();
  return ImportIdentity(*options_.identity_file, label_, &identity_);
}

bool SessionHandshake::Authenticate() {
  ssh_session raw = session_->raw();
  const int rc = identity_ != nullptr ? ssh_userauth_publickey(raw, nullptr, identity_)
                                      : ssh_userauth_publickey_auto(raw, nullptr, nullptr);
  if (rc == SSH_AUTH_AGAIN) {
    if (fd() >= 0) return false;
    return Fail(Status::Error(label_ + ": connection lost while authenticating: " + ssh_get_error(raw)));
  }
  Status st = identity_ != nullptr ? IdentityOutcome(raw, rc, *options_.identity_file, label_)
                                   : AutoOutcome(raw, rc, label_);
  if (!st.ok()) return Fail(st);
  if (!session_->through_proxy_) session_->peer_address_ = PeerAddress(ssh_get_fd(raw));
  ssh_set_blocking(raw, 1);
  step_ = Step::kEnded;
  spdlog::debug("SSH connect: done. [host: {}, peer: {}, ms: {}]", label_,
                session_->peer_address_.empty() ? "none" : session_->peer_address_,
                std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started_).count());
  return true;
}

void SessionHandshake::Expire() {
  if (step_ == Step::kConnecting) {
    Fail(EndConnect(/*connected=*/false, /*expired=*/true));
  } else if (step_ == Step::kAuthenticating) {
    Fail(Status::Error(label_ + ": authentication timed out after " + FormatSeconds(timeout_ms_)));
  }
}

Result<std::unique_ptr<Session>> SessionHandshake::TakeResult() {
  if (failed_) return *failed_;
  if (step_ != Step::kEnded || !session_) return Status::Error(label_ + ": the handshake has not ended");
  return std::move(session_);
}

}  // namespace barge::ssh
