// Mpi on its own (mpi.h): given the job's context, its hosts, the plan, the
// facts it is made from and the Transfers part it writes the files with, on
// scripted fake hosts (tests/support/part_world.h). Node 0 (the head) is on
// h1, node 1 (a worker) on h2. A fake host answers every image check with
// success and no uid (barge then takes the image's user for root) and lists
// no listening port, unless a test scripts it.
#include "runner/controller/mpi.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <regex>
#include <string>
#include <vector>

#include "runner/controller/job_state.h"
#include "runner/controller/transfers.h"
#include "tests/support/part_world.h"

namespace barge::runner {
namespace mpi_test {

using std::chrono::milliseconds;

struct MpiWorld {
  explicit MpiWorld(const std::string& extra = "container: {network: host}\nmpi: {}\n",
                    const std::string& hosts = "[h1, h2]")
      : world(PartWorld::Yaml(extra, hosts)),
        transfers(&world.ctx()),
        mpi(&world.ctx(), &world.hosts(), &world.planner(), &transfers) {}
  int Count(const std::string& host, const std::string& part) {
    const std::vector<std::string>& lines = world.host(host).lines();
    return static_cast<int>(std::count_if(lines.begin(), lines.end(), [&](const std::string& l) {
      return l.find(part) != std::string::npos;
    }));
  }
  // Lines of `host` that `pattern` (ECMAScript) matches a part of.
  int CountRe(const std::string& host, const std::string& pattern) {
    const std::regex re(pattern);
    const std::vector<std::string>& lines = world.host(host).lines();
    return static_cast<int>(std::count_if(lines.begin(), lines.end(), [&](const std::string& l) {
      return std::regex_search(l, re);
    }));
  }
  std::string Lines(const std::string& host) {
    std::string out;
    for (const std::string& l : world.host(host).lines()) out += l + "\n";
    return out;
  }
  // The regex of host `index`'s job directory, as drawn at Connect.
  std::string Dir(size_t index) { return std::regex_replace(world.host_state(index).job_dir, std::regex(R"([.])"), R"(\.)"); }

  PartWorld world;
  internal::Transfers transfers;
  internal::Mpi mpi;
};

// The images' uid on every host: the head's image check (`id -u` alone)
// and the workers' (sshd first) both answer `uid`.
void ImagesRunAs(MpiWorld& w, const std::string& uid, const std::vector<std::string>& hosts = {"h1", "h2"}) {
  for (const std::string& h : hosts) w.world.host(h).On("id -u", FakeReply{0, uid + "\n"});
}

TEST(Mpi, AJobWithoutMpiIsNeitherCheckedNorSentAnyFile) {
  MpiWorld w("");
  ASSERT_TRUE(w.world.Connect());
  EXPECT_TRUE(w.mpi.MpiPreflight(w.world.hosts().All()).ok());
  EXPECT_TRUE(w.mpi.ShipMpiFiles(w.world.hosts().All()).ok());
  EXPECT_TRUE(w.world.fake().all_lines().empty());
  EXPECT_TRUE(w.world.recorder().messages.empty()) << w.world.recorder().AllMessages();
}

TEST(Mpi, AWorkersImageIsCheckedForSshdAndItsPortAndTheHeadsImageOnlyForItsUser) {
  MpiWorld w;
  ASSERT_TRUE(w.world.Connect());
  Status s = w.mpi.MpiPreflight(w.world.hosts().All());
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(w.Count("h2", "--network none --entrypoint /bin/sh img -c '\\''test -x /usr/sbin/sshd || exit 1; id -u'\\''"), 1)
      << w.Lines("h2");
  EXPECT_EQ(w.Count("h2", "cat /proc/net/tcp /proc/net/tcp6"), 1);
  EXPECT_EQ(w.Count("h1", "--network none --entrypoint /bin/sh img -c '\\''id -u'\\''"), 1) << w.Lines("h1");
  EXPECT_EQ(w.Count("h1", "test -x"), 0) << "the head runs no sshd";
  EXPECT_EQ(w.Count("h1", "/proc/net/tcp"), 0) << "the head's host has no sshd port to check";
  EXPECT_EQ(w.world.host("h1").lines().size(), 1u);
}

TEST(Mpi, AWorkerImageWithoutSshdIsAProblemThatNamesTheOpensshServerPackage) {
  MpiWorld w("container: {network: host}\nmpi: {}\n", "[h1, h2, h3]");
  ASSERT_TRUE(w.world.Connect());
  w.world.host("h3").On("test -x /usr/sbin/sshd", FakeReply{1});
  Status s = w.mpi.MpiPreflight(w.world.hosts().All());
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(),
            "preflight failed on 1 of 3 host(s); nothing was started:\n"
            "  HOST  PROBLEM\n"
            "  h3    image img has no /usr/sbin/sshd, which every worker of an MPI job runs "
            "(install the openssh-server package in the image)");
}

TEST(Mpi, AnImageCheckThatFailsForAnotherReasonSaysTheCheckCouldNotBeMade) {
  MpiWorld w;
  ASSERT_TRUE(w.world.Connect());
  w.world.host("h2").On("test -x /usr/sbin/sshd", FakeReply{126, "", "/bin/sh: not found\n"});
  w.world.host("h1").On("id -u", FakeReply{126, "", "/bin/sh: not found\n"});  // the head's: not a problem
  Status s = w.mpi.MpiPreflight(w.world.hosts().All());
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("preflight failed on 1 of 2 host(s)"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("\n  h2    cannot check that image img has /usr/sbin/sshd (an MPI worker runs it with "
                             "/bin/sh): "),
            std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("/bin/sh: not found"), std::string::npos) << s.message();
  EXPECT_EQ(s.message().find("has no /usr/sbin/sshd"), std::string::npos) << s.message();
}

TEST(Mpi, AWorkersSshdPortAlreadyInUseOnItsHostIsAProblem) {
  MpiWorld w;
  ASSERT_TRUE(w.world.Connect());
  // 2222 = 0x08AE, listening (0A); 29500 is another's, not the worker's.
  const std::string tables = "  sl  local_address rem_address   st\n"
                             "   0: 00000000:08AE 00000000:0000 0A 0 0\n"
                             "   1: 00000000:733C 00000000:0000 0A 0 0\n";
  w.world.host("h2").On("cat /proc/net/tcp", FakeReply{0, tables});
  Status s = w.mpi.MpiPreflight(w.world.hosts().All());
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(),
            "preflight failed on 1 of 2 host(s); nothing was started:\n"
            "  HOST  PROBLEM\n"
            "  h2    port 2222 for node 1's sshd is already in use on this host (mpi.port)");
}

TEST(Mpi, ANonRootWorkersSshdCannotListenBelowPort1024ButARootOneCan) {
  MpiWorld w("container: {network: host}\nmpi: {port: 222}\n");
  ASSERT_TRUE(w.world.Connect());
  ImagesRunAs(w, "1000");
  Status s = w.mpi.MpiPreflight(w.world.hosts().All());
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(),
            "preflight failed on 1 of 2 host(s); nothing was started:\n"
            "  HOST  PROBLEM\n"
            "  h2    node 1's image img runs as uid 1000, whose sshd cannot listen on port 222 (below 1024): "
            "set mpi.port to 1024 or above");

  MpiWorld root("container: {network: host}\nmpi: {port: 222}\n");
  ASSERT_TRUE(root.world.Connect());
  ImagesRunAs(root, "0");
  Status r = root.mpi.MpiPreflight(root.world.hosts().All());
  EXPECT_TRUE(r.ok()) << r.message();
}

TEST(Mpi, EachNodesFilesGoToItsOwnHostThroughStdinNeverOnACommandLine) {
  MpiWorld w;
  ASSERT_TRUE(w.world.Connect());
  ASSERT_TRUE(w.mpi.MpiPreflight(w.world.hosts().All()).ok());
  Status s = w.mpi.ShipMpiFiles(w.world.hosts().All());
  ASSERT_TRUE(s.ok()) << s.message();
  // The head: its client key, .pub, known_hosts, ssh_config and hostfile.
  for (const char* f : {"id_ed25519", "id_ed25519.pub", "known_hosts", "ssh_config", "hostfile"}) {
    EXPECT_EQ(w.CountRe("h1", "umask 077 .*cat > " + w.Dir(0) + "/mpi/0/" + f + "$"), 1) << f;
  }
  // The worker: its host key, .pub and authorized_keys.
  for (const char* f : {"ssh_host_ed25519_key", "ssh_host_ed25519_key.pub", "authorized_keys"}) {
    EXPECT_EQ(w.CountRe("h2", "umask 077 .*cat > " + w.Dir(1) + "/mpi/1/" + f + "$"), 1) << f;
  }
  EXPECT_EQ(w.Count("h1", "cat > "), 5);
  EXPECT_EQ(w.Count("h2", "cat > "), 3);
  EXPECT_EQ(w.Count("h1", "/mpi/1/"), 0) << "node 1's files go only to its own host";
  for (const std::string& line : w.world.fake().all_lines()) {
    EXPECT_EQ(line.find("PRIVATE KEY"), std::string::npos) << line;
    EXPECT_EQ(line.find("AAAAC3NzaC1lZDI1NTE5"), std::string::npos) << line;
    EXPECT_EQ(line.find("chmod"), std::string::npos) << "an image that runs as root: mode 0600 stays";
  }
  EXPECT_TRUE(w.world.recorder().Said("MPI: a client key and 1 host key(s) made for this job; 8 file(s) written "
                                      "(/tmp/barge-abcd1234.XXXXXXXXXXXX/mpi/RANK, mode 0600, mounted read-only at "
                                      "/run/barge)"))
      << w.world.recorder().AllMessages();
  EXPECT_FALSE(w.world.recorder().Said("non-root")) << w.world.recorder().AllMessages();
}

TEST(Mpi, ANonRootImagesNodeDirectoriesAreMadeReadableWhileTheirParentStays0700) {
  MpiWorld w;
  ASSERT_TRUE(w.world.Connect());
  ImagesRunAs(w, "1000");
  ASSERT_TRUE(w.mpi.MpiPreflight(w.world.hosts().All()).ok());
  Status s = w.mpi.ShipMpiFiles(w.world.hosts().All());
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(w.CountRe("h1", "^chmod 0755 " + w.Dir(0) + "/mpi/0 && chmod 0644 " + w.Dir(0) + "/mpi/0/\\*$"), 1);
  EXPECT_EQ(w.CountRe("h2", "^chmod 0755 " + w.Dir(1) + "/mpi/1 && chmod 0644 " + w.Dir(1) + "/mpi/1/\\*$"), 1);
  EXPECT_EQ(w.CountRe("h2", "chmod 0755 " + w.Dir(1) + "/mpi( |$)"), 0) << "the parent stays 0700";
  // The modes change only once the files are there.
  const std::vector<std::string>& lines = w.world.host("h2").lines();
  EXPECT_NE(lines.back().find("chmod 0755"), std::string::npos) << lines.back();
  EXPECT_TRUE(w.world.recorder().Said("; 2 node(s) whose image runs as a non-root user get them mode 0644 in a 0755 "
                                      "directory (/tmp/barge-abcd1234.XXXXXXXXXXXX/mpi stays 0700)"))
      << w.world.recorder().AllMessages();
}

TEST(Mpi, HostsThatDisagreeOnAnImagesUserGetTheModesANonRootUserCanRead) {
  MpiWorld w;
  ASSERT_TRUE(w.world.Connect());
  // The same tag, other images: root on h1 (answering last), uid 1000 on h2.
  w.world.host("h1").On("id -u", FakeReply{0, "0\n", "", milliseconds(500)});
  w.world.host("h2").On("id -u", FakeReply{0, "1000\n"});
  ASSERT_TRUE(w.mpi.MpiPreflight(w.world.hosts().All()).ok());
  Status s = w.mpi.ShipMpiFiles(w.world.hosts().All());
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(w.Count("h1", "chmod 0755 "), 1);
  EXPECT_EQ(w.Count("h2", "chmod 0755 "), 1);
}

TEST(Mpi, FilesThatCannotBeMadeReadableFailTheShipNamingTheHostAndWhy) {
  MpiWorld w;
  ASSERT_TRUE(w.world.Connect());
  ImagesRunAs(w, "1000");
  w.world.host("h2").On("chmod 0755", FakeReply{1, "", "chmod: changing permissions: Operation not permitted\n"});
  ASSERT_TRUE(w.mpi.MpiPreflight(w.world.hosts().All()).ok());
  Status s = w.mpi.ShipMpiFiles(w.world.hosts().All());
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message().rfind("making the MPI files readable by the image's user failed:\n  h2: ", 0), 0u)
      << s.message();
  EXPECT_NE(s.message().find("Operation not permitted"), std::string::npos) << s.message();
  EXPECT_EQ(s.message().find("h1"), std::string::npos) << s.message();
}

}  // namespace mpi_test
}  // namespace barge::runner
