// `bakeoff local` in a directory others may write (security review 2026-12-07, A11), run
// as the real binary: a results.log or results.db that another user planted as a link is
// refused before anything is written through it, one another user owns is refused, and a
// fresh database and log are 0600 even under umask 000.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <tuple>

#include "tests/integration/process_guard.h"
#include "tests/integration/test_files.h"

namespace bakeoff {
namespace {
using namespace std::chrono_literals;
namespace fs = std::filesystem;
using testing::ProcessGuard;
using testing::ReadFile;

const std::string kBin = BAKEOFF_BINARY_DIR;

mode_t ModeOf(const fs::path& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 ? (st.st_mode & 07777) : 0;
}

class SharedDirectoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::FreshTestDir("bakeoff-shared-dir");
    fs::create_directory(dir_ / "elsewhere");
    // A sweep the CPU workers can never place: refused after the log and the database
    // are open, so a run that gets that far has made both (and exits 2 at once).
    sweep_ = (dir_ / "sweep.yaml").string();
    std::ofstream(sweep_) << "name: shared-dir\nworkload: {executor: lora, model: tiny, seq_len: 16, warmup_steps: 1, "
                             "steps: 2}\nparameters:\n  micro_batch: {values: [1, 2]}\nbaseline: {micro_batch: 1}\n"
                             "resources: {device: cuda}\n";
  }
  void TearDown() override {
    if (!HasFailure()) fs::remove_all(dir_);
  }
  // Runs `bakeoff local` in dir_ with `args` after the sweep; its exit code and output.
  std::pair<int, std::string> RunLocal(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {kBin + "/bakeoff", "local", sweep_, "--trainer", kBin + "/bakeoff-fake-trainer"};
    argv.insert(argv.end(), args.begin(), args.end());
    const std::string out = (dir_ / "elsewhere" / "local.out").string();
    ProcessGuard local(argv, {}, out);
    auto code = local.WaitExit(60s);
    return {code.value_or(-1), ReadFile(out)};
  }
  std::string Db() const { return (dir_ / "results.db").string(); }
  fs::path dir_;
  std::string sweep_;
};

TEST_F(SharedDirectoryTest, ALinkedLogIsRefusedAndItsTargetUntouched) {
  std::ofstream(dir_ / "elsewhere" / "target") << "keep\n";
  fs::create_symlink(dir_ / "elsewhere" / "target", dir_ / "results.log");
  auto [code, out] = RunLocal({"--db", Db()});
  EXPECT_EQ(code, 2) << out;
  EXPECT_NE(out.find((dir_ / "results.log").string() + "' is a symbolic link"), std::string::npos) << out;
  EXPECT_EQ(ReadFile(dir_ / "elsewhere" / "target"), "keep\n");
  EXPECT_FALSE(fs::exists(Db())) << "refused before the database was opened";
  // The second direction: --log-file names a dangling link; nothing is created at its target.
  fs::create_symlink(dir_ / "elsewhere" / "made-by-link", dir_ / "other.log");
  std::tie(code, out) = RunLocal({"--db", Db(), "--log-file", (dir_ / "other.log").string()});
  EXPECT_EQ(code, 2) << out;
  EXPECT_NE(out.find("symbolic link"), std::string::npos) << out;
  EXPECT_FALSE(fs::exists(dir_ / "elsewhere" / "made-by-link"));
}

TEST_F(SharedDirectoryTest, ALinkedDatabaseIsRefusedAndItsTargetUntouched) {
  std::ofstream(dir_ / "elsewhere" / "their.db") << "keep\n";
  fs::create_symlink(dir_ / "elsewhere" / "their.db", dir_ / "results.db");
  auto [code, out] = RunLocal({"--db", Db(), "--log-file", (dir_ / "elsewhere" / "run.log").string()});
  EXPECT_NE(code, 0) << out;
  EXPECT_NE(out.find(Db() + "' is a symbolic link"), std::string::npos) << out;
  EXPECT_EQ(ReadFile(dir_ / "elsewhere" / "their.db"), "keep\n");
  // A planted -wal link beside a clean name.
  fs::remove(dir_ / "results.db");
  fs::create_symlink(dir_ / "elsewhere" / "their.db", dir_ / "results.db-wal");
  std::tie(code, out) = RunLocal({"--db", Db(), "--log-file", (dir_ / "elsewhere" / "run.log").string()});
  EXPECT_NE(code, 0) << out;
  EXPECT_NE(out.find(Db() + "-wal' is a symbolic link"), std::string::npos) << out;
  EXPECT_EQ(ReadFile(dir_ / "elsewhere" / "their.db"), "keep\n");
}

TEST_F(SharedDirectoryTest, AnotherUsersDatabaseOrLogIsRefused) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to give a file to another user (uid 65534)";
  // As the review planted it: 0666, owned by another user.
  for (const char* name : {"results.db", "results.log"}) {
    std::ofstream(dir_ / name) << "";
    fs::permissions(dir_ / name, fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read |
                                     fs::perms::group_write | fs::perms::others_read | fs::perms::others_write);
    ASSERT_EQ(chown((dir_ / name).c_str(), 65534, 65534), 0);
  }
  auto [code, out] = RunLocal({"--db", Db()});
  EXPECT_EQ(code, 2) << out;
  EXPECT_NE(out.find((dir_ / "results.log").string() + "' belongs to uid 65534"), std::string::npos) << out;
  std::tie(code, out) = RunLocal({"--db", Db(), "--log-file", (dir_ / "elsewhere" / "run.log").string()});
  EXPECT_NE(code, 0) << out;
  EXPECT_NE(out.find(Db() + "' belongs to uid 65534"), std::string::npos) << out;
  EXPECT_EQ(fs::file_size(dir_ / "results.db"), 0u) << "nothing was written to their database";
}

TEST_F(SharedDirectoryTest, AFreshDatabaseAndLogAre0600EvenUnderUmask000) {
  const mode_t old = umask(0);  // the child inherits it
  auto [code, out] = RunLocal({"--db", Db()});
  umask(old);
  EXPECT_EQ(code, 2) << out;
  EXPECT_NE(out.find("resources.device is cuda"), std::string::npos) << "the run got past both opens: " << out;
  for (const char* name : {"results.db", "results.db-wal", "results.db-shm", "results.log"}) {
    if (!fs::exists(dir_ / name)) continue;  // -wal and -shm may be gone after a clean close
    EXPECT_EQ(ModeOf(dir_ / name), 0600u) << name;
  }
  EXPECT_TRUE(fs::exists(dir_ / "results.db"));
  EXPECT_TRUE(fs::exists(dir_ / "results.log"));
}

}  // namespace
}  // namespace bakeoff
