// The results database in a directory others may write (security review 2026-12-07,
// A11): created 0600 with its -wal and -shm files whatever the umask; never opened
// through a link, neither the database's name nor a side file's SQLite opens by name;
// never another user's database or side file.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "metrics/store/read_only_query.h"
#include "metrics/store/results_reader.h"
#include "metrics/store/results_store.h"
#include "tests/integration/test_files.h"  // ReadFile
#include "tests/metrics/store/results_store_test_util.h"

namespace bakeoff::metrics {
namespace {

namespace fs = std::filesystem;
using bakeoff::testing::ReadFile;
using testing::TempDir;

mode_t ModeOf(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 ? (st.st_mode & 07777) : 0;
}

Result<std::unique_ptr<ResultsStore>> OpenAt(const std::string& path) {
  StoreOptions options;
  options.path = path;
  options.background_checkpoint = false;
  return ResultsStore::Open(options);
}

TEST(ResultsStoreFilesTest, AFreshDatabaseAndItsWalAndShmAre0600WhateverTheUmask) {
  TempDir dir;
  const mode_t old = umask(0);
  auto store = OpenAt(dir.File("results.db"));
  umask(old);
  ASSERT_TRUE(store.ok()) << store.status().message();
  for (const char* name : {"results.db", "results.db-wal", "results.db-shm"}) {
    ASSERT_TRUE(fs::exists(dir.File(name))) << name;
    EXPECT_EQ(ModeOf(dir.File(name)), 0600u) << name;
  }
}

TEST(ResultsStoreFilesTest, ALinkedDatabaseIsRefusedAndItsTargetUntouched) {
  TempDir dir;
  fs::create_directory(dir.File("elsewhere"));
  { ASSERT_TRUE(OpenAt(dir.File("elsewhere/real.db")).ok()); }
  const std::string before = ReadFile(dir.File("elsewhere/real.db"));
  fs::create_symlink(dir.File("elsewhere/real.db"), dir.File("results.db"));
  auto store = OpenAt(dir.File("results.db"));
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(store.status().message().find(dir.File("results.db") + "' is a symbolic link"), std::string::npos)
      << store.status().message();
  EXPECT_EQ(ReadFile(dir.File("elsewhere/real.db")), before);
  EXPECT_FALSE(fs::exists(dir.File("elsewhere/real.db-wal")));
  // A dangling link: nothing is created where it points.
  fs::create_symlink(dir.File("elsewhere/new.db"), dir.File("dangling.db"));
  EXPECT_FALSE(OpenAt(dir.File("dangling.db")).ok());
  EXPECT_FALSE(fs::exists(dir.File("elsewhere/new.db")));
}

// The readers (bakeoff report/query/status, the coordinator's query route and /live) open
// the database by name on each read: a link put in its place is refused, never followed.
TEST(ResultsStoreFilesTest, TheReadOnlyOpensRefuseALinkedDatabase) {
  TempDir dir;
  { ASSERT_TRUE(OpenAt(dir.File("real.db")).ok()); }
  fs::create_symlink(dir.File("real.db"), dir.File("results.db"));
  auto reader = ResultsReader::Open(dir.File("results.db"));
  ASSERT_FALSE(reader.ok());
  EXPECT_EQ(reader.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(reader.status().message().find(dir.File("results.db") + "' is a symbolic link"), std::string::npos)
      << reader.status().message();
  auto query = RunReadOnlyQuery(dir.File("results.db"), "SELECT COUNT(*) FROM sweeps", QueryLimits{});
  ASSERT_FALSE(query.ok());
  EXPECT_NE(query.status().message().find("is a symbolic link"), std::string::npos) << query.status().message();
  // The file itself reads.
  EXPECT_TRUE(ResultsReader::Open(dir.File("real.db")).ok());
  EXPECT_TRUE(RunReadOnlyQuery(dir.File("real.db"), "SELECT COUNT(*) FROM sweeps", QueryLimits{}).ok());
  // Nothing there: not found, saying what to pass.
  auto missing = ResultsReader::Open(dir.File("none.db"));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), Status::Code::kNotFound);
  EXPECT_NE(missing.status().message().find("--db FILE"), std::string::npos);
}

// The second direction: the database's own name is clean, but SQLite would open a
// planted -wal or -journal link by name and write the database's pages through it.
TEST(ResultsStoreFilesTest, APlantedSideFileLinkIsRefusedAndItsTargetUntouched) {
  TempDir dir;
  std::ofstream(dir.File("target")) << "keep\n";
  for (const char* side : {"-wal", "-shm", "-journal"}) {
    fs::create_symlink(dir.File("target"), dir.File(std::string("results.db") + side));
    auto store = OpenAt(dir.File("results.db"));
    ASSERT_FALSE(store.ok()) << side;
    EXPECT_NE(store.status().message().find(dir.File(std::string("results.db") + side)), std::string::npos)
        << store.status().message();
    EXPECT_NE(store.status().message().find("symbolic link"), std::string::npos) << store.status().message();
    fs::remove(dir.File(std::string("results.db") + side));
  }
  EXPECT_EQ(ReadFile(dir.File("target")), "keep\n");
}

TEST(ResultsStoreFilesTest, AnotherUsersDatabaseOrSideFileIsRefused) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to give a file to another user (uid 65534)";
  TempDir dir;
  { ASSERT_TRUE(OpenAt(dir.File("results.db")).ok()); }
  fs::permissions(dir.File("results.db"), fs::perms::all);
  ASSERT_EQ(chown(dir.File("results.db").c_str(), 65534, 65534), 0);
  auto store = OpenAt(dir.File("results.db"));
  ASSERT_FALSE(store.ok());
  EXPECT_NE(store.status().message().find("belongs to uid 65534"), std::string::npos) << store.status().message();
  // Our own database, another user's -wal beside it (0666, as the review planted it).
  ASSERT_EQ(chown(dir.File("results.db").c_str(), 0, 0), 0);
  std::ofstream(dir.File("results.db-wal")) << "";
  ASSERT_EQ(chown(dir.File("results.db-wal").c_str(), 65534, 65534), 0);
  store = OpenAt(dir.File("results.db"));
  ASSERT_FALSE(store.ok());
  EXPECT_NE(store.status().message().find("results.db-wal' belongs to uid 65534"), std::string::npos)
      << store.status().message();
}

}  // namespace
}  // namespace bakeoff::metrics
