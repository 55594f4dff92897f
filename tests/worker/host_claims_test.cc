#include "worker/host_claims.h"

#include <gtest/gtest.h>
#include <gmock/gmock.h>

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

}  // namespace
}  // namespace bakeoff::worker
