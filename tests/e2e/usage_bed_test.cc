// The accounting on the test bed (runner/store/usage.h, `barge usage`): a
// job given every GPU of a bed host (the engine's GPU stand-in with two,
// the stand-in driver replaying a real H100's answers) holds the host and
// its GPUs for as long as its head ran at least and `barge run` took at
// most, and `barge usage`, `ls` and `show` say so.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>

#include "tests/support/bed_job.h"
#include "tests/support/gpu_standin.h"

using barge::testing::CliOutcome;
using barge::testing::GetBed;
using barge::testing::JobDir;
using barge::testing::RunShell;

namespace {

// A stand-in nvidia-smi on the hosts that lists `gpus` H100s.
std::string StandinDriver(int gpus) {
  const auto& bed = GetBed();
  const std::filesystem::path base = std::filesystem::path(bed.dir) / "usage-gpus";
  std::filesystem::remove_all(base);
  std::filesystem::create_directories(base);
  int code = -1;
  RunShell("cp -r " + std::string(BARGE_SOURCE_DIR) + "/tests/data/nvidia-smi " + (base / "nvidia-smi").string(), &code);
  EXPECT_EQ(code, 0);
  const std::filesystem::path smi = base / "smi";
  std::ofstream(smi) << "#!/bin/sh\nSTANDIN_GPUS=" << gpus << " exec " << (base / "nvidia-smi" / "standin.sh").string()
                     << " \"$@\"\n";
  std::filesystem::permissions(smi, std::filesystem::perms::owner_all | std::filesystem::perms::group_read |
                                        std::filesystem::perms::group_exec | std::filesystem::perms::others_read |
                                        std::filesystem::perms::others_exec);
  return smi.string();
}

const nlohmann::json* RowOf(const nlohmann::json& usage, const std::string& key, const std::string& value) {
  for (const nlohmann::json& row : usage["rows"]) {
    if (row[key] == value) return &row;
  }
  return nullptr;
}

TEST(UsageBed, AJobGivenAllOfAHostsGpusHoldsTheHostAndTwoGpusForItsKnownDuration) {
  const auto& bed = GetBed();
  const std::string smi = StandinDriver(2);
  barge::testing::GpuStandin engine(bed.hosts[0], 2);
  ASSERT_EQ(engine.error(), "");
  JobDir job("usage-gpus");
  job.Write("name: usage\nimage: " + bed.image + "\ncommand: [\"sh\", \"-c\", \"sleep 4\"]\nstop_grace: 1s\n" +
            "hosts:\n  - {address: " + bed.hosts[0].address + "}\n" + "ssh: {user: " + bed.user +
            ", identity_file: " + bed.key + ", known_hosts: " + bed.known_hosts + "}\n" +
            "container: {gpus: all}\nhealth: {nvidia_smi: " + smi + "}\n");
  const double began = barge::testing::WallSeconds();
  const CliOutcome run = job.Barge("run job.yaml");
  const double wall = barge::testing::WallSeconds() - began;
  ASSERT_EQ(run.code, 0) << run.err;
  const std::string id = barge::testing::JobIdIn(run.err);
  ASSERT_FALSE(id.empty()) << run.err;
  int gpu_containers = 0;  // the job's own (a probe's name is Docker's)
  for (const barge::testing::GpuRequest& r : engine.Requests()) gpu_containers += r.container.find(id) != std::string::npos;
  ASSERT_EQ(gpu_containers, 1) << "the job's one container was not a GPU container";

  const CliOutcome by_job = job.Barge("usage --by job --json");
  ASSERT_EQ(by_job.code, 0) << by_job.err;
  const nlohmann::json jobs = nlohmann::json::parse(by_job.out);
  const nlohmann::json* row = RowOf(jobs, "job", id);
  ASSERT_NE(row, nullptr) << by_job.out;
  const double held_s = (*row)["host_hours"].get<double>() * 3600;
  std::printf("head slept 4 s; barge run took %.2f s; the host was held %.2f s\n", wall, held_s);
  EXPECT_GE(held_s, 4.0) << "the head's own 4 s are inside the hold";
  EXPECT_LE(held_s, wall) << "the hold is inside barge run";
  EXPECT_DOUBLE_EQ((*row)["gpu_hours"].get<double>(), 2 * (*row)["host_hours"].get<double>())
      << "`gpus: all` on a host whose driver lists two GPUs";
  EXPECT_EQ((*row)["gpus_unknown"], false);
  EXPECT_EQ((*row)["status"], "succeeded");

  const CliOutcome by_host = job.Barge("usage --by host --json");
  ASSERT_EQ(by_host.code, 0) << by_host.err;
  const nlohmann::json hosts = nlohmann::json::parse(by_host.out);
  const nlohmann::json* host = RowOf(hosts, "host", bed.hosts[0].address);
  ASSERT_NE(host, nullptr) << by_host.out;
  EXPECT_EQ((*host)["jobs"], 1);
  EXPECT_DOUBLE_EQ((*host)["host_hours"].get<double>(), (*row)["host_hours"].get<double>());

  const CliOutcome show = job.Barge("show " + id);
  ASSERT_EQ(show.code, 0) << show.err;
  // The same hours, as `show` prints them (two significant digits below 1:
  // within 5%).
  std::smatch held;
  ASSERT_TRUE(std::regex_search(show.out, held, std::regex("\nheld: +([0-9.]+) host-hours, ([0-9.]+) GPU-hours\n")))
      << show.out;
  EXPECT_NEAR(std::stod(held[1]), (*row)["host_hours"].get<double>(), 0.05 * (*row)["host_hours"].get<double>());
  EXPECT_NEAR(std::stod(held[2]), (*row)["gpu_hours"].get<double>(), 0.05 * (*row)["gpu_hours"].get<double>());
}

}  // namespace
