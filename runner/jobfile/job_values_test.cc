#include "runner/jobfile/job_values.h"

#include <gtest/gtest.h>

#include <string>

namespace barge::runner {
namespace {

TEST(QuoteValue, QuotesEscapesControlCharactersAndShortensLongValues) {
  EXPECT_EQ(QuoteValue("abc"), "'abc'");
  EXPECT_EQ(QuoteValue("a\nb\tc\x01"), "'a\\nb\\tc\\x01'");
  EXPECT_EQ(QuoteValue(std::string(100, 'x')), "'" + std::string(60, 'x') + "...'");
  // 59 ASCII bytes then a 2-byte character: the cut does not split it.
  std::string s = std::string(59, 'x') + "\xC3\xA9" + "yyyy";
  EXPECT_EQ(QuoteValue(s), "'" + std::string(59, 'x') + "...'");
}

TEST(ParseInteger, AcceptsPlainDecimalsOnly) {
  long long v = 0;
  EXPECT_TRUE(ParseInteger("0", &v));
  EXPECT_EQ(v, 0);
  EXPECT_TRUE(ParseInteger("-1", &v));
  EXPECT_EQ(v, -1);
  EXPECT_TRUE(ParseInteger("67108864", &v));
  EXPECT_EQ(v, 67108864);
  for (const char* bad :
       {"", "-", "+1", "022", "1.0", "0x10", "1e3", " 1", "1 ", "abc", "1234567890123456789"}) {
    EXPECT_FALSE(ParseInteger(bad, &v)) << bad;
  }
}

TEST(JobName, LettersDigitsAndSeparatorsUpTo63) {
  EXPECT_TRUE(CheckJobName("ddp-train_2.b").ok());
  EXPECT_TRUE(CheckJobName(std::string(63, 'a')).ok());
  EXPECT_EQ(CheckJobName(std::string(64, 'a')).message(),
            "name is 64 characters long; the limit is 63");
  EXPECT_EQ(
      CheckJobName("my job").message(),
      "invalid name 'my job' (letters, digits, '_', '.', '-'; starting with a letter or digit)");
  EXPECT_FALSE(CheckJobName("-x").ok());
  EXPECT_FALSE(CheckJobName("").ok());
}

TEST(HostAddress, AcceptsNamesAliasesAndIpLiterals) {
  for (const char* a : {"local", "127.0.0.2", "203.0.113.10", "node-1", "gpu_box", "a.example.com",
                        "::1", "2001:db8::10", "fe80::1%eth0", "10x"}) {
    EXPECT_TRUE(CheckHostAddress(a).ok()) << a << ": " << CheckHostAddress(a).message();
  }
}

TEST(HostAddress, RejectsShellSyntaxOptionsAndMalformedLiterals) {
  EXPECT_EQ(CheckHostAddress("node1;reboot").message(),
            "invalid host address 'node1;reboot': ';' is not allowed in a host name");
  EXPECT_EQ(CheckHostAddress("a b").message(),
            "invalid host address 'a b': a space is not allowed in a host name");
  EXPECT_EQ(CheckHostAddress("$(id)").message(),
            "invalid host address '$(id)': '$' is not allowed in a host name");
  EXPECT_EQ(CheckHostAddress("-oProxyCommand=x").message(),
            "invalid host address '-oProxyCommand=x': '=' is not allowed in a host name");
  EXPECT_EQ(CheckHostAddress("-host").message(),
            "invalid host address '-host': a name part may not start or end with '-'");
  EXPECT_EQ(CheckHostAddress("999.1.1.1").message(),
            "invalid host address '999.1.1.1' (not a valid IPv4 address)");
  EXPECT_EQ(CheckHostAddress("[::1]").message(),
            "invalid host address '[::1]' (not an IPv6 address; write IPv6 without brackets)");
  EXPECT_EQ(CheckHostAddress("a..b").message(),
            "invalid host address 'a..b': empty label between dots");
  EXPECT_FALSE(CheckHostAddress("").ok());
  EXPECT_FALSE(CheckHostAddress("h\xC3\xA9").ok());
  EXPECT_FALSE(CheckHostAddress(std::string(254, 'a')).ok());
}

TEST(UserName, RejectsShellSyntaxAndLeadingDash) {
  EXPECT_TRUE(CheckUserName("root").ok());
  EXPECT_TRUE(CheckUserName("svc.deploy-1").ok());
  EXPECT_TRUE(CheckUserName("machine$").ok());
  EXPECT_EQ(CheckUserName("-oX").message(),
            "invalid user name '-oX' (letters, digits, '_', '.', '-', not starting with '-')");
  EXPECT_FALSE(CheckUserName("a b").ok());
  EXPECT_FALSE(CheckUserName("a;b").ok());
  EXPECT_FALSE(CheckUserName("").ok());
}

TEST(ImageReference, AcceptsRegistriesTagsAndDigests) {
  EXPECT_TRUE(CheckImageReference("barge/demo:local").ok());
  EXPECT_TRUE(CheckImageReference("registry.example.com:5000/team/img:1.2").ok());
  EXPECT_TRUE(CheckImageReference("debian@sha256:0123abcd").ok());
  EXPECT_EQ(CheckImageReference("my image").message(),
            "invalid image reference 'my image': a space is not allowed");
  EXPECT_EQ(CheckImageReference("--privileged").message(),
            "invalid image reference '--privileged': must start with a letter or digit");
}

TEST(DockerCommand, AcceptsPlainWordsOnly) {
  EXPECT_TRUE(CheckDockerCommand("docker").ok());
  EXPECT_TRUE(CheckDockerCommand("sudo -n docker").ok());
  EXPECT_TRUE(CheckDockerCommand("/usr/bin/docker --host=unix:///run/docker.sock").ok());
  EXPECT_EQ(CheckDockerCommand("docker; rm -rf /").message(),
            "docker_command \"docker; rm -rf /\": character ; at position 7 is not allowed: write plain words "
            "separated by spaces, without quotes or shell syntax, e.g. \"sudo -n docker\"");
  // The same grammar as the command line is built with: spaces and tabs.
  EXPECT_TRUE(CheckDockerCommand("sudo  -n\tdocker").ok());
  EXPECT_FALSE(CheckDockerCommand("DOCKER_HOST=x docker").ok());
  EXPECT_FALSE(CheckDockerCommand("-x docker").ok());
  EXPECT_FALSE(CheckDockerCommand("").ok());
  EXPECT_FALSE(CheckDockerCommand("$(id)").ok());
}

TEST(EnvName, PortableNamesOnly) {
  EXPECT_TRUE(CheckEnvName("EPOCHS").ok());
  EXPECT_TRUE(CheckEnvName("_x1").ok());
  EXPECT_FALSE(CheckEnvName("1X").ok());
  EXPECT_FALSE(CheckEnvName("A-B").ok());
  EXPECT_FALSE(CheckEnvName("A=B").ok());
  EXPECT_FALSE(CheckEnvName("").ok());
}

TEST(VolumeSpec, AcceptsAbsolutePathsNamedVolumesAndModes) {
  for (const char* v : {"/data:/data", "/data:/data:ro", "cache:/root/.cache", "/a:/b:ro,z",
                        "/a:/b:Z", "/a:/b:rshared"}) {
    EXPECT_TRUE(CheckVolumeSpec(v).ok()) << v << ": " << CheckVolumeSpec(v).message();
  }
}

TEST(VolumeSpec, RejectsRelativePathsColonsAndUnknownModes) {
  EXPECT_EQ(CheckVolumeSpec("./data:/data").message(),
            "invalid volume './data:/data': host side './data' must be an absolute path or a "
            "volume name");
  EXPECT_EQ(CheckVolumeSpec("/data:data").message(),
            "invalid volume '/data:data': container path 'data' is not an absolute path");
  EXPECT_EQ(
      CheckVolumeSpec("/data").message(),
      "invalid volume '/data' (expected HOST_PATH:CONTAINER_PATH[:MODE], e.g. /data:/data:ro)");
  EXPECT_EQ(CheckVolumeSpec("/a:b:/c:/d").message(),
            "invalid volume '/a:b:/c:/d': too many ':' (a path may not contain ':')");
  EXPECT_EQ(CheckVolumeSpec("/a:/b:rx").message(),
            "invalid volume '/a:/b:rx': unknown mode 'rx' (expected ro, rw, z, Z, shared, slave, "
            "private, nocopy, ...)");
  EXPECT_EQ(CheckVolumeSpec("/a:/b:ro,rw").message(),
            "invalid volume '/a:/b:ro,rw': both 'ro' and 'rw'");
  EXPECT_FALSE(CheckVolumeSpec(":/data").ok());
  EXPECT_FALSE(CheckVolumeSpec("/data:").ok());
}

TEST(VolumeSpec, PathsMustStayUnderPathMax) {
  std::string long_path = "/" + std::string(5000, 'a');
  Status s = CheckVolumeSpec(long_path + ":/data");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("host path is 5001 bytes long; the limit is 4095"), std::string::npos)
      << s.message();
  EXPECT_TRUE(CheckVolumeSpec("/" + std::string(4000, 'a') + ":/data").ok());
}

TEST(DeviceSpec, HostContainerAndPermissions) {
  for (const char* d :
       {"/dev/fuse", "/dev/sda:/dev/xvda", "/dev/sda:/dev/xvda:rwm", "/dev/sda:r"}) {
    EXPECT_TRUE(CheckDeviceSpec(d).ok()) << d << ": " << CheckDeviceSpec(d).message();
  }
  EXPECT_EQ(CheckDeviceSpec("fuse").message(),
            "invalid device 'fuse': host device 'fuse' is not an absolute path");
  EXPECT_EQ(CheckDeviceSpec("/dev/a:/dev/b:x").message(),
            "invalid device '/dev/a:/dev/b:x': permissions 'x' must be made of r, w, m");
  EXPECT_FALSE(CheckDeviceSpec("/dev/a:b").ok());
  EXPECT_FALSE(CheckDeviceSpec("/a:/b:r:w").ok());
}

TEST(DockerModes, CpusIsADecimalAboveZeroAsDockerTakesIt) {
  for (const char* good : {"1", "4", "1.5", "0.25", "0.000000001", "128"}) EXPECT_TRUE(CheckCpus(good).ok()) << good;
  for (const char* bad : {"", "0", "0.0", ".5", "1.", "-1", "1.0000000001", "1e3", "two", "1,5"}) {
    EXPECT_FALSE(CheckCpus(bad).ok()) << bad;
  }
  EXPECT_EQ(CheckCpus("0").message(), "invalid cpus '0' (expected a number of CPUs above zero, e.g. 4 or 1.5)");
}

TEST(DockerModes, CapabilitiesIpcNetworkAndGpuIds) {
  EXPECT_TRUE(CheckCapability("SYS_ADMIN").ok());
  EXPECT_TRUE(CheckCapability("ALL").ok());
  EXPECT_FALSE(CheckCapability("SYS ADMIN").ok());
  EXPECT_FALSE(CheckCapability("1CAP").ok());
  EXPECT_TRUE(CheckIpcMode("host").ok());
  EXPECT_TRUE(CheckIpcMode("container:head").ok());
  EXPECT_EQ(CheckIpcMode("hots").message(),
            "invalid ipc mode 'hots' (expected host, private, shareable, none or container:NAME)");
  EXPECT_TRUE(CheckNetworkMode("host").ok());
  EXPECT_TRUE(CheckNetworkMode("my-net").ok());
  EXPECT_TRUE(CheckNetworkMode("container:x").ok());
  EXPECT_FALSE(CheckNetworkMode("a b").ok());
  EXPECT_FALSE(CheckNetworkMode("container:").ok());
  EXPECT_TRUE(CheckGpuDeviceId("0").ok());
  EXPECT_TRUE(CheckGpuDeviceId("GPU-8f6e1b2c-aaaa").ok());
  EXPECT_FALSE(CheckGpuDeviceId("0,1").ok());
}

TEST(Ulimit, NumbersOrSoftHardWithMinusOneUnlimited) {
  for (const char* v : {"-1", "0", "67108864", "1024:2048", "-1:-1", "5:-1"}) {
    EXPECT_TRUE(CheckUlimitValue(v).ok()) << v;
  }
  EXPECT_EQ(CheckUlimitValue("lots").message(),
            "invalid ulimit 'lots' (expected a number or SOFT:HARD; -1 means unlimited)");
  EXPECT_EQ(CheckUlimitValue("2048:1024").message(),
            "invalid ulimit '2048:1024': the soft limit is above the hard limit");
  EXPECT_FALSE(CheckUlimitValue("-2").ok());
  EXPECT_FALSE(CheckUlimitValue("-1:5").ok());
  EXPECT_FALSE(CheckUlimitValue("1:2:3").ok());
  EXPECT_EQ(UlimitNames().size(), 15u);
}

}  // namespace
TEST(SplitDockerCommand, SplitsPlainWordsOnSpacesAndTabs) {
  Result<std::vector<std::string>> plain = SplitDockerCommand("docker");
  ASSERT_TRUE(plain.ok()) << plain.status().message();
  EXPECT_EQ(*plain, (std::vector<std::string>{"docker"}));
  Result<std::vector<std::string>> sudo = SplitDockerCommand("  sudo -n\tdocker  ");
  ASSERT_TRUE(sudo.ok()) << sudo.status().message();
  EXPECT_EQ(*sudo, (std::vector<std::string>{"sudo", "-n", "docker"}));
  Result<std::vector<std::string>> env = SplitDockerCommand("env DOCKER_HOST=unix:///run/d-1.sock /usr/bin/docker");
  ASSERT_TRUE(env.ok()) << env.status().message();
  EXPECT_EQ(*env, (std::vector<std::string>{"env", "DOCKER_HOST=unix:///run/d-1.sock", "/usr/bin/docker"}));
}

TEST(SplitDockerCommand, RejectsAnEmptyOrBlankValue) {
  for (const char* value : {"", "   ", "\t"}) {
    Result<std::vector<std::string>> r = SplitDockerCommand(value);
    ASSERT_FALSE(r.ok()) << "'" << value << "'";
    EXPECT_NE(r.status().message().find("docker_command is empty"), std::string::npos);
  }
}

TEST(SplitDockerCommand, RejectsQuotesAndShellSyntaxNamingTheCharacter) {
  const std::pair<const char*, const char*> cases[] = {
      {"sudo -n 'docker'", "character '"}, {"sudo \"docker\"", "character \""},
      {"docker; rm -rf /", "character ;"}, {"$(which docker)", "character $"},
      {"`which docker`", "character `"},   {"docker | tee", "character |"},
      {"docker > x", "character >"},       {"docker &", "character &"},
      {"~/bin/docker", "character ~"},     {"dock*", "character *"},
      {"docker\nrm", "byte 0x0a"},         {"sudo\\ docker", "character \\"},
      {"dócker", "byte 0xc3"},
  };
  for (const auto& [value, named] : cases) {
    Result<std::vector<std::string>> r = SplitDockerCommand(value);
    ASSERT_FALSE(r.ok()) << value;
    EXPECT_NE(r.status().message().find(named), std::string::npos) << r.status().message();
    EXPECT_NE(r.status().message().find("docker_command"), std::string::npos);
  }
}

TEST(SplitDockerCommand, AVariableAssignmentFirstIsRejectedWithAHintToUseEnv) {
  Result<std::vector<std::string>> r = SplitDockerCommand("DOCKER_HOST=unix:///x.sock docker");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("env DOCKER_HOST=unix:///x.sock docker"), std::string::npos)
      << r.status().message();
}

TEST(SplitDockerCommand, ThePositionOfTheBadCharacterIsOneBased) {
  Result<std::vector<std::string>> r = SplitDockerCommand("ab$");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("at position 3"), std::string::npos) << r.status().message();
}

}  // namespace barge::runner
