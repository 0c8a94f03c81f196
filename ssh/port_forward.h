// Port forwarding: connections accepted on a local TCP listener, each carried
// to TARGET:PORT as seen from a host, over a direct-tcpip channel of that
// host's open SSH session (SshExecutor), or by a plain TCP connection from
// this machine for the local engine.
#pragma once

#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <string>

#include "base/status.h"
#include "ssh/event_loop.h"
#include "ssh/executor.h"

namespace barge::ssh {

// One listening port and its connections, driven by the loop: the listener
// and the clients' sockets are non-blocking fds watched by the loop, and one
// poll hook moves bytes between them and their channels (never from inside
// libssh's dispatch), so a forward never blocks the loop and a download
// through it runs beside every other command. Flow control: bytes from the
// host are read from a channel only while its client has taken the previous
// ones (the channel's window then holds the host back), and bytes from a
// client only while its channel's window has room; each connection buffers
// at most one read (64 KiB) per direction.
//
// Forward channels are not exec channels: they do not count against the
// SshExecutor's limit of channels per session (sshd's MaxSessions counts
// only sessions), and a refused open never makes an exec command wait.
//
// Failures: a connection the host cannot make (nothing listens there yet,
// a reset) closes that client's connection only, with a debug log line. A
// host whose sshd refuses TCP forwarding altogether ("administratively
// prohibited": AllowTcpForwarding no, or a `no-port-forwarding` key) ends
// the forward: on_fatal runs once (from a timer of the loop), naming the
// host and the setting, the listening socket is closed (later clients are
// refused), and nothing is retried. A lost connection to the host ends the
// serving too (on_fatal), but leaves the port bound for a later Serve.
//
// Who may connect: only the user barge runs as. Each accepted connection's
// client is looked up (ssh/peer_owner.h: its socket's owner in the
// kernel's table for a 127.0.0.1 port, SO_PEERCRED for a unix socket) and
// a connection of any other user, or one whose owner cannot be told, is
// closed at once, before anything is sent to the host.
//
// Threading: the loop's thread only. `via` (given to Serve) must outlive the
// forward, or Stop be called before it goes.
class PortForward {
 public:
  // Binds and listens on 127.0.0.1:`local_port` now (0: any free port), so
  // that a busy port is an error at once: "127.0.0.1:PORT is already in use
  // (...)". Connections wait in the kernel's backlog until Serve.
  [[nodiscard]] static Result<std::unique_ptr<PortForward>> Listen(EventLoop* loop,
                                                                   int local_port);
  // Binds and listens on a unix socket at `path` instead, mode 0600 from
  // its creation (a file already there is an error: nothing is removed).
  // The socket file is removed when the forward is destroyed.
  [[nodiscard]] static Result<std::unique_ptr<PortForward>> ListenUnix(EventLoop* loop,
                                                                       const std::string& path);
  ~PortForward();
  PortForward(const PortForward&) = delete;
  PortForward& operator=(const PortForward&) = delete;

  // The bound port (the chosen one when Listen was given 0); 0 on a unix
  // socket.
  int local_port() const { return local_port_; }

  // Accepts connections from now on, each carried to target_host:target_port
  // through `via`: a direct-tcpip channel on its session when it is an
  // SshExecutor, a TCP connection from this machine otherwise. Replaces an
  // earlier Serve (its connections are closed). Does nothing once a fatal
  // error has ended the forward.
  void Serve(Executor* via, std::string target_host, int target_port,
             std::function<void(const Status&)> on_fatal);
  // Stops accepting and closes every connection; the port stays bound.
  void Stop();

  // Connections open now, and accepted since Listen.
  size_t open_connections() const { return conns_.size(); }
  uint64_t accepted() const { return accepted_; }
  // Connections closed at once because another user (or no one known)
  // made them.
  uint64_t refused() const { return refused_; }

 private:
  struct Conn;
  PortForward(EventLoop* loop, int listen_fd, int local_port);
  void Accept();
  void Service();
  // Moves what can be moved now; false once the connection is over.
  bool Pump(Conn& c);
  // Pump's first stage: moves c toward Conn::State::kOpen, over a
  // direct-tcpip channel of via_'s session (OpenChannel) or a TCP socket
  // of this machine (OpenSocket). True while it is opening or open (the
  // caller moves bytes only once c.state is kOpen); false once it cannot
  // be opened. A host that cannot connect to the target is logged; one
  // whose sshd refuses TCP forwarding altogether also ends the forward
  // (Fatal, final).
  bool OpenChannel(Conn& c);
  bool OpenSocket(Conn& c);
  // Pump's last stage: watches c's fds in the loop for exactly the events
  // that could let it move more bytes (so the loop wakes for them).
  void Rewatch(Conn& c);
  void Close(Conn& c);
  // Ends serving: every connection closed, on_fatal called; `final` also
  // closes the listening socket for good (a lost connection is not final:
  // a restart may serve the port again through a new session).
  void Fatal(const Status& why, bool final);

  EventLoop* loop_;
  int listen_fd_ = -1;
  int local_port_ = 0;
  bool listening_ = false;
  EventLoop::HookId hook_ = 0;
  Executor* via_ = nullptr;
  bool via_ssh_ = false;
  std::string target_host_;
  int target_port_ = 0;
  std::function<void(const Status&)> on_fatal_;
  bool failed_ = false;
  std::list<std::unique_ptr<Conn>> conns_;
  uint64_t accepted_ = 0;
  uint64_t refused_ = 0;
  std::string unix_path_;  // ListenUnix's socket file, removed at destruction
};

}  // namespace barge::ssh
