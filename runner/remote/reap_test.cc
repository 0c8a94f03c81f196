#include "runner/remote/reap.h"

#include <gtest/gtest.h>

#include <set>

#include "runner/remote/reservation.h"

namespace barge::runner {
namespace {

container::PsEntry Entry(std::string id, std::string name, std::string job, std::string status) {
  container::PsEntry e;
  e.id = std::move(id);
  e.names = std::move(name);
  e.status = std::move(status);
  e.labels = {{"barge.job", std::move(job)}};
  return e;
}

container::PsEntry Lease(std::string id, const std::string& job, long long renewed, long long lease) {
  container::PsEntry e = Entry(std::move(id), LeaseName(job, renewed), job, "Created");
  e.labels["barge.hold"] = "lease";
  e.labels["barge.hold.lease"] = std::to_string(lease);
  e.labels["barge.hold.user"] = "alice";
  e.labels["barge.hold.machine"] = "box";
  return e;
}

std::set<std::string> Kept(const std::vector<ReapChoice>& choices) {
  std::set<std::string> out;
  for (const ReapChoice& c : choices) {
    if (c.keep) out.insert(c.id);
  }
  return out;
}

const auto kNoneLocal = [](const std::string&) { return false; };

TEST(ChooseReaped, AnotherStoresJobWithALiveLeaseIsKeptWithWhoAndWhenItWasRenewed) {
  const long long now = 10000;
  std::vector<container::PsEntry> listed = {
      Entry("c1", "barge-train-colleague-0", "19794d42", "Up 2 minutes"),
      Entry("h1", "barge-hold-host", "19794d42", "Created"),
      Lease("l1", "19794d42", now - 3, 600),
  };
  std::vector<ReapChoice> c = ChooseReaped(listed, now, kNoneLocal);
  ASSERT_EQ(c.size(), 3u);
  EXPECT_EQ(Kept(c), (std::set<std::string>{"c1", "h1", "l1"}));
  EXPECT_EQ(c[0].why, "job 19794d42, alice@box, lease renewed 3s ago");
}

TEST(ChooseReaped, AJobWhoseLeaseLapsedPastItsGraceGoesWithItsLease) {
  const long long now = 10000;
  // Lease 600 s, grace 60 s: live up to renewed + 660.
  std::vector<container::PsEntry> listed = {
      Entry("c1", "barge-a-0", "aaaa0000", "Up 1 hour"),
      Lease("l1", "aaaa0000", now - 660, 600),
      Entry("c2", "barge-b-0", "bbbb0000", "Up 1 hour"),
      Lease("l2", "bbbb0000", now - 661, 600),
  };
  std::vector<ReapChoice> c = ChooseReaped(listed, now, kNoneLocal);
  EXPECT_EQ(Kept(c), (std::set<std::string>{"c1", "l1"}));
  EXPECT_EQ(c[2].why, "job bbbb0000, Up 1 hour, lease lapsed 1m01s ago");
}

TEST(ChooseReaped, AJobWithNoLeaseIsAnOrphanUnlessItIsLiveInThisStore) {
  std::vector<container::PsEntry> listed = {
      Entry("c1", "barge-orphan-test", "0rphan00", "Exited (0) 2 minutes ago"),
      Entry("c2", "barge-mine-0", "m1ne0000", "Up 5 seconds"),
      Entry("c3", "barge-nolabel", "", "Up 5 seconds"),
  };
  std::vector<ReapChoice> c =
      ChooseReaped(listed, 10000, [](const std::string& job) { return job == "m1ne0000"; });
  EXPECT_EQ(Kept(c), std::set<std::string>{"c2"});
  EXPECT_EQ(c[0].why, "job 0rphan00, Exited (0) 2 minutes ago");
  EXPECT_EQ(c[1].why, "job m1ne0000, running from this store");
}

TEST(ChooseReaped, OnlyALeaseContainerCountsAsALeaseNotANameThatLooksLikeOne) {
  // A container named like a lease but without the lease label (say, a
  // user's) keeps no job alive.
  container::PsEntry fake = Entry("f1", LeaseName("cccc0000", 10000), "cccc0000", "Created");
  fake.labels["barge.hold.lease"] = "600";
  std::vector<container::PsEntry> listed = {Entry("c1", "barge-c-0", "cccc0000", "Up"), fake};
  EXPECT_TRUE(Kept(ChooseReaped(listed, 10000, kNoneLocal)).empty());
}

TEST(ParseReapListing, ReadsTheHostsClockThenItsContainersAndRefusesAMissingClock) {
  Result<ReapListing> l = ParseReapListing(
      "1764201600\n{\"ID\":\"abc\",\"Names\":\"barge-x-0\",\"State\":\"running\",\"Labels\":\"barge.job=j1\"}\n");
  ASSERT_TRUE(l.ok()) << l.status().message();
  EXPECT_EQ(l->now, 1764201600);
  ASSERT_EQ(l->entries.size(), 1u);
  EXPECT_EQ(l->entries[0].labels.at("barge.job"), "j1");
  EXPECT_TRUE(ParseReapListing("1764201600\n").ok());
  EXPECT_FALSE(ParseReapListing("{\"ID\":\"abc\"}\n").ok());
}

}  // namespace
}  // namespace barge::runner
