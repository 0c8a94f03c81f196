// HmacSha256Hex against RFC 4231's HMAC-SHA256 test vectors.
#include "runner/controller/signature.h"

#include <gtest/gtest.h>

#include <string>

namespace barge::runner::internal {
namespace {

TEST(Signature, MatchesRfc4231TestCases1And2And6) {
  EXPECT_EQ(HmacSha256Hex(std::string(20, '\x0b'), "Hi There"),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  EXPECT_EQ(HmacSha256Hex("Jefe", "what do ya want for nothing?"),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  // A key longer than the block size is hashed first.
  EXPECT_EQ(HmacSha256Hex(std::string(131, '\xaa'), "Test Using Larger Than Block-Size Key - Hash Key First"),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
}

}  // namespace
}  // namespace barge::runner::internal
