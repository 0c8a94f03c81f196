// Tests of PortForward over plain TCP (the local engine's way): bytes both
// ways through the loop, a busy port refused at once, and how a refused
// direct-tcpip open is told apart.
#include "ssh/port_forward.h"

#include "ssh/channel_errors.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>

#include "ssh/local_executor.h"

namespace barge::ssh {
namespace {

int ListenLoopback(int* port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  listen(fd, 8);
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  *port = ntohs(a.sin_port);
  return fd;
}

int Connect(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

TEST(PortForward, CarriesFourMebibytesBothWaysThroughTheLoop) {
  EventLoop loop;
  LocalExecutor local(&loop);
  int server_port = 0;
  int server = ListenLoopback(&server_port);
  // An echo server that shuts its side once the client's bytes ended.
  std::thread echo([server] {
    int c = accept(server, nullptr, nullptr);
    char buf[65536];
    for (ssize_t n; (n = read(c, buf, sizeof buf)) > 0;) {
      for (ssize_t off = 0; off < n;) off += write(c, buf + off, n - off);
    }
    shutdown(c, SHUT_WR);
    close(c);
  });
  Result<std::unique_ptr<PortForward>> f = PortForward::Listen(&loop, 0);
  ASSERT_TRUE(f.ok()) << f.status().message();
  bool fatal = false;
  (*f)->Serve(&local, "127.0.0.1", server_port, [&](const Status&) { fatal = true; });

  const std::string payload = [] {
    std::string s(4 << 20, '\0');
    for (size_t i = 0; i < s.size(); ++i) s[i] = static_cast<char>(i * 7 + i / 4096);
    return s;
  }();
  std::string received;
  std::atomic<bool> client_done{false};
  std::thread client([&, port = (*f)->local_port()] {
    int fd = Connect(port);
    std::thread writer([&, fd] {
      for (size_t off = 0; off < payload.size();) {
        ssize_t n = write(fd, payload.data() + off, payload.size() - off);
        if (n <= 0) break;
        off += static_cast<size_t>(n);
      }
      shutdown(fd, SHUT_WR);
    });
    char buf[65536];
    for (ssize_t n; (n = read(fd, buf, sizeof buf)) > 0;) received.append(buf, static_cast<size_t>(n));
    writer.join();
    close(fd);
    client_done = true;
  });
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!client_done && std::chrono::steady_clock::now() < end) loop.Poll(std::chrono::milliseconds(50));
  client.join();
  echo.join();
  close(server);
  EXPECT_FALSE(fatal);
  EXPECT_EQ(received.size(), payload.size());
  EXPECT_TRUE(received == payload);
  EXPECT_EQ((*f)->accepted(), 1u);
}

// Runs `fn` in a child process as uid/gid 65534 (nobody); its exit code.
int AsNobody(EventLoop& loop, const std::function<int()>& fn) {
  pid_t pid = fork();
  if (pid == 0) {
    if (setgid(65534) != 0 || setuid(65534) != 0) _exit(100);
    _exit(fn());
  }
  int status = 0;
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (waitpid(pid, &status, WNOHANG) == 0 && std::chrono::steady_clock::now() < end) {
    loop.Poll(std::chrono::milliseconds(20));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(PortForward, AConnectionOfAnotherUserIsClosedAtOnceAndNothingReachesTheTarget) {
  ASSERT_EQ(geteuid(), 0u) << "this test plays another user (uid 65534): it needs root";
  EventLoop loop;
  LocalExecutor local(&loop);
  int target_port = 0;
  int target = ListenLoopback(&target_port);
  Result<std::unique_ptr<PortForward>> f = PortForward::Listen(&loop, 0);
  ASSERT_TRUE(f.ok()) << f.status().message();
  (*f)->Serve(&local, "127.0.0.1", target_port, [](const Status&) {});
  // The other user connects, sends, and reads: the connection ends at once
  // (0 from read) and nothing reaches the target.
  const int port = (*f)->local_port();
  const int code = AsNobody(loop, [port] {
    int fd = Connect(port);
    if (fd < 0) return 2;
    // "At once": the end must come within a second.
    timeval limit{1, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
    (void)!write(fd, "GET / HTTP/1.0\r\n\r\n", 18);
    char buf[16];
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 4;
    return n <= 0 ? 0 : 3;
  });
  EXPECT_EQ(code, 0) << "2: no connection; 3: bytes came back; 4: still open after 1 s; 100: not root";
  for (int i = 0; i < 10; ++i) loop.Poll(std::chrono::milliseconds(10));
  EXPECT_EQ((*f)->refused(), 1u);
  EXPECT_EQ((*f)->accepted(), 0u);
  fcntl(target, F_SETFL, O_NONBLOCK);
  EXPECT_LT(accept(target, nullptr, nullptr), 0) << "a connection reached the target";
  close(target);
}

TEST(PortForward, AUnixSocketIsMode0600FromTheStartAndRefusesAnExistingPath) {
  ASSERT_EQ(geteuid(), 0u) << "this test plays another user (uid 65534): it needs root";
  EventLoop loop;
  char dir_template[] = "/tmp/barge-fwd-XXXXXX";
  ASSERT_NE(mkdtemp(dir_template), nullptr);
  chmod(dir_template, 0755);
  const std::string path = std::string(dir_template) + "/dash.sock";
  {
    Result<std::unique_ptr<PortForward>> f = PortForward::ListenUnix(&loop, path);
    ASSERT_TRUE(f.ok()) << f.status().message();
    struct stat st {};
    ASSERT_EQ(lstat(path.c_str(), &st), 0);
    EXPECT_TRUE(S_ISSOCK(st.st_mode));
    EXPECT_EQ(st.st_mode & 0777, 0600u);
    EXPECT_EQ((*f)->local_port(), 0);
    // Another user cannot even connect.
    const int code = AsNobody(loop, [path] {
      int fd = socket(AF_UNIX, SOCK_STREAM, 0);
      sockaddr_un a{};
      a.sun_family = AF_UNIX;
      std::snprintf(a.sun_path, sizeof a.sun_path, "%s", path.c_str());
      return connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 ? 1 : (errno == EACCES ? 0 : 2);
    });
    EXPECT_EQ(code, 0);
    Result<std::unique_ptr<PortForward>> again = PortForward::ListenUnix(&loop, path);
    ASSERT_FALSE(again.ok());
    EXPECT_NE(again.status().message().find(path + " already exists"), std::string::npos)
        << again.status().message();
  }
  EXPECT_FALSE(std::filesystem::exists(path)) << "the socket file outlived its forward";
  rmdir(dir_template);
}

TEST(PortForward, ABusyPortIsAnErrorAtOnceNamingIt) {
  EventLoop loop;
  int port = 0;
  int taken = ListenLoopback(&port);
  Result<std::unique_ptr<PortForward>> f = PortForward::Listen(&loop, port);
  close(taken);
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("127.0.0.1:" + std::to_string(port) + " is already in use"),
            std::string::npos)
      << f.status().message();
}

TEST(PortForward, OnlyAnAdministrativelyProhibitedOpenCountsAsForwardingRefused) {
  EXPECT_TRUE(ForwardingProhibited(
      "Channel opening failure: channel 5 error (1) administratively prohibited"));
  EXPECT_FALSE(ForwardingProhibited("Channel opening failure: channel 5 error (2) Connection refused"));
}

}  // namespace
}  // namespace barge::ssh
