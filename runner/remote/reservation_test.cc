#include "runner/remote/reservation.h"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>

#include "cluster/gpu_slices.h"

namespace barge::runner {
namespace {

Hold MakeHold(std::string name, std::string job, long long since, long long lease) {
  Hold h;
  h.id = "id-" + name + "-" + job;
  h.name = std::move(name);
  h.job_id = std::move(job);
  h.job_name = "train";
  h.user = "alice";
  h.machine = "box";
  h.since = since;
  h.expires = since + lease;
  h.lease = lease;
  h.format = kHoldFormat;
  return h;
}

TEST(HoldRequest, AJobWithoutGpuCountsHoldsTheWholeHost) {
  EXPECT_TRUE(RequestFor({{std::nullopt, false}}, 8, {}).exclusive);
  EXPECT_TRUE(RequestFor({{"all", false}}, 8, {}).exclusive);
  // One node with a count and one without: still the whole host.
  EXPECT_TRUE(RequestFor({{"2", false}, {std::nullopt, false}}, 8, {}).exclusive);
  // A count but no known GPU total: the whole host.
  EXPECT_TRUE(RequestFor({{"2", false}}, std::nullopt, {}).exclusive);
}

TEST(HoldRequest, EveryNodeAskingForACountSharesTheHostForTheSumOfTheCounts) {
  HoldRequest r = RequestFor({{"2", true}, {"3", false}}, 8, {29500, 29500});
  EXPECT_FALSE(r.exclusive);
  EXPECT_EQ(r.gpu_count, 5);
  EXPECT_EQ(r.gpu_total, 8);
  EXPECT_EQ(r.ports, std::vector<int>{29500});
}

TEST(HoldRequest, ADeviceListHoldsExactlyThoseDevices) {
  HoldRequest r = RequestFor({{"\"device=0,3\""}, {"device=5"}}, 8, {});
  EXPECT_FALSE(r.exclusive);
  EXPECT_EQ(r.gpu_count, 0);
  EXPECT_EQ(r.gpu_devices, (std::vector<int>{0, 3, 5}));
  EXPECT_TRUE(RequestFor({{"\"device=GPU-abc\""}}, 8, {}).exclusive);
}

TEST(HoldRequest, ASharedSlurmNodeHoldsOnlyItsListedDevicesAndPortsNeverTheHost) {
  HoldRequest r = SharedRequestFor({{"\"device=1,3\"", true}, {std::nullopt, false}}, {29500, 29500});
  EXPECT_FALSE(r.exclusive);
  EXPECT_EQ(r.gpu_count, 0);
  EXPECT_EQ(r.gpu_devices, (std::vector<int>{1, 3}));
  EXPECT_EQ(r.gpu_total, 4);
  EXPECT_EQ(r.ports, std::vector<int>{29500});
  // No GPUs at all (a CPU share): nothing but its ports, not the host.
  HoldRequest cpu = SharedRequestFor({{std::nullopt, false}}, {});
  EXPECT_FALSE(cpu.exclusive);
  EXPECT_TRUE(cpu.gpu_devices.empty());
  EXPECT_TRUE(cpu.ports.empty());
  EXPECT_FALSE(AsksAnything(cpu));
  EXPECT_TRUE(AsksAnything(r));
  EXPECT_TRUE(AsksAnything(HoldRequest{}));  // the whole host
}

TEST(ChooseGpus, TakesTheLowestFreeIndices) {
  EXPECT_EQ(ChooseGpus(8, {0, 1, 3}, 2), (std::vector<int>{2, 4}));
  EXPECT_EQ(ChooseGpus(4, {0, 1, 2}, 2), (std::vector<int>{3}));  // fewer when fewer are free
  EXPECT_TRUE(ChooseGpus(0, {}, 1).empty());
}

// A hold's lease and times are labels any barge user of the host can write:
// absurd ones saturate instead of wrapping (found by host_reply_fuzz under
// UBSan), so such a hold is never stale rather than stale at once.
TEST(StaleRule, AnAbsurdLeaseLabelSaturatesInsteadOfWrapping) {
  Hold h;
  h.job_id = "abcd1234";
  h.format = kHoldFormat;
  h.lease = std::numeric_limits<long long>::max();
  h.lease_renewed = 5000;
  EXPECT_EQ(StaleAt(h), std::numeric_limits<long long>::max());
  EXPECT_FALSE(IsStale(h, 6000));
}

TEST(StaleRule, AHoldIsStaleOnlyOnceItsRenewedLeasePlusTheGraceHasPassed) {
  Hold h = MakeHold(HostHoldName(), "j1", 1000, 600);
  h.lease_renewed = 5000;
  EXPECT_EQ(StaleGrace(600), 60);
  EXPECT_EQ(StaleAt(h), 5000 + 600 + 60);
  EXPECT_FALSE(IsStale(h, 5660));
  EXPECT_TRUE(IsStale(h, 5661));
}

TEST(StaleRule, TheGraceIsTheLeaseWhenTheLeaseIsShorterThanAMinute) {
  Hold h = MakeHold(HostHoldName(), "j1", 1000, 5);
  h.lease_renewed = 1000;
  EXPECT_EQ(StaleAt(h), 1010);
}

TEST(StaleRule, AnOlderBargesHoldWithoutALeaseIsStaleAtItsLabelledExpiryPlusTheGrace) {
  Hold h = MakeHold(HostHoldName(), "j1", 1000, 600);
  h.format = 1;
  EXPECT_EQ(StaleAt(h), 1000 + 600 + 60);
  EXPECT_FALSE(IsStale(h, 1660));
  EXPECT_TRUE(IsStale(h, 1661));
}

TEST(StaleRule, AHoldWhoseJobHasNoLeaseOnTheEngineIsStaleAtOnce) {
  // Its job released its lease (or its controller went between the lease
  // and the hold): nothing renews or releases it, whatever its lease says.
  Hold h = MakeHold(HostHoldName(), "j1", 1000, 600);
  EXPECT_EQ(StaleAt(h), 1000);
  EXPECT_TRUE(IsStale(h, 1000));
  EXPECT_TRUE(IsStale(h, 999));
  // Not barge's (no job, no lease): never stale, never removed.
  Hold foreign;
  foreign.name = HostHoldName();
  EXPECT_FALSE(IsStale(foreign, 1000000));
}

TEST(HoldReply, ParsesTheHostsLinesAndKeepsAnythingElseAsErrors) {
  const std::string text =
      "now 2000\n"
      "stale barge-hold-host (job 0ld0ld00 old)\n"
      "took barge-hold-gpu-2\n"
      "hold\tabc\tbarge-hold-gpu-2\tj2\ttrain\tbob\tbox2\t2\t1990\t2590\t600\t2\n"
      "hold\tabd\tbarge-lease-j2.1995\tj2\ttrain\tbob\tbox2\t\t1990\t2590\t600\t2\n"
      "hold\tabe\tbarge-lease-j2.1991\tj2\ttrain\tbob\tbox2\t\t1990\t2590\t600\t2\n"
      "hold\tdef\tbarge-hold-gpu-0\tj1\teval\talice\tbox\t0\t1900\t2500\t600\t\n"
      "error: barge-hold-gpu-3: no space left\n";
  HoldReply r = ParseHoldReply(text);
  EXPECT_EQ(r.now, 2000);
  EXPECT_EQ(r.taken, std::vector<std::string>{"barge-hold-gpu-2"});
  EXPECT_EQ(r.removed_stale, std::vector<std::string>{"barge-hold-host (job 0ld0ld00 old)"});
  ASSERT_EQ(r.holds.size(), 4u);
  EXPECT_EQ(r.holds[0].job_id, "j2");
  EXPECT_EQ(r.holds[0].user, "bob");
  EXPECT_EQ(r.holds[0].format, 2);
  // The job's newest lease on the engine, for its holds and leases alike.
  EXPECT_EQ(r.holds[0].lease_renewed, 1995);
  EXPECT_EQ(r.holds[2].lease_renewed, 1995);
  EXPECT_TRUE(IsLease(r.holds[1]));
  EXPECT_FALSE(IsLease(r.holds[0]));
  EXPECT_EQ(LeaseIdOf(r.holds, "j2"), "abd");
  EXPECT_EQ(LeaseIdOf(r.holds, "j1"), "");
  EXPECT_EQ(r.holds[3].since, 1900);
  EXPECT_EQ(r.holds[3].format, 1);
  EXPECT_FALSE(r.holds[3].lease_renewed.has_value());
  EXPECT_EQ(r.errors, "error: barge-hold-gpu-3: no space left");
  EXPECT_EQ(HeldGpus(r, "j2"), std::vector<int>{2});
}

TEST(Conflicts, AnExclusiveJobConflictsWithAnyOtherJobsHoldButNotWithAStaleOne) {
  HoldReply r;
  r.now = 10000;
  r.taken = {HostHoldName()};
  r.holds = {MakeHold(HostHoldName(), "me", 9990, 600), MakeHold(GpuHoldName(0), "other", 9000, 600)};
  r.holds[1].lease_renewed = 9995;
  // Another job's lease is not a hold: it stands in nobody's way.
  r.holds.push_back(MakeHold(LeaseName("other", 9995), "other", 9000, 600));
  r.holds.back().lease_renewed = 9995;
  HoldRequest exclusive;
  ASSERT_EQ(Conflicts(exclusive, r, "me").size(), 1u);
  EXPECT_EQ(Conflicts(exclusive, r, "me")[0].job_id, "other");
  r.holds[1].lease_renewed = 1000;  // lapsed long ago
  EXPECT_TRUE(Conflicts(exclusive, r, "me").empty());
}

TEST(LeaseName, CarriesTheRenewalTimeAndNothingElseReadsAsOne) {
  EXPECT_EQ(LeaseName("1a2b3c4d", 1764201600), "barge-lease-1a2b3c4d.1764201600");
  EXPECT_EQ(LeaseRenewedAt("barge-lease-1a2b3c4d.1764201600"), 1764201600);
  EXPECT_FALSE(LeaseRenewedAt("barge-lease-1a2b3c4d").has_value());
  EXPECT_FALSE(LeaseRenewedAt("barge-lease-1a2b3c4d.").has_value());
  EXPECT_FALSE(LeaseRenewedAt("barge-lease-.17").has_value());
  EXPECT_FALSE(LeaseRenewedAt("barge-lease-j.17x").has_value());
  EXPECT_FALSE(LeaseRenewedAt("barge-lease-j.99999999999999999999").has_value());
  EXPECT_FALSE(LeaseRenewedAt("barge-hold-host").has_value());
}

TEST(Conflicts, SharingJobsConflictOnlyWithAHostHoldTooFewGpusOrTheirPorts) {
  HoldRequest share = RequestFor({{"2", true}}, 8, {29500});
  HoldReply r;
  r.now = 100;
  r.holds = {MakeHold(GpuHoldName(0), "other", 90, 600), MakeHold(GpuHoldName(1), "other", 90, 600),
             MakeHold(GpuHoldName(2), "me", 95, 600), MakeHold(GpuHoldName(3), "me", 95, 600),
             MakeHold(PortHoldName(29501), "other", 90, 600)};
  for (Hold& h : r.holds) h.lease_renewed = 95;
  EXPECT_TRUE(Conflicts(share, r, "me").empty());
  EXPECT_EQ(HeldGpus(r, "me"), (std::vector<int>{2, 3}));
  r.holds.push_back(MakeHold(PortHoldName(29500), "third", 90, 600));
  r.holds.back().lease_renewed = 95;
  ASSERT_EQ(Conflicts(share, r, "me").size(), 1u);
  EXPECT_EQ(Conflicts(share, r, "me")[0].job_id, "third");
  r.holds.pop_back();
  r.holds.push_back(MakeHold(HostHoldName(), "excl", 99, 600));
  r.holds.back().lease_renewed = 95;
  ASSERT_EQ(Conflicts(share, r, "me").size(), 1u);
  // Too few GPUs: the other jobs' GPU holds are what stands in the way.
  r.holds.pop_back();
  r.holds.erase(r.holds.begin() + 3);
  EXPECT_EQ(Conflicts(share, r, "me").size(), 2u);
}

// A job's lease renewed at `t` (the stale rule's fact), as a listing has it.
Hold LeaseOf(const std::string& job, long long t) { return MakeHold(LeaseName(job, t), job, t, 600); }

TEST(Queue, AnotherJobsLiveTicketStandsInTheWayOfEveryJobWithNoTicketOrALaterOne) {
  HoldReply r;
  r.now = 1000;
  r.holds = {MakeHold(TicketName("old"), "old", 900, 600), LeaseOf("old", 990)};
  ApplyEngineLeases(&r.holds);
  // A newcomer, exclusive or sharing GPUs, on a host nobody holds: the
  // ticket is in its way.
  std::vector<Hold> c = Conflicts(HoldRequest{}, r, "new");
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].job_id, "old");
  HoldRequest sharing{.exclusive = false, .gpu_count = 1, .gpu_total = 8, .gpu_devices = {}, .ports = {}};
  r.holds.push_back(MakeHold(GpuHoldName(0), "new", 1000, 600));
  r.holds.push_back(LeaseOf("new", 1000));
  ApplyEngineLeases(&r.holds);
  EXPECT_EQ(Conflicts(sharing, r, "new").size(), 1u);
  // A later waiter too.
  r.holds.push_back(MakeHold(TicketName("new"), "new", 950, 600));
  ApplyEngineLeases(&r.holds);
  EXPECT_EQ(Conflicts(sharing, r, "new").size(), 1u);
  EXPECT_EQ(WaitingFor({{"h1", r.now, Conflicts(sharing, r, "new")}}),
            "h1 (queued behind old train alice@box)");
  // The same second: the lower job id comes first, the same way on every
  // host ("new" < "old").
  r.holds.back().since = 900;
  EXPECT_TRUE(Conflicts(sharing, r, "new").empty());
  std::vector<Hold> old = Conflicts(HoldRequest{}, r, "old");
  EXPECT_TRUE(std::any_of(old.begin(), old.end(), [](const Hold& h) { return IsTicket(h) && h.job_id == "new"; }));
}

// A job that met a waiter's ticket and begins to wait in the same second
// is placed a second after it, so it never comes first by job id (seen on
// 2026-11-28: "4618863d" queued before "d6b44281", which had said it waited
// first); stale tickets and its own do not count.
TEST(Queue, AJobThatMetAWaiterInItsSecondIsPlacedAfterItNotByJobId) {
  std::vector<Hold> h1 = {MakeHold(TicketName("d6b44281"), "d6b44281", 1000, 600), LeaseOf("d6b44281", 1000)};
  std::vector<Hold> h2 = {MakeHold(TicketName("0ld"), "0ld", 100, 60), MakeHold(TicketName("4618863d"), "4618863d", 1003, 600),
                          LeaseOf("4618863d", 1003)};
  ApplyEngineLeases(&h1);
  ApplyEngineLeases(&h2);
  EXPECT_EQ(PlaceInLine({{1000, h1}}, "4618863d"), 1001);
  EXPECT_EQ(PlaceInLine({{1005, h1}}, "4618863d"), 1005);   // later anyway
  EXPECT_EQ(PlaceInLine({{1000, h1}, {1000, h2}}, "4618863d"), 1001);  // its own, a stale one: not counted
  EXPECT_EQ(PlaceInLine({{1000, {}}}, "4618863d"), 1000);
  // Placed so, it comes after the waiter on every host.
  Hold mine = MakeHold(TicketName("4618863d"), "4618863d", PlaceInLine({{1000, h1}}, "4618863d"), 600);
  EXPECT_TRUE(TicketBefore(h1[0], mine));
}

// Issue #40 (item 11): a place is read from the job's hosts' clocks at its
// first try (the latest of them), never from its controller's, so no
// controller's clock can put a job before one that began to wait earlier.
TEST(Queue, APlaceIsTheLatestOfItsHostsClocksAtItsFirstTry) {
  EXPECT_EQ(PlaceInLine({{1000, {}}, {1004, {}}, {998, {}}}, "j"), 1004);
  std::vector<Hold> h1 = {MakeHold(TicketName("w"), "w", 1010, 600), LeaseOf("w", 1010)};
  ApplyEngineLeases(&h1);
  EXPECT_EQ(PlaceInLine({{1000, h1}, {1004, {}}}, "j"), 1011) << "a waiter's ticket seen: the second after it";
  // A host that gave no clock (0) takes no one's place before everyone's.
  EXPECT_EQ(PlaceInLine({{0, {}}}, "j"), 1);
}

TEST(Queue, AnEarlierWaiterIgnoresALaterOnesTicketSoTwoWaitersNeverWaitForEachOther) {
  HoldReply r;
  r.now = 1000;
  r.holds = {MakeHold(TicketName("early"), "early", 800, 600), LeaseOf("early", 995),
             MakeHold(TicketName("late"), "late", 900, 600), LeaseOf("late", 995),
             MakeHold(HostHoldName(), "early", 1000, 600)};
  ApplyEngineLeases(&r.holds);
  EXPECT_TRUE(Conflicts(HoldRequest{}, r, "early").empty()) << "the later ticket got in the way";
  std::vector<Hold> late = Conflicts(HoldRequest{}, r, "late");
  ASSERT_EQ(late.size(), 2u);  // the earlier's ticket and its hold
  std::vector<Hold> queue = Queue(r.holds, r.now);
  ASSERT_EQ(queue.size(), 2u);
  EXPECT_EQ(queue[0].job_id, "early");
  EXPECT_EQ(queue[1].job_id, "late");
}

TEST(Queue, AJobTakesNoHoldWhereAnotherJobsTicketComesBeforeItsPlaceOrAnyWhenItHasNone) {
  std::vector<Hold> holds = {MakeHold(TicketName("bbb"), "bbb", 900, 600), LeaseOf("bbb", 995),
                             MakeHold(TicketName("dead"), "dead", 100, 600)};  // no lease: stale
  ApplyEngineLeases(&holds);
  EXPECT_TRUE(QueuedBehindAnother(holds, 1000, "new", std::nullopt)) << "a job with no place yet";
  EXPECT_TRUE(QueuedBehindAnother(holds, 1000, "ccc", 901));
  EXPECT_TRUE(QueuedBehindAnother(holds, 1000, "ccc", 900)) << "the same second: the lower id first";
  EXPECT_FALSE(QueuedBehindAnother(holds, 1000, "aaa", 900));
  EXPECT_FALSE(QueuedBehindAnother(holds, 1000, "ccc", 899));
  EXPECT_FALSE(QueuedBehindAnother(holds, 1000, "bbb", std::nullopt)) << "its own ticket";
  holds.erase(holds.begin(), holds.begin() + 2);
  EXPECT_FALSE(QueuedBehindAnother(holds, 1000, "new", std::nullopt)) << "a stale ticket";
}

TEST(Queue, ATicketWhoseJobHasNoLeaseOrALapsedOneStandsInNobodysWay) {
  HoldReply r;
  r.now = 10000;
  r.holds = {MakeHold(TicketName("gone"), "gone", 900, 600),  // no lease at all
             MakeHold(TicketName("dead"), "dead", 800, 600), LeaseOf("dead", 10000 - 600 - 60 - 1)};
  ApplyEngineLeases(&r.holds);
  EXPECT_TRUE(Conflicts(HoldRequest{}, r, "new").empty());
  EXPECT_TRUE(Queue(r.holds, r.now).empty());
}

TEST(HoldScript, QuotesTheOwnerAndTakesTheLowestFreeGpusInOrder) {
  DockerCommands docker({"sudo", "-n", "docker"});
  HoldOwner owner{"1a2b3c4d", "it's", "alice", "box", std::chrono::seconds(300)};
  const std::string s = TakeHoldsScript(docker, RequestFor({{"2"}}, 4, {}), owner, std::chrono::seconds(20));
  EXPECT_NE(s.find("'barge.hold.name=it'\\''s'"), std::string::npos) << s;
  EXPECT_NE(s.find("for h_i in 0 1 2 3;"), std::string::npos) << s;
  EXPECT_NE(s.find("h_dk() { $H_T sudo -n docker \"$@\"; h_rc=$?;"), std::string::npos) << s;
  EXPECT_NE(s.find("barge.hold.lease=300"), std::string::npos) << s;
  const std::string excl = TakeHoldsScript(docker, HoldRequest{}, owner, std::chrono::seconds(20));
  EXPECT_NE(excl.find("h_mk barge-hold-host\n"), std::string::npos) << excl;
  EXPECT_EQ(excl.find("for h_i in"), std::string::npos);
}

TEST(HeldGpuSlices, EachNodeGetsConsecutiveHeldDevicesInRankOrder) {
  // The job holds 1, 4, 5, 6 of 8: every other index counts as another
  // job's, and the plan's slices give rank 0 {1, 4} and rank 2 {5, 6}.
  const std::set<int> others = GpusNotHeld(8, {1, 4, 5, 6});
  EXPECT_EQ(others, (std::set<int>{0, 2, 3, 7}));
  std::map<size_t, cluster::HostGpus> hosts;
  hosts[0] = cluster::HostGpus{"h1", 8, others, {}};
  auto slices = cluster::AllocateGpuSlices({{0, 0, 2}, {2, 0, 2}}, hosts);
  ASSERT_TRUE(slices.ok()) << slices.status().message();
  EXPECT_EQ(slices->at(0), (std::vector<int>{1, 4}));
  EXPECT_EQ(slices->at(2), (std::vector<int>{5, 6}));
  EXPECT_EQ(cluster::GpuDeviceValue(slices->at(2)), "\"device=5,6\"");
  // More than it holds does not fit.
  EXPECT_FALSE(cluster::AllocateGpuSlices({{0, 0, 3}, {1, 0, 2}}, hosts).ok());
  EXPECT_EQ(GpusNotHeld(4, {}), (std::set<int>{0, 1, 2, 3}));
}

TEST(HoldRequest, ANodeTheGpuSlicesGaveDevicesAsksForItsCountSoTheHostChoosesFreeOnes) {
  // (HoldRequestFor passes the slice's size for such a node.)
  HoldRequest r = RequestFor({{"2"}, {"2"}}, 8, {});
  EXPECT_FALSE(r.exclusive);
  EXPECT_EQ(r.gpu_count, 4);
  EXPECT_TRUE(r.gpu_devices.empty());
}

// The host scripts run by sh against bench/emu/fake-docker (an emulated
// engine: create with atomic names, templated ps, rm by ID), one engine
// state per test, each docker call logged.
class HoldScriptRun : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = std::filesystem::temp_directory_path() / ("barge-holdscript-" + std::to_string(getpid()));
    std::filesystem::remove_all(root_);
    std::filesystem::create_directories(root_ / "engine");
    std::ofstream(root_ / "docker") << "#!/bin/sh\necho \"$1\" >> " << (root_ / "calls").string()
                                    << "\nFAKE_DOCKER_ROOT=" << (root_ / "engine").string() << " exec "
                                    << BARGE_SOURCE_DIR << "/bench/emu/fake-docker \"$@\"\n";
    std::filesystem::permissions(root_ / "docker", std::filesystem::perms::owner_all);
  }
  void TearDown() override {
    std::filesystem::remove_all(root_);
    for (const std::string& j : jobs_) std::filesystem::remove_all("/tmp/barge-" + j);
  }
  // A job whose directory exists on the "host" (as the watchdog's arming
  // makes it).
  HoldOwner Job(const std::string& name) {
    HoldOwner o{"ut" + std::to_string(getpid()) + name, name, "alice", "box", std::chrono::seconds(600)};
    o.job_dir = "/tmp/barge-" + o.job_id;
    std::filesystem::create_directories("/tmp/barge-" + o.job_id);
    std::ofstream("/tmp/barge-" + o.job_id + "/lease");
    jobs_.push_back(o.job_id);
    return o;
  }
  // Runs `script`; stdout to a pipe read here, or (closed) to a pipe whose
  // reader has gone. Returns the output; *exit its status.
  std::string Run(const std::string& script, int* exit = nullptr, bool closed = false) {
    std::ofstream(root_ / "s.sh") << script;
    std::filesystem::remove(root_ / "calls");
    int fds[2];
    EXPECT_EQ(pipe(fds), 0);
    if (closed) close(fds[0]);
    pid_t pid = fork();
    if (pid == 0) {
      dup2(fds[1], 1);
      dup2(fds[1], 2);
      if (!closed) close(fds[0]);
      close(fds[1]);
      execl("/bin/sh", "sh", (root_ / "s.sh").c_str(), nullptr);
      _exit(127);
    }
    close(fds[1]);
    std::string out;
    if (!closed) {
      char buf[4096];
      for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) out.append(buf, static_cast<size_t>(n));
      close(fds[0]);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    if (exit) *exit = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return out;
  }
  std::string Calls() {
    std::ifstream in(root_ / "calls");
    std::string all, line;
    while (std::getline(in, line)) all += line + " ";
    return all;
  }
  DockerCommands Docker() { return DockerCommands({(root_ / "docker").string()}); }
  // Moves the emulated engine's container `name`'s since label `seconds`
  // into the past.
  void Backdate(const std::string& name, long long seconds) {
    const std::filesystem::path labels = root_ / "engine" / name / "labels";
    std::ifstream in(labels);
    std::string all, line;
    while (std::getline(in, line)) {
      if (line.rfind("barge.hold.since=", 0) == 0) {
        line = "barge.hold.since=" + std::to_string(std::stoll(line.substr(17)) - seconds);
      }
      all += line + "\n";
    }
    std::ofstream(labels) << all;
  }
  std::string Take(const HoldRequest& r, const HoldOwner& o, int* exit = nullptr, bool closed = false) {
    return Run(TakeHoldsScript(Docker(), r, o, std::chrono::seconds(20)), exit, closed);
  }
  size_t Engine() {
    size_t n = 0;
    for (auto it = std::filesystem::directory_iterator(root_ / "engine"); it != std::filesystem::directory_iterator();
         ++it) {
      ++n;
    }
    return n;
  }
  std::filesystem::path root_;
  std::vector<std::string> jobs_;
};

TEST_F(HoldScriptRun, AFreeHostIsTakenWithTwoCreatesTheLeaseFirstAndOneListing) {
  HoldOwner a = Job("a");
  int exit = -1;
  HoldReply r = ParseHoldReply(Take(HoldRequest{}, a, &exit));
  EXPECT_EQ(exit, 0) << r.errors;
  EXPECT_EQ(r.taken, std::vector<std::string>{HostHoldName()});
  ASSERT_EQ(r.holds.size(), 2u);
  EXPECT_EQ(r.holds[0].name, HostHoldName());
  EXPECT_EQ(r.holds[0].job_id, a.job_id);
  EXPECT_EQ(r.holds[0].job_name, "a");
  EXPECT_EQ(r.holds[0].lease, 600);
  EXPECT_EQ(r.holds[0].format, kHoldFormat);
  EXPECT_TRUE(IsLease(r.holds[1]));
  EXPECT_EQ(r.holds[1].name, LeaseName(a.job_id, r.now));
  EXPECT_EQ(r.holds[0].lease_renewed, r.now);
  EXPECT_EQ(LeaseIdOf(r.holds, a.job_id), r.holds[1].id);
  EXPECT_EQ(Calls(), "create create ps ");
  EXPECT_TRUE(Conflicts(HoldRequest{}, r, a.job_id).empty());
}

TEST_F(HoldScriptRun, AnEngineCallTheTimeoutKillsSaysItHadNoAnswerWithinTheBound) {
  std::ofstream(root_ / "frozen") << "#!/bin/sh\nexec sleep 30\n";
  std::filesystem::permissions(root_ / "frozen", std::filesystem::perms::owner_all);
  HoldOwner a = Job("a");
  int exit = -1;
  const std::string out = Run(
      TakeHoldsScript(DockerCommands({(root_ / "frozen").string()}), HoldRequest{}, a, std::chrono::seconds(1)),
      &exit);
  EXPECT_NE(exit, 0) << out;
  const HoldReply r = ParseHoldReply(out);
  EXPECT_NE(r.errors.find("no answer from the engine within 1s"), std::string::npos) << out;
  EXPECT_TRUE(r.taken.empty());
}

TEST_F(HoldScriptRun, TheLastRemovalTakesTheJobsContainersAndHoldsInOneDockerCall) {
  HoldOwner a = Job("a"), b = Job("b");
  HoldReply ra = ParseHoldReply(Take(HoldRequest{.exclusive = false, .gpu_count = 0, .gpu_total = 0, .gpu_devices = {1}, .ports = {}}, a));
  HoldReply rb = ParseHoldReply(Take(HoldRequest{.exclusive = false, .gpu_count = 0, .gpu_total = 0, .gpu_devices = {2}, .ports = {}}, b));
  ASSERT_EQ(HoldIdsOf(ra, a.job_id).size(), 2u);  // its hold and its lease
  Run(Docker().Line({"create", "--name", "barge-x-" + a.job_id + "-0", "--label", "barge.job=" + a.job_id, "img"}));
  ASSERT_EQ(Engine(), 5u);
  int exit = -1;
  Run(RemoveWithHoldsCommand(Docker(), {"barge-x-" + a.job_id + "-0"}, HoldIdsOf(ra, a.job_id), a.job_id), &exit);
  EXPECT_EQ(exit, 0);
  EXPECT_EQ(Calls(), "rm ");
  // b's hold and lease stay: the IDs are only a's (b's listing shows
  // both jobs').
  EXPECT_EQ(Engine(), 2u);
  EXPECT_EQ(HoldIdsOf(rb, a.job_id), HoldIdsOf(ra, a.job_id));
  ASSERT_EQ(HoldIdsOf(rb, b.job_id).size(), 2u);
  EXPECT_NE(HoldIdsOf(rb, b.job_id), HoldIdsOf(ra, a.job_id));
}

TEST_F(HoldScriptRun, ASecondJobIsRefusedUntilTheFirstsLeaseLapsesThenTakesTheHostOverAsStale) {
  HoldOwner a = Job("a"), b = Job("b");
  HoldReply ra = ParseHoldReply(Take(HoldRequest{}, a));
  const std::string a_lease = LeaseIdOf(ra.holds, a.job_id);
  ASSERT_FALSE(a_lease.empty());
  HoldReply r = ParseHoldReply(Take(HoldRequest{}, b));
  EXPECT_TRUE(r.taken.empty());
  ASSERT_EQ(Conflicts(HoldRequest{}, r, b.job_id).size(), 1u);
  EXPECT_EQ(Conflicts(HoldRequest{}, r, b.job_id)[0].job_id, a.job_id);
  EXPECT_EQ(Calls(), "create create ps ");
  // a renews its lease on the engine: still a's.
  int exit = -1;
  Run(RenewEngineLeaseCommand(Docker(), a.job_id, a_lease, std::chrono::seconds(20)), &exit);
  EXPECT_EQ(exit, 0);
  EXPECT_EQ(Calls(), "rename ");
  r = ParseHoldReply(Take(HoldRequest{}, b));
  EXPECT_EQ(Conflicts(HoldRequest{}, r, b.job_id).size(), 1u);
  // a's controller and watchdog went: its lease was last renewed long ago
  // (lease 600 s + grace 60 s). b removes a's hold and lease as stale and
  // takes the host.
  const long long lapsed = r.now - 661;
  Run(Docker().Line({"rename", a_lease, LeaseName(a.job_id, lapsed)}));
  // (b released what its refused tries left, as its controller does.)
  Run(ReleaseHoldsCommand(Docker(), b.job_id));
  r = ParseHoldReply(Take(HoldRequest{}, b, &exit));
  EXPECT_EQ(exit, 0) << r.errors;
  EXPECT_EQ(r.removed_stale, (std::vector<std::string>{HostHoldName() + " (job " + a.job_id + " a)",
                                                       LeaseName(a.job_id, lapsed) + " (job " + a.job_id + " a)"}));
  EXPECT_EQ(r.taken, std::vector<std::string>{HostHoldName()});
  ASSERT_EQ(r.holds.size(), 2u);
  EXPECT_EQ(r.holds[0].job_id, b.job_id);
  EXPECT_EQ(r.holds[1].job_id, b.job_id);
  // Taking again what it holds: it still holds it.
  r = ParseHoldReply(Take(HoldRequest{}, b, &exit));
  EXPECT_EQ(exit, 0) << r.errors;
  EXPECT_EQ(r.taken, std::vector<std::string>{HostHoldName()});
}

TEST_F(HoldScriptRun, AHoldIsJudgedByItsLeaseOnTheEngineNotByAnyFileAnotherUserCanPlantInTmp) {
  HoldOwner a = Job("a"), b = Job("b");
  HoldReply ra = ParseHoldReply(Take(HoldRequest{}, a));
  const std::string a_lease = LeaseIdOf(ra.holds, a.job_id);
  ASSERT_FALSE(a_lease.empty());
  // a's job directory and lease file are gone (or were never a's): its
  // live lease on the engine still keeps the host a's.
  std::filesystem::remove_all("/tmp/barge-" + a.job_id);
  HoldReply r = ParseHoldReply(Take(HoldRequest{}, b));
  EXPECT_TRUE(r.removed_stale.empty());
  ASSERT_EQ(Conflicts(HoldRequest{}, r, b.job_id).size(), 1u);
  // A planted directory with a fresh lease file does not keep a lapsed
  // lease's hold alive.
  Run(Docker().Line({"rename", a_lease, LeaseName(a.job_id, r.now - 661)}));
  Run(ReleaseHoldsCommand(Docker(), b.job_id));  // as b's controller does after a refusal
  std::filesystem::create_directories("/tmp/barge-" + a.job_id);
  std::ofstream("/tmp/barge-" + a.job_id + "/lease");
  int exit = -1;
  r = ParseHoldReply(Take(HoldRequest{}, b, &exit));
  EXPECT_EQ(exit, 0) << r.errors;
  EXPECT_EQ(r.removed_stale.size(), 2u);
  EXPECT_EQ(r.taken, std::vector<std::string>{HostHoldName()});
  // A hold of a job whose lease is gone from the engine is stale at once.
  HoldOwner c = Job("c");
  Run(Docker().Line({"rm", "-f", LeaseIdOf(r.holds, b.job_id)}));
  Backdate(HostHoldName(), 5);  // (made in an earlier second than c's look)
  r = ParseHoldReply(Take(HoldRequest{}, c, &exit));
  EXPECT_EQ(r.removed_stale, std::vector<std::string>{HostHoldName() + " (job " + b.job_id + " b)"});
  EXPECT_EQ(r.taken, std::vector<std::string>{HostHoldName()});
}

TEST_F(HoldScriptRun, WithoutItsJobDirectoryOrWithItsChannelClosedItCreatesNothing) {
  HoldOwner a = Job("a");
  std::filesystem::remove_all("/tmp/barge-" + a.job_id);
  int exit = -1;
  const std::string out = Take(HoldRequest{}, a, &exit);
  EXPECT_EQ(exit, 1);
  EXPECT_NE(out.find("is missing"), std::string::npos) << out;
  EXPECT_EQ(Engine(), 0u);
  // The controller closed the channel (interrupted): the directory is
  // there, but the script cannot write to it.
  HoldOwner b = Job("b");
  Take(HoldRequest{}, b, &exit, /*closed=*/true);
  EXPECT_EQ(exit, 1);
  EXPECT_EQ(Engine(), 0u);
  EXPECT_EQ(Calls(), "");
}

TEST_F(HoldScriptRun, TwoGpuCountJobsGetTheLowestFreeDisjointIndices) {
  HoldOwner a = Job("a"), b = Job("b");
  const HoldRequest two = RequestFor({{"2"}}, 4, {});
  HoldReply ra = ParseHoldReply(Take(two, a));
  HoldReply rb = ParseHoldReply(Take(two, b));
  EXPECT_EQ(HeldGpus(ra, a.job_id), (std::vector<int>{0, 1}));
  EXPECT_EQ(HeldGpus(rb, b.job_id), (std::vector<int>{2, 3}));
  EXPECT_TRUE(Conflicts(two, rb, b.job_id).empty());
  EXPECT_EQ(Calls(), "ps create create create ps ");
  // A third finds none free.
  HoldOwner c = Job("c");
  HoldReply rc = ParseHoldReply(Take(two, c));
  EXPECT_TRUE(HeldGpus(rc, c.job_id).empty());
  EXPECT_EQ(Conflicts(two, rc, c.job_id).size(), 4u);
}

TEST_F(HoldScriptRun, AGpuCountIsNeverTakenOnAnExcludedUnhealthyGpu) {
  HoldOwner a = Job("a"), b = Job("b");
  HoldRequest two = RequestFor({{"2"}}, 4, {});
  two.excluded_gpus = {0, 2};
  HoldReply ra = ParseHoldReply(Take(two, a));
  EXPECT_EQ(HeldGpus(ra, a.job_id), (std::vector<int>{1, 3}));
  EXPECT_TRUE(Conflicts(two, ra, a.job_id).empty());
  // Every GPU out: nothing is taken, and the job is short of GPUs.
  HoldRequest none = RequestFor({{"1"}}, 4, {});
  none.excluded_gpus = {0, 1, 2, 3};
  int exit = -1;
  HoldReply rb = ParseHoldReply(Take(none, b, &exit));
  EXPECT_TRUE(HeldGpus(rb, b.job_id).empty()) << rb.errors;
  EXPECT_FALSE(Conflicts(none, rb, b.job_id).empty());
}

TEST_F(HoldScriptRun, AWaitingJobLeavesItsTicketOnceAndKeepsItsLeaseBetweenTriesWithNoNewOne) {
  HoldOwner a = Job("a"), w = Job("w");
  HoldReply ra = ParseHoldReply(Take(HoldRequest{}, a));
  ASSERT_EQ(ra.taken, std::vector<std::string>{HostHoldName()});
  // w's first try: refused (a holds the host). It waits: its holds go, its
  // lease stays.
  HoldReply first = ParseHoldReply(Take(HoldRequest{}, w));
  ASSERT_FALSE(Conflicts(HoldRequest{}, first, w.job_id).empty());
  const std::string lease = LeaseIdOf(first.holds, w.job_id);
  ASSERT_FALSE(lease.empty());
  int exit = -1;
  Run(ReleaseHoldsKeepingPlaceCommand(Docker(), w.job_id), &exit);
  EXPECT_EQ(exit, 0);
  EXPECT_EQ(Engine(), 3u);  // a's hold and lease, w's lease
  // Its next try leaves its ticket and makes no second lease.
  w.has_lease = true;
  w.ticket_since = 12345;
  HoldReply second = ParseHoldReply(Take(HoldRequest{}, w, &exit));
  EXPECT_TRUE(second.taken.empty()) << "the ticket or lease counted as a hold";
  EXPECT_EQ(LeaseIdOf(second.holds, w.job_id), lease);
  int tickets = 0, leases = 0;
  for (const Hold& h : second.holds) {
    if (h.job_id != w.job_id) continue;
    if (IsTicket(h)) {
      ++tickets;
      EXPECT_EQ(h.name, TicketName(w.job_id));
      EXPECT_EQ(h.since, 12345);
      EXPECT_TRUE(h.lease_renewed.has_value()) << "the ticket's job's lease was not applied";
      EXPECT_FALSE(IsStale(h, second.now));
    }
    if (IsLease(h)) ++leases;
  }
  EXPECT_EQ(tickets, 1);
  EXPECT_EQ(leases, 1);
  // A newcomer is now queued behind w even once a's hold is gone.
  Run(ReleaseHoldsCommand(Docker(), a.job_id), &exit);
  HoldOwner n = Job("n");
  HoldReply rn = ParseHoldReply(Take(HoldRequest{}, n));
  std::vector<Hold> c = Conflicts(HoldRequest{}, rn, n.job_id);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_TRUE(IsTicket(c[0]));
  EXPECT_EQ(c[0].job_id, w.job_id);
  Run(ReleaseHoldsCommand(Docker(), n.job_id), &exit);
  // w's next try: the host is its own; its ticket then goes, its lease and
  // hold stay.
  HoldReply third = ParseHoldReply(Take(HoldRequest{}, w));
  EXPECT_EQ(third.taken, std::vector<std::string>{HostHoldName()});
  EXPECT_TRUE(Conflicts(HoldRequest{}, third, w.job_id).empty());
  Run(RemoveTicketCommand(Docker(), w.job_id), &exit);
  EXPECT_EQ(exit, 0);
  EXPECT_EQ(Engine(), 2u);  // w's hold and lease
  Run(RemoveTicketCommand(Docker(), w.job_id), &exit);
  EXPECT_EQ(exit, 0) << "removing a ticket that is gone must not fail";
}

TEST_F(HoldScriptRun, JoiningTheLineMakesTheTicketBeforeTheHoldsGoSoTheHostIsNeverWithoutEither) {
  HoldOwner w = Job("w");
  ASSERT_EQ(ParseHoldReply(Take(HoldRequest{}, w)).taken, std::vector<std::string>{HostHoldName()});
  w.has_lease = true;
  w.ticket_since = 12345;
  int exit = -1;
  const std::string out = Run(JoinQueueScript(Docker(), w, std::chrono::seconds(20)), &exit);
  EXPECT_EQ(exit, 0) << out;
  // The ticket's create, then the release's listing and removal.
  EXPECT_EQ(Calls(), "create ps rm ");
  EXPECT_NE(out.find("took " + TicketName(w.job_id)), std::string::npos) << out;
  EXPECT_TRUE(std::filesystem::exists(root_ / "engine" / TicketName(w.job_id)));
  EXPECT_FALSE(std::filesystem::exists(root_ / "engine" / HostHoldName()));
  EXPECT_EQ(Engine(), 2u);  // its lease and its ticket
  // Once in line, joining again makes no second ticket.
  w.has_ticket = true;
  Run(JoinQueueScript(Docker(), w, std::chrono::seconds(20)), &exit);
  EXPECT_EQ(exit, 0);
  EXPECT_EQ(Calls(), "ps ");
}

TEST_F(HoldScriptRun, ALaterWaiterTakesNoHoldWhereAnEarlierTicketStandsAndAnEarlierWaiterTakesTheHost) {
  HoldOwner e = Job("e"), l = Job("l");
  e.ticket_since = 100;
  l.ticket_since = 200;
  int exit = -1;
  for (HoldOwner* o : {&e, &l}) {
    Run(JoinQueueScript(Docker(), *o, std::chrono::seconds(20)), &exit);
    ASSERT_EQ(exit, 0);
    o->has_lease = true;
    o->has_ticket = true;
  }
  // The later waiter lists, sees e's ticket before its place and creates
  // nothing: the listing is its answer.
  HoldReply rl = ParseHoldReply(Take(HoldRequest{}, l, &exit));
  EXPECT_EQ(exit, 0) << rl.errors;
  EXPECT_EQ(Calls(), "ps ");
  EXPECT_TRUE(rl.taken.empty());
  EXPECT_FALSE(std::filesystem::exists(root_ / "engine" / HostHoldName()));
  std::vector<Hold> c = Conflicts(HoldRequest{}, rl, l.job_id);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].name, TicketName(e.job_id));
  // The same second: the lower job id is first ("...e" < "...l").
  l.ticket_since = 100;
  EXPECT_TRUE(ParseHoldReply(Take(HoldRequest{}, l)).taken.empty());
  EXPECT_EQ(Calls(), "ps ");
  // A GPU count lists first anyway: no second listing, no GPU taken.
  HoldRequest gpus{.exclusive = false, .gpu_count = 2, .gpu_total = 4, .gpu_devices = {}, .ports = {}};
  EXPECT_TRUE(ParseHoldReply(Take(gpus, l)).taken.empty());
  EXPECT_EQ(Calls(), "ps ");
  // The earlier waiter ignores l's ticket and takes the host.
  HoldReply re = ParseHoldReply(Take(HoldRequest{}, e, &exit));
  EXPECT_EQ(exit, 0) << re.errors;
  EXPECT_EQ(re.taken, std::vector<std::string>{HostHoldName()});
  EXPECT_EQ(Calls(), "ps create ps ");
  EXPECT_TRUE(Conflicts(HoldRequest{}, re, e.job_id).empty());
}

TEST_F(HoldScriptRun, ANameInUseAtTheCreateThatItsHolderReleasedBeforeTheListingIsTakenOnTheRetry) {
  HoldOwner a = Job("a"), b = Job("b");
  ASSERT_EQ(ParseHoldReply(Take(HoldRequest{}, a)).taken, std::vector<std::string>{HostHoldName()});
  // b's create finds the name in use; a releases it just before b lists.
  const std::filesystem::path docker2 = root_ / "docker2";
  std::ofstream(docker2) << "#!/bin/sh\nif [ \"$1\" = ps ] && [ ! -e " << (root_ / "released").string()
                         << " ]; then touch " << (root_ / "released").string() << "; rm -rf "
                         << (root_ / "engine" / HostHoldName()).string() << "; fi\nexec "
                         << (root_ / "docker").string() << " \"$@\"\n";
  std::filesystem::permissions(docker2, std::filesystem::perms::owner_all);
  int exit = -1;
  HoldReply r = ParseHoldReply(
      Run(TakeHoldsScript(DockerCommands({docker2.string()}), HoldRequest{}, b, std::chrono::seconds(20)), &exit));
  EXPECT_EQ(exit, 0) << r.errors;
  EXPECT_EQ(r.taken, std::vector<std::string>{HostHoldName()}) << "b took nothing: " << r.errors;
  EXPECT_TRUE(Conflicts(HoldRequest{}, r, b.job_id).empty());
}

// The hosts' scripts with a host clock of the test's own: `date +%s` there
// says what HostClock set, whatever this machine's clock says (the rest of
// `date` is the real one).
class HoldScriptOnHostClock : public HoldScriptRun {
 protected:
  void SetUp() override {
    HoldScriptRun::SetUp();
    std::filesystem::create_directories(root_ / "bin");
    std::ofstream(root_ / "bin" / "date") << "#!/bin/sh\n[ \"$*\" = +%s ] && exec cat " << (root_ / "clock").string()
                                          << "\nexec /bin/date \"$@\"\n";
    std::filesystem::permissions(root_ / "bin" / "date", std::filesystem::perms::owner_all);
  }
  void HostClock(long long t) { std::ofstream(root_ / "clock") << t << "\n"; }
  std::string OnHost(const std::string& script, int* exit = nullptr) {
    return Run("PATH=" + (root_ / "bin").string() + ":$PATH; export PATH\n" + script, exit);
  }
  HoldReply TakeOnHost(const HoldOwner& o) {
    return ParseHoldReply(OnHost(TakeHoldsScript(Docker(), HoldRequest{}, o, std::chrono::seconds(20))));
  }
};

// Issue #40 (item 11): two waiters are served in the order the host's clock
// saw them begin to wait (b met the busy host at 5000, a at 5001), not in
// the order their controllers joined the line, nor by job id (a's is the
// lower one): each is placed from what its first try saw (Holds::SecureHolds
// calls PlaceInLine so), and this machine's clock, far from the host's,
// counts for neither.
TEST_F(HoldScriptOnHostClock, TwoWaitersAreServedInTheOrderTheHostsClockSawThemBeginToWait) {
  HostClock(5000);
  HoldOwner x = Job("x"), a = Job("a"), b = Job("b");
  ASSERT_EQ(TakeOnHost(x).taken, std::vector<std::string>{HostHoldName()});
  HoldReply rb = TakeOnHost(b);
  HostClock(5001);
  HoldReply ra = TakeOnHost(a);
  ASSERT_EQ(rb.now, 5000);
  ASSERT_EQ(ra.now, 5001);
  ASSERT_FALSE(Conflicts(HoldRequest{}, rb, b.job_id).empty());
  ASSERT_FALSE(Conflicts(HoldRequest{}, ra, a.job_id).empty());
  a.ticket_since = PlaceInLine({{ra.now, ra.holds}}, a.job_id);
  b.ticket_since = PlaceInLine({{rb.now, rb.holds}}, b.job_id);
  EXPECT_EQ(*b.ticket_since, 5000);
  EXPECT_EQ(*a.ticket_since, 5001);
  // a joins the line first, then b (each keeps the lease its first try made).
  int exit = -1;
  for (HoldOwner* o : {&a, &b}) {
    o->has_lease = true;
    OnHost(JoinQueueScript(Docker(), *o, std::chrono::seconds(20)), &exit);
    ASSERT_EQ(exit, 0);
    o->has_ticket = true;
  }
  // x goes: a stays in line behind b's ticket, and b takes the host.
  Run(ReleaseHoldsCommand(Docker(), x.job_id), &exit);
  HostClock(5010);
  HoldReply next_a = TakeOnHost(a);
  EXPECT_TRUE(next_a.taken.empty()) << "a went before b, which began to wait first by the host's clock";
  std::vector<Hold> c = Conflicts(HoldRequest{}, next_a, a.job_id);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].name, TicketName(b.job_id));
  HoldReply next_b = TakeOnHost(b);
  EXPECT_EQ(next_b.taken, std::vector<std::string>{HostHoldName()}) << next_b.errors;
  EXPECT_TRUE(Conflicts(HoldRequest{}, next_b, b.job_id).empty());
}

TEST(BusyTable, NamesTheHolderWhenItStartedItsGpusAndWhenItGoesStale) {
  Hold h = MakeHold(HostHoldName(), "9f8e7d6c", 1000, 600);
  h.gpus = "all";
  h.lease_renewed = 1100;
  const std::string t = BusyTable({{"10.77.0.1", 1130, {h}}});
  EXPECT_NE(t.find("HOST"), std::string::npos) << t;
  EXPECT_NE(t.find("HELD BY (job id, name, user@machine)"), std::string::npos) << t;
  EXPECT_NE(t.find("10.77.0.1"), std::string::npos) << t;
  EXPECT_NE(t.find("9f8e7d6c train alice@box"), std::string::npos) << t;
  EXPECT_NE(t.find("00:16:40Z (2m10s ago)"), std::string::npos) << t;
  EXPECT_NE(t.find("all"), std::string::npos) << t;
  EXPECT_NE(t.find("in 10m30s unless renewed"), std::string::npos) << t;
  EXPECT_EQ(WaitingFor({{"h1", 1130, {h, h}}}), "h1 (held by 9f8e7d6c train alice@box)");
  // A job's GPU holds on a host are one row.
  Hold g3 = MakeHold(GpuHoldName(3), "5e5e5e5e", 1000, 600), g2 = MakeHold(GpuHoldName(2), "5e5e5e5e", 1000, 600);
  g3.gpus = "3";
  g2.gpus = "2";
  const std::string shared = BusyTable({{"h2", 1130, {g3, g2}}});
  EXPECT_NE(shared.find(" 2,3 "), std::string::npos) << shared;
  EXPECT_EQ(shared.find("5e5e5e5e"), shared.rfind("5e5e5e5e")) << shared;
}

TEST(ShortDuration, ReadsAsSecondsMinutesOrHours) {
  EXPECT_EQ(ShortDuration(45), "45s");
  EXPECT_EQ(ShortDuration(185), "3m05s");
  EXPECT_EQ(ShortDuration(7800), "2h10m");
  EXPECT_EQ(ShortDuration(-3), "0s");
}

}  // namespace
}  // namespace barge::runner
