// ui, the dashboard, on the command tree (verb_tree.h); the verb is
// runner/ui/ui_cli.h's.
#include <cstdio>
#include <memory>
#include <string>

#include "runner/cli/verb_tree.h"
#include "runner/console/exit_codes.h"
#include "runner/console/failure.h"
#include "runner/store/state_dir.h"
#include "runner/ui/ui_cli.h"

namespace barge::runner {
namespace {

struct UiVerb {
  CLI::App* ui = nullptr;
  std::string listen = "127.0.0.1:8765", token, token_file, job_file, hosts;

  int Run() const;
};

// `barge ui`: the options checked (a token on the command line refused),
// then the server, until it is stopped.
int UiVerb::Run() const {
  ui::UiOptions options;
  options.state_dir = StateDir();
  Result<std::string> resolved = ui::ResolveToken(token, token_file);
  if (!resolved.ok()) {
    std::fprintf(stderr, "barge: %s\n", resolved.status().message().c_str());
    return kExitBargeFailure;
  }
  options.token = *resolved;
  if (auto s = ui::ParseListen(listen, &options); !s.ok()) {
    std::fprintf(stderr, "barge: %s\n", s.message().c_str());
    return kExitBargeFailure;
  }
  if (auto s = ui::SetLiveHosts(job_file, hosts, &options); !s.ok()) {
    std::fprintf(stderr, "barge: %s\n", s.message().c_str());
    return kExitBargeFailure;
  }
  return ui::UiCommand(options, stdout);
}

}  // namespace

VerbRunner AddUiVerb(CLI::App& app) {
  auto v = std::make_shared<UiVerb>();
  v->ui = app.add_subcommand("ui", "Serve the local web dashboard (jobs, arrays, hosts, timelines, live logs, stop)");
  v->ui->add_option("--listen", v->listen, "HOST:PORT to listen on (default 127.0.0.1:8765; port 0 = any)");
  v->ui->add_option("--token-file", v->token_file, "a file (mode 600) whose first line is the access token, at least 32 characters (else $BARGE_UI_TOKEN, else a new random one, printed in the URL)");
  v->ui->add_option("--job-file", v->job_file, "the hosts page also asks this job file's hosts what they hold, as `barge hosts FILE`");
  v->ui->add_option("--hosts", v->hosts, "the hosts page also asks these comma-separated hosts what they hold, as `barge hosts --hosts`");
  v->ui->add_option("--token", v->token, "refused: a token on the command line is readable by every user; use --token-file")->group("");
  return [v]() -> std::optional<int> {
    if (!*v->ui) return std::nullopt;
    return v->Run();
  };
}

}  // namespace barge::runner
