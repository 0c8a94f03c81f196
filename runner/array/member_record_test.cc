// A member job's record (member_record.h) against a real store in a
// temporary state directory: written as the array controller writes it,
// read back as `barge down`, `exec` and `attach` read it.
#include "runner/array/member_record.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>

#include "runner/jobfile/job_file.h"
#include "runner/store/array_store.h"
#include "runner/store/job_store.h"

namespace barge::runner::array {
namespace {

namespace fs = std::filesystem;

class MemberRecordTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/barge-member-record-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    state_ = dir_ + "/state";
    // The array's job: its own hosts, and group b (from a hosts file) with
    // a jump host and a port of its own.
    std::ofstream(fs::path(dir_) / "b.yaml") << "- 10.0.2.1\n- 10.0.2.2\n";
    request_.file = dir_ + "/job.yaml";
    request_.text =
        "name: grouped\nimage: busybox\ncommand: [sleep, '60']\n"
        "ssh: {user: alice, connect_timeout: 3s}\n"
        "hosts: [10.0.0.1, 10.0.0.2]\n"
        "host_groups:\n"
        "  b:\n"
        "    hosts_file: b.yaml\n"
        "    ssh: {proxy_jump: 'bob@10.0.9.9:2222', port: 2200}\n";
    params_.source = "params.csv";
    params_.columns = {"seed", "host_group"};
    params_.rows = {{"1", ""}, {"2", "b"}};
  }
  void TearDown() override { fs::remove_all(dir_); }

  // The job as `barge run` loads it; `request_` then holds the hosts files
  // as read, as Run records them.
  LoadedJob Load(const RunRequest& request) {
    JobLayers layers;
    layers.hosts_file = request.hosts_file;
    layers.group_hosts_files = request.group_hosts_files;
    return ParseJobText(request.text, request.file, dir_, SecretValues::kSkip, layers);
  }

  // Records the array (its rows and run request) as `barge run` does.
  void RecordArray() {
    LoadedJob loaded = Load(request_);
    for (const JobFileError& e : loaded.errors) ADD_FAILURE() << e.ToString();
    request_.group_hosts_files = loaded.group_hosts_files;
    Result<std::unique_ptr<JobStore>> jobs = JobStore::Open(state_);
    ASSERT_TRUE(jobs.ok()) << jobs.status().message();
    ASSERT_TRUE((*jobs)->SetRunRequest("a1", RunRequestToJson(request_)).ok());
    Result<std::unique_ptr<ArrayStore>> arrays = ArrayStore::Open(state_);
    ASSERT_TRUE(arrays.ok()) << arrays.status().message();
    ArrayRecord a;
    a.id = "a1";
    a.name = "grouped";
    a.size = 2;
    a.params_json = ParamsToJson(params_);
    a.created = WallNow();
    std::vector<MemberRecord> members(2);
    members[1].index = 1;
    ASSERT_TRUE((*arrays)->CreateArray(a, members).ok());
  }

  // Member job `job`'s spec as RecordedSpec (runner/cli) makes it.
  Result<JobSpec> ReadBack(const std::string& job) {
    Result<std::unique_ptr<JobStore>> jobs = JobStore::Open(state_);
    if (!jobs.ok()) return jobs.status();
    Result<std::optional<std::string>> json = (*jobs)->GetRunRequest(job);
    if (!json.ok()) return json.status();
    if (!*json) return Status::Error("no run request");
    Result<RunRequest> request = RunRequestFromJson(**json);
    if (!request.ok()) return request.status();
    if (!request->member) return Status::Error("no member");
    LoadedJob loaded = Load(*request);
    if (!loaded.spec) return Status::Error(loaded.errors.at(0).ToString());
    return RecordedMemberSpec(state_, *loaded.spec, *request->member);
  }

  std::string dir_, state_;
  RunRequest request_;
  ArrayParams params_;
};

TEST_F(MemberRecordTest, AGroupMemberIsReadBackOnItsOwnHostWithItsGroupsSshAndNotTheJobs) {
  RecordArray();
  ASSERT_TRUE(RecordMemberRun(state_, "a1", 1, {1}, "m1").ok());
  Result<JobSpec> member = ReadBack("m1");
  ASSERT_TRUE(member.ok()) << member.status().message();
  ASSERT_EQ(member->hosts.size(), 1u);
  EXPECT_EQ(member->hosts[0].address, "10.0.2.2");
  EXPECT_EQ(member->ssh.proxy_jump, (std::vector<std::string>{"bob@10.0.9.9:2222"}));
  EXPECT_EQ(member->ssh.port, 2200);
  EXPECT_EQ(member->ssh.user, "alice");  // the job's, under the group's
  EXPECT_TRUE(member->host_groups.empty());
  EXPECT_EQ(member->name, "grouped-1");
}

TEST_F(MemberRecordTest, TheGroupsHostsFileIsTheOneReadWhenTheMemberStartedNotTheOneOnDiskNow) {
  RecordArray();
  ASSERT_TRUE(RecordMemberRun(state_, "a1", 1, {0}, "m1").ok());
  std::ofstream(fs::path(dir_) / "b.yaml") << "- 10.0.3.1\n";
  Result<JobSpec> member = ReadBack("m1");
  ASSERT_TRUE(member.ok()) << member.status().message();
  ASSERT_EQ(member->hosts.size(), 1u);
  EXPECT_EQ(member->hosts[0].address, "10.0.2.1");
  fs::remove(fs::path(dir_) / "b.yaml");
  member = ReadBack("m1");
  ASSERT_TRUE(member.ok()) << member.status().message();
  EXPECT_EQ(member->hosts[0].address, "10.0.2.1");
}

TEST_F(MemberRecordTest, AMemberOfTheJobsOwnHostsGetsTheHostItTookAndTheJobsSsh) {
  RecordArray();
  ASSERT_TRUE(RecordMemberRun(state_, "a1", 0, {1}, "m0").ok());
  Result<JobSpec> member = ReadBack("m0");
  ASSERT_TRUE(member.ok()) << member.status().message();
  ASSERT_EQ(member->hosts.size(), 1u);
  EXPECT_EQ(member->hosts[0].address, "10.0.0.2");
  EXPECT_TRUE(member->ssh.proxy_jump.empty());
  EXPECT_EQ(member->ssh.port, std::nullopt);
  EXPECT_EQ(member->name, "grouped-0");
}

TEST_F(MemberRecordTest, TheMembersRequestKeepsTheArraysFileOverridesAndHostsFiles) {
  request_.overrides.push_back(Override{Override::Kind::kName, "", "renamed"});
  RecordArray();
  ASSERT_TRUE(RecordMemberRun(state_, "a1", 1, {1}, "m1").ok());
  Result<std::unique_ptr<JobStore>> jobs = JobStore::Open(state_);
  ASSERT_TRUE(jobs.ok());
  Result<std::optional<std::string>> json = (*jobs)->GetRunRequest("m1");
  ASSERT_TRUE(json.ok() && *json);
  Result<RunRequest> back = RunRequestFromJson(**json);
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->file, request_.file);
  EXPECT_EQ(back->text, request_.text);
  ASSERT_EQ(back->overrides.size(), 1u);
  EXPECT_EQ(back->overrides[0].Argument(), "renamed");
  ASSERT_EQ(back->group_hosts_files.size(), 1u);
  EXPECT_EQ(back->group_hosts_files[0].path, dir_ + "/b.yaml");
  EXPECT_EQ(back->group_hosts_files[0].text, "- 10.0.2.1\n- 10.0.2.2\n");
  ASSERT_TRUE(back->member);
  EXPECT_EQ(back->member->array_id, "a1");
  EXPECT_EQ(back->member->index, 1);
  EXPECT_EQ(back->member->hosts, (std::vector<size_t>{1}));
}

TEST_F(MemberRecordTest, NoRecordWithoutTheArraysRunRequest) {
  Status s = RecordMemberRun(state_, "nosuch", 0, {0}, "m0");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "array nosuch has no recorded run request");
}

TEST_F(MemberRecordTest, ARecordedHostOutsideThePoolOrARowThatIsGoneIsAnError) {
  LoadedJob loaded = Load(request_);
  ASSERT_TRUE(loaded.spec);
  Result<JobSpec> far = MemberSpecFromRecord(*loaded.spec, params_, {"a1", 1, {2}});
  ASSERT_FALSE(far.ok());
  EXPECT_EQ(far.status().message(), "member 1 of array a1: its recorded host 2 is not one of the 2 of host group b");
  Result<JobSpec> gone = MemberSpecFromRecord(*loaded.spec, params_, {"a1", 5, {0}});
  ASSERT_FALSE(gone.ok());
  EXPECT_EQ(gone.status().message(), "member 5 of array a1: the array's recorded rows have no row 5");
}

}  // namespace
}  // namespace barge::runner::array
