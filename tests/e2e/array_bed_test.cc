// Job arrays on the test bed, through the real CLI: members over a pool of
// three hosts, two at a time, one member failing once and retried, one
// failing for good; the per-member environment and substitutions seen from
// inside the containers; no two members on one host at once; the summary
// table and the exit code; members waiting for a host another job holds;
// and `barge down` of a running array leaving nothing on any host.
//
// Each container appends a START and an END line to a file under /run (the
// bed's hosts share the machine's /run), stamped with the kernel's uptime
// (/proc/uptime, one clock for every host): the intervals of the members
// that ran on one host must not overlap. The same shared file is how a
// member knows it failed before (a marker per index).
#include <gtest/gtest.h>

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <thread>

#include "tests/support/bed_job.h"

namespace fs = std::filesystem;
using barge::testing::BedHost;
using barge::testing::BedHostsYaml;
using barge::testing::CliOutcome;
using barge::testing::GetBed;
using barge::testing::JobDir;
using barge::testing::OnHost;
using barge::testing::ReadWholeFile;

namespace {

// A directory under /run shared by every bed host (and this machine),
// removed at destruction.
class SharedDir {
 public:
  explicit SharedDir(const std::string& name)
      : path_("/run/barge-array-test-" + name + "-" + std::to_string(getpid())) {
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~SharedDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// The image with its tag replaced by {array.tag} (the row gives the tag
// back), and that tag.
std::pair<std::string, std::string> ImageTemplate() {
  const std::string& image = GetBed().image;
  size_t colon = image.rfind(':');
  if (colon == std::string::npos || image.find('/', colon) != std::string::npos) return {image + ":{array.tag}", "latest"};
  return {image.substr(0, colon) + ":{array.tag}", image.substr(colon + 1)};
}

struct Interval {
  int index = 0;
  std::string host;
  double start = 0, end = -1;
};

// The member ids listed by `barge ls ARRAY` (JOB column).
std::vector<std::string> MemberJobs(const JobDir& job, const std::string& array) {
  CliOutcome ls = job.Barge("ls " + array);
  std::vector<std::string> ids;
  std::istringstream in(ls.out);
  std::string line;
  std::getline(in, line);  // header
  while (std::getline(in, line)) {
    std::smatch m;
    if (std::regex_search(line, m, std::regex(R"(^\d+\s+\|\s+([0-9a-f]+)\s+\|)"))) ids.push_back(m[1]);
  }
  return ids;
}

std::string ContainersOf(const std::string& job_id) {
  std::string all;
  for (const BedHost& h : GetBed().hosts) {
    all += OnHost(h, "docker ps -aq --filter label=barge.job=" + job_id);
  }
  return all;
}

TEST(ArrayBed, SevenMembersTwoAtATimeOnThreeHostsRetryOnceReportAndNeverShareAHost) {
  JobDir job("array-sweep");
  SharedDir shared("sweep");
  const auto [image, tag] = ImageTemplate();
  std::ofstream(job.path() / "params.csv") << "seed,tag,note\n"
                                              "1," << tag << ",plain\n"
                                              "2," << tag << ",\"a b; rm -rf /\"\n"
                                              "3," << tag << ",x\n"
                                              "4," << tag << ",once\n"
                                              "5," << tag << ",x\n"
                                              "6," << tag << ",x\n"
                                              "7," << tag << ",always\n";
  // Member 3 fails on its first attempt only; member 6 always fails.
  job.Write("name: sweep\n"
            "image: \"" + image + "\"\n" + BedHostsYaml(0, 3) +
            "parallel: 2\n"
            "array_retries: 1\n"
            "stop_grace: 1s\n"
            "timeout: 60s\n"
            "container:\n"
            "  volumes: [\"" + shared.path() + ":/shared\"]\n"
            "  env:\n"
            "    SEED_COPY: \"s={array.seed}\"\n"
            // The note as data: a positional argument after the script
            // (exec form), never inside the script's text.
            "command:\n"
            "  - sh\n"
            "  - -c\n"
            "  - |\n"
            "      echo \"member $BARGE_ARRAY_INDEX says hello\"\n"
            "      read up _ < /proc/uptime\n"
            "      echo \"START $BARGE_ARRAY_INDEX $MASTER_ADDR $up\" >> /shared/events\n"
            "      echo \"ENV idx=$BARGE_ARRAY_INDEX aws=$AWS_BATCH_JOB_ARRAY_INDEX size=$BARGE_ARRAY_SIZE "
            "id=$BARGE_ARRAY_JOB_ID seed=$seed copy=$SEED_COPY argc=$# arg1=$1 note=$note\" >> /shared/env-$BARGE_ARRAY_INDEX\n"
            "      code=0\n"
            "      if [ \"$note\" = once ] && [ ! -e /shared/failed-$BARGE_ARRAY_INDEX ]; then touch /shared/failed-$BARGE_ARRAY_INDEX; code=7; fi\n"
            "      if [ \"$note\" = always ]; then code=5; fi\n"
            "      [ $code = 0 ] && sleep 1\n"
            "      read up _ < /proc/uptime\n"
            "      echo \"END $BARGE_ARRAY_INDEX $MASTER_ADDR $up\" >> /shared/events\n"
            "      exit $code\n"
            "  - sh\n"
            "  - \"{array.note}\"\n");
  CliOutcome run = job.Barge("run job.yaml --array params.csv");
  SCOPED_TRACE(run.out + run.err);
  EXPECT_EQ(run.code, 125);  // member 6 failed for good

  // The summary table: every member, member 3 succeeded on its 2nd attempt,
  // member 6 failed with its own exit code after 2 attempts.
  EXPECT_NE(run.out.find("INDEX | PARAMS"), std::string::npos);
  EXPECT_TRUE(std::regex_search(run.out, std::regex(R"(\n3 +\| seed=4 tag=\S+ note=once +\| succeeded \(2 attempts\) \| 0 )")));
  EXPECT_TRUE(std::regex_search(run.out, std::regex(R"(\n6 +\| seed=7 tag=\S+ note=always +\| failed \(2 attempts\) +\| 5 )")));
  for (int i : {0, 1, 2, 4, 5}) {
    EXPECT_TRUE(std::regex_search(run.out, std::regex("\n" + std::to_string(i) + R"( +\| [^|]+\| succeeded +\| 0 )")))
        << "member " << i;
  }
  // Live output names the member in each container line's prefix.
  EXPECT_TRUE(std::regex_search(run.out, std::regex(R"((^|\n)\[1:0 head 10\.77\.0\.\d+\] member 1 says hello\n)")));
  EXPECT_NE(run.err.find("running 2"), std::string::npos);

  // From inside the containers: each member's own env and substitutions.
  std::smatch id;
  ASSERT_TRUE(std::regex_search(run.err, id, std::regex(R"(array ([0-9a-f]+) \(sweep\))")));
  for (int i = 0; i < 7; ++i) {
    const std::string env = ReadWholeFile(fs::path(shared.path()) / ("env-" + std::to_string(i)));
    const std::string seed = std::to_string(i + 1);
    EXPECT_NE(env.find("ENV idx=" + std::to_string(i) + " aws=" + std::to_string(i) + " size=7 id=" + id[1].str() +
                       " seed=" + seed + " copy=s=" + seed + " argc=1 "),
              std::string::npos)
        << env;
  }
  // `a b; rm -rf /` reached the shell as one word, and as the env value.
  EXPECT_NE(ReadWholeFile(fs::path(shared.path()) / "env-1").find("argc=1 arg1=a b; rm -rf / note=a b; rm -rf /"),
            std::string::npos);

  // Never two members on one host at once.
  std::map<std::string, std::vector<Interval>> by_host;
  std::map<std::pair<int, std::string>, Interval> open;
  std::istringstream events(ReadWholeFile(fs::path(shared.path()) / "events"));
  int starts = 0;
  for (std::string what, host; events >> what;) {
    int index;
    double t;
    events >> index >> host >> t;
    if (what == "START") {
      ++starts;
      open[{index, host}] = Interval{index, host, t};
    } else {
      Interval iv = open[{index, host}];
      iv.end = t;
      by_host[host].push_back(iv);
    }
  }
  EXPECT_EQ(starts, 9);  // 7 members, 2 retries
  EXPECT_GE(by_host.size(), 2u);
  for (auto& [host, list] : by_host) {
    std::sort(list.begin(), list.end(), [](const Interval& a, const Interval& b) { return a.start < b.start; });
    for (size_t i = 1; i < list.size(); ++i) {
      EXPECT_LE(list[i - 1].end, list[i].start)
          << "members " << list[i - 1].index << " and " << list[i].index << " overlap on " << host;
    }
  }

  // barge show ARRAY prints the same table; barge ls shows one line.
  CliOutcome show = job.Barge("show " + id[1].str());
  EXPECT_EQ(show.code, 0);
  EXPECT_NE(show.out.find("failed (2 attempts)"), std::string::npos) << show.out;
  CliOutcome ls = job.Barge("ls");
  EXPECT_NE(ls.out.find("array failed: succeeded 6, failed 1"), std::string::npos) << ls.out;
  EXPECT_EQ(ls.out.find("sweep-3"), std::string::npos) << ls.out;  // members are not listed one by one
  CliOutcome logs = job.Barge("logs " + id[1].str() + " --index 3");
  EXPECT_EQ(logs.code, 0) << logs.err;
  // Its lines, from both attempts (the first failed, the second succeeded).
  size_t hellos = 0;
  for (size_t at = logs.out.find("member 3 says hello"); at != std::string::npos;
       at = logs.out.find("member 3 says hello", at + 1)) {
    ++hellos;
  }
  EXPECT_GE(hellos, 1u) << logs.out;
  EXPECT_EQ(logs.out.find("member 2 says hello"), std::string::npos) << logs.out;

  // rerun --failed runs member 6 alone again (with its retry), and it
  // fails again; the others keep their outcome.
  CliOutcome rerun = job.Barge("rerun " + id[1].str() + " --failed");
  EXPECT_EQ(rerun.code, 125) << rerun.err;
  EXPECT_NE(rerun.err.find("running 1 member(s) of array " + id[1].str() + " again"), std::string::npos) << rerun.err;
  EXPECT_TRUE(std::regex_search(rerun.out, std::regex(R"(\n6 +\| [^|]+\| failed \(4 attempts\) +\| 5 )"))) << rerun.out;
  EXPECT_TRUE(std::regex_search(rerun.out, std::regex(R"(\n3 +\| [^|]+\| succeeded \(2 attempts\) \| 0 )"))) << rerun.out;

  // Nothing left on any host.
  for (const std::string& member : MemberJobs(job, id[1])) EXPECT_EQ(ContainersOf(member), "") << member;
}

TEST(ArrayBed, MembersWaitForAHostAnotherJobHoldsAllSucceedAndNoneRunsThereWhileItIsHeld) {
  // A colleague's job holds host 1 of the array's 2-host pool for 12 s
  // while a 4-member one-host-each array starts over the pool. Before arrays
  // waited, three of the four members failed at once with exit 125. The
  // member given host 1 waits, and moves to host 2 once the others are done
  // with it (while host 1 is still held).
  JobDir holder("array-wait-holder"), job("array-wait");
  SharedDir shared("wait");
  const auto& bed = GetBed();
  holder.Write("name: array-wait-holder\nimage: " + bed.image + "\n" + BedHostsYaml(0, 1) +
                   "stop_grace: 1s\ntimeout: 60s\ncontainer:\n  volumes: [\"" + shared.path() +
                   ":/shared\"]\ncommand: [\"sh\", \"-c\", \"sleep 12; read up _ < /proc/uptime; "
                   "echo $up > /shared/holder-end\"]\n",
               "holder.yaml");
  std::ofstream(job.path() / "params.csv") << "n\n1\n2\n3\n4\n";
  job.Write("name: array-wait\nimage: " + bed.image + "\n" + BedHostsYaml(0, 2) +
            "parallel: 2\nstop_grace: 1s\ntimeout: 60s\n"
            "container:\n  volumes: [\"" + shared.path() + ":/shared\"]\n"
            "command: [\"sh\", \"-c\", \"read up _ < /proc/uptime; "
            "echo START $BARGE_ARRAY_INDEX $MASTER_ADDR $up >> /shared/events; sleep 1\"]\n");
  pid_t h = holder.Start("run holder.yaml");
  ASSERT_TRUE(holder.WaitFor("err.txt", "node(s); logs in", std::chrono::seconds(60)));
  const std::string holder_id = barge::testing::JobIdIn(ReadWholeFile(holder.path() / "err.txt"));
  CliOutcome run = job.Barge("run job.yaml --array params.csv");
  SCOPED_TRACE(run.out + run.err);
  CliOutcome held = holder.Wait(h, std::chrono::seconds(60));
  EXPECT_EQ(held.code, 0) << held.err;
  EXPECT_EQ(run.code, 0);
  EXPECT_NE(run.err.find("waiting for " + bed.hosts[0].address + " (held by " + holder_id), std::string::npos);
  // The array's own line says which members wait, and for what.
  EXPECT_TRUE(std::regex_search(run.err, std::regex("barge: array [0-9a-f]+: waiting [1-4]: member [0-3] for [0-9.]+ "
                                                    "\\(held by " + holder_id)));
  EXPECT_NE(run.err.find("succeeded 4"), std::string::npos);
  std::smatch moved;
  EXPECT_TRUE(std::regex_search(run.err, moved, std::regex("barge: member ([0-3]) moves to free hosts of its pool \\(it "
                                                           "waited: for " + bed.hosts[0].address)));
  const int mover = moved.empty() ? -1 : std::stoi(moved[1]);
  const std::string moves = "barge: member " + std::to_string(mover) + " moves to";
  EXPECT_EQ(run.err.find(moves, run.err.find(moves) + 1), std::string::npos) << "it moved more than once";
  EXPECT_TRUE(std::regex_search(run.out, std::regex(R"(\n\d +\| n=\d +\| succeeded +\| 0 )")));
  EXPECT_EQ(run.out.find("attempts)"), std::string::npos) << "a busy host cost a member an attempt";
  // No member started on the held host before the holder ended.
  std::istringstream end_in(ReadWholeFile(fs::path(shared.path()) / "holder-end"));
  double holder_end = -1;
  end_in >> holder_end;
  ASSERT_GT(holder_end, 0);
  std::istringstream events(ReadWholeFile(fs::path(shared.path()) / "events"));
  int starts = 0, on_held = 0, mover_starts = 0;
  double mover_start = -1;
  for (std::string what, host; events >> what;) {
    int index;
    double t;
    events >> index >> host >> t;
    ++starts;
    if (host == bed.hosts[0].address) {
      ++on_held;
      EXPECT_GT(t, holder_end) << "member " << index << " ran on the held host while it was held";
    }
    // The member that moved ran once, on the free host, while the host it
    // had waited for was still held: it moved, not waited there.
    if (index == mover) {
      ++mover_starts;
      mover_start = t;
      EXPECT_EQ(host, bed.hosts[1].address) << "the member that moved ran on the host it had waited for";
      EXPECT_LT(t, holder_end) << "the member that moved ran only once the holder had ended";
    }
  }
  EXPECT_EQ(starts, 4);
  EXPECT_EQ(mover_starts, 1) << "member " << mover;
  std::printf("members on the held host once it was free: %d of 4; the member that moved started %.1f s before the "
              "holder ended\n%s\n", on_held, mover_start < 0 ? -1 : holder_end - mover_start, run.err.c_str());
  std::smatch id;
  ASSERT_TRUE(std::regex_search(run.err, id, std::regex(R"(array ([0-9a-f]+) \(array-wait\))")));
  for (const std::string& member : MemberJobs(job, id[1])) EXPECT_EQ(ContainersOf(member), "") << member;
  EXPECT_EQ(ContainersOf(holder_id), "");
}

// Issue #30: retries move off a failing host. Member 0 starts on host 1 of
// a 3-host pool (one member at a time); its host's dockerd is then frozen
// (SIGSTOP): the member's controller finds the host lost and fails, and its
// retry goes to another host. Member 1 then gets host 1 again (the lowest
// free one, after one failure only), fails its preflight there (the engine
// does not answer): two attempts in a row failed because of host 1, which is
// set aside, named at once and in the summary; member 1's retry runs
// elsewhere and the array succeeds.
TEST(ArrayBed, AMemberWhoseHostsEngineDiesIsRetriedElsewhereAndTheHostIsSetAsideAndNamed) {
  JobDir job("array-setaside");
  SharedDir shared("setaside");
  const auto& bed = GetBed();
  const int dockerd = [&] {
    std::ifstream in(bed.raw.at("BED_HOST_" + bed.hosts[0].name + "_DOCKERD_PIDFILE"));
    int pid = 0;
    in >> pid;
    return pid;
  }();
  ASSERT_GT(dockerd, 0);
  struct Thaw {
    int pid;
    ~Thaw() { kill(pid, SIGCONT); }
  } thaw{dockerd};
  std::ofstream(job.path() / "params.csv") << "n\n1\n2\n";
  // Member 0's first run sleeps (it is meant to be cut off); every other
  // run ends at once.
  job.Write("name: array-setaside\nimage: " + bed.image + "\n" +
            BedHostsYaml(0, 3, "  dead_after: 3s\n  engine_timeout: 2s\n  engine_misses: 2\n") +
            "parallel: 1\narray_retries: 2\nstop_grace: 1s\ntimeout: 120s\nlease: 5s\n"
            "container:\n  volumes: [\"" + shared.path() + ":/shared\"]\n"
            "command: [\"sh\", \"-c\", \"echo START $BARGE_ARRAY_INDEX $MASTER_ADDR >> /shared/events; "
            "if [ $BARGE_ARRAY_INDEX != 0 ] || [ -e /shared/tried-0 ]; then exit 0; fi; "
            "touch /shared/tried-0; sleep 300\"]\n");
  pid_t pid = job.Start("run job.yaml --array params.csv");
  const fs::path events = fs::path(shared.path()) / "events";
  const std::string first = "START 0 " + bed.hosts[0].address;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(90);
  while (ReadWholeFile(events).find(first) == std::string::npos && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  ASSERT_NE(ReadWholeFile(events).find(first), std::string::npos) << ReadWholeFile(events);
  ASSERT_EQ(kill(dockerd, SIGSTOP), 0);
  CliOutcome run = job.Wait(pid, std::chrono::seconds(150));
  SCOPED_TRACE(run.out + run.err);
  EXPECT_EQ(run.code, 0);
  EXPECT_NE(run.err.find("barge: " + bed.hosts[0].address +
                         " is set aside for the rest of the array: two attempts in a row failed because of it"),
            std::string::npos);
  EXPECT_NE(run.out.find("set aside: " + bed.hosts[0].address + ": "), std::string::npos);
  EXPECT_NE(run.err.find("succeeded 2"), std::string::npos);
  // Each member ran once more, not on the frozen host: two starts there
  // (member 0's first, and none of member 1's, which failed in preflight).
  std::istringstream in(ReadWholeFile(events));
  std::map<int, std::vector<std::string>> starts;
  for (std::string what, host; in >> what;) {
    int index = -1;
    in >> index >> host;
    starts[index].push_back(host);
  }
  ASSERT_EQ(starts[0].size(), 2u) << ReadWholeFile(events);
  EXPECT_EQ(starts[0][0], bed.hosts[0].address);
  EXPECT_NE(starts[0][1], bed.hosts[0].address) << "member 0's retry ran on the host that failed it";
  ASSERT_EQ(starts[1].size(), 1u) << ReadWholeFile(events);
  EXPECT_NE(starts[1][0], bed.hosts[0].address);
  kill(dockerd, SIGCONT);
  // What the frozen engine kept of member 0's first attempt goes with its
  // watchdog (lease 5 s) once the engine answers again; nothing else is left.
  auto left = [&] {
    std::string all;
    for (const BedHost& h : bed.hosts) all += OnHost(h, "docker ps -aq --filter name=barge-array-setaside-");
    return all;
  };
  const auto gone = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (left() != "" && std::chrono::steady_clock::now() < gone) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  EXPECT_EQ(left(), "");
}

TEST(ArrayBed, DownOfARunningArrayCancelsItsMembersAndLeavesNothingOnAnyHost) {
  JobDir job("array-down");
  job.Write("name: long\n"
            "image: " + GetBed().image + "\n" + BedHostsYaml(0, 3) +
            "array:\n  matrix: {n: [1, 2, 3, 4]}\n"
            "parallel: 2\n"
            "stop_grace: 1s\n"
            "timeout: 90s\n"
            "command: sleep 60\n");
  CliOutcome run = job.Barge("run -d job.yaml");
  ASSERT_EQ(run.code, 0) << run.err;
  const std::string array = run.out.substr(0, run.out.find('\n'));
  ASSERT_FALSE(array.empty());
  // Two members running, with a container each.
  std::vector<std::string> members;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline) {
    members = MemberJobs(job, array);
    int with_container = 0;
    for (const std::string& m : members) with_container += ContainersOf(m).empty() ? 0 : 1;
    if (with_container == 2) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  ASSERT_EQ(members.size(), 2u) << job.Barge("ls " + array).out;
  CliOutcome ls = job.Barge("ls");
  EXPECT_NE(ls.out.find("array running: running 2, waiting 2"), std::string::npos) << ls.out;

  CliOutcome down = job.Barge("down " + array);
  EXPECT_EQ(down.code, 0) << down.out << down.err;
  EXPECT_NE(down.out.find("cancelled 4"), std::string::npos) << down.out;
  for (const std::string& m : members) EXPECT_EQ(ContainersOf(m), "") << m;
  CliOutcome show = job.Barge("show " + array);
  EXPECT_NE(show.out.find(": cancelled,"), std::string::npos) << show.out;
}

// What a user gets when the array controller dies (SIGKILL to the `barge
// run` process, which leaves it no time to act): each member is a barge
// process of its own, in its own process group, so the running members go
// on and finish as single jobs do, tearing their containers down; their job
// records stay correct; `barge ls` shows the array lost and `barge ls
// ARRAY` its members, with each member's outcome once its job ended (the
// members that had not started stay waiting); `barge down ARRAY` stops the
// members still running and cancels the waiting ones; `barge rm ARRAY` then
// removes everything.
//
// Its first run on the bed (2026-11-24 16:26) failed: member 0 ended, but
// its job showed `lost`, and `barge down ARRAY` hung. The members were
// forked while the array controller held the store open, and SQLite's
// per-process state (the WAL index mapping and its lock bookkeeping)
// crossed the fork: a member held no lock of its own on the WAL index, so
// once the array controller died the next `barge ls` reset it and the
// member's later writes (its job's outcome) were lost; `down` then waited
// for an outcome that never came. Fixed in array_runner.cc (no store open
// across a fork), and `down` is bounded (main.cc Down, DownArray).
TEST(ArrayBed, AKilledArrayControllerLeavesRunningMembersToFinishAndDownStopsTheRest) {
  JobDir job("array-killed");
  job.Write("name: orphans\n"
            "image: " + GetBed().image + "\n" + BedHostsYaml(0, 2) +
            "array:\n  matrix: {secs: [40, 300, 1]}\n"
            "parallel: 2\n"
            "stop_grace: 1s\n"
            "timeout: 600s\n"
            "command: [sleep, \"{array.secs}\"]\n");
  const pid_t controller = job.Start("run job.yaml", /*own_group=*/true);
  ASSERT_TRUE(job.WaitFor("err.txt", "(orphans):")) << ReadWholeFile(job.path() / "err.txt");
  std::smatch id;
  const std::string err = ReadWholeFile(job.path() / "err.txt");
  ASSERT_TRUE(std::regex_search(err, id, std::regex(R"(array ([0-9a-f]+) \(orphans\))"))) << err;
  const std::string array = id[1];
  // Whatever fails below, the members are downed and the records removed.
  struct Cleanup {
    const JobDir& job;
    std::string array;
    ~Cleanup() {
      job.Barge("down " + array);
      job.Barge("rm " + array);
    }
  } cleanup{job, array};
  // Two members running, a container each.
  std::vector<std::string> members;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline) {
    members = MemberJobs(job, array);
    int with_container = 0;
    for (const std::string& m : members) with_container += ContainersOf(m).empty() ? 0 : 1;
    if (members.size() == 2 && with_container == 2) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
  ASSERT_EQ(members.size(), 2u) << job.Barge("ls " + array).out;
  ASSERT_FALSE(ContainersOf(members[0]).empty());
  ASSERT_FALSE(ContainersOf(members[1]).empty());

  kill(controller, SIGKILL);
  CliOutcome killed = job.Wait(controller, std::chrono::seconds(10));
  EXPECT_NE(killed.code, 0);

  // The array is lost, its two members still run as their own jobs.
  CliOutcome ls = job.Barge("ls");
  EXPECT_NE(ls.out.find("array lost: running 2, waiting 1"), std::string::npos) << ls.out;
  for (const std::string& m : members) {
    CliOutcome show = job.Barge("show " + m);
    EXPECT_NE(show.out.find("status:     running"), std::string::npos) << show.out;
  }

  // Member 0 (40 s) ends by itself: its job succeeds and its containers go.
  deadline = std::chrono::steady_clock::now() + std::chrono::seconds(150);
  std::string shown;
  while (std::chrono::steady_clock::now() < deadline) {
    shown = job.Barge("show " + members[0]).out;
    if (shown.find("status:     succeeded, exit code 0") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  EXPECT_NE(shown.find("status:     succeeded, exit code 0"), std::string::npos) << shown;
  EXPECT_EQ(ContainersOf(members[0]), "");
  CliOutcome list = job.Barge("ls " + array);
  EXPECT_TRUE(std::regex_search(list.out, std::regex("\n0 +\\| " + members[0] + R"( +\| secs=40 +\| succeeded +\| 1 +\| 0 )")))
      << list.out;
  EXPECT_TRUE(std::regex_search(list.out, std::regex("\n1 +\\| " + members[1] + R"( +\| secs=300 +\| running )")))
      << list.out;
  EXPECT_TRUE(std::regex_search(list.out, std::regex(R"(\n2 +\| - +\| secs=1 +\| waiting )"))) << list.out;
  EXPECT_FALSE(ContainersOf(members[1]).empty());

  // rm refuses while member 1 runs, naming it.
  CliOutcome refused = job.Barge("rm " + array);
  EXPECT_EQ(refused.code, 125);
  EXPECT_NE(refused.err.find("member 1 (job " + members[1] + ") is running"), std::string::npos) << refused.err;

  // down ARRAY stops member 1 and leaves nothing on any host.
  CliOutcome down = job.Barge("down " + array);
  EXPECT_EQ(down.code, 0) << down.out << down.err;
  EXPECT_EQ(ContainersOf(members[1]), "");
  EXPECT_TRUE(barge::testing::WaitForNoWatchdog(members[1], std::chrono::seconds(30)));
  CliOutcome after = job.Barge("ls " + array);
  EXPECT_TRUE(std::regex_search(after.out, std::regex("\n1 +\\| " + members[1] + R"( +\| secs=300 +\| cancelled )")))
      << after.out;

  // rm ARRAY removes the array and its two member jobs.
  CliOutcome rm = job.Barge("rm " + array);
  EXPECT_EQ(rm.code, 0) << rm.err;
  EXPECT_NE(rm.out.find("removed array " + array + " (orphans, lost) and its 2 member job(s)"), std::string::npos)
      << rm.out;
  EXPECT_EQ(job.Barge("show " + members[0]).code, 125);
  EXPECT_EQ(job.Barge("ls --json").out.find(array), std::string::npos);
}

}  // namespace
