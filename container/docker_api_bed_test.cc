// DockerApi against this machine's real dockerd (/var/run/docker.sock, the
// bed's "lo" engine) through LocalExecutor's streams and the event loop:
// ping, inspect, logs (timestamps, both streams, follow, since), wait,
// stop, remove, image inspect and a label-filtered list. The containers are
// made with the docker CLI from the bed's image barge/test:local, carry a
// label unique to this run, and are removed by the test (only those).
#include "container/docker_api.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "container/timestamp.h"
#include "ssh/event_loop.h"
#include "ssh/local_executor.h"
#include "ssh/quote.h"
#include "ssh/test_util.h"

namespace barge::container {
namespace {

using ssh::testing::Collected;
using ssh::testing::PollUntil;
using ssh::testing::RunToEnd;

constexpr char kSocket[] = "/var/run/docker.sock";
constexpr char kImage[] = "barge/test:local";

// Runs `call` and polls until its reply arrives (a correctness bound).
template <typename T, typename Start>
Reply<T> Await(ssh::EventLoop& loop, Start start,
               std::chrono::milliseconds limit = std::chrono::seconds(30)) {
  std::optional<Reply<T>> got;
  Result<DockerApi::CallPtr> call = start([&](Reply<T> r) { got = std::move(r); });
  if (!call.ok()) return Reply<T>{call.status(), 0};
  if (!PollUntil(loop, [&] { return got.has_value(); }, limit)) {
    return Reply<T>{Status::Error("no reply within the test's limit"), 0};
  }
  return std::move(*got);
}

class DockerApiOnTheLocalEngine : public ::testing::Test {
 protected:
  void SetUp() override {
    std::random_device rd;
    run_id_ = std::to_string(getpid()) + "-" + std::to_string(rd() % 1000000);
    // Fails loudly when there is no engine: nothing here is skipped.
    Reply<std::string> ping =
        Await<std::string>(loop_, [&](auto done) { return api_.Ping(std::move(done)); });
    ASSERT_TRUE(ping.ok()) << "the machine's dockerd does not answer on " << kSocket
                           << " (scripts/ensure-docker.sh starts it): "
                           << ping.value.status().message();
    ASSERT_EQ(*ping.value, "OK");
  }

  void TearDown() override {
    // Only what this test made: the containers with its run's label.
    RunToEnd(loop_, local_,
             "ids=$(docker ps -aq --filter label=barge.apitest=" + run_id_ +
                 "); [ -z \"$ids\" ] || docker rm -f $ids >/dev/null");
    Collected left = RunToEnd(loop_, local_,
                              "docker ps -aq --filter label=barge.apitest=" + run_id_);
    EXPECT_EQ(left.out, "") << "containers of this test were left behind";
  }

  // `docker run -d` of kImage running `script`; returns its name.
  std::string RunContainer(const std::string& suffix, const std::string& script) {
    const std::string name = "barge-apitest-" + run_id_ + "-" + suffix;
    Collected r = RunToEnd(loop_, local_,
                           "docker run -d --name " + name + " --label barge.apitest=" + run_id_ +
                               " " + kImage + " sh -c " + ssh::ShellQuote(script));
    EXPECT_EQ(r.exit.code, 0) << r.err;
    return name;
  }

  ssh::EventLoop loop_;
  ssh::LocalExecutor local_{&loop_};
  DockerApi api_{&local_, kSocket};
  std::string run_id_;
};

// Splits "STAMP text\n" lines; every line must start with a parseable stamp.
struct Stamped {
  int64_t ns;
  std::string text;
  char stream;
};
void SplitLines(const std::string& data, char stream, std::vector<Stamped>* out) {
  size_t start = 0;
  while (start < data.size()) {
    size_t nl = data.find('\n', start);
    ASSERT_NE(nl, std::string::npos) << "a line without its newline: " << data.substr(start);
    const std::string line = data.substr(start, nl - start);
    const size_t sp = line.find(' ');
    ASSERT_NE(sp, std::string::npos) << line;
    Result<int64_t> ns = ParseTimestamp(line.substr(0, sp));
    ASSERT_TRUE(ns.ok()) << line << ": " << ns.status().message();
    out->push_back({*ns, line.substr(sp + 1), stream});
    start = nl + 1;
  }
}

TEST_F(DockerApiOnTheLocalEngine, InspectsLogsWaitsStopsAndRemovesAContainer) {
  const std::string name = RunContainer(
      "done", "i=0; while [ $i -lt 5 ]; do echo out $i; sleep 0.02; echo err $i >&2; "
              "sleep 0.02; i=$((i+1)); done; exit 3");

  Reply<int> waited = Await<int>(loop_, [&](auto d) { return api_.Wait(name, std::move(d)); });
  ASSERT_TRUE(waited.ok()) << waited.value.status().message();
  EXPECT_EQ(*waited.value, 3);

  Reply<ContainerState> state =
      Await<ContainerState>(loop_, [&](auto d) { return api_.InspectContainer(name, std::move(d)); });
  ASSERT_TRUE(state.ok()) << state.value.status().message();
  EXPECT_EQ(state.value->name, name);
  EXPECT_EQ(state.value->status, "exited");
  EXPECT_FALSE(state.value->running);
  EXPECT_EQ(state.value->exit_code, 3);
  EXPECT_EQ(state.value->labels.at("barge.apitest"), run_id_);
  EXPECT_EQ(state.value->id.size(), 64u);

  std::string out, err;
  Reply<NoContent> logs = Await<NoContent>(loop_, [&](auto d) {
    return api_.Logs(
        name, LogOptions{},
        [&](LogStream s, std::string_view b) { (s == LogStream::kStdout ? out : err).append(b); },
        std::move(d));
  });
  ASSERT_TRUE(logs.ok()) << logs.value.status().message();
  std::vector<Stamped> lines;
  SplitLines(out, 'o', &lines);
  SplitLines(err, 'e', &lines);
  ASSERT_EQ(lines.size(), 10u) << out << err;
  std::stable_sort(lines.begin(), lines.end(),
                   [](const Stamped& a, const Stamped& b) { return a.ns < b.ns; });
  // In the order written, each on its own stream.
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(lines[2 * i].text, "out " + std::to_string(i));
    EXPECT_EQ(lines[2 * i].stream, 'o');
    EXPECT_EQ(lines[2 * i + 1].text, "err " + std::to_string(i));
    EXPECT_EQ(lines[2 * i + 1].stream, 'e');
  }

  // since: only what was stamped after the third line.
  std::string later;
  LogOptions since;
  since.since_ns = lines[2].ns;
  Reply<NoContent> tail = Await<NoContent>(loop_, [&](auto d) {
    return api_.Logs(
        name, since, [&](LogStream, std::string_view b) { later.append(b); }, std::move(d));
  });
  ASSERT_TRUE(tail.ok()) << tail.value.status().message();
  EXPECT_EQ(later.find("out 0"), std::string::npos) << later;
  EXPECT_EQ(later.find("err 0"), std::string::npos) << later;
  EXPECT_NE(later.find("err 4"), std::string::npos) << later;

  // Stopping a stopped container is fine (304); removing it, then it is gone.
  Reply<NoContent> stopped =
      Await<NoContent>(loop_, [&](auto d) { return api_.Stop(name, 1, std::move(d)); });
  EXPECT_TRUE(stopped.ok()) << stopped.value.status().message();
  EXPECT_EQ(stopped.http_status, 304);
  Reply<NoContent> removed =
      Await<NoContent>(loop_, [&](auto d) { return api_.Remove(name, true, std::move(d)); });
  ASSERT_TRUE(removed.ok()) << removed.value.status().message();
  Reply<ContainerState> gone =
      Await<ContainerState>(loop_, [&](auto d) { return api_.InspectContainer(name, std::move(d)); });
  EXPECT_FALSE(gone.ok());
  EXPECT_TRUE(gone.not_found());
  EXPECT_NE(gone.value.status().message().find("No such container: " + name), std::string::npos)
      << gone.value.status().message();
  EXPECT_EQ(gone.value.status().message().rfind("local: GET /containers/" + name + "/json: ", 0), 0u)
      << gone.value.status().message();
  Reply<NoContent> again =
      Await<NoContent>(loop_, [&](auto d) { return api_.Remove(name, true, std::move(d)); });
  EXPECT_TRUE(again.not_found()) << again.value.status().message();
}

TEST_F(DockerApiOnTheLocalEngine, FollowsTheLogOfARunningContainerUntilItStops) {
  const std::string name = RunContainer(
      "follow", "sleep 0.3; i=0; while [ $i -lt 20 ]; do echo o$i; echo e$i >&2; "
                "sleep 0.01; i=$((i+1)); done; exit 0");
  std::string out, err;
  int pieces = 0;
  LogOptions follow;
  follow.follow = true;
  Reply<NoContent> logs = Await<NoContent>(loop_, [&](auto d) {
    return api_.Logs(
        name, follow,
        [&](LogStream s, std::string_view b) {
          ++pieces;
          (s == LogStream::kStdout ? out : err).append(b);
        },
        std::move(d));
  });
  ASSERT_TRUE(logs.ok()) << logs.value.status().message();
  std::vector<Stamped> o, e;
  SplitLines(out, 'o', &o);
  SplitLines(err, 'e', &e);
  ASSERT_EQ(o.size(), 20u) << out;
  ASSERT_EQ(e.size(), 20u) << err;
  for (int i = 0; i < 20; ++i) {
    EXPECT_EQ(o[i].text, "o" + std::to_string(i));
    EXPECT_EQ(e[i].text, "e" + std::to_string(i));
  }
  Reply<int> waited = Await<int>(loop_, [&](auto d) { return api_.Wait(name, std::move(d)); });
  EXPECT_EQ(waited.ok() ? *waited.value : -1, 0);
}

TEST_F(DockerApiOnTheLocalEngine, WaitReturnsWhenARunningContainerIsStopped) {
  const std::string name = RunContainer("stop", "trap 'exit 0' TERM; sleep 30 & wait");
  std::optional<Reply<int>> waited;
  auto wait_call = api_.Wait(name, [&](Reply<int> r) { waited = std::move(r); });
  ASSERT_TRUE(wait_call.ok());
  // The wait is pending while the container runs.
  for (int i = 0; i < 3; ++i) loop_.Poll(std::chrono::milliseconds(50));
  EXPECT_FALSE(waited.has_value());
  auto t0 = std::chrono::steady_clock::now();
  Reply<NoContent> stopped =
      Await<NoContent>(loop_, [&](auto d) { return api_.Stop(name, 5, std::move(d)); });
  ASSERT_TRUE(stopped.ok()) << stopped.value.status().message();
  EXPECT_EQ(stopped.http_status, 204);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(4))
      << "TERM was handled: no need to wait for the kill";
  ASSERT_TRUE(PollUntil(loop_, [&] { return waited.has_value(); }, std::chrono::seconds(10)));
  ASSERT_TRUE(waited->ok()) << waited->value.status().message();
  EXPECT_EQ(*waited->value, 0);
}

TEST_F(DockerApiOnTheLocalEngine, ListsOnlyTheContainersWithTheLabelAndInspectsTheImage) {
  const std::string a = RunContainer("a", "exit 0");
  const std::string b = RunContainer("b", "exit 1");
  Reply<std::vector<PsEntry>> list = Await<std::vector<PsEntry>>(loop_, [&](auto d) {
    return api_.ListContainers({"barge.apitest=" + run_id_}, std::move(d));
  });
  ASSERT_TRUE(list.ok()) << list.value.status().message();
  std::vector<std::string> names;
  for (const PsEntry& e : *list.value) {
    names.push_back(e.names);
    EXPECT_EQ(e.labels.at("barge.apitest"), run_id_);
    EXPECT_EQ(e.id.size(), 64u);
  }
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{a, b}));

  Reply<ImageInfo> image =
      Await<ImageInfo>(loop_, [&](auto d) { return api_.InspectImage(kImage, std::move(d)); });
  ASSERT_TRUE(image.ok()) << image.value.status().message();
  Collected cli = RunToEnd(loop_, local_,
                           std::string("docker image inspect --format '{{.Id}} "
                                       "{{index .GraphDriver.Data \"UpperDir\"}}' ") + kImage);
  ASSERT_EQ(cli.exit.code, 0) << cli.err;
  EXPECT_EQ(image.value->id + " " + image.value->upper_dir + "\n", cli.out);
  Reply<ImageInfo> missing = Await<ImageInfo>(
      loop_, [&](auto d) { return api_.InspectImage("barge/no-such-image:x", std::move(d)); });
  EXPECT_TRUE(missing.not_found()) << missing.value.status().message();
}

}  // namespace
}  // namespace barge::container
