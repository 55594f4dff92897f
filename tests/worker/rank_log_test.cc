#include "worker/rank_log.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>

namespace bakeoff::worker {
namespace {

class RankLogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("rank-log-test-" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_);
    path_ = (dir_ / "rank-0.log").string();
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string Read() const {
    std::ifstream in(path_);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }
  std::uint64_t OnDisk() const {
    std::uint64_t total = 0;
    for (const auto& entry : std::filesystem::directory_iterator(dir_)) total += entry.file_size();
    return total;
  }

  std::filesystem::path dir_;
  std::string path_;
};

TEST_F(RankLogTest, OutputWithinTheCapIsKeptWhole) {
  auto log = RankLog::Create(path_, 64 * 1024);
  ASSERT_TRUE(log.ok()) << log.status().ToString();
  std::string output;
  for (int i = 0; i < 2000; ++i) output += "line " + std::to_string(i) + "\n";  // ~19 KB: into the tail
  (*log)->Append(output.data(), output.size());
  (*log)->Close();
  EXPECT_EQ(Read(), output);
  EXPECT_EQ((*log)->bytes_dropped(), 0u);
  EXPECT_FALSE(std::filesystem::exists(path_ + ".tail"));
}

TEST_F(RankLogTest, OutputFarOverTheCapKeepsHeadAndTailWithAMarkerAndStaysWithinTheCap) {
  const std::uint64_t cap = 64 * 1024;
  auto created = RankLog::Create(path_, cap);
  ASSERT_TRUE(created.ok());
  RankLog& log = **created;
  std::string output;
  std::uint64_t peak = 0;
  for (int i = 0; output.size() < (4u << 20); ++i) {
    std::string chunk = "line " + std::to_string(i) + " " + std::string(i % 300, 'x') + "\n";
    log.Append(chunk.data(), chunk.size());
    output += chunk;
    if (i % 97 == 0) peak = std::max(peak, OnDisk());
  }
  EXPECT_LE(peak, cap) << "the files on disk while the rank runs";
  log.Close();
  const std::string text = Read();
  EXPECT_LE(text.size(), cap);
  EXPECT_EQ(text.substr(0, log.head_bytes()), output.substr(0, log.head_bytes()));
  const std::size_t marker = text.find("\n[bakeoff worker: ");
  ASSERT_NE(marker, std::string::npos);
  EXPECT_EQ(marker, log.head_bytes());
  const std::size_t tail_at = text.find("(--max-rank-log-bytes)]\n", marker) + 24;
  const std::string tail = text.substr(tail_at);
  EXPECT_GE(tail.size(), log.segment_bytes());
  EXPECT_EQ(tail, output.substr(output.size() - tail.size()));
  EXPECT_EQ(log.bytes_dropped(), output.size() - log.head_bytes() - tail.size());
  EXPECT_NE(text.find(std::to_string(log.bytes_dropped()) + " bytes of this rank's output dropped"),
            std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(path_ + ".tail"));
  EXPECT_FALSE(std::filesystem::exists(path_ + ".tail.old"));
}

TEST_F(RankLogTest, ACapUnderTheMinimumIsRefused) {
  EXPECT_FALSE(RankLog::Create(path_, 1000).ok());
}

}  // namespace
}  // namespace bakeoff::worker
