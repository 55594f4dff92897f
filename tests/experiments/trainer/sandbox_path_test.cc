// Sweep-named files stay inside the launcher's roots: names are relative without "..",
// links out of the data root are refused, and no output is written through a link.
#include "experiments/trainer/sandbox_path.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "experiments/trainer/trainer_fields.h"

namespace bakeoff::trainer {
namespace {

namespace fs = std::filesystem;

class SandboxPathTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("bakeoff-sandbox-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "root" / "sub");
    fs::create_directories(dir_ / "outside");
    std::ofstream(dir_ / "root" / "tokens.bin") << "ab";
    std::ofstream(dir_ / "outside" / "secret") << "AWS_SECRET";
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Root() const { return (dir_ / "root").string(); }
  fs::path dir_;
};

TEST(SandboxedNameTest, OnlyRelativeNamesWithoutDotDotAreNamesInsideARoot) {
  for (const char* ok : {"tokens.bin", "sub/tokens.bin", "my data.bin", "a-b_c.1/d"}) {
    EXPECT_TRUE(IsSandboxedName(ok)) << ok;
  }
  for (const char* bad : {"", "/etc/passwd", "../x", "a/../../x", "a/./b", ".", "..", "a//b", "a/", "~/x",
                          "a\\b", "x\ny", "$HOME"}) {
    EXPECT_FALSE(IsSandboxedName(bad)) << bad;
  }
  EXPECT_TRUE(IsSandboxedName(std::string(kMaxSandboxedNameBytes, 'a')));
  EXPECT_FALSE(IsSandboxedName(std::string(kMaxSandboxedNameBytes + 1, 'a')));
}

TEST_F(SandboxPathTest, AFileInsideTheRootResolvesToItsRealPath) {
  auto path = ResolveForReading(Root(), "tokens.bin");
  ASSERT_TRUE(path.ok()) << path.status().ToString();
  EXPECT_EQ(*path, fs::canonical(dir_ / "root" / "tokens.bin").string());
  EXPECT_EQ(ResolveForReading(Root(), "absent.bin").status().code(), Status::Code::kNotFound);
}

TEST_F(SandboxPathTest, ALinkOutOfTheDataRootIsRefusedWithoutReadingIt) {
  fs::create_symlink(dir_ / "outside" / "secret", dir_ / "root" / "leak.bin");
  fs::create_directory_symlink(dir_ / "outside", dir_ / "root" / "escape");
  for (const char* name : {"leak.bin", "escape/secret"}) {
    auto path = ResolveForReading(Root(), name);
    ASSERT_FALSE(path.ok()) << name;
    EXPECT_NE(path.status().message().find("leads out of the data root"), std::string::npos);
    EXPECT_EQ(path.status().message().find("AWS_"), std::string::npos) << "never the contents";
  }
  EXPECT_FALSE(ResolveForReading(Root(), "../outside/secret").ok());
  EXPECT_FALSE(ResolveForReading(Root(), (dir_ / "outside" / "secret").string()).ok());
}

TEST_F(SandboxPathTest, AnOutputIsCreatedInsideTheRootWithItsParents) {
  auto fd = OpenForWriting(Root(), "out/adapters.bin");
  ASSERT_TRUE(fd.ok()) << fd.status().ToString();
  ASSERT_EQ(write(*fd, "xy", 2), 2);
  close(*fd);
  EXPECT_EQ(fs::file_size(dir_ / "root" / "out" / "adapters.bin"), 2u);
}

TEST_F(SandboxPathTest, NoOutputIsWrittenThroughALinkOrOutsideTheRoot) {
  fs::create_symlink(dir_ / "outside" / "secret", dir_ / "root" / "victim.bin");
  fs::create_directory_symlink(dir_ / "outside", dir_ / "root" / "escape");
  EXPECT_FALSE(OpenForWriting(Root(), "victim.bin").ok());
  EXPECT_FALSE(OpenForWriting(Root(), "escape/new.bin").ok());
  EXPECT_FALSE(OpenForWriting(Root(), "../outside/new.bin").ok());
  EXPECT_FALSE(OpenForWriting(Root(), "/tmp/bakeoff-sandbox-abs.bin").ok());
  std::ifstream secret(dir_ / "outside" / "secret");
  std::string text((std::istreambuf_iterator<char>(secret)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, "AWS_SECRET") << "the link's target is untouched";
  EXPECT_FALSE(fs::exists(dir_ / "outside" / "new.bin"));
  EXPECT_FALSE(fs::exists("/tmp/bakeoff-sandbox-abs.bin"));
}

}  // namespace
}  // namespace bakeoff::trainer
