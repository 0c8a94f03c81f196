// ConnectAll against the real sshds of the test bed: every handshake on the
// calling thread's event loop, the loop free for its other work meanwhile,
// at most `parallelism` at once, and the failures (no banner, refused,
// unreachable) named and bounded as Session::Connect's.
#include "ssh/connect_all.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "ssh/event_loop.h"
#include "tests/support/bed_test_util.h"

namespace barge::ssh {
namespace {

using barge::testing::GetBed;
using std::chrono::milliseconds;
using testing::BedOptions;
using testing::TempDir;
using Clock = std::chrono::steady_clock;

// The number of threads of this process, from /proc/self/task.
int ThreadsOfThisProcess() {
  DIR* dir = opendir("/proc/self/task");
  if (dir == nullptr) return -1;
  int threads = 0;
  while (dirent* entry = readdir(dir)) {
    if (entry->d_name[0] != '.') ++threads;
  }
  closedir(dir);
  return threads;
}

// A TCP listener on loopback whose kernel accepts connections that no one
// ever answers: an SSH server that never sends its banner.
class BannerlessListener {
 public:
  BannerlessListener() {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr = {};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    EXPECT_EQ(listen(fd_, 16), 0);
    socklen_t len = sizeof addr;
    EXPECT_EQ(getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len), 0);
    port_ = ntohs(addr.sin_port);
  }
  ~BannerlessListener() { close(fd_); }
  BannerlessListener(const BannerlessListener&) = delete;
  BannerlessListener& operator=(const BannerlessListener&) = delete;
  int port() const { return port_; }

 private:
  int fd_ = -1;
  int port_ = 0;
};

SessionOptions Bannerless(const TempDir& dir, const BannerlessListener& listener, milliseconds timeout) {
  SessionOptions o = BedOptions(dir);
  o.host = "127.0.0.1";
  o.port = listener.port();
  o.connect_timeout = timeout;
  return o;
}

// Every bed sshd (the loopback one and each namespace host's), `rounds`
// times over.
std::vector<SessionOptions> EveryBedHost(const TempDir& dir, int rounds) {
  std::vector<SessionOptions> all;
  for (int r = 0; r < rounds; ++r) {
    all.push_back(BedOptions(dir));
    for (const auto& host : GetBed().hosts) {
      SessionOptions o = BedOptions(dir);
      o.host = host.address;
      o.port = host.port;
      all.push_back(o);
    }
  }
  return all;
}

TEST(ConnectAll, RunsEveryHandshakeOnTheCallingThreadWhileTheLoopKeepsRunningItsTimers) {
  TempDir dir;
  EventLoop loop;
  const std::vector<SessionOptions> all = EveryBedHost(dir, 4);
  ASSERT_GE(all.size(), 8u) << "the bed should have namespace hosts";
  ASSERT_EQ(ThreadsOfThisProcess(), 1) << "the test must start single-threaded to mean anything";

  // A timer every 5 ms, counting its runs and the threads it sees.
  int ticks = 0;
  int most_threads = 0;
  std::function<void()> tick = [&] {
    ++ticks;
    most_threads = std::max(most_threads, ThreadsOfThisProcess());
    loop.AddTimer(loop.Now() + milliseconds(5), tick);
  };
  loop.AddTimer(loop.Now(), tick);

  auto results = ConnectAll(all, 4, &loop);
  const int ticks_while_connecting = ticks;
  ASSERT_EQ(results.size(), all.size());
  for (size_t i = 0; i < all.size(); ++i) {
    ASSERT_TRUE(results[i].ok()) << i << ": " << results[i].status().message();
    EXPECT_EQ(results[i].value()->peer_address(), all[i].host) << i;
  }
  // The loop ran its timer again and again while the handshakes were in
  // flight (ConnectAll is the only caller of Poll here), and no thread was
  // ever started for them.
  EXPECT_GE(ticks_while_connecting, 3);
  EXPECT_EQ(most_threads, 1);
  EXPECT_EQ(ThreadsOfThisProcess(), 1);
}

TEST(ConnectAll, AHostThatNeverSendsItsBannerTimesOutAfterItsConnectTimeoutWhileTheOthersConnect) {
  TempDir dir;
  EventLoop loop;
  BannerlessListener silent;
  const milliseconds timeout(1500);
  std::vector<SessionOptions> all = {BedOptions(dir), Bannerless(dir, silent, timeout), BedOptions(dir)};
  const auto start = Clock::now();
  auto results = ConnectAll(all, 3, &loop);
  const auto elapsed = Clock::now() - start;
  ASSERT_EQ(results.size(), 3u);
  EXPECT_TRUE(results[0].ok()) << results[0].status().message();
  EXPECT_TRUE(results[2].ok()) << results[2].status().message();
  ASSERT_FALSE(results[1].ok());
  EXPECT_EQ(results[1].status().message(),
            GetBed().user + "@127.0.0.1:" + std::to_string(silent.port()) +
                ": connection timed out after 1.5s (Timeout connecting to 127.0.0.1)");
  // Bounded both ways (loosely: a correctness bound, not a performance one).
  EXPECT_GE(elapsed, timeout);
  EXPECT_LT(elapsed, timeout + milliseconds(5000));
}

TEST(ConnectAll, KeepsAtMostParallelismHandshakesInFlight) {
  TempDir dir;
  EventLoop loop;
  BannerlessListener silent;
  const milliseconds timeout(1000);
  const std::vector<SessionOptions> two(2, Bannerless(dir, silent, timeout));

  // One at a time: the second starts when the first has timed out.
  auto start = Clock::now();
  auto one_at_a_time = ConnectAll(two, 1, &loop);
  const auto serial = Clock::now() - start;
  // Both at once: they time out together.
  start = Clock::now();
  auto both_at_once = ConnectAll(two, 2, &loop);
  const auto parallel = Clock::now() - start;

  for (const auto* results : {&one_at_a_time, &both_at_once}) {
    ASSERT_EQ(results->size(), 2u);
    for (const auto& r : *results) {
      ASSERT_FALSE(r.ok());
      EXPECT_NE(r.status().message().find("timed out after 1s"), std::string::npos) << r.status().message();
    }
  }
  EXPECT_GE(serial, 2 * timeout);
  EXPECT_LT(parallel, 2 * timeout - milliseconds(200));
  EXPECT_GE(parallel, timeout);
}

TEST(ConnectAll, ARefusedPortFailsAtOnceWithTheHostsLabel) {
  TempDir dir;
  EventLoop loop;
  int port = 0;
  {
    BannerlessListener probe;  // a free port, closed again at the end of this block
    port = probe.port();
  }
  SessionOptions refused = BedOptions(dir);
  refused.host = "127.0.0.1";
  refused.port = port;
  const auto start = Clock::now();
  auto results = ConnectAll({refused, BedOptions(dir)}, 2, &loop);
  const auto elapsed = Clock::now() - start;
  ASSERT_EQ(results.size(), 2u);
  ASSERT_FALSE(results[0].ok());
  const std::string msg = results[0].status().message();
  EXPECT_EQ(msg.rfind(GetBed().user + "@127.0.0.1:" + std::to_string(port) + ": cannot connect: ", 0), 0u)
      << msg;
  EXPECT_NE(msg.find("refused"), std::string::npos) << msg;
  EXPECT_TRUE(results[1].ok()) << results[1].status().message();
  // Well before the 10 s connect timeout.
  EXPECT_LT(elapsed, milliseconds(5000));
}

TEST(ConnectAll, AnAddressWithNoHostBehindItIsBoundedByTheConnectTimeout) {
  TempDir dir;
  EventLoop loop;
  // An address of the bed's own subnet that no bed host has: nothing
  // answers its ARP, so the connect never completes.
  SessionOptions nobody = BedOptions(dir);
  nobody.host = "10.77.0.250";
  nobody.port = 22;
  for (const auto& host : GetBed().hosts) ASSERT_NE(host.address, nobody.host);
  nobody.connect_timeout = milliseconds(2000);
  const auto start = Clock::now();
  auto results = ConnectAll({nobody}, 1, &loop);
  const auto elapsed = Clock::now() - start;
  ASSERT_EQ(results.size(), 1u);
  ASSERT_FALSE(results[0].ok());
  const std::string msg = results[0].status().message();
  const std::string label = GetBed().user + "@10.77.0.250:22: ";
  EXPECT_TRUE(msg.rfind(label + "connection timed out after 2s (", 0) == 0 ||
              msg.rfind(label + "cannot connect: ", 0) == 0)
      << msg;
  EXPECT_LT(elapsed, milliseconds(2000 + 5000));
}

TEST(ConnectAll, ReachesAHostThroughProxyJumpOnTheLoopToo) {
  const auto& bed = GetBed();
  ASSERT_FALSE(bed.jump_target.address.empty()) << "the bed has no jump target (tests/bed/bed.sh up)";
  std::string via;
  for (const auto& host : bed.hosts) {
    if (host.name == bed.jump_via) via = bed.user + "@" + host.address + ":" + std::to_string(host.port);
  }
  ASSERT_FALSE(via.empty()) << "no bed host named " << bed.jump_via;
  TempDir dir;
  EventLoop loop;
  SessionOptions target = BedOptions(dir);
  target.host = bed.jump_target.address;
  target.port = bed.jump_target.port;
  target.proxy_jump = {via};
  int ticks = 0;
  std::function<void()> tick = [&] {
    ++ticks;
    loop.AddTimer(loop.Now() + milliseconds(5), tick);
  };
  loop.AddTimer(loop.Now(), tick);
  auto results = ConnectAll({target, BedOptions(dir)}, 2, &loop);
  ASSERT_EQ(results.size(), 2u);
  ASSERT_TRUE(results[0].ok()) << results[0].status().message();
  EXPECT_TRUE(results[0].value()->through_proxy());
  EXPECT_EQ(results[0].value()->peer_address(), "");
  EXPECT_EQ(results[0].value()->label(),
            bed.user + "@" + bed.jump_target.address + ":" + std::to_string(bed.jump_target.port));
  EXPECT_TRUE(results[1].ok()) << results[1].status().message();
  // The hop's ssh client took a while to start and connect: the loop ran
  // its timer all along.
  EXPECT_GE(ticks, 3);
}

TEST(ConnectAll, NoHostsIsNoResults) {
  EventLoop loop;
  EXPECT_TRUE(ConnectAll({}, 4, &loop).empty());
}

}  // namespace
}  // namespace barge::ssh
