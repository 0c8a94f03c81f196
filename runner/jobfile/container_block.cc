// `container:` (the job's, a host's, the head's, the workers'): docker run options.
#include "runner/jobfile/blocks.h"

namespace barge::runner::jobfile {

constexpr KeyRule<ContainerOptions> kContainerRules[] = {
    {"shm_size",
     {.type = KeyType::kSize, .description = "Size of the container's /dev/shm (docker run --shm-size)"}, [](const Entry& e, ContainerOptions& o) { o.shm_size = ReadSize(e); }},
    {"cap_add",
     {.type = KeyType::kStringList, .description = "Linux capabilities to add (docker run --cap-add), e.g. [SYS_ADMIN]"},
     [](const Entry& e, ContainerOptions& o) { o.cap_add = ReadStringList(e, CheckCapability); }},
    {"gpus",
     {.type = KeyType::kJson, .description = "GPUs for the container: all, a count, or a list of device ids (docker run --gpus)", .schema = R"({"anyOf": [{"type": "string"}, {"type": "integer", "minimum": 1, "maximum": 1024}, {"type": "array", "minItems": 1, "items": {"type": ["string", "integer"]}}]})"}, [](const Entry& e, ContainerOptions& o) { o.gpus = ReadGpus(e); }},
    {"ipc",
     {.type = KeyType::kString, .description = "IPC namespace mode (docker run --ipc): host, private, shareable, container:NAME"}, [](const Entry& e, ContainerOptions& o) { o.ipc = ReadChecked(e, CheckIpcMode); }},
    {"network",
     {.type = KeyType::kString, .description = "Network mode (docker run --network): host, bridge, none, or a network name"},
     [](const Entry& e, ContainerOptions& o) { o.network = ReadChecked(e, CheckNetworkMode); }},
    {"memory",
     {.type = KeyType::kSize, .description = "Memory limit (docker run --memory)"}, [](const Entry& e, ContainerOptions& o) { o.memory = ReadSize(e); }},
    {"cpus",
     {.type = KeyType::kString, .description = "CPU limit, in CPUs' worth of time (docker run --cpus), e.g. 4 or 1.5"},
     [](const Entry& e, ContainerOptions& o) { o.cpus = ReadChecked(e, CheckCpus); }},
    {"ulimits",
     {.type = KeyType::kStringMap, .description = "ulimits by name (docker run --ulimit NAME=VALUE), e.g. memlock: -1"}, [](const Entry& e, ContainerOptions& o) { o.ulimits = ReadUlimits(e); }},
    {"devices",
     {.type = KeyType::kStringList, .description = "Host devices to add (docker run --device), e.g. /dev/fuse"},
     [](const Entry& e, ContainerOptions& o) { o.devices = ReadStringList(e, CheckDeviceSpec); }},
    {"volumes",
     {.type = KeyType::kStringList, .description = "Bind mounts HOST_PATH:CONTAINER_PATH[:ro] (absolute paths)"},
     [](const Entry& e, ContainerOptions& o) { o.volumes = ReadStringList(e, CheckVolumeSpec); }},
    {"env",
     {.type = KeyType::kStringMap, .description = "Environment variables NAME: value"}, [](const Entry& e, ContainerOptions& o) { o.env = ReadEnv(e); }},
    {"run_options",
     {.type = KeyType::kStringList, .description = "Extra docker run arguments, passed as given"},
     [](const Entry& e, ContainerOptions& o) { o.run_options = ReadStringList(e, nullptr); }},
};
std::vector<KeyInfo> ContainerKeys() { return Describe(kContainerRules); }

void ReadContainer(const Entry& e, ContainerOptions& out) { ReadMapping(e, kContainerRules, out); }

}  // namespace barge::runner::jobfile
