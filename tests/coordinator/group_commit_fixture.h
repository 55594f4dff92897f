// What the group-commit and worker-links suites share: a results store in a fresh test
// directory and a group commit over it (5 ms window) on an io_context the test runs,
// counting the group's hooks. Thread-safety: test code, on the test's thread.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <memory>

#include <boost/asio/io_context.hpp>

#include "coordinator/group_commit.h"
#include "tests/coordinator/coordinator_test_util.h"

namespace bakeoff::testing {

class GroupCommitFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = FreshTestDir("bakeoff-group-commit");
    ASSERT_NO_FATAL_FAILURE(OpenTestStore(dir_, store_));
    group_ = std::make_unique<coordinator::GroupCommit>(
        io_.get_executor(), *store_, clock_, std::chrono::milliseconds(5), metrics_,
        coordinator::GroupCommit::Hooks{[this]() { ++before_commit_; }, [this](const Status&) { ++lost_; }});
  }
  void TearDown() override {
    group_.reset();
    store_.reset();
    if (!HasFailure()) std::filesystem::remove_all(dir_);
  }

  std::filesystem::path dir_;
  boost::asio::io_context io_;
  FakeClock clock_;
  TestEnv env_{clock_};
  logging::Logger log_{env_, "coordinator"};
  coordinator::CoordinatorMetrics metrics_{clock_};
  std::unique_ptr<metrics::ResultsStore> store_;
  std::unique_ptr<coordinator::GroupCommit> group_;
  int before_commit_ = 0;  // the before_commit hook ran
  int lost_ = 0;           // the lost hook ran
};

}  // namespace bakeoff::testing
