// The front gate over real sockets: a real cpp-httplib server on a unix
// socket behind it, clients on loopback TCP, and another user (uid 65534,
// a forked child: these tests need root) playing a slow or greedy client;
// remote addresses in a network namespace of the test's own.
#include "runner/ui/gate.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

namespace barge::runner::ui {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

int Connect(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

void SendAll(int fd, const std::string& bytes) {
  size_t sent = 0;
  while (sent < bytes.size()) {
    const ssize_t n = send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return;
    sent += static_cast<size_t>(n);
  }
}

// Everything `fd` sends until it closes or `limit` passes.
std::string ReadAll(int fd, milliseconds limit = milliseconds(10000)) {
  std::string got;
  const auto end = steady_clock::now() + limit;
  char buf[65536];
  while (steady_clock::now() < end) {
    pollfd p{fd, POLLIN, 0};
    const auto left = std::chrono::duration_cast<milliseconds>(end - steady_clock::now());
    if (poll(&p, 1, static_cast<int>(std::max<int64_t>(1, left.count()))) <= 0) continue;
    const ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    got.append(buf, static_cast<size_t>(n));
  }
  return got;
}

// Whether `fd` is still open with nothing to read (the gate neither
// answered nor closed it).
bool StillWaiting(int fd) {
  pollfd p{fd, POLLIN, 0};
  return poll(&p, 1, 0) == 0;
}

// A gate in front of an httplib server on a unix socket, with `threads`
// server threads. The gate lets through requests that carry "X-Ok: yes".
class GateTest : public ::testing::Test {
 protected:
  void StartGate(GateLimits limits, int threads = 2, const std::string& host = "127.0.0.1") {
    char tmpl[] = "/tmp/barge-gate-test-XXXXXX";
    dir_ = mkdtemp(tmpl);
    socket_ = dir_ + "/s.sock";
    server_.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
    server_.set_keep_alive_timeout(30);
    server_.set_address_family(AF_UNIX);
    server_.Get("/", [this](const httplib::Request&, httplib::Response& res) {
      ++served_;
      res.set_content("hello", "text/plain");
    });
    server_.Get("/big", [this](const httplib::Request&, httplib::Response& res) {
      ++served_;
      res.set_content(std::string(3 << 20, 'b'), "text/plain");
    });
    server_.Post("/echo", [this](const httplib::Request& req, httplib::Response& res) {
      ++served_;
      res.set_content(req.body, "text/plain");
    });
    ASSERT_TRUE(server_.bind_to_port(socket_, 80));
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) std::this_thread::sleep_for(milliseconds(2));
    auto gate = Gate::Listen(host, 0, limits);
    ASSERT_TRUE(gate.ok()) << gate.status().message();
    gate_ = std::move(gate).value();
    gate_->Serve(
        socket_,
        [](const RequestHead& head) -> std::optional<Gate::Answer> {
          if (head.Field("X-Ok") == "yes") return std::nullopt;
          return Gate::Answer{401, "no X-Ok"};
        },
        [](int status, const std::string& message) {
          return "HTTP/1.1 " + std::to_string(status) + " Refused\r\nContent-Length: " +
                 std::to_string(message.size()) + "\r\nConnection: close\r\n\r\n" + message;
        });
  }
  void TearDown() override {
    if (gate_) gate_->Stop();
    server_.stop();
    if (thread_.joinable()) thread_.join();
    std::error_code ec;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
  }
  std::string Request(const std::string& request) {
    const int fd = Connect(gate_->port());
    if (fd < 0) return "connect failed";
    SendAll(fd, request);
    std::string got = ReadAll(fd);
    close(fd);
    return got;
  }

  std::string dir_, socket_;
  httplib::Server server_;
  std::thread thread_;
  std::unique_ptr<Gate> gate_;
  std::atomic<int> served_{0};
};

constexpr const char* kOkGet = "GET / HTTP/1.1\r\nHost: x\r\nX-Ok: yes\r\nConnection: close\r\n\r\n";

TEST_F(GateTest, AnAllowedRequestReachesTheServerAndItsAnswerAndABodyCrossWhole) {
  StartGate(GateLimits{});
  const std::string hello = Request(kOkGet);
  EXPECT_EQ(hello.substr(0, 15), "HTTP/1.1 200 OK") << hello.substr(0, 200);
  EXPECT_EQ(hello.substr(hello.size() - 5), "hello");
  // 3 MiB back: more than the gate buffers, so it waits on the client.
  const std::string big =
      Request("GET /big HTTP/1.1\r\nHost: x\r\nX-Ok: yes\r\nConnection: close\r\n\r\n");
  const size_t body = big.find("\r\n\r\n");
  ASSERT_NE(body, std::string::npos);
  EXPECT_EQ(big.size() - body - 4, size_t{3} << 20);
  // A body sent after the head, in pieces.
  const int fd = Connect(gate_->port());
  const std::string payload(200000, 'p');
  SendAll(fd, "POST /echo HTTP/1.1\r\nHost: x\r\nX-Ok: yes\r\nConnection: close\r\nContent-Length: " +
                  std::to_string(payload.size()) + "\r\n\r\n");
  for (size_t i = 0; i < payload.size(); i += 50000) SendAll(fd, payload.substr(i, 50000));
  const std::string echo = ReadAll(fd);
  close(fd);
  ASSERT_NE(echo.find("\r\n\r\n"), std::string::npos);
  EXPECT_EQ(echo.substr(echo.find("\r\n\r\n") + 4), payload);
  EXPECT_EQ(served_, 3);
}

TEST_F(GateTest, ARefusedRequestGetsTheGatesAnswerAndNeverReachesTheServer) {
  StartGate(GateLimits{});
  const std::string got = Request("GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(got.substr(0, 12), "HTTP/1.1 401") << got;
  EXPECT_NE(got.find("no X-Ok"), std::string::npos);
  EXPECT_EQ(served_, 0);
}

TEST_F(GateTest, OversizedAndMalformedHeadsGet431And400AndNeverReachTheServer) {
  GateLimits limits;
  limits.max_head_bytes = 1024;
  StartGate(limits);
  const std::string big = Request("GET / HTTP/1.1\r\nX-Ok: yes\r\nX-Big: " + std::string(64 * 1024, 'a') +
                                  "\r\n\r\n");
  EXPECT_EQ(big.substr(0, 12), "HTTP/1.1 431") << big.substr(0, 200);
  const std::string endless = Request(std::string(2000, 'G'));  // no line end at all
  EXPECT_EQ(endless.substr(0, 12), "HTTP/1.1 431") << endless.substr(0, 200);
  const std::string garbage = Request("\x16\x03\x01 tls hello");
  EXPECT_EQ(garbage.substr(0, 12), "HTTP/1.1 400") << garbage.substr(0, 200);
  EXPECT_EQ(served_, 0);
  EXPECT_EQ(Request(kOkGet).substr(0, 12), "HTTP/1.1 200");
}

TEST_F(GateTest, AHeadNotCompleteByItsDeadlineGets408AndIsClosed) {
  GateLimits limits;
  limits.head_deadline = milliseconds(300);
  StartGate(limits);
  const int fd = Connect(gate_->port());
  SendAll(fd, "GET / HTTP/1.1\r\nX-Ok: yes\r\n");  // and nothing more
  const auto start = steady_clock::now();
  const std::string got = ReadAll(fd);  // until the gate closes it
  const auto took = steady_clock::now() - start;
  close(fd);
  EXPECT_EQ(got.substr(0, 12), "HTTP/1.1 408") << got;
  EXPECT_GE(took, milliseconds(250));
  EXPECT_LT(took, milliseconds(5000));
  EXPECT_EQ(served_, 0);
}

// Runs `fn` in a child process as uid/gid 65534 (nobody); its exit code.
template <typename Fn>
int AsNobody(Fn fn) {
  const pid_t pid = fork();
  if (pid == 0) {
    if (setgid(65534) != 0 || setuid(65534) != 0) _exit(100);
    _exit(fn());
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 200;
}

TEST_F(GateTest, AnotherUsersSlowHeadsHoldNoServerThreadAndPastTheirCapGet503) {
  ASSERT_EQ(geteuid(), 0u) << "this test plays another user (uid 65534): it needs root";
  GateLimits limits;
  limits.max_unauthenticated_per_peer = 6;
  limits.head_deadline = milliseconds(60000);
  StartGate(limits, /*threads=*/1);
  int ready[2], done[2];
  ASSERT_EQ(pipe(ready), 0);
  ASSERT_EQ(pipe(done), 0);
  const int port = gate_->port();
  std::thread child([&] {
    const int rc = AsNobody([&] {
      // Six heads that never end, from uid 65534: the cap.
      std::vector<int> slow;
      for (int i = 0; i < 6; ++i) {
        const int fd = Connect(port);
        if (fd < 0) return 1;
        SendAll(fd, "GET / HTTP/1.1\r\nX-Ok: ye");
        slow.push_back(fd);
      }
      // A seventh is refused at once.
      const int extra = Connect(port);
      const std::string refused = ReadAll(extra, milliseconds(5000));
      close(extra);
      if (refused.substr(0, 12) != "HTTP/1.1 503") return 2;
      char c = 'r';
      if (write(ready[1], &c, 1) != 1) return 3;
      if (read(done[0], &c, 1) != 1) return 4;
      // The parent was served while all six were still waiting.
      for (int fd : slow) {
        if (!StillWaiting(fd)) return 5;
        close(fd);
      }
      return 0;
    });
    EXPECT_EQ(rc, 0) << "1: no connection; 2: no 503 past the cap; 5: a slow head was answered "
                        "or closed before the parent was served";
  });
  char c = 0;
  ASSERT_EQ(read(ready[0], &c, 1), 1);
  // The one server thread serves this user's requests, one after another.
  for (int i = 0; i < 5; ++i) {
    const std::string got = Request(kOkGet);
    EXPECT_EQ(got.substr(0, 12), "HTTP/1.1 200") << i << ": " << got;
  }
  ASSERT_EQ(write(done[1], &c, 1), 1);
  child.join();
  EXPECT_EQ(served_, 5);
  for (int fd : {ready[0], ready[1], done[0], done[1]}) close(fd);
}

TEST_F(GateTest, APeersOpenConnectionsPastTheCapGet503) {
  GateLimits limits;
  limits.max_connections_per_peer = 2;
  StartGate(limits, /*threads=*/4);
  // Two kept-alive connections, each served once.
  std::vector<int> open;
  for (int i = 0; i < 2; ++i) {
    const int fd = Connect(gate_->port());
    SendAll(fd, "GET / HTTP/1.1\r\nHost: x\r\nX-Ok: yes\r\n\r\n");
    std::string got;
    char buf[4096];
    while (got.find("hello") == std::string::npos) {
      const ssize_t n = recv(fd, buf, sizeof buf, 0);
      if (n <= 0) break;
      got.append(buf, static_cast<size_t>(n));
    }
    EXPECT_EQ(got.substr(0, 12), "HTTP/1.1 200") << got;
    open.push_back(fd);
  }
  EXPECT_EQ(Request(kOkGet).substr(0, 12), "HTTP/1.1 503");
  close(open[0]);
  // Once one closes, the peer may open another (the gate sees the close).
  std::string again;
  for (int i = 0; i < 100 && again.substr(0, 12) != "HTTP/1.1 200"; ++i) {
    again = Request(kOkGet);
    if (again.substr(0, 12) != "HTTP/1.1 200") std::this_thread::sleep_for(milliseconds(20));
  }
  EXPECT_EQ(again.substr(0, 12), "HTTP/1.1 200") << again;
  close(open[1]);
}


// A connection from `source` to `dest`:`port`, or -1.
int ConnectFrom(const std::string& source, const std::string& dest, int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in from{}, to{};
  from.sin_family = to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<uint16_t>(port));
  if (inet_pton(AF_INET, source.c_str(), &from.sin_addr) != 1 ||
      inet_pton(AF_INET, dest.c_str(), &to.sin_addr) != 1 ||
      bind(fd, reinterpret_cast<sockaddr*>(&from), sizeof from) != 0 ||
      connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// Reads `fd` until the server's answer to an allowed request ("hello") or
// the gate's refusal is in: true when it was a 200.
bool AnsweredWith200(int fd) {
  std::string got;
  char buf[4096];
  while (got.find("hello") == std::string::npos && got.find("Refused") == std::string::npos) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 10000) <= 0) break;
    const ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    got.append(buf, static_cast<size_t>(n));
  }
  return got.substr(0, 12) == "HTTP/1.1 200";
}

// Runs `fn` on a thread in a network namespace of its own (that thread's,
// and what it starts: the gate's thread, `ip`), whose lo is up and also
// holds 192.0.2.1, .2 and .3 (TEST-NET-1): clients that are not loopback,
// with nothing on the machine's own network changed.
template <typename Fn>
void InPrivateNetwork(Fn fn) {
  std::thread t([&] {
    ASSERT_EQ(unshare(CLONE_NEWNET), 0) << std::strerror(errno);
    ASSERT_EQ(std::system("ip link set lo up && ip addr add 192.0.2.1/32 dev lo && "
                          "ip addr add 192.0.2.2/32 dev lo && ip addr add 192.0.2.3/32 dev lo"),
              0);
    fn();
  });
  t.join();
}

TEST_F(GateTest, ARemoteAddressIsOnePeerWhoseWaitingAndOpenConnectionsAreCappedApartFromOthers) {
  ASSERT_EQ(geteuid(), 0u) << "this test makes a network namespace: it needs root";
  GateLimits limits;
  limits.max_unauthenticated_per_peer = 2;
  limits.max_connections_per_peer = 3;
  limits.head_deadline = milliseconds(60000);
  InPrivateNetwork([&] {
    StartGate(limits, /*threads=*/4, "192.0.2.1");
    const int port = gate_->port();
    auto request_from = [&](const std::string& source) {
      const int fd = ConnectFrom(source, "192.0.2.1", port);
      if (fd < 0) return std::string("connect failed");
      SendAll(fd, kOkGet);
      std::string got = ReadAll(fd);
      close(fd);
      return got;
    };
    // Two heads from 192.0.2.2 that have not ended: its cap of waiting ones.
    std::vector<int> mine;
    for (int i = 0; i < 2; ++i) {
      mine.push_back(ConnectFrom("192.0.2.2", "192.0.2.1", port));
      ASSERT_GE(mine.back(), 0);
      SendAll(mine.back(), "GET /");
    }
    const std::string third = request_from("192.0.2.2");
    EXPECT_EQ(third.substr(0, 12), "HTTP/1.1 503") << third;
    EXPECT_NE(third.find("too many connections waiting for their request from address 192.0.2.2"),
              std::string::npos)
        << third;
    // Another address is another peer.
    EXPECT_EQ(request_from("192.0.2.3").substr(0, 12), "HTTP/1.1 200");
    // The two heads end and their connections stay open: with a third
    // (once the gate saw the refused one close), 192.0.2.2 has its cap of
    // open connections, and a fourth is refused.
    for (int fd : mine) {
      SendAll(fd, " HTTP/1.1\r\nHost: x\r\nX-Ok: yes\r\n\r\n");
      EXPECT_TRUE(AnsweredWith200(fd));
    }
    bool served = false;
    for (int i = 0; i < 100 && !served; ++i) {
      const int fd = ConnectFrom("192.0.2.2", "192.0.2.1", port);
      ASSERT_GE(fd, 0);
      SendAll(fd, "GET / HTTP/1.1\r\nHost: x\r\nX-Ok: yes\r\n\r\n");
      served = AnsweredWith200(fd);
      if (served) {
        mine.push_back(fd);
      } else {
        close(fd);
        std::this_thread::sleep_for(milliseconds(20));
      }
    }
    ASSERT_TRUE(served);
    const std::string fourth = request_from("192.0.2.2");
    EXPECT_EQ(fourth.substr(0, 12), "HTTP/1.1 503") << fourth;
    EXPECT_NE(fourth.find("too many connections from address 192.0.2.2"), std::string::npos) << fourth;
    EXPECT_EQ(request_from("192.0.2.3").substr(0, 12), "HTTP/1.1 200");
    for (int fd : mine) close(fd);
  });
}

// Issue #40 (item 6): a local user is one peer whatever loopback address it
// connects from. uid 65534 spreads its slow heads over 127.0.0.2-.9: past
// its cap it is refused as "uid 65534", and this user is still served.
TEST_F(GateTest, ALocalUserIsOnePeerWhateverLoopbackAddressItConnectsFrom) {
  ASSERT_EQ(geteuid(), 0u) << "this test plays another user (uid 65534): it needs root";
  GateLimits limits;
  limits.max_unauthenticated_per_peer = 4;
  limits.head_deadline = milliseconds(60000);
  StartGate(limits);
  const int port = gate_->port();
  int ready[2], done[2];
  ASSERT_EQ(pipe(ready), 0);
  ASSERT_EQ(pipe(done), 0);
  std::thread child([&] {
    const int rc = AsNobody([&] {
      std::vector<int> slow;
      for (int i = 0; i < 4; ++i) {
        const int fd = ConnectFrom("127.0.0." + std::to_string(2 + i), "127.0.0.1", port);
        if (fd < 0) return 1;
        SendAll(fd, "GET / HTTP/1.1\r\nX-Ok: ye");
        slow.push_back(fd);
      }
      // A fifth, from yet another loopback address: the same peer, refused.
      const int extra = ConnectFrom("127.0.0.9", "127.0.0.1", port);
      if (extra < 0) return 1;
      const std::string refused = ReadAll(extra, milliseconds(5000));
      close(extra);
      if (refused.substr(0, 12) != "HTTP/1.1 503") return 2;
      if (refused.find("uid 65534") == std::string::npos) return 3;
      char c = 'r';
      if (write(ready[1], &c, 1) != 1) return 4;
      if (read(done[0], &c, 1) != 1) return 4;
      for (int fd : slow) close(fd);
      return 0;
    });
    EXPECT_EQ(rc, 0) << "1: no connection; 2: the fifth was not refused (each address a new peer?); "
                        "3: the refusal does not name uid 65534";
  });
  char c = 0;
  ASSERT_EQ(read(ready[0], &c, 1), 1);
  // This user, from 127.0.0.5 too, is another peer and is served.
  const int mine = ConnectFrom("127.0.0.5", "127.0.0.1", port);
  ASSERT_GE(mine, 0);
  SendAll(mine, "GET / HTTP/1.1\r\nX-Ok: yes\r\n\r\n");
  const std::string served = ReadAll(mine, milliseconds(5000));
  close(mine);
  EXPECT_EQ(served.substr(0, 12), "HTTP/1.1 200") << served;
  ASSERT_EQ(write(done[1], &c, 1), 1);
  child.join();
}

}  // namespace
}  // namespace barge::runner::ui
