#include "runner/remote/hosts_view.h"

#include <gtest/gtest.h>

namespace barge::runner {
namespace {

TEST(HostsView, ShowsEachHoldAndRunningContainerAndFreeHosts) {
  const std::string h1 =
      "now 2000\n"
      "hold\tabc\tbarge-hold-host\t1a2b3c4d\ttrain\talice\tbox\tall\t1940\t2540\t600\t2\n"
      "hold\tabd\tbarge-lease-1a2b3c4d.1990\t1a2b3c4d\ttrain\talice\tbox\t\t1940\t2540\t600\t2\n"
      "ctr\tc0ffee\tbarge-1a2b3c4d-0\t1a2b3c4d\thead\t0\tUp 58 seconds\n";
  std::vector<HostView> views = {ParseHostView("h1", h1), ParseHostView("h2", "now 2000\n")};
  ASSERT_EQ(views[0].holds.size(), 2u);
  ASSERT_EQ(views[0].containers.size(), 1u);
  EXPECT_EQ(views[0].containers[0].status, "Up 58 seconds");
  const std::string t = HostsTable(views);
  EXPECT_NE(t.find("hold host"), std::string::npos) << t;
  EXPECT_NE(t.find("1a2b3c4d train alice@box"), std::string::npos) << t;
  EXPECT_NE(t.find("1m00s ago"), std::string::npos) << t;
  EXPECT_NE(t.find("in 10m50s"), std::string::npos) << t;
  EXPECT_NE(t.find("lease (renewed 10s ago)"), std::string::npos) << t;
  EXPECT_NE(t.find("container barge-1a2b3c4d-0 (rank 0)"), std::string::npos) << t;
  EXPECT_NE(t.find("h2    free"), std::string::npos) << t;
  const nlohmann::json j = HostsJson(views);
  ASSERT_EQ(j.size(), 2u);
  EXPECT_EQ(j[0]["holds"][0]["job"], "1a2b3c4d");
  EXPECT_EQ(j[0]["holds"][0]["stale"], false);
  EXPECT_EQ(j[0]["holds"][0]["lease"], false);
  EXPECT_EQ(j[0]["holds"][0]["lease_renewed"], "1970-01-01T00:33:10Z");
  EXPECT_EQ(j[0]["holds"][1]["lease"], true);
  EXPECT_EQ(j[0]["containers"][0]["role"], "head");
  EXPECT_TRUE(j[1]["holds"].empty());
}

TEST(HostsView, ShowsEachHostsQueueInOrderAndAStaleTicketAsStale) {
  // Two waiters' tickets (the later listed first) and a dead waiter's (no
  // lease): "queued #1", "queued #2", and the dead one as stale.
  const std::string h1 =
      "now 2000\n"
      "hold\tt2\tbarge-ticket-bbbb\tbbbb\tsmall\tbob\tbox\t\t1950\t2550\t600\t2\n"
      "hold\tl2\tbarge-lease-bbbb.1995\tbbbb\tsmall\tbob\tbox\t\t1940\t2540\t600\t2\n"
      "hold\tt1\tbarge-ticket-aaaa\taaaa\tbig\talice\tbox\t\t1900\t2500\t600\t2\n"
      "hold\tl1\tbarge-lease-aaaa.1990\taaaa\tbig\talice\tbox\t\t1900\t2500\t600\t2\n"
      "hold\tt3\tbarge-ticket-cccc\tcccc\tgone\tcarol\tbox\t\t1800\t2400\t600\t2\n";
  std::vector<HostView> views = {ParseHostView("h1", h1)};
  const std::string t = HostsTable(views);
  const size_t first = t.find("queued #1"), second = t.find("queued #2");
  ASSERT_NE(first, std::string::npos) << t;
  ASSERT_NE(second, std::string::npos) << t;
  auto line_of = [&](size_t at) { return t.substr(t.rfind('\n', at) + 1, t.find('\n', at) - t.rfind('\n', at) - 1); };
  EXPECT_NE(line_of(first).find("aaaa big alice@box"), std::string::npos) << t;
  EXPECT_NE(line_of(second).find("bbbb small bob@box"), std::string::npos) << t;
  EXPECT_NE(t.find("ticket (stale)"), std::string::npos) << t;
  const nlohmann::json j = HostsJson(views);
  EXPECT_EQ(j[0]["holds"][0]["ticket"], true);
  EXPECT_EQ(j[0]["holds"][0]["queue_position"], 2);
  EXPECT_EQ(j[0]["holds"][2]["queue_position"], 1);
  EXPECT_TRUE(j[0]["holds"][4]["queue_position"].is_null());
  EXPECT_EQ(j[0]["holds"][4]["stale"], true);
  EXPECT_EQ(j[0]["holds"][1]["ticket"], false);
}

TEST(HostsView, WithGpusReadsTheDriversSectionsJudgesThemAndShowsTheTopologyWithoutEscapes) {
  // The listing, then the GPU sections as the host prints them: two GPUs
  // (GPU 1 with a pending retirement), a readable kernel log, and a
  // topology header underlined with the driver's terminal escapes.
  const std::string text =
      "now 2000\n"
      "@@barge{ gpuq\nfields full\n"
      "0, GPU-a, NVIDIA H100 80GB HBM3, 580.159.04, 81559, 0, No, Disabled, 00000000:00:06.0\n"
      "1, GPU-b, NVIDIA H100 80GB HBM3, 580.159.04, 81559, 0, Yes, Disabled, 00000000:00:07.0\n"
      "\n@@barge} gpuq 0\n"
      "@@barge{ gpurm\nGPU-a, 0, 0, No, No\nGPU-b, 0, 0, No, No\n\n@@barge} gpurm 0\n"
      "@@barge{ gpuxid\nuptime 50.0\nsource dmesg\n\n@@barge} gpuxid 0\n"
      "@@barge{ gputopo\n\t\x1b[4mGPU0\tGPU1\x1b[0m\nGPU0\t X \tNV18\n\n@@barge} gputopo 0\n";
  HostView v = ParseHostView("h1", text);
  EXPECT_EQ(v.error, "");
  ReadHostGpus(text, 2, std::chrono::hours(24), &v);
  ASSERT_TRUE(v.gpus.has_value());
  ASSERT_EQ(v.gpus->gpus.size(), 2u);
  const std::string t = HostsGpuTable({v});
  EXPECT_NE(t.find("h1    0    NVIDIA H100 80GB HBM3  81559 MiB  580.159.04  ok"), std::string::npos) << t;
  EXPECT_NE(t.find("h1    1    NVIDIA H100 80GB HBM3  81559 MiB  580.159.04  unhealthy"), std::string::npos) << t;
  EXPECT_NE(t.find("pages pending retirement"), std::string::npos) << t;
  EXPECT_NE(t.find("  \tGPU0\tGPU1\n"), std::string::npos) << t;
  EXPECT_EQ(t.find('\x1b'), std::string::npos) << "a terminal escape reached the table";
  const nlohmann::json j = HostsJson({v});
  EXPECT_EQ(j[0]["gpus"][1]["healthy"], false);
  EXPECT_EQ(j[0]["gpus"][1]["retired_pages_pending"], true);
  EXPECT_EQ(j[0]["gpu_findings"][0]["gpu"], 1);
  EXPECT_EQ(j[0]["gpu_findings"][0]["severity"], "fatal");
  EXPECT_EQ(j[0]["host_healthy"], true);
  // Without --gpus, no GPU keys.
  EXPECT_FALSE(HostsJson({ParseHostView("h1", text)})[0].contains("gpus"));
}

TEST(HostsView, ShowsEachHostsFailureRecordAndWhetherItPutsTheHostOut) {
  const std::string listing =
      "now 2000\n"
      "hold\tf1\tbarge-fault-1900-j1-1-0\t\ttrain\talice\tbox\t\t1900\t\t\t\tengine\tj1\t\tno answer\n"
      "hold\tf2\tbarge-fault-1950-j2-1-0\t\teval\tbob\tbox2\t\t1950\t\t\t\thost_lost\tj2\t\tlost\n"
      "hold\tf3\tbarge-fault-1960-j3-1-0\t\teval\tbob\tbox2\t1\t1960\t\t\t\tgpu_health\tj3\tGPU-u1\tXid 79\n";
  HostView out = ParseHostView("h1", listing);
  HostView free = ParseHostView("h2", "now 2000\n");
  const std::string t = HostsTable({out, free});
  EXPECT_NE(t.find("failure engine"), std::string::npos) << t;
  EXPECT_NE(t.find("j2 eval bob@box2"), std::string::npos) << t;
  EXPECT_NE(t.find("Xid 79"), std::string::npos) << t;
  EXPECT_NE(t.find("record: OUT"), std::string::npos) << t;
  EXPECT_NE(t.find("2 host-caused failure(s) in 24h00m, 1 allowed; GPU(s) out: 1"), std::string::npos) << t;
  EXPECT_NE(t.find("barge hosts --forgive h1"), std::string::npos) << t;
  EXPECT_NE(t.find("h2    free"), std::string::npos) << t;  // a record is not a hold
  EXPECT_EQ(t.find("hold fault"), std::string::npos) << t;
  // Allowed 2 (the job file's rule): usable.
  out.rule.allowed = 2;
  EXPECT_NE(HostsTable({out}).find("record: usable"), std::string::npos);
  out.rule.allowed = 1;
  const nlohmann::json j = HostsJson({out});
  EXPECT_TRUE(j[0]["holds"].empty());
  EXPECT_EQ(j[0]["record"]["out"], true);
  EXPECT_EQ(j[0]["record"]["counted"], 2);
  EXPECT_EQ(j[0]["record"]["gpus_out"], nlohmann::json::array({1}));
  ASSERT_EQ(j[0]["record"]["entries"].size(), 3u);
  EXPECT_EQ(j[0]["record"]["entries"][0]["kind"], "gpu_health");
  EXPECT_EQ(j[0]["record"]["entries"][0]["gpu_uuid"], "GPU-u1");
}

TEST(HostsView, AHostThatCouldNotListSaysWhy) {
  HostView v = ParseHostView("h3", "now 5\nerror: listing holds: Cannot connect to the Docker daemon\n");
  EXPECT_EQ(v.error, "listing holds: Cannot connect to the Docker daemon");
  EXPECT_NE(HostsTable({v}).find("cannot ask: listing holds"), std::string::npos);
}

}  // namespace
}  // namespace barge::runner
