// `mpi:` in a job file: what validation refuses, and the samples as barge
// reads and plans them (samples/mpi-allreduce.yaml, samples/nccl-tests.yaml).
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "cluster/plan.h"
#include "runner/controller/entry_points.h"
#include "runner/jobfile/job_file.h"
#include "runner/cli/plan_printer.h"

namespace barge::runner {
namespace {

std::string ErrorsOf(const std::string& text) {
  LoadedJob job = ParseJobText(text, "job.yaml", "/tmp");
  EXPECT_FALSE(job.spec.has_value()) << "parsed without errors:\n" << text;
  std::string out;
  for (const JobFileError& e : job.errors) out += e.ToString() + "\n";
  return out;
}

constexpr const char* kHosts = "hosts: [10.0.0.1, 10.0.0.2]\n";

TEST(MpiJobFile, SlotsAndPortAreReadWithTheirDefaults) {
  LoadedJob job = ParseJobText(std::string("name: m\nimage: i\n") + kHosts +
                                   "container: {network: host}\nmpi: {slots_per_node: 8}\n",
                               "job.yaml", "/tmp");
  ASSERT_TRUE(job.spec) << (job.errors.empty() ? "" : job.errors[0].ToString());
  ASSERT_TRUE(job.spec->mpi);
  EXPECT_EQ(job.spec->mpi->slots_per_node, 8);
  EXPECT_EQ(job.spec->mpi->port, 2222);
}

TEST(MpiJobFile, AnMpiJobWithoutHostNetworkIsRefusedSayingWhy) {
  const std::string errors =
      ErrorsOf(std::string("name: m\nimage: i\n") + kHosts + "mpi: {port: 2300}\n");
  EXPECT_NE(errors.find("job.yaml:4:1: mpi: an MPI job needs container.network: host"), std::string::npos)
      << errors;
  EXPECT_NE(errors.find("the head has network bridge"), std::string::npos) << errors;
  // A role or a host setting another network is named.
  const std::string role = ErrorsOf(std::string("name: m\nimage: i\n") + kHosts +
                                    "container: {network: host}\nroles: {worker: {container: "
                                    "{network: none}}}\nmpi: {}\n");
  EXPECT_NE(role.find("the workers have network none"), std::string::npos) << role;
}

TEST(MpiJobFile, AWorkerCommandIsRefusedBecauseWorkersRunOnlySshd) {
  const std::string errors = ErrorsOf(std::string("name: m\nimage: i\n") + kHosts +
                                      "container: {network: host}\nroles: {worker: {command: "
                                      "[sleep, '1']}}\nmpi: {}\n");
  EXPECT_NE(errors.find("roles.worker.command: an MPI job's workers run only their sshd"),
            std::string::npos)
      << errors;
}

TEST(MpiJobFile, BadSlotsAndPortsNameTheKey) {
  const std::string errors = ErrorsOf(std::string("name: m\nimage: i\n") + kHosts +
                                      "container: {network: host}\nmpi: {slots_per_node: 0, port: "
                                      "70000, ports: 1}\n");
  EXPECT_NE(errors.find("mpi.slots_per_node"), std::string::npos) << errors;
  EXPECT_NE(errors.find("mpi.port"), std::string::npos) << errors;
  EXPECT_NE(errors.find("mpi.ports: unknown key; did you mean 'port'?"), std::string::npos) << errors;
}

TEST(MpiJobFile, SpareHostsAreRefusedWithMpi) {
  const std::string errors = ErrorsOf(std::string("name: m\nimage: i\n") + kHosts +
                                      "container: {network: host}\nspare_hosts: [10.0.0.3]\nmpi: {}\n");
  EXPECT_NE(errors.find("mpi: spare_hosts cannot be used with mpi:"), std::string::npos) << errors;
}

struct Planned {
  JobSpec spec;
  cluster::Plan plan;
  std::string text;
};

// The sample as shipped, its bed key and known_hosts paths pointed at
// stand-in files: a unit test must not need the test bed to be up.
Planned PlanSample(const std::string& name) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("barge-mpi-sample-" + std::to_string(getpid()));
  fs::create_directories(dir);
  std::ifstream in(std::string(BARGE_SOURCE_DIR) + "/samples/" + name);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(text, "");
  for (size_t at; (at = text.find("/tmp/barge-bed/")) != std::string::npos;) {
    text.replace(at, 15, dir.string() + "/");
  }
  std::ofstream(dir / "id_ed25519") << "stand-in key\n";
  std::ofstream(dir / "known_hosts") << "";
  std::ofstream(dir / name) << text;
  LoadedJob job = LoadJobFile((dir / name).string());
  fs::remove_all(dir);
  for (const JobFileError& e : job.errors) ADD_FAILURE() << e.ToString();
  Planned p;
  if (!job.spec) return p;
  p.spec = *job.spec;
  Result<cluster::Plan> plan = cluster::MakePlan(MakePlanInput(p.spec, "0123abcd"));
  EXPECT_TRUE(plan.ok()) << plan.status().message();
  if (!plan.ok()) return p;
  p.plan = *plan;
  p.text = FormatPlan(p.spec, p.plan);
  return p;
}

TEST(MpiSamples, TheAllreduceSampleStartsTwoWorkersThenTheHeadRunningMpirun) {
  Planned p = PlanSample("mpi-allreduce.yaml");
  ASSERT_EQ(p.plan.stages.size(), 2u);
  EXPECT_EQ(p.plan.stages[0].ranks, (std::vector<int>{1, 2}));
  EXPECT_EQ(p.plan.stages[1].ranks, std::vector<int>{0});
  EXPECT_EQ(cluster::MpiHostfile(p.plan.mpi_nodes), "10.77.0.2 slots=1\n10.77.0.3 slots=1\n10.77.0.4 slots=1\n");
  EXPECT_NE(p.text.find("mpirun --hostfile"), std::string::npos);
  EXPECT_NE(p.text.find("cat > /tmp/barge-0123abcd.XXXXXXXXXXXX/mpi/0/id_ed25519"), std::string::npos) << p.text;
  EXPECT_NE(p.text.find("-v /tmp/barge-0123abcd.XXXXXXXXXXXX/mpi/1:/run/barge:ro"), std::string::npos);
  EXPECT_EQ(p.text.find("PRIVATE KEY"), std::string::npos) << "no key is made or shown by a plan";
}

TEST(MpiSamples, TheNcclTestsSampleValidatesAndPlansWithGpuSlotsLeftToTheHosts) {
  Planned p = PlanSample("nccl-tests.yaml");
  ASSERT_EQ(p.plan.mpi_nodes.size(), 2u);
  EXPECT_TRUE(p.plan.has_placeholders);
  EXPECT_EQ(p.plan.mpi_nodes[1].slots, "<gpus of gpu-2.example.com>");
  EXPECT_EQ(p.plan.stages[0].name, "workers");
  EXPECT_NE(p.text.find("all_reduce_perf -b 8 -e 1G -f 2 -g 1"), std::string::npos);
  EXPECT_NE(p.text.find("--gpus all"), std::string::npos);
  EXPECT_NE(p.text.find("--entrypoint /bin/sh registry.example.com/nccl-tests:latest -c 'test -x /usr/sbin/sshd || exit 1; id -u'"),
            std::string::npos)
      << p.text;
}

}  // namespace
}  // namespace barge::runner
