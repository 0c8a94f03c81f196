#include "ssh/ssh_executor.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <exception>
#include <optional>
#include <vector>

#include <libssh/callbacks.h>
// For ssh_send_keepalive, which libssh declares there although a client may
// call it.
#include <libssh/server.h>
#include <spdlog/spdlog.h>

#include "ssh/channel_errors.h"

namespace barge::ssh {
namespace {

constexpr size_t kMaxWrite = 64 * 1024;
// After the host refused to open a channel: wait this long before the next
// open, and treat refusals within kRecentClose of a close as a full host.
constexpr std::chrono::milliseconds kOpenRetryDelay{20};
constexpr std::chrono::seconds kRecentClose{2};

// What the bootstrap of a long command line prints on stdout once it has
// read the whole script from stdin (it is taken out of the command's
// output). The bytes \001 and \002 keep it apart from anything a login
// script might print.
constexpr std::string_view kScriptTaken = "\001barge: script read\002";

// The script a long command line runs as: it removes its own directory
// first ($0 is the script), then runs the line as `SHELL -c LINE` would.
std::string ScriptFor(const std::string& command_line) {
  return "rm -rf -- \"${0%/*}\"\n" + command_line;
}

// "10 s", "1.5 s", "0.25 s".
std::string Seconds(std::chrono::milliseconds d) {
  std::string s = std::to_string(d.count() / 1000);
  long long millis = d.count() % 1000;
  if (millis != 0) {
    std::string frac = std::to_string(1000 + millis).substr(1);
    while (frac.back() == '0') frac.pop_back();
    s += "." + frac;
  }
  return s + " s";
}

// RFC 4254 signal names → this machine's numbers.
int SignalNumber(const std::string& name) {
  static const struct {
    const char* name;
    int number;
  } kSignals[] = {{"ABRT", SIGABRT}, {"ALRM", SIGALRM}, {"BUS", SIGBUS},   {"FPE", SIGFPE},
                  {"HUP", SIGHUP},   {"ILL", SIGILL},   {"INT", SIGINT},   {"KILL", SIGKILL},
                  {"PIPE", SIGPIPE}, {"QUIT", SIGQUIT}, {"SEGV", SIGSEGV}, {"TERM", SIGTERM},
                  {"USR1", SIGUSR1}, {"USR2", SIGUSR2}, {"TRAP", SIGTRAP}, {"XCPU", SIGXCPU},
                  {"XFSZ", SIGXFSZ}, {"SYS", SIGSYS}};
  for (const auto& s : kSignals) {
    if (name == s.name) return s.number;
  }
  return 0;
}

template <typename Fn>
void CallUser(const char* what, const std::string& label, Fn&& fn) {
  try {
    fn();
  } catch (const std::exception& e) {
    spdlog::error("A command's {} callback threw: {} [host: {}]", what, e.what(), label);
  } catch (...) {
    spdlog::error("A command's {} callback threw. [host: {}]", what, label);
  }
}

}  // namespace

std::string LongCommandBootstrap(size_t script_size) {
  // Until the bootstrap has said kScriptTaken the executor sends nothing
  // after the script, so `head -c` cannot read past it into the command's
  // own stdin, whatever head it is (busybox's reads through stdio).
  const std::string n = std::to_string(script_size);
  return "d=$(mktemp -d \"${TMPDIR:-/tmp}/barge.XXXXXXXX\") && "
         "if head -c " + n + " >\"$d/s\" && [ $(wc -c <\"$d/s\") -eq " + n + " ]; then "
         "printf '\\001barge: script read\\002' && exec \"${SHELL:-/bin/sh}\" \"$d/s\"; fi; "
         "[ -z \"$d\" ] || rm -rf \"$d\"; "
         "echo \"barge: cannot hand the command line (" + n + " bytes) to the shell through a "
         "file in ${TMPDIR:-/tmp}\" >&2; exit 126";
}

// One command's channel. Owned by the executor's list (and shared with the
// caller's Handle, which only flips flags and queues stdin). Its address is
// the userdata of the libssh channel callbacks, so it is neither copied nor
// moved; the callbacks are removed before the libssh channel is freed.
struct SshExecutor::Channel {
  enum class State { kQueued, kOpening, kExecRequested, kRunning };

  SshExecutor* executor = nullptr;  // null once the executor is gone
  int id = 0;
  std::string command_line;
  // A stream (OpenUnixStream) instead of a command: a direct-streamlocal
  // channel to socket_path, running as soon as it is open; it does not
  // count against max_channels_ (sshd's MaxSessions counts sessions only).
  bool stream = false;
  std::string socket_path;
  CommandCallbacks callbacks;
  ssh_channel channel = nullptr;
  struct ssh_channel_callbacks_struct libssh_callbacks = {};
  State state = State::kQueued;
  bool finished = false;   // on_exit delivered (or dropped)
  bool abandoned = false;  // the caller destroyed its Command
  std::string stdin_queue;
  size_t stdin_offset = 0;
  // A long command line (LongCommandBootstrap): the script, written on stdin
  // before anything of stdin_queue, which waits until the host has said
  // kScriptTaken; stdout until then (held_stdout) is searched for that.
  std::string script;
  size_t script_offset = 0;
  bool script_taken = true;
  std::string held_stdout;
  bool stdin_close_requested = false;
  bool eof_sent = false;
  std::optional<int> exit_code;
  std::string exit_signal;
  // PauseOutput: while paused, stdout stays in libssh's buffer (OnData
  // takes nothing), `held` bytes of it; a close that came meanwhile waits
  // (close_held) until they are delivered (DeliverHeld).
  bool paused = false;
  uint32_t held = 0;
  bool close_held = false;

  Channel() = default;
  Channel(const Channel&) = delete;
  Channel& operator=(const Channel&) = delete;

  bool wants_callbacks() const { return executor != nullptr && !finished && !abandoned; }

  // libssh callbacks. noexcept: user callbacks' exceptions are caught and
  // logged, and anything else (bad_alloc) ends the program rather than
  // unwinding through libssh. They never free anything.
  static int OnData(ssh_session, ssh_channel, void* data, uint32_t len, int is_stderr,
                    void* userdata) noexcept {
    auto* c = static_cast<Channel*>(userdata);
    if (!c->wants_callbacks()) return static_cast<int>(len);
    if (!is_stderr && c->paused && c->script_taken) {
      // Left in libssh's buffer, which then stops growing the window.
      c->held = len;
      return 0;
    }
    std::string_view bytes(static_cast<const char*>(data), len);
    if (!is_stderr && !c->script_taken) {
      // Before the command runs, stdout is only the bootstrap's: hold it
      // until the marker, which is dropped; what came before it is passed on.
      const size_t from = c->held_stdout.size() >= kScriptTaken.size()
                              ? c->held_stdout.size() - kScriptTaken.size() + 1
                              : 0;
      c->held_stdout.append(bytes);
      const size_t at = c->held_stdout.find(kScriptTaken, from);
      if (at == std::string::npos) return static_cast<int>(len);
      c->script_taken = true;
      std::string held = std::move(c->held_stdout);
      c->held_stdout.clear();
      spdlog::debug("SSH channel: the host has read the script. [host: {}, channel: {}]",
                    c->executor->label(), c->id);
      // The poll hook that runs after this sends the command's stdin.
      c->Deliver(false, std::string_view(held).substr(0, at));
      c->Deliver(false, std::string_view(held).substr(at + kScriptTaken.size()));
      return static_cast<int>(len);
    }
    c->Deliver(is_stderr, bytes);
    return static_cast<int>(len);
  }

  // Passes output to the caller's callback, if any (and wanted).
  void Deliver(bool is_stderr, std::string_view bytes) {
    if (bytes.empty() || !wants_callbacks()) return;
    auto& fn = is_stderr ? callbacks.on_stderr : callbacks.on_stdout;
    if (fn) {
      CallUser(is_stderr ? "stderr" : "stdout", executor->session_->label(), [&] { fn(bytes); });
    }
  }

  static void OnExitStatus(ssh_session, ssh_channel, int exit_status, void* userdata) noexcept {
    static_cast<Channel*>(userdata)->exit_code = exit_status;
  }

  static void OnExitSignal(ssh_session, ssh_channel, const char* signal, int /*core*/,
                           const char* /*errmsg*/, const char* /*lang*/, void* userdata) noexcept {
    static_cast<Channel*>(userdata)->exit_signal = signal ? signal : "";
  }

  static void OnEof(ssh_session, ssh_channel, void* userdata) noexcept {
    auto* c = static_cast<Channel*>(userdata);
    if (c->executor) {
      spdlog::debug("SSH channel: remote EOF. [host: {}, channel: {}]", c->executor->label(), c->id);
    }
    // A stream is over once the socket reads no more (executor.h); sshd
    // would close the channel only after our EOF.
    if (c->stream && c->executor != nullptr && !c->finished) {
      ExitStatus closed;
      closed.code = 0;
      c->executor->Finish(*c, closed);
    }
  }

  static void OnClose(ssh_session, ssh_channel, void* userdata) noexcept {
    auto* c = static_cast<Channel*>(userdata);
    if (c->executor == nullptr || c->finished) return;
    if (c->held > 0) {
      c->close_held = true;  // DeliverHeld closes it once they are out
      return;
    }
    if (!c->held_stdout.empty()) {
      // The bootstrap ended without running the script: its output is the
      // command's.
      std::string held = std::move(c->held_stdout);
      c->held_stdout.clear();
      c->Deliver(false, held);
      if (c->executor == nullptr || c->finished) return;
    }
    ExitStatus exit;
    if (c->stream) {
      exit.code = 0;  // a stream's close is its clean end
    } else if (!c->exit_signal.empty()) {
      exit.signal = c->exit_signal;
      int number = SignalNumber(c->exit_signal);
      if (number > 0) {
        exit.code = 128 + number;
      } else {
        exit.error = c->executor->label() + ": the command was killed by signal " +
                     c->exit_signal + ", unknown here";
      }
    } else if (c->exit_code) {
      exit.code = *c->exit_code;
    } else {
      exit.error = c->executor->label() + ": the command's channel closed without an exit status";
    }
    c->executor->Finish(*c, exit);
  }
};

// The Command given to the caller. Destroying it marks the channel
// abandoned; the executor closes and frees it from its poll hook.
class SshExecutor::Handle : public Command {
 public:
  explicit Handle(std::shared_ptr<Channel> channel) : c_(std::move(channel)) {}
  ~Handle() override {
    c_->abandoned = true;
    Kick();
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;

  void WriteStdin(std::string_view data) override {
    if (c_->finished || c_->stdin_close_requested || c_->executor == nullptr) return;
    c_->stdin_queue.append(data);
    Kick();
  }
  void CloseStdin() override {
    c_->stdin_close_requested = true;
    Kick();
  }
  bool done() const override { return c_->finished; }
  size_t stdin_pending() const override {
    return c_->finished ? 0 : c_->stdin_queue.size() - c_->stdin_offset;
  }
  void PauseOutput(bool paused) override {
    if (c_->stream || c_->paused == paused) return;
    c_->paused = paused;
    if (!paused) Kick();  // the poll hook delivers what was held
  }

 private:
  // The work is done by the executor's poll hook: wake the loop for it.
  void Kick() {
    if (c_->executor && !c_->finished) c_->executor->loop_->Wakeup();
  }

  std::shared_ptr<Channel> c_;
};

SshExecutor::SshExecutor(std::unique_ptr<Session> session, EventLoop* loop)
    : session_(std::move(session)), loop_(loop) {
  ssh_session raw = session_->raw();
  ssh_set_blocking(raw, 0);
  // Each session in a libssh event of its own, never in the loop's shared
  // one: libssh reads a session's socket inside channel calls by polling the
  // poll context that socket is in, and when that poll reports an error for
  // any socket in it (another host's EOF), it marks the session it was
  // called for as failed (libssh 0.10, ssh_handle_packets). With one shared
  // context a host whose connection died took down whichever healthy host
  // read the context next. The loop watches a duplicate of the socket and
  // Dispatch polls this session alone.
  own_event_ = ssh_event_new();
  if (own_event_ != nullptr && ssh_event_add_session(own_event_, raw) == SSH_OK) {
    in_event_ = true;
  } else {
    health_ = Status::Error(label() + ": cannot add the session to an event");
  }
  ssh_set_counters(raw, &socket_counter_, nullptr);
  bytes_seen_ = socket_counter_.in_bytes;
  last_incoming_ = EventLoop::Clock::now();
  ConfigureSocket();
  // Its first run (from any Poll) starts the silence check and its timer.
  hook_ = loop_->AddPollHook([this] { Service(); });
  spdlog::debug("SSH executor: ready. [host: {}, dead after: {}]", label(), Seconds(dead_after_));
}

SshExecutor::~SshExecutor() {
  loop_->RemovePollHook(hook_);
  if (hold_timer_ != 0) loop_->CancelTimer(hold_timer_);
  if (liveness_timer_ != 0) loop_->CancelTimer(liveness_timer_);
  ssh_set_counters(session_->raw(), nullptr, nullptr);
  UnwatchSocket();
  if (in_event_) ssh_event_remove_session(own_event_, session_->raw());
  if (own_event_ != nullptr) ssh_event_free(own_event_);
  for (auto& c : channels_) {
    if (c->channel) {
      ssh_remove_channel_callbacks(c->channel, &c->libssh_callbacks);
      ssh_channel_free(c->channel);
      c->channel = nullptr;
    }
    c->executor = nullptr;
  }
  channels_.clear();
  spdlog::debug("SSH executor: closed. [host: {}]", label());
  session_.reset();
}

std::string SshExecutor::label() const { return session_->label(); }

void SshExecutor::set_dead_after(std::chrono::milliseconds dead_after) {
  const bool was_off = dead_after_.count() <= 0;
  dead_after_ = std::max(dead_after, std::chrono::milliseconds(0));
  if (was_off && dead_after_.count() > 0) {
    // Nothing was noted while off: count the quiet from now.
    bytes_seen_ = socket_counter_.in_bytes;
    last_incoming_ = EventLoop::Clock::now();
    request_outstanding_ = false;
  }
  ConfigureSocket();
  // Service (the next Poll's, or this one's end) re-plans the timer.
  if (liveness_timer_ != 0) loop_->CancelTimer(liveness_timer_);
  liveness_timer_ = 0;
}

Result<std::unique_ptr<Command>> SshExecutor::Start(const std::string& command_line,
                                                    CommandCallbacks callbacks) {
  if (!health_.ok()) return health_;
  if (command_line.find('\0') != std::string::npos) {
    return Status::Error(label() + ": the command line contains a NUL byte");
  }
  auto c = std::make_shared<Channel>();
  c->executor = this;
  c->id = next_id_++;
  if (command_line.size() > kMaxExecCommandLine) {
    c->script = ScriptFor(command_line);
    c->command_line = LongCommandBootstrap(c->script.size());
    c->script_taken = false;
  } else {
    c->command_line = command_line;
  }
  c->callbacks = std::move(callbacks);
  channels_.push_back(c);
  // The channel is opened from the loop's poll hook: make a Poll that is
  // waiting (or the next one) get there without waiting.
  loop_->Wakeup();
  spdlog::debug("SSH channel: queued. [host: {}, channel: {}, bytes: {}, through a script: {}, "
                "command: {}]",
                label(), c->id, command_line.size(), !c->script.empty(), command_line);
  return std::unique_ptr<Command>(std::make_unique<Handle>(std::move(c)));
}

Result<std::unique_ptr<Command>> SshExecutor::OpenUnixStream(const std::string& socket_path,
                                                             CommandCallbacks callbacks) {
  if (!health_.ok()) return health_;
  if (socket_path.empty() || socket_path.find('\0') != std::string::npos) {
    return Status::Error(label() + ": \"" + socket_path + "\" is not a unix socket path");
  }
  auto c = std::make_shared<Channel>();
  c->executor = this;
  c->id = next_id_++;
  c->stream = true;
  c->socket_path = socket_path;
  c->callbacks = std::move(callbacks);
  channels_.push_back(c);
  loop_->Wakeup();
  spdlog::debug("SSH channel: stream queued. [host: {}, channel: {}, socket: {}]", label(), c->id,
                socket_path);
  return std::unique_ptr<Command>(std::make_unique<Handle>(std::move(c)));
}

int SshExecutor::OpenStep(Channel& c) {
  // Called again while the host has not answered: libssh then only waits
  // for the answer to the open it already sent, whichever kind it was.
  if (c.stream) {
    return ssh_channel_open_forward_unix(c.channel, c.socket_path.c_str(), "127.0.0.1", 0);
  }
  return ssh_channel_open_session(c.channel);
}

void SshExecutor::Service() {
  if (in_service_) return;
  in_service_ = true;
  CheckConnection();
  CheckLiveness();
  if (!channels_.empty() && health_.ok()) AckNow();
  // libssh reads whatever arrived while any one channel is driven, so a
  // reply for a channel already visited in this pass is only acted on in
  // the next: repeat while passes make progress (each needs a host reply,
  // so this ends quickly).
  for (int pass = 0; pass < 16; ++pass) {
    bool progressed = false;
    for (auto it = channels_.begin(); it != channels_.end();) {
      // Hold a reference: Advance may run callbacks that start or drop
      // commands.
      std::shared_ptr<Channel> c = *it;
      if (health_.ok()) progressed |= Advance(*c);
      // Free a finished channel at once: sshd counts it until it is closed.
      if (c->finished || !health_.ok()) ReleaseChannel(*c);
      if (c->finished && c->channel == nullptr) {
        it = channels_.erase(it);
        progressed = true;
      } else {
        ++it;
      }
    }
    // A connection that died while the channels were driven.
    CheckConnection();
    if (!progressed || !health_.ok()) break;
  }
  WatchSocket();
  in_service_ = false;
}

void SshExecutor::WatchSocket() {
  ssh_session raw = session_->raw();
  short want = 0;
  if (health_.ok() && in_event_) {
    want = POLLIN;
    if (ssh_get_poll_flags(raw) & SSH_WRITE_PENDING) want |= POLLOUT;
  }
  if (want == watched_events_) return;
  if (want == 0) {
    UnwatchSocket();
    return;
  }
  // A socket libssh closed reads as -1 (CheckConnection then finds the
  // session closed); its number may be someone else's by now.
  const int fd = ssh_get_fd(raw);
  if (fd != watched_fd_) UnwatchSocket();
  if (fd < 0) return;
  watched_fd_ = fd;
  // The loop polls its own duplicate, so the watch stays valid when libssh
  // closes the socket; UnwatchSocket then removes only our watch, even if
  // the number was reused (and watched) by another host since.
  watch_id_ = loop_->WatchFd(watched_fd_, want, [this](short) { Dispatch(); });
  watched_events_ = want;
}

void SshExecutor::UnwatchSocket() {
  if (watched_fd_ < 0) return;
  loop_->UnwatchFd(watched_fd_, watch_id_);
  watched_fd_ = -1;
  watch_id_ = 0;
  watched_events_ = 0;
}

void SshExecutor::Dispatch() {
  // Timeout 0: the loop's poll already said the socket is ready. An error
  // here is this session's own; Service (right after) finds it closed.
  if (in_event_) ssh_event_dopoll(own_event_, 0);
}

void SshExecutor::CheckConnection() {
  if (!health_.ok()) return;
  ssh_session raw = session_->raw();
  if (ssh_is_connected(raw) && (ssh_get_status(raw) & (SSH_CLOSED | SSH_CLOSED_ERROR)) == 0) {
    return;
  }
  std::string why = ssh_get_error(raw);
  spdlog::debug("SSH executor: connection lost. [host: {}, error: {}]", label(), why);
  LoseConnection(Status::Error(label() + ": connection lost" + (why.empty() ? "" : ": " + why)));
}

bool SshExecutor::NoteIncoming(EventLoop::Clock::time_point now) {
  if (socket_counter_.in_bytes == bytes_seen_) return false;
  bytes_seen_ = socket_counter_.in_bytes;
  last_incoming_ = now;
  request_outstanding_ = false;
  return true;
}

void SshExecutor::CheckLiveness() {
  if (!health_.ok() || dead_after_.count() <= 0) return;
  using Clock = EventLoop::Clock;
  const Clock::duration quiet_limit = dead_after_;
  const Clock::duration request_after =
      std::max<Clock::duration>(dead_after_ / 4, std::chrono::milliseconds(1));
  Clock::time_point now = Clock::now();
  NoteIncoming(now);
  if (request_outstanding_ && now - last_incoming_ >= quiet_limit) {
    // The loop may have been away (a slow callback) while the answer sat in
    // the socket: read what is there, without waiting, before giving up.
    SendKeepalive();
    if (!health_.ok()) return;
    now = Clock::now();
    if (!NoteIncoming(now)) {
      spdlog::debug(
          "SSH executor: no answer, connection lost. [host: {}, quiet for: {} ms]", label(),
          std::chrono::duration_cast<std::chrono::milliseconds>(now - last_incoming_).count());
      LoseConnection(Status::Error(label() + ": no answer for " + Seconds(dead_after_) +
                                   " (ssh.dead_after): connection lost"));
      return;
    }
  }
  if (!request_outstanding_ && now - last_incoming_ >= request_after) {
    SendKeepalive();
    // An answer read at once counts as bytes: the request is then settled.
    if (!NoteIncoming(Clock::now())) request_outstanding_ = true;
    if (!health_.ok()) return;
  }
  // The next step: the deadline of the outstanding request, or the moment
  // the connection has been quiet long enough to send one. A pending timer
  // that is earlier is kept (it finds nothing to do and re-plans), so steady
  // traffic does not re-arm the timer on every Poll.
  Clock::time_point wake = last_incoming_ + (request_outstanding_ ? quiet_limit : request_after);
  if (liveness_timer_ != 0 && liveness_wake_ <= wake) return;
  if (liveness_timer_ != 0) loop_->CancelTimer(liveness_timer_);
  liveness_wake_ = wake;
  // The timer only wakes Poll: its poll hooks (Service) run right after.
  liveness_timer_ = loop_->AddTimer(wake, [this] { liveness_timer_ = 0; });
}

void SshExecutor::SendKeepalive() {
  // libssh 0.10's ssh_send_keepalive sends the global request
  // "keepalive@openssh.com" with want_reply and returns without waiting, but
  // it shares libssh's one global-request state: while an earlier request
  // awaits its answer, a call only reads (no second request is sent); once
  // that answer has arrived, the first call after it only clears the state.
  // So the second call sends a request unless one is still pending: either
  // way one is outstanding afterwards. Each call also reads, without
  // waiting, whatever the socket holds. (A request denied sets the session's
  // error text to "Global request keepalive@openssh.com failed", which
  // nothing here reports.)
  ssh_session raw = session_->raw();
  ssh_send_keepalive(raw);
  ssh_send_keepalive(raw);
  // Reading may have found the connection closed.
  CheckConnection();
}

void SshExecutor::ConfigureSocket() {
  int fd = ssh_get_fd(session_->raw());
  if (fd < 0) return;
  const bool on = dead_after_.count() > 0;
  const long long ms = dead_after_.count();
  // Probes after a quarter of dead_after of quiet, then every quarter, as
  // many as fit in dead_after (whole seconds: the kernel's unit).
  const int interval_s = static_cast<int>(std::max<long long>(1, ms / 4000));
  const long long step_ms = interval_s * 1000LL;
  const int count =
      static_cast<int>(std::clamp<long long>((ms + step_ms - 1) / step_ms - 1, 1, 127));
  const unsigned int user_timeout_ms =
      on ? static_cast<unsigned int>(std::min<long long>(ms, UINT32_MAX)) : 0;
  int keepalive = on ? 1 : 0;
  struct Option {
    const char* name;
    int level;
    int option;
    const void* value;
    socklen_t size;
  };
  std::vector<Option> options = {
      {"SO_KEEPALIVE", SOL_SOCKET, SO_KEEPALIVE, &keepalive, sizeof keepalive},
      {"TCP_USER_TIMEOUT", IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout_ms, sizeof user_timeout_ms},
  };
  if (on) {
    options.push_back({"TCP_KEEPIDLE", IPPROTO_TCP, TCP_KEEPIDLE, &interval_s, sizeof interval_s});
    options.push_back({"TCP_KEEPINTVL", IPPROTO_TCP, TCP_KEEPINTVL, &interval_s, sizeof interval_s});
    options.push_back({"TCP_KEEPCNT", IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof count});
  }
  for (const Option& o : options) {
    if (setsockopt(fd, o.level, o.option, o.value, o.size) != 0) {
      // Not a TCP socket (ProxyCommand): the keepalive requests still apply.
      spdlog::debug("SSH executor: cannot set a socket option. [host: {}, option: {}, error: {}]",
                    label(), o.name, std::strerror(errno));
    }
  }
}

void SshExecutor::LoseConnection(Status why) {
  if (!health_.ok()) return;
  health_ = std::move(why);
  UnwatchSocket();
  if (liveness_timer_ != 0) loop_->CancelTimer(liveness_timer_);
  liveness_timer_ = 0;
  // Finish may run callbacks that start commands (Start then fails) or drop
  // them; iterate over a snapshot.
  std::vector<std::shared_ptr<Channel>> snapshot(channels_.begin(), channels_.end());
  for (auto& c : snapshot) {
    if (c->finished) continue;
    ExitStatus lost;
    lost.error = health_.message();
    if (c->stream) lost.error += " (stream to unix socket " + c->socket_path + ")";
    Finish(*c, lost);
  }
  for (auto& c : snapshot) ReleaseChannel(*c);
  if (on_lost_) {
    std::function<void(const Status&)> fn = on_lost_;
    CallUser("connection lost", label(), [&] { fn(health_); });
  }
}

bool SshExecutor::Advance(Channel& c) {
  if (c.finished) {
    ReleaseChannel(c);
    return false;
  }
  ssh_session raw = session_->raw();
  if (c.abandoned) {
    // A channel whose open is under way is freed once the host answered, so
    // that an open channel is never left behind.
    if (c.state == Channel::State::kOpening && OpenStep(c) == SSH_AGAIN) {
      return false;
    }
    spdlog::debug("SSH channel: dropped by its owner. [host: {}, channel: {}]", label(), c.id);
    c.finished = true;
    ReleaseChannel(c);
    return true;
  }

  bool progressed = false;
  switch (c.state) {
    case Channel::State::kQueued: {
      if (!c.stream && (open_channels_ >= max_channels_ || hold_timer_ != 0)) return false;
      c.channel = ssh_channel_new(raw);
      if (c.channel == nullptr) {
        ExitStatus failed;
        failed.error = label() + ": cannot create a channel: " + ssh_get_error(raw);
        Finish(c, failed);
        return true;
      }
      if (!c.stream) ++open_channels_;
      ssh_callbacks_init(&c.libssh_callbacks);
      c.libssh_callbacks.userdata = &c;
      c.libssh_callbacks.channel_data_function = &Channel::OnData;
      c.libssh_callbacks.channel_eof_function = &Channel::OnEof;
      c.libssh_callbacks.channel_close_function = &Channel::OnClose;
      c.libssh_callbacks.channel_exit_status_function = &Channel::OnExitStatus;
      c.libssh_callbacks.channel_exit_signal_function = &Channel::OnExitSignal;
      ssh_set_channel_callbacks(c.channel, &c.libssh_callbacks);
      c.state = Channel::State::kOpening;
      progressed = true;
      [[fallthrough]];
    }

    case Channel::State::kOpening: {
      int rc = OpenStep(c);
      if (c.finished) return true;
      if (rc == SSH_AGAIN) return progressed;
      if (rc != SSH_OK) {
        std::string why = ssh_get_error(raw);
        ReleaseChannel(c);
        if (c.stream) {
          ExitStatus failed;
          failed.error = StreamOpenError(c.socket_path, why);
          Finish(c, failed);
          return true;
        }
        if (ssh_is_connected(raw) && OpenRefusalIsTransient()) {
          c.state = Channel::State::kQueued;
          spdlog::debug(
              "SSH channel: open refused, waiting for a free slot. [host: {}, channel: {}, "
              "limit: {}, error: {}]",
              label(), c.id, max_channels_, why);
          return true;
        }
        ExitStatus failed;
        failed.error = label() + ": cannot open a channel: " + why;
        Finish(c, failed);
        return true;
      }
      progressed = true;
      if (c.stream) {
        spdlog::debug("SSH channel: stream open. [host: {}, channel: {}, socket: {}]", label(),
                      c.id, c.socket_path);
        c.state = Channel::State::kRunning;
        FlushStdin(c);
        return true;
      }
      c.state = Channel::State::kExecRequested;
      [[fallthrough]];
    }

    case Channel::State::kExecRequested: {
      int rc = ssh_channel_request_exec(c.channel, c.command_line.c_str());
      if (c.finished) return true;
      if (rc == SSH_AGAIN) return progressed;
      if (rc != SSH_OK) {
        ExitStatus failed;
        failed.error = label() + ": the host refused to run the command: " + ssh_get_error(raw);
        Finish(c, failed);
        ReleaseChannel(c);
        return true;
      }
      progressed = true;
      // libssh has the line now; a large job's lines are long (tens of KiB).
      std::string().swap(c.command_line);
      spdlog::debug("SSH channel: running. [host: {}, channel: {}]", label(), c.id);
      c.state = Channel::State::kRunning;
      [[fallthrough]];
    }

    case Channel::State::kRunning:
      FlushStdin(c);
      return DeliverHeld(c) || progressed;
  }
  return progressed;
}

bool SshExecutor::DeliverHeld(Channel& c) {
  if (c.paused || c.held == 0 || c.channel == nullptr) return false;
  char buffer[32 * 1024];
  while (c.held > 0 && !c.paused && c.wants_callbacks()) {
    // The bytes are in libssh's buffer already: this reads no packet.
    const int n = ssh_channel_read_nonblocking(c.channel, buffer,
                                               std::min<uint32_t>(c.held, sizeof buffer), 0);
    if (n <= 0) {
      c.held = 0;
      break;
    }
    c.held -= std::min<uint32_t>(c.held, static_cast<uint32_t>(n));
    c.Deliver(false, std::string_view(buffer, static_cast<size_t>(n)));
  }
  if (!c.wants_callbacks()) c.held = 0;
  if (c.held == 0 && c.close_held) {
    c.close_held = false;
    Channel::OnClose(nullptr, nullptr, &c);
  }
  return true;
}

bool SshExecutor::WriteAll(Channel& c, const std::string& data, size_t* offset) {
  while (*offset < data.size() && !c.finished && !c.eof_sent) {
    uint32_t window = ssh_channel_window_size(c.channel);
    if (window == 0) return false;  // a window adjust brings us back here
    size_t n = std::min({static_cast<size_t>(window), data.size() - *offset, kMaxWrite});
    int rc = ssh_channel_write(c.channel, data.data() + *offset, static_cast<uint32_t>(n));
    if (rc == SSH_ERROR) {
      const size_t dropped = c.stdin_queue.size() - c.stdin_offset +
                             (&data == &c.script ? c.script.size() - c.script_offset : 0);
      spdlog::debug("SSH channel: stdin write failed, {} bytes dropped. [host: {}, channel: {}, "
                    "error: {}]",
                    dropped, label(), c.id, ssh_get_error(session_->raw()));
      c.stdin_queue.clear();
      c.stdin_offset = 0;
      c.eof_sent = true;  // nothing more can be sent
      return false;
    }
    if (rc <= 0) return false;  // SSH_AGAIN or nothing taken: later
    *offset += static_cast<size_t>(rc);
  }
  return !c.finished && !c.eof_sent;
}

void SshExecutor::FlushStdin(Channel& c) {
  // A long command line's script goes first; the command's own stdin only
  // once the host said it has read all of the script.
  if (!WriteAll(c, c.script, &c.script_offset)) return;
  if (!c.script.empty()) {
    c.script.clear();
    c.script.shrink_to_fit();
    c.script_offset = 0;
  }
  if (!c.script_taken) return;
  if (!WriteAll(c, c.stdin_queue, &c.stdin_offset)) return;
  if (c.stdin_offset == c.stdin_queue.size()) {
    // Not clear(): libssh has the bytes now, and the channel may live on
    // for a long while (an Engine API call until its answer).
    std::string().swap(c.stdin_queue);
    c.stdin_offset = 0;
    if (c.stdin_close_requested && !c.eof_sent) {
      c.eof_sent = true;
      if (ssh_channel_send_eof(c.channel) != SSH_OK) {
        spdlog::debug("SSH channel: cannot send EOF. [host: {}, channel: {}, error: {}]", label(),
                      c.id, ssh_get_error(session_->raw()));
      }
    }
  }
}

void SshExecutor::AckNow() {
  // sshd leaves Nagle on for sessions without a pty: a small reply it sends
  // (channel open confirmation, exec reply, close) waits for our ACK of its
  // previous small packet, which Linux delays by up to 40 ms when we have
  // nothing to send back. Setting TCP_QUICKACK sends a pending ACK at once
  // (and acks promptly for a while).
  int fd = ssh_get_fd(session_->raw());
  int one = 1;
  if (fd >= 0) setsockopt(fd, IPPROTO_TCP, TCP_QUICKACK, &one, sizeof one);
}

bool SshExecutor::OpenRefusalIsTransient() {
  int open_on_host = 0;
  for (const auto& other : channels_) {
    if (!other->stream && other->channel && ssh_channel_is_open(other->channel)) ++open_on_host;
  }
  auto now = EventLoop::Clock::now();
  bool recently_closed = now - last_close_ < kRecentClose;
  if (open_on_host == 0 && !recently_closed) return false;
  // The host's limit is what it had open when it first refused.
  if (open_on_host > 0 && max_channels_ == kUnlimited) max_channels_ = open_on_host;
  // sshd frees a session slot a little after the channel's close: retry
  // shortly even when no channel of ours closes in between.
  if (hold_timer_ == 0) {
    hold_timer_ = loop_->AddTimer(now + kOpenRetryDelay, [this] { hold_timer_ = 0; });
  }
  return true;
}

void SshExecutor::ReleaseChannel(Channel& c) {
  if (c.channel == nullptr) return;
  ssh_channel channel = c.channel;
  c.channel = nullptr;
  if (c.stream) {
    ssh_remove_channel_callbacks(channel, &c.libssh_callbacks);
    ssh_channel_free(channel);
    return;
  }
  --open_channels_;
  if (c.state == Channel::State::kExecRequested || c.state == Channel::State::kRunning) {
    last_close_ = EventLoop::Clock::now();
  }
  ssh_remove_channel_callbacks(channel, &c.libssh_callbacks);
  ssh_channel_free(channel);
}

std::string SshExecutor::StreamOpenError(const std::string& socket_path,
                                         const std::string& why) const {
  if (ForwardingProhibited(why)) {
    return label() +
           ": its sshd refuses streams to unix sockets (AllowStreamLocalForwarding no or "
           "DisableForwarding yes in its sshd_config, or a no-port-forwarding key): cannot open "
           "a stream to " + socket_path + " (" + why + ")";
  }
  // OpenSSH (9.2) answers a forbidden stream with the same "open failed" as
  // a missing socket, and logs the difference only on the host.
  return label() + ": cannot open a stream to unix socket " + socket_path +
         " (no such socket, no permission to connect to it, nothing listening there, or its "
         "sshd forbids streams: AllowStreamLocalForwarding no or DisableForwarding yes in its "
         "sshd_config, or a no-port-forwarding key): " + why;
}

void SshExecutor::Finish(Channel& c, const ExitStatus& exit) {
  if (c.finished) return;
  c.finished = true;
  spdlog::debug("SSH channel: exited. [host: {}, channel: {}, code: {}, signal: {}, error: {}]",
                label(), c.id, exit.code, exit.signal, exit.error);
  std::function<void(const ExitStatus&)> on_exit = std::move(c.callbacks.on_exit);
  c.callbacks = {};
  if (c.abandoned || !on_exit) return;
  CallUser("exit", label(), [&] { on_exit(exit); });
}

}  // namespace barge::ssh
