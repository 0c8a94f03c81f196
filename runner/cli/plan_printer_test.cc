#include "runner/cli/plan_printer.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <algorithm>
#include <fstream>

#include "runner/controller/entry_points.h"
#include "container/docker_args.h"
#include "runner/jobfile/job_file.h"

namespace barge::runner {
namespace {

namespace fs = std::filesystem;

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

class PlanWithSecrets : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/barge-plan-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    std::ofstream(dir_ + "/token") << "file-secret-value\n";
    std::ofstream(dir_ + "/password") << "registry-password-value\n";
    setenv("BARGE_PLAN_TEST_SECRET", "env-secret-value", 1);
  }
  void TearDown() override {
    unsetenv("BARGE_PLAN_TEST_SECRET");
    fs::remove_all(dir_);
  }

  std::string PlanOf(const std::string& yaml) {
    LoadedJob job = ParseJobText(yaml, "job.yaml", dir_);
    for (const auto& e : job.errors) ADD_FAILURE() << e.ToString();
    if (!job.spec) return "";
    spec_ = *job.spec;
    Result<cluster::Plan> plan = cluster::MakePlan(MakePlanInput(spec_, "a1b2c3d4"));
    EXPECT_TRUE(plan.ok()) << plan.status().message();
    return plan.ok() ? FormatPlan(spec_, *plan) : "";
  }

  std::string dir_;
  JobSpec spec_;
};

TEST_F(PlanWithSecrets, ShowsEveryCommandLineOfSecretsAndTheLoginWithoutAValue) {
  const std::string plan = PlanOf(R"(name: p
image: registry.example.com/team/train:1
hosts:
  - {address: h1.example, docker_command: sudo -n docker}
roles:
  head: {container: {run_options: [--init]}}
secrets:
  HF_TOKEN: {file: token}
  WANDB_API_KEY: {env: BARGE_PLAN_TEST_SECRET}
  CERT: {file: token, as_env: false}
registry: {server: registry.example.com, username: ci, password: {file: password}}
)");
  const std::string d = "/tmp/barge-a1b2c3d4.XXXXXXXXXXXX";
  // The job's own client config follows the host's docker words.
  EXPECT_TRUE(Contains(plan, "umask 077 && mkdir -p " + d + "/docker && sudo -n docker --config " + d +
                                 "/docker login --username=ci --password-stdin registry.example.com\n"))
      << plan;
  EXPECT_TRUE(Contains(plan, "sudo -n docker --config " + d + "/docker version")) << plan;
  EXPECT_TRUE(Contains(plan, "umask 077 && mkdir -p " + d + "/secrets && cat > " + d +
                                 "/secrets/HF_TOKEN   # file token\n"))
      << plan;
  EXPECT_TRUE(Contains(plan, "cat > " + d + "/secrets/.env   # NAME=VALUE of HF_TOKEN WANDB_API_KEY"))
      << plan;
  // Every secret mounted read-only; the env file before the role's own options.
  EXPECT_TRUE(Contains(plan, " -v " + d + "/secrets/HF_TOKEN:/run/secrets/HF_TOKEN:ro -v " + d +
                                 "/secrets/WANDB_API_KEY:/run/secrets/WANDB_API_KEY:ro -v " + d +
                                 "/secrets/CERT:/run/secrets/CERT:ro --env-file " + d +
                                 "/secrets/.env --init registry.example.com/team/train:1"))
      << plan;
  EXPECT_TRUE(Contains(plan, "sudo -n docker --config " + d + "/docker logout registry.example.com; ")) << plan;
  for (const char* value : {"file-secret-value", "env-secret-value", "registry-password-value"}) {
    EXPECT_FALSE(Contains(plan, value)) << value;
  }
}

TEST_F(PlanWithSecrets, WithoutSecretsOrRegistryThePlanHasNoneOfTheirLines) {
  const std::string plan = PlanOf("name: p\nimage: i\nhosts: [h1.example]\n");
  EXPECT_FALSE(Contains(plan, "--config")) << plan;
  EXPECT_FALSE(Contains(plan, "secrets")) << plan;
  EXPECT_FALSE(Contains(plan, "--env-file")) << plan;
  EXPECT_FALSE(Contains(plan, "login")) << plan;
}

}  // namespace
}  // namespace barge::runner

namespace barge::runner {
namespace {

// `barge plan`'s text of a job file (job id a1b2c3d4), and its plan in
// `plan`; "" after a reported failure.
std::string PlanText(const std::string& yaml, cluster::Plan* plan = nullptr) {
  LoadedJob job = ParseJobText(yaml, "job.yaml", "/tmp");
  for (const auto& e : job.errors) ADD_FAILURE() << e.ToString();
  if (!job.spec) return "";
  Result<cluster::Plan> made = cluster::MakePlan(MakePlanInput(*job.spec, "a1b2c3d4"));
  if (!made.ok()) {
    ADD_FAILURE() << made.status().message();
    return "";
  }
  if (plan) *plan = *made;
  return FormatPlan(*job.spec, *made);
}

// GPU slicing, from the job file to the docker line `barge plan` prints.
TEST(PlanGpuSlices, TheDockerRunLinesCarryEachNodesDeviceListQuotedForTheRemoteShell) {
  cluster::Plan plan;
  const std::string text = PlanText(R"(name: sl
image: img
container: {gpus: 2}
hosts:
  - {address: 10.0.0.5, gpus: 8, nodes: 4}
  - {address: 10.0.0.6}
)",
                                    &plan);
  ASSERT_FALSE(text.empty());
  for (const char* devices : {"0,1", "2,3", "4,5", "6,7"}) {
    EXPECT_NE(text.find(std::string("--gpus '\"device=") + devices + "\"' "), std::string::npos)
        << devices << "\n" << text;
    EXPECT_NE(text.find(std::string("# GPUs ") + devices +
                        " of the host's 8, chosen by barge (as if no other job held any"),
              std::string::npos)
        << text;
  }
  // The host without a GPU count keeps Docker's count.
  EXPECT_NE(text.find("--gpus 2 "), std::string::npos) << text;
  EXPECT_EQ(text.find("CUDA_VISIBLE_DEVICES"), std::string::npos);
  // The exact argv, before quoting: one word, the double quotes in it.
  std::vector<std::string> argv = container::RunArgs(plan.nodes[1].container);
  auto it = std::find(argv.begin(), argv.end(), "--gpus");
  ASSERT_NE(it, argv.end());
  EXPECT_EQ(*(it + 1), "\"device=2,3\"");
}

TEST(PlanGpuHosts, AGpuJobOnTheHostsNetworkShowsTheHealthCheckAndTheInterfaceQueryItWillMake) {
  cluster::Plan plan;
  const std::string text = PlanText(R"(name: gh
image: img
container: {gpus: 2, network: host}
hosts:
  - {address: 10.0.0.5, gpus: 8}
health: {xid_window: 6h}
)",
                                    &plan);
  ASSERT_FALSE(text.empty());
  EXPECT_NE(text.find("# GPU health (health.gpus: basic, Xids of the last 6 h)"), std::string::npos) << text;
  EXPECT_NE(text.find("nvidia-smi --query-gpu=index,uuid,name,driver_version,memory.total,"
                      "ecc.errors.uncorrected.volatile.total,retired_pages.pending,mig.mode.current,pci.bus_id"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("# NCCL_SOCKET_IFNAME and GLOO_SOCKET_IFNAME: the interface that carries 10.0.0.5"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("cat /proc/net/route"), std::string::npos) << text;
  EXPECT_NE(text.find("'NCCL_SOCKET_IFNAME==<interface of 10.0.0.5>'"), std::string::npos) << text;
  // Off, and on the default network: neither.
  const std::string off = PlanText(R"(name: gh
image: img
container: {gpus: 2}
hosts:
  - {address: 10.0.0.5, gpus: 8}
health: {gpus: off}
)",
                                   &plan);
  EXPECT_EQ(off.find("GPU health"), std::string::npos) << off;
  EXPECT_EQ(off.find("NCCL_SOCKET_IFNAME"), std::string::npos) << off;
  EXPECT_EQ(text.find("while the job runs"), std::string::npos) << "off by default:\n" << text;
}

TEST(PlanGpuHosts, TheInRunGpuChecksShowTheCommandSampledOnEachGpuHost) {
  cluster::Plan plan;
  const std::string text = PlanText(R"(name: gh
image: img
container: {gpus: 2}
hosts:
  - {address: 10.0.0.5, gpus: 8}
health: {every: 1m}
progress: {gpu_util: {below: 5, for: 10m}, every: 20s}
)",
                                    &plan);
  EXPECT_NE(text.find("# while the job runs, every 20s on the job's session (health.every, progress.gpu_util):\n"
                      "bs() { echo \"@@barge{ $1\"; }\nbe() { echo; echo \"@@barge} $1 $2\"; }\necho barge-gpuwatch"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("--query-gpu=index,utilization.gpu --format=csv,noheader,nounits"), std::string::npos) << text;
}

// Plain `docker` hosts: each node made through the Engine API's create,
// except one whose free-form run_options only the CLI can say.
TEST(PlanEngineApiCreate, RunOptionsKeepTheCliCreateAndEveryOtherNodeIsMadeThroughTheApi) {
  unsetenv("BARGE_ENGINE_API");
  const std::string text = PlanText(R"(name: ap
image: img
hosts: [10.0.0.5, 10.0.0.6]
roles:
  head: {container: {run_options: [--init]}}
  worker: {container: {shm_size: 1g}}
)");
  const size_t head = text.find("# node 0 (head)");
  const size_t worker = text.find("# node 1 (worker)");
  ASSERT_NE(head, std::string::npos) << text;
  ASSERT_NE(worker, std::string::npos) << text;
  const std::string head_part = text.substr(head, worker - head);
  const std::string worker_part = text.substr(worker);
  EXPECT_TRUE(Contains(head_part, "# made with the CLI (free-form run_options are given only on the docker "
                                  "command line):\ndocker create --name barge-ap-a1b2c3d4-0"))
      << head_part;
  EXPECT_TRUE(Contains(worker_part, "# made through the Engine API over the session: POST /v")) << worker_part;
  EXPECT_TRUE(Contains(worker_part, "/containers/create?name=barge-ap-a1b2c3d4-1 with this line's settings"))
      << worker_part;
  EXPECT_TRUE(Contains(worker_part, "#   docker create --name barge-ap-a1b2c3d4-1 ")) << worker_part;
  EXPECT_TRUE(Contains(worker_part, " --shm-size 1g ")) << worker_part;
}

TEST(PlanHostsCommand, ThePlanSaysItsHostsComeFromTheCommandItRanJustNow) {
  LoadedJob job = ParseJobText("name: hc\nimage: img\nhosts_command: echo 10.0.0.8\n", "job.yaml", "/tmp");
  for (const auto& e : job.errors) ADD_FAILURE() << e.ToString();
  ASSERT_TRUE(job.spec);
  Result<cluster::Plan> plan = cluster::MakePlan(MakePlanInput(*job.spec, "a1b2c3d4"));
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  const std::string text = FormatPlan(*job.spec, *plan);
  EXPECT_NE(text.find("this plan uses a1b2c3d4.\n# The hosts are what hosts_command printed, run just "
                      "now on this machine: echo 10.0.0.8\n# 1 node(s) on 1 host(s)."),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("## host 10.0.0.8: ssh 10.0.0.8 (one session"), std::string::npos) << text;
}

}  // namespace
}  // namespace barge::runner
