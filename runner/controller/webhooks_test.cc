// Webhooks against a real HTTP receiver on loopback (tests/support/
// http_receiver.h): the body and headers, the signature checked
// the way a receiver checks it, tries on 503, no try again on 404, and a
// receiver that hangs bounded by Drain's limit.
#include "runner/controller/webhooks.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "runner/controller/signature.h"
#include "tests/support/http_receiver.h"

namespace barge::runner::internal {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

using Receiver = barge::testing::HttpReceiver;

Notice Failed() {
  return Notice{"failed", "1a2b3c4d", "train", "", "head exited with code 3", "2026-12-07T03:00:00.000Z",
                "barge: job train (1a2b3c4d) failed: head exited with code 3"};
}

TEST(Webhooks, ANoticeIsPostedAsJsonWithItsTextAndASignatureTheReceiverCanCheck) {
  Receiver r;
  Webhooks hooks({{r.url(), {"failed", "succeeded"}, "s3cret"}}, {});
  hooks.Send(Failed());
  hooks.Send(Notice{"restarted", "1a2b3c4d", "train", "", "", "", ""});  // not a kind it receives
  ASSERT_TRUE(hooks.Drain(seconds(10)));
  const auto got = r.got();
  ASSERT_EQ(got.size(), 1u);
  const httplib::Request& req = got[0];
  EXPECT_EQ(req.get_header_value("Content-Type"), "application/json");
  EXPECT_EQ(req.get_header_value("X-Barge-Event"), "failed");
  EXPECT_EQ(req.get_header_value("X-Barge-Delivery"), "1a2b3c4d-1");
  EXPECT_EQ(req.get_header_value("X-Barge-Signature"), "sha256=" + HmacSha256Hex("s3cret", req.body));
  EXPECT_NE(req.get_header_value("X-Barge-Signature"), "sha256=" + HmacSha256Hex("wrong", req.body));
  const nlohmann::json body = nlohmann::json::parse(req.body);
  EXPECT_EQ(body["text"], "barge: job train (1a2b3c4d) failed: head exited with code 3");
  EXPECT_EQ(body["event"], "failed");
  EXPECT_EQ(body["job"]["id"], "1a2b3c4d");
  EXPECT_EQ(body["job"]["name"], "train");
  EXPECT_TRUE(body["host"].is_null());
  EXPECT_EQ(body["detail"], "head exited with code 3");
  EXPECT_EQ(body["at"], "2026-12-07T03:00:00.000Z");
  EXPECT_TRUE(hooks.TakeFailures().empty());
}

TEST(Webhooks, AReceiverThatAnswers503TwiceGetsTheNoticeOnTheThirdTryWithTheSameDeliveryId) {
  Receiver r({503, 503});
  Webhooks hooks({{r.url(), {"failed"}, ""}}, {.tries = 3, .backoff = milliseconds(50)});
  hooks.Send(Failed());
  ASSERT_TRUE(hooks.Drain(seconds(10)));
  const auto got = r.got();
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0].get_header_value("X-Barge-Delivery"), got[2].get_header_value("X-Barge-Delivery"));
  EXPECT_EQ(got[0].body, got[2].body);
  EXPECT_FALSE(got[0].has_header("X-Barge-Signature")) << "no secret, no signature";
  EXPECT_TRUE(hooks.TakeFailures().empty());
}

TEST(Webhooks, A404IsFinalAndAFailureLineNamesTheHostButNotTheUrlsToken) {
  Receiver r({404, 404, 404});
  Webhooks hooks({{r.url(), {"failed"}, ""}}, {.tries = 3, .backoff = milliseconds(50)});
  hooks.Send(Failed());
  ASSERT_TRUE(hooks.Drain(seconds(10)));
  EXPECT_EQ(r.got().size(), 1u);
  const std::vector<std::string> failures = hooks.TakeFailures();
  ASSERT_EQ(failures.size(), 1u);
  EXPECT_EQ(failures[0], r.url().substr(0, r.url().find("/hook")) + "/...: failed: failed: HTTP 404 (1 try)");
  EXPECT_EQ(failures[0].find("T0KEN"), std::string::npos);
}

TEST(Webhooks, NoReceiverIsTriedAgainAndThenGivenUp) {
  // A port nothing listens on: the receiver's port once it is gone.
  std::string url;
  {
    Receiver gone;
    url = gone.url();
  }
  Webhooks hooks({{url, {"failed"}, ""}}, {.tries = 2, .backoff = milliseconds(50)});
  hooks.Send(Failed());
  ASSERT_TRUE(hooks.Drain(seconds(10)));
  const std::vector<std::string> failures = hooks.TakeFailures();
  ASSERT_EQ(failures.size(), 1u);
  EXPECT_NE(failures[0].find("(2 tries)"), std::string::npos) << failures[0];
}

TEST(Webhooks, SendNeverWaitsOnAHangingReceiverAndDrainGivesUpAtItsLimit) {
  Receiver r({}, seconds(20));
  Webhooks hooks({{r.url(), {"failed"}, ""}}, {.tries = 3, .try_timeout = seconds(30)});
  const auto began = std::chrono::steady_clock::now();
  for (int i = 0; i < 5; ++i) hooks.Send(Failed());
  const auto sent = std::chrono::steady_clock::now();
  EXPECT_LT(sent - began, milliseconds(100)) << "Send only queues";
  EXPECT_FALSE(hooks.Drain(seconds(1)));
  const auto drained = std::chrono::steady_clock::now();
  EXPECT_GE(drained - sent, seconds(1));
  // The transfer in flight is cancelled through libcurl's progress
  // callback, which runs at least once a second.
  EXPECT_LT(drained - sent, milliseconds(3500));
  const std::vector<std::string> failures = hooks.TakeFailures();
  EXPECT_EQ(failures.size(), 5u);
  hooks.Send(Failed());
  EXPECT_EQ(hooks.TakeFailures().size(), 1u) << "after Drain, a notice is not sent";
}

}  // namespace
}  // namespace barge::runner::internal
