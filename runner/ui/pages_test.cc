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
  const std::string page = PageShell("<t>", "<p>x</p>");
  EXPECT_NE(page.find("<title>&lt;t&gt;</title>"), std::string::npos);
  EXPECT_NE(page.find("<script src=\"/static/ui.js\" defer></script>"), std::string::npos);
  EXPECT_EQ(page.find("<script>"), std::string::npos);  // no inline script
  EXPECT_EQ(page.find("http"), std::string::npos);      // nothing from another origin
}

TEST(UiPages, TheJobsTableListsEveryJobAsLsDoesWithEscapedNames) {
  std::vector<JobRecord> jobs = {Job("bb", "<img src=x onerror=alert(1)>", JobStatus::kRunning),
                                 Job("aa", "train", JobStatus::kSucceeded)};
  const std::string html = JobsPage(jobs, JobsQuery{std::string("running"), "tr"}, At(seconds(30)));
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
  EXPECT_NE(html.find("<form class=\"stop\" method=\"post\" action=\"/jobs/ab12/stop\">"
                      "<input type=\"hidden\" name=\"csrf\" value=\"c5rf\">"),
            std::string::npos);
  EXPECT_NE(html.find("data-stream=\"/jobs/ab12/logs/stream\""), std::string::npos);
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
  EXPECT_NE(html.find("href=\"/jobs/ab12?from=0\">older</a>"), std::string::npos);
  EXPECT_NE(html.find("href=\"/jobs/ab12?from=4\">newer</a>"), std::string::npos);
  EXPECT_NE(html.find("&lt;b&gt;out&lt;/b&gt;"), std::string::npos);
  EXPECT_NE(html.find("<div class=\"stderr\"><span class=\"prefix\">[1 worker h stderr]</span> err</div>"),
            std::string::npos);
}

}  // namespace
}  // namespace barge::runner::ui
