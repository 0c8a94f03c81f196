#include "runner/ui/pages.h"

#include <gtest/gtest.h>

#include "runner/ui/html.h"

namespace barge::runner::ui {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

TimePoint At(milliseconds offset = milliseconds(0)) {
  return TimePoint(milliseconds(int64_t{1714564800} * 1000)) + offset;
}

JobRecord Job(const std::string& id, const std::string& name, JobStatus status) {
  JobRecord j;
  j.id = id;
  j.name = name;
  j.status = status;
  j.created = At();
  j.nodes = 2;
  if (IsFinal(status)) {
    j.ended = At(seconds(75));
    j.exit_code = 0;
  }
  return j;
}

TEST(UiHtml, EscapesMarkupAndEncodesUrls) {
  EXPECT_EQ(HtmlEscape("<a href=\"x\">'&'</a>"),
            "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;");
  EXPECT_EQ(UrlEncode("a b/../c?d=é"), "a%20b%2F..%2Fc%3Fd%3D%C3%A9");
  const std::string page = PageShell("<t>", "<p>x</p>", "../");
  EXPECT_NE(page.find("<title>&lt;t&gt;</title>"), std::string::npos);
  // Every link relative to the <base>, which comes before the first.
  EXPECT_NE(page.find("<head><meta charset=\"utf-8\"><base href=\"../\">"), std::string::npos);
  EXPECT_NE(page.find("<script src=\"static/ui.js\" defer></script>"), std::string::npos);
  EXPECT_EQ(page.find("=\"/"), std::string::npos) << page;  // no path from the origin's top
  EXPECT_EQ(page.find("<script>"), std::string::npos);  // no inline script
  EXPECT_EQ(page.find("http"), std::string::npos);      // nothing from another origin
}

TEST(UiPages, TheJobsTableListsEveryJobAsLsDoesWithEscapedNames) {
  std::vector<JobRecord> jobs = {Job("bb", "<img src=x onerror=alert(1)>", JobStatus::kRunning),
                                 Job("aa", "train", JobStatus::kSucceeded)};
  const std::string html = JobsPage(jobs, {}, JobsQuery{std::string("running"), "tr"}, At(seconds(30)));
  EXPECT_NE(html.find("<tr class=\"job\" data-id=\"bb\" data-status=\"running\">"),
            std::string::npos);
  EXPECT_NE(html.find("data-id=\"aa\" data-status=\"succeeded\""), std::string::npos);
  EXPECT_LT(html.find("data-id=\"bb\""), html.find("data-id=\"aa\""));  // order kept
  EXPECT_EQ(html.find("<img"), std::string::npos);
  EXPECT_NE(html.find("&lt;img src=x onerror=alert(1)&gt;"), std::string::npos);
  EXPECT_NE(html.find("<td class=\"num\">30s</td>"), std::string::npos);  // running: to now
  EXPECT_NE(html.find("<td class=\"num\">1m15s</td>"), std::string::npos);
  EXPECT_NE(html.find("<option value=\"running\" selected>"), std::string::npos);
  EXPECT_NE(html.find("name=\"name\" value=\"tr\""), std::string::npos);
}

TEST(UiPages, ARunningJobHasAStopFormWithItsCsrfTokenAndALiveLog) {
  JobPageData d;
  d.job = Job("ab12", "train", JobStatus::kRunning);
  d.csrf = "c5rf";
  d.timeline_svg = "<svg class=\"timeline\"></svg>";
  const std::string html = JobPage(d, At(seconds(5)));
  EXPECT_NE(html.find("<form class=\"stop\" method=\"post\" action=\"jobs/ab12/stop\">"
                      "<input type=\"hidden\" name=\"csrf\" value=\"c5rf\">"),
            std::string::npos);
  EXPECT_NE(html.find("data-stream=\"jobs/ab12/logs/stream\""), std::string::npos);
  EXPECT_NE(html.find("<svg class=\"timeline\"></svg>"), std::string::npos);
  EXPECT_EQ(html.find("kept-log"), std::string::npos);
}

TEST(UiPages, AFinishedJobHasNoStopFormAndShowsAPageOfItsKeptLog) {
  JobPageData d;
  d.job = Job("ab12", "train", JobStatus::kSucceeded);
  d.log_page_size = 2;
  LogPage page;
  page.first = 2;
  page.total = 6;
  page.lines = {ViewLine{0, "head", "h", false, "<b>out</b>"}, ViewLine{1, "worker", "h", true, "err"}};
  d.kept_log = page;
  const std::string html = JobPage(d, At());
  EXPECT_EQ(html.find("class=\"stop\""), std::string::npos);
  EXPECT_EQ(html.find("live-log"), std::string::npos);
  EXPECT_NE(html.find("lines 3\u20134 of 6"), std::string::npos);
  EXPECT_NE(html.find("href=\"jobs/ab12?from=0\">older</a>"), std::string::npos);
  EXPECT_NE(html.find("href=\"jobs/ab12?from=4\">newer</a>"), std::string::npos);
  EXPECT_NE(html.find("&lt;b&gt;out&lt;/b&gt;"), std::string::npos);
  EXPECT_NE(html.find("<div class=\"stderr\"><span class=\"prefix\">[1 worker h stderr]</span> err</div>"),
            std::string::npos);
}


MemberRecord Member(int index, MemberStatus status, std::vector<std::string> jobs) {
  MemberRecord m;
  m.array_id = "arr1";
  m.index = index;
  m.params = "lr=0." + std::to_string(index + 1) + " tag=<x>";
  m.status = status;
  m.attempts = static_cast<int>(jobs.size());
  m.job_ids = std::move(jobs);
  if (status == MemberStatus::kSucceeded || status == MemberStatus::kFailed) {
    m.exit_code = status == MemberStatus::kSucceeded ? 0 : 3;
    m.started = At(seconds(1));
    m.ended = At(seconds(9));
  }
  m.hosts = m.job_ids.empty() ? "" : "h" + std::to_string(index);
  return m;
}

ArrayView Sweep() {
  ArrayView v;
  v.array.id = "arr1";
  v.array.name = "sweep<1>";
  v.array.status = "running";
  v.array.size = 4;
  v.array.parallel = 2;
  v.array.retries = 1;
  v.array.created = At(seconds(10));
  v.members = {Member(0, MemberStatus::kSucceeded, {"m0a"}),
               Member(1, MemberStatus::kFailed, {"m1a", "m1b"}),
               Member(2, MemberStatus::kRunning, {"m2a"}),
               Member(3, MemberStatus::kWaiting, {})};
  return v;
}

TEST(UiPages, AnArrayIsOneRowWithItsCountsPlacedByItsStartAmongTheJobs) {
  JobRecord newer = Job("new1", "later", JobStatus::kRunning);
  newer.created = At(seconds(20));
  JobRecord older = Job("old1", "earlier", JobStatus::kSucceeded);
  const std::string html = JobsPage({newer, older}, {Sweep()}, JobsQuery{}, At(seconds(40)));
  const size_t row = html.find("<tr class=\"array\" data-id=\"arr1\" data-status=\"running\" data-size=\"4\" "
                               "data-waiting=\"1\" data-running=\"1\" data-succeeded=\"1\" data-failed=\"1\" "
                               "data-cancelled=\"0\">");
  ASSERT_NE(row, std::string::npos) << html;
  EXPECT_LT(html.find("data-id=\"new1\""), row);
  EXPECT_LT(row, html.find("data-id=\"old1\""));
  EXPECT_NE(html.find("<a href=\"arrays/arr1\">arr1</a>"), std::string::npos);
  EXPECT_NE(html.find("sweep&lt;1&gt;"), std::string::npos);
  EXPECT_EQ(html.find("sweep<1>"), std::string::npos);
  // As `barge ls`: "array running: running 1, succeeded 1, failed 1, waiting 1", "4 members".
  EXPECT_NE(html.find("array <span class=\"status status-running\">running</span>: <span class=\"counts\">"
                      "running 1, succeeded 1, failed 1, waiting 1</span>"),
            std::string::npos);
  EXPECT_NE(html.find("<td class=\"num\">4 members</td>"), std::string::npos);
  EXPECT_NE(html.find("<td class=\"num\">30s</td>"), std::string::npos);  // running: to now
  // An array older than every job comes last.
  ArrayView first = Sweep();
  first.array.created = At(seconds(-5));
  const std::string last = JobsPage({newer, older}, {first}, JobsQuery{}, At(seconds(40)));
  EXPECT_GT(last.find("class=\"array\""), last.find("data-id=\"old1\""));
}

TEST(UiPages, TheArrayPageListsItsMembersAndEveryAttemptWithItsHostsAndExitCode) {
  ArrayPageData d;
  d.view = Sweep();
  JobRecord m1a = Job("m1a", "sweep-1", JobStatus::kFailed);
  m1a.exit_code = 3;
  JobRecord m1b = Job("m1b", "sweep-1", JobStatus::kFailed);
  m1b.exit_code = 3;
  d.jobs = {{"m0a", Job("m0a", "sweep-0", JobStatus::kSucceeded)}, {"m1a", m1a}, {"m1b", m1b},
            {"m2a", Job("m2a", "sweep-2", JobStatus::kRunning)}};
  NodeRecord n0{"m1b", 0, "head", "hostA", "", "", "", 3, ""};
  NodeRecord n1{"m1b", 1, "worker", "host<B>", "", "", "", 3, ""};
  NodeRecord n2{"m1b", 2, "worker", "hostA", "", "", "", 3, ""};
  d.nodes["m1b"] = {n0, n1, n2};
  const std::string html = ArrayPage(d, At(seconds(40)));
  EXPECT_NE(html.find("<span id=\"array-status\" data-status=\"running\">"), std::string::npos);
  EXPECT_NE(html.find("<p id=\"array-counts\">members: running 1, succeeded 1, failed 1, waiting 1"),
            std::string::npos);
  // Members as `barge ls ARRAY` (the last attempt's job) with the summary's
  // status and duration.
  EXPECT_NE(html.find("<tr class=\"member\" data-index=\"1\" data-status=\"failed\" data-attempts=\"2\">"
                      "<td class=\"num\">1</td><td><a href=\"jobs/m1b\">m1b</a></td><td>lr=0.2 tag=&lt;x&gt;</td>"
                      "<td><span class=\"status status-failed\">failed</span> (2 attempts)</td>"
                      "<td class=\"num\">2</td><td class=\"num\">3</td><td>h1</td><td class=\"num\">8s</td></tr>"),
            std::string::npos)
      << html;
  EXPECT_NE(html.find("<tr class=\"member\" data-index=\"3\" data-status=\"waiting\" data-attempts=\"0\">"
                      "<td class=\"num\">3</td><td>-</td>"),
            std::string::npos);
  // One attempt row per job: member 1's two, the second on its hosts (each once, in rank order).
  EXPECT_NE(html.find("<tr class=\"attempt\" data-index=\"1\" data-attempt=\"1\" data-job=\"m1a\" "
                      "data-status=\"failed\">"),
            std::string::npos);
  EXPECT_NE(html.find("<tr class=\"attempt\" data-index=\"1\" data-attempt=\"2\" data-job=\"m1b\" "
                      "data-status=\"failed\"><td class=\"num\">1</td><td class=\"num\">2</td>"
                      "<td><a href=\"jobs/m1b\">m1b</a></td><td><span class=\"status status-failed\">failed</span></td>"
                      "<td>hostA,host&lt;B&gt;</td><td class=\"num\">3</td>"),
            std::string::npos)
      << html;
  EXPECT_NE(html.find("data-job=\"m2a\" data-status=\"running\""), std::string::npos);
  EXPECT_EQ(html.find("<x>"), std::string::npos);
  EXPECT_EQ(html.find("host<B>"), std::string::npos);
  // A removed attempt's job is named, not linked.
  d.jobs.erase("m0a");
  const std::string removed = ArrayPage(d, At(seconds(40)));
  EXPECT_NE(removed.find("data-job=\"m0a\"><td class=\"num\">0</td><td class=\"num\">1</td><td>m0a</td>"
                         "<td colspan=\"5\" class=\"muted\">removed</td>"),
            std::string::npos);
}

TEST(UiPages, TheHostsPageShowsEachHostsHoldersAndQueueFromTheStoreAndFromTheHosts) {
  HostsPageData d;
  d.store_owner = "ann@laptop";
  HostUse h1;
  h1.host = "h1";
  h1.holds = {HostJob{"a1", "train<1>", JobStatus::kRunning, At(), ""}};
  h1.queue = {HostJob{"c1", "eval", JobStatus::kWaiting, At(seconds(20)), "for h1 (held by a1)"},
              HostJob{"b1", "sweep", JobStatus::kWaiting, At(seconds(30)), "for h1"}};
  d.store = {h1};
  const std::string off = HostsPage(d, At(seconds(90)));
  EXPECT_NE(off.find("<section class=\"host stored\" data-host=\"h1\"><h3>h1</h3>"), std::string::npos);
  EXPECT_NE(off.find("<tr class=\"hold\" data-job=\"a1\" data-status=\"running\"><td><a href=\"jobs/a1\">a1</a></td>"
                     "<td>train&lt;1&gt;</td><td>ann@laptop</td><td><span class=\"status status-running\">running</span></td>"),
            std::string::npos)
      << off;
  EXPECT_NE(off.find("(1m30s ago)"), std::string::npos);
  const size_t c1 = off.find("<tr class=\"ticket\" data-job=\"c1\"><td>#1</td>");
  const size_t b1 = off.find("<tr class=\"ticket\" data-job=\"b1\"><td>#2</td>");
  ASSERT_NE(c1, std::string::npos) << off;
  ASSERT_NE(b1, std::string::npos);
  EXPECT_NE(off.find("<td>for h1 (held by a1)</td>"), std::string::npos);
  EXPECT_NE(off.find("barge ui --job-file FILE"), std::string::npos);  // live: not asked
  EXPECT_EQ(off.find("class=\"host live\""), std::string::npos);

  d.live_enabled = true;
  EXPECT_NE(HostsPage(d, At()).find("id=\"live-asking\""), std::string::npos);
  LiveHostsReading r;
  r.at = At();
  r.command = "barge hosts --json /x/job.yaml";
  LiveHost lh;
  lh.host = "h1";
  lh.holds = {LiveHold{"barge-ticket-b1", "b1", "sweep", "bob", "ws", "", "2024-05-01T12:00:30Z", "", false, false, true, 2},
              LiveHold{"barge-hold-host", "a1", "train<1>", "ann", "laptop", "all", "2024-05-01T12:00:00Z",
                       "2024-05-01T12:11:00Z", false, false, false, std::nullopt},
              LiveHold{"barge-lease-a1.1714564860", "a1", "train<1>", "ann", "laptop", "", "2024-05-01T12:00:00Z",
                       "2024-05-01T12:11:00Z", false, true, false, std::nullopt},
              LiveHold{"barge-ticket-c1", "c1", "eval", "ann", "laptop", "", "2024-05-01T12:00:20Z", "", false, false, true, 1}};
  lh.containers = {LiveContainer{"barge-a1-0", "a1", "head", "0", "Up 3 minutes"}};
  LiveHost down;
  down.host = "h2 (gpu)";
  down.error = "connect: <refused>";
  LiveHost idle;
  idle.host = "h3";
  r.hosts = {lh, down, idle};
  d.live = r;
  const std::string live = HostsPage(d, At());
  EXPECT_NE(live.find("As <code>barge hosts --json /x/job.yaml</code> answered at"), std::string::npos);
  EXPECT_NE(live.find("<section class=\"host live\" data-host=\"h1\">"), std::string::npos);
  EXPECT_NE(live.find("<tr class=\"hold\" data-job=\"a1\" data-name=\"barge-hold-host\"><td>hold host</td>"
                      "<td><a href=\"jobs/a1\">a1</a></td><td>train&lt;1&gt;</td><td>ann@laptop</td>"
                      "<td>2024-05-01T12:00:00Z</td><td>all</td><td>2024-05-01T12:11:00Z</td></tr>"),
            std::string::npos)
      << live;
  EXPECT_NE(live.find("data-name=\"barge-lease-a1.1714564860\"><td>lease</td>"), std::string::npos);
  // The queue in ticket order, whatever the listing's order.
  const size_t q1 = live.find("<tr class=\"ticket\" data-job=\"c1\"><td>queued #1</td>");
  const size_t q2 = live.find("<tr class=\"ticket\" data-job=\"b1\"><td>queued #2</td>");
  ASSERT_NE(q1, std::string::npos) << live;
  ASSERT_NE(q2, std::string::npos);
  EXPECT_LT(q1, q2);
  EXPECT_NE(live.find("<td>bob@ws</td>"), std::string::npos);
  EXPECT_NE(live.find("<tr class=\"container\" data-job=\"a1\"><td>barge-a1-0</td>"), std::string::npos);
  EXPECT_NE(live.find("data-host=\"h2 (gpu)\"><h3>h2 (gpu)</h3>\n<p class=\"notice error\">cannot ask: "
                      "connect: &lt;refused&gt;</p>"),
            std::string::npos);
  EXPECT_NE(live.find("data-host=\"h3\"><h3>h3</h3>\n<p class=\"free\">free</p>"), std::string::npos);
  EXPECT_EQ(live.find("train<1>"), std::string::npos);
  EXPECT_EQ(live.find("<refused>"), std::string::npos);
  EXPECT_NE(live.find("<a href=\"hosts\" id=\"nav-hosts\">hosts</a>"), std::string::npos);
}

TEST(UiPages, TheHostsPageShowsAHostsFailureRecordAndEachHostsRecentUse) {
  HostsPageData d;
  d.store_owner = "ann@laptop";
  d.live_enabled = true;
  LiveHostsReading r;
  LiveHost lemon;
  lemon.host = "h1";
  lemon.record.out = true;
  lemon.record.counted = 2;
  lemon.record.allowed = 1;
  lemon.record.window_s = 24 * 3600;
  lemon.record.gpus_out = {3};
  lemon.record.entries = {LiveFault{"2024-05-01T12:00:00Z", "gpu_health", "j3", "eval", "bob", "box2", 3, "Xid <79>"}};
  r.hosts = {lemon};
  d.live = r;
  d.recent_use = {{"h1", Usage{2.5, 10.0, false}}, {"h2", Usage{0.25, 0.0, true}}};
  const std::string html = HostsPage(d, At());
  EXPECT_NE(html.find("id=\"record-out\">Out of every job's choice: 2 host-caused failure(s) in the last 1d00h "
                      "(more than 1 put it out). <code>barge hosts --forgive h1</code> clears it."),
            std::string::npos)
      << html;
  EXPECT_NE(html.find("GPU(s) 3 out of every job's choice."), std::string::npos);
  EXPECT_NE(html.find("<tr class=\"fault\" data-kind=\"gpu_health\"><td>2024-05-01T12:00:00Z</td><td>gpu_health</td>"
                      "<td>3</td><td><a href=\"jobs/j3\">j3</a></td><td>eval</td><td>bob@box2</td><td>Xid &lt;79&gt;</td>"),
            std::string::npos)
      << html;
  EXPECT_EQ(html.find("<p class=\"free\">free</p>"), std::string::npos) << "a host out is not free";
  EXPECT_NE(html.find("barge usage --by host --since 7d"), std::string::npos);
  EXPECT_NE(html.find("<tr class=\"use\" data-host=\"h1\"><td>h1</td><td class=\"num\">2.50</td>"
                      "<td class=\"num\">10.00</td></tr>"),
            std::string::npos)
      << html;
  EXPECT_NE(html.find("data-host=\"h2\"><td>h2</td><td class=\"num\">0.25</td><td class=\"num\">0*</td>"),
            std::string::npos);
  EXPECT_NE(HostsPage(HostsPageData{}, At()).find("id=\"no-recent-use\""), std::string::npos);
}

TEST(UiPages, EachPageResolvesItsLinksAgainstTheRootAsSeenFromWhereItIsServed) {
  JobPageData job;
  job.job = Job("ab12", "train", JobStatus::kRunning);
  ArrayPageData array;
  array.view.array.id = "arr1";
  // ROOT/jobs/ID and ROOT/arrays/ID are one level below the root;
  // ROOT/ and ROOT/hosts at it.
  EXPECT_NE(JobPage(job, At()).find("<base href=\"../\">"), std::string::npos);
  EXPECT_NE(ArrayPage(array, At()).find("<base href=\"../\">"), std::string::npos);
  EXPECT_NE(JobsPage({}, {}, JobsQuery{}, At()).find("<base href=\"./\">"), std::string::npos);
  EXPECT_NE(HostsPage(HostsPageData{}, At()).find("<base href=\"./\">"), std::string::npos);
  for (const std::string& html : {JobPage(job, At()), JobsPage({}, {}, JobsQuery{}, At())}) {
    EXPECT_EQ(html.find("=\"/"), std::string::npos) << html;  // every link relative
  }
}

TEST(UiPages, AnErrorPageLinksUnderTheRootOnlyWhenGivenOne) {
  const std::string refused = ErrorPage(401, "needs <token>", "");
  EXPECT_NE(refused.find("<p id=\"error\">needs &lt;token&gt;</p>"), std::string::npos);
  EXPECT_EQ(refused.find("href"), std::string::npos) << refused;
  EXPECT_EQ(refused.find("<base"), std::string::npos);
  const std::string let_in = ErrorPage(404, "nothing here", "/s/abc");
  EXPECT_NE(let_in.find("<base href=\"/s/abc/\">"), std::string::npos) << let_in;
  EXPECT_NE(let_in.find("<a href=\"./\">jobs</a>"), std::string::npos);
}

TEST(UiPages, TheMoveOnPageRefreshesToTheAddressGivenEscaped) {
  const std::string html = MoveOnPage("/s/abc/jobs/a\"b");
  EXPECT_NE(html.find("<meta http-equiv=\"refresh\" content=\"0; url=/s/abc/jobs/a&quot;b\">"), std::string::npos)
      << html;
  EXPECT_NE(html.find("<a id=\"move-on\" href=\"/s/abc/jobs/a&quot;b\">"), std::string::npos);
  EXPECT_EQ(html.find("<script"), std::string::npos);
}

}  // namespace
}  // namespace barge::runner::ui
