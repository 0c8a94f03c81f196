#include "runner/ui/gate.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <map>
#include <thread>

#include "base/peer_owner.h"
#include "ssh/event_loop.h"

namespace barge::runner::ui {

namespace {

using std::chrono::milliseconds;

// Bytes buffered per direction of a passed-on connection before the gate
// stops reading from the side that sends them.
constexpr size_t kPipeBuffer = 64 * 1024;
// After a refusal: how long, and how much, the gate keeps reading (and
// dropping) what the client still sends, so that its close does not reset
// the connection before the client read the answer.
constexpr milliseconds kDrainTime{1000};
constexpr size_t kDrainBytes = 1 << 20;
// How often, and for how long, a pass-on retries a busy server socket.
constexpr milliseconds kUpstreamRetry{10};
constexpr milliseconds kUpstreamPatience{5000};

// Who is at the other end of accepted `fd` from `addr`: "uid N" for a
// client on this machine's loopback (any 127/8 address, ::1), whose owner
// the kernel's socket table tells, so that a local user is one peer however
// many loopback addresses it connects from; "loopback" for one whose owner
// cannot be read (gone already); else its address.
std::string PeerOf(int fd, const sockaddr_storage& addr) {
  char text[INET6_ADDRSTRLEN] = "?";
  if (IsLoopbackAddress(addr)) {
    if (std::optional<uid_t> uid = PeerUid(fd)) return "uid " + std::to_string(*uid);
    return "loopback";
  }
  if (addr.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&addr);
    inet_ntop(AF_INET, &in->sin_addr, text, sizeof text);
  } else if (addr.ss_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&addr);
    inet_ntop(AF_INET6, &in6->sin6_addr, text, sizeof text);
  }
  return std::string("address ") + text;
}

}  // namespace

struct Gate::Impl {
  struct Conn {
    uint64_t id = 0;
    int client = -1;
    int upstream = -1;
    std::string peer;
    bool waiting = true;   // no allowed head yet (counts as unauthenticated)
    bool draining = false;  // refused: reading until EOF, then closed
    size_t drained = 0;
    std::string head;  // bytes read while waiting
    std::string to_upstream, to_client;
    bool client_eof = false, upstream_eof = false, upstream_shut = false;
    short client_events = -1, upstream_events = -1;
    ssh::EventLoop::TimerId timer = 0;
    ssh::EventLoop::Clock::time_point upstream_since{};
  };

  std::string upstream_path;
  Check check;
  Respond respond;
  GateLimits limits;
  int listen_fd = -1;
  int port = 0;
  ssh::EventLoop loop;
  std::thread thread;
  std::atomic<bool> stopping{false};
  bool stopped = false;
  uint64_t next_id = 1;
  std::map<uint64_t, std::unique_ptr<Conn>> conns;
  std::map<std::string, int> open_per_peer, waiting_per_peer;
  int waiting = 0;

  void Run();
  void WatchListener();
  void Accept();
  Conn* Find(uint64_t id) {
    auto it = conns.find(id);
    return it == conns.end() ? nullptr : it->second.get();
  }
  void OnClient(uint64_t id, short revents);
  void OnUpstream(uint64_t id, short revents);
  void ReadHead(Conn* c);
  void PassOn(Conn* c);
  void Refuse(Conn* c, int status, const std::string& message);
  void NoLongerWaiting(Conn* c);
  void Close(Conn* c);
  void Rewatch(Conn* c);
  // Moves bytes of a passed-on connection as far as the sockets take them;
  // closes it when both sides are done. False when it was closed.
  bool Pump(Conn* c);
};

void Gate::Impl::WatchListener() {
  loop.WatchFd(listen_fd, POLLIN, [this](short) { Accept(); });
}

void Gate::Impl::Accept() {
  for (int i = 0; i < 64; ++i) {
    sockaddr_storage addr{};
    socklen_t len = sizeof addr;
    const int fd = accept4(listen_fd, reinterpret_cast<sockaddr*>(&addr), &len,
                           SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        // Out of descriptors: stop accepting for a moment rather than spin.
        loop.UnwatchFd(listen_fd);
        loop.AddTimer(loop.Now() + milliseconds(100), [this] {
          if (!stopping) WatchListener();
        });
      }
      return;
    }
    auto conn = std::make_unique<Conn>();
    Conn* c = conn.get();
    c->id = next_id++;
    c->client = fd;
    c->peer = PeerOf(fd, addr);
    conns.emplace(c->id, std::move(conn));
    ++open_per_peer[c->peer];
    ++waiting_per_peer[c->peer];
    ++waiting;
    if (open_per_peer[c->peer] > limits.max_connections_per_peer) {
      Refuse(c, 503, "too many connections from " + c->peer);
      continue;
    }
    if (waiting_per_peer[c->peer] > limits.max_unauthenticated_per_peer ||
        waiting > limits.max_unauthenticated) {
      Refuse(c, 503, "too many connections waiting for their request from " + c->peer);
      continue;
    }
    const uint64_t id = c->id;
    c->timer = loop.AddTimer(loop.Now() + limits.head_deadline, [this, id] {
      Conn* c = Find(id);
      if (c == nullptr) return;
      c->timer = 0;
      if (c->waiting && !c->draining) {
        Refuse(c, 408, "the request's head did not arrive in time");
      } else if (c->draining) {
        Close(c);
      }
    });
    Rewatch(c);
  }
}

void Gate::Impl::NoLongerWaiting(Conn* c) {
  if (!c->waiting) return;
  c->waiting = false;
  --waiting;
  if (--waiting_per_peer[c->peer] == 0) waiting_per_peer.erase(c->peer);
}

void Gate::Impl::Close(Conn* c) {
  if (c->timer != 0) loop.CancelTimer(c->timer);
  NoLongerWaiting(c);
  if (--open_per_peer[c->peer] == 0) open_per_peer.erase(c->peer);
  if (c->client >= 0) {
    loop.UnwatchFd(c->client);
    close(c->client);
  }
  if (c->upstream >= 0) {
    loop.UnwatchFd(c->upstream);
    close(c->upstream);
  }
  conns.erase(c->id);
}

void Gate::Impl::Refuse(Conn* c, int status, const std::string& message) {
  NoLongerWaiting(c);
  const std::string answer = respond(status, message);
  // One try: an answer is a few KiB and the socket is new, so it fits its
  // send buffer; a client that does not read gets a cut answer.
  (void)send(c->client, answer.data(), answer.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  shutdown(c->client, SHUT_WR);
  c->draining = true;
  c->head.clear();
  c->head.shrink_to_fit();
  if (c->timer != 0) loop.CancelTimer(c->timer);
  const uint64_t id = c->id;
  c->timer = loop.AddTimer(loop.Now() + kDrainTime, [this, id] {
    if (Conn* c = Find(id)) {
      c->timer = 0;
      Close(c);
    }
  });
  Rewatch(c);
}

void Gate::Impl::Rewatch(Conn* c) {
  const uint64_t id = c->id;
  short client = 0;
  if (c->draining) {
    client = POLLIN;
  } else if (c->waiting) {
    // While it waits for the server's socket, the gate reads nothing more.
    client = c->upstream_since == ssh::EventLoop::Clock::time_point{} ? POLLIN : 0;
  } else {
    if (!c->client_eof && c->to_upstream.size() < kPipeBuffer) client |= POLLIN;
    if (!c->to_client.empty()) client |= POLLOUT;
  }
  if (client != c->client_events) {
    c->client_events = client;
    loop.WatchFd(c->client, client, [this, id](short revents) { OnClient(id, revents); });
  }
  if (c->upstream >= 0) {
    short up = 0;
    if (!c->upstream_eof && c->to_client.size() < kPipeBuffer) up |= POLLIN;
    if (!c->to_upstream.empty()) up |= POLLOUT;
    if (up != c->upstream_events) {
      c->upstream_events = up;
      loop.WatchFd(c->upstream, up, [this, id](short revents) { OnUpstream(id, revents); });
    }
  }
}

void Gate::Impl::OnClient(uint64_t id, short revents) {
  Conn* c = Find(id);
  if (c == nullptr) return;
  if (c->draining) {
    char buf[16384];
    const ssize_t n = recv(c->client, buf, sizeof buf, 0);
    if (n > 0) c->drained += static_cast<size_t>(n);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR) || c->drained > kDrainBytes) {
      Close(c);
    }
    return;
  }
  if (c->waiting) {
    if (c->upstream_since != ssh::EventLoop::Clock::time_point{}) {
      if ((revents & (POLLHUP | POLLERR)) != 0) Close(c);
      return;
    }
    ReadHead(c);
    return;
  }
  if ((revents & POLLERR) != 0) {
    Close(c);
    return;
  }
  Pump(c);
}

void Gate::Impl::OnUpstream(uint64_t id, short revents) {
  Conn* c = Find(id);
  if (c == nullptr) return;
  if ((revents & POLLERR) != 0 && c->to_client.empty()) {
    Close(c);
    return;
  }
  Pump(c);
}

void Gate::Impl::ReadHead(Conn* c) {
  const uint64_t id = c->id;
  char buf[4096];
  while (true) {
    const size_t room = limits.max_head_bytes + 1 - std::min(c->head.size(), limits.max_head_bytes);
    const ssize_t n = recv(c->client, buf, std::min(room, sizeof buf), 0);
    if (n == 0) {
      Close(c);  // gone before it asked anything
      return;
    }
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR) break;
      Close(c);
      return;
    }
    c->head.append(buf, static_cast<size_t>(n));
    HeadParse parse = ParseRequestHead(c->head);
    if (parse.state == HeadParse::State::kBad) {
      Refuse(c, 400, "a malformed request: " + parse.why);
      return;
    }
    if (parse.state == HeadParse::State::kComplete) {
      if (parse.head.length > limits.max_head_bytes) {
        Refuse(c, 431, "the request's head is over " + std::to_string(limits.max_head_bytes) +
                           " bytes");
        return;
      }
      if (std::optional<Answer> no = check(parse.head)) {
        Refuse(c, no->status, no->message);
        return;
      }
      c->to_upstream = std::move(c->head);
      c->head.clear();
      PassOn(c);
      if (Conn* still = Find(id); still != nullptr && still->upstream < 0 && !still->draining) {
        Rewatch(still);  // waits for the server's socket
      }
      return;
    }
    if (c->head.size() > limits.max_head_bytes) {
      Refuse(c, 431, "the request's head is over " + std::to_string(limits.max_head_bytes) +
                         " bytes");
      return;
    }
  }
}

void Gate::Impl::PassOn(Conn* c) {
  if (c->upstream_since == ssh::EventLoop::Clock::time_point{}) c->upstream_since = loop.Now();
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    Refuse(c, 503, std::string("cannot reach the dashboard's server: ") + std::strerror(errno));
    return;
  }
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, upstream_path.c_str(),
              std::min(upstream_path.size() + 1, sizeof addr.sun_path));
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    const int err = errno;
    close(fd);
    if (err == EAGAIN && loop.Now() - c->upstream_since < kUpstreamPatience) {
      // The server's backlog is full for a moment: try again shortly.
      const uint64_t id = c->id;
      loop.AddTimer(loop.Now() + kUpstreamRetry, [this, id] {
        if (Conn* c = Find(id)) PassOn(c);
      });
      return;
    }
    Refuse(c, 503, std::string("cannot reach the dashboard's server: ") + std::strerror(err));
    return;
  }
  c->upstream = fd;
  if (c->timer != 0) {
    loop.CancelTimer(c->timer);
    c->timer = 0;
  }
  NoLongerWaiting(c);
  Pump(c);
}

bool Gate::Impl::Pump(Conn* c) {
  char buf[16384];
  auto failed = [](ssize_t n) { return n < 0 && errno != EAGAIN && errno != EINTR; };
  // Client to server.
  while (!c->client_eof && c->to_upstream.size() < kPipeBuffer) {
    const ssize_t n = recv(c->client, buf, sizeof buf, 0);
    if (n == 0) c->client_eof = true;
    if (failed(n)) return Close(c), false;
    if (n <= 0) break;
    c->to_upstream.append(buf, static_cast<size_t>(n));
  }
  while (!c->to_upstream.empty()) {
    const ssize_t n = send(c->upstream, c->to_upstream.data(), c->to_upstream.size(), MSG_NOSIGNAL);
    if (failed(n)) return Close(c), false;
    if (n <= 0) break;
    c->to_upstream.erase(0, static_cast<size_t>(n));
  }
  if (c->client_eof && c->to_upstream.empty() && !c->upstream_shut) {
    shutdown(c->upstream, SHUT_WR);
    c->upstream_shut = true;
  }
  // Server to client.
  while (!c->upstream_eof && c->to_client.size() < kPipeBuffer) {
    const ssize_t n = recv(c->upstream, buf, sizeof buf, 0);
    if (n == 0) c->upstream_eof = true;
    if (failed(n)) return Close(c), false;
    if (n <= 0) break;
    c->to_client.append(buf, static_cast<size_t>(n));
  }
  while (!c->to_client.empty()) {
    const ssize_t n = send(c->client, c->to_client.data(), c->to_client.size(), MSG_NOSIGNAL);
    if (failed(n)) return Close(c), false;
    if (n <= 0) break;
    c->to_client.erase(0, static_cast<size_t>(n));
  }
  // The server ends a connection (keep-alive over, or an error): so does
  // the gate, once the client has what the server sent.
  if (c->upstream_eof && c->to_client.empty()) return Close(c), false;
  Rewatch(c);
  return true;
}

void Gate::Impl::Run() {
  WatchListener();
  while (!stopping) loop.Poll(milliseconds(-1));
  loop.UnwatchFd(listen_fd);
  while (!conns.empty()) Close(conns.begin()->second.get());
}

Result<std::unique_ptr<Gate>> Gate::Listen(const std::string& host, int port, GateLimits limits) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  if (const int rc = getaddrinfo(host.c_str(), service.c_str(), &hints, &found); rc != 0) {
    return Status::Error("cannot listen on " + host + ": " + gai_strerror(rc));
  }
  int fd = -1;
  for (addrinfo* ai = found; ai != nullptr && fd < 0; ai = ai->ai_next) {
    fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) continue;
    // SO_REUSEADDR only: with SO_REUSEPORT a second `barge ui` on the same
    // port would bind too and silently take half of the connections.
    int yes = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    if (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, 128) != 0) {
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(found);
  if (fd < 0) {
    return Status::Error("cannot listen on " + host + ":" + service +
                         " (in use, or not an address of this machine)");
  }
  sockaddr_storage bound{};
  socklen_t len = sizeof bound;
  getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len);
  auto impl = std::make_unique<Impl>();
  impl->listen_fd = fd;
  impl->port = ntohs(bound.ss_family == AF_INET6
                         ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                         : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  impl->limits = limits;
  return std::unique_ptr<Gate>(new Gate(std::move(impl)));
}

void Gate::Serve(std::string upstream, Check check, Respond respond) {
  if (impl_->thread.joinable() || impl_->stopped) return;
  impl_->upstream_path = std::move(upstream);
  impl_->check = std::move(check);
  impl_->respond = std::move(respond);
  Impl* raw = impl_.get();
  impl_->thread = std::thread([raw] { raw->Run(); });
}

Gate::Gate(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Gate::~Gate() { Stop(); }

int Gate::port() const { return impl_->port; }

void Gate::Stop() {
  if (impl_->stopped) return;
  impl_->stopped = true;
  impl_->stopping = true;
  impl_->loop.Wakeup();
  if (impl_->thread.joinable()) impl_->thread.join();
  close(impl_->listen_fd);
}

}  // namespace barge::runner::ui
