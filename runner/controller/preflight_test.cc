#include "runner/controller/preflight.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "runner/controller/gpu_gate.h"
#include "runner/controller/holds.h"
#include "runner/controller/job_state.h"
#include "runner/controller/leases.h"
#include "runner/controller/transfers.h"
#include "tests/support/part_world.h"

namespace barge::runner {
namespace {

TEST(Preflight, AFilesystemUnder256MiBFreeIsOneProblemPerMountPoint) {
  const std::string df =
      "Filesystem     1024-blocks    Used Available Capacity Mounted on\n"
      "tmpfs               16384   12288      4096      75% /tmp\n"
      "/dev/sda1        10000000 1000000   9000000      10% /\n"
      "tmpfs               16384   12288      4096      75% /tmp\n";
  std::vector<std::string> problems = LowDiskSpace(df);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0], "disk full: 4 MiB free on /tmp (barge needs 256 MiB there)");
}

TEST(Preflight, ExactlyTheThresholdIsEnough) {
  const std::string df = "fs 1 1 " + std::to_string(kMinFreeKib) + " 1% /var/lib/docker\n";
  EXPECT_TRUE(LowDiskSpace(df).empty());
  const std::string less = "fs 1 1 " + std::to_string(kMinFreeKib - 1) + " 1% /var/lib/docker\n";
  EXPECT_EQ(LowDiskSpace(less).size(), 1u);
}

TEST(Preflight, TheProblemTableNamesEveryHostOnEachOfItsRows) {
  std::string table = ProblemTable({{"h1", {"one", "two"}}, {"host-22", {"three"}}}, 3);
  EXPECT_EQ(table,
            "preflight failed on 2 of 3 host(s); nothing was started:\n"
            "  HOST     PROBLEM\n"
            "  h1       one\n"
            "  h1       two\n"
            "  host-22  three");
}

}  // namespace
}  // namespace barge::runner

// Preflight as a part (preflight.h): given the job's context, its hosts, the
// plan and the facts it is made from, and the parts it calls (Holds, Leases,
// Transfers, GpuGate), each made from the same PartWorld, on scripted fake
// hosts (tests/support/part_world.h). A fake host answers a preflight script
// with every check passing, unless a test scripts one of its sections; its
// "socket" section names no engine socket, so each host gets its own part
// first and the engine's part as a second script.
namespace barge::runner {
namespace preflight_test {

struct PreflightWorld {
  explicit PreflightWorld(const std::string& extra = "", const std::string& hosts = "[h1, h2]")
      : world(PartWorld::Yaml(extra, hosts)),
        holds(&world.ctx(), &world.hosts(), &world.planner()),
        leases(&world.ctx(), &world.hosts(), &world.plan(), &holds),
        transfers(&world.ctx()),
        gate(&world.ctx(), &world.planner(), &holds),
        preflight(&world.ctx(), &world.hosts(), &world.planner(), &holds, &leases, &transfers,
                  &gate) {}
  // Connects every host and runs preflight on all of them.
  Status Run() {
    if (!world.Connect()) return Status::Error("a host refused");
    return preflight.Run(world.hosts().All());
  }
  int Count(const std::string& host, const std::string& part) {
    const std::vector<std::string>& lines = world.host(host).lines();
    return static_cast<int>(std::count_if(lines.begin(), lines.end(), [&](const std::string& l) {
      return l.find(part) != std::string::npos;
    }));
  }
  bool Edge(const std::string& edge) {
    const std::vector<std::string>& edges = world.recorder().edges;
    return std::find(edges.begin(), edges.end(), edge) != edges.end();
  }
  std::string Edges() {
    std::string out;
    for (const std::string& e : world.recorder().edges) out += e + "\n";
    return out;
  }

  PartWorld world;
  internal::Holds holds;
  internal::Leases leases;
  internal::Transfers transfers;
  internal::GpuGate gate;
  internal::Preflight preflight;
};

// The image ID every fake host reports (fake_hosts.cc); messages show its first 19 characters.
constexpr char kFakeId[] = "sha256:0123456789abcdef0123456789abcdef";

TEST(Preflight, EveryHostIsCheckedInItsOwnScriptThenItsEnginesAndEndsArmedWithTheImagesId) {
  PreflightWorld w;
  Status s = w.Run();
  ASSERT_TRUE(s.ok()) << s.message() << "\n" << w.world.recorder().AllMessages();
  for (size_t h = 0; h < 2; ++h) {
    const internal::HostState& hs = w.world.host_state(h);
    const std::string name = hs.name;
    // The host's part (the watchdog, no image) and then the engine's (the
    // hold and the image, no watchdog).
    ASSERT_EQ(w.Count(name, "@@barge{"), 2) << name;
    EXPECT_NE(w.world.host(name).lines()[0].find("bs watchdog;"), std::string::npos) << name;
    EXPECT_EQ(w.world.host(name).lines()[0].find("bs image0;"), std::string::npos) << name;
    EXPECT_EQ(w.Count(name, "bs image0;"), 1) << name;
    EXPECT_EQ(w.Count(name, "bs hold;"), 1) << name;
    EXPECT_TRUE(hs.lease.armed) << name;
    EXPECT_EQ(hs.images.ids.at("img"), kFakeId) << name;
    EXPECT_TRUE(w.Edge("preflight began " + name)) << w.Edges();
    EXPECT_TRUE(w.Edge("preflight ok " + name)) << w.Edges();
  }
  EXPECT_TRUE(w.world.recorder().Said("image img is sha256:0123456789ab on 2 host(s)"))
      << w.world.recorder().AllMessages();
  const std::vector<std::string> steps = {"preflight began preflight (2)", "preflight ended"};
  EXPECT_EQ(w.world.recorder().steps, steps);
}

TEST(Preflight, EveryHostsProblemsAreInOneTableAndEachHostsPhaseEndsWithItsFirst) {
  PreflightWorld w("image_pull: never\n");
  w.world.host("h1").Section("disk",
                             "Filesystem 1024-blocks Used Available Capacity Mounted on\n"
                             "tmpfs 16384 12288 4096 75% /tmp");
  w.world.host("h2").Section("image0", "Error: No such image: img", 1);
  Status s = w.Run();
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(),
            "preflight failed on 2 of 2 host(s); nothing was started:\n"
            "  HOST  PROBLEM\n"
            "  h1    disk full: 4 MiB free on /tmp (barge needs 256 MiB there)\n"
            "  h2    image img is not present (image_pull: never): Error: No such image: img");
  EXPECT_TRUE(w.Edge("preflight failed h1: disk full: 4 MiB free on /tmp (barge needs 256 MiB there)")) << w.Edges();
  EXPECT_TRUE(w.Edge("preflight failed h2: image img is not present (image_pull: never): Error: No such image: img"))
      << w.Edges();
  EXPECT_EQ(w.Count("h2", "docker pull"), 0) << "image_pull: never pulls nothing";
}

TEST(Preflight, AMissingImageIsPulledThereAndItsIdReadAgain) {
  PreflightWorld w;  // image_pull: missing
  w.world.host("h2").Section("image0", "Error: No such image: img", 1);
  Status s = w.Run();
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(w.Count("h1", "docker pull"), 0);
  ASSERT_EQ(w.Count("h2", "docker pull img"), 1);
  // The pull, then the inspect that reads its ID.
  const std::vector<std::string>& lines = w.world.host("h2").lines();
  auto pull = std::find_if(lines.begin(), lines.end(), [](const std::string& l) { return l.find("docker pull img") != std::string::npos; });
  ASSERT_NE(pull + 1, lines.end());
  EXPECT_NE((pull + 1)->find("image inspect"), std::string::npos) << *(pull + 1);
  EXPECT_TRUE(w.world.recorder().Said("h2: pulling img")) << w.world.recorder().AllMessages();
  EXPECT_EQ(w.world.host_state(1).images.ids.at("img"), kFakeId);
}

TEST(Preflight, AnImageNoRegistryGivesIsAProblemThatSaysHowToGetItThere) {
  PreflightWorld w;
  w.world.host("h2").Section("image0", "Error: No such image: img", 1);
  w.world.host("h2").On("docker pull img", FakeReply{1, "", "pull access denied for img\n"});
  Status s = w.Run();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("preflight failed on 1 of 2 host(s)"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("  h2    image img is missing and cannot be pulled: "), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("pull access denied for img"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("set image_pull: push to copy it from this machine"), std::string::npos) << s.message();
  EXPECT_EQ(w.world.host_state(1).images.ids.count("img"), 0u);
}

TEST(Preflight, TheSameImageWithAnotherIdOnOneHostIsAProblemOnTheFirstHostsRow) {
  PreflightWorld w("", "[h1, h2, h3]");
  w.world.host("h3").Section("image0", "sha256:fedcba9876543210fedcba9876543210 /var/lib/docker/overlay2/y/diff");
  Status s = w.Run();
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(),
            "preflight failed on 1 of 3 host(s); nothing was started:\n"
            "  HOST  PROBLEM\n"
            "  h1    image img differs between hosts: sha256:0123456789ab on h1 h2; sha256:fedcba987654 on h3");
  EXPECT_FALSE(w.world.recorder().Said("image img is")) << w.world.recorder().AllMessages();
}

TEST(Preflight, AWatchdogThatCannotBeArmedIsAProblemAndTheEnginesPartIsNotAskedThere) {
  PreflightWorld w;
  w.world.host("h1").Section("watchdog", "mkdir: cannot create directory: Permission denied", 1);
  Status s = w.Run();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("  h1    cannot arm the watchdog: mkdir: cannot create directory: Permission denied"),
            std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("preflight failed on 1 of 2 host(s)"), std::string::npos) << s.message();
  // No hold is taken where no watchdog would release it.
  EXPECT_EQ(w.Count("h1", "@@barge{"), 1);
  EXPECT_EQ(w.Count("h1", "bs hold;"), 0);
  EXPECT_EQ(w.Count("h2", "bs hold;"), 1);
}

TEST(Preflight, TheRendezvousPortIsCheckedOnlyOnTheHeadsHostWhenTheHeadIsOnTheHostsNetwork) {
  // 29500 = 0x733C, listening (0A).
  const std::string tables = "  sl  local_address rem_address   st\n   0: 00000000:733C 00000000:0000 0A 0 0\n";
  PreflightWorld w("container: {network: host}\n");
  w.world.host("h1").Section("ports", tables);
  w.world.host("h2").Section("ports", tables);
  Status s = w.Run();
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(),
            "preflight failed on 1 of 2 host(s); nothing was started:\n"
            "  HOST  PROBLEM\n"
            "  h1    rendezvous port 29500 is already in use on the head's host (rendezvous.port)");
  EXPECT_EQ(w.Count("h1", "bs ports;"), 1);
  EXPECT_EQ(w.Count("h2", "bs ports;"), 0);

  PreflightWorld bridged;  // the head has its own network: its port is its own
  bridged.world.host("h1").Section("ports", tables);
  Status b = bridged.Run();
  EXPECT_TRUE(b.ok()) << b.message();
  EXPECT_EQ(bridged.Count("h1", "bs ports;"), 0);
}

TEST(Preflight, AHostTheGpuProbeFailsOnIsAProblemAndAnotherHostsGpusAreCounted) {
  PreflightWorld w("container: {gpus: all}\nhealth: {gpus: off}\n");
  w.world.host("h1").Section("gpu", "GPU 0: A\nGPU 1: B\nGPU 2: C");
  w.world.host("h2").Section("gpu", "could not select device driver \"\" with capabilities: [[gpu]]", 125);
  Status s = w.Run();
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(),
            "preflight failed on 1 of 2 host(s); nothing was started:\n"
            "  HOST  PROBLEM\n"
            "  h2    GPUs requested but unavailable: could not select device driver \"\" with capabilities: [[gpu]]");
  EXPECT_EQ(w.world.input().detected_gpus.at(0), 3);
  EXPECT_EQ(w.world.input().detected_gpus.count(1), 0u);
}

TEST(Preflight, ConnectErrorsComeFirstInTheTableAndAHostThatCouldNotConnectIsSentNothing) {
  PreflightWorld w("", "[h1, h2, h3]");
  ASSERT_TRUE(w.world.Connect());
  // h1 could not connect (not a target); h2's address could not be told
  // (addresses.cc) and its disk is full.
  w.world.hosts().connect_errors[0] = "h1: connection refused";
  w.world.hosts().connect_errors[1] = "cannot tell this host's address: no answer";
  w.world.host("h2").Section("disk", "tmpfs 16384 12288 4096 75% /tmp");
  Status s = w.preflight.Run({&w.world.host_state(1), &w.world.host_state(2)});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(),
            "preflight failed on 2 of 3 host(s); nothing was started:\n"
            "  HOST  PROBLEM\n"
            "  h1    h1: connection refused\n"
            "  h2    cannot tell this host's address: no answer\n"
            "  h2    disk full: 4 MiB free on /tmp (barge needs 256 MiB there)");
  EXPECT_TRUE(w.world.host("h1").lines().empty());
  EXPECT_EQ(w.Count("h3", "@@barge{"), 2);
  EXPECT_EQ(w.world.recorder().steps.front(), "preflight began preflight (2)");
}

TEST(Preflight, ANonPosixLoginShellIsTheOnlyProblemReportedForItsHost) {
  PreflightWorld w;
  w.world.host("h2").On("echo barge-posix-", FakeReply{1, "", "Illegal variable name.\n"});
  ASSERT_TRUE(w.world.Connect());
  // Its address probe failed because of the same shell (addresses.cc).
  w.world.hosts().connect_errors[1] = "cannot tell this host's address: no answer";
  Status s = w.preflight.Run(w.world.hosts().All());
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("preflight failed on 1 of 2 host(s)"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("\n  h2    the login shell is not a POSIX shell (it answered 'Illegal variable name.' to `"),
            std::string::npos)
      << s.message();
  // One row: the address probe's and the other checks' failures are its doing.
  EXPECT_EQ(s.message().find("cannot tell this host's address"), std::string::npos) << s.message();
  EXPECT_EQ(std::count(s.message().begin(), s.message().end(), '\n'), 2) << s.message();
  EXPECT_EQ(w.Count("h2", "@@barge{"), 1);
}

TEST(Preflight, ImagePullPushSavesTheImageHereOnceAndLoadsItOnlyWhereItIsMissing) {
  PreflightWorld w("image_pull: push\n", "[h1, h2, h3]");
  w.world.host("h2").Section("image0", "Error: No such image: img", 1);
  w.world.host("h3").Section("image0", "Error: No such image: img", 1);
  // What the local `docker save -o FILE` (a fake command) would write.
  const std::filesystem::path tar = w.world.state_dir() / "tmp" / "push-abcd1234.tar";
  std::filesystem::create_directories(tar.parent_path());
  std::ofstream(tar) << "an image's tar";
  Status s = w.Run();
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_FALSE(std::filesystem::exists(tar)) << "the saved image is left behind";
  const std::vector<std::string>& local = w.world.fake().local().lines();
  ASSERT_EQ(local.size(), 1u);
  EXPECT_NE(local[0].find("docker save -o "), std::string::npos) << local[0];
  EXPECT_NE(local[0].find("/tmp/push-abcd1234.tar img"), std::string::npos) << local[0];
  EXPECT_EQ(w.Count("h1", "docker load"), 0);
  EXPECT_EQ(w.Count("h2", "docker load"), 1);
  EXPECT_EQ(w.Count("h3", "docker load"), 1);
  EXPECT_EQ(w.Count("h2", "docker pull"), 0);
  for (size_t h = 0; h < 3; ++h) {
    const std::map<std::string, std::string>& ids = w.world.host_state(h).images.ids;
    EXPECT_EQ(ids.count("img") ? ids.at("img") : "none", kFakeId) << h;
  }
  EXPECT_TRUE(w.world.recorder().Said("pushing img to 2 host(s) (docker save | docker load)"))
      << w.world.recorder().AllMessages();
  // Fake hosts are reached over no TCP connection: no relay, one copy each.
  EXPECT_NE(w.world.recorder().AllMessages().find(
                "; this machine sent 28 bytes of it (2.00 x the image's 14): 0 host(s) by relay, 2 directly"),
            std::string::npos)
      << w.world.recorder().AllMessages();
  EXPECT_TRUE(w.Edge("push ok h2")) << w.Edges();
}

TEST(Preflight, NothingIsPushedToAJobThatCannotStart) {
  PreflightWorld w("image_pull: push\n");
  w.world.host("h1").Section("watchdog", "no room", 1);
  w.world.host("h2").Section("image0", "Error: No such image: img", 1);
  Status s = w.Run();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("  h1    cannot arm the watchdog: no room"), std::string::npos) << s.message();
  EXPECT_TRUE(w.world.fake().local().lines().empty());
  EXPECT_EQ(w.Count("h2", "docker load"), 0);
}

TEST(Preflight, AnEngineSocketWhosePingGetsNoAnswerLeavesTheEngineToTheCliAndSaysWhy) {
  PreflightWorld w;
  w.world.host("h1").Section("socket", "/var/run/docker.sock");
  Status s = w.Run();
  ASSERT_TRUE(s.ok()) << s.message();
  // The engine's part as a second script all the same, on both hosts.
  EXPECT_EQ(w.Count("h1", "bs image0;"), 1);
  EXPECT_EQ(w.Count("h2", "bs image0;"), 1);
  EXPECT_EQ(w.world.host_state(0).engine.api, nullptr);
  EXPECT_TRUE(w.world.recorder().Said("the Docker Engine API cannot be reached over SSH on 1 host(s) (h1: "))
      << w.world.recorder().AllMessages();
  EXPECT_TRUE(w.world.recorder().Said("cannot open a stream to /var/run/docker.sock: this transport has no streams); "
                                      "the docker CLI is used there"))
      << w.world.recorder().AllMessages();
  // The host's name once, though the session's error begins with it.
  EXPECT_FALSE(w.world.recorder().Said("(h1: h1: ")) << w.world.recorder().AllMessages();
}

}  // namespace preflight_test
}  // namespace barge::runner
