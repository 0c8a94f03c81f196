// CreateBody's translation of each option, and the sizes as Docker reads
// them. (That the engine then makes the same container as `docker create`
// is docker_api_bed_test.cc's check.)
#include "container/create_body.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace barge::container {
namespace {

using nlohmann::json;

json Body(const ContainerSpec& spec) {
  Result<std::string> body = CreateBody(spec);
  EXPECT_TRUE(body.ok()) << body.status().message();
  return body.ok() ? json::parse(*body) : json();
}

ContainerSpec Minimal() {
  ContainerSpec spec;
  spec.name = "n";
  spec.image = "img:1";
  return spec;
}

TEST(SizeInBytes, ReadsSizesAsGoUnitsRamInBytesDoes) {
  EXPECT_EQ(SizeInBytes("1024"), 1024);
  EXPECT_EQ(SizeInBytes("512m"), 512LL << 20);
  EXPECT_EQ(SizeInBytes("2g"), 2LL << 30);
  EXPECT_EQ(SizeInBytes("2GB"), 2LL << 30);
  EXPECT_EQ(SizeInBytes("4KiB"), 4096);
  EXPECT_EQ(SizeInBytes("1.5g"), 1610612736);
  EXPECT_EQ(SizeInBytes("1 t"), 1LL << 40);
  EXPECT_EQ(SizeInBytes("100b"), 100);
  EXPECT_EQ(SizeInBytes("16 gigs"), std::nullopt);
  EXPECT_EQ(SizeInBytes("-1g"), std::nullopt);
  EXPECT_EQ(SizeInBytes(""), std::nullopt);
  EXPECT_EQ(SizeInBytes("1."), std::nullopt);
  EXPECT_EQ(SizeInBytes("g"), std::nullopt);
}

TEST(CreateBody, AMinimalSpecCarriesTheDefaultsTheCliSends) {
  ContainerSpec spec = Minimal();
  json b = Body(spec);
  EXPECT_EQ(b["Image"], "img:1");
  EXPECT_FALSE(b.contains("Cmd")) << "no command: the image's own CMD";
  EXPECT_EQ(b["Env"], json::array());
  EXPECT_EQ(b["Labels"], json::object());
  EXPECT_EQ(b["AttachStdout"], true);
  EXPECT_EQ(b["AttachStderr"], true);
  const json& h = b["HostConfig"];
  EXPECT_EQ(h["NetworkMode"], "default");
  EXPECT_EQ(h["RestartPolicy"]["Name"], "no");
  EXPECT_FALSE(h.contains("Ulimits"));
  EXPECT_FALSE(h.contains("Devices"));
  EXPECT_FALSE(h.contains("Binds"));
  EXPECT_FALSE(h.contains("CapAdd"));
  EXPECT_FALSE(h.contains("DeviceRequests"));
  EXPECT_FALSE(b.contains("NetworkingConfig"));
}

TEST(CreateBody, EveryOptionGoesWhereTheCliPutsIt) {
  ContainerSpec spec = Minimal();
  spec.labels = {{"barge.job", "j1"}, {"barge.rank", "0"}};
  spec.env = {{"MASTER_ADDR", "10.0.0.1"}, {"A", "x=y"}};
  spec.command = std::vector<std::string>{"sh", "-c", "echo hi"};
  ContainerOptions& o = spec.options;
  o.shm_size = "1g";
  o.memory = "512m";
  o.cpus = "2.25";
  o.cap_add = std::vector<std::string>{"sys_admin", "CAP_NET_ADMIN", "SYS_ADMIN"};
  o.ipc = "host";
  o.network = "host";
  o.ulimits = KeyValues{{"memlock", "-1"}, {"nofile", "1024:2048"}};
  o.devices = std::vector<std::string>{"/dev/fuse", "/dev/null:/dev/mynull", "/dev/zero:rw",
                                       "/dev/a:/dev/b:r"};
  o.volumes = std::vector<std::string>{"/data:/data:ro", "cache:/cache"};
  json b = Body(spec);
  EXPECT_EQ(b["Cmd"], json({"sh", "-c", "echo hi"}));
  EXPECT_EQ(b["Env"], json({"MASTER_ADDR=10.0.0.1", "A=x=y"}));
  EXPECT_EQ(b["Labels"], json({{"barge.job", "j1"}, {"barge.rank", "0"}}));
  const json& h = b["HostConfig"];
  EXPECT_EQ(h["ShmSize"], 1LL << 30);
  EXPECT_EQ(h["Memory"], 512LL << 20);
  EXPECT_EQ(h["NanoCpus"], 2250000000LL);
  EXPECT_EQ(h["CapAdd"], json({"CAP_NET_ADMIN", "CAP_SYS_ADMIN"})) << "normalized, once each, sorted";
  EXPECT_EQ(h["IpcMode"], "host");
  EXPECT_EQ(h["NetworkMode"], "host");
  EXPECT_EQ(h["Ulimits"], json::parse(R"([{"Name":"memlock","Hard":-1,"Soft":-1},
                                          {"Name":"nofile","Hard":2048,"Soft":1024}])"));
  EXPECT_EQ(h["Devices"], json::parse(R"([
    {"PathOnHost":"/dev/fuse","PathInContainer":"/dev/fuse","CgroupPermissions":"rwm"},
    {"PathOnHost":"/dev/null","PathInContainer":"/dev/mynull","CgroupPermissions":"rwm"},
    {"PathOnHost":"/dev/zero","PathInContainer":"/dev/zero","CgroupPermissions":"rw"},
    {"PathOnHost":"/dev/a","PathInContainer":"/dev/b","CgroupPermissions":"r"}])"));
  EXPECT_EQ(h["Binds"], json({"/data:/data:ro", "cache:/cache"}));
  EXPECT_FALSE(b.contains("NetworkingConfig")) << "host is the engine's own network mode";
}

TEST(CreateBody, AllIsKeptBesideTheOtherCapabilitiesAsTheCliKeepsIt) {
  ContainerSpec spec = Minimal();
  spec.options.cap_add = std::vector<std::string>{"SYS_ADMIN", "all"};
  EXPECT_EQ(Body(spec)["HostConfig"]["CapAdd"], json({"ALL", "CAP_SYS_ADMIN"}));
}

TEST(CreateBody, ANameGivenTwiceInTheEnvKeepsItsLastValueOnce) {
  ContainerSpec spec = Minimal();
  spec.env = {{"A", "1"}, {"B", "2"}, {"A", "3"}};
  EXPECT_EQ(Body(spec)["Env"], json({"B=2", "A=3"}));
}

TEST(CreateBody, GpusBecomeTheDeviceRequestTheCliMakes) {
  ContainerSpec spec = Minimal();
  spec.options.gpus = "all";
  json r = Body(spec)["HostConfig"]["DeviceRequests"];
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0]["Count"], -1);
  EXPECT_TRUE(r[0]["DeviceIDs"].is_null());
  EXPECT_EQ(r[0]["Capabilities"], json::parse(R"([["gpu"]])"));
  EXPECT_EQ(r[0]["Driver"], "");
  EXPECT_EQ(r[0]["Options"], json::object());

  spec.options.gpus = "2";
  EXPECT_EQ(Body(spec)["HostConfig"]["DeviceRequests"][0]["Count"], 2);

  spec.options.gpus = "\"device=0,3\"";
  r = Body(spec)["HostConfig"]["DeviceRequests"];
  EXPECT_EQ(r[0]["Count"], 0);
  EXPECT_EQ(r[0]["DeviceIDs"], json({"0", "3"}));
}

TEST(CreateBody, AUserNetworkIsNamedInTheEndpointsAsTheCliDoes) {
  ContainerSpec spec = Minimal();
  spec.options.network = "trainnet";
  json b = Body(spec);
  EXPECT_EQ(b["HostConfig"]["NetworkMode"], "trainnet");
  EXPECT_EQ(b["NetworkingConfig"]["EndpointsConfig"], json({{"trainnet", json::object()}}));
}

TEST(CreateBody, WhatOnlyTheCliCanSayIsAnErrorNamingIt) {
  ContainerSpec spec = Minimal();
  spec.options.run_options = std::vector<std::string>{"--init"};
  Result<std::string> b = CreateBody(spec);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("run_options"), std::string::npos) << b.status().message();

  spec = Minimal();
  spec.options.run_options = std::vector<std::string>{};
  EXPECT_TRUE(CreateBody(spec).ok()) << "an empty list says nothing";

  spec = Minimal();
  spec.options.gpus = "capabilities=compute";
  b = CreateBody(spec);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("gpus"), std::string::npos) << b.status().message();

  spec = Minimal();
  spec.options.shm_size = "lots";
  EXPECT_FALSE(CreateBody(spec).ok());

  spec = Minimal();
  spec.options.devices = std::vector<std::string>{"/a:/b:rw:x"};
  EXPECT_FALSE(CreateBody(spec).ok());
}

}  // namespace
}  // namespace barge::container
