// DockerApi against this machine's real dockerd (/var/run/docker.sock, the
// bed's "lo" engine) through LocalExecutor's streams and the event loop:
// ping, inspect, logs (timestamps, both streams, follow, since), attach
// and start of a created container (also one whose log rotates), wait,
// stop, remove, image inspect and a label-filtered list. The containers are
// made with the docker CLI from the bed's image barge/test:local, carry a
// label unique to this run, and are removed by the test (only those).
#include "container/docker_api.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "container/create_body.h"
#include "container/docker_args.h"
#include "container/timestamp.h"
#include "ssh/event_loop.h"
#include "ssh/local_executor.h"
#include "runner/remote/engine_streams.h"
#include "ssh/quote.h"
#include "tests/support/ssh_test_util.h"

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

  // `docker create` of kImage running `script` (with `options` before the
  // image); returns its name.
  std::string CreateContainer(const std::string& suffix, const std::string& script,
                              const std::string& options = "") {
    const std::string name = "barge-apitest-" + run_id_ + "-" + suffix;
    Collected r = RunToEnd(loop_, local_,
                           "docker create --name " + name + " --label barge.apitest=" + run_id_ +
                               " " + options + " " + kImage + " sh -c " + ssh::ShellQuote(script));
    EXPECT_EQ(r.exit.code, 0) << r.err;
    return name;
  }

  // What Attach then Start (once attached) of a created container gave.
  struct AttachRun {
    std::string out, err;
    std::string order;  // 'o' / 'e' per piece delivered, in arrival order
    std::vector<std::pair<char, std::string>> pieces;
    bool started_before_attached = false;
    std::optional<Reply<NoContent>> start;
    std::optional<Reply<NoContent>> attach;
  };
  AttachRun AttachAndStart(const std::string& name, std::chrono::seconds limit) {
    AttachRun run;
    DockerApi::CallPtr start_call;
    bool attached = false;
    Result<DockerApi::CallPtr> attach = api_.Attach(
        name, /*tty=*/false,
        [&] {
          attached = true;
          Result<DockerApi::CallPtr> s =
              api_.Start(name, [&](Reply<NoContent> r) { run.start = std::move(r); });
          EXPECT_TRUE(s.ok()) << s.status().message();
          if (s.ok()) start_call = std::move(*s);
        },
        [&](LogStream s, std::string_view b) {
          if (!attached) run.started_before_attached = true;
          const char c = s == LogStream::kStdout ? 'o' : 'e';
          (c == 'o' ? run.out : run.err).append(b);
          run.pieces.emplace_back(c, std::string(b));
        },
        [&](Reply<NoContent> r) { run.attach = std::move(r); });
    EXPECT_TRUE(attach.ok()) << attach.status().message();
    if (!attach.ok()) return run;
    EXPECT_TRUE(PollUntil(loop_, [&] { return run.attach.has_value() && run.start.has_value(); },
                          limit))
        << "the attach did not end within the test's limit";
    return run;
  }

  ssh::EventLoop loop_;
  ssh::LocalExecutor local_{&loop_};
  runner::EngineStreams streams_{&local_};
  DockerApi api_{&streams_, kSocket};
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

// Lines of `data` (each ending in "\n"), in order.
std::vector<std::string> Lines(const std::string& data) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < data.size()) {
    const size_t nl = data.find('\n', start);
    if (nl == std::string::npos) {
      lines.push_back(data.substr(start) + "<no newline>");
      break;
    }
    lines.push_back(data.substr(start, nl - start));
    start = nl + 1;
  }
  return lines;
}

TEST_F(DockerApiOnTheLocalEngine, AnAttachThenStartGivesEveryLineOfBothStreamsOnceInOrder) {
  constexpr int kLines = 20000;
  const std::string name = CreateContainer(
      "attach", "i=0; while [ $i -lt " + std::to_string(kLines) +
                    " ]; do echo o$i; echo e$i >&2; i=$((i+1)); done; exit 4");
  AttachRun run = AttachAndStart(name, std::chrono::seconds(60));
  ASSERT_TRUE(run.attach.has_value() && run.start.has_value());
  ASSERT_TRUE(run.start->ok()) << run.start->value.status().message();
  EXPECT_EQ(run.start->http_status, 204);
  ASSERT_TRUE(run.attach->ok()) << run.attach->value.status().message();
  EXPECT_EQ(run.attach->http_status, 101);
  EXPECT_FALSE(run.started_before_attached);
  const std::vector<std::string> out = Lines(run.out), err = Lines(run.err);
  ASSERT_EQ(out.size(), size_t{kLines});
  ASSERT_EQ(err.size(), size_t{kLines});
  for (int i = 0; i < kLines; ++i) {
    ASSERT_EQ(out[i], "o" + std::to_string(i));
    ASSERT_EQ(err[i], "e" + std::to_string(i));
  }
  // The attach ends once the container's stdio closed: it has stopped.
  Reply<ContainerState> state =
      Await<ContainerState>(loop_, [&](auto d) { return api_.InspectContainer(name, std::move(d)); });
  ASSERT_TRUE(state.ok()) << state.value.status().message();
  Reply<int> waited = Await<int>(loop_, [&](auto d) { return api_.Wait(name, std::move(d)); });
  EXPECT_EQ(waited.ok() ? *waited.value : -1, 4);
}

TEST_F(DockerApiOnTheLocalEngine, StartingARunningContainerAgainIsA304Success) {
  const std::string name = CreateContainer("started", "trap 'exit 0' TERM; sleep 30 & wait");
  Reply<NoContent> first = Await<NoContent>(loop_, [&](auto d) { return api_.Start(name, std::move(d)); });
  ASSERT_TRUE(first.ok()) << first.value.status().message();
  EXPECT_EQ(first.http_status, 204);
  Reply<NoContent> again = Await<NoContent>(loop_, [&](auto d) { return api_.Start(name, std::move(d)); });
  EXPECT_TRUE(again.ok()) << again.value.status().message();
  EXPECT_EQ(again.http_status, 304);
  Reply<NoContent> missing = Await<NoContent>(
      loop_, [&](auto d) { return api_.Start(name + "-missing", std::move(d)); });
  EXPECT_TRUE(missing.not_found()) << missing.value.status().message();
  Reply<NoContent> stopped = Await<NoContent>(loop_, [&](auto d) { return api_.Stop(name, 5, std::move(d)); });
  EXPECT_TRUE(stopped.ok()) << stopped.value.status().message();
}

TEST_F(DockerApiOnTheLocalEngine, AnAttachKeepsTheOrderOfStdoutAndStderrWrittenTwentyMsApart) {
  const std::string name = CreateContainer(
      "alternate", "i=0; while [ $i -lt 10 ]; do echo o$i; sleep 0.02; echo e$i >&2; "
                   "sleep 0.02; i=$((i+1)); done");
  AttachRun run = AttachAndStart(name, std::chrono::seconds(30));
  ASSERT_TRUE(run.attach.has_value() && run.attach->ok());
  std::string got;
  for (const auto& [c, b] : run.pieces) got += std::string(1, c) + ":" + b;
  std::string want;
  for (int i = 0; i < 10; ++i) want += "o:o" + std::to_string(i) + "\ne:e" + std::to_string(i) + "\n";
  EXPECT_EQ(got, want);
}

TEST_F(DockerApiOnTheLocalEngine, AnAttachLosesNoLineOfALogThatRotatesWhileDockerLogsLosesMost) {
  constexpr int kLines = 200000;
  const std::string name = CreateContainer("rotate", "seq 1 " + std::to_string(kLines),
                                           "--log-opt max-size=100k --log-opt max-file=2");
  AttachRun run = AttachAndStart(name, std::chrono::seconds(120));
  ASSERT_TRUE(run.attach.has_value() && run.start.has_value());
  ASSERT_TRUE(run.start->ok()) << run.start->value.status().message();
  ASSERT_TRUE(run.attach->ok()) << run.attach->value.status().message();
  EXPECT_EQ(run.err, "");
  std::string want;
  for (int i = 1; i <= kLines; ++i) want += std::to_string(i) + "\n";
  EXPECT_EQ(run.out.size(), want.size());
  EXPECT_TRUE(run.out == want) << "the attach's stdout differs from seq's output";

  // The log driver kept two files of at most 100 kB: most lines are gone.
  std::string logged;
  Reply<NoContent> logs = Await<NoContent>(loop_, [&](auto d) {
    LogOptions plain;
    plain.timestamps = false;
    return api_.Logs(
        name, plain, [&](LogStream, std::string_view b) { logged.append(b); }, std::move(d));
  });
  ASSERT_TRUE(logs.ok()) << logs.value.status().message();
  const size_t kept = Lines(logged).size();
  EXPECT_GT(kept, 0u);
  EXPECT_LT(kept, size_t{kLines} / 10) << "docker logs kept " << kept << " of " << kLines << " lines";
  // What it kept is the end of the output.
  EXPECT_EQ(logged.substr(logged.size() - 7), "200000\n");
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

// `docker create` of `spec` through the CLI and through POST
// /containers/create with CreateBody's body (as a suffixed name): docker
// inspect shows the same Config (but the Hostname the engine derives from
// the ID), HostConfig and network endpoints for both.
void ExpectTheApiMakesWhatTheCliMakes(ssh::EventLoop& loop, ssh::LocalExecutor& local, DockerApi& api,
                                      ContainerSpec spec) {
  using nlohmann::json;
  Argv args = RunArgs(spec);
  args.erase(args.begin(), args.begin() + 2);  // "run", "-d"
  args.insert(args.begin(), {"docker", "create"});
  Collected cli = RunToEnd(loop, local, ssh::ShellJoin(args));
  ASSERT_EQ(cli.exit.code, 0) << ssh::ShellJoin(args) << ": " << cli.err;
  Result<std::string> body = CreateBody(spec);
  ASSERT_TRUE(body.ok()) << body.status().message();
  const std::string api_name = spec.name + "-api";
  Reply<std::string> made =
      Await<std::string>(loop, [&](auto d) { return api.Create(api_name, *body, std::move(d)); });
  ASSERT_TRUE(made.ok()) << made.value.status().message();
  EXPECT_EQ(made.value->size(), 64u) << *made.value;
  Collected inspected = RunToEnd(loop, local, "docker inspect " + spec.name + " " + api_name);
  ASSERT_EQ(inspected.exit.code, 0) << inspected.err;
  json both = json::parse(inspected.out);
  ASSERT_EQ(both.size(), 2u);
  json c = both[0], a = both[1];
  EXPECT_EQ(a["Id"], *made.value);
  c["Config"].erase("Hostname");
  a["Config"].erase("Hostname");
  // Compared for meaning (create_body.h): Env and Binds as sets (below),
  // capability names as the
  // engine reads them (the 20.10 CLI sends them as written, the current
  // one upper case with CAP_).
  // And an empty list or map is null: CLIs differ there too (20.10 sends
  // null where the current one sends []), and the engine reads both alike.
  for (json* j : {&c, &a}) {
    for (const char* part : {"Config", "HostConfig"}) {
      json kept = json::object();
      for (auto& [key, value] : (*j)[part].items()) {
        if (!value.is_null() && !((value.is_array() || value.is_object()) && value.empty())) kept[key] = value;
      }
      (*j)[part] = kept;
    }
    // Env and Binds as sets: the 20.10 CLI sends both from a map, in an
    // order that varies from run to run (the current CLI keeps the order).
    for (json* list : {&(*j)["Config"]["Env"], &(*j)["HostConfig"]["Binds"]}) {
      if (list->is_array()) std::sort(list->begin(), list->end());
    }
    json& caps = (*j)["HostConfig"]["CapAdd"];
    if (caps.is_array()) {
      std::vector<std::string> names;
      for (const json& cap : caps) {
        std::string n = cap.get<std::string>();
        std::transform(n.begin(), n.end(), n.begin(), [](unsigned char ch) { return std::toupper(ch); });
        if (n != "ALL" && n.rfind("CAP_", 0) != 0) n = "CAP_" + n;
        names.push_back(n);
      }
      std::sort(names.begin(), names.end());
      names.erase(std::unique(names.begin(), names.end()), names.end());
      caps = names;
    }
  }
  for (const char* part : {"Config", "HostConfig"}) {
    for (auto& [key, value] : c[part].items()) {
      EXPECT_EQ(a[part][key], value) << part << "." << key << " differs (CLI: " << value.dump()
                                     << ", API: " << a[part][key].dump() << ")";
    }
    for (auto& [key, value] : a[part].items()) {
      EXPECT_TRUE(c[part].contains(key)) << part << "." << key << " only through the API";
    }
  }
  json cn = c["NetworkSettings"]["Networks"], an = a["NetworkSettings"]["Networks"];
  ASSERT_EQ(cn.size(), an.size()) << cn.dump() << " / " << an.dump();
  for (auto& [net, endpoint] : cn.items()) {
    ASSERT_TRUE(an.contains(net)) << net << " only through the CLI";
    EXPECT_EQ(an[net]["Aliases"], endpoint["Aliases"]) << net;
  }
}

TEST_F(DockerApiOnTheLocalEngine, CreateThroughTheApiMakesTheContainerDockerCreateMakesForEveryOption) {
  const std::string base = "barge-apitest-" + run_id_;
  ContainerSpec full;
  full.name = base + "-full";
  full.image = kImage;
  full.labels = {{"barge.apitest", run_id_}, {"barge.rank", "0"}};
  full.env = {{"MASTER_ADDR", "10.0.0.1"}, {"LIST", "a,b c=d"}, {"EMPTY", ""}, {"MASTER_ADDR", "10.0.0.2"}};
  full.command = std::vector<std::string>{"sh", "-c", "echo 'hi there'; exit 3"};
  ContainerOptions& o = full.options;
  o.shm_size = "1.5g";
  o.memory = "512m";
  o.cpus = "0.5";
  o.cap_add = std::vector<std::string>{"SYS_ADMIN", "net_admin", "CAP_SYS_PTRACE"};
  o.ipc = "host";
  o.network = "host";
  // (memlock -1 is made alike too, but the bed's engine may not raise it
  // at start: create_body_test.cc covers it.)
  o.ulimits = KeyValues{{"nofile", "1024:2048"}, {"stack", "67108864"}};
  o.devices = std::vector<std::string>{"/dev/zero", "/dev/null:/dev/mynull", "/dev/full:rw",
                                       "/dev/urandom:/dev/r:r"};
  o.volumes = std::vector<std::string>{"/tmp:/data:ro", "/var/tmp:/scratch"};
  {
    SCOPED_TRACE("every option but GPUs");
    ExpectTheApiMakesWhatTheCliMakes(loop_, local_, api_, full);
  }

  ContainerSpec minimal;
  minimal.name = base + "-min";
  minimal.image = kImage;
  minimal.labels = {{"barge.apitest", run_id_}};
  {
    SCOPED_TRACE("nothing but the image (its own CMD, the default network)");
    ExpectTheApiMakesWhatTheCliMakes(loop_, local_, api_, minimal);
  }

  // Made, never started: no GPU is needed.
  int k = 0;
  for (const char* gpus : {"all", "2", "\"device=0,1\""}) {
    ContainerSpec g = minimal;
    g.name = base + "-gpus-" + std::to_string(k++);
    g.options.gpus = gpus;
    g.options.cap_add = std::vector<std::string>{"all", "SYS_ADMIN"};
    g.command = std::vector<std::string>{"true"};
    SCOPED_TRACE(std::string("gpus ") + gpus + ", cap_add ALL");
    ExpectTheApiMakesWhatTheCliMakes(loop_, local_, api_, g);
  }

  // A network of the user's: the endpoint is named as the CLI names it.
  const std::string net = base + "-net";
  ASSERT_EQ(RunToEnd(loop_, local_, "docker network create " + net + " >/dev/null").exit.code, 0);
  ContainerSpec on_net = minimal;
  on_net.name = base + "-net";
  on_net.options.network = net;
  on_net.command = std::vector<std::string>{"true"};
  {
    SCOPED_TRACE("a user-defined network");
    ExpectTheApiMakesWhatTheCliMakes(loop_, local_, api_, on_net);
  }
  RunToEnd(loop_, local_, "docker rm -f " + on_net.name + " " + on_net.name + "-api >/dev/null 2>&1");
  EXPECT_EQ(RunToEnd(loop_, local_, "docker network rm " + net + " >/dev/null").exit.code, 0);

  // The API's container runs as the CLI's would: same output, same exit.
  const std::string api_full = full.name + "-api";
  AttachRun run = AttachAndStart(api_full, std::chrono::seconds(30));
  ASSERT_TRUE(run.start.has_value() && run.start->ok());
  EXPECT_EQ(run.out, "hi there\n");
  Reply<int> waited = Await<int>(loop_, [&](auto d) { return api_.Wait(api_full, std::move(d)); });
  ASSERT_TRUE(waited.ok()) << waited.value.status().message();
  EXPECT_EQ(*waited.value, 3);
}

TEST_F(DockerApiOnTheLocalEngine, CreateOfANameInUseIs409AndOfAMissingImage404) {
  ContainerSpec spec;
  spec.name = "barge-apitest-" + run_id_ + "-dup";
  spec.image = kImage;
  spec.labels = {{"barge.apitest", run_id_}};
  spec.command = std::vector<std::string>{"true"};
  const std::string body = *CreateBody(spec);
  Reply<std::string> first = Await<std::string>(loop_, [&](auto d) { return api_.Create(spec.name, body, std::move(d)); });
  ASSERT_TRUE(first.ok()) << first.value.status().message();
  Reply<std::string> again = Await<std::string>(loop_, [&](auto d) { return api_.Create(spec.name, body, std::move(d)); });
  EXPECT_FALSE(again.ok());
  EXPECT_EQ(again.http_status, 409) << again.value.status().message();
  spec.image = "barge/no-such-image:x";
  spec.name += "-noimg";
  Reply<std::string> missing =
      Await<std::string>(loop_, [&](auto d) { return api_.Create(spec.name, *CreateBody(spec), std::move(d)); });
  EXPECT_FALSE(missing.ok());
  EXPECT_EQ(missing.http_status, 404) << missing.value.status().message();
}

}  // namespace
}  // namespace barge::container
