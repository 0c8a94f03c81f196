// LocalExecutor::OpenUnixStream against real unix socket servers run by the
// test on threads of their own.
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "ssh/local_executor.h"
#include "tests/support/ssh_test_util.h"

namespace barge::ssh {
namespace {

using testing::Collected;
using testing::CollectInto;
using testing::PollUntil;
using testing::TempDir;

// A listening unix socket at `path` whose first connection is handed to
// `serve` on a thread; the destructor joins it.
class UnixServer {
 public:
  UnixServer(const std::string& path, std::function<void(int fd)> serve) {
    listen_fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
    EXPECT_EQ(bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0)
        << std::strerror(errno);
    EXPECT_EQ(listen(listen_fd_, 8), 0);
    thread_ = std::thread([this, serve = std::move(serve)] {
      int fd = accept(listen_fd_, nullptr, nullptr);
      if (fd < 0) return;
      serve(fd);
      close(fd);
    });
  }
  ~UnixServer() {
    shutdown(listen_fd_, SHUT_RDWR);  // ends an accept that got nothing
    thread_.join();
    close(listen_fd_);
  }

 private:
  int listen_fd_ = -1;
  std::thread thread_;
};

std::string ReadToEof(int fd) {
  std::string all;
  char buf[4096];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n <= 0) return all;
    all.append(buf, static_cast<size_t>(n));
  }
}

void WriteAllTo(int fd, const std::string& data) {
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = send(fd, data.data() + off, data.size() - off, MSG_NOSIGNAL);
    if (n <= 0) return;
    off += static_cast<size_t>(n);
  }
}

TEST(LocalStream, SendsStdinAndDeliversTheServersReplyThenExitsZeroAtItsClose) {
  TempDir dir;
  const std::string path = dir.File("s.sock");
  std::string received;
  {
    UnixServer server(path, [&](int fd) {
      received = ReadToEof(fd);  // until our CloseStdin
      WriteAllTo(fd, "reply to " + received);
    });
    EventLoop loop;
    LocalExecutor local(&loop);
    auto r = std::make_shared<Collected>();
    auto stream = local.OpenUnixStream(path, CollectInto(r));
    ASSERT_TRUE(stream.ok()) << stream.status().message();
    (*stream)->WriteStdin("GET ");
    (*stream)->WriteStdin("/_ping");
    (*stream)->CloseStdin();
    ASSERT_TRUE(PollUntil(loop, [&] { return r->finished(); }));
    EXPECT_EQ(r->out, "reply to GET /_ping");
    EXPECT_EQ(r->err, "");
    EXPECT_TRUE(r->exit.known()) << r->exit.error;
    EXPECT_EQ(r->exit.code, 0);
    EXPECT_EQ(r->exit_calls, 1);
    EXPECT_TRUE((*stream)->done());
  }
  EXPECT_EQ(received, "GET /_ping");
}

TEST(LocalStream, DeliversEveryByteOfALargeReplyBeforeOnExit) {
  TempDir dir;
  const std::string path = dir.File("s.sock");
  std::string big(3 * 1024 * 1024 + 17, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 131 % 251);
  UnixServer server(path, [&](int fd) { WriteAllTo(fd, big); });
  EventLoop loop;
  LocalExecutor local(&loop);
  auto r = std::make_shared<Collected>();
  auto stream = local.OpenUnixStream(path, CollectInto(r));
  ASSERT_TRUE(stream.ok());
  ASSERT_TRUE(PollUntil(loop, [&] { return r->finished(); }));
  EXPECT_EQ(r->bytes_at_exit, big.size());
  EXPECT_TRUE(r->out == big);
  EXPECT_EQ(r->exit.code, 0);
  EXPECT_EQ(r->exit_calls, 1);
}

TEST(LocalStream, AMissingSocketIsAnErrorNamingThePathDeliveredFromPollNotFromOpen) {
  TempDir dir;
  const std::string path = dir.File("nothing-here.sock");
  EventLoop loop;
  LocalExecutor local(&loop);
  auto r = std::make_shared<Collected>();
  auto stream = local.OpenUnixStream(path, CollectInto(r));
  ASSERT_TRUE(stream.ok());
  EXPECT_EQ(r->exit_calls, 0);  // not from inside OpenUnixStream
  ASSERT_TRUE(PollUntil(loop, [&] { return r->finished(); }));
  EXPECT_FALSE(r->exit.known());
  EXPECT_NE(r->exit.error.find("local: unix socket " + path), std::string::npos) << r->exit.error;
  EXPECT_NE(r->exit.error.find("No such file or directory"), std::string::npos) << r->exit.error;
  EXPECT_EQ(r->exit_calls, 1);
}

TEST(LocalStream, ASocketNobodyListensOnIsRefused) {
  TempDir dir;
  const std::string path = dir.File("dead.sock");
  {
    // Bound, then closed without listening: the file stays, nobody accepts.
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
    ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    close(fd);
  }
  EventLoop loop;
  LocalExecutor local(&loop);
  auto r = std::make_shared<Collected>();
  auto stream = local.OpenUnixStream(path, CollectInto(r));
  ASSERT_TRUE(stream.ok());
  ASSERT_TRUE(PollUntil(loop, [&] { return r->finished(); }));
  EXPECT_NE(r->exit.error.find("Connection refused"), std::string::npos) << r->exit.error;
}

TEST(LocalStream, AnEmptyPathFailsAtOnce) {
  EventLoop loop;
  LocalExecutor local(&loop);
  auto stream = local.OpenUnixStream("", {});
  ASSERT_FALSE(stream.ok());
  EXPECT_NE(stream.status().message().find("not a unix socket path"), std::string::npos);
}

TEST(LocalStream, MayBeDestroyedFromItsOwnOutputCallbackAndThenCallsNothingMore) {
  TempDir dir;
  const std::string path = dir.File("s.sock");
  UnixServer server(path, [&](int fd) { WriteAllTo(fd, std::string(200000, 'x')); });
  EventLoop loop;
  LocalExecutor local(&loop);
  std::unique_ptr<Command> stream;
  int outputs = 0, exits = 0;
  CommandCallbacks cb;
  cb.on_stdout = [&](std::string_view) {
    ++outputs;
    stream.reset();
  };
  cb.on_exit = [&](const ExitStatus&) { ++exits; };
  auto opened = local.OpenUnixStream(path, std::move(cb));
  ASSERT_TRUE(opened.ok());
  stream = std::move(opened).value();
  ASSERT_TRUE(PollUntil(loop, [&] { return stream == nullptr; }));
  for (int i = 0; i < 5; ++i) loop.Poll(std::chrono::milliseconds(10));
  EXPECT_EQ(outputs, 1);
  EXPECT_EQ(exits, 0);
}

// A transport without streams (the fakes of controller tests) says so.
class NoStreams : public Executor {
 public:
  Result<std::unique_ptr<Command>> Start(const std::string&, CommandCallbacks) override {
    return Status::Error("unused");
  }
  std::string label() const override { return "fake-host"; }
};

TEST(Executor, WithoutStreamsOpenUnixStreamFailsNamingTheHostAndTheSocket) {
  NoStreams fake;
  auto stream = fake.OpenUnixStream("/var/run/docker.sock", {});
  ASSERT_FALSE(stream.ok());
  EXPECT_EQ(stream.status().message(),
            "fake-host: cannot open a stream to /var/run/docker.sock: this transport has no "
            "streams");
}

}  // namespace
}  // namespace barge::ssh
