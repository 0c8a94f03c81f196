// `barge ui`: the local web dashboard over HTTP (cpp-httplib), from the job
// store and the kept log files. Pages are server-rendered; the one script
// and stylesheet are served by barge itself (no CDN: works air-gapped).
//
// Routes, all under the root, a secret random path of this start ("/s/"
// and 32 hex digits, auth.h), and behind the checks of auth.h; anything
// outside the root is 401, anything else under it 404:
//   GET  ROOT/                     jobs table; ?status=S&name=TEXT filter it
//   GET  ROOT/jobs/ID              one job; ?node=RANK&from=LINE page its kept logs
//   GET  ROOT/arrays/ID            one job array: its members and their attempts
//   GET  ROOT/hosts                who holds and waits for each host: from the
//                                  store, and from the hosts themselves (with
//                                  hosts_job_file or hosts_list)
//   GET  ROOT/jobs/ID/logs/stream  server-sent events of a running job's merged
//                                  output (?node=RANK; Last-Event-ID resumes)
//   POST ROOT/jobs/ID/stop         `barge down ID` (form field csrf from the page)
//   GET  ROOT/jobs/ID/diagnostics/attempt-N/FILE
//                                  a file of a failed attempt's diagnostics
//                                  bundle, as plain text (read-only; names
//                                  checked, no symlink followed)
//   GET  ROOT/static/ui.css, ROOT/static/ui.js
//   GET  ROOT                      303 to ROOT/
// Any of them with ?token=TOKEN logs in (once, auth.h): it answers with the
// cookie and a page that moves on to the same path without the query.
// Every response carries a strict Content-Security-Policy (no inline
// script or style, nothing from another origin, a <base> of its own
// origin only), nosniff, no-referrer,
// frame-ancestors none, and Cache-Control: no-store.
//
// Connections: the gate (gate.h) owns the public address. It reads each
// connection's first request head on a thread of its own, under a
// deadline, a size cap and per-peer caps, answers refused requests itself,
// and passes allowed connections to cpp-httplib, which listens on a unix
// socket in a 0700 directory under /tmp (removed at Stop). So an
// unauthenticated user can hold no server thread.
// Threads: cpp-httplib serves each passed-on connection on a thread of a
// pool of `threads`; idle keep-alive connections are closed after 2 s so
// open tabs do not hold threads. At most `max_streams` live-log streams run at once
// (more get 503 and the browser retries), so pages are always served by the
// threads left. Server threads read the store (one JobStore per request)
// and files only: they never touch libssh; the stop action runs `barge
// down` and the hosts page `barge hosts --json` as child processes (one
// at a time, live_hosts.h).
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "base/status.h"
#include "runner/ui/gate.h"

namespace barge::runner::ui {

struct UiOptions {
  std::string state_dir;
  std::string listen_host = "127.0.0.1";
  int port = 8765;  // 0: any free port
  std::string token;  // logs in once; "" = a new random one
  // The barge binary the stop action runs as `BARGE down ID`.
  std::string barge_binary = "/proc/self/exe";
  int threads = 8;
  int max_streams = 4;
  // A live-log stream ends after this long; the browser reconnects and
  // resumes where it was (Last-Event-ID).
  std::chrono::seconds stream_lifetime{300};
  size_t log_page_lines = 500;
  // The front gate's deadline and caps.
  GateLimits gate;
  // The hosts the hosts page asks live (as `barge hosts FILE` or `barge
  // hosts --hosts LIST`): a job file, or comma-separated hosts; at most one.
  std::string hosts_job_file;
  std::string hosts_list;
  // How long `barge hosts` may take before it is stopped.
  std::chrono::seconds hosts_deadline{90};
};

class UiServer {
 public:
  // Binds the listen address and serves on a thread of its own. Fails with
  // a clear message when the address cannot be bound.
  [[nodiscard]] static Result<std::unique_ptr<UiServer>> Start(UiOptions options);
  ~UiServer();  // Stop()s
  UiServer(const UiServer&) = delete;
  UiServer& operator=(const UiServer&) = delete;

  int port() const;
  const std::string& token() const;
  // The path everything is served under: "/s/" and 32 hex digits.
  const std::string& root() const;
  // http://HOST:PORT/s/HEX/?token=TOKEN, the URL that logs in (once).
  std::string Url() const;
  // Stops listening, ends live streams, joins the threads. Idempotent.
  void Stop();

 private:
  struct Impl;
  explicit UiServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace barge::runner::ui
