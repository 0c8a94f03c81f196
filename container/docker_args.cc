#include "container/docker_args.h"

#include <cassert>

namespace barge::container {
namespace {

void AddFlag(Argv* argv, const char* flag, const std::optional<std::string>& value) {
  if (!value.has_value()) return;
  argv->push_back(flag);
  argv->push_back(*value);
}

void AddEach(Argv* argv, const char* flag, const std::optional<std::vector<std::string>>& values) {
  if (!values.has_value()) return;
  for (const std::string& v : *values) {
    argv->push_back(flag);
    argv->push_back(v);
  }
}

void AddPairs(Argv* argv, const char* flag, const KeyValues& pairs) {
  for (const auto& [key, value] : pairs) {
    argv->push_back(flag);
    argv->push_back(key + "=" + value);
  }
}

}  // namespace

Argv RunArgs(const ContainerSpec& spec) {
  const ContainerOptions& o = spec.options;
  Argv argv = {"run", "-d", "--name", spec.name};
  AddPairs(&argv, "--label", spec.labels);
  AddPairs(&argv, "-e", spec.env);
  AddFlag(&argv, "--shm-size", o.shm_size);
  AddEach(&argv, "--cap-add", o.cap_add);
  AddFlag(&argv, "--gpus", o.gpus);
  AddFlag(&argv, "--ipc", o.ipc);
  AddFlag(&argv, "--network", o.network);
  AddFlag(&argv, "--memory", o.memory);
  AddFlag(&argv, "--cpus", o.cpus);
  if (o.ulimits.has_value()) AddPairs(&argv, "--ulimit", *o.ulimits);
  AddEach(&argv, "--device", o.devices);
  AddEach(&argv, "-v", o.volumes);
  if (o.run_options.has_value()) {
    argv.insert(argv.end(), o.run_options->begin(), o.run_options->end());
  }
  argv.push_back(spec.image);
  if (spec.command.has_value()) {
    argv.insert(argv.end(), spec.command->begin(), spec.command->end());
  }
  return argv;
}

Argv GpuProbeArgs(const ContainerSpec& spec) {
  Argv args = {"run", "--rm"};
  for (const auto& [key, value] : spec.labels) {
    args.push_back("--label");
    args.push_back(key + "=" + value);
  }
  args.insert(args.end(), {"--gpus", spec.options.gpus.value_or("all"), "--entrypoint",
                           "nvidia-smi", spec.image, "-L"});
  return args;
}

Argv LogsArgs(std::string_view name, bool follow, const std::optional<std::string>& since) {
  Argv argv = {"logs"};
  if (follow) argv.push_back("-f");
  argv.push_back("--timestamps");
  if (since.has_value()) {
    argv.push_back("--since");
    argv.push_back(*since);
  }
  argv.emplace_back(name);
  return argv;
}

Argv WaitArgs(std::string_view name) { return {"wait", std::string(name)}; }

Argv StopArgs(const std::vector<std::string>& names, int grace_seconds) {
  assert(!names.empty());
  Argv argv = {"stop", "-t", std::to_string(grace_seconds)};
  argv.insert(argv.end(), names.begin(), names.end());
  return argv;
}

Argv KillArgs(const std::vector<std::string>& names, std::string_view signal) {
  assert(!names.empty());
  Argv argv = {"kill", "-s", std::string(signal)};
  argv.insert(argv.end(), names.begin(), names.end());
  return argv;
}

Argv RemoveArgs(const std::vector<std::string>& names, bool force) {
  assert(!names.empty());
  Argv argv = {"rm"};
  if (force) argv.push_back("-f");
  argv.insert(argv.end(), names.begin(), names.end());
  return argv;
}

Argv InspectArgs(const std::vector<std::string>& names) {
  assert(!names.empty());
  Argv argv = {"inspect", "--type", "container"};
  argv.insert(argv.end(), names.begin(), names.end());
  return argv;
}

Argv ImageInspectArgs(std::string_view image) {
  return {"image", "inspect", "--format", "{{.Id}}", std::string(image)};
}

Argv ImageStorageInspectArgs(std::string_view image) {
  return {"image", "inspect", "--format", "{{.Id}} {{.GraphDriver.Data.UpperDir}}", std::string(image)};
}

Argv VersionArgs() { return {"version", "--format", "{{.Server.Version}}"}; }

Argv PsByLabelArgs(std::string_view label_filter) {
  return {"ps", "-a", "--no-trunc", "--filter", "label=" + std::string(label_filter),
          "--format", "{{json .}}"};
}

Argv SaveArgs(std::string_view image) { return {"save", std::string(image)}; }

Argv LoadArgs() { return {"load"}; }

Argv PullArgs(std::string_view image) { return {"pull", std::string(image)}; }


}  // namespace barge::container
