#include "runner/jobfile/job_file.h"
#include "runner/jobfile/redact.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <pwd.h>
#include <unistd.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "base/user_home.h"
#include "tests/support/scoped_env.h"
#include "tests/support/job_errors.h"

namespace barge::runner {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;
using std::chrono::seconds;
using ::testing::ElementsAre;
using ::testing::Pair;

// A scratch directory that is also $HOME, holding ~/.ssh/id_ed25519, for
// the length of one test.
class JobFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/barge-jobfile-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    if (const char* home = getenv("HOME")) old_home_ = home;
    setenv("HOME", dir_.c_str(), 1);
    // "~" is the passwd entry's home (base/user_home.h): here, the scratch
    // directory.
    UserHomeForTesting() = dir_;
    Write(".ssh/id_ed25519", "not really a key\n");
  }
  void TearDown() override {
    UserHomeForTesting().clear();
    if (old_home_) {
      setenv("HOME", old_home_->c_str(), 1);
    } else {
      unsetenv("HOME");
    }
    fs::remove_all(dir_);
  }

  void Write(const std::string& relative, const std::string& text) {
    fs::path p = fs::path(dir_) / relative;
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << text;
  }

  // Parses `text` as "job.yaml" in the scratch directory.
  LoadedJob Parse(const std::string& text) { return ParseJobText(text, "job.yaml", dir_); }

  // The errors of `text` as ToString() lines; fails the test if it parsed.
  std::vector<std::string> Errors(const std::string& text) {
    return barge::testing::RefusedWith(Parse(text), text);
  }

  // The spec of `text`; fails the test (and returns an empty spec) on errors.
  JobSpec Spec(const std::string& text) {
    LoadedJob job = Parse(text);
    for (const JobFileError& e : job.errors) ADD_FAILURE() << e.ToString();
    return job.spec.value_or(JobSpec{});
  }

  std::string dir_;
  std::optional<std::string> old_home_;
};

constexpr const char* kFoundationExample = R"(name: hello
image: barge/demo:local
hosts:
  - address: 127.0.0.2      # SSH address; "local" (or no hosts at all) = the local Docker engine, no SSH
    user: root
    port: 2222
    identity_file: ~/.ssh/id_ed25519
ssh:
  known_hosts: ~/.ssh/known_hosts
  host_key_checking: strict   # or accept-new; never silently off
  connect_timeout: 10s
container:
  shm_size: 1g
  cap_add: [SYS_ADMIN]
  gpus: all                   # or a count, or device ids
  ipc: host
  network: host
  ulimits: {memlock: -1, stack: 67108864}
  devices: [/dev/fuse]
  volumes: ["/data:/data:ro"]
  env: {EPOCHS: "3"}
  run_options: ["--security-opt", "apparmor=unconfined"]   # free-form extra docker run args
command: ["sh", "-c", "echo out; echo err >&2; exit 3"]    # a string means sh -c STRING; absent = the image's CMD
)";

TEST_F(JobFileTest, TheFoundationExampleParsesIntoExactValues) {
  JobSpec spec = Spec(kFoundationExample);
  EXPECT_EQ(spec.file, "job.yaml");
  EXPECT_EQ(spec.base_dir, dir_);
  EXPECT_EQ(spec.name, "hello");
  EXPECT_EQ(spec.image, "barge/demo:local");
  ASSERT_EQ(spec.hosts.size(), 1u);
  const cluster::Host& h = spec.hosts[0];
  EXPECT_EQ(h.address, "127.0.0.2");
  EXPECT_EQ(h.internal_address, "");
  EXPECT_EQ(h.user, "root");
  EXPECT_EQ(h.port, 2222);
  EXPECT_EQ(h.identity_file, dir_ + "/.ssh/id_ed25519");
  EXPECT_EQ(h.nodes, 1);
  EXPECT_EQ(h.line, 4);
  EXPECT_FALSE(h.is_local());
  EXPECT_EQ(spec.hosts_file, "");
  EXPECT_EQ(spec.ssh.known_hosts, dir_ + "/.ssh/known_hosts");
  EXPECT_EQ(spec.ssh.config_file, "");
  EXPECT_EQ(spec.ssh.host_key_checking, ssh::HostKeyChecking::kStrict);
  EXPECT_EQ(spec.ssh.connect_timeout, seconds(10));
  const container::ContainerOptions& c = spec.container;
  EXPECT_EQ(c.shm_size, "1g");
  EXPECT_EQ(c.cap_add, std::vector<std::string>{"SYS_ADMIN"});
  EXPECT_EQ(c.gpus, "all");
  EXPECT_EQ(c.ipc, "host");
  EXPECT_EQ(c.network, "host");
  EXPECT_EQ(c.memory, std::nullopt);
  ASSERT_TRUE(c.ulimits.has_value());
  EXPECT_THAT(*c.ulimits, ElementsAre(Pair("memlock", "-1"), Pair("stack", "67108864")));
  EXPECT_EQ(c.devices, std::vector<std::string>{"/dev/fuse"});
  EXPECT_EQ(c.volumes, std::vector<std::string>{"/data:/data:ro"});
  ASSERT_TRUE(c.env.has_value());
  EXPECT_THAT(*c.env, ElementsAre(Pair("EPOCHS", "3")));
  EXPECT_EQ(c.run_options, (std::vector<std::string>{"--security-opt", "apparmor=unconfined"}));
  EXPECT_EQ(spec.command, (std::vector<std::string>{"sh", "-c", "echo out; echo err >&2; exit 3"}));
  // What the example leaves out keeps its default.
  EXPECT_EQ(spec.docker_command, "docker");
  EXPECT_TRUE(spec.roles.empty());
  EXPECT_EQ(spec.image_pull, ImagePull::kMissing);
  EXPECT_EQ(spec.on_worker_exit, OnWorkerExit::kFail);
  EXPECT_EQ(spec.stop_grace, seconds(10));
  EXPECT_EQ(spec.rendezvous.port, 29500);
  EXPECT_EQ(spec.rendezvous.conventions.size(), 6u);
  EXPECT_EQ(spec.teardown.host_command, std::nullopt);
}

constexpr const char* kMultiNodeExample = R"(name: ddp
image: barge/torch:local
hosts:                         # or `hosts_file: inventory.yaml` (same list)
  - {address: 203.0.113.10, internal_address: 10.0.0.10, gpus: 8}   # internal_address = what other nodes use; default = address
  - {address: 203.0.113.11, internal_address: 10.0.0.11}
  - {address: 203.0.113.12, internal_address: 10.0.0.12}
roles:
  head:
    command: ["python3", "train.py"]
    ready: {tcp_port: 29500, timeout: 120s}     # or {log: "regex"} or {command: "..."}; default: container running
    container: {shm_size: 20g}                  # per-role overrides merge over `container:`
  worker:
    count: rest                                  # or an integer; one container per host
    command: ["python3", "train.py"]
    image: barge/torch:local                     # per-role image allowed
rendezvous:
  port: 29500                                    # default 29500; preflight checks it is free on the head host
  env: [barge, torch, ray, skypilot, dstack, sagemaker]   # default: all
image_pull: missing                              # always | missing (default) | never | push
on_worker_exit: fail                             # fail (default: tear down, exit 125) | ignore
stop_grace: 10s                                  # SIGTERM → SIGKILL grace at teardown (default 10s)
)";

TEST_F(JobFileTest, TheMultiNodeExampleParsesIntoExactValues) {
  JobSpec spec = Spec(kMultiNodeExample);
  EXPECT_EQ(spec.name, "ddp");
  EXPECT_EQ(spec.image, "barge/torch:local");
  EXPECT_EQ(spec.command, std::nullopt);
  ASSERT_EQ(spec.hosts.size(), 3u);
  EXPECT_EQ(spec.hosts[0].address, "203.0.113.10");
  EXPECT_EQ(spec.hosts[0].internal_address, "10.0.0.10");
  EXPECT_EQ(spec.hosts[0].gpus, 8);
  EXPECT_EQ(spec.hosts[1].address, "203.0.113.11");
  EXPECT_EQ(spec.hosts[1].internal_address, "10.0.0.11");
  EXPECT_EQ(spec.hosts[1].gpus, std::nullopt);
  EXPECT_EQ(spec.hosts[2].internal_address, "10.0.0.12");
  EXPECT_EQ(spec.hosts[2].line, 6);
  ASSERT_EQ(spec.roles.size(), 2u);
  const cluster::RoleSpec& head = spec.roles.at("head");
  EXPECT_EQ(head.command, (std::vector<std::string>{"python3", "train.py"}));
  EXPECT_EQ(head.image, std::nullopt);
  EXPECT_EQ(head.ready.kind, cluster::ReadinessProbe::Kind::kTcpPort);
  EXPECT_EQ(head.ready.tcp_port, 29500);
  EXPECT_EQ(head.ready.timeout, seconds(120));
  EXPECT_EQ(head.container.shm_size, "20g");
  EXPECT_EQ(head.container.env, std::nullopt);
  const cluster::RoleSpec& worker = spec.roles.at("worker");
  EXPECT_EQ(worker.count, std::nullopt);  // rest
  EXPECT_EQ(worker.image, "barge/torch:local");
  EXPECT_EQ(worker.command, (std::vector<std::string>{"python3", "train.py"}));
  EXPECT_EQ(spec.rendezvous.port, 29500);
  EXPECT_EQ(spec.rendezvous.conventions,
            (std::vector<std::string>{"barge", "torch", "ray", "skypilot", "dstack", "sagemaker"}));
  EXPECT_EQ(spec.image_pull, ImagePull::kMissing);
  EXPECT_EQ(spec.on_worker_exit, OnWorkerExit::kFail);
  EXPECT_EQ(spec.stop_grace, seconds(10));
}

TEST_F(JobFileTest, AMinimalJobGetsEveryDefault) {
  JobSpec spec = Spec("name: x\nimage: debian:12\n");
  EXPECT_TRUE(spec.hosts.empty());  // = the local engine
  EXPECT_EQ(spec.command, std::nullopt);
  EXPECT_EQ(spec.docker_command, "docker");
  EXPECT_EQ(spec.ssh.known_hosts, "");
  EXPECT_EQ(spec.ssh.host_key_checking, ssh::HostKeyChecking::kStrict);
  EXPECT_EQ(spec.ssh.connect_timeout, seconds(10));
  EXPECT_EQ(spec.ssh.user, std::nullopt);
  EXPECT_EQ(spec.container.shm_size, std::nullopt);
  EXPECT_EQ(spec.container.env, std::nullopt);
}

TEST_F(JobFileTest, EveryOtherSettingReachesTheSpec) {
  Write("cfg", "Host *\n");
  Write("keys/k", "key\n");
  JobSpec spec = Spec(R"(name: all-keys
image: img
docker_command: sudo -n docker
ssh:
  config_file: cfg
  host_key_checking: accept-new
  connect_timeout: 1500ms
  user: deploy
  port: 2200
  identity_file: keys/k
hosts:
  - address: local
    nodes: 3
    docker_command: /usr/bin/docker
    role: head
    container: {memory: 512m, env: {X: "1"}}
    vars: {instance_id: i-123, zone: 3}
image_pull: push
on_worker_exit: ignore
stop_grace: 0s
rendezvous: {port: 1234, env: []}
teardown:
  host_command: "echo {host.address} {host.internal_address}"
  local_command: "aws ec2 terminate-instances --instance-ids \"$BARGE_VAR_instance_id\" # {job.id} {not.a.placeholder}"
roles:
  worker: {count: 2}
  head:
    ready: {log: "listening on [0-9]+", timeout: 1m}
)");
  EXPECT_EQ(spec.docker_command, "sudo -n docker");
  EXPECT_EQ(spec.ssh.config_file, dir_ + "/cfg");
  EXPECT_EQ(spec.ssh.host_key_checking, ssh::HostKeyChecking::kAcceptNew);
  EXPECT_EQ(spec.ssh.connect_timeout, milliseconds(1500));
  EXPECT_EQ(spec.ssh.user, "deploy");
  EXPECT_EQ(spec.ssh.port, 2200);
  EXPECT_EQ(spec.ssh.identity_file, dir_ + "/keys/k");
  ASSERT_EQ(spec.hosts.size(), 1u);
  const cluster::Host& h = spec.hosts[0];
  EXPECT_TRUE(h.is_local());
  EXPECT_EQ(h.nodes, 3);
  EXPECT_EQ(h.docker_command, "/usr/bin/docker");
  EXPECT_EQ(h.role, "head");
  EXPECT_EQ(h.container.memory, "512m");
  EXPECT_THAT(*h.container.env, ElementsAre(Pair("X", "1")));
  EXPECT_EQ(h.vars, (std::map<std::string, std::string>{{"instance_id", "i-123"}, {"zone", "3"}}));
  EXPECT_EQ(spec.image_pull, ImagePull::kPush);
  EXPECT_EQ(spec.on_worker_exit, OnWorkerExit::kIgnore);
  EXPECT_EQ(spec.stop_grace, milliseconds(0));
  EXPECT_EQ(spec.rendezvous.port, 1234);
  EXPECT_TRUE(spec.rendezvous.conventions.empty());
  EXPECT_EQ(spec.teardown.host_command, "echo {host.address} {host.internal_address}");
  EXPECT_EQ(spec.teardown.local_command,
            "aws ec2 terminate-instances --instance-ids \"$BARGE_VAR_instance_id\" # {job.id} "
            "{not.a.placeholder}");
  EXPECT_EQ(spec.roles.at("worker").count, 2);
  EXPECT_EQ(spec.roles.at("head").ready.kind, cluster::ReadinessProbe::Kind::kLog);
  EXPECT_EQ(spec.roles.at("head").ready.log_regex, "listening on [0-9]+");
  EXPECT_EQ(spec.roles.at("head").ready.timeout, seconds(60));
}

TEST_F(JobFileTest, ReadyCanBeACommandInTheHead) {
  JobSpec spec =
      Spec("name: x\nimage: i\nroles:\n  head:\n    ready: {command: \"test -e /ok\"}\n");
  EXPECT_EQ(spec.roles.at("head").ready.kind, cluster::ReadinessProbe::Kind::kCommand);
  EXPECT_EQ(spec.roles.at("head").ready.command, "test -e /ok");
  EXPECT_EQ(spec.roles.at("head").ready.timeout, seconds(120));
  EXPECT_EQ(spec.roles.count("worker"), 0u);
}

TEST_F(JobFileTest, AStringCommandRunsUnderShC) {
  JobSpec spec = Spec("name: x\nimage: i\ncommand: echo \"$HOSTNAME\" && exit 3\n");
  EXPECT_EQ(spec.command, (std::vector<std::string>{"sh", "-c", "echo \"$HOSTNAME\" && exit 3"}));
  JobSpec role = Spec("name: x\nimage: i\nroles: {worker: {command: 'sleep 1'}}\n");
  EXPECT_EQ(role.roles.at("worker").command, (std::vector<std::string>{"sh", "-c", "sleep 1"}));
}

TEST_F(JobFileTest, ListCommandElementsAreKeptAsWritten) {
  JobSpec spec = Spec("name: x\nimage: i\ncommand: [sleep, 10, true, 0x1F, '']\n");
  EXPECT_EQ(spec.command, (std::vector<std::string>{"sleep", "10", "true", "0x1F", ""}));
}

TEST_F(JobFileTest, EnvScalarsAreKeptExactlyAsWritten) {
  JobSpec spec = Spec(R"(name: x
image: i
container:
  env:
    INT: 3
    BOOL: true
    YES: yes
    FLOAT: 1.50
    HEX: 0x10
    OCT: 010
    QUOTED: "3"
    EMPTY: ""
    SPACES: "  a  b  "
    MULTI: |
      line 1
      line 2
    TILDE_TEXT: "~"
)");
  ASSERT_TRUE(spec.container.env.has_value());
  EXPECT_THAT(*spec.container.env,
              ElementsAre(Pair("INT", "3"), Pair("BOOL", "true"), Pair("YES", "yes"),
                          Pair("FLOAT", "1.50"), Pair("HEX", "0x10"), Pair("OCT", "010"),
                          Pair("QUOTED", "3"), Pair("EMPTY", ""), Pair("SPACES", "  a  b  "),
                          Pair("MULTI", "line 1\nline 2\n"), Pair("TILDE_TEXT", "~")));
}

TEST_F(JobFileTest, EnvValuesThatAreNotScalarsOrMissingAreErrors) {
  EXPECT_THAT(
      Errors("name: x\nimage: i\ncontainer:\n  env:\n    A:\n    B: [1]\n    C: ~\n    9X: 1\n"),
      ElementsAre("job.yaml:5:5: container.env.A: missing value (write \"\" for an empty one)",
                  "job.yaml:6:8: container.env.B: expected a string, number or boolean, got a list",
                  "job.yaml:7:5: container.env.C: missing value (write \"\" for an empty one)",
                  "job.yaml:8:5: container.env.9X: invalid environment variable name '9X' "
                  "(letters, digits and '_', not starting with a digit)"));
}

TEST_F(JobFileTest, GpusTakeAllACountOrDeviceIds) {
  auto gpus = [&](const std::string& value) {
    return Spec("name: x\nimage: i\ncontainer:\n  gpus: " + value + "\n").container.gpus;
  };
  EXPECT_EQ(gpus("all"), "all");
  EXPECT_EQ(gpus("2"), "2");
  EXPECT_EQ(gpus("\"4\""), "4");
  EXPECT_EQ(gpus("[0, 1]"), "\"device=0,1\"");
  EXPECT_EQ(gpus("[3]"), "\"device=3\"");
  EXPECT_EQ(gpus("[GPU-8f6e1b2c, GPU-77aa]"), "\"device=GPU-8f6e1b2c,GPU-77aa\"");
}

TEST_F(JobFileTest, BadGpusSayWhatIsAccepted) {
  EXPECT_THAT(Errors("name: x\nimage: i\ncontainer:\n  gpus: some\n"),
              ElementsAre("job.yaml:4:9: container.gpus: invalid gpus 'some' (expected 'all', a "
                          "count, or a list of device ids like [0, 1])"));
  EXPECT_THAT(Errors("name: x\nimage: i\ncontainer:\n  gpus: 0\n"),
              ElementsAre("job.yaml:4:9: container.gpus: a GPU count must be from 1 to 1024 "
                          "(remove 'gpus' for none), got '0'"));
  EXPECT_THAT(Errors("name: x\nimage: i\ncontainer:\n  gpus: []\n"),
              ElementsAre("job.yaml:4:9: container.gpus: empty list of GPU devices (expected "
                          "'all', a count, or a list of device ids like [0, 1])"));
  EXPECT_THAT(Errors("name: x\nimage: i\ncontainer:\n  gpus: [0, \"1,2\"]\n"),
              ElementsAre("job.yaml:4:13: container.gpus[1]: invalid GPU device id '1,2' (an "
                          "index or a GPU UUID)"));
}

TEST_F(JobFileTest, SizesPassThroughAsWritten) {
  JobSpec spec = Spec(
      "name: x\nimage: i\ncontainer: {shm_size: 2GB, memory: 1024}\n"
      "roles: {head: {container: {shm_size: 1.5g}}}\n");
  EXPECT_EQ(spec.container.shm_size, "2GB");
  EXPECT_EQ(spec.container.memory, "1024");
  EXPECT_EQ(spec.roles.at("head").container.shm_size, "1.5g");
}

TEST_F(JobFileTest, BadSizesNameTheValueAndAnExample) {
  EXPECT_THAT(
      Errors("name: x\nimage: i\ncontainer:\n  shm_size: 16 gigs\n  memory: -1\n"),
      ElementsAre(
          "job.yaml:4:13: container.shm_size: invalid size '16 gigs' (expected e.g. 512m, 2g)",
          "job.yaml:5:11: container.memory: invalid size '-1' (expected e.g. 512m, 2g)"));
}

TEST_F(JobFileTest, DurationsBecomeMilliseconds) {
  JobSpec spec = Spec("name: x\nimage: i\nstop_grace: 1h30m\nssh: {connect_timeout: 500ms}\n");
  EXPECT_EQ(spec.stop_grace, milliseconds(5'400'000));
  EXPECT_EQ(spec.ssh.connect_timeout, milliseconds(500));
}

TEST_F(JobFileTest, BadDurationsSayWhichUnitsExist) {
  EXPECT_THAT(Errors("name: x\nimage: i\nstop_grace: 10\nssh:\n  connect_timeout: 10 seconds\n"
                     "roles:\n  head:\n    ready: {tcp_port: 80, timeout: 0s}\n"),
              ElementsAre("job.yaml:3:13: stop_grace: invalid duration '10': a unit is required "
                          "(ms, s, m, h or d, e.g. 10s)",
                          "job.yaml:5:20: ssh.connect_timeout: invalid duration '10 seconds' "
                          "(expected e.g. 500ms, 10s, 5m, 1h30m, 1d)",
                          "job.yaml:8:36: roles.head.ready.timeout: must be longer than zero"));
}

TEST_F(JobFileTest, UnknownKeysAreSuggestedAtEveryLevel) {
  EXPECT_THAT(Errors(R"(name: x
imgae: i
container:
  shm_sise: 1g
ssh:
  host_key_checkin: strict
hosts:
  - address: a
  - address: b
    prot: 22
roles:
  workers: {}
  head:
    redy: {tcp_port: 1}
)"),
              ElementsAre(
                  // No image anywhere (the misspelled one does not count):
                  // reported at the top of the file, so first.
                  "job.yaml:1:1: image: missing; set 'image:' at the top or in roles.head and "
                  "roles.worker (e.g. image: debian:12)",
                  "job.yaml:2:1: imgae: unknown key; did you mean 'image'?",
                  "job.yaml:4:3: container.shm_sise: unknown key; did you mean 'shm_size'?",
                  "job.yaml:6:3: ssh.host_key_checkin: unknown key; did you mean "
                  "'host_key_checking'?",
                  "job.yaml:10:5: hosts[1].prot: unknown key; did you mean 'port'?",
                  "job.yaml:12:3: roles.workers: unknown role; did you mean 'worker'?",
                  "job.yaml:14:5: roles.head.redy: unknown key; did you mean 'ready'?"));
}

TEST_F(JobFileTest, AnUnknownKeyWithNothingCloseListsTheKnownOnes) {
  EXPECT_THAT(Errors("name: x\nimage: i\nteardown:\n  on_exit: x\n"),
              ElementsAre("job.yaml:4:3: teardown.on_exit: unknown key (expected host_command or "
                          "local_command)"));
}

TEST_F(JobFileTest, SecretsAreReadFromFilesAndTheEnvironmentAtValidation) {
  Write("hf_token", "hf_secret_value\n");
  setenv("BARGE_TEST_WANDB", "wandb-secret-value", 1);
  JobSpec spec = Spec(R"(name: x
image: i
secrets:
  HF_TOKEN: {file: ~/hf_token}
  WANDB_API_KEY: {env: BARGE_TEST_WANDB}
  CERT: {file: hf_token, as_env: false}
)");
  unsetenv("BARGE_TEST_WANDB");
  ASSERT_EQ(spec.secrets.size(), 3u);
  EXPECT_EQ(spec.secrets[0].name, "HF_TOKEN");
  EXPECT_EQ(spec.secrets[0].source, "file ~/hf_token");
  EXPECT_EQ(spec.secrets[0].value, "hf_secret_value\n");  // the file, byte for byte
  EXPECT_EQ(EnvValueOf(spec.secrets[0]), "hf_secret_value");  // the environment, without the line break
  EXPECT_TRUE(spec.secrets[0].as_env);
  EXPECT_EQ(spec.secrets[1].name, "WANDB_API_KEY");
  EXPECT_EQ(spec.secrets[1].source, "env BARGE_TEST_WANDB");
  EXPECT_EQ(spec.secrets[1].value, "wandb-secret-value");
  EXPECT_EQ(spec.secrets[2].name, "CERT");
  EXPECT_FALSE(spec.secrets[2].as_env);
  EXPECT_EQ(spec.secrets[2].value, "hf_secret_value\n");  // relative to the job file's directory
  EXPECT_FALSE(spec.registry.has_value());
}

TEST_F(JobFileTest, AMissingSecretNamesFileLineAndKeyAndNeverTheValue) {
  unsetenv("BARGE_TEST_UNSET");
  Write("empty", "");
  Write("multi", "line one\nline two\n");
  EXPECT_THAT(Errors(R"(name: x
image: i
secrets:
  A: {env: BARGE_TEST_UNSET}
  B: {file: ~/nope}
  C: {file: ~/empty}
  D: {file: ~/multi}
  E: {file: ~/multi, as_env: false}
  F: {file: ~/multi, env: X}
  G: {}
  H: literal-secret-value
  1X: {env: HOME}
  I: {file: ~/multi, as_env: maybe}
  J: {value: x}
  K: {file: /dev/null}
)"),
              ElementsAre(
                  "job.yaml:4:12: secrets.A.env: environment variable BARGE_TEST_UNSET is not set "
                  "(barge reads it when it validates the job file)",
                  "job.yaml:5:13: secrets.B.file: cannot read '~/nope': No such file or directory",
                  "job.yaml:6:13: secrets.C.file: '~/empty' is empty",
                  "job.yaml:7:3: secrets.D: the value holds a line break, which an environment "
                  "variable given with docker run --env-file cannot; add 'as_env: false' to give "
                  "it only as the file /run/secrets/D",
                  "job.yaml:9:22: secrets.F.env: give one of file or env, not both",
                  "job.yaml:10:3: secrets.G: give file: PATH or env: VARIABLE (where a secret's "
                  "value is read from)",
                  "job.yaml:11:6: secrets.H: expected {file: PATH} or {env: VARIABLE}, got a "
                  "string; a secret's value is never written in the job file",
                  "job.yaml:12:3: secrets.1X: invalid secret name '1X' (it names an environment "
                  "variable and a file: letters, digits and '_', not starting with a digit)",
                  "job.yaml:13:30: secrets.I.as_env: invalid value 'maybe' (expected true or false)",
                  "job.yaml:14:7: secrets.J.value: unknown key (expected file, env or as_env)",
                  "job.yaml:15:13: secrets.K.file: '/dev/null' is not a regular file"));
}

TEST_F(JobFileTest, ASecretInTheEnvironmentMustNotAlsoBeSetByAContainerBlock) {
  setenv("BARGE_TEST_TOKEN", "tok-value", 1);
  EXPECT_THAT(Errors(R"(name: x
image: i
hosts: [a, {address: b, container: {env: {TOKEN: x}}}]
container: {env: {TOKEN: y}}
secrets:
  TOKEN: {env: BARGE_TEST_TOKEN}
  OTHER: {env: BARGE_TEST_TOKEN}
)"),
              ElementsAre("job.yaml:6:3: secrets.TOKEN: also set in container.env; the container "
                          "would get only one of the two (remove one, or add 'as_env: false' to "
                          "the secret)",
                          "job.yaml:6:3: secrets.TOKEN: also set in hosts[1].container.env; the "
                          "container would get only one of the two (remove one, or add 'as_env: "
                          "false' to the secret)"));
  unsetenv("BARGE_TEST_TOKEN");
}

TEST_F(JobFileTest, ARegistryNeedsServerUserAndAPasswordFromAFileOrTheEnvironment) {
  Write("pw", "registry-password\n");
  JobSpec spec = Spec(
      "name: x\nimage: i\nregistry: {server: registry.example.com:5000, username: ci, "
      "password: {file: ~/pw}}\n");
  ASSERT_TRUE(spec.registry.has_value());
  EXPECT_EQ(spec.registry->server, "registry.example.com:5000");
  EXPECT_EQ(spec.registry->username, "ci");
  EXPECT_EQ(spec.registry->password, "registry-password");  // without the line break
  EXPECT_EQ(spec.registry->password_source, "file ~/pw");

  unsetenv("BARGE_TEST_UNSET");
  EXPECT_THAT(Errors(R"(name: x
image: i
registry:
  server: -bad
  password: hunter2-literal
  token: x
)"),
              ElementsAre("job.yaml:3:1: registry: missing 'username'",
                          "job.yaml:4:11: registry.server: invalid registry server '-bad' "
                          "(expected a host name with an optional port and path, e.g. ghcr.io or "
                          "registry.example.com:5000)",
                          "job.yaml:5:13: registry.password: expected {file: PATH} or {env: "
                          "VARIABLE}, got a string; the password is never written in the job file",
                          "job.yaml:6:3: registry.token: unknown key (expected server, username "
                          "or password)"));
  EXPECT_THAT(Errors("name: x\nimage: i\nregistry: {server: r.io, username: u, password: {env: "
                     "BARGE_TEST_UNSET, as_env: false}}\n"),
              ElementsAre("job.yaml:3:55: registry.password.env: environment variable "
                          "BARGE_TEST_UNSET is not set (barge reads it when it validates the job "
                          "file)",
                          "job.yaml:3:73: registry.password.as_env: only a secret goes into the "
                          "environment; the password goes to docker login alone"));
}

TEST_F(JobFileTest, SkippingSecretValuesChecksOnlyTheirShape) {
  // A job file recorded in the store, parsed again for `barge down`: the
  // variables and files it named may be gone.
  unsetenv("BARGE_TEST_UNSET");
  LoadedJob job = ParseJobText(
      "name: x\nimage: i\nsecrets: {A: {env: BARGE_TEST_UNSET}, B: {file: ~/gone}}\n"
      "registry: {server: r.io, username: u, password: {env: BARGE_TEST_UNSET}}\n",
      "job.yaml", dir_, SecretValues::kSkip);
  ASSERT_TRUE(job.errors.empty()) << job.errors[0].ToString();
  ASSERT_EQ(job.spec->secrets.size(), 2u);
  EXPECT_EQ(job.spec->secrets[0].value, "");
  EXPECT_EQ(job.spec->secrets[1].source, "file ~/gone");
  ASSERT_TRUE(job.spec->registry.has_value());
  EXPECT_EQ(job.spec->registry->password, "");
}

TEST_F(JobFileTest, RestartSpareHostsAndPreemptionAreRead) {
  LoadedJob job = Parse(
      "name: x\nimage: i\nhosts: [a.example, b.example]\nssh: {dead_after: 3s}\n"
      "restart: {max_restarts: 2, on: [host_lost, preempted], backoff: 1s}\n"
      "spare_hosts: [c.example, {address: d.example, port: 2200}]\n"
      "preemption: {command: 'test -e /tmp/going', every: 2s}\n");
  ASSERT_TRUE(job.errors.empty()) << job.errors[0].ToString();
  const JobSpec& spec = *job.spec;
  EXPECT_EQ(spec.ssh.dead_after, std::chrono::seconds(3));
  ASSERT_TRUE(spec.restart.has_value());
  EXPECT_EQ(spec.restart->max_restarts, 2);
  EXPECT_TRUE(spec.restart->on_host_lost);
  EXPECT_FALSE(spec.restart->on_node_failed);
  EXPECT_TRUE(spec.restart->on_preempted);
  EXPECT_EQ(spec.restart->backoff, std::chrono::seconds(1));
  ASSERT_EQ(spec.spare_hosts.size(), 2u);
  EXPECT_EQ(spec.spare_hosts[0].address, "c.example");
  EXPECT_EQ(spec.spare_hosts[1].port, 2200);
  ASSERT_TRUE(spec.preemption.has_value());
  EXPECT_EQ(spec.preemption->command, "test -e /tmp/going");
  EXPECT_EQ(spec.preemption->every, std::chrono::seconds(2));
}

TEST_F(JobFileTest, RestartDefaultsToEveryCauseAndATenSecondBackoff) {
  LoadedJob job = Parse("name: x\nimage: i\nrestart: {max_restarts: 1}\n");
  ASSERT_TRUE(job.errors.empty());
  const RestartPolicy& r = *job.spec->restart;
  EXPECT_TRUE(r.on_host_lost && r.on_node_failed && r.on_preempted && r.on_hang);
  EXPECT_EQ(r.backoff, std::chrono::seconds(10));
  EXPECT_EQ(job.spec->ssh.dead_after, std::chrono::seconds(10));
}

TEST_F(JobFileTest, ProgressIsReadWithItsDefaultsAndHangIsARestartCause) {
  LoadedJob job = Parse("name: x\nimage: i\nprogress: {pattern: 'step \\d+', within: 10m, silence: 30m}\n"
                        "restart: {max_restarts: 1, on: [hang]}\n");
  ASSERT_TRUE(job.errors.empty()) << job.errors[0].ToString();
  ASSERT_TRUE(job.spec->progress.has_value());
  const ProgressSpec& p = *job.spec->progress;
  EXPECT_EQ(p.pattern, "step \\d+");
  EXPECT_EQ(p.within, std::chrono::minutes(10));
  EXPECT_EQ(p.silence, std::chrono::minutes(30));
  EXPECT_EQ(p.every, std::chrono::seconds(10));
  EXPECT_EQ(p.on_hang, OnHang::kStop);
  EXPECT_TRUE(job.spec->restart->on_hang);
  EXPECT_FALSE(job.spec->restart->on_node_failed);
  LoadedJob silent = Parse("name: x\nimage: i\nprogress: {silence: 5m, every: 1s, on_hang: restart}\n");
  ASSERT_TRUE(silent.errors.empty()) << silent.errors[0].ToString();
  EXPECT_FALSE(silent.spec->progress->pattern.has_value());
  EXPECT_EQ(silent.spec->progress->on_hang, OnHang::kRestart);
  EXPECT_EQ(silent.spec->progress->every, std::chrono::seconds(1));
  EXPECT_FALSE(Parse("name: x\nimage: i\n").spec->progress.has_value());
}

TEST_F(JobFileTest, AProgressBlockWithoutASignalOrWithHalfOfOneIsRefused) {
  EXPECT_THAT(Errors("name: x\nimage: i\nprogress: {every: 5s}\n"),
              ElementsAre(::testing::StartsWith("job.yaml:3:1: progress: needs 'silence', 'pattern' (with 'within'), 'heartbeat', 'gpu_util' or 'stragglers'")));
  EXPECT_THAT(Errors("name: x\nimage: i\nprogress: {pattern: step}\n"),
              ElementsAre(::testing::StartsWith("job.yaml:3:1: progress: 'pattern' and 'within' go together")));
  EXPECT_THAT(Errors("name: x\nimage: i\nprogress: {silence: 1m, within: 1m}\n"),
              ElementsAre(::testing::StartsWith("job.yaml:3:1: progress: 'pattern' and 'within' go together")));
  EXPECT_THAT(Errors("name: x\nimage: i\nprogress: {pattern: 'step (', within: 1m}\n"),
              ElementsAre(::testing::StartsWith("job.yaml:3:21: progress.pattern: invalid regular expression")));
  EXPECT_THAT(Errors("name: x\nimage: i\nprogress: {silence: 1m, on_hang: retry}\n"),
              ElementsAre(::testing::StartsWith("job.yaml:3:34: progress.on_hang: ")));
}

TEST_F(JobFileTest, ProgressHeartbeatAndStragglersAreReadWithTheirDefaults) {
  LoadedJob job = Parse("name: x\nimage: i\nprogress:\n  pattern: 'step \\d+'\n  stragglers: {}\n"
                        "  heartbeat: {file: /ckpt/beat, within: 2m}\n");
  ASSERT_TRUE(job.errors.empty()) << job.errors[0].ToString();
  const ProgressSpec& p = *job.spec->progress;
  ASSERT_TRUE(p.stragglers.has_value());
  EXPECT_EQ(p.stragglers->factor, 1.5);
  EXPECT_EQ(p.stragglers->steps, 5);
  EXPECT_FALSE(p.stragglers->time.has_value());
  EXPECT_FALSE(p.within.has_value());
  ASSERT_TRUE(p.heartbeat.has_value());
  EXPECT_EQ(p.heartbeat->file, "/ckpt/beat");
  EXPECT_EQ(p.heartbeat->within, std::chrono::minutes(2));
  LoadedJob timed = Parse("name: x\nimage: i\nprogress: {stragglers: {factor: 2.5, steps: 3, time: 'took ([0-9.]+)s'}}\n");
  ASSERT_TRUE(timed.errors.empty()) << timed.errors[0].ToString();
  EXPECT_EQ(timed.spec->progress->stragglers->factor, 2.5);
  EXPECT_EQ(timed.spec->progress->stragglers->steps, 3);
  EXPECT_EQ(timed.spec->progress->stragglers->time, "took ([0-9.]+)s");
}

TEST_F(JobFileTest, BadHeartbeatAndStragglerEntriesAreNamed) {
  EXPECT_THAT(Errors("name: x\nimage: i\nprogress: {heartbeat: {file: beat, within: 1m}}\n"),
              ElementsAre(::testing::StartsWith("job.yaml:3:30: progress.heartbeat.file: expected an absolute path")));
  EXPECT_THAT(Errors("name: x\nimage: i\nprogress: {heartbeat: {file: /beat}}\n"),
              ElementsAre(::testing::StartsWith("job.yaml:3:12: progress.heartbeat: needs 'file' and 'within'")));
  EXPECT_THAT(Errors("name: x\nimage: i\nprogress: {stragglers: {}}\n"),
              ElementsAre(::testing::StartsWith("job.yaml:3:1: progress: 'stragglers' needs 'pattern'")));
  EXPECT_THAT(Errors("name: x\nimage: i\nprogress: {pattern: s, stragglers: {factor: 1}}\n"),
              ElementsAre(::testing::StartsWith("job.yaml:3:45: progress.stragglers.factor: expected a number above 1")));
  EXPECT_THAT(Errors("name: x\nimage: i\nprogress: {pattern: s, stragglers: {factor: fast}}\n"),
              ElementsAre(::testing::StartsWith("job.yaml:3:45: progress.stragglers.factor: expected a number above 1")));
  EXPECT_THAT(Errors("name: x\nimage: i\nprogress: {stragglers: {time: 'took [0-9]+'}}\n"),
              ElementsAre(::testing::StartsWith("job.yaml:3:31: progress.stragglers.time: regular expression 'took [0-9]+' has no group")));
}

TEST_F(JobFileTest, NotifyIsReadWithItsDefaultEventsAndItsSecretsAreRedacted) {
  barge::testing::ScopedEnv key("BARGE_TEST_NOTIFY_KEY", std::string("sign-me\n"));
  barge::testing::ScopedEnv url("BARGE_TEST_NOTIFY_URL", std::string("https://hooks.example.com/services/T0KEN"));
  LoadedJob job = Parse("name: x\nimage: i\nnotify:\n  - url: http://127.0.0.1:9000/hook\n"
                        "  - url_from: {env: BARGE_TEST_NOTIFY_URL}\n    events: [failed, hang]\n"
                        "    secret: {env: BARGE_TEST_NOTIFY_KEY}\n");
  ASSERT_TRUE(job.errors.empty()) << job.errors[0].ToString();
  ASSERT_EQ(job.spec->notify.size(), 2u);
  const NotifySpec& plain = job.spec->notify[0];
  EXPECT_EQ(plain.url, "http://127.0.0.1:9000/hook");
  EXPECT_FALSE(plain.url_secret);
  EXPECT_EQ(plain.events, (std::vector<std::string>{"started", "succeeded", "failed", "cancelled", "timed_out", "restarted"}));
  EXPECT_EQ(plain.secret, "");
  const NotifySpec& hidden = job.spec->notify[1];
  EXPECT_EQ(hidden.url, "https://hooks.example.com/services/T0KEN");
  EXPECT_TRUE(hidden.url_secret);
  EXPECT_EQ(hidden.events, (std::vector<std::string>{"failed", "hang"}));
  EXPECT_EQ(hidden.secret, "sign-me");
  const Redactor redact(*job.spec);
  EXPECT_EQ(redact("posting to https://hooks.example.com/services/T0KEN with sign-me").find("T0KEN"), std::string::npos);
  EXPECT_EQ(redact("sign-me").find("sign-me"), std::string::npos);
}

TEST_F(JobFileTest, BadNotifyEntriesAreNamed) {
  EXPECT_THAT(Errors("name: x\nimage: i\nnotify:\n  - url: ftp://h/x\n"),
              ElementsAre(::testing::StartsWith("job.yaml:4:10: notify[0].url: expected an http:// or https:// URL, got 'ftp://h/x'")));
  barge::testing::ScopedEnv url("BARGE_TEST_NOTIFY_URL", std::string("http://h/y"));
  EXPECT_THAT(Errors("name: x\nimage: i\nnotify:\n  - {url: 'http://h/x', url_from: {env: BARGE_TEST_NOTIFY_URL}}\n"),
              ElementsAre(::testing::StartsWith("job.yaml:4:5: notify[0]: give one of url or url_from")));
  EXPECT_THAT(Errors("name: x\nimage: i\nnotify:\n  - {url: 'http://h/x', events: [failed, exploded]}\n"),
              ElementsAre(::testing::StartsWith("job.yaml:4:42: notify[0].events[1]: invalid value 'exploded'")));
  EXPECT_THAT(Errors("name: x\nimage: i\nnotify:\n  - {url: 'http://h/x', secret: hunter2}\n"),
              ElementsAre(::testing::HasSubstr("notify[0].secret: expected {file: PATH} or {env: VARIABLE}, got a string; the signing key is never written in the job file")));
}

TEST_F(JobFileTest, OnFailureKeepIsReadAndABadOrMissingKeepIsNamed) {
  LoadedJob job = Parse("name: x\nimage: i\non_failure: {keep: 30m}\n");
  ASSERT_TRUE(job.errors.empty()) << job.errors[0].ToString();
  ASSERT_TRUE(job.spec->on_failure.has_value());
  EXPECT_EQ(job.spec->on_failure->keep, std::chrono::minutes(30));
  EXPECT_FALSE(Parse("name: x\nimage: i\n").spec->on_failure.has_value());
  EXPECT_THAT(Errors("name: x\nimage: i\non_failure: {}\n"),
              ElementsAre(::testing::StartsWith("job.yaml:3:1: on_failure: needs 'keep'")));
  EXPECT_THAT(Errors("name: x\nimage: i\non_failure: {keep: 0s}\n"),
              ElementsAre(::testing::StartsWith("job.yaml:3:20: on_failure.keep: ")));
  EXPECT_THAT(Errors("name: x\nimage: i\non_failure: {keep: 500ms}\n"),
              ElementsAre("job.yaml:3:20: on_failure.keep: keep from 1s to 7d, not '500ms'"));
  EXPECT_THAT(Errors("name: x\nimage: i\non_failure: {keep: 8d}\n"),
              ElementsAre("job.yaml:3:20: on_failure.keep: keep from 1s to 7d, not '8d'"));
  EXPECT_THAT(Errors("name: x\nimage: i\non_failure: {keep: 1m, kept: 2m}\n"),
              ElementsAre(::testing::StartsWith("job.yaml:3:24: on_failure.kept: unknown key")));
}

TEST_F(JobFileTest, HealthEveryXidListsAndGpuUtilAreReadAndGpuUnhealthyIsARestartCause) {
  LoadedJob job = Parse("name: x\nimage: i\nhealth: {every: 1m, xids: {fatal: [13, 94], warning: [79], ignore: [43]}}\n"
                        "progress: {gpu_util: {below: 5, for: 10m}}\nrestart: {max_restarts: 1, on: [gpu_unhealthy]}\n");
  ASSERT_TRUE(job.errors.empty()) << job.errors[0].ToString();
  const HealthSpec& h = job.spec->health;
  EXPECT_EQ(h.every, std::chrono::minutes(1));
  EXPECT_EQ(h.xids_fatal, (std::vector<int>{13, 94}));
  EXPECT_EQ(h.xids_warning, (std::vector<int>{79}));
  EXPECT_EQ(h.xids_ignore, (std::vector<int>{43}));
  ASSERT_TRUE(job.spec->progress && job.spec->progress->gpu_util);
  EXPECT_EQ(job.spec->progress->gpu_util->below, 5);
  EXPECT_EQ(job.spec->progress->gpu_util->for_, std::chrono::minutes(10));
  EXPECT_TRUE(job.spec->restart->on_gpu_unhealthy);
  EXPECT_FALSE(job.spec->restart->on_host_lost);
  // Off by default; every cause restarts by default.
  LoadedJob plain = Parse("name: x\nimage: i\nrestart: {max_restarts: 1}\n");
  EXPECT_FALSE(plain.spec->health.every.has_value());
  EXPECT_TRUE(plain.spec->health.xids_fatal.empty());
  EXPECT_TRUE(plain.spec->restart->on_gpu_unhealthy);
}

TEST_F(JobFileTest, BadXidListsAndAHalfGpuUtilAreNamed) {
  EXPECT_THAT(Errors("name: x\nimage: i\nhealth: {xids: {fatal: [13], ignore: [43, 13]}}\n"),
              ElementsAre(::testing::StartsWith("job.yaml:3:38: health.xids.ignore: Xid 13 is also listed in 'fatal'")));
  EXPECT_THAT(Errors("name: x\nimage: i\nhealth: {xids: {fatal: 79}}\n"),
              ElementsAre(::testing::StartsWith("job.yaml:3:24: health.xids.fatal: expected a list of Xid codes")));
  EXPECT_THAT(Errors("name: x\nimage: i\nhealth: {xids: {warning: [94, x]}}\n"),
              ElementsAre(::testing::StartsWith("job.yaml:3:31: health.xids.warning[1]: expected an Xid code")));
  EXPECT_THAT(Errors("name: x\nimage: i\nhealth: {every: 0s}\n"),
              ElementsAre(::testing::StartsWith("job.yaml:3:17: health.every: must be longer than zero")));
  EXPECT_THAT(Errors("name: x\nimage: i\nprogress: {gpu_util: {below: 5}}\n"),
              ElementsAre(::testing::StartsWith("job.yaml:3:12: progress.gpu_util: needs 'below' (a percentage) and 'for'")));
  EXPECT_THAT(Errors("name: x\nimage: i\nprogress: {gpu_util: {below: 101, for: 1m}}\n"),
              ElementsAre(::testing::StartsWith("job.yaml:3:30: progress.gpu_util.below: expected a percentage from 1 to 100")));
}

TEST_F(JobFileTest, HealthHostFailuresAndWindowAreReadWithTheirDefaultsAndBounds) {
  const JobSpec plain = Spec("name: x\nimage: i\n");
  EXPECT_EQ(plain.health.host_failures, 1);
  EXPECT_EQ(plain.health.host_window, std::chrono::hours(24));
  const JobSpec job = Spec("name: x\nimage: i\nhealth: {host_failures: 3, host_window: 2h}\n");
  EXPECT_EQ(job.health.host_failures, 3);
  EXPECT_EQ(job.health.host_window, std::chrono::hours(2));
  EXPECT_THAT(Errors("name: x\nimage: i\nhealth: {host_window: 31d}\n"),
              ElementsAre(::testing::StartsWith("job.yaml:3:23: health.host_window: at most 30d")));
  EXPECT_THAT(Errors("name: x\nimage: i\nhealth: {host_failures: -1}\n"),
              ElementsAre(::testing::StartsWith("job.yaml:3:25: health.host_failures: expected an integer from 0")));
}

TEST_F(JobFileTest, BadRestartSpareAndPreemptionEntriesAreNamed) {
  EXPECT_THAT(Errors("name: x\nimage: i\nrestart: {max_restarts: -1, on: [host_lost, oom]}\n"),
              ElementsAre(::testing::StartsWith("job.yaml:3:25: restart.max_restarts: "),
                          ::testing::StartsWith("job.yaml:3:45: restart.on[1]: ")));
  EXPECT_THAT(Errors("name: x\nimage: i\nhosts: [a.example]\n"
                     "spare_hosts: [a.example, {address: b.example, nodes: 2, role: head}]\n"),
              ElementsAre(::testing::HasSubstr("is listed twice"),
                          ::testing::StartsWith("job.yaml:4:47: spare_hosts[1].nodes: not for a spare host"),
                          ::testing::StartsWith("job.yaml:4:57: spare_hosts[1].role: not for a spare host")));
  EXPECT_THAT(Errors("name: x\nimage: i\npreemption: {every: 5s}\n"),
              ElementsAre(::testing::StartsWith("job.yaml:3:1: preemption: needs 'command'")));
}

TEST_F(JobFileTest, ATimeoutIsAPositiveDuration) {
  EXPECT_THAT(Errors("name: x\nimage: i\ntimeout: 12\n"),
              ElementsAre(::testing::StartsWith("job.yaml:3:10: timeout: ")));
  EXPECT_THAT(Errors("name: x\nimage: i\ntimeout: 0s\n"),
              ElementsAre(::testing::StartsWith("job.yaml:3:10: timeout: ")));
}

TEST_F(JobFileTest, KeysInTheWrongRoleSayWhereTheyBelong) {
  EXPECT_THAT(
      Errors("name: x\nimage: i\nroles:\n  head: {count: 1}\n  worker: {ready: {tcp_port: 1}}\n"),
      ElementsAre("job.yaml:4:10: roles.head.count: only role 'worker' has a count; there "
                  "is always exactly one head",
                  "job.yaml:5:12: roles.worker.ready: only the head has a readiness probe "
                  "('ready')"));
}

TEST_F(JobFileTest, WrongTypesNameWhatWasExpectedAndWhatWasFound) {
  EXPECT_THAT(
      Errors(R"(name: [a]
image: i
container:
  cap_add: SYS_ADMIN
  env: [A=1]
hosts: 10.0.0.1
ssh: strict
stop_grace: {s: 1}
)"),
      ElementsAre("job.yaml:1:7: name: expected a string, got a list",
                  "job.yaml:4:12: container.cap_add: expected a list of strings, got a "
                  "string ('SYS_ADMIN'); write [SYS_ADMIN]",
                  "job.yaml:5:8: container.env: expected a mapping of NAME: value, got a list",
                  "job.yaml:6:8: hosts: expected a list of hosts, got a string "
                  "('10.0.0.1'); write [10.0.0.1]",
                  "job.yaml:7:6: ssh: expected a mapping, got a string ('strict')",
                  "job.yaml:8:13: stop_grace: expected a duration, e.g. 10s, got a mapping"));
}

TEST_F(JobFileTest, EmptyValuesAreReportedAtTheirKey) {
  // yaml-cpp places an empty value at the next token; the error stays on the key's line.
  EXPECT_THAT(Errors("name: x\nimage:\nhosts:\n  - address: a\n    port:\n"),
              ElementsAre("job.yaml:2:1: image: missing value (expected a string)",
                          "job.yaml:5:5: hosts[0].port: missing value (expected a port number "
                          "from 1 to 65535)"));
}

TEST_F(JobFileTest, ManyErrorsAreReportedTogetherInLineOrder) {
  EXPECT_THAT(
      Errors(R"(name: bad name
image: i
hosts:
  - address: "a;b"
    port: 0
  - address: 10.0.0.2
    nodes: 0
image_pull: sometimes
stop_grace: soon
)"),
      ElementsAre(
          "job.yaml:1:7: name: invalid name 'bad name' (letters, digits, '_', '.', "
          "'-'; starting with a letter or digit)",
          "job.yaml:4:14: hosts[0].address: invalid host address 'a;b': ';' is not "
          "allowed in a host name",
          "job.yaml:5:11: hosts[0].port: expected a port number from 1 to 65535, got '0'",
          "job.yaml:7:12: hosts[1].nodes: expected a number of nodes from 1 to 1024, got '0'",
          "job.yaml:8:13: image_pull: invalid value 'sometimes' (expected always, "
          "missing, never, push or push-direct: push sends this machine's image once, relayed "
          "host to host; push-direct sends it from this machine to each host)",
          "job.yaml:9:13: stop_grace: invalid duration 'soon' (expected e.g. 500ms, "
          "10s, 5m, 1h30m, 1d)"));
}

TEST_F(JobFileTest, EnumValuesGetSuggestions) {
  EXPECT_THAT(
      Errors("name: x\nimage: i\nimage_pull: mising\nssh: {host_key_checking: accept_new}\n"
             "on_worker_exit: ignroe\nrendezvous: {env: [pytorch, ray, ray]}\n"),
      ElementsAre("job.yaml:3:13: image_pull: invalid value 'mising' (expected always, "
                  "missing, never, push or push-direct: push sends this machine's image once, "
                  "relayed host to host; push-direct sends it from this machine to each host); did "
                  "you mean 'missing'?",
                  "job.yaml:4:26: ssh.host_key_checking: invalid value 'accept_new' "
                  "(expected strict, accept-new or off); did you mean 'accept-new'?",
                  "job.yaml:5:17: on_worker_exit: invalid value 'ignroe' (expected fail or "
                  "ignore); did you mean 'ignore'?",
                  "job.yaml:6:20: rendezvous.env[0]: invalid value 'pytorch' (expected "
                  "barge, torch, ray, skypilot, dstack or sagemaker); did you mean 'torch'?",
                  "job.yaml:6:34: rendezvous.env[2]: 'ray' is listed twice"));
}

TEST_F(JobFileTest, HostsMayBeBareAddresses) {
  JobSpec spec =
      Spec("name: x\nimage: i\nhosts:\n  - 10.0.0.1\n  - node-2\n  - {address: local}\n");
  ASSERT_EQ(spec.hosts.size(), 3u);
  EXPECT_EQ(spec.hosts[0].address, "10.0.0.1");
  EXPECT_EQ(spec.hosts[0].line, 4);
  EXPECT_EQ(spec.hosts[1].address, "node-2");
  EXPECT_TRUE(spec.hosts[2].is_local());
}

TEST_F(JobFileTest, DuplicateHostsCompareAddressAndEffectivePort) {
  // Same address, different ports: two sshds, two hosts.
  EXPECT_EQ(
      Spec("name: x\nimage: i\nhosts:\n  - {address: h, port: 22}\n  - {address: h, port: 2222}\n")
          .hosts.size(),
      2u);
  // No port = ssh.port, else 22; addresses compare without case.
  EXPECT_THAT(
      Errors("name: x\nimage: i\nssh: {port: 2222}\nhosts:\n  - h\n  - {address: H, port: 2222}\n"),
      ElementsAre("job.yaml:6:15: hosts[1].address: host 'H' port 2222 is listed twice "
                  "(first at line 5); use 'nodes:' to run several containers on one host"));
  EXPECT_THAT(Errors("name: x\nimage: i\nhosts:\n  - local\n  - local\n"),
              ElementsAre("job.yaml:5:5: hosts[1]: the local engine is listed twice (first at line "
                          "4); use 'nodes:' to run several containers on it"));
}

TEST_F(JobFileTest, TheLocalEngineTakesNoSshSettings) {
  EXPECT_THAT(Errors("name: x\nimage: i\nhosts:\n  - {address: local, user: root, port: 22}\n"),
              ElementsAre("job.yaml:4:22: hosts[0].user: not used with address 'local' (the local "
                          "engine needs no SSH)",
                          "job.yaml:4:34: hosts[0].port: not used with address 'local' (the local "
                          "engine needs no SSH)"));
}

TEST_F(JobFileTest, WorkersMustFitTheNodes) {
  // One local host with 3 nodes: a head and 2 workers.
  EXPECT_EQ(
      Spec("name: x\nimage: i\nhosts: [{address: local, nodes: 3}]\nroles: {worker: {count: 2}}\n")
          .roles.at("worker")
          .count,
      2);
  EXPECT_THAT(
      Errors(
          "name: x\nimage: i\nhosts: [{address: local, nodes: 3}]\nroles: {worker: {count: 3}}\n"),
      ElementsAre("job.yaml:4:25: roles.worker.count: 3 workers and the head need 4 nodes, "
                  "but the hosts provide 3 (add hosts, raise a host's 'nodes:', or use "
                  "count: rest)"));
  // No hosts: the local engine is one node.
  EXPECT_THAT(Errors("name: x\nimage: i\nroles: {worker: {count: 1}}\n"),
              ElementsAre("job.yaml:3:25: roles.worker.count: 1 workers and the head need 2 nodes, "
                          "but the hosts provide 1 (add hosts, raise a host's 'nodes:', or use "
                          "count: rest)"));
  EXPECT_THAT(Errors("name: x\nimage: i\nroles: {worker: {count: -1}}\n"),
              ElementsAre("job.yaml:3:25: roles.worker.count: expected a number of workers (0 or "
                          "more) or 'rest', got '-1'"));
}

TEST_F(JobFileTest, ARoleImageIsEnoughWhenEveryRoleThatRunsHasOne) {
  EXPECT_EQ(Spec("name: x\nroles: {head: {image: a}}\n").roles.at("head").image, "a");
  EXPECT_EQ(Spec("name: x\nhosts: [h1, h2]\nroles: {head: {image: a}, worker: {image: b}}\n")
                .roles.at("worker")
                .image,
            "b");
  EXPECT_THAT(Errors("name: x\nhosts: [h1, h2]\nroles: {head: {image: a}}\n"),
              ElementsAre("job.yaml:1:1: image: missing; set 'image:' at the top or in "
                          "roles.worker (e.g. image: debian:12)"));
  EXPECT_THAT(
      Errors("name: x\n"),
      ElementsAre("job.yaml:1:1: image: missing; set 'image:' at the top (e.g. image: debian:12)"));
}

TEST_F(JobFileTest, AtMostOneHostIsTheHead) {
  EXPECT_THAT(
      Errors(
          "name: x\nimage: i\nhosts:\n  - {address: a, role: head}\n  - {address: b, role: head}\n"
          "  - {address: c, role: worker}\n"),
      ElementsAre(
          "job.yaml:5:24: hosts[1].role: a second head; hosts[0] (line 4) is the head already",
          "job.yaml:6:24: hosts[2].role: invalid role 'worker': only 'head' can be set "
          "here (the other hosts carry the workers)"));
}

TEST_F(JobFileTest, PathsExpandTildeAndResolveAgainstTheJobFile) {
  Write("keys/id", "k\n");
  JobSpec spec = Spec(
      "name: x\nimage: i\nssh: {known_hosts: kh, identity_file: ~/.ssh/id_ed25519}\n"
      "hosts: [{address: a, identity_file: keys/../keys/id}, {address: b, identity_file: " +
      dir_ + "/keys/id}]\n");
  EXPECT_EQ(spec.ssh.known_hosts, dir_ + "/kh");
  EXPECT_EQ(spec.ssh.identity_file, dir_ + "/.ssh/id_ed25519");
  EXPECT_EQ(spec.hosts[0].identity_file, dir_ + "/keys/id");
  EXPECT_EQ(spec.hosts[1].identity_file, dir_ + "/keys/id");
}

TEST_F(JobFileTest, TildeIsThePasswdEntrysHomeWhateverHomeSays) {
  // As OpenSSH and libssh take "~": one home for every SSH path of a run.
  UserHomeForTesting().clear();
  struct passwd* pw = getpwuid(getuid());
  ASSERT_NE(pw, nullptr);
  ASSERT_STRNE(pw->pw_dir, dir_.c_str());
  JobSpec spec = Spec("name: x\nimage: i\nssh: {known_hosts: ~/kh}\nhosts: [a]\n");
  EXPECT_EQ(spec.ssh.known_hosts, std::string(pw->pw_dir) + "/kh") << "HOME is " << dir_;
}

TEST_F(JobFileTest, IdentityFilesMustBeReadableNow) {
  fs::create_directories(fs::path(dir_) / "adir");
  EXPECT_THAT(
      Errors("name: x\nimage: i\nhosts:\n  - {address: a, identity_file: nope}\n"
             "  - {address: b, identity_file: adir}\n  - {address: c, identity_file: ~bob/id}\n"),
      ElementsAre("job.yaml:4:33: hosts[0].identity_file: cannot read identity file 'nope': No "
                  "such file or directory",
                  "job.yaml:5:33: hosts[1].identity_file: cannot read identity file 'adir': it "
                  "is a directory",
                  "job.yaml:6:33: hosts[2].identity_file: only '~' and '~/' are expanded, not "
                  "'~bob/id'"));
}

TEST_F(JobFileTest, HostsFileHoldsTheSameListAndItsErrorsNameIt) {
  Write("inv/hosts.yaml", "- {address: 10.0.0.1, identity_file: id}\n- 10.0.0.2\n");
  Write("inv/id", "k\n");
  JobSpec spec = Spec("name: x\nimage: i\nhosts_file: inv/hosts.yaml\n");
  ASSERT_EQ(spec.hosts.size(), 2u);
  EXPECT_EQ(spec.hosts_file, "inv/hosts.yaml");
  EXPECT_EQ(spec.hosts[0].identity_file, dir_ + "/inv/id");  // relative to the hosts file
  EXPECT_EQ(spec.hosts[1].line, 2);

  Write("inv/bad.yaml", "# inventory\n- address: 10.0.0.1\n  prot: 22\n- 10.0.0.1\n");
  EXPECT_THAT(Errors("name: x\nimage: i\nhosts_file: inv/bad.yaml\n"),
              ElementsAre("inv/bad.yaml:3:3: hosts[0].prot: unknown key; did you mean 'port'?",
                          "inv/bad.yaml:4:3: hosts[1]: host '10.0.0.1' port 22 is listed twice "
                          "(first at line 2); use 'nodes:' to run several containers on one host"));
}

TEST_F(JobFileTest, HostsFileNamesAreShownFromTheJobFilesDirectoryAsGiven) {
  Write("jobs/inv.yaml", "{address: a}\n");
  LoadedJob job =
      ParseJobText("name: x\nimage: i\nhosts_file: inv.yaml\n", "jobs/job.yaml", dir_ + "/jobs");
  std::vector<std::string> lines;
  for (const JobFileError& e : job.errors) lines.push_back(e.ToString());
  EXPECT_THAT(lines,
              ElementsAre("jobs/inv.yaml:1:1: hosts: expected a list of hosts, got a mapping"));
}

TEST_F(JobFileTest, AMissingHostsFileIsAnErrorAtItsKey) {
  EXPECT_THAT(
      Errors("name: x\nimage: i\nhosts_file: nowhere.yaml\n"),
      ElementsAre("job.yaml:3:13: hosts_file: cannot read hosts file 'nowhere.yaml': No such "
                  "file or directory"));
  Write("h.yaml", "- a\n");
  EXPECT_THAT(
      Errors("name: x\nimage: i\nhosts: [b]\nhosts_file: h.yaml\n"),
      ElementsAre("job.yaml:4:1: hosts_file: give either 'hosts' or 'hosts_file', not both"));
}

TEST_F(JobFileTest, DuplicateKeysNameBothLinesAtAnyDepth) {
  EXPECT_THAT(
      Errors("name: x\nimage: i\nname: y\ncontainer:\n  env:\n    A: 1\n    B: 2\n    A: 3\n"),
      ElementsAre("job.yaml:3:1: name: duplicate key; first set at line 1",
                  "job.yaml:8:5: container.env.A: duplicate key; first set at line 6"));
}

TEST_F(JobFileTest, AnUnterminatedQuoteIsReportedWhereItOpensAndNothingElse) {
  EXPECT_THAT(Errors("name: x\nimage: \"debian:12\ncontainer:\n  shm_sise: 1g\n"),
              ElementsAre("job.yaml:2:8: image: unterminated quoted string: the \" opened here is "
                          "never closed"));
  // Here yaml-cpp gives up at the end of the file; the message still points
  // at the quote (without a key: there is no tree to name one from).
  EXPECT_THAT(Errors("name: x\nimage: i\ncommand: ['a', 'it''s]\n"),
              ElementsAre("job.yaml:3:16: unterminated quoted string: the ' opened here is never "
                          "closed"));
}

TEST_F(JobFileTest, SmallAliasesAreFineAndShareTheirValues) {
  JobSpec spec = Spec(
      "name: x\nimage: i\ncontainer: &c {shm_size: 1g}\n"
      "roles: {head: {container: *c}, worker: {container: *c}}\n");
  EXPECT_EQ(spec.roles.at("head").container.shm_size, "1g");
  EXPECT_EQ(spec.roles.at("worker").container.shm_size, "1g");
}

TEST_F(JobFileTest, AnErrorInsideAnAliasedBlockIsReportedOnce) {
  EXPECT_THAT(
      Errors("name: x\nimage: i\ncontainer: &c {shm_size: huge}\n"
             "roles: {head: {container: *c}, worker: {container: *c}}\n"),
      ElementsAre(
          "job.yaml:3:26: container.shm_size: invalid size 'huge' (expected e.g. 512m, 2g)"));
}

TEST_F(JobFileTest, TooManyValuesAreRefusedBeforeATreeIsBuilt) {
  std::string wide = "name: x\nimage: i\ncommand:\n";
  for (int i = 0; i < 100001; ++i) wide += "- 1\n";
  // Root map, 3 keys, 2 values and the list are 7 nodes: item 99994, on
  // line 99997, is node 100001.
  EXPECT_THAT(Errors(wide),
              ElementsAre("job.yaml:99997:3: more than 100000 YAML values; barge refuses "
                          "to build them (a job file needs a few hundred)"));
}

TEST_F(JobFileTest, AliasesThatExpandTooFarAreRefusedAtTheTopLevelKeyThatUsesThem) {
  std::string text = "name: x\nimage: i\nbase: &a [";
  for (int i = 0; i < 400; ++i) text += std::string(i ? "," : "") + "1";
  text += "]\nmore: [";
  for (int i = 0; i < 300; ++i) text += std::string(i ? "," : "") + "*a";
  text += "]\n";
  EXPECT_THAT(Errors(text),
              ElementsAre("job.yaml:4:1: more: aliases expand to more than 100000 YAML "
                          "nodes; refusing what looks like an alias bomb ('billion "
                          "laughs'); aliases are fine, but not that many"));
}

TEST_F(JobFileTest, MergeKeysAreNotSupportedAndSaySo) {
  EXPECT_THAT(
      Errors("name: x\nimage: i\nbase: &b {shm_size: 1g}\n"),
      ElementsAre("job.yaml:3:1: base: unknown key (expected name, image, command, container, "
                  "hosts, hosts_file, hosts_command, trust_hosts_command, slurm, docker_command, ssh, roles, rendezvous, image_pull, "
                  "on_worker_exit, stop_grace, timeout, lease, wait, health, network, artifacts, forward, workdir, files, teardown, restart, spare_hosts, preemption, progress, on_failure, secrets, registry, storage, notify, mpi, array, parallel, array_retries, hosts_per_member or host_groups)"));
  EXPECT_THAT(Errors("name: x\nimage: i\ncontainer:\n  <<: {shm_size: 1g}\n"),
              ElementsAre("job.yaml:4:3: container.<<: merge keys ('<<') are not supported; repeat "
                          "the keys, or alias the whole block"));
}

TEST_F(JobFileTest, TeardownPlaceholdersMustExistAndHostVarsMustBeSetOnEveryHost) {
  EXPECT_THAT(Errors("name: x\nimage: i\nhosts:\n  - {address: a, vars: {id: i-1}}\n  - b\n"
                     "teardown:\n  local_command: terminate \"$BARGE_VAR_id\"\n"
                     "  host_command: echo {host.adress}\n"),
              ElementsAre("job.yaml:7:18: teardown.local_command: $BARGE_VAR_id is not set in "
                          "hosts[1].vars (line 5)",
                          "job.yaml:8:17: teardown.host_command: unknown placeholder {host.adress} "
                          "(expected {host.address}, {host.internal_address} or {job.id}, or "
                          "\"$BARGE_VAR_NAME\" for a host's vars); did you mean {host.address}?"));
}

TEST_F(JobFileTest, AHostVarPastedIntoAHooksTextIsRefusedNamingTheVariableToReadInstead) {
  // Inside the user's own double quotes, a quoted value's $(...) would run.
  EXPECT_THAT(Errors("name: x\nimage: i\nhosts:\n  - {address: a, vars: {id: i-1}}\n"
                     "teardown:\n  local_command: 'terminate \"{host.vars.id}\"'\n"),
              ElementsAre("job.yaml:6:18: teardown.local_command: {host.vars.id} would paste a host's "
                          "value into the hook's shell text: write \"$BARGE_VAR_id\" instead (barge "
                          "sets it for the hook)"));
}

TEST_F(JobFileTest, ValuesWithNulEscapesAreRejected) {
  EXPECT_THAT(Errors("name: x\nimage: i\ncontainer: {env: {A: \"a\\0b\"}}\n"),
              ElementsAre("job.yaml:3:22: container.env.A: NUL character in the value (Docker and "
                          "shells cannot carry it)"));
}

TEST_F(JobFileTest, ARegexThatDoesNotCompileIsAnError) {
  std::vector<std::string> errors =
      Errors("name: x\nimage: i\nroles: {head: {ready: {log: \"([a-z\"}}}\n");
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_THAT(errors[0],
              ::testing::StartsWith(
                  "job.yaml:3:29: roles.head.ready.log: invalid regular expression '([a-z': "));
}

TEST_F(JobFileTest, ReadyNeedsExactlyOneProbe) {
  EXPECT_THAT(
      Errors("name: x\nimage: i\nroles:\n  head:\n    ready: {tcp_port: 1, log: x}\n"
             "  worker:\n    count: 0\n"),
      ElementsAre("job.yaml:5:26: roles.head.ready.log: give one of tcp_port, log or command, "
                  "not tcp_port and log"));
  EXPECT_THAT(Errors("name: x\nimage: i\nroles:\n  head:\n    ready: {timeout: 5s}\n"),
              ElementsAre("job.yaml:5:5: roles.head.ready: give one of tcp_port, log or command "
                          "(without 'ready:' the head is ready once its container runs)"));
}

TEST_F(JobFileTest, TheTopLevelMustBeAMapping) {
  EXPECT_THAT(
      Errors("- name: x\n"),
      ElementsAre("job.yaml:1:1: expected a mapping of job keys (name:, image:, hosts:, ...), "
                  "got a list"));
}

TEST_F(JobFileTest, TabsInIndentationGetAPlainMessage) {
  EXPECT_THAT(
      Errors("name: x\nimage: i\ncontainer:\n\tshm_size: 1g\n"),
      ElementsAre(
          "job.yaml:4:1: tab character used for indentation (YAML indents with spaces only)"));
  // A tab inside a value is no indentation.
  EXPECT_EQ(
      Spec("name: x\nimage: i\ncommand: \"a\\tb\"\ncontainer: {env: {A: \"x\ty\"}}\n").command,
      (std::vector<std::string>{"sh", "-c", "a\tb"}));
}

TEST_F(JobFileTest, SyntaxErrorsCarryYamlsPositionAndAPlainHint) {
  EXPECT_THAT(Errors("name: x\nimage: i\ncontainer:\n  shm_size: 1g\n    ipc: host\n"),
              ElementsAre("job.yaml:5:8: YAML syntax error: illegal map value (a ':' where no key "
                          "can start: check the indentation, or quote a value that holds ': ')"));
  EXPECT_THAT(
      Errors("name: x\nimage: i\nhosts: [a, *nope]\n"),
      ElementsAre("job.yaml:3:12: YAML syntax error: the referenced anchor is not defined"));
}

TEST_F(JobFileTest, AnUnclosedBracketIsReportedWhereItOpens) {
  // yaml-cpp notices at line 3; the cause is on line 2.
  EXPECT_THAT(Errors("name: x\nimage: [a, b\nhosts: []\n"),
              ElementsAre("job.yaml:2:8: the '[' opened here is never closed with ']'"));
}

TEST_F(JobFileTest, ASecondDocumentIsAnError) {
  EXPECT_THAT(
      Errors("name: x\nimage: i\n---\nname: y\n"),
      ElementsAre(
          "job.yaml:3:1: a second YAML document starts here; a job file holds exactly one"));
}

TEST_F(JobFileTest, AStrayTokenIsASyntaxErrorNotAnEndlessRunOfEmptyDocuments) {
  // yaml-cpp 0.7's LoadAll never returns on this text.
  EXPECT_THAT(Errors(",\nname: x\n\tb\n"),
              ElementsAre("job.yaml:1:1: YAML syntax error: unexpected ','"));
}

TEST_F(JobFileTest, AByteOrderMarkIsAccepted) {
  EXPECT_EQ(Spec("\xEF\xBB\xBFname: x\nimage: i\n").name, "x");
}

TEST_F(JobFileTest, LoadJobFileReadsTheFileAndResolvesAgainstItsDirectory) {
  Write("jobs/job.yaml", "name: from-disk\nimage: i\nssh: {known_hosts: kh}\n");
  LoadedJob job = LoadJobFile(dir_ + "/jobs/job.yaml");
  ASSERT_TRUE(job.spec.has_value());
  EXPECT_EQ(job.spec->name, "from-disk");
  EXPECT_EQ(job.spec->file, dir_ + "/jobs/job.yaml");
  EXPECT_EQ(job.spec->base_dir, dir_ + "/jobs");
  EXPECT_EQ(job.spec->ssh.known_hosts, dir_ + "/jobs/kh");
}

TEST_F(JobFileTest, LoadJobFileReportsAFileItCannotReadWithoutALine) {
  LoadedJob job = LoadJobFile(dir_ + "/missing.yaml");
  ASSERT_EQ(job.errors.size(), 1u);
  EXPECT_EQ(job.errors[0].line, 0);
  EXPECT_EQ(job.errors[0].ToString(),
            dir_ + "/missing.yaml: cannot read job file: No such file or directory");
  EXPECT_EQ(LoadJobFile(dir_).errors[0].ToString(),
            dir_ + ": cannot read job file: it is a directory");
}

TEST_F(JobFileTest, LoadJobFileRefusesAFileOverOneMebibyteWithoutParsingIt) {
  // 10 MiB of a valid-looking job: refused on size alone.
  std::string big = "name: x\nimage: i\ncommand: [";
  while (big.size() < 10 * 1024 * 1024) big += "aaaaaaaaaaaaaa, ";
  big += "b]\n";
  Write("big.yaml", big);
  LoadedJob job = LoadJobFile(dir_ + "/big.yaml");
  ASSERT_EQ(job.errors.size(), 1u);
  EXPECT_EQ(job.errors[0].ToString(),
            dir_ + "/big.yaml:1:1: job file is larger than 1 MiB; barge refuses to parse it");
  // Exactly 1 MiB is still read.
  std::string edge = "name: x\nimage: i\n#";
  edge += std::string(1024 * 1024 - edge.size() - 1, 'x') + "\n";
  ASSERT_EQ(edge.size(), 1024u * 1024u);
  Write("edge.yaml", edge);
  EXPECT_TRUE(LoadJobFile(dir_ + "/edge.yaml").spec.has_value());
}

TEST(JobFileError, ToStringOmitsWhatItDoesNotHave) {
  EXPECT_EQ((JobFileError{"job.yaml", 21, 3, "container.shm_sise",
                          "unknown key; did you mean 'shm_size'?"})
                .ToString(),
            "job.yaml:21:3: container.shm_sise: unknown key; did you mean 'shm_size'?");
  EXPECT_EQ((JobFileError{"job.yaml", 4, 1, "", "empty job file"}).ToString(),
            "job.yaml:4:1: empty job file");
  EXPECT_EQ((JobFileError{"job.yaml", 0, 0, "", "cannot read job file: x"}).ToString(),
            "job.yaml: cannot read job file: x");
}

TEST_F(JobFileTest, ParallelConnectsDefaultsToThirtyTwoAndAcceptsOneTo4096) {
  LoadedJob plain = Parse("name: x\nimage: i\n");
  ASSERT_TRUE(plain.errors.empty());
  EXPECT_EQ(plain.spec->ssh.parallel_connects, 32);
  LoadedJob set = Parse("name: x\nimage: i\nssh: {parallel_connects: 8}\n");
  ASSERT_TRUE(set.errors.empty()) << set.errors[0].ToString();
  EXPECT_EQ(set.spec->ssh.parallel_connects, 8);
  EXPECT_THAT(Errors("name: x\nimage: i\nssh: {parallel_connects: 0}\n"),
              ElementsAre(::testing::StartsWith(
                  "job.yaml:3:26: ssh.parallel_connects: expected a number of SSH handshakes at once "
                  "from 1 to 4096, got '0'")));
  EXPECT_THAT(Errors("name: x\nimage: i\nssh: {parallel_connects: many}\n"),
              ElementsAre(::testing::HasSubstr("ssh.parallel_connects: expected")));
}

}  // namespace
}  // namespace barge::runner

namespace barge::runner {
namespace {

TEST_F(JobFileTest, ForwardTakesPortsLocalRemotePairsAndMappingsWithANode) {
  LoadedJob job = Parse("name: x\nimage: i\nforward: [8265, \"16006:6006\", {port: 8888, node: 1}]\n");
  ASSERT_TRUE(job.spec) << (job.errors.empty() ? "" : job.errors[0].ToString());
  ASSERT_EQ(job.spec->forward.size(), 3u);
  EXPECT_EQ(job.spec->forward[0].local_port, 8265);
  EXPECT_EQ(job.spec->forward[0].remote_port, 8265);
  EXPECT_EQ(job.spec->forward[0].rank, 0);
  EXPECT_EQ(job.spec->forward[1].local_port, 16006);
  EXPECT_EQ(job.spec->forward[1].remote_port, 6006);
  EXPECT_EQ(job.spec->forward[2].local_port, 8888);
  EXPECT_EQ(job.spec->forward[2].rank, 1);
}

TEST_F(JobFileTest, ForwardErrorsNameTheEntryAndWhatIsWrong) {
  EXPECT_THAT(Errors("name: x\nimage: i\nforward: [\"a:80\"]\n"),
              ::testing::ElementsAre(::testing::HasSubstr("forward[0]: 'a:80' is not [LOCAL:]REMOTE")));
  EXPECT_THAT(Errors("name: x\nimage: i\nforward: [{node: 1}]\n"),
              ::testing::ElementsAre(::testing::HasSubstr("forward[0].port: missing")));
  EXPECT_THAT(Errors("name: x\nimage: i\nforward: [8080, \"8080:9090\"]\n"),
              ::testing::ElementsAre(::testing::HasSubstr(
                  "forward[1]: local port 8080 is already forwarded by forward[0]")));
  EXPECT_THAT(Errors("name: x\nimage: i\nforward: [{port: 80, node: -1}]\n"),
              ::testing::ElementsAre(::testing::HasSubstr("forward[0].node: expected a rank")));
}

}  // namespace
}  // namespace barge::runner

// Job arrays (runner/array/): the keys the array controller reads.
namespace barge::runner {
namespace {

TEST_F(JobFileTest, ArrayKeysReadAMatrixInOrderAndTheRunSettings) {
  LoadedJob job = Parse("name: x\nimage: \"img:{array.tag}\"\narray: {matrix: {lr: [0.1, 0.01], seed: [1, 2, 3]}}\n"
                        "parallel: 2\narray_retries: 1\nhosts_per_member: 2\n");
  ASSERT_TRUE(job.spec) << (job.errors.empty() ? "" : job.errors[0].ToString());
  ASSERT_TRUE(job.spec->array);
  ASSERT_EQ(job.spec->array->matrix.size(), 2u);
  EXPECT_EQ(job.spec->array->matrix[0].first, "lr");
  EXPECT_EQ(job.spec->array->matrix[1].second, (std::vector<std::string>{"1", "2", "3"}));
  EXPECT_EQ(job.spec->image, "img:{array.tag}");
  EXPECT_EQ(job.spec->parallel, 2);
  EXPECT_EQ(job.spec->array_retries, 1);
  EXPECT_EQ(job.spec->hosts_per_member, 2);
}

TEST_F(JobFileTest, ArrayErrorsNameTheKey) {
  EXPECT_THAT(Errors("name: x\nimage: i\narray: {}\n"),
              ::testing::ElementsAre(::testing::HasSubstr("array: give either 'file' or 'matrix'")));
  EXPECT_THAT(Errors("name: x\nimage: i\narray: {matrix: {my-lr: [1]}}\n"),
              ::testing::ElementsAre(::testing::HasSubstr(
                  "array.matrix.my-lr: column 'my-lr' is not a lower-case variable name")));
  EXPECT_THAT(Errors("name: x\nimage: i\narray:\n  matrix: {lr: [1], LD_PRELOAD: [/x.so]}\n"),
              ::testing::ElementsAre(::testing::StartsWith(
                  "job.yaml:4:21: array.matrix.LD_PRELOAD: column 'LD_PRELOAD' is not a lower-case variable name")));
  EXPECT_THAT(Errors("name: x\nimage: i\narray: {file: nowhere.csv}\n"),
              ::testing::ElementsAre(::testing::HasSubstr("array.file: cannot read the array's file")));
  EXPECT_THAT(Errors("name: x\nimage: i\nparallel: 0\n"),
              ::testing::ElementsAre(::testing::HasSubstr("parallel: expected a number of members")));
  EXPECT_THAT(Errors("name: x\nimage: \"img:{array.a b}\"\n"),
              ::testing::ElementsAre(::testing::HasSubstr("image:")));
}

}  // namespace
}  // namespace barge::runner
