#include "protocol/token.h"

#include <gtest/gtest.h>

namespace bakeoff::protocol {
namespace {

TEST(TokenTest, EqualTokensMatch) {
  EXPECT_TRUE(TokensEqual("secret", "secret"));
  EXPECT_TRUE(TokensEqual("", ""));
}

TEST(TokenTest, APrefixOrAnExtensionOfTheTokenDoesNotMatch) {
  EXPECT_FALSE(TokensEqual("secret", "secre"));
  EXPECT_FALSE(TokensEqual("secret", "secretX"));
  EXPECT_FALSE(TokensEqual("secret", ""));
  EXPECT_FALSE(TokensEqual("", "secret"));
  // A given token padded with NULs matches the expected bytes but not its length.
  EXPECT_FALSE(TokensEqual("secret", std::string_view("secret\0", 7)));
}

TEST(TokenTest, OneDifferentByteAnywhereDoesNotMatch) {
  const std::string expected = "0123456789abcdef";
  for (std::size_t i = 0; i < expected.size(); ++i) {
    std::string given = expected;
    given[i] ^= 1;
    EXPECT_FALSE(TokensEqual(expected, given)) << "byte " << i;
  }
}

}  // namespace
}  // namespace bakeoff::protocol
