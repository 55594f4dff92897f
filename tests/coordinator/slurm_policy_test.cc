#include "coordinator/slurm_policy.h"

#include <gtest/gtest.h>

namespace bakeoff::coordinator {
namespace {

using namespace std::chrono_literals;

class SlurmPolicyTest : public ::testing::Test {
 protected:
  SlurmPolicyLimits Limits(int units, int max_nodes = 4) {
    SlurmPolicyLimits l;
    l.units_per_node = units;
    l.max_nodes = max_nodes;
    l.max_pending_jobs = 4;
    l.max_submits_per_poll = 4;
    l.idle_grace = 60s;
    l.worker_start_timeout = 600s;
    return l;
  }
  SlurmJob Job(const std::string& id, int nodes, SlurmJobState state, int registered = 0, int busy = 0) {
    SlurmJob j;
    j.id = id;
    j.nodes = nodes;
    j.state = state;
    j.registered_workers = registered;
    j.busy_workers = busy;
    j.submitted_at = now_;
    j.last_active = now_;
    if (state == SlurmJobState::kRunning) j.running_since = now_;
    return j;
  }
  Clock::TimePoint now_{std::chrono::hours(1)};
};

TEST_F(SlurmPolicyTest, GangTrialAsksForAllItsNodesInOneJob) {
  SlurmPolicy policy(Limits(/*gpus per node=*/4));
  SlurmPlan plan = policy.Plan({8}, {}, {}, now_);
  ASSERT_EQ(plan.submit_nodes, (std::vector<int>{2}));  // world size 8 on 4-GPU nodes
}

TEST_F(SlurmPolicyTest, SmallTrialsShareANewNode) {
  SlurmPolicy policy(Limits(8));
  SlurmPlan plan = policy.Plan({2, 2, 4, 1}, {}, {}, now_);
  EXPECT_EQ(plan.submit_nodes, (std::vector<int>{1, 1}));  // 2+2+4 fill one node, 1 opens another
}

TEST_F(SlurmPolicyTest, FreeWorkersAndPendingJobsCountAsCapacity) {
  SlurmPolicy policy(Limits(2));
  // One free worker slot pair, and one job pending in Slurm's queue: room for two trials.
  SlurmPlan plan = policy.Plan({2, 2}, {2}, {Job("7", 1, SlurmJobState::kPending)}, now_);
  EXPECT_TRUE(plan.submit_nodes.empty());
  plan = policy.Plan({2, 2, 2}, {2}, {Job("7", 1, SlurmJobState::kPending)}, now_);
  EXPECT_EQ(plan.submit_nodes, (std::vector<int>{1}));
}

TEST_F(SlurmPolicyTest, MaxNodesBoundsSubmissionsAndTheRestIsHeldBack) {
  SlurmPolicy policy(Limits(1, /*max_nodes=*/3));
  SlurmPlan plan = policy.Plan({1, 1, 1, 1, 1}, {}, {Job("1", 1, SlurmJobState::kRunning, 1, 1)}, now_);
  EXPECT_EQ(plan.submit_nodes, (std::vector<int>{1, 1}));  // 1 held + 2 new = 3
  EXPECT_EQ(plan.held_back, 3);
}

TEST_F(SlurmPolicyTest, MaxPendingJobsBoundsSubmissions) {
  auto limits = Limits(1, 100);
  limits.max_pending_jobs = 2;
  SlurmPolicy policy(limits);
  SlurmPlan plan = policy.Plan({1, 1, 1, 1}, {}, {Job("1", 1, SlurmJobState::kPending)}, now_);
  // The pending job covers one trial; one more job may be pending.
  EXPECT_EQ(plan.submit_nodes, (std::vector<int>{1}));
}

TEST_F(SlurmPolicyTest, AGangIsNotStarvedBySmallerTrialsBehindIt) {
  SlurmPolicy policy(Limits(4, /*max_nodes=*/2));
  SlurmPlan plan = policy.Plan({8, 1}, {}, {Job("1", 1, SlurmJobState::kRunning, 1, 1)}, now_);
  EXPECT_TRUE(plan.submit_nodes.empty());  // the 2-node gang does not fit beside the held node
  EXPECT_EQ(plan.held_back, 3);
}

TEST_F(SlurmPolicyTest, TrialWiderThanMaxNodesIsUnplaceable) {
  SlurmPolicy policy(Limits(8, /*max_nodes=*/2));
  SlurmPlan plan = policy.Plan({32}, {}, {}, now_);
  EXPECT_TRUE(plan.submit_nodes.empty());
  EXPECT_EQ(plan.unplaceable, 1);
}

TEST_F(SlurmPolicyTest, IdleJobIsCancelledOnlyAfterTheGraceWithAnEmptyQueue) {
  SlurmPolicy policy(Limits(1));
  std::vector<SlurmJob> jobs{Job("5", 1, SlurmJobState::kRunning, 1, 0)};
  EXPECT_TRUE(policy.Plan({}, {1}, jobs, now_ + 59s).cancel.empty());
  EXPECT_EQ(policy.Plan({}, {1}, jobs, now_ + 60s).cancel, (std::vector<std::string>{"5"}));
  // Something waits: kept, whatever its idle time.
  EXPECT_TRUE(policy.Plan({1}, {1}, jobs, now_ + 600s).cancel.empty());
  // A busy job is never cancelled for idleness.
  jobs[0].busy_workers = 1;
  EXPECT_TRUE(policy.Plan({}, {0}, jobs, now_ + 600s).cancel.empty());
}

TEST_F(SlurmPolicyTest, PendingJobNobodyWaitsForIsCancelled) {
  SlurmPolicy policy(Limits(1));
  SlurmPlan plan = policy.Plan({}, {}, {Job("9", 1, SlurmJobState::kPending)}, now_ + 61s);
  EXPECT_EQ(plan.cancel, (std::vector<std::string>{"9"}));
}

TEST_F(SlurmPolicyTest, RunningJobWhoseWorkerNeverRegisteredIsCancelledAfterTheStartTimeout) {
  SlurmPolicy policy(Limits(1));
  std::vector<SlurmJob> jobs{Job("3", 1, SlurmJobState::kRunning, 0, 0)};
  EXPECT_TRUE(policy.Plan({1}, {}, jobs, now_ + 599s).cancel.empty());
  SlurmPlan plan = policy.Plan({1}, {}, jobs, now_ + 600s);
  EXPECT_EQ(plan.cancel, (std::vector<std::string>{"3"}));
}

}  // namespace
}  // namespace bakeoff::coordinator
