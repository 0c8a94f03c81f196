// Tests of PortForward over plain TCP (the local engine's way): bytes both
// ways through the loop, a busy port refused at once, and how a refused
// direct-tcpip open is told apart.
#include "ssh/port_forward.h"

#include "ssh/channel_errors.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
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
