#include "runner/ui/ui_cli.h"

#include <gtest/gtest.h>

namespace barge::runner::ui {
namespace {

TEST(UiCli, ListenTakesHostColonPortAndBracketedIpv6) {
  UiOptions o;
  ASSERT_TRUE(ParseListen("127.0.0.1:8765", &o).ok());
  EXPECT_EQ(o.listen_host, "127.0.0.1");
  EXPECT_EQ(o.port, 8765);
  ASSERT_TRUE(ParseListen("[::1]:0", &o).ok());
  EXPECT_EQ(o.listen_host, "::1");
  EXPECT_EQ(o.port, 0);
  ASSERT_TRUE(ParseListen("localhost:80", &o).ok());
  EXPECT_EQ(o.listen_host, "localhost");
  for (const char* bad : {"8765", "127.0.0.1", ":8765", "127.0.0.1:", "127.0.0.1:x",
                          "127.0.0.1:65536", "::1:8765", "[::1]8765", "h:123456"}) {
    Status s = ParseListen(bad, &o);
    ASSERT_FALSE(s.ok()) << bad;
    EXPECT_EQ(s.message(), std::string("--listen: '") + bad +
                               "' is not HOST:PORT (e.g. 127.0.0.1:8765 or [::1]:8765)");
  }
}

TEST(UiCli, AnAddressInUseIsAClearError) {
  UiOptions o;
  o.listen_host = "127.0.0.1";
  o.port = 0;
  o.state_dir = "/nonexistent";
  auto first = UiServer::Start(o);
  ASSERT_TRUE(first.ok()) << first.status().message();
  o.port = (*first)->port();
  auto second = UiServer::Start(o);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().message(), "cannot listen on 127.0.0.1:" + std::to_string(o.port) +
                                           " (in use, or not an address of this machine)");
}

}  // namespace
}  // namespace barge::runner::ui
