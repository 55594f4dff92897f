#include "protocol/token.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>

#include <unistd.h>

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

TEST(TokenTest, ATokenFileHoldsOneTokenPerLineAndTheClientPresentsTheFirst) {
  const auto path = std::filesystem::temp_directory_path() / ("bakeoff-token-test-" + std::to_string(getpid()));
  std::ofstream(path) << "# rotated on Monday\n\n  new-token  \nold-token\n";
  auto all = LoadTokenList(path.string());
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  EXPECT_EQ(*all, (std::vector<std::string>{"new-token", "old-token"}));
  auto first = LoadToken(path.string());
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(*first, "new-token");
  std::ofstream(path) << "# only a comment\n\n";
  EXPECT_FALSE(LoadTokenList(path.string()).ok());
  EXPECT_FALSE(LoadToken(path.string()).ok());
  std::filesystem::remove(path);
}

TEST(TokenTest, TokenInListMatchesAnyEntryAndNothingElse) {
  const std::vector<std::string> accepted{"new-token", "old-token"};
  EXPECT_TRUE(TokenInList(accepted, "old-token"));
  EXPECT_TRUE(TokenInList(accepted, "new-token"));
  EXPECT_FALSE(TokenInList(accepted, "other"));
  EXPECT_FALSE(TokenInList({}, ""));
}

TEST(TokenTest, RandomTokensAreHexOfTheAskedLengthAndDiffer) {
  std::set<std::string> seen;
  for (int i = 0; i < 100; ++i) {
    const std::string token = RandomToken(16);
    EXPECT_EQ(token.size(), 32u);
    EXPECT_EQ(token.find_first_not_of("0123456789abcdef"), std::string::npos) << token;
    seen.insert(token);
  }
  EXPECT_EQ(seen.size(), 100u);
}

TEST(TokenTest, Sha256HexMatchesTheStandardsTestVectors) {
  // FIPS 180-2 examples.
  EXPECT_EQ(Sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

}  // namespace
}  // namespace bakeoff::protocol
