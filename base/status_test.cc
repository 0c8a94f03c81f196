#include "base/status.h"

#include <gtest/gtest.h>

#include <memory>

namespace barge {
namespace {

TEST(Status, DefaultIsSuccessWithAnEmptyMessage) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.message(), "");
}

TEST(Status, ErrorKeepsItsMessageAndCanBePrefixedWithContext) {
  Status s = Status::Error("connection refused").Prefixed("127.0.0.2");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "127.0.0.2: connection refused");
  EXPECT_TRUE(Status::Ok().Prefixed("x").ok());
}

TEST(Result, HoldsEitherAValueOrAnError) {
  Result<int> good(7);
  ASSERT_TRUE(good.ok());
  EXPECT_EQ(*good, 7);
  Result<int> bad(Status::Error("no"));
  EXPECT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "no");
}

TEST(Result, MovesOutMoveOnlyValues) {
  Result<std::unique_ptr<int>> r(std::make_unique<int>(3));
  std::unique_ptr<int> p = std::move(r).value();
  EXPECT_EQ(*p, 3);
}

}  // namespace
}  // namespace barge
