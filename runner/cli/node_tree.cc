// reap, exec, forward, top and hosts on the command tree (verb_tree.h):
// the verbs that reach a job's or a job file's hosts; they are
// node_verbs.cc's.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "runner/cli/verb_tree.h"
#include "runner/cli/verbs.h"
#include "runner/console/exit_codes.h"
#include "runner/console/failure.h"

namespace barge::runner {
namespace {

struct NodeVerbs {
  // The verbs' subcommands.
  CLI::App *reap = nullptr, *exec = nullptr, *forward = nullptr, *top = nullptr, *hosts = nullptr;
  std::string job;
  std::string reap_file, reap_hosts;
  int exec_rank = 0;
  std::vector<std::string> exec_argv;
  bool exec_stdin = false, exec_tty = false;
  int forward_rank = 0;
  std::vector<std::string> forward_ports;
  std::string forward_socket;
  TopOptions top_options;
  std::string hosts_file_arg, hosts_list;
  bool hosts_json = false, hosts_gpus = false;
  std::string hosts_forgive;

  std::optional<int> Run() const;
  int Exec() const;

  void AddReapAndExec(CLI::App& app);
  void AddForwardTopAndHosts(CLI::App& app);
};

std::optional<int> NodeVerbs::Run() const {
  if (*reap) {
    if (reap_file.empty() == reap_hosts.empty()) {
      std::fprintf(stderr, "barge: reap needs a job file or --hosts (one of them)\n");
      return kExitBargeFailure;
    }
    return Reap(reap_file, reap_hosts);
  }
  if (*exec) return Exec();
  if (*forward) return Forward(job, forward_ports, forward_rank, forward_socket);
  if (*top) return Top(job, top_options);
  if (*hosts) {
    if (hosts_file_arg.empty() == hosts_list.empty()) {
      std::fprintf(stderr, "barge: hosts needs a job file or --hosts (one of them)\n");
      return kExitBargeFailure;
    }
    return Hosts(hosts_file_arg, hosts_list, hosts_json, hosts_gpus, hosts_forgive);
  }
  return std::nullopt;
}

// `barge exec [-i|-it] JOB [--node RANK] -- CMD...`.
int NodeVerbs::Exec() const {
  if (exec_tty && !exec_stdin) {
    std::fprintf(stderr, "barge: exec: -t needs -i (barge exec -it JOB -- bash)\n");
    return kExitBargeFailure;
  }
  if (exec_stdin) return ExecInteractive(job, exec_rank, exec_argv, exec_tty);
  return runner::Exec(job, exec_rank, exec_argv);
}

void NodeVerbs::AddReapAndExec(CLI::App& app) {
  reap = app.add_subcommand("reap", "Remove every barge container on the hosts that no live job owns (no live lease there, whoever's job)");
  reap->add_option("job_file", reap_file, "a job file whose hosts to look at");
  reap->add_option("--hosts", reap_hosts, "comma-separated hosts (ssh defaults from ~/.ssh/config)");
  exec = app.add_subcommand("exec", "Run a command inside a node's container: barge exec [-i|-it] JOB --node RANK -- CMD...");
  exec->add_option("job", job, "job id, unique id prefix, or name")->required();
  exec->add_option("--node", exec_rank, "the node's rank (default 0, the head)");
  exec->add_flag("-i,--interactive", exec_stdin, "pass barge's stdin to the command");
  exec->add_flag("-t,--tty", exec_tty, "give the command a terminal (with -i: an interactive shell)");
  exec->add_option("command", exec_argv, "the command and its arguments")->required();
}

void NodeVerbs::AddForwardTopAndHosts(CLI::App& app) {
  forward = app.add_subcommand("forward", "Reach a running job's node port at 127.0.0.1 until Ctrl-C: barge forward JOB [LOCAL:]REMOTE --node RANK");
  forward->add_option("job", job, "job id, unique id prefix, or name")->required();
  forward->add_option("ports", forward_ports, "[LOCAL:]REMOTE, e.g. 8265 or 16006:6006")->required();
  forward->add_option("--node", forward_rank, "the node's rank (default 0, the head)");
  forward->add_option("--socket", forward_socket,
                      "serve on a unix socket at this path (mode 0600) instead of 127.0.0.1 (one REMOTE port)");
  top = app.add_subcommand("top", "Every node's CPU, memory, network and GPUs, refreshed every 2 s (Ctrl-C stops)");
  top->add_option("job", job, "job id, unique id prefix, or name")->required();
  top->add_flag("--once", top_options.once, "print one sample and exit");
  top->add_flag("--json", top_options.json, "with --once: the sample as JSON");
  hosts = app.add_subcommand("hosts", "Each host's reservations, running barge containers and failure record, asked from the hosts");
  hosts->add_option("job_file", hosts_file_arg, "a job file whose hosts to look at");
  hosts->add_option("--hosts", hosts_list, "comma-separated hosts (ssh defaults from ~/.ssh/config)");
  hosts->add_flag("--json", hosts_json, "one JSON array, a host per entry");
  hosts->add_flag("--gpus", hosts_gpus,
                  "each host's GPUs as its driver sees them, their health (the preflight gate's rules) and topology");
  hosts->add_option("--forgive", hosts_forgive,
                    "clear HOST's failure record (an entry with who and when is left on the host): "
                    "the failures before it no longer count");
}

}  // namespace

VerbRunner AddNodeVerbs(CLI::App& app) {
  auto v = std::make_shared<NodeVerbs>();
  v->AddReapAndExec(app);
  v->AddForwardTopAndHosts(app);
  return [v] { return v->Run(); };
}

}  // namespace barge::runner
