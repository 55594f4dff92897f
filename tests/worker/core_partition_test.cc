#include "worker/core_partition.h"

#include <gtest/gtest.h>

namespace bakeoff::worker {
namespace {

// Four cores with two hyper-threads each, numbered as Linux does (siblings N and N+4).
const char* kFourCoresEightThreads = R"(processor	: 0
physical id	: 0
core id		: 0

processor	: 1
physical id	: 0
core id		: 1

processor	: 2
physical id	: 0
core id		: 2

processor	: 3
physical id	: 0
core id		: 3

processor	: 4
physical id	: 0
core id		: 0

processor	: 5
physical id	: 0
core id		: 1

processor	: 6
physical id	: 0
core id		: 2

processor	: 7
physical id	: 0
core id		: 3
)";

std::vector<int> Range(int first, int last) {
  std::vector<int> out;
  for (int c = first; c <= last; ++c) out.push_back(c);
  return out;
}

TEST(CorePartitionTest, SlotsGetWholeCoresWithTheirHyperThreads) {
  auto p = CorePartition::Make(ReadCpuTopology(kFourCoresEightThreads, Range(0, 7)), 2, false);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  ASSERT_TRUE(p->pinned());
  ASSERT_EQ(p->slot_count(), 2u);
  EXPECT_EQ(p->cores_per_slot(), 2);
  EXPECT_EQ(p->SlotCpus(0), (std::vector<int>{0, 1, 4, 5})) << "a core's siblings stay together";
  EXPECT_EQ(p->SlotCpus(1), (std::vector<int>{2, 3, 6, 7}));
  EXPECT_TRUE(p->note().empty());
}

TEST(CorePartitionTest, OnlyTheAllowedCpusAreDealtOut) {
  auto p = CorePartition::Make(ReadCpuTopology(kFourCoresEightThreads, {2, 3, 6, 7}), 2, false);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->SlotCpus(0), (std::vector<int>{2, 6}));
  EXPECT_EQ(p->SlotCpus(1), (std::vector<int>{3, 7}));
}

TEST(CorePartitionTest, MoreSlotsThanCoresUseHyperThreadsAndSayTheyShareCores) {
  auto p = CorePartition::Make(ReadCpuTopology(kFourCoresEightThreads, {0, 4}), 2, false);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->SlotCpus(0), (std::vector<int>{0}));
  EXPECT_EQ(p->SlotCpus(1), (std::vector<int>{4}));
  EXPECT_FALSE(p->note().empty());
}

TEST(CorePartitionTest, MoreSlotsThanCpusIsRefusedUnlessSharingIsAllowed) {
  auto refused = CorePartition::Make(ReadCpuTopology(kFourCoresEightThreads, {0, 1}), 3, false);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("--share-cores"), std::string::npos) << refused.status().message();
  auto shared = CorePartition::Make(ReadCpuTopology(kFourCoresEightThreads, {0, 1}), 3, true);
  ASSERT_TRUE(shared.ok());
  EXPECT_FALSE(shared->pinned());
  EXPECT_NE(shared->note().find("not pinned"), std::string::npos);
}

TEST(CorePartitionTest, AcquireTakesFreeSlotsAndReleaseGivesThemBack) {
  auto p = CorePartition::Make(ReadCpuTopology(kFourCoresEightThreads, Range(0, 7)), 4, false);
  ASSERT_TRUE(p.ok());
  auto a = p->Acquire(3);
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(*a, (std::vector<std::size_t>{0, 1, 2}));
  EXPECT_FALSE(p->Acquire(2).has_value()) << "one slot left: nothing is taken";
  auto b = p->Acquire(1);
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(*b, (std::vector<std::size_t>{3}));
  p->Release({1});
  auto c = p->Acquire(1);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(*c, (std::vector<std::size_t>{1}));
}

TEST(CorePartitionTest, CpuListsParseAndPrintAsRanges) {
  auto cpus = ParseCpuList("0-3,6,5");
  ASSERT_TRUE(cpus.ok());
  EXPECT_EQ(*cpus, (std::vector<int>{0, 1, 2, 3, 5, 6}));
  EXPECT_EQ(FormatCpuList(*cpus), "0-3,5-6");
  for (const char* bad : {"", "a", "3-1", "1-", "-2", "1,,2", "2x"}) {
    EXPECT_FALSE(ParseCpuList(bad).ok()) << bad;
  }
}

}  // namespace
}  // namespace bakeoff::worker
