// PortForward: a local listener whose connections are relayed over
// direct-tcpip channels (or plain TCP for the local engine) by one poll hook.
#include "ssh/port_forward.h"

#include "ssh/channel_errors.h"
#include "base/peer_owner.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include <libssh/libssh.h>
#include <spdlog/spdlog.h>


namespace barge::ssh {
namespace {

constexpr size_t kForwardChunk = 64 * 1024;
// More connections than this at once are closed as soon as accepted.
constexpr size_t kMaxConnections = 512;

bool WouldBlock(int e) { return e == EAGAIN || e == EWOULDBLOCK || e == EINTR; }

}  // namespace


// One client connection and its way to the target. Owned by conns_.
struct PortForward::Conn {
  enum class State { kNew, kOpening, kOpen };
  uint64_t id = 0;
  int fd = -1;                    // the client's socket
  ssh_channel channel = nullptr;  // SSH: the direct-tcpip channel
  int remote_fd = -1;             // local engine: our socket to the target
  State state = State::kNew;
  std::string down;  // from the target, not yet taken by the client
  size_t down_off = 0;
  std::string up;  // from the client, not yet taken by the target
  size_t up_off = 0;
  bool client_eof = false;  // the client sent FIN
  bool remote_eof = false;  // the target's side ended
  bool eof_sent = false;    // the target was told the client's FIN
  bool client_shut = false;  // the client was told the target's end
  short watched = 0;         // events of fd watched in the loop
  short remote_watched = 0;  // events of remote_fd watched in the loop

  // One pass of each direction, once open: reads from one side only what
  // the other has taken (and, to a channel, what its window has room for),
  // writes what the other side takes now, and passes an end on once all
  // before it was taken. `buf` holds kForwardChunk bytes. Set *moved when
  // anything moved; false once the connection is over (an error on either
  // side, or the client gone).
  bool PumpDown(char* buf, bool* moved);  // target -> client
  bool PumpUp(char* buf, bool* moved);    // client -> target
  // True when both directions ended, or the target is gone with nothing
  // left for the client.
  bool Over() const;
};

bool PortForward::Conn::PumpDown(char* buf, bool* moved) {
  if (down_off == down.size() && !remote_eof) {
    down.clear();
    down_off = 0;
    if (channel) {
      int n = ssh_channel_read_nonblocking(channel, buf, kForwardChunk, 0);
      if (n > 0) {
        down.assign(buf, static_cast<size_t>(n));
      } else if (n == SSH_EOF || (n == 0 && ssh_channel_is_eof(channel))) {
        remote_eof = true;
      } else if (n < 0) {
        return false;
      }
    } else {
      ssize_t n = recv(remote_fd, buf, kForwardChunk, 0);
      if (n > 0) {
        down.assign(buf, static_cast<size_t>(n));
      } else if (n == 0) {
        remote_eof = true;
      } else if (!WouldBlock(errno)) {
        return false;
      }
    }
    *moved |= !down.empty() || remote_eof;
  }
  if (down_off < down.size()) {
    ssize_t n = send(fd, down.data() + down_off, down.size() - down_off, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      down_off += static_cast<size_t>(n);
      *moved = true;
    } else if (n < 0 && !WouldBlock(errno)) {
      return false;  // the client went away
    }
  }
  if (down_off == down.size() && remote_eof && !client_shut) {
    shutdown(fd, SHUT_WR);
    client_shut = true;
    *moved = true;
  }
  return true;
}

bool PortForward::Conn::PumpUp(char* buf, bool* moved) {
  size_t room = kForwardChunk;
  if (channel) room = std::min<size_t>(room, ssh_channel_window_size(channel));
  if (up_off == up.size() && !client_eof && room > 0) {
    up.clear();
    up_off = 0;
    ssize_t n = recv(fd, buf, room, 0);
    if (n > 0) {
      up.assign(buf, static_cast<size_t>(n));
      *moved = true;
    } else if (n == 0) {
      client_eof = true;
      *moved = true;
    } else if (!WouldBlock(errno)) {
      return false;
    }
  }
  if (up_off < up.size()) {
    const size_t want = up.size() - up_off;
    if (channel) {
      const size_t n = std::min<size_t>(want, ssh_channel_window_size(channel));
      if (n > 0) {
        int rc = ssh_channel_write(channel, up.data() + up_off, static_cast<uint32_t>(n));
        if (rc == SSH_ERROR) return false;
        if (rc > 0) {
          up_off += static_cast<size_t>(rc);
          *moved = true;
        }
      }
    } else {
      ssize_t n = send(remote_fd, up.data() + up_off, want, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) {
        up_off += static_cast<size_t>(n);
        *moved = true;
      } else if (n < 0 && !WouldBlock(errno)) {
        return false;
      }
    }
  }
  if (up_off == up.size() && client_eof && !eof_sent) {
    if (channel) {
      ssh_channel_send_eof(channel);
    } else {
      shutdown(remote_fd, SHUT_WR);
    }
    eof_sent = true;
    *moved = true;
  }
  return true;
}

bool PortForward::Conn::Over() const {
  if (client_shut && eof_sent) return true;
  return channel && ssh_channel_is_closed(channel) && down_off == down.size();
}

Result<std::unique_ptr<PortForward>> PortForward::Listen(EventLoop* loop, int local_port) {
  const std::string where = "127.0.0.1:" + std::to_string(local_port);
  if (local_port < 0 || local_port > 65535) {
    return Status::Error("local port " + std::to_string(local_port) + " is not a TCP port");
  }
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::Error("cannot listen on " + where + ": " + std::strerror(errno));
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(local_port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || listen(fd, 128) != 0) {
    const int e = errno;
    close(fd);
    if (e == EADDRINUSE) {
      return Status::Error("local port " + where +
                           " is already in use (another process listens there; choose another "
                           "LOCAL port, e.g. \"" +
                           std::to_string(local_port + 10000 <= 65535 ? local_port + 10000 : 0) +
                           ":REMOTE\")");
    }
    return Status::Error("cannot listen on " + where + ": " + std::strerror(e));
  }
  socklen_t len = sizeof addr;
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  return std::unique_ptr<PortForward>(new PortForward(loop, fd, ntohs(addr.sin_port)));
}

Result<std::unique_ptr<PortForward>> PortForward::ListenUnix(EventLoop* loop, const std::string& path) {
  sockaddr_un addr{};
  if (path.empty() || path.size() >= sizeof addr.sun_path) {
    return Status::Error("unix socket path '" + path + "' is empty or longer than " +
                         std::to_string(sizeof addr.sun_path - 1) + " bytes");
  }
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::Error("cannot listen on " + path + ": " + std::strerror(errno));
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size());
  // 0600 from the start: no moment in which another user could connect.
  const mode_t old_mask = umask(0177);
  const int bound = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  const int bind_errno = errno;
  umask(old_mask);
  if (bound != 0 || listen(fd, 128) != 0) {
    const int e = bound != 0 ? bind_errno : errno;
    close(fd);
    if (e == EADDRINUSE) return Status::Error(path + " already exists: remove it or choose another path");
    return Status::Error("cannot listen on " + path + ": " + std::strerror(e));
  }
  auto forward = std::unique_ptr<PortForward>(new PortForward(loop, fd, 0));
  forward->unix_path_ = path;
  return forward;
}

PortForward::PortForward(EventLoop* loop, int listen_fd, int local_port)
    : loop_(loop), listen_fd_(listen_fd), local_port_(local_port) {}

PortForward::~PortForward() {
  Stop();
  if (listen_fd_ >= 0) close(listen_fd_);
  if (!unix_path_.empty()) unlink(unix_path_.c_str());
}

void PortForward::Serve(Executor* via, std::string target_host, int target_port,
                        std::function<void(const Status&)> on_fatal) {
  Stop();
  if (listen_fd_ < 0) return;  // ended for good by a fatal error
  via_ = via;
  via_ssh_ = via->channel_session() != nullptr;
  target_host_ = std::move(target_host);
  target_port_ = target_port;
  on_fatal_ = std::move(on_fatal);
  failed_ = false;
  listening_ = true;
  loop_->WatchFd(listen_fd_, POLLIN, [this](short) { Accept(); });
  hook_ = loop_->AddPollHook([this] { Service(); });
}

void PortForward::Stop() {
  if (listening_) loop_->UnwatchFd(listen_fd_);
  listening_ = false;
  if (hook_ != 0) loop_->RemovePollHook(hook_);
  hook_ = 0;
  for (auto& c : conns_) Close(*c);
  conns_.clear();
}

void PortForward::Accept() {
  // From the loop's fd callback (inside libssh's dispatch): sockets only; the
  // poll hook that runs after it opens the channels.
  for (;;) {
    int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;  // EAGAIN, or an error that the next accept repeats
    if (conns_.size() >= kMaxConnections || failed_) {
      close(fd);
      continue;
    }
    // Only the user barge runs as (see the header).
    if (std::optional<uid_t> owner = PeerUid(fd); !owner || *owner != geteuid()) {
      ++refused_;
      spdlog::warn("Port forward: refused a connection of another user. [port: {}, uid: {}]", local_port_,
                   owner ? std::to_string(*owner) : std::string("unknown"));
      close(fd);
      continue;
    }
    auto c = std::make_unique<Conn>();
    c->id = ++accepted_;
    c->fd = fd;
    conns_.push_back(std::move(c));
  }
}

void PortForward::Fatal(const Status& why, bool final) {
  if (failed_) return;
  failed_ = true;
  spdlog::debug("Port forward: stopped. [port: {}, why: {}]", local_port_, why.message());
  if (listening_) loop_->UnwatchFd(listen_fd_);
  listening_ = false;
  // Closed, not only unwatched: a client that comes later is refused at
  // once instead of waiting in the backlog. Nothing is retried.
  if (final && listen_fd_ >= 0) {
    close(listen_fd_);
    listen_fd_ = -1;
  }
  // From a timer, not from inside Service: the callback may stop or destroy
  // this forward.
  if (on_fatal_) {
    loop_->AddTimer(EventLoop::Clock::now(), [fn = on_fatal_, why] { fn(why); });
  }
}

void PortForward::Service() {
  if (failed_) {
    for (auto& c : conns_) Close(*c);
    conns_.clear();
    return;
  }
  if (Status health = via_->health(); !health.ok()) {
    Fatal(health, /*final=*/false);
    return;
  }
  for (auto it = conns_.begin(); it != conns_.end();) {
    Conn& c = **it;
    if (!failed_ && Pump(c)) {
      ++it;
      continue;
    }
    Close(c);
    it = conns_.erase(it);
  }
  if (failed_) {
    for (auto& c : conns_) Close(*c);
    conns_.clear();
  }
}

void PortForward::Close(Conn& c) {
  if (c.watched) loop_->UnwatchFd(c.fd);
  if (c.remote_watched) loop_->UnwatchFd(c.remote_fd);
  c.watched = c.remote_watched = 0;
  if (c.fd >= 0) close(c.fd);
  if (c.remote_fd >= 0) close(c.remote_fd);
  c.fd = c.remote_fd = -1;
  if (c.channel) {
    ssh_channel_free(c.channel);  // sends a close if open
    c.channel = nullptr;
  }
}

bool PortForward::Pump(Conn& c) {
  if (!(via_ssh_ ? OpenChannel(c) : OpenSocket(c))) return false;
  if (c.state != Conn::State::kOpen) return true;  // still opening
  // Moving bytes, as long as something moves (bounded per pass).
  char buf[kForwardChunk];
  for (int pass = 0; pass < 16; ++pass) {
    bool moved = false;
    if (!c.PumpDown(buf, &moved) || !c.PumpUp(buf, &moved)) return false;
    if (!moved) break;
  }
  if (c.Over()) return false;
  Rewatch(c);
  return true;
}

bool PortForward::OpenChannel(Conn& c) {
  ssh_session session = via_->channel_session();
  if (c.state == Conn::State::kNew) {
    c.channel = ssh_channel_new(session);
    if (c.channel == nullptr) return false;
    c.state = Conn::State::kOpening;
  }
  if (c.state == Conn::State::kOpening) {
    int rc = ssh_channel_open_forward(c.channel, target_host_.c_str(), target_port_,
                                      "127.0.0.1", local_port_);
    if (rc == SSH_AGAIN) return true;
    if (rc != SSH_OK) {
      const std::string why = ssh_get_error(session);
      if (ForwardingProhibited(why)) {
        Fatal(Status::Error(via_->label() +
                            ": its sshd refuses TCP forwarding (AllowTcpForwarding no in its "
                            "sshd_config, or a no-port-forwarding key): cannot forward to " +
                            target_host_ + ":" + std::to_string(target_port_) + " (" + why +
                            ")"),
              /*final=*/true);
        return false;
      }
      spdlog::info("Port forward: the host could not connect. [host: {}, to: {}:{}, error: {}]",
                   via_->label(), target_host_, target_port_, why);
      return false;
    }
    c.state = Conn::State::kOpen;
  }
  return true;
}

bool PortForward::OpenSocket(Conn& c) {
  if (c.state == Conn::State::kNew) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICHOST;
    addrinfo* ai = nullptr;
    if (getaddrinfo(target_host_.c_str(), std::to_string(target_port_).c_str(), &hints, &ai) != 0 ||
        ai == nullptr) {
      return false;
    }
    c.remote_fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int rc = c.remote_fd < 0 ? -1 : connect(c.remote_fd, ai->ai_addr, ai->ai_addrlen);
    const int e = errno;
    freeaddrinfo(ai);
    if (c.remote_fd < 0 || (rc != 0 && e != EINPROGRESS)) return false;
    c.state = Conn::State::kOpening;
  }
  if (c.state == Conn::State::kOpening) {
    pollfd p{c.remote_fd, POLLOUT, 0};
    if (poll(&p, 1, 0) <= 0) {
      if (c.remote_watched != POLLOUT) loop_->WatchFd(c.remote_fd, POLLOUT, [](short) {});
      c.remote_watched = POLLOUT;
      return true;
    }
    int err = 0;
    socklen_t len = sizeof err;
    getsockopt(c.remote_fd, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) return false;
    c.state = Conn::State::kOpen;
  }
  return true;
}

void PortForward::Rewatch(Conn& c) {
  const bool up_room =
      !c.client_eof && c.up_off == c.up.size() && (!c.channel || ssh_channel_window_size(c.channel) > 0);
  short want = static_cast<short>((up_room ? POLLIN : 0) | (c.down_off < c.down.size() ? POLLOUT : 0));
  if (want != c.watched) {
    if (want == 0) {
      loop_->UnwatchFd(c.fd);
    } else {
      loop_->WatchFd(c.fd, want, [](short) {});  // Service runs after it
    }
    c.watched = want;
  }
  if (c.remote_fd >= 0) {
    const bool down_room = !c.remote_eof && c.down_off == c.down.size();
    short rwant =
        static_cast<short>((down_room ? POLLIN : 0) | (c.up_off < c.up.size() ? POLLOUT : 0));
    if (rwant != c.remote_watched) {
      if (rwant == 0) {
        loop_->UnwatchFd(c.remote_fd);
      } else {
        loop_->WatchFd(c.remote_fd, rwant, [](short) {});
      }
      c.remote_watched = rwant;
    }
  }
}

}  // namespace barge::ssh
