// S3Server: a real S3-compatible server on loopback for a test
// (tests/support/s3_server.py: moto's server with SigV4 authentication on),
// started as a child process the object owns and stopped when it goes.
// `part_min_size` is the least size the server accepts for a part that is
// not the last (S3's is 5 MiB; tests size it down).
//
// FaultProxy: a TCP proxy on loopback in front of a server. Each
// connection's request headers are read first; `refuse(n, request_line)`
// (n counts connections from 1) says whether it is answered "503 SlowDown"
// instead of being passed through byte for byte. libcurl opens one
// connection per S3Client call, so a connection is a request.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace barge::testing {

class S3Server {
 public:
  explicit S3Server(std::vector<std::string> buckets = {"barge-test"}, size_t part_min_size = 5 << 20) {
    int in[2], out[2];
    if (pipe(in) != 0 || pipe(out) != 0) throw std::runtime_error("pipe");
    pid_ = fork();
    if (pid_ == 0) {
      dup2(in[0], 0);
      dup2(out[1], 1);
      close(in[1]);
      close(out[0]);
      setenv("S3_UPLOAD_PART_MIN_SIZE", std::to_string(part_min_size).c_str(), 1);
      const char* python = getenv("BARGE_S3_PYTHON") ? getenv("BARGE_S3_PYTHON") : "python3";
      std::vector<std::string> args = {python, std::string(BARGE_SOURCE_DIR) + "/tests/support/s3_server.py"};
      args.insert(args.end(), buckets.begin(), buckets.end());
      std::vector<char*> argv;
      for (std::string& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execvp(argv[0], argv.data());
      _exit(127);
    }
    close(in[0]);
    close(out[1]);
    stdin_ = in[1];
    std::string line;
    char c;
    while (read(out[0], &c, 1) == 1 && c != '\n') line += c;
    close(out[0]);
    char key[256] = {}, secret[256] = {};
    if (std::sscanf(line.c_str(), "%d %255s %255s", &port_, key, secret) != 3) {
      Stop();
      throw std::runtime_error(
          "tests/support/s3_server.py did not start (is Python's moto installed? scripts/test.sh installs it); "
          "it printed: '" + line + "'");
    }
    access_key_ = key;
    secret_key_ = secret;
  }
  ~S3Server() { Stop(); }
  S3Server(const S3Server&) = delete;
  S3Server& operator=(const S3Server&) = delete;

  int port() const { return port_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  const std::string& access_key() const { return access_key_; }
  const std::string& secret_key() const { return secret_key_; }

 private:
  void Stop() {
    if (stdin_ >= 0) close(stdin_);
    stdin_ = -1;
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      waitpid(pid_, nullptr, 0);
    }
    pid_ = -1;
  }
  pid_t pid_ = -1;
  int stdin_ = -1;
  int port_ = 0;
  std::string access_key_, secret_key_;
};

class FaultProxy {
 public:
  using Refuse = std::function<bool(int n, const std::string& request_line)>;
  FaultProxy(int target_port, Refuse refuse) : target_port_(target_port), refuse_(std::move(refuse)) {
    listen_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    if (bind(listen_, reinterpret_cast<sockaddr*>(&a), len) != 0 || listen(listen_, 64) != 0 ||
        getsockname(listen_, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
      throw std::runtime_error("FaultProxy: cannot listen");
    }
    port_ = ntohs(a.sin_port);
    accept_ = std::thread([this] { Accept(); });
  }
  ~FaultProxy() {
    stopping_ = true;
    shutdown(listen_, SHUT_RDWR);
    accept_.join();
    close(listen_);
    std::lock_guard<std::mutex> lock(mu_);
    for (std::thread& t : pipes_) t.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  int connections() const { return connections_.load(); }
  int refused() const { return refused_.load(); }

 private:
  void Accept() {
    while (!stopping_) {
      int c = accept(listen_, nullptr, nullptr);
      if (c < 0) return;
      const int n = ++connections_;
      std::lock_guard<std::mutex> lock(mu_);
      pipes_.emplace_back([this, c, n] { Serve(c, n); });
    }
  }
  void Serve(int c, int n) {
    std::string got;
    char buf[4096];
    ssize_t r;
    while (got.find("\r\n\r\n") == std::string::npos && (r = read(c, buf, sizeof buf)) > 0) got.append(buf, r);
    if (refuse_(n, got.substr(0, got.find("\r\n")))) {
      ++refused_;
      Answer503(c);
    } else {
      Pass(c, got);
    }
  }
  static void Answer503(int c) {
    char buf[4096];
    const std::string answer =
        "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/xml\r\nConnection: close\r\n"
        "Content-Length: 62\r\n\r\n<Error><Code>SlowDown</Code><Message>injected</Message></Error>";
    (void)!write(c, answer.data(), answer.size());
    shutdown(c, SHUT_WR);
    while (read(c, buf, sizeof buf) > 0) {
    }
    close(c);
  }
  void Pass(int c, const std::string& head) {
    int s = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(target_port_);
    if (connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      close(s);
      close(c);
      return;
    }
    (void)!write(s, head.data(), head.size());
    pollfd fds[2] = {{c, POLLIN, 0}, {s, POLLIN, 0}};
    char buf[65536];
    bool open[2] = {true, true};
    while (open[0] || open[1]) {
      if (poll(fds, 2, 200) < 0 || stopping_) break;
      for (int i = 0; i < 2; ++i) {
        if (!open[i] || !(fds[i].revents & (POLLIN | POLLHUP))) continue;
        ssize_t r = read(fds[i].fd, buf, sizeof buf);
        if (r <= 0) {
          open[i] = false;
          fds[i].fd = -1;
          shutdown(i == 0 ? s : c, SHUT_WR);
          continue;
        }
        (void)!write(i == 0 ? s : c, buf, r);
      }
    }
    close(s);
    close(c);
  }

  const int target_port_;
  const Refuse refuse_;
  int listen_ = -1;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<int> connections_{0};
  std::atomic<int> refused_{0};
  std::mutex mu_;
  std::vector<std::thread> pipes_;
  std::thread accept_;
};

// `n` bytes of a xorshift sequence from `seed`: the same for the same
// arguments, unlike any other seed's (test files of a known content).
inline std::string PseudoRandomBytes(size_t n, int seed) {
  std::string s(n, '\0');
  uint32_t x = 88172645u + static_cast<uint32_t>(seed);
  for (char& c : s) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    c = static_cast<char>(x);
  }
  return s;
}

}  // namespace barge::testing
