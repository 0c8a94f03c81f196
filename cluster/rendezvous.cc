#include "cluster/rendezvous.h"

#include <algorithm>

namespace barge::cluster {
namespace {

// The lists below hold every node's address and every node's env keeps
// them, so a plan holds them nodes^2 times (59 MB at 1,000 nodes):
// each is sized exactly, not left with the up to 2x slack of appending.
std::string Join(const std::vector<std::string>& items, const std::string& sep) {
  size_t size = items.empty() ? 0 : sep.size() * (items.size() - 1);
  for (const std::string& item : items) size += item.size();
  std::string out;
  out.reserve(size);
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out += sep;
    out += items[i];
  }
  return out;
}

std::string JsonStringList(const std::vector<std::string>& items) {
  // Addresses and host names are validated to hold no quotes or backslashes.
  size_t size = 2 + (items.empty() ? 0 : items.size() - 1);
  for (const std::string& item : items) size += item.size() + 2;
  std::string out;
  out.reserve(size);
  out += '[';
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out += ',';
    out += '"';
    out += items[i];
    out += '"';
  }
  out += ']';
  return out;
}

bool Wants(const RendezvousInput& in, const std::string& convention) {
  return std::find(in.conventions.begin(), in.conventions.end(), convention) != in.conventions.end();
}

}  // namespace

container::KeyValues RendezvousEnv(const RendezvousInput& in) {
  container::KeyValues env;
  const std::string rank = std::to_string(in.rank);
  const std::string nodes = std::to_string(in.node_addresses.size());
  const std::string head = in.node_addresses.empty() ? "" : in.node_addresses.front();
  const std::string port = std::to_string(in.port);
  const std::string self = in.rank < static_cast<int>(in.node_addresses.size())
                               ? in.node_addresses[in.rank]
                               : "";
  const std::string total_gpus =
      in.total_gpus ? std::to_string(*in.total_gpus) : "<total gpus>";

  if (Wants(in, "barge")) {
    env.emplace_back("BARGE_JOB_ID", in.job_id);
    env.emplace_back("BARGE_JOB_NAME", in.job_name);
    env.emplace_back("BARGE_ROLE", in.role);
    env.emplace_back("BARGE_NODE_RANK", rank);
    env.emplace_back("BARGE_NUM_NODES", nodes);
    env.emplace_back("BARGE_HEAD_ADDR", head);
    env.emplace_back("BARGE_HEAD_PORT", port);
    env.emplace_back("BARGE_NODE_IPS", Join(in.node_addresses, ","));
    env.emplace_back("BARGE_GPUS_PER_NODE", in.gpus_per_node);
    env.emplace_back("BARGE_RESTART_COUNT", std::to_string(in.restart_count));
  }
  if (Wants(in, "torch")) {
    env.emplace_back("MASTER_ADDR", head);
    env.emplace_back("MASTER_PORT", port);
    env.emplace_back("NODE_RANK", rank);
    env.emplace_back("NNODES", nodes);
    env.emplace_back("NUM_NODES", nodes);
    env.emplace_back("NODES", Join(in.node_addresses, ","));
    // One process per container: the node is the rank.
    env.emplace_back("RANK", rank);
    env.emplace_back("WORLD_SIZE", nodes);
    env.emplace_back("TORCHELASTIC_RESTART_COUNT", std::to_string(in.restart_count));
  }
  if (Wants(in, "ray")) {
    env.emplace_back("RAY_HEAD_IP", head);
    env.emplace_back("RAY_HEAD_PORT", port);
  }
  if (Wants(in, "skypilot")) {
    env.emplace_back("SKYPILOT_NODE_RANK", rank);
    env.emplace_back("SKYPILOT_NODE_IPS", Join(in.node_addresses, "\n"));
    env.emplace_back("SKYPILOT_NUM_NODES", nodes);
    env.emplace_back("SKYPILOT_NUM_GPUS_PER_NODE", in.gpus_per_node);
  }
  if (Wants(in, "dstack")) {
    env.emplace_back("DSTACK_MASTER_NODE_IP", head);
    env.emplace_back("DSTACK_NODES_IPS", Join(in.node_addresses, "\n"));
    env.emplace_back("DSTACK_NODE_RANK", rank);
    env.emplace_back("DSTACK_NODES_NUM", nodes);
    env.emplace_back("DSTACK_GPUS_PER_NODE", in.gpus_per_node);
    env.emplace_back("DSTACK_GPUS_NUM", total_gpus);
  }
  if (Wants(in, "sagemaker")) {
    env.emplace_back("SM_HOSTS", JsonStringList(in.node_addresses));
    env.emplace_back("SM_CURRENT_HOST", self);
    env.emplace_back("SM_NUM_GPUS", in.gpus_per_node);
  }
  return env;
}

}  // namespace barge::cluster
