#include "worker/host_claims.h"

#include <gtest/gtest.h>
#include <gmock/gmock.h>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <memory>

#include "tests/integration/test_files.h"

namespace bakeoff::worker {
namespace {
using ::testing::HasSubstr;

// Each HostClaims opens its own descriptions, so two in one process contend as two
// workers' would (flock locks belong to the open file description).
class HostClaimsTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = bakeoff::testing::FreshTestDir("bakeoff-host-claims"); }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir() const { return (dir_ / "locks").string(); }
  std::filesystem::path dir_;
};

TEST_F(HostClaimsTest, ASecondWorkerNeverGetsCpusTheFirstHolds) {
  HostClaims first(dir()), second(dir());
  std::vector<int> mine{0, 1, 2, 3};
  ASSERT_TRUE(first.ClaimCpus(&mine, false, false).ok());
  EXPECT_EQ(mine, (std::vector<int>{0, 1, 2, 3}));
  // Named CPUs must all be free: the error says which are held and by whom.
  std::vector<int> named{3, 4};
  Status s = second.ClaimCpus(&named, true, false);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("CPU(s) 3 of this host are held by another Bakeoff worker"));
  EXPECT_THAT(s.message(), HasSubstr("pid"));
  EXPECT_THAT(s.message(), HasSubstr("--cpus"));
  // The default (the affinity mask) narrows to the free CPUs.
  HostClaims third(dir());
  std::vector<int> mask{0, 1, 2, 3, 4, 5};
  ASSERT_TRUE(third.ClaimCpus(&mask, false, false).ok());
  EXPECT_EQ(mask, (std::vector<int>{4, 5}));
}

TEST_F(HostClaimsTest, NoFreeCpuRefusesTheWorkerUnlessItSharesOnPurpose) {
  HostClaims first(dir()), second(dir()), sharing(dir());
  std::vector<int> all{0, 1};
  ASSERT_TRUE(first.ClaimCpus(&all, false, false).ok());
  std::vector<int> again{0, 1};
  EXPECT_FALSE(second.ClaimCpus(&again, false, false).ok());
  std::vector<int> shared{0, 1};
  EXPECT_TRUE(sharing.ClaimCpus(&shared, false, true).ok());
  EXPECT_EQ(shared, (std::vector<int>{0, 1}));
}

TEST_F(HostClaimsTest, AWorkerThatSharesKeepsOthersFromClaimingThoseCpusAlone) {
  HostClaims sharing(dir()), alone(dir());
  std::vector<int> cpus{0};
  ASSERT_TRUE(sharing.ClaimCpus(&cpus, false, true).ok());
  std::vector<int> want{0};
  Status s = alone.ClaimCpus(&want, true, false);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("--share-cores"));
}

TEST_F(HostClaimsTest, ClaimsEndWithTheirHolder) {
  std::vector<int> cpus{0};
  {
    HostClaims first(dir());
    ASSERT_TRUE(first.ClaimCpus(&cpus, true, false).ok());
  }
  HostClaims second(dir());
  EXPECT_TRUE(second.ClaimCpus(&cpus, true, false).ok());
}

TEST_F(HostClaimsTest, TwoWorkersWithTheSameStorePortRangeGetDisjointWindows) {
  HostClaims first(dir()), second(dir());
  protocol::PortRange a{29500, 29999}, b{29500, 29999};
  ASSERT_TRUE(first.ClaimStorePorts(&a, 10).ok());
  ASSERT_TRUE(second.ClaimStorePorts(&b, 20).ok());
  EXPECT_EQ(a.first, 29500);
  EXPECT_EQ(a.last, 29509);
  EXPECT_EQ(b.first, 29510);
  EXPECT_EQ(b.last, 29529);
  // A range that overlaps a held window by other bounds still avoids it: the blocks are
  // the same for every worker whatever its range.
  HostClaims third(dir());
  protocol::PortRange c{29505, 29534};
  ASSERT_TRUE(third.ClaimStorePorts(&c, 10).ok());
  EXPECT_EQ(c.first, 29530);
  EXPECT_EQ(c.last, 29534);
}

TEST_F(HostClaimsTest, ARangeEveryPortOfWhichIsHeldIsRefused) {
  HostClaims first(dir()), second(dir());
  protocol::PortRange a{29500, 29509}, b{29500, 29509};
  ASSERT_TRUE(first.ClaimStorePorts(&a, 10).ok());
  Status s = second.ClaimStorePorts(&b, 10);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("--store-ports"));
}

TEST_F(HostClaimsTest, OffClaimsNothing) {
  HostClaims off("off"), other("off");
  std::vector<int> cpus{0};
  EXPECT_TRUE(off.ClaimCpus(&cpus, true, false).ok());
  EXPECT_TRUE(other.ClaimCpus(&cpus, true, false).ok());
}

// Issue 51: two test suites side by side (claims off) gave two `bakeoff local`s the same
// store ports, and a rank joined the other run's rendezvous. Off still claims store
// ports, host-wide (the default directory): two claimers of one range get two windows,
// and a third finds it full. (38000-38019: a range no other test and no default uses.)
TEST_F(HostClaimsTest, OffClaimsNoCpusButStillClaimsStorePortsHostWide) {
  HostClaims first("off"), second("off"), third("off");
  protocol::PortRange a{38000, 38019}, b{38000, 38019}, c{38000, 38019};
  ASSERT_TRUE(first.ClaimStorePorts(&a, 10).ok());
  ASSERT_TRUE(second.ClaimStorePorts(&b, 10).ok());
  EXPECT_EQ(a.first, 38000);
  EXPECT_EQ(a.last, 38009);
  EXPECT_EQ(b.first, 38010);
  EXPECT_EQ(b.last, 38019);
  Status s = third.ClaimStorePorts(&c, 10);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("is held by another Bakeoff worker"));
}

// Security review 2026-12-07, A10: another local user opened the 0666 claims of the
// 01777 directory, held them and wrote terminal escapes into them. Now the directory is
// 0755 and each claim 0600: another user (a real process of uid 65534, when the test
// runs as root) can neither open a claim to hold it nor create one.
TEST_F(HostClaimsTest, AnotherUserCanNeitherHoldNorPlantAClaim) {
  HostClaims first(dir());
  std::vector<int> cpus{0};
  ASSERT_TRUE(first.ClaimCpus(&cpus, true, false).ok());
  struct stat st;
  ASSERT_EQ(stat(dir().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0755u);
  ASSERT_EQ(stat((dir() + "/cpu0.lock").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  if (geteuid() != 0) GTEST_SKIP() << "the other user's half needs root";
  ASSERT_EQ(chmod(dir_.c_str(), 0755), 0);  // the other user may reach the directory
  const pid_t child = fork();
  if (child == 0) {
    if (setgid(65534) != 0 || setuid(65534) != 0) _exit(2);
    const int held = open((dir() + "/cpu0.lock").c_str(), O_RDONLY);  // flock needs no more
    const int planted = open((dir() + "/cpu9.lock").c_str(), O_RDWR | O_CREAT, 0666);
    _exit(held < 0 && planted < 0 ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "uid 65534 could open or create a claim";
}

// From the other side: a world-writable directory an older worker of this user made is
// made 0755; a holder's text is shown escaped, never raw; and a directory of another
// user (root only) is refused, naming BAKEOFF_HOST_LOCK_DIR, as is a claim planted by
// another user, which is replaced.
TEST_F(HostClaimsTest, AHoldersTextIsEscapedAndAnotherUsersDirectoryIsRefused) {
  std::filesystem::create_directories(dir());
  ASSERT_EQ(chmod(dir().c_str(), 01777), 0);
  const std::string lock = dir() + "/cpu5.lock";
  const int fd = open(lock.c_str(), O_RDWR | O_CREAT, 0666);
  ASSERT_GE(fd, 0);
  const std::string escape = "\x1b]0;PWNED\x07\x1b[2J run sudo rm -rf /";
  ASSERT_EQ(write(fd, escape.data(), escape.size()), static_cast<ssize_t>(escape.size()));
  ASSERT_EQ(flock(fd, LOCK_SH), 0);
  HostClaims second(dir());
  std::vector<int> cpus{5};
  Status refused = second.ClaimCpus(&cpus, true, false);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.message().find('\x1b'), std::string::npos) << refused.message();
  EXPECT_EQ(refused.message().find('\x07'), std::string::npos) << refused.message();
  EXPECT_THAT(refused.message(), HasSubstr("\\x1b]0;PWNED"));
  struct stat st;
  ASSERT_EQ(stat(dir().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0755u) << "the world-writable directory was made 0755";
  close(fd);
  if (geteuid() != 0) GTEST_SKIP() << "another user's files need root";
  // A claim another user planted (not held): removed and made anew, ours.
  const std::string planted = dir() + "/cpu6.lock";
  { const int p = open(planted.c_str(), O_RDWR | O_CREAT, 0666); ASSERT_GE(p, 0); ASSERT_EQ(fchown(p, 65534, 65534), 0); close(p); }
  HostClaims third(dir());
  std::vector<int> six{6};
  ASSERT_TRUE(third.ClaimCpus(&six, true, false).ok());
  ASSERT_EQ(stat(planted.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, geteuid());
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  // A directory of another user: refused.
  const std::string theirs = (dir_ / "theirs").string();
  std::filesystem::create_directories(theirs);
  ASSERT_EQ(chown(theirs.c_str(), 65534, 65534), 0);
  HostClaims fourth(theirs);
  std::vector<int> seven{7};
  Status foreign = fourth.ClaimCpus(&seven, true, false);
  ASSERT_FALSE(foreign.ok());
  EXPECT_THAT(foreign.message(), HasSubstr("belongs to uid 65534"));
  EXPECT_THAT(foreign.message(), HasSubstr("BAKEOFF_HOST_LOCK_DIR"));
}

}  // namespace
}  // namespace bakeoff::worker
