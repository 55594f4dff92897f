// A file of this user's alone in a directory others may write (security review
// 2026-12-07, A11): never opened through a link (one to a file that exists, and a
// dangling one that open(2) would otherwise create the target of), never a FIFO or
// another user's file, and created 0600 whatever the umask.
#include "protocol/own_file.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "tests/integration/test_files.h"  // FreshTestDir, ReadFile

namespace bakeoff::protocol {
namespace {

namespace fs = std::filesystem;
using bakeoff::testing::FreshTestDir;
using bakeoff::testing::ReadFile;

class OwnFileTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = FreshTestDir("bakeoff-own-file"); }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

mode_t ModeOf(const fs::path& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 ? (st.st_mode & 07777) : 0;
}

TEST_F(OwnFileTest, AFreshFileIs0600WhateverTheUmask) {
  const mode_t old = umask(0);
  Result<int> fd = OpenOwnFile((dir_ / "results.log").string(), O_WRONLY | O_APPEND, "log file");
  umask(old);
  ASSERT_TRUE(fd.ok()) << fd.status().message();
  close(*fd);
  EXPECT_EQ(ModeOf(dir_ / "results.log"), 0600u);
}

TEST_F(OwnFileTest, AnOwnFileIsOpenedAgainAndKeepsItsMode) {
  std::ofstream(dir_ / "mine") << "before\n";
  fs::permissions(dir_ / "mine", fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read);
  Result<int> fd = OpenOwnFile((dir_ / "mine").string(), O_WRONLY | O_APPEND, "log file");
  ASSERT_TRUE(fd.ok()) << fd.status().message();
  ASSERT_EQ(write(*fd, "after\n", 6), 6);
  close(*fd);
  EXPECT_EQ(ReadFile(dir_ / "mine"), "before\nafter\n");
  EXPECT_EQ(ModeOf(dir_ / "mine"), 0640u);
  EXPECT_TRUE(CheckOwnFileIfPresent((dir_ / "mine").string(), "log file").ok());
  EXPECT_TRUE(CheckOwnFileIfPresent((dir_ / "missing").string(), "log file").ok());
}

TEST_F(OwnFileTest, ALinkToAFileIsRefusedAndItsTargetUntouched) {
  fs::create_directory(dir_ / "elsewhere");
  std::ofstream(dir_ / "elsewhere" / "target") << "keep\n";
  fs::create_symlink(dir_ / "elsewhere" / "target", dir_ / "results.log");
  Result<int> fd = OpenOwnFile((dir_ / "results.log").string(), O_WRONLY | O_APPEND, "log file");
  ASSERT_FALSE(fd.ok());
  EXPECT_EQ(fd.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(fd.status().message().find((dir_ / "results.log").string()), std::string::npos) << fd.status().message();
  EXPECT_NE(fd.status().message().find("symbolic link"), std::string::npos) << fd.status().message();
  EXPECT_NE(fd.status().message().find("remove it"), std::string::npos) << fd.status().message();
  EXPECT_EQ(ReadFile(dir_ / "elsewhere" / "target"), "keep\n");
  const Status checked = CheckOwnFileIfPresent((dir_ / "results.log").string(), "log file");
  EXPECT_NE(checked.message().find("symbolic link"), std::string::npos) << checked.message();
}

// The second direction: a dangling link, through which O_CREAT alone would create the
// file the planter named (a root-owned file in root's directory, say).
TEST_F(OwnFileTest, ADanglingLinkIsRefusedAndNothingIsCreatedAtItsTarget) {
  fs::create_symlink(dir_ / "planted-target", dir_ / "results.db");
  Result<int> fd = OpenOwnFile((dir_ / "results.db").string(), O_RDWR, "results database");
  ASSERT_FALSE(fd.ok());
  EXPECT_NE(fd.status().message().find("symbolic link"), std::string::npos) << fd.status().message();
  EXPECT_FALSE(fs::exists(dir_ / "planted-target"));
}

TEST_F(OwnFileTest, AFifoIsRefusedWithoutBlocking) {
  ASSERT_EQ(mkfifo((dir_ / "results.log").c_str(), 0666), 0);
  Result<int> fd = OpenOwnFile((dir_ / "results.log").string(), O_RDWR, "log file");
  ASSERT_FALSE(fd.ok());
  EXPECT_NE(fd.status().message().find("not a regular file"), std::string::npos) << fd.status().message();
}

TEST_F(OwnFileTest, AnotherUsersFileIsRefused) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to give a file to another user (uid 65534)";
  std::ofstream(dir_ / "results.db") << "";
  fs::permissions(dir_ / "results.db", fs::perms::all);
  ASSERT_EQ(chown((dir_ / "results.db").c_str(), 65534, 65534), 0);
  Result<int> fd = OpenOwnFile((dir_ / "results.db").string(), O_RDWR, "results database");
  ASSERT_FALSE(fd.ok());
  EXPECT_NE(fd.status().message().find("belongs to uid 65534"), std::string::npos) << fd.status().message();
  // A link another user planted is refused as a link, whoever owns its target.
  fs::create_symlink(dir_ / "results.db", dir_ / "link.db");
  ASSERT_EQ(lchown((dir_ / "link.db").c_str(), 65534, 65534), 0);
  const Status checked = CheckOwnFileIfPresent((dir_ / "link.db").string(), "results database");
  EXPECT_NE(checked.message().find("symbolic link"), std::string::npos) << checked.message();
  EXPECT_NE(CheckOwnFileIfPresent((dir_ / "results.db").string(), "x").message().find("uid 65534"),
            std::string::npos);
}

}  // namespace
}  // namespace bakeoff::protocol
