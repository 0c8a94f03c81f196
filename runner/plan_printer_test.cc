#include "runner/plan_printer.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>

#include "runner/controller.h"
#include "runner/job_file.h"

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
  const std::string d = "/tmp/barge-a1b2c3d4";
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
