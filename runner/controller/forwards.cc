// JobForwards: a job's local ports, bound early and served per node.
#include "runner/controller/forwards.h"

#include <sstream>

namespace barge::runner {

Result<std::string> ForwardTarget(const std::optional<std::string>& network,
                                  const std::string& inspect_output) {
  if (network && *network == "host") return std::string("127.0.0.1");
  std::istringstream words(inspect_output);
  std::string ip;
  while (words >> ip) {
    if (!ip.empty() && ip != "<no" && ip != "value>") return ip;
  }
  return Status::Error(
      "the container has no address of its own to forward to (network " +
      (network ? "'" + *network + "'" : std::string("default")) +
      "); use `network: host`, or a network whose containers have an address");
}

std::string ForwardingLine(const ForwardSpec& f) {
  const std::string from =
      f.socket_path.empty() ? "http://127.0.0.1:" + std::to_string(f.local_port) : "unix:" + f.socket_path;
  return "forwarding " + from + " -> rank " +
         std::to_string(f.rank) + " port " + std::to_string(f.remote_port);
}

Result<std::unique_ptr<JobForwards>> JobForwards::Bind(
    ssh::EventLoop* loop, const std::vector<ForwardSpec>& specs,
    const std::function<std::string(size_t)>& what) {
  auto out = std::make_unique<JobForwards>();
  out->specs_ = specs;
  for (size_t i = 0; i < specs.size(); ++i) {
    Result<std::unique_ptr<ssh::PortForward>> f =
        specs[i].socket_path.empty() ? ssh::PortForward::Listen(loop, specs[i].local_port)
                                     : ssh::PortForward::ListenUnix(loop, specs[i].socket_path);
    if (!f.ok()) return Status::Error(what(i) + ": " + f.status().message());
    out->forwards_.push_back(std::move(f).value());
  }
  return out;
}

void JobForwards::Serve(size_t i, ssh::Executor* via, const std::string& target_host,
                        std::function<void(const Status&)> on_fatal) {
  forwards_[i]->Serve(via, target_host, specs_[i].remote_port, std::move(on_fatal));
}

void JobForwards::StopAll() {
  for (auto& f : forwards_) f->Stop();
}

}  // namespace barge::runner
