// Parsers of the Docker CLI's output, fed what the real engine printed.
//
// Every JSON document below was captured from Docker 20.10.24 (Debian 12's
// docker.io) driven by the 28.2.2 client, on the development machine:
//   docker run --name bargectr-exit3 --label barge.job=j1 --label barge.rank=0
//     -e EPOCHS=3 barge/test:local sh -c 'echo out; echo err >&2; exit 3'
//   docker inspect bargectr-exit3            (kFullInspectExited, untrimmed)
// and likewise a running container (later `docker kill`ed), one OOM-killed
// under --memory 6m, one whose command does not exist, one only created.
// Those are trimmed to the fields around the ones barge reads.
#include "container/inspect.h"

#include <gtest/gtest.h>

namespace barge::container {
namespace {

// docker inspect bargectr-exit3, exactly as printed.
constexpr std::string_view kFullInspectExited = R"json([
    {
        "Id": "dd061f118fa1747366d7bfbf9bc23200bcac2cd1c4b6e4681c7af8f5ee81e325",
        "Created": "2026-11-22T04:37:33.903568606Z",
        "Path": "sh",
        "Args": [
            "-c",
            "echo out; echo err >&2; exit 3"
        ],
        "State": {
            "Status": "exited",
            "Running": false,
            "Paused": false,
            "Restarting": false,
            "OOMKilled": false,
            "Dead": false,
            "Pid": 0,
            "ExitCode": 3,
            "Error": "",
            "StartedAt": "2026-11-22T04:37:34.122147266Z",
            "FinishedAt": "2026-11-22T04:37:34.126589952Z"
        },
        "Image": "sha256:94216f9217d0fb4396d56012f02fab7b51863a7e2c7731a94297b8af7d81b382",
        "ResolvConfPath": "/var/lib/docker/containers/dd061f118fa1747366d7bfbf9bc23200bcac2cd1c4b6e4681c7af8f5ee81e325/resolv.conf",
        "HostnamePath": "/var/lib/docker/containers/dd061f118fa1747366d7bfbf9bc23200bcac2cd1c4b6e4681c7af8f5ee81e325/hostname",
        "HostsPath": "/var/lib/docker/containers/dd061f118fa1747366d7bfbf9bc23200bcac2cd1c4b6e4681c7af8f5ee81e325/hosts",
        "LogPath": "/var/lib/docker/containers/dd061f118fa1747366d7bfbf9bc23200bcac2cd1c4b6e4681c7af8f5ee81e325/dd061f118fa1747366d7bfbf9bc23200bcac2cd1c4b6e4681c7af8f5ee81e325-json.log",
        "Name": "/bargectr-exit3",
        "RestartCount": 0,
        "Driver": "overlay2",
        "Platform": "linux",
        "MountLabel": "",
        "ProcessLabel": "",
        "AppArmorProfile": "",
        "ExecIDs": null,
        "HostConfig": {
            "Binds": null,
            "ContainerIDFile": "",
            "LogConfig": {
                "Type": "json-file",
                "Config": {}
            },
            "NetworkMode": "default",
            "PortBindings": {},
            "RestartPolicy": {
                "Name": "no",
                "MaximumRetryCount": 0
            },
            "AutoRemove": false,
            "VolumeDriver": "",
            "VolumesFrom": null,
            "CapAdd": null,
            "CapDrop": null,
            "CgroupnsMode": "host",
            "Dns": [],
            "DnsOptions": [],
            "DnsSearch": [],
            "ExtraHosts": null,
            "GroupAdd": null,
            "IpcMode": "private",
            "Cgroup": "",
            "Links": null,
            "OomScoreAdj": 0,
            "PidMode": "",
            "Privileged": false,
            "PublishAllPorts": false,
            "ReadonlyRootfs": false,
            "SecurityOpt": null,
            "UTSMode": "",
            "UsernsMode": "",
            "ShmSize": 67108864,
            "Runtime": "runc",
            "ConsoleSize": [
                0,
                0
            ],
            "Isolation": "",
            "CpuShares": 0,
            "Memory": 0,
            "NanoCpus": 0,
            "CgroupParent": "",
            "BlkioWeight": 0,
            "BlkioWeightDevice": [],
            "BlkioDeviceReadBps": [],
            "BlkioDeviceWriteBps": [],
            "BlkioDeviceReadIOps": [],
            "BlkioDeviceWriteIOps": [],
            "CpuPeriod": 0,
            "CpuQuota": 0,
            "CpuRealtimePeriod": 0,
            "CpuRealtimeRuntime": 0,
            "CpusetCpus": "",
            "CpusetMems": "",
            "Devices": [],
            "DeviceCgroupRules": null,
            "DeviceRequests": null,
            "KernelMemory": 0,
            "KernelMemoryTCP": 0,
            "MemoryReservation": 0,
            "MemorySwap": 0,
            "MemorySwappiness": null,
            "OomKillDisable": false,
            "PidsLimit": null,
            "Ulimits": [],
            "CpuCount": 0,
            "CpuPercent": 0,
            "IOMaximumIOps": 0,
            "IOMaximumBandwidth": 0,
            "MaskedPaths": [
                "/proc/asound",
                "/proc/acpi",
                "/proc/kcore",
                "/proc/keys",
                "/proc/latency_stats",
                "/proc/timer_list",
                "/proc/timer_stats",
                "/proc/sched_debug",
                "/proc/scsi",
                "/sys/firmware"
            ],
            "ReadonlyPaths": [
                "/proc/bus",
                "/proc/fs",
                "/proc/irq",
                "/proc/sys",
                "/proc/sysrq-trigger"
            ]
        },
        "GraphDriver": {
            "Data": {
                "LowerDir": "/var/lib/docker/overlay2/fd740a4343a7724356f4798cc5f0c585fd371f0b27e57fe0d948b1832fbb5cf9-init/diff:/var/lib/docker/overlay2/5eb75a41e4daae8d490c480bd04f42cccc623170bdc4ba9a4ffdf11f5edc7cce/diff",
                "MergedDir": "/var/lib/docker/overlay2/fd740a4343a7724356f4798cc5f0c585fd371f0b27e57fe0d948b1832fbb5cf9/merged",
                "UpperDir": "/var/lib/docker/overlay2/fd740a4343a7724356f4798cc5f0c585fd371f0b27e57fe0d948b1832fbb5cf9/diff",
                "WorkDir": "/var/lib/docker/overlay2/fd740a4343a7724356f4798cc5f0c585fd371f0b27e57fe0d948b1832fbb5cf9/work"
            },
            "Name": "overlay2"
        },
        "Mounts": [],
        "Config": {
            "Hostname": "dd061f118fa1",
            "Domainname": "",
            "User": "",
            "AttachStdin": false,
            "AttachStdout": true,
            "AttachStderr": true,
            "Tty": false,
            "OpenStdin": false,
            "StdinOnce": false,
            "Env": [
                "EPOCHS=3"
            ],
            "Cmd": [
                "sh",
                "-c",
                "echo out; echo err >&2; exit 3"
            ],
            "Image": "barge/test:local",
            "Volumes": null,
            "WorkingDir": "",
            "Entrypoint": null,
            "OnBuild": null,
            "Labels": {
                "barge.job": "j1",
                "barge.rank": "0"
            }
        },
        "NetworkSettings": {
            "Bridge": "",
            "SandboxID": "637c71af7a4ce986da32ce6e1e34cd3c399d1ab567078ecd6ff734486b5bce67",
            "HairpinMode": false,
            "LinkLocalIPv6Address": "",
            "LinkLocalIPv6PrefixLen": 0,
            "Ports": {},
            "SandboxKey": "/var/run/docker/netns/637c71af7a4c",
            "SecondaryIPAddresses": null,
            "SecondaryIPv6Addresses": null,
            "EndpointID": "",
            "Gateway": "",
            "GlobalIPv6Address": "",
            "GlobalIPv6PrefixLen": 0,
            "IPAddress": "",
            "IPPrefixLen": 0,
            "IPv6Gateway": "",
            "MacAddress": "",
            "Networks": {
                "bridge": {
                    "IPAMConfig": null,
                    "Links": null,
                    "Aliases": null,
                    "NetworkID": "6e8ef32f3caa99b8d9def148ea4e661e39562836361923787528e64c94704e0a",
                    "EndpointID": "",
                    "Gateway": "",
                    "IPAddress": "",
                    "IPPrefixLen": 0,
                    "IPv6Gateway": "",
                    "GlobalIPv6Address": "",
                    "GlobalIPv6PrefixLen": 0,
                    "MacAddress": "",
                    "DriverOpts": null
                }
            }
        }
    }
]
)json";

// Running: FinishedAt is Docker's zero time.
constexpr std::string_view kInspectRunning = R"json([
 {
  "Id": "573549dbd1d3d2941c196fb822691d77484bd09a1f114eba62a54b024545174f",
  "Created": "2026-11-22T04:37:34.226071718Z",
  "Path": "sh",
  "Args": [
   "-c",
   "i=0; while true; do echo line $i; i=$((i+1)); sleep 0.3; done"
  ],
  "State": {
   "Status": "running",
   "Running": true,
   "Paused": false,
   "Restarting": false,
   "OOMKilled": false,
   "Dead": false,
   "Pid": 5048,
   "ExitCode": 0,
   "Error": "",
   "StartedAt": "2026-11-22T04:37:34.424503231Z",
   "FinishedAt": "0001-01-01T00:00:00Z"
  },
  "Image": "sha256:94216f9217d0fb4396d56012f02fab7b51863a7e2c7731a94297b8af7d81b382",
  "Name": "/bargectr-run",
  "RestartCount": 0,
  "Config": {
   "Hostname": "573549dbd1d3",
   "Env": null,
   "Cmd": [
    "sh",
    "-c",
    "i=0; while true; do echo line $i; i=$((i+1)); sleep 0.3; done"
   ],
   "Image": "barge/test:local",
   "Labels": {
    "barge.job": "j1",
    "barge.rank": "1",
    "barge.role": "worker"
   }
  }
 }
])json";

// The same container after `docker kill`.
constexpr std::string_view kInspectKilled = R"json([
 {
  "Id": "573549dbd1d3d2941c196fb822691d77484bd09a1f114eba62a54b024545174f",
  "Created": "2026-11-22T04:37:34.226071718Z",
  "Path": "sh",
  "Args": [
   "-c",
   "i=0; while true; do echo line $i; i=$((i+1)); sleep 0.3; done"
  ],
  "State": {
   "Status": "exited",
   "Running": false,
   "Paused": false,
   "Restarting": false,
   "OOMKilled": false,
   "Dead": false,
   "Pid": 0,
   "ExitCode": 137,
   "Error": "",
   "StartedAt": "2026-11-22T04:37:34.424503231Z",
   "FinishedAt": "2026-11-22T04:37:42.124709638Z"
  },
  "Image": "sha256:94216f9217d0fb4396d56012f02fab7b51863a7e2c7731a94297b8af7d81b382",
  "Name": "/bargectr-run",
  "RestartCount": 0,
  "Config": {
   "Hostname": "573549dbd1d3",
   "Env": null,
   "Cmd": [
    "sh",
    "-c",
    "i=0; while true; do echo line $i; i=$((i+1)); sleep 0.3; done"
   ],
   "Image": "barge/test:local",
   "Labels": {
    "barge.job": "j1",
    "barge.rank": "1",
    "barge.role": "worker"
   }
  }
 }
])json";

// OOM-killed; note FinishedAt has 8 fraction digits (Go drops trailing zeros).
constexpr std::string_view kInspectOomKilled = R"json([
 {
  "Id": "feb487f64d6ad42a75648a10eb997941e78200584a303b5affc07be59baea8c3",
  "Created": "2026-11-22T04:37:38.149781186Z",
  "Path": "sh",
  "Args": [
   "-c",
   "x=$(head -c 100000000 /dev/zero | tr \"\\0\" a); echo ${#x}"
  ],
  "State": {
   "Status": "exited",
   "Running": false,
   "Paused": false,
   "Restarting": false,
   "OOMKilled": true,
   "Dead": false,
   "Pid": 0,
   "ExitCode": 137,
   "Error": "",
   "StartedAt": "2026-11-22T04:37:38.368908394Z",
   "FinishedAt": "2026-11-22T04:37:38.41756031Z"
  },
  "Image": "sha256:94216f9217d0fb4396d56012f02fab7b51863a7e2c7731a94297b8af7d81b382",
  "Name": "/bargectr-oom",
  "RestartCount": 0,
  "Config": {
   "Hostname": "feb487f64d6a",
   "Env": null,
   "Cmd": [
    "sh",
    "-c",
    "x=$(head -c 100000000 /dev/zero | tr \"\\0\" a); echo ${#x}"
   ],
   "Image": "barge/test:local",
   "Labels": {}
  }
 }
])json";

// `docker run IMG /no/such/cmd`: never started, with the runtime's error.
constexpr std::string_view kInspectFailedStart = R"json([
 {
  "Id": "7ec2dfe78a8266f8da5e60168ea61850ee7a6a2033f0a2c28284f3a4ddf64201",
  "Created": "2026-11-22T04:37:41.800736592Z",
  "Path": "/no/such/cmd",
  "Args": [],
  "State": {
   "Status": "created",
   "Running": false,
   "Paused": false,
   "Restarting": false,
   "OOMKilled": false,
   "Dead": false,
   "Pid": 0,
   "ExitCode": 127,
   "Error": "failed to create shim task: OCI runtime create failed: runc create failed: unable to start container process: exec: \"/no/such/cmd\": stat /no/such/cmd: no such file or directory: unknown",
   "StartedAt": "0001-01-01T00:00:00Z",
   "FinishedAt": "0001-01-01T00:00:00Z"
  },
  "Image": "sha256:94216f9217d0fb4396d56012f02fab7b51863a7e2c7731a94297b8af7d81b382",
  "Name": "/bargectr-badcmd",
  "RestartCount": 0,
  "Config": {
   "Hostname": "7ec2dfe78a82",
   "Env": null,
   "Cmd": [
    "/no/such/cmd"
   ],
   "Image": "barge/test:local",
   "Labels": {}
  }
 }
])json";

// `docker create`: never started.
constexpr std::string_view kInspectCreated = R"json([
 {
  "Id": "86250cf7f145f55fcd8c31afe7cf394b32df8f5369367f36340e34f5819fc931",
  "Created": "2026-11-22T04:37:42.274255522Z",
  "Path": "true",
  "Args": [],
  "State": {
   "Status": "created",
   "Running": false,
   "Paused": false,
   "Restarting": false,
   "OOMKilled": false,
   "Dead": false,
   "Pid": 0,
   "ExitCode": 0,
   "Error": "",
   "StartedAt": "0001-01-01T00:00:00Z",
   "FinishedAt": "0001-01-01T00:00:00Z"
  },
  "Image": "sha256:94216f9217d0fb4396d56012f02fab7b51863a7e2c7731a94297b8af7d81b382",
  "Name": "/bargectr-created",
  "RestartCount": 0,
  "Config": {
   "Hostname": "86250cf7f145",
   "Env": null,
   "Cmd": [
    "true"
   ],
   "Image": "barge/test:local",
   "Labels": {}
  }
 }
])json";

// docker version --format '{{json .}}' with the daemon up.
constexpr std::string_view kVersionUp = R"json({"Client":{"Version":"28.2.2","ApiVersion":"1.41","DefaultAPIVersion":"1.50","GitCommit":"e6534b4","GoVersion":"go1.24.3","Os":"linux","Arch":"amd64","BuildTime":"Fri May 30 12:07:14 2025","Context":"default"},"Server":{"Platform":{"Name":""},"Components":[{"Name":"Engine","Version":"20.10.24+dfsg1","Details":{"ApiVersion":"1.41","Arch":"amd64","BuildTime":"Thu May  7 21:09:36 2026","Experimental":"false","GitCommit":"5d6db84","GoVersion":"go1.19.8","KernelVersion":"6.18.44-fc-v669","MinAPIVersion":"1.12","Os":"linux"}},{"Name":"containerd","Version":"1.6.20~ds1","Details":{"GitCommit":"1.6.20~ds1-1+deb12u3"}},{"Name":"runc","Version":"1.1.5+ds1","Details":{"GitCommit":"1.1.5+ds1-1+deb12u1"}},{"Name":"docker-init","Version":"0.19.0","Details":{"GitCommit":""}}],"Version":"20.10.24+dfsg1","ApiVersion":"1.41","MinAPIVersion":"1.12","GitCommit":"5d6db84","GoVersion":"go1.19.8","Os":"linux","Arch":"amd64","KernelVersion":"6.18.44-fc-v669","BuildTime":"2026-05-07T21:09:36.000000000+00:00"}}
)json";

// The same with DOCKER_HOST at a socket nothing listens on (exit 1).
constexpr std::string_view kVersionDaemonDown = R"json({"Client":{"Version":"28.2.2","ApiVersion":"1.50","DefaultAPIVersion":"1.50","GitCommit":"e6534b4","GoVersion":"go1.24.3","Os":"linux","Arch":"amd64","BuildTime":"Fri May 30 12:07:14 2025","Context":"default"},"Server":null}
)json";

// Debian's own 20.10 client, daemon unreachable.
constexpr std::string_view kVersionDebianClientDaemonDown = R"json({"Client":{"Platform":{"Name":""},"Version":"20.10.24+dfsg1","ApiVersion":"1.41","DefaultAPIVersion":"1.41","GitCommit":"297e128","GoVersion":"go1.19.8","Os":"linux","Arch":"amd64","BuildTime":"Thu May  7 21:09:36 2026","Context":"default","Experimental":true},"Server":null}
)json";

// docker ps -a --no-trunc --filter label=barge.job=0a1b2c --format '{{json .}}'
// (the worker also carries --label note=a,b).
constexpr std::string_view kPsJob = R"json({"Command":"\"sh -c 'exit 3'\"","CreatedAt":"2026-11-22 04:42:10 +0000 UTC","ID":"7aa59b9973f13bcfeac9311ef53175e2d29393fc38fbef2c9f87ef07488c6253","Image":"barge/test:local","Labels":"barge.job=0a1b2c,barge.rank=1,barge.role=worker,note=a,b","LocalVolumes":"0","Mounts":"","Names":"bargectr-ps-w1","Networks":"bridge","Platform":null,"Ports":"","RunningFor":"Less than a second ago","Size":"0B (virtual 1.98MB)","State":"exited","Status":"Exited (3) Less than a second ago"}
{"Command":"\"sleep 30\"","CreatedAt":"2026-11-22 04:42:09 +0000 UTC","ID":"00e449a55b97beb8bcd66143a34d525936de6db555845316160f8195947f0b20","Image":"barge/test:local","Labels":"barge.job=0a1b2c,barge.rank=0,barge.role=head","LocalVolumes":"0","Mounts":"","Names":"bargectr-ps-head","Networks":"bridge","Platform":null,"Ports":"","RunningFor":"1 second ago","Size":"0B (virtual 1.98MB)","State":"running","Status":"Up Less than a second"}
)json";

constexpr std::string_view kImageId =
    "sha256:94216f9217d0fb4396d56012f02fab7b51863a7e2c7731a94297b8af7d81b382";

TEST(ParseContainerInspect, OutputNestingDeeperThanTheBoundIsRefusedBeforeItIsParsed) {
  Result<std::vector<ContainerState>> r =
      ParseContainerInspect("[{\"x\": " + std::string(200, '[') + std::string(200, ']') + "}]");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("output nests deeper than 128 levels"), std::string::npos)
      << r.status().message();
}

TEST(ParseContainerInspect, AnExitedContainerGivesItsCodeTimesImageAndLabels) {
  Result<std::vector<ContainerState>> r = ParseContainerInspect(kFullInspectExited);
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->size(), 1u);
  const ContainerState& c = r->front();
  EXPECT_EQ(c.id, "dd061f118fa1747366d7bfbf9bc23200bcac2cd1c4b6e4681c7af8f5ee81e325");
  EXPECT_EQ(c.name, "bargectr-exit3");  // without Docker's leading "/"
  EXPECT_EQ(c.status, "exited");
  EXPECT_FALSE(c.running);
  EXPECT_EQ(c.exit_code, 3);
  EXPECT_FALSE(c.oom_killed);
  EXPECT_EQ(c.error, "");
  EXPECT_EQ(c.started_at_ns, 1795322254122147266);   // 2026-11-22T04:37:34.122147266Z
  EXPECT_EQ(c.finished_at_ns, 1795322254126589952);  // 2026-11-22T04:37:34.126589952Z
  EXPECT_EQ(c.image_id, kImageId);
  EXPECT_EQ(c.labels, (Labels{{"barge.job", "j1"}, {"barge.rank", "0"}}));
}

TEST(ParseContainerInspect, ARunningContainerHasNoFinishTime) {
  Result<std::vector<ContainerState>> r = ParseContainerInspect(kInspectRunning);
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->size(), 1u);
  const ContainerState& c = r->front();
  EXPECT_EQ(c.name, "bargectr-run");
  EXPECT_EQ(c.status, "running");
  EXPECT_TRUE(c.running);
  EXPECT_EQ(c.started_at_ns, 1795322254424503231);
  EXPECT_FALSE(c.finished_at_ns.has_value());
  EXPECT_EQ(c.labels.at("barge.role"), "worker");
}

TEST(ParseContainerInspect, AKilledContainerExitsWith137WithoutOomKilled) {
  Result<std::vector<ContainerState>> r = ParseContainerInspect(kInspectKilled);
  ASSERT_TRUE(r.ok()) << r.status().message();
  const ContainerState& c = r->front();
  EXPECT_EQ(c.status, "exited");
  EXPECT_EQ(c.exit_code, 137);
  EXPECT_FALSE(c.oom_killed);
  EXPECT_EQ(c.finished_at_ns, 1795322262124709638);
}

TEST(ParseContainerInspect, AnOomKilledContainerSaysSoAndItsShortFractionIsExact) {
  Result<std::vector<ContainerState>> r = ParseContainerInspect(kInspectOomKilled);
  ASSERT_TRUE(r.ok()) << r.status().message();
  const ContainerState& c = r->front();
  EXPECT_TRUE(c.oom_killed);
  EXPECT_EQ(c.exit_code, 137);
  EXPECT_TRUE(c.labels.empty());
  // "2026-11-22T04:37:38.41756031Z": 8 digits, i.e. ...417560310 ns.
  EXPECT_EQ(c.finished_at_ns, 1795322258417560310);
}

TEST(ParseContainerInspect, AContainerThatFailedToStartCarriesTheRuntimesError) {
  Result<std::vector<ContainerState>> r = ParseContainerInspect(kInspectFailedStart);
  ASSERT_TRUE(r.ok()) << r.status().message();
  const ContainerState& c = r->front();
  EXPECT_EQ(c.status, "created");
  EXPECT_EQ(c.exit_code, 127);
  EXPECT_NE(c.error.find("exec: \"/no/such/cmd\""), std::string::npos) << c.error;
  EXPECT_FALSE(c.started_at_ns.has_value());
  EXPECT_FALSE(c.finished_at_ns.has_value());
}

TEST(ParseContainerInspect, ACreatedContainerWasNeverStarted) {
  Result<std::vector<ContainerState>> r = ParseContainerInspect(kInspectCreated);
  ASSERT_TRUE(r.ok()) << r.status().message();
  const ContainerState& c = r->front();
  EXPECT_EQ(c.status, "created");
  EXPECT_FALSE(c.running);
  EXPECT_EQ(c.error, "");
  EXPECT_FALSE(c.started_at_ns.has_value());
}

TEST(ParseContainerInspect, SeveralContainersComeBackInDockersOrder) {
  // Docker prints one array; join two captured ones the way it would.
  std::string both(kInspectRunning);
  both.erase(both.find_last_of(']'));
  std::string second(kInspectOomKilled);
  second.erase(0, second.find('[') + 1);
  both += "," + second;
  Result<std::vector<ContainerState>> r = ParseContainerInspect(both);
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ((*r)[0].name, "bargectr-run");
  EXPECT_EQ((*r)[1].name, "bargectr-oom");
}

TEST(ParseContainerInspect, AnEmptyArrayMeansNoContainerWasFound) {
  // What `docker inspect --type container unknown` prints (and exits 1).
  Result<std::vector<ContainerState>> r = ParseContainerInspect("[]\n");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(r->empty());
}

TEST(ParseContainerInspect, MalformedOutputIsAnErrorNotAnException) {
  for (std::string_view bad : {"", "   \n", "[{", "{}", "Error: No such object: x", "[1]",
                               "[{\"Id\":\"x\"} trailing"}) {
    Result<std::vector<ContainerState>> r = ParseContainerInspect(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().message().rfind("docker inspect", 0), 0u) << r.status().message();
  }
}

TEST(ParseContainerInspect, AMissingOrMistypedFieldIsNamedWithItsContainer) {
  Result<std::vector<ContainerState>> missing = ParseContainerInspect(
      R"([{"Id":"abc","Name":"/n1","State":{"Status":"exited","Running":false}}])");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().message(),
            "docker inspect: container 0 (n1): field State.ExitCode is missing");

  Result<std::vector<ContainerState>> mistyped = ParseContainerInspect(
      R"([{"Id":"abc","Name":"/n1","State":{"Status":"exited","Running":"no","ExitCode":0}}])");
  ASSERT_FALSE(mistyped.ok());
  EXPECT_EQ(mistyped.status().message(),
            "docker inspect: container 0 (n1): field State.Running is not true or false");

  Result<std::vector<ContainerState>> no_state =
      ParseContainerInspect(R"([{"Id":"abc","Name":"/n1"}])");
  ASSERT_FALSE(no_state.ok());
  EXPECT_NE(no_state.status().message().find("field State is missing"), std::string::npos);

  Result<std::vector<ContainerState>> bad_label = ParseContainerInspect(
      R"([{"Id":"a","Name":"/n","State":{"Status":"exited","Running":false,"ExitCode":0},
           "Config":{"Labels":{"k":1}}}])");
  ASSERT_FALSE(bad_label.ok());
  EXPECT_NE(bad_label.status().message().find("Config.Labels"), std::string::npos)
      << bad_label.status().message();
}

TEST(ParseContainerInspect, AnUnparseableTimeIsAnErrorNamingTheField) {
  Result<std::vector<ContainerState>> r = ParseContainerInspect(
      R"([{"Id":"a","Name":"/n","State":{"Status":"exited","Running":false,"ExitCode":0,
           "StartedAt":"yesterday"}}])");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("State.StartedAt"), std::string::npos)
      << r.status().message();
}

TEST(ParseContainerInspect, NullLabelsAndAbsentOptionalFieldsReadAsEmpty) {
  Result<std::vector<ContainerState>> r = ParseContainerInspect(
      R"([{"Id":"a","Name":"/n","State":{"Status":"running","Running":true,"ExitCode":0},
           "Config":{"Labels":null}}])");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(r->front().labels.empty());
  EXPECT_EQ(r->front().image_id, "");
  EXPECT_FALSE(r->front().oom_killed);
  EXPECT_FALSE(r->front().started_at_ns.has_value());
}

TEST(ParseVersion, ReadsClientAndServerVersions) {
  Result<ServerVersion> v = ParseVersion(kVersionUp);
  ASSERT_TRUE(v.ok()) << v.status().message();
  EXPECT_EQ(v->client_version, "28.2.2");
  EXPECT_EQ(v->client_api_version, "1.41");
  EXPECT_EQ(v->server_version, "20.10.24+dfsg1");
  EXPECT_EQ(v->server_api_version, "1.41");
  EXPECT_EQ(v->server_os, "linux");
  EXPECT_EQ(v->server_arch, "amd64");
}

TEST(ParseVersion, ANullServerSectionMeansTheDaemonIsUnreachable) {
  for (std::string_view text : {kVersionDaemonDown, kVersionDebianClientDaemonDown,
                                std::string_view(R"({"Client":{"Version":"1"}})")}) {
    Result<ServerVersion> v = ParseVersion(text);
    ASSERT_FALSE(v.ok()) << text;
    EXPECT_NE(v.status().message().find("Docker daemon is unreachable"), std::string::npos)
        << v.status().message();
  }
}

TEST(ParseVersion, MalformedOutputIsAnError) {
  for (std::string_view bad : {"", "Cannot connect to the Docker daemon", "[]", "{\"Client\":",
                               R"({"Server":{"Version":20}})", R"({"Server":{"ApiVersion":"1"}})"}) {
    Result<ServerVersion> v = ParseVersion(bad);
    ASSERT_FALSE(v.ok()) << bad;
    EXPECT_EQ(v.status().message().rfind("docker version", 0), 0u) << v.status().message();
  }
}

TEST(ParsePsLines, ReadsEveryContainerOfAJobWithItsLabels) {
  Result<std::vector<PsEntry>> r = ParsePsLines(kPsJob);
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->size(), 2u);
  const PsEntry& worker = (*r)[0];
  EXPECT_EQ(worker.id, "7aa59b9973f13bcfeac9311ef53175e2d29393fc38fbef2c9f87ef07488c6253");
  EXPECT_EQ(worker.names, "bargectr-ps-w1");
  EXPECT_EQ(worker.image, "barge/test:local");
  EXPECT_EQ(worker.state, "exited");
  EXPECT_EQ(worker.status, "Exited (3) Less than a second ago");
  EXPECT_EQ(worker.labels, (Labels{{"barge.job", "0a1b2c"},
                                   {"barge.rank", "1"},
                                   {"barge.role", "worker"},
                                   {"note", "a,b"}}));
  const PsEntry& head = (*r)[1];
  EXPECT_EQ(head.names, "bargectr-ps-head");
  EXPECT_EQ(head.state, "running");
  EXPECT_EQ(head.labels.at("barge.role"), "head");
}

TEST(ParsePsLines, NoOutputMeansNoContainer) {
  for (std::string_view empty : {"", "\n", "\n\n  \n"}) {
    Result<std::vector<PsEntry>> r = ParsePsLines(empty);
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_TRUE(r->empty());
  }
}

TEST(ParsePsLines, AMissingFinalNewlineAndCrlfAreFine) {
  Result<std::vector<PsEntry>> r =
      ParsePsLines("{\"ID\":\"a\",\"Names\":\"x\",\"Labels\":\"\"}\r\n{\"ID\":\"b\",\"Names\":\"y\"}");
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ((*r)[0].id, "a");
  EXPECT_TRUE((*r)[0].labels.empty());
  EXPECT_EQ((*r)[1].names, "y");
}

TEST(ParsePsLines, AMalformedLineIsNamedByNumber) {
  Result<std::vector<PsEntry>> r =
      ParsePsLines("{\"ID\":\"a\",\"Names\":\"x\"}\n\n{\"ID\":\"b\"\n");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message().rfind("docker ps: line 3", 0), 0u) << r.status().message();
  Result<std::vector<PsEntry>> no_names = ParsePsLines("{\"ID\":\"a\"}\n");
  ASSERT_FALSE(no_names.ok());
  EXPECT_NE(no_names.status().message().find("field Names is missing"), std::string::npos);
}

TEST(ParsePsLabels, SplitsPairsOnCommasAndKeysOnTheFirstEquals) {
  // Docker's rendering of --label empty= --label eq=x=y --label note=a,b.
  EXPECT_EQ(ParsePsLabels("empty=,eq=x=y,note=a,b"),
            (Labels{{"empty", ""}, {"eq", "x=y"}, {"note", "a,b"}}));
  EXPECT_EQ(ParsePsLabels(""), Labels{});
  EXPECT_EQ(ParsePsLabels("a=1"), (Labels{{"a", "1"}}));
  // A value holding ",k=v" is where the format is ambiguous: read as two labels.
  EXPECT_EQ(ParsePsLabels("a=x,b=y"), (Labels{{"a", "x"}, {"b", "y"}}));
}

TEST(ParseWaitOutput, ReadsTheExitCode) {
  Result<int> zero = ParseWaitOutput("0\n");
  ASSERT_TRUE(zero.ok());
  EXPECT_EQ(*zero, 0);
  Result<int> killed = ParseWaitOutput("137\n");
  ASSERT_TRUE(killed.ok());
  EXPECT_EQ(*killed, 137);
  Result<int> no_newline = ParseWaitOutput("3");
  ASSERT_TRUE(no_newline.ok());
  EXPECT_EQ(*no_newline, 3);
}

TEST(ParseWaitOutput, AnythingButANumberIsAnError) {
  for (std::string_view bad : {"", "\n", "abc\n", "3 4\n", "99999999999999\n",
                               "Error response from daemon: No such container: x\n"}) {
    Result<int> r = ParseWaitOutput(bad);
    EXPECT_FALSE(r.ok()) << bad;
  }
}

TEST(ParseImageId, ReadsTheIdDockerPrints) {
  // docker image inspect --format '{{.Id}}' barge/test:local
  Result<std::string> id = ParseImageId(std::string(kImageId) + "\n");
  ASSERT_TRUE(id.ok()) << id.status().message();
  EXPECT_EQ(*id, kImageId);
}

TEST(ParseImageId, RejectsAnythingElse) {
  for (std::string_view bad : {"", "\n", "sha256:abc\n", "94216f9217d0\n",
                               "sha256:94216F9217D0FB4396D56012F02FAB7B51863A7E2C7731A94297B8AF7D81B382",
                               "[]\n"}) {
    Result<std::string> r = ParseImageId(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("expected an image ID"), std::string::npos);
  }
}

}  // namespace
}  // namespace barge::container
